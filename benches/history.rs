//! History storage and query cost for 8 GPUs at 1 Hz, with an injected
//! clock (synthetic snapshots with realistic, varying readings), so a day and
//! a month are generated in seconds rather than waited for.
//!
//! Prints:
//! - bytes on disk per GPU-day, raw tier and each rollup tier;
//! - bytes written per day (WAL and checkpoints included: the `wchar` of
//!   /proc/self/io, i.e. every byte SQLite handed to write());
//! - CPU spent on history per simulated second (recorder + commits), as a
//!   share of one core at 1 Hz;
//! - prune throughput against ingest throughput;
//! - query latency (p50, p99) for 24 h at a 1-minute step and 30 days at a
//!   1-hour step.
//!
//! Run: `cargo bench --bench history` (add `-- --quick` for a shorter run).

#[path = "common/mod.rs"]
mod common;

use common::{percentile, run_size};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use gpuwatch::gpu::{
    CollectionStats, EccCounters, FastReadings, GpuIdentity, GpuProcess, GpuSnapshot, GpuStatus,
    MemoryReading, ProcessKind, SlowReadings, Snapshot, SystemInfo,
};
use gpuwatch::history::query::{self, GpuSelector};
use gpuwatch::history::recorder::{Batch, Recorder};
use gpuwatch::history::{catalog, retention, sql, Durability, Retention, Store};

const GPUS: u32 = 8;
const DAY: u64 = 86_400;

/// A tiny deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Readings that move like a busy node's: utilization random-walks, power
/// and temperature follow it with noise, memory drifts, energy accumulates.
struct Node {
    rng: Rng,
    util: Vec<f64>,
    energy: Vec<f64>,
    processes: Vec<Arc<Vec<GpuProcess>>>,
}

impl Node {
    fn new() -> Self {
        let processes = (0..GPUS)
            .map(|g| {
                Arc::new(
                    (0..10)
                        .map(|p| GpuProcess {
                            pid: 10_000 + g * 100 + p,
                            name: Some("python3".into()),
                            kind: ProcessKind::Compute,
                            used_memory_bytes: Some(6 << 30),
                            ..GpuProcess::default()
                        })
                        .collect(),
                )
            })
            .collect();
        Node {
            rng: Rng(42),
            util: vec![50.0; GPUS as usize],
            energy: vec![1e6; GPUS as usize],
            processes,
        }
    }

    fn snapshot(&mut self, t: u64) -> Snapshot {
        let gpus = (0..GPUS as usize)
            .map(|g| {
                let step = (self.rng.next() - 0.5) * 10.0;
                self.util[g] = (self.util[g] + step).clamp(0.0, 100.0);
                let util = self.util[g].round();
                let power = 100.0 + util * 5.5 + (self.rng.next() - 0.5) * 20.0;
                self.energy[g] += power;
                let temp = (35.0 + power / 700.0 * 45.0 + (self.rng.next() - 0.5) * 2.0).round();
                let used = (60u64 << 30) + (self.rng.next() * (4u64 << 30) as f64) as u64;
                GpuSnapshot {
                    identity: Arc::new(GpuIdentity {
                        name: Some("NVIDIA H100 80GB HBM3".into()),
                        ..GpuIdentity::default()
                    }),
                    readings: FastReadings {
                        utilization_gpu_ratio: Some(util / 100.0),
                        utilization_memory_ratio: Some((util / 2.0).round() / 100.0),
                        memory: Some(MemoryReading {
                            total_bytes: 81559 << 20,
                            used_bytes: used,
                            free_bytes: (81559u64 << 20) - used,
                            reserved_bytes: 512 << 20,
                        }),
                        temperature_gpu_celsius: Some(temp),
                        temperature_memory_celsius: Some(temp + 4.0),
                        power_watts: Some((power * 10.0).round() / 10.0),
                        energy_joules: Some(self.energy[g].round()),
                        sm_clock_hertz: Some(if util > 90.0 { 1830e6 } else { 1980e6 }),
                        memory_clock_hertz: Some(2619e6),
                        graphics_clock_hertz: Some(if util > 90.0 { 1830e6 } else { 1980e6 }),
                        video_clock_hertz: Some(1755e6),
                        clock_event_reasons: Some(if util > 90.0 { 0x4 } else { 0 }),
                        clock_event_seconds: BTreeMap::new(),
                    },
                    health: Arc::new(SlowReadings {
                        performance_state: Some(0),
                        pcie_link_gen: Some(5),
                        pcie_link_width: Some(16),
                        ecc_enabled: Some(true),
                        ecc: EccCounters {
                            corrected_aggregate: Some(0),
                            uncorrected_aggregate: Some(0),
                            ..EccCounters::default()
                        },
                        ..SlowReadings::default()
                    }),
                    processes: self.processes[g].clone(),
                    ..GpuSnapshot::bare(g as u32, format!("GPU-bench-{g}"), GpuStatus::Up)
                }
            })
            .collect();
        Snapshot {
            taken_at: UNIX_EPOCH + Duration::from_secs(t),
            hostname: "bench".into(),
            system: Arc::new(SystemInfo::default()),
            gpus,
            workloads: Default::default(),
            collection: CollectionStats::default(),
            kubelet: None,
        }
    }
}

