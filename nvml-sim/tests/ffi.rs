//! Drives the built cdylib through nvml-wrapper, exactly as the agent does.
//! One test function: the scenario is chosen by env var at init, so the
//! scenarios run sequentially with shutdown/init in between.

mod common;

use common::{library, open};

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, TemperatureSensor, TemperatureThreshold,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;

fn golden() {
    let nvml = open("builtin:golden", Some("10")).expect("init golden");
    assert_eq!(nvml.sys_driver_version().expect("driver"), "550.54.15");
    assert_eq!(nvml.sys_cuda_driver_version().expect("cuda"), 12040);
    assert_eq!(nvml.device_count().expect("count"), 2);
    let d0 = nvml.device_by_index(0).expect("gpu 0");
    assert_eq!(d0.name().expect("name"), "NVIDIA A100-SXM4-40GB");
    assert_eq!(
        d0.uuid().expect("uuid"),
        "GPU-00000000-0000-4000-8000-000000000000"
    );
    assert_eq!(d0.index().expect("index"), 0);
    let same = nvml
        .device_by_uuid("GPU-11111111-1111-4111-8111-111111111111")
        .expect("by uuid");
    assert_eq!(same.index().expect("index"), 1);
    assert_eq!(d0.pci_info().expect("pci").bus_id, "00000000:07:00.0");
    let mem = d0.memory_info().expect("memory");
    assert_eq!(mem.total, 40960 << 20);
    assert_eq!(mem.reserved, 512 << 20);
    assert_eq!(mem.used, 10240 << 20);
    assert_eq!(mem.free, (40960 - 512 - 10240) << 20);
    let util = d0.utilization_rates().expect("util");
    assert_eq!((util.gpu, util.memory), (75, 40));
    assert_eq!(d0.temperature(TemperatureSensor::Gpu).expect("temp"), 60);
    assert_eq!(
        d0.temperature_threshold(TemperatureThreshold::Slowdown)
            .expect("slowdown"),
        90
    );
    assert_eq!(
        d0.temperature_threshold(TemperatureThreshold::Shutdown)
            .expect("shutdown"),
        95
    );
    assert_eq!(d0.power_usage().expect("power"), 250_000);
    assert_eq!(d0.enforced_power_limit().expect("limit"), 400_000);
    assert_eq!(d0.total_energy_consumption().expect("energy"), 2_500_000);
    assert_eq!(d0.clock_info(Clock::SM).expect("sm"), 1410);
    assert_eq!(d0.max_clock_info(Clock::Memory).expect("mem max"), 1215);
    assert_eq!(d0.current_throttle_reasons().expect("reasons").bits(), 0);
    assert!(matches!(d0.fan_speed(0), Err(NvmlError::NotSupported)));
    assert_eq!(
        d0.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
            .expect("ecc"),
        0
    );

    let fields = d0
        .field_values_for(&[
            FieldId(82),
            FieldId(83),
            FieldId(186),
            FieldId(4),
            FieldId(9999),
        ])
        .expect("fields");
    assert_eq!(fields.len(), 5);
    let value = |i: usize| format!("{:?}", fields[i].as_ref().expect("field ok").value);
    assert!(value(0).contains("65"), "{}", value(0));
    assert!(value(1).contains("2500000"), "{}", value(1));
    assert!(value(2).contains("250000"), "{}", value(2));
    assert!(matches!(
        fields[4].as_ref().map(|s| &s.value),
        Ok(Err(NvmlError::NotSupported))
    ));

    let procs = d0.running_compute_processes().expect("procs");
    assert_eq!(procs.len(), 1);
    assert_eq!(procs[0].pid, 4242);
    assert_eq!(procs[0].used_gpu_memory, UsedGpuMemory::Used(10240 << 20));
    assert_eq!(nvml.sys_process_name(4242, 64).expect("name"), "python3");
    assert!(matches!(
        nvml.sys_process_name(1, 64),
        Err(NvmlError::NotFound)
    ));
    let d1 = nvml.device_by_index(1).expect("gpu 1");
    assert_eq!(d1.running_graphics_processes().expect("gfx").len(), 1);
    assert_eq!(d1.running_compute_processes().expect("none").len(), 0);
    assert!(matches!(d1.is_ecc_enabled(), Err(NvmlError::NotSupported)));
    assert_eq!(d1.fan_speed(0).expect("fan"), 45);

    // Xid 13 at t = 5 s is delivered once.
    let set = nvml.create_event_set().expect("set");
    let set = d0
        .register_events(EventTypes::CRITICAL_XID_ERROR, set)
        .expect("register");
    let event = set.wait(100).expect("xid event");
    assert_eq!(event.event_data, Some(XidError::Value(13)));
    assert!(matches!(set.wait(50), Err(NvmlError::Timeout)));

    // Call counting.
    let count = unsafe { libloading::Library::new(library()) }.expect("load");
    let total: libloading::Symbol<unsafe extern "C" fn() -> u64> =
        unsafe { count.get(b"nvmlSimTotalCalls") }.expect("sym");
    let one: libloading::Symbol<unsafe extern "C" fn(*const std::ffi::c_char) -> u64> =
        unsafe { count.get(b"nvmlSimCallCount") }.expect("sym");
    assert!(unsafe { total() } > 30);
    assert!(unsafe { one(c"nvmlDeviceGetPowerUsage".as_ptr()) } >= 1);
}

