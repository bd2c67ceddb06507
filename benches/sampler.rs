//! Sampling and rendering cost, on the NVML simulator's `h100x8` scenario
//! (8 GPUs, ~80 processes, no simulated latency).
//!
//! Prints medians (and p99 for rendering):
//! - CPU per fast tick per GPU, for the agent's tick and for a baseline that
//!   makes the same NVML calls through nvml-wrapper directly; the difference
//!   is the agent's own CPU (the simulator runs in-process, so its work is in
//!   both and cancels out);
//! - NVML calls per GPU per fast tick (and per slow / process tick), counted
//!   by the simulator;
//! - /metrics render time (Prometheus text) for the 8-GPU snapshot.
//!
//! Run: `cargo bench --bench sampler` (add `-- --quick` for fewer rounds).

#[path = "common/mod.rs"]
mod common;

use common::{median, percentile, run_size, simulated, thread_cpu, tick_rounds};

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use gpuwatch::exporter::{Exporter, Format};
use gpuwatch::gpu::nvml::Driver;
use gpuwatch::sampler::procnames::ProcessNames;
use gpuwatch::sampler::reader::{Cadence, NodeReader, Tiers};
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::Nvml;

fn main() {
    let (smoke, quick) = run_size();
    let rounds = tick_rounds(smoke, quick);
    let (library, driver, counter) = simulated("builtin:h100x8");
    let mut reader = NodeReader::new(&driver, "bench".into(), ProcessNames::new(None));
    let gpus = reader.gpu_count() as f64;
    let full = reader.tick(Tiers::ALL, None);
    let processes: usize = full.gpus.iter().map(|g| g.processes.len()).sum();
    println!("scenario h100x8: {gpus} GPUs, {processes} processes, {rounds} rounds");

    // NVML calls per tier.
    let count_calls = |reader: &mut NodeReader, tiers: Tiers| {
        let before = counter.total();
        reader.tick(tiers, None);
        (counter.total() - before) as f64 / gpus
    };
    let fast_calls = count_calls(&mut reader, Tiers::default());
    let slow_calls = count_calls(
        &mut reader,
        Tiers {
            slow: true,
            processes: false,
        },
    );
    let process_calls = count_calls(
        &mut reader,
        Tiers {
            slow: false,
            processes: true,
        },
    );
    println!("NVML calls per GPU: fast tick {fast_calls:.1} (target <= 6), slow tier {slow_calls:.1}, process tier {process_calls:.1}");

    // The sampler's schedule at the default 1 s tick (clocks every 5 s,
    // GPM every 2 s, processes every 5 s, slow every 30 s) over 60 s, on a
    // reader of its own: calls per GPU per second, averaged over the tiers.
    {
        let mut lean = NodeReader::new(&driver, "bench".into(), ProcessNames::new(None));
        lean.set_cadence(Cadence::for_interval(Duration::from_secs(1)));
        lean.tick(Tiers::ALL, None);
        let before = counter.total();
        for second in 1..=60u64 {
            lean.tick(
                Tiers {
                    slow: second % 30 == 0,
                    processes: second % 5 == 0,
                },
                None,
            );
        }
        let per_second = (counter.total() - before) as f64 / gpus / 60.0;
        println!(
            "NVML calls per GPU per second at the sampler's 1 s schedule: {per_second:.2} \
             (target <= 8; the Xid thread's one wait a second for the node comes on top)"
        );
    }

    // Fast tick: agent vs raw NVML calls, interleaved so drift hits both.
    let nvml = Nvml::builder()
        .lib_path(library.as_os_str())
        .init()
        .expect("open the simulator through nvml-wrapper");
    let devices: Vec<_> = (0..gpus as u32)
        .map(|i| nvml.device_by_index(i).expect("device"))
        .collect();
    let fields: Vec<FieldId> = gpuwatch::gpu::nvml::FAST_FIELD_IDS
        .into_iter()
        .map(FieldId)
        .collect();
    let mut agent_cpu = Vec::with_capacity(rounds);
    let mut agent_wall = Vec::with_capacity(rounds);
    let mut raw_cpu = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (c0, w0) = (thread_cpu(), Instant::now());
        std::hint::black_box(reader.tick(Tiers::default(), None));
        agent_cpu.push((thread_cpu() - c0).as_secs_f64() * 1e6 / gpus);
        agent_wall.push(w0.elapsed().as_secs_f64() * 1e6 / gpus);
        let c0 = thread_cpu();
        for d in &devices {
            std::hint::black_box((
                d.utilization_rates().ok(),
                d.memory_info().ok(),
                d.temperature(TemperatureSensor::Gpu).ok(),
                d.clock_info(Clock::SM).ok(),
                d.clock_info(Clock::Memory).ok(),
                d.current_throttle_reasons().ok(),
                d.field_values_for(&fields).ok(),
            ));
        }
        raw_cpu.push((thread_cpu() - c0).as_secs_f64() * 1e6 / gpus);
    }
    let agent = median(&mut agent_cpu);
    let raw = median(&mut raw_cpu);
    println!(
        "fast tick CPU per GPU (median): agent {agent:.1} us, same NVML calls raw {raw:.1} us, agent's own {:.1} us (target <= 20 us); wall {:.1} us",
        agent - raw,
        median(&mut agent_wall)
    );

    // The same tick paced at the agent's rate: caches go cold between ticks.
    let paced_rounds = if smoke {
        2
    } else if quick {
        5
    } else {
        20
    };
    let mut paced = Vec::with_capacity(paced_rounds);
    let spin = std::env::var_os("SPIN").is_some();
    for _ in 0..paced_rounds {
        if spin {
            let t = Instant::now();
            while t.elapsed()
                < Duration::from_millis(
                    std::env::var("PAUSE_MS")
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(250),
                )
            {
                std::hint::spin_loop();
            }
        } else {
            std::thread::sleep(Duration::from_millis(250));
        }
        let c0 = thread_cpu();
        if std::env::var_os("RAW").is_some() {
            let t0 = Instant::now();
            std::hint::black_box(devices[0].utilization_rates().ok());
            let t1 = Instant::now();
            std::hint::black_box(devices[0].utilization_rates().ok());
            let t2 = Instant::now();
            std::hint::black_box(devices[1].memory_info().ok());
            eprintln!(
                "first call {:?}, second {:?}, third {:?}",
                t1 - t0,
                t2 - t1,
                t2.elapsed()
            );
        } else {
            std::hint::black_box(reader.tick(Tiers::default(), None));
        }
        paced.push((thread_cpu() - c0).as_secs_f64() * 1e6 / gpus);
    }
    println!(
        "fast tick CPU per GPU, one tick every 250 ms (median): {:.1} us",
        median(&mut paced)
    );

    // Rendering /metrics for the full snapshot.
    let (tx, rx) = tokio::sync::watch::channel(None);
    let mut snapshot = reader.tick(Tiers::ALL, None);
    snapshot.taken_at = SystemTime::now();
    tx.send_replace(Some(Arc::new(snapshot)));
    let exporter = Exporter::new(rx, Duration::from_secs(3600));
    let size = exporter.render(Format::Prometheus).expect("render").len();
    let mut render = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t0 = Instant::now();
        std::hint::black_box(exporter.render(Format::Prometheus).expect("render"));
        render.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    let p50 = percentile(&mut render, 0.5);
    let p99 = percentile(&mut render, 0.99);
    println!("/metrics render, 8 GPUs + {processes} processes, {size} bytes: p50 {p50:.0} us, p99 {p99:.0} us (target p99 <= 1000 us)");
    drop(exporter);
    drop(reader);
    drop(devices);
    drop(nvml);
    drop(driver);
    real_driver_latency(&library, if smoke { 2 } else { 7 });
}

