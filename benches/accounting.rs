//! Cost of workload accounting (issue 24 §2): 100 live workloads on 8 GPUs
//! of the NVML simulator (4 GPUs × 13 processes + 4 × 12, each process its
//! own workload), in one run:
//! - the agent's schedule (a 1 s tick, the process lists every 5 s, the
//!   slow tier every 30 s, clocks and GPM at the sampler's cadence): CPU
//!   per 30-tick cycle, without the accounting fold, with it, and without
//!   it again (the last shows the run-to-run noise), cycles alternated so
//!   drift hits all alike: medians per tick and their ratios;
//! - the fold's own CPU per tick (`Accounts::step` + the table the snapshot
//!   carries + dropping the previous one) on that schedule, and on a tick
//!   that read the process lists (where the fold regroups);
//! - every tier on every tick (`sampler.process_interval` = `interval`, the
//!   worst case: the fold regroups on every tick), without and with it;
//! - the fold with 0 workloads.
//!
//! Run: `cargo bench --bench accounting` (add `-- --quick` for fewer rounds).

#[path = "common/mod.rs"]
mod common;

use common::{median, run_size, simulated, thread_cpu};

use std::time::Duration;

use gpuwatch::gpu::Snapshot;
use gpuwatch::sampler::procnames::ProcessNames;
use gpuwatch::sampler::reader::{Cadence, NodeReader, Tiers};
use gpuwatch::workload::accounting::Accounts;

/// The agent's default schedule, in ticks of `sampler.interval` (1 s).
const PROCESS_EVERY: usize = 5;
const SLOW_EVERY: usize = 30;

/// 8 H100s with 100 long-lived processes in all.
fn scenario() -> String {
    let mut text = String::from("name = \"bench-accounting\"\nseed = 5\n");
    for gpu in 0..8 {
        let count = if gpu < 4 { 13 } else { 12 };
        text.push_str(&format!(
            "[[gpu]]\nname = \"NVIDIA H100 80GB HBM3\"\n[gpu.metrics]\nutilization_gpu = 70\npower_w = 500\n\
             [gpu.process_pool]\ncount = {count}\nmin_mib = 500\nmax_mib = 2500\nlifetime = \"1000h\"\nnames = [\"python3\"]\n"
        ));
    }
    text
}

/// CPU of one tick, µs: the whole tick and the fold's part of it.
#[derive(Default, Clone, Copy)]
struct Cost {
    tick: f64,
    fold: f64,
}

