-- gpuwatch history, schema version 5: GPM figures (Hopper and newer) per
-- GPU in every tier. NULL where the GPU has no GPM, on the first sample
-- after a start, and in every row written before this schema.
-- Stored in tenths of a percent (see src/history/catalog.rs).

ALTER TABLE sample ADD COLUMN sm_active INTEGER;       -- ‰ of time an SM had a warp
ALTER TABLE sample ADD COLUMN sm_occupancy INTEGER;    -- ‰ of the maximum resident warps
ALTER TABLE sample ADD COLUMN tensor_active INTEGER;   -- ‰ of time a tensor pipe was active
ALTER TABLE sample ADD COLUMN dram_active INTEGER;     -- ‰ of the peak DRAM bandwidth

ALTER TABLE rollup_1m ADD COLUMN sm_active_min INTEGER;
ALTER TABLE rollup_1m ADD COLUMN sm_active_max INTEGER;
ALTER TABLE rollup_1m ADD COLUMN sm_active_avg REAL;
ALTER TABLE rollup_1m ADD COLUMN sm_active_last INTEGER;
ALTER TABLE rollup_1m ADD COLUMN sm_occupancy_min INTEGER;
ALTER TABLE rollup_1m ADD COLUMN sm_occupancy_max INTEGER;
ALTER TABLE rollup_1m ADD COLUMN sm_occupancy_avg REAL;
ALTER TABLE rollup_1m ADD COLUMN sm_occupancy_last INTEGER;
ALTER TABLE rollup_1m ADD COLUMN tensor_active_min INTEGER;
ALTER TABLE rollup_1m ADD COLUMN tensor_active_max INTEGER;
ALTER TABLE rollup_1m ADD COLUMN tensor_active_avg REAL;
ALTER TABLE rollup_1m ADD COLUMN tensor_active_last INTEGER;
ALTER TABLE rollup_1m ADD COLUMN dram_active_min INTEGER;
ALTER TABLE rollup_1m ADD COLUMN dram_active_max INTEGER;
ALTER TABLE rollup_1m ADD COLUMN dram_active_avg REAL;
ALTER TABLE rollup_1m ADD COLUMN dram_active_last INTEGER;

ALTER TABLE rollup_1h ADD COLUMN sm_active_min INTEGER;
ALTER TABLE rollup_1h ADD COLUMN sm_active_max INTEGER;
ALTER TABLE rollup_1h ADD COLUMN sm_active_avg REAL;
ALTER TABLE rollup_1h ADD COLUMN sm_active_last INTEGER;
ALTER TABLE rollup_1h ADD COLUMN sm_occupancy_min INTEGER;
ALTER TABLE rollup_1h ADD COLUMN sm_occupancy_max INTEGER;
ALTER TABLE rollup_1h ADD COLUMN sm_occupancy_avg REAL;
ALTER TABLE rollup_1h ADD COLUMN sm_occupancy_last INTEGER;
ALTER TABLE rollup_1h ADD COLUMN tensor_active_min INTEGER;
ALTER TABLE rollup_1h ADD COLUMN tensor_active_max INTEGER;
ALTER TABLE rollup_1h ADD COLUMN tensor_active_avg REAL;
ALTER TABLE rollup_1h ADD COLUMN tensor_active_last INTEGER;
ALTER TABLE rollup_1h ADD COLUMN dram_active_min INTEGER;
ALTER TABLE rollup_1h ADD COLUMN dram_active_max INTEGER;
ALTER TABLE rollup_1h ADD COLUMN dram_active_avg REAL;
ALTER TABLE rollup_1h ADD COLUMN dram_active_last INTEGER;
