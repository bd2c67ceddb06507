//! The cost of GPM on the fast tier (issue 12 §5), on the simulator's
//! `h100x8` scenario (8 H100s with GPM, no simulated latency): two readers
//! side by side, GPM on and off (`sampler.gpm`), ticked alternately so that
//! drift hits both.
//!
//! Prints NVML calls per GPU per fast tick (counted by the simulator) and
//! CPU per GPU per fast tick (median, this thread's CPU time: the simulator
//! runs in-process, so its work is included in both), and their ratio
//! (target: GPM on within 20 % of off — see the note printed with it).
//!
//! Then the slow tier's cost of the NVLink data counters (fields 138/139,
//! two per link) that pre-Hopper GPUs get instead of GPM's NVLink figures:
//! they ride in the slow tier's existing link batch wherever GPM does not
//! give NVLink traffic — here in the GPM-off reader (18 links per H100: 36
//! more fields per GPU), not in the GPM-on one. Slow tier = a tick of every
//! tier minus a fast tick, per reader, medians.
//!
//! Run: `cargo bench --bench gpm` (add `-- --quick` for fewer rounds).

#[path = "common/mod.rs"]
mod common;

use common::{median, run_size, simulated, thread_cpu, tick_rounds};

use gpuwatch::sampler::procnames::ProcessNames;
use gpuwatch::sampler::reader::{NodeReader, Tiers};

fn main() {
    let (smoke, quick) = run_size();
    let rounds = tick_rounds(smoke, quick);
    let (_library, driver, counter) = simulated("builtin:h100x8");
    let names = || ProcessNames::new(None);
    let mut on = NodeReader::with_gpm(&driver, "bench".into(), names(), true);
    let mut off = NodeReader::with_gpm(&driver, "bench".into(), names(), false);
    let gpus = on.gpu_count() as f64;
    on.tick(Tiers::ALL, None);
    off.tick(Tiers::ALL, None);
    // The second tick allocates the second GPM sample buffer and learns
    // which metric ids answer: count calls from the third, the steady state.
    on.tick(Tiers::default(), None);
    off.tick(Tiers::default(), None);
    let calls = |reader: &mut NodeReader| {
        let before = counter.total();
        reader.tick(Tiers::default(), None);
        (counter.total() - before) as f64 / gpus
    };
    let (calls_on, calls_off) = (calls(&mut on), calls(&mut off));
    println!(
        "scenario h100x8: {gpus} GPUs, {rounds} rounds; NVML calls per GPU per fast tick: GPM on {calls_on:.1}, off {calls_off:.1}"
    );
    let (mut cpu_on, mut cpu_off) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (reader, out) in [(&mut on, &mut cpu_on), (&mut off, &mut cpu_off)] {
            let t0 = thread_cpu();
            reader.tick(Tiers::default(), None);
            out.push((thread_cpu() - t0).as_secs_f64() * 1e6 / gpus);
        }
    }
    let (on_us, off_us) = (median(&mut cpu_on), median(&mut cpu_off));
    println!(
        "fast tick CPU per GPU (median, simulator included): GPM on {on_us:.1} us, off {off_us:.1} us, ratio {:.2} (target <= 1.20)",
        on_us / off_us
    );
    let slow_rounds = (rounds / 10).max(5);
    let (mut all_on, mut all_off) = (Vec::new(), Vec::new());
    let (mut fast_on, mut fast_off) = (Vec::new(), Vec::new());
    for _ in 0..slow_rounds {
        for (reader, all, fast) in [
            (&mut on, &mut all_on, &mut fast_on),
            (&mut off, &mut all_off, &mut fast_off),
        ] {
            let t0 = thread_cpu();
            reader.tick(Tiers::ALL, None);
            all.push((thread_cpu() - t0).as_secs_f64() * 1e6 / gpus);
            let t0 = thread_cpu();
            reader.tick(Tiers::default(), None);
            fast.push((thread_cpu() - t0).as_secs_f64() * 1e6 / gpus);
        }
    }
    let slow_without = median(&mut all_on) - median(&mut fast_on);
    let slow_with = median(&mut all_off) - median(&mut fast_off);
    println!(
        "slow tier CPU per GPU (median full tick minus fast tick, {slow_rounds} rounds): without the NVLink data counters {slow_without:.1} us, with them (36 fields, no extra NVML call) {slow_with:.1} us: {:+.1} us per GPU per slow tick",
        slow_with - slow_without
    );
}
