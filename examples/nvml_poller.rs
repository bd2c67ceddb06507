//! A baseline for the agent's CPU benchmark: the least any NVML exporter
//! must do — the same 7 NVML calls per GPU as gpuwatch's fast tier, once a
//! second, and nothing else (no snapshot, no HTTP, no Xid thread).
//!
//! `scripts/bench_agent.py` runs it beside the agent on the same simulator
//! scenario and reports both CPU shares. Usage: `nvml_poller SIMULATOR_LIB`
//! (the scenario comes from `GPUWATCH_SIM_SCENARIO`). Runs until killed.

use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::Nvml;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let library = std::env::args_os()
        .nth(1)
        .ok_or("usage: nvml_poller PATH_TO_libnvml_sim.so")?;
    let nvml = Nvml::builder().lib_path(&library).init()?;
    let devices = (0..nvml.device_count()?)
        .map(|i| nvml.device_by_index(i))
        .collect::<Result<Vec<_>, _>>()?;
    let ids = |batch: &[u32]| batch.iter().copied().map(FieldId).collect::<Vec<_>>();
    let fields = ids(&gpuwatch::gpu::nvml::FAST_FIELD_IDS);
    let with_energy = ids(&gpuwatch::gpu::nvml::FAST_FIELD_IDS_WITH_ENERGY);
    let energy_every = gpuwatch::gpu::nvml::ENERGY_EVERY.as_secs().max(1);
    let mut next = Instant::now();
    for tick in 0u64.. {
        // The energy counter joins the batch every ENERGY_EVERY, as in the agent.
        let fields = if tick % energy_every == 0 {
            &with_energy
        } else {
            &fields
        };
        for d in &devices {
            std::hint::black_box((
                d.utilization_rates().ok(),
                d.memory_info().ok(),
                d.temperature(TemperatureSensor::Gpu).ok(),
                d.clock_info(Clock::SM).ok(),
                d.clock_info(Clock::Memory).ok(),
                d.current_throttle_reasons().ok(),
                d.field_values_for(fields).ok(),
            ));
        }
        next += Duration::from_secs(1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    Ok(())
}