fn faults() {
    let nvml = open("builtin:faults", Some("70")).expect("init faults");
    let lost = nvml
        .device_by_index(1)
        .expect("handle of a lost GPU still exists");
    assert!(matches!(lost.utilization_rates(), Err(NvmlError::GpuLost)));
    let d0 = nvml.device_by_index(0).expect("gpu 0");
    assert!(matches!(d0.power_usage(), Err(NvmlError::NotSupported)));
    assert!(d0.utilization_rates().is_ok());
    let d3 = nvml.device_by_index(3).expect("gpu 3");
    assert_eq!(
        d3.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate)
            .expect("ecc"),
        1
    );
    let set = nvml.create_event_set().expect("set");
    let set = nvml
        .device_by_index(2)
        .expect("gpu 2")
        .register_events(EventTypes::CRITICAL_XID_ERROR, set)
        .expect("reg");
    assert_eq!(
        set.wait(100).expect("xid 94").event_data,
        Some(XidError::Value(94))
    );
}

fn init_error() {
    let dir = std::env::temp_dir().join(format!("nvml-sim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("broken.toml");
    std::fs::write(
        &path,
        "name = \"x\"\n[init]\nerror = \"DRIVER_NOT_LOADED\"\n",
    )
    .expect("write");
    assert!(matches!(
        open(path.to_str().expect("utf8"), None),
        Err(NvmlError::DriverNotLoaded)
    ));
    std::fs::write(&path, "name = \"x\"\n[[gpu]]\nbogus = 1\n").expect("write");
    assert!(matches!(
        open(path.to_str().expect("utf8"), None),
        Err(NvmlError::Unknown)
    ));
}

/// What the real H200 answered (scripts/nvml_probe.py on driver 580.159.04),
/// as (query name → value or error text).
fn real_h200(label: &str) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/real-h200/probe-{label}.json"));
    let text = std::fs::read_to_string(&path).expect("real-h200 fixture");
    let probe: serde_json::Value = serde_json::from_str(&text).expect("fixture is JSON");
    probe["devices"][0].clone()
}

/// The real card's answer to `query`: `Ok(value)` or `Err(error text)`.
fn answer<'a>(real: &'a serde_json::Value, query: &str) -> Result<&'a serde_json::Value, String> {
    let entry = &real[query];
    match entry.get("value") {
        Some(v) => Ok(v),
        None => Err(entry["error"].as_str().unwrap_or("missing").to_string()),
    }
}

fn as_u64(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is not a number"))
}

