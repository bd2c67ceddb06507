-- gpuwatch history, schema version 1. Never edit a migration that has
-- shipped: add a new one.
--
-- Values are integer-scaled (see src/history/catalog.rs for each column's
-- unit and scale) so SQLite stores most of them in one or two bytes; NULL
-- means "not available", never zero. Sample tables are keyed (ts, gpu)
-- WITHOUT ROWID: time-ordered appends fill pages completely, and pruning the
-- oldest rows deletes a contiguous range.

-- One row per physical GPU (by UUID); `id` keys every other table.
CREATE TABLE gpu (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    last_index INTEGER NOT NULL,
    name TEXT,
    first_seen_ms INTEGER NOT NULL,
    last_seen_ms INTEGER NOT NULL
);

-- Raw tier: one row per GPU per sample.
CREATE TABLE sample (
    ts INTEGER NOT NULL,            -- ms since the Unix epoch
    gpu INTEGER NOT NULL,
    up INTEGER NOT NULL,            -- 1 answered, 0 lost
    util_gpu INTEGER,               -- %
    util_mem INTEGER,               -- %
    mem_used INTEGER,               -- MiB
    mem_total INTEGER,              -- MiB
    temp_gpu INTEGER,               -- °C
    temp_mem INTEGER,               -- °C
    power INTEGER,                  -- dW
    energy INTEGER,                 -- J, monotonic across restarts
    sm_clock INTEGER,               -- MHz
    mem_clock INTEGER,              -- MHz
    clock_events INTEGER,           -- NVML clock-event reason bits
    thr_power_cap INTEGER,          -- ms in SW power cap, monotonic
    thr_sync_boost INTEGER,         -- ms in sync boost, monotonic
    thr_sw_thermal INTEGER,         -- ms in SW thermal slowdown, monotonic
    thr_hw_thermal INTEGER,         -- ms in HW thermal slowdown, monotonic
    thr_power_brake INTEGER,        -- ms in HW power brake, monotonic
    pstate INTEGER,                 -- 0..15
    fan INTEGER,                    -- % of fan 0
    pcie_gen INTEGER,
    pcie_width INTEGER,
    ecc_corrected INTEGER,          -- aggregate count, monotonic
    ecc_uncorrected INTEGER,        -- aggregate count, monotonic
    PRIMARY KEY (ts, gpu)
) WITHOUT ROWID;

-- Rollups: per GPU per minute (rollup_1m) and per hour (rollup_1h). `n` is
-- the number of raw samples folded in; gauges keep min/max/avg/last,
-- counters and states keep last, clock_events ORs the bits seen.
CREATE TABLE rollup_1m (
    ts INTEGER NOT NULL,            -- start of the minute, ms
    gpu INTEGER NOT NULL,
    n INTEGER NOT NULL,
    up_n INTEGER NOT NULL,          -- samples with up = 1
    util_gpu_min INTEGER, util_gpu_max INTEGER, util_gpu_avg REAL, util_gpu_last INTEGER,
    util_mem_min INTEGER, util_mem_max INTEGER, util_mem_avg REAL, util_mem_last INTEGER,
    mem_used_min INTEGER, mem_used_max INTEGER, mem_used_avg REAL, mem_used_last INTEGER,
    temp_gpu_min INTEGER, temp_gpu_max INTEGER, temp_gpu_avg REAL, temp_gpu_last INTEGER,
    temp_mem_min INTEGER, temp_mem_max INTEGER, temp_mem_avg REAL, temp_mem_last INTEGER,
    power_min INTEGER, power_max INTEGER, power_avg REAL, power_last INTEGER,
    sm_clock_min INTEGER, sm_clock_max INTEGER, sm_clock_avg REAL, sm_clock_last INTEGER,
    mem_clock_min INTEGER, mem_clock_max INTEGER, mem_clock_avg REAL, mem_clock_last INTEGER,
    fan_min INTEGER, fan_max INTEGER, fan_avg REAL, fan_last INTEGER,
    mem_total_last INTEGER,
    energy_last INTEGER,
    clock_events_any INTEGER,
    thr_power_cap_last INTEGER, thr_sync_boost_last INTEGER, thr_sw_thermal_last INTEGER,
    thr_hw_thermal_last INTEGER, thr_power_brake_last INTEGER,
    pstate_last INTEGER, pcie_gen_last INTEGER, pcie_width_last INTEGER,
    ecc_corrected_last INTEGER, ecc_uncorrected_last INTEGER,
    PRIMARY KEY (ts, gpu)
) WITHOUT ROWID;

CREATE TABLE rollup_1h (
    ts INTEGER NOT NULL,            -- start of the hour, ms
    gpu INTEGER NOT NULL,
    n INTEGER NOT NULL,
    up_n INTEGER NOT NULL,          -- samples with up = 1
    util_gpu_min INTEGER, util_gpu_max INTEGER, util_gpu_avg REAL, util_gpu_last INTEGER,
    util_mem_min INTEGER, util_mem_max INTEGER, util_mem_avg REAL, util_mem_last INTEGER,
    mem_used_min INTEGER, mem_used_max INTEGER, mem_used_avg REAL, mem_used_last INTEGER,
    temp_gpu_min INTEGER, temp_gpu_max INTEGER, temp_gpu_avg REAL, temp_gpu_last INTEGER,
    temp_mem_min INTEGER, temp_mem_max INTEGER, temp_mem_avg REAL, temp_mem_last INTEGER,
    power_min INTEGER, power_max INTEGER, power_avg REAL, power_last INTEGER,
    sm_clock_min INTEGER, sm_clock_max INTEGER, sm_clock_avg REAL, sm_clock_last INTEGER,
    mem_clock_min INTEGER, mem_clock_max INTEGER, mem_clock_avg REAL, mem_clock_last INTEGER,
    fan_min INTEGER, fan_max INTEGER, fan_avg REAL, fan_last INTEGER,
    mem_total_last INTEGER,
    energy_last INTEGER,
    clock_events_any INTEGER,
    thr_power_cap_last INTEGER, thr_sync_boost_last INTEGER, thr_sw_thermal_last INTEGER,
    thr_hw_thermal_last INTEGER, thr_power_brake_last INTEGER,
    pstate_last INTEGER, pcie_gen_last INTEGER, pcie_width_last INTEGER,
    ecc_corrected_last INTEGER, ecc_uncorrected_last INTEGER,
    PRIMARY KEY (ts, gpu)
) WITHOUT ROWID;

-- Things that happen: Xid errors, GPU lost / recovered, processes starting
-- and stopping (with their peak memory), agent starts; later, alert
-- transitions.
CREATE TABLE event (
    id INTEGER PRIMARY KEY,
    ts INTEGER NOT NULL,            -- ms
    gpu INTEGER,                    -- NULL for node-wide events
    kind TEXT NOT NULL,             -- xid, gpu_lost, gpu_recovered, process_start, process_stop, agent_start
    code INTEGER,                   -- Xid code, or pid
    value INTEGER,                  -- Xid count in this sample, or peak memory MiB
    detail TEXT                     -- process name, loss reason, ...
);
CREATE INDEX event_ts ON event (ts);

-- Where counters that the driver resets (energy, ECC, throttle time) stand,
-- so stored values stay monotonic across driver reloads and agent restarts.
CREATE TABLE counter_state (
    gpu INTEGER NOT NULL,
    counter TEXT NOT NULL,
    last_raw REAL NOT NULL,
    offset REAL NOT NULL,
    PRIMARY KEY (gpu, counter)
) WITHOUT ROWID;
