-- gpuwatch history, schema version 6: one row per workload (Slurm job, pod,
-- container, process) and start: who used which GPUs, and what they used.
-- Written when a workload is first seen, refreshed once a minute while it
-- runs (ended NULL), and once more when it ends.
CREATE TABLE workload (
    kind TEXT NOT NULL,                -- slurm_job, pod, container, process
    id TEXT NOT NULL,                  -- job id, namespace/pod, container id, pid
    started INTEGER NOT NULL,          -- ms, first seen on a GPU
    ended INTEGER,                     -- ms, last seen; NULL while running
    last_seen INTEGER NOT NULL,        -- ms
    user TEXT,
    account TEXT,                      -- Slurm
    partition TEXT,                    -- Slurm
    namespace TEXT,                    -- Kubernetes
    pod TEXT,                          -- Kubernetes
    command TEXT,                      -- the first process's name
    gpus TEXT NOT NULL,                -- GPU indexes, "3" or "3.1" (MIG), comma-separated
    gpu_seconds REAL NOT NULL,
    sm_active_seconds REAL NOT NULL,
    energy_joules REAL NOT NULL,
    peak_memory_bytes INTEGER NOT NULL,
    xid_errors INTEGER NOT NULL,
    throttle_seconds REAL NOT NULL,
    PRIMARY KEY (kind, id, started)
) WITHOUT ROWID;
CREATE INDEX workload_last_seen ON workload (last_seen);
