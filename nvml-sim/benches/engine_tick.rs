//! The engine's cost per tick on `h100x8` (8 H100s: random walks, GPM and
//! NVLink integrators), read the way the agent reads it: a fast tier every
//! scenario second (utilization, power, energy, one GPM window per GPU), a
//! slow tier every 10 s (violation counters, NVLink data and error
//! counters per link). Three patterns:
//!
//! - `steady`: one reader, consecutive GPM windows ([t-1, t], then [t, t+1]).
//! - `two readers`: a second reader's GPM window starts 10 s back (a sample
//!   held longer), so every tick reads behind the newest step.
//! - `cold start`: a fresh engine first read at t = 100 000 s (the walks and
//!   integrators step from 0), then 100 steady ticks.
//!
//! Prints the median µs per tick (per GPU) of each pattern. Compare builds by
//! running their binaries alternately (see the report of issue 26).
//! Run: `cargo bench -p nvml-sim --bench engine_tick` (`-- --quick`: fewer
//! rounds; `-- --steady`: the steady pattern alone, 20 000 ticks × 9).

use nvml_sim::{builtin, Engine, Scenario};
use std::hint::black_box;
use std::time::Instant;

fn engine() -> Engine {
    let text = builtin::get("h100x8").expect("the h100x8 scenario is built in");
    Engine::new(Scenario::parse(text, "builtin:h100x8").expect("h100x8 parses"))
}

/// One fast tick at `t` (and a slow one every 10th), GPM windows starting
/// `behind` seconds back for each of `readers` (0: the previous tick).
fn tick(engine: &Engine, n: u64, t: f64, behinds: &[f64]) {
    for gpu in (0..engine.gpu_count()).filter_map(|i| engine.gpu(i)) {
        black_box(gpu.utilization(t).ok());
        black_box(gpu.power_mw(t).ok());
        black_box(gpu.energy_mj(t).ok());
        for behind in behinds {
            black_box(gpu.gpm_window(None, t - behind, t).ok());
        }
        if n.is_multiple_of(10) {
            for link in 0..18 {
                black_box(gpu.nvlink_data_kib(link, true, t).ok());
                black_box(gpu.nvlink_data_kib(link, false, t).ok());
                black_box(gpu.nvlink_errors(link, 0, t).ok());
            }
        }
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Median µs per GPU per tick of `ticks` ticks from `start`.
fn run(ticks: u64, start: f64, behinds: &[f64]) -> f64 {
    let engine = engine();
    let gpus = engine.gpu_count() as f64;
    // Warm-up: the first tick steps the walks and integrators from t = 0.
    tick(&engine, 1, start, behinds);
    let mut per_tick = Vec::new();
    for n in 1..=ticks {
        let t = start + n as f64 + 0.37;
        let t0 = Instant::now();
        tick(&engine, n, t, behinds);
        per_tick.push(t0.elapsed().as_secs_f64() * 1e6 / gpus);
    }
    median(&mut per_tick)
}

fn main() {
    if std::env::args().any(|a| a == "--steady") {
        // The steady pattern alone, longer: its figure is a few µs, so
        // builds are compared by running this alternately.
        let mut steady: Vec<f64> = (0..9).map(|_| run(20_000, 5000.0, &[1.0])).collect();
        println!(
            "engine_tick h100x8 steady (20000 ticks × 9): {:.3} µs/GPU/tick (median)",
            median(&mut steady)
        );
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let (ticks, repeats) = if quick { (300, 3) } else { (2000, 7) };
    let mut steady = Vec::new();
    let mut two = Vec::new();
    let mut cold = Vec::new();
    for _ in 0..repeats {
        steady.push(run(ticks, 5000.0, &[1.0]));
        two.push(run(ticks, 5000.0, &[1.0, 10.0]));
        let t0 = Instant::now();
        let engine = engine();
        tick(&engine, 10, 100_000.37, &[1.0]);
        for n in 1..=100 {
            tick(&engine, n, 100_000.37 + n as f64, &[1.0]);
        }
        cold.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "engine_tick h100x8 ({ticks} ticks × {repeats}): steady {:.2} µs/GPU/tick, two readers {:.2} µs/GPU/tick, cold start at 100000 s + 100 ticks {:.1} ms (medians)",
        median(&mut steady),
        median(&mut two),
        median(&mut cold)
    );
}