/// The `h200` scenario against what the real card returned: the same
/// answers where the card's are fixed (identity, sizes, limits, thresholds,
/// what is NOT_SUPPORTED), close ones for readings (idle at t=30 s, under
/// load at t=150 s), and the real driver's slowness where it is large.
fn h200_matches_the_real_card() {
    for (label, time) in [("idle", "30"), ("load", "150")] {
        let real = real_h200(label);
        let nvml = open("builtin:h200", Some(time)).expect("init h200");
        assert_eq!(nvml.sys_driver_version().expect("driver"), "580.159.04");
        assert_eq!(nvml.sys_cuda_driver_version().expect("cuda"), 13000);
        let d = nvml.device_by_index(0).expect("gpu 0");
        let r = |q: &str| answer(&real, q);
        assert_eq!(
            Some(d.name().expect("name").as_str()),
            r("name").expect("real name").as_str()
        );
        assert_eq!(
            d.pci_info().expect("pci").pci_device_id,
            as_u64(&r("pci").expect("pci")["pciDeviceId"]) as u32
        );
        // Memory: v2 semantics (used excludes the reserved part).
        let mem = d.memory_info().expect("memory");
        let real_mem = r("memory_v2").expect("real memory");
        assert_eq!(mem.total, as_u64(&real_mem["total"]));
        assert_eq!(mem.reserved >> 20, as_u64(&real_mem["reserved"]) >> 20);
        let used_mib = as_u64(&real_mem["used"]) >> 20;
        assert!(
            (mem.used >> 20).abs_diff(used_mib) <= 16,
            "{label}: used {} MiB, real {used_mib} MiB",
            mem.used >> 20
        );
        // Thresholds 0-3 as the card; the rest NOT_SUPPORTED, as on the card.
        use TemperatureThreshold::*;
        for (kind, name) in [(Shutdown, 0), (Slowdown, 1), (MemoryMax, 2), (GpuMax, 3)] {
            let real = as_u64(r(&format!("temperature_threshold_{name}")).expect("threshold"));
            assert_eq!(
                u64::from(d.temperature_threshold(kind).expect("threshold")),
                real
            );
        }
        for name in 4..8 {
            assert_eq!(
                r(&format!("temperature_threshold_{name}")),
                Err("Not Supported".into())
            );
        }
        assert!(matches!(
            d.temperature_threshold(AcousticMin),
            Err(NvmlError::NotSupported)
        ));
        // Limits and maxima.
        assert_eq!(
            u64::from(d.enforced_power_limit().expect("limit")),
            as_u64(r("power_enforced_limit_mw").expect("limit"))
        );
        assert_eq!(
            u64::from(d.power_management_limit_default().expect("default")),
            as_u64(r("power_default_limit_mw").expect("default"))
        );
        for (clock, name) in [
            (Clock::SM, "sm"),
            (Clock::Memory, "mem"),
            (Clock::Video, "video"),
        ] {
            let real = as_u64(r(&format!("clock_max_{name}_mhz")).expect("max clock"));
            assert_eq!(u64::from(d.max_clock_info(clock).expect("max clock")), real);
        }
        // No fans; page retirement unsupported; rows remapped, none.
        assert_eq!(
            u64::from(d.num_fans().expect("fans")),
            as_u64(r("num_fans").expect("fans"))
        );
        assert_eq!(r("fan_speed"), Err("Not Supported".into()));
        assert!(matches!(d.fan_speed(0), Err(NvmlError::NotSupported)));
        assert_eq!(r("retired_pages_dbe"), Err("Not Supported".into()));
        assert!(matches!(
            d.retired_pages(
                nvml_wrapper::enum_wrappers::device::RetirementCause::DoubleBitEccError
            ),
            Err(NvmlError::NotSupported)
        ));
        assert!(r("remapped_rows").is_ok());
        // This card has no NVLink: links 0 and 17 answered NOT_SUPPORTED.
        for link in [0, 17] {
            assert_eq!(
                r(&format!("nvlink_state_{link}")),
                Err("Not Supported".into())
            );
            assert!(matches!(
                d.link_wrapper_for(link).is_active(),
                Err(NvmlError::NotSupported)
            ));
        }
        assert!(d.is_ecc_enabled().expect("ecc").currently_enabled);
        assert_eq!(
            u64::from(d.current_pcie_link_gen().expect("pcie gen")),
            as_u64(r("pcie_gen").expect("pcie gen"))
        );
        // Readings: utilization exact (steps), power, SM clock, temperature close.
        let util = d.utilization_rates().expect("util");
        let real_util = r("utilization").expect("util");
        assert_eq!(u64::from(util.gpu), as_u64(&real_util["gpu"]), "{label}");
        assert_eq!(
            u64::from(util.memory),
            as_u64(&real_util["memory"]),
            "{label}"
        );
        let power = f64::from(d.power_usage().expect("power")) / 1000.0;
        let real_power = as_u64(r("power_usage_mw").expect("power")) as f64 / 1000.0;
        assert!(
            (power - real_power).abs() < 15.0,
            "{label}: {power} W vs real {real_power} W"
        );
        let sm = f64::from(d.clock_info(Clock::SM).expect("sm"));
        let real_sm = as_u64(r("clock_sm_mhz").expect("sm")) as f64;
        assert!(
            (sm - real_sm).abs() <= 40.0,
            "{label}: {sm} MHz vs real {real_sm} MHz"
        );
        let temp = f64::from(d.temperature(TemperatureSensor::Gpu).expect("temp"));
        let real_temp = as_u64(r("temperature_gpu").expect("temp")) as f64;
        assert!(
            (temp - real_temp).abs() <= 2.0,
            "{label}: {temp} °C vs real {real_temp} °C"
        );
        // Clock-event reasons: idle bit at rest, the power cap under load.
        assert_eq!(
            d.current_throttle_reasons().expect("reasons").bits(),
            as_u64(r("clock_events_current").expect("reasons")),
            "{label}"
        );
        // Processes: the job and the holder, with their memory, under load.
        let mut pids: Vec<(u32, u64)> = d
            .running_compute_processes()
            .expect("processes")
            .iter()
            .map(|p| match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => (p.pid, bytes >> 20),
                UsedGpuMemory::Unavailable => (p.pid, 0),
            })
            .collect();
        pids.sort();
        let mut real_pids: Vec<(u32, u64)> = r("processes_compute")
            .expect("processes")
            .as_array()
            .expect("list")
            .iter()
            .map(|p| (as_u64(&p["pid"]) as u32, as_u64(&p["usedGpuMemory"]) >> 20))
            .collect();
        real_pids.sort();
        assert_eq!(pids, real_pids, "{label}");
        // The real driver's cost: the energy counter takes ~3 ms to read.
        let started = std::time::Instant::now();
        d.total_energy_consumption().expect("energy");
        assert!(started.elapsed() >= std::time::Duration::from_micros(2900));
        let started = std::time::Instant::now();
        d.field_values_for(&[FieldId(83)]).expect("energy field");
        assert!(started.elapsed() >= std::time::Duration::from_micros(3300));
    }
}

#[test]
fn simulator_through_nvml_wrapper() {
    golden();
    faults();
    init_error();
    h200_matches_the_real_card();
}
