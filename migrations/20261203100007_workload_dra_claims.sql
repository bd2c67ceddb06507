-- gpuwatch history: a pod's DRA resource claims on its workload row, as a
-- JSON array of {namespace, name, driver, pool, device}; NULL without DRA.
ALTER TABLE workload ADD COLUMN dra_claims TEXT;