/// The fast tick's wall time on the `h200` scenario, whose call latencies
/// were measured on a real H200 (driver 580): a tick that reads the energy
/// counter (once every ENERGY_EVERY; each new reader's first tick) against
/// one that does not.
fn real_driver_latency(library: &std::path::Path, samples: usize) {
    std::env::set_var(nvml_sim::ENV_SCENARIO, "builtin:h200");
    let driver = Driver::open(Some(library)).expect("open the simulator on h200");
    let (mut with_energy, mut without) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        let mut reader = NodeReader::new(&driver, "bench".into(), ProcessNames::new(None));
        let t0 = Instant::now();
        std::hint::black_box(reader.tick(Tiers::default(), None));
        with_energy.push(t0.elapsed().as_secs_f64() * 1e3);
        let t0 = Instant::now();
        std::hint::black_box(reader.tick(Tiers::default(), None));
        without.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let (w, wo) = (median(&mut with_energy), median(&mut without));
    let every = gpuwatch::gpu::nvml::ENERGY_EVERY.as_secs_f64();
    println!(
        "fast tick wall per GPU with a real H200's latencies (h200 scenario, median of {samples}): \
         with the energy read {w:.2} ms, without {wo:.2} ms; mean at 1 Hz {:.2} ms (energy every {every:.0} s) vs {w:.2} ms reading it every tick",
        (w + (every - 1.0) * wo) / every
    );
}