/// Ticks `reader` with `tiers`, folds into `accounts` when given, and
/// replaces `previous` (dropping the old snapshot is the sampler's cost too).
fn tick(
    reader: &mut NodeReader,
    tiers: Tiers,
    accounts: Option<&mut Accounts>,
    previous: &mut Snapshot,
) -> Cost {
    let start = thread_cpu();
    let mut snapshot = reader.tick(tiers, None);
    let folded = thread_cpu();
    if let Some(accounts) = accounts {
        accounts.step(&snapshot);
        snapshot.workloads = accounts.table().into();
    }
    drop(std::hint::black_box(std::mem::replace(previous, snapshot)));
    let end = thread_cpu();
    Cost {
        tick: micros(end - start),
        fold: micros(end - folded),
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One cycle of the agent's schedule: mean CPU per tick (whole, fold) and
/// the fold's CPU on the cycle's process ticks (mean), µs.
fn cycle(
    reader: &mut NodeReader,
    mut accounts: Option<&mut Accounts>,
    previous: &mut Snapshot,
) -> (Cost, f64) {
    let (mut sum, mut regroup) = (Cost::default(), 0.0);
    for n in 0..SLOW_EVERY {
        let tiers = Tiers {
            slow: n == 0,
            processes: n % PROCESS_EVERY == 0,
        };
        let cost = tick(reader, tiers, accounts.as_deref_mut(), previous);
        sum.tick += cost.tick;
        sum.fold += cost.fold;
        if tiers.processes {
            regroup += cost.fold;
        }
    }
    let ticks = SLOW_EVERY as f64;
    let mean = Cost {
        tick: sum.tick / ticks,
        fold: sum.fold / ticks,
    };
    (mean, regroup / (SLOW_EVERY / PROCESS_EVERY) as f64)
}

fn main() {
    let (smoke, quick) = run_size();
    let (cycles, rounds) = if smoke {
        (2, 10)
    } else if quick {
        (40, 200)
    } else {
        (300, 2000)
    };
    let data = tempfile::tempdir().expect("temp dir");
    let path = data.path().join("accounting.toml");
    std::fs::write(&path, scenario()).expect("scenario");
    let (_library, driver, _counter) = simulated(path.to_str().expect("utf-8 path"));
    let mut reader = NodeReader::new(&driver, "bench".into(), ProcessNames::new(None));
    reader.set_cadence(Cadence::for_interval(Duration::from_secs(1)));
    let mut accounts = Accounts::default();
    accounts.step(&reader.tick(Tiers::ALL, None));
    let mut snapshot = reader.tick(Tiers::ALL, None);
    accounts.step(&snapshot);
    let live = accounts.live().count();
    let processes: usize = snapshot.gpus.iter().map(|g| g.processes.len()).sum();
    assert_eq!(live, 100, "100 live workloads ({processes} processes)");
    println!("8 GPUs, {processes} processes, {live} live workloads; {cycles} cycles of {SLOW_EVERY} ticks, {rounds} all-tier rounds");

    // The agent's schedule: without, with, without again, alternated.
    let (mut without, mut with, mut again) = (Vec::new(), Vec::new(), Vec::new());
    let (mut fold, mut regroup) = (Vec::new(), Vec::new());
    for _ in 0..cycles {
        without.push(cycle(&mut reader, None, &mut snapshot).0.tick);
        let (cost, process_ticks) = cycle(&mut reader, Some(&mut accounts), &mut snapshot);
        with.push(cost.tick);
        fold.push(cost.fold);
        regroup.push(process_ticks);
        again.push(cycle(&mut reader, None, &mut snapshot).0.tick);
    }
    let (without, with, again) = (median(&mut without), median(&mut with), median(&mut again));
    let (fold, regroup) = (median(&mut fold), median(&mut regroup));
    println!("agent's schedule (1 s tick, processes every {PROCESS_EVERY}, slow every {SLOW_EVERY}), CPU per tick, median of {SLOW_EVERY}-tick cycles: without accounting {without:.1} us, with accounting on 100 workloads {with:.1} us, without again {again:.1} us; ratio with/without {:.3}, noise without-again/without {:.3}", with / without, again / without);
    println!("accounting fold on that schedule: {fold:.2} us per tick ({:.1} % of the tick), {regroup:.1} us on a tick that read the process lists", 100.0 * fold / with);

    // Every tier on every tick: the fold regroups each time.
    let (mut all_without, mut all_with, mut all_fold) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        all_without.push(tick(&mut reader, Tiers::ALL, None, &mut snapshot).tick);
        let cost = tick(&mut reader, Tiers::ALL, Some(&mut accounts), &mut snapshot);
        all_with.push(cost.tick);
        all_fold.push(cost.fold);
    }
    assert_eq!(snapshot.workloads.live.len(), 100, "still 100 live");
    let (all_without, all_with, all_fold) = (
        median(&mut all_without),
        median(&mut all_with),
        median(&mut all_fold),
    );
    println!("every tier on every tick, CPU median: without accounting {all_without:.0} us, with accounting {all_with:.0} us, ratio {:.3}; the fold {all_fold:.1} us", all_with / all_without);

    // The fold with nothing running: the same snapshot, processes removed.
    let mut idle = snapshot.clone();
    for gpu in &mut idle.gpus {
        gpu.processes = Default::default();
    }
    let mut empty = Accounts::default();
    let mut zero = Vec::new();
    for _ in 0..rounds {
        let start = thread_cpu();
        empty.step(&idle);
        idle.workloads = empty.table().into();
        zero.push(micros(thread_cpu() - start));
    }
    let zero = median(&mut zero);
    println!("accounting fold with 0 workloads: {zero:.1} us per tick");
}
