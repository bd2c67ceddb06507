//! Cost of workload accounting (issue 24 §2): 100 live workloads on 8 GPUs
//! of the NVML simulator (4 GPUs × 13 processes + 4 × 12, each process its
//! own workload), in one run:
//! - CPU per sampler tick (every tier, as the session's tick) without the
//!   accounting fold, and with it (`Accounts::step` + the table the snapshot
//!   carries): medians and their ratio;
//! - the fold's own CPU per tick (median), and the same with 0 workloads.
//!
//! Run: `cargo bench --bench accounting` (add `-- --quick` for fewer rounds).

#[path = "common/mod.rs"]
mod common;

use common::{median, run_size, simulated, thread_cpu};

use std::sync::Arc;

use gpuwatch::sampler::procnames::ProcessNames;
use gpuwatch::sampler::reader::{NodeReader, Tiers};
use gpuwatch::workload::accounting::Accounts;

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

fn main() {
    let (smoke, quick) = run_size();
    let rounds = if smoke {
        10
    } else if quick {
        200
    } else {
        2000
    };
    let data = tempfile::tempdir().expect("temp dir");
    let path = data.path().join("accounting.toml");
    std::fs::write(&path, scenario()).expect("scenario");
    let (_library, driver, _counter) = simulated(path.to_str().expect("utf-8 path"));
    let mut reader = NodeReader::new(&driver, "bench".into(), ProcessNames::new(None));
    let mut accounts = Accounts::default();
    accounts.step(&reader.tick(Tiers::ALL, None));
    let mut snapshot = reader.tick(Tiers::ALL, None);
    accounts.step(&snapshot);
    let live = accounts.live().count();
    let processes: usize = snapshot.gpus.iter().map(|g| g.processes.len()).sum();
    assert_eq!(live, 100, "100 live workloads ({processes} processes)");
    println!("8 GPUs, {processes} processes, {live} live workloads, {rounds} rounds");

    // Alternate the two variants so drift hits both alike.
    let (mut without, mut with, mut fold) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let start = thread_cpu();
        let unaccounted = reader.tick(Tiers::ALL, None);
        without.push((thread_cpu() - start).as_secs_f64() * 1e6);
        drop(std::hint::black_box(unaccounted));

        let start = thread_cpu();
        snapshot = reader.tick(Tiers::ALL, None);
        let folded = thread_cpu();
        accounts.step(&snapshot);
        snapshot.workloads = Arc::new(accounts.table());
        let end = thread_cpu();
        with.push((end - start).as_secs_f64() * 1e6);
        fold.push((end - folded).as_secs_f64() * 1e6);
    }
    assert_eq!(snapshot.workloads.live.len(), 100, "still 100 live");
    let (without, with, fold) = (median(&mut without), median(&mut with), median(&mut fold));

    // The fold with nothing running: the same snapshot, processes removed.
    let mut idle = snapshot.clone();
    for gpu in &mut idle.gpus {
        gpu.processes = Arc::default();
    }
    let mut empty = Accounts::default();
    let mut zero = Vec::new();
    for _ in 0..rounds {
        let start = thread_cpu();
        empty.step(&idle);
        idle.workloads = Arc::new(empty.table());
        zero.push((thread_cpu() - start).as_secs_f64() * 1e6);
    }
    let zero = median(&mut zero);
    println!("sampler tick (all tiers), CPU median: without accounting {without:.0} us, with accounting on 100 workloads {with:.0} us, ratio {:.3}", with / without);
    println!("accounting fold alone, CPU median per tick: {fold:.1} us with 100 workloads, {zero:.1} us with 0 ({:.1} % of the tick)", 100.0 * fold / with);
}