fn wchar() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("wchar: ")
                    .and_then(|v| v.trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

fn process_cpu() -> Duration {
    let mut usage = libc::rusage {
        ru_utime: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        ru_stime: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        // SAFETY: rusage is plain data; zeroed is a valid value.
        ..unsafe { std::mem::zeroed() }
    };
    // SAFETY: getrusage fills the struct through a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

async fn table_bytes(store: &Store) -> BTreeMap<String, u64> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")
            .fetch_all(&store.pool)
            .await
            .expect("dbstat (the bundled SQLite is built with SQLITE_ENABLE_DBSTAT_VTAB)");
    rows.into_iter()
        .map(|(n, b)| (n, b.max(0) as u64))
        .collect()
}

/// Feeds `seconds` of snapshots from `start`, committing every 10 s like the
/// agent's default; `raw` false keeps raw samples out (month of rollups).
async fn ingest(
    store: &Store,
    node: &mut Node,
    recorder: &mut Recorder,
    start: u64,
    seconds: u64,
    raw: bool,
) {
    for s in 0..seconds {
        recorder.record(&node.snapshot(start + s));
        if (s + 1) % 10 == 0 {
            let mut batch: Batch = recorder.take_batch();
            if !raw {
                batch.samples.clear();
            }
            sql::commit(&store.pool, &batch).await.expect("commit");
        }
    }
    let mut batch = recorder.take_final_batch();
    if !raw {
        batch.samples.clear();
    }
    sql::commit(&store.pool, &batch).await.expect("commit");
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let (smoke, quick) = run_size();
    let raw_seconds: u64 = if smoke {
        4 * 3600
    } else if quick {
        DAY
    } else {
        2 * DAY
    };
    let month_days: u64 = if smoke {
        1
    } else if quick {
        7
    } else {
        30
    };
    let days_raw = raw_seconds as f64 / DAY as f64;
    let dir = tempfile::tempdir().expect("temp dir");
    let start = 1_800_000_000 - 1_800_000_000 % DAY;

    // 1. Raw tier: `days_raw` days at 1 Hz, as the agent writes them.
    let store = Store::open_for_writing(&dir.path().join("raw.db"), Durability::Normal)
        .await
        .expect("open");
    let mut node = Node::new();
    let mut recorder = Recorder::new(vec![], vec![]);
    let (w0, c0, t0) = (wchar(), process_cpu(), Instant::now());
    ingest(&store, &mut node, &mut recorder, start, raw_seconds, true).await;
    let (written, cpu, wall) = (wchar() - w0, process_cpu() - c0, t0.elapsed());
    let sizes = table_bytes(&store).await;
    let gpu_days = GPUS as f64 * days_raw;
    let mb = |b: f64| b / 1e6;
    println!(
        "{days_raw:.2} day(s) of raw samples, {GPUS} GPUs at 1 Hz ({} rows), ingested in {:.1} s",
        GPUS as u64 * raw_seconds,
        wall.as_secs_f64()
    );
    println!(
        "raw tier on disk: {:.2} MB per GPU-day (target <= 6 MB)",
        mb(sizes.get("sample").copied().unwrap_or(0) as f64 / gpu_days)
    );
    println!(
        "written to disk per day, WAL and checkpoints included: {:.0} MB for {GPUS} GPUs (target <= 300 MB)",
        mb(written as f64 / days_raw)
    );
    let cpu_per_second = cpu.as_secs_f64() / raw_seconds as f64;
    println!(
        "history CPU at 1 Hz: {:.1} us per simulated second = {:.4} % of one core (target <= 0.1 %; measured hot, back to back)",
        cpu_per_second * 1e6,
        cpu_per_second * 100.0
    );

    // 2. Prune throughput against ingest: delete the older half.
    let ingest_rate = (GPUS as u64 * raw_seconds) as f64 / wall.as_secs_f64();
    let now_ms = ((start + raw_seconds) * 1000) as i64;
    let keep_half = Retention {
        raw: Duration::from_secs(raw_seconds / 2),
        ..Retention::default()
    };
    let t1 = Instant::now();
    let pruned = retention::prune(&store.pool, keep_half, None, now_ms)
        .await
        .expect("prune");
    let prune_rate = pruned as f64 / t1.elapsed().as_secs_f64();
    println!(
        "prune: {pruned} rows in {:.2} s = {:.0} rows/s vs ingest {:.0} rows/s: {:.0}x (target >= 10x)",
        t1.elapsed().as_secs_f64(),
        prune_rate,
        ingest_rate,
        prune_rate / ingest_rate
    );

    // 3. A month of rollups (raw samples not stored), for tier sizes and
    // long-range queries.
    let month = Store::open_for_writing(&dir.path().join("month.db"), Durability::Normal)
        .await
        .expect("open");
    let mut node = Node::new();
    let mut recorder = Recorder::new(vec![], vec![]);
    let t2 = Instant::now();
    ingest(
        &month,
        &mut node,
        &mut recorder,
        start,
        month_days * DAY,
        false,
    )
    .await;
    let sizes = table_bytes(&month).await;
    let gpu_days = (GPUS as u64 * month_days) as f64;
    println!(
        "{month_days} days of rollups generated in {:.1} s",
        t2.elapsed().as_secs_f64()
    );
    for (tier, table) in [("1-minute", "rollup_1m"), ("1-hour", "rollup_1h")] {
        println!(
            "{tier} tier on disk: {:.3} MB per GPU-day (target <= 1 MB)",
            mb(sizes.get(table).copied().unwrap_or(0) as f64 / gpu_days)
        );
    }

    // 4. Query latency.
    let temperature = catalog::field("temperature").expect("field");
    let gpu: GpuSelector = "3".parse().expect("gpu");
    let end_ms = ((start + month_days * DAY) * 1000) as i64;
    for (label, span_days, step) in [("24 h at 1 m", 1, 60), ("30 d at 1 h", month_days, 3600)] {
        let mut took = Vec::new();
        let mut points = 0;
        for _ in 0..50 {
            let t = Instant::now();
            let series = query::series(
                &month.pool,
                &gpu,
                temperature,
                end_ms - (span_days * DAY * 1000) as i64,
                end_ms,
                Some(Duration::from_secs(step)),
                Retention::default(),
                end_ms,
            )
            .await
            .expect("query");
            took.push(t.elapsed().as_secs_f64() * 1000.0);
            points = series.points.len();
        }
        println!(
            "query {label} ({points} points): p50 {:.2} ms, p99 {:.2} ms (target p50 <= 20 ms)",
            percentile(&mut took, 0.5),
            percentile(&mut took, 0.99)
        );
    }
}
