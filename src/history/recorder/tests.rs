use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;
use crate::gpu::{testing, FastReadings, GpuProcess, MemoryReading, ProcessKind, XidCount};

fn gpu(temp: f64, energy: f64, processes: &Arc<Vec<GpuProcess>>, xid: u64) -> GpuSnapshot {
    GpuSnapshot {
        uuid: "GPU-test".into(),
        readings: FastReadings {
            temperature_gpu_celsius: Some(temp),
            energy_joules: Some(energy),
            power_watts: Some(123.45),
            memory: Some(MemoryReading {
                total_bytes: 80 << 30,
                used_bytes: 10 << 30,
                free_bytes: 70 << 30,
                reserved_bytes: 0,
            }),
            ..FastReadings::default()
        },
        processes: processes.clone(),
        xid_errors: Arc::new(if xid > 0 {
            vec![XidCount {
                code: 79,
                count: xid,
                last_seen: UNIX_EPOCH,
            }]
        } else {
            vec![]
        }),
        ..testing::gpu(0)
    }
}

fn snapshot(at_s: u64, gpus: Vec<GpuSnapshot>) -> Snapshot {
    Snapshot {
        hostname: "test".into(),
        ..testing::snapshot(UNIX_EPOCH + Duration::from_secs(at_s), gpus)
    }
}

fn process(pid: u32, mib: u64) -> GpuProcess {
    GpuProcess {
        pid,
        name: Some(format!("p{pid}")),
        kind: ProcessKind::Compute,
        used_memory_bytes: Some(mib << 20),
        ..GpuProcess::default()
    }
}

fn column(name: &str) -> usize {
    FIELDS
        .iter()
        .position(|f| f.column == name)
        .expect("column")
}

#[test]
fn samples_are_integer_scaled_and_counters_stay_monotonic() {
    let mut r = Recorder::new(vec![(7, "GPU-test".into())], vec![]);
    let none = Arc::new(vec![]);
    r.record(&snapshot(1000, vec![gpu(60.0, 5000.0, &none, 0)]));
    // The driver reloads: energy starts again from 100 J.
    r.record(&snapshot(1001, vec![gpu(61.0, 100.0, &none, 0)]));
    let batch = r.take_batch();
    assert_eq!(batch.samples.len(), 2);
    let s = &batch.samples[1];
    assert_eq!(
        (s.ts, s.gpu, s.up),
        (1_001_000, 7, true),
        "the known GPU keeps its id"
    );
    assert_eq!(s.values[column("temp_gpu")], Some(61));
    assert_eq!(s.values[column("power")], Some(1235), "deciwatts");
    assert_eq!(s.values[column("mem_used")], Some(10240), "MiB");
    assert_eq!(
        s.values[column("energy")],
        Some(5100),
        "offset carried across the reset"
    );
    assert_eq!(s.values[column("util_gpu")], None, "absent stays absent");
    assert_eq!(
        batch.counters[&(7, "energy")],
        CounterState {
            last_raw: 100.0,
            offset: 5000.0
        }
    );
    assert_eq!(batch.events[0].kind, "agent_start");

    // A restart: the offsets come back from the database.
    let mut again = Recorder::new(
        vec![(7, "GPU-test".into())],
        vec![((7, "energy".into()), batch.counters[&(7, "energy")])],
    );
    again.record(&snapshot(2000, vec![gpu(61.0, 150.0, &none, 0)]));
    assert_eq!(
        again.take_batch().samples[0].values[column("energy")],
        Some(5150)
    );
}

#[test]
fn minutes_and_hours_close_as_time_moves_on() {
    let mut r = Recorder::new(vec![], vec![]);
    let none = Arc::new(vec![]);
    for s in 0..130 {
        r.record(&snapshot(
            3600 + s,
            vec![gpu(50.0 + (s % 10) as f64, 0.0, &none, 0)],
        ));
    }
    let batch = r.take_batch();
    assert_eq!(
        batch.minutes.len(),
        2,
        "two minutes closed, the third is open"
    );
    assert_eq!(batch.minutes[0].ts, 3_600_000);
    assert_eq!(batch.minutes[0].n, 60);
    assert!(batch.hours.is_empty(), "the hour is still open");
    let last = r.take_final_batch();
    assert_eq!(last.minutes.len(), 1, "the open minute at shutdown");
    assert_eq!(last.minutes[0].n, 10);
    assert_eq!(last.hours.len(), 1);
    assert_eq!((last.hours[0].ts, last.hours[0].n), (3_600_000, 130));
}

#[test]
fn events_for_xid_loss_recovery_and_processes() {
    let mut r = Recorder::new(vec![], vec![]);
    let two = Arc::new(vec![process(10, 100), process(11, 200)]);
    r.record(&snapshot(10, vec![gpu(50.0, 0.0, &two, 0)]));
    let grown = Arc::new(vec![process(10, 300), process(12, 50)]);
    r.record(&snapshot(11, vec![gpu(50.0, 0.0, &grown, 2)]));
    let mut lost = gpu(50.0, 0.0, &Arc::new(vec![]), 2);
    lost.status = GpuStatus::Lost {
        reason: "gpu_lost".into(),
    };
    r.record(&snapshot(12, vec![lost]));
    let shrunk = Arc::new(vec![process(12, 60)]);
    r.record(&snapshot(13, vec![gpu(50.0, 0.0, &shrunk, 3)]));
    let events: Vec<(&str, Option<i64>, Option<i64>)> = r
        .take_batch()
        .events
        .iter()
        .map(|e| (e.kind, e.code, e.value))
        .collect();
    assert_eq!(
        events,
        vec![
            ("agent_start", None, Some(1)),
            ("process_start", Some(10), Some(100)),
            ("process_start", Some(11), Some(200)),
            ("xid", Some(79), Some(2)),
            ("process_start", Some(12), Some(50)),
            ("process_stop", Some(11), Some(200)),
            ("gpu_lost", None, None),
            ("gpu_recovered", None, None),
            ("xid", Some(79), Some(1)),
            ("process_stop", Some(10), Some(300)),
        ]
    );
}

#[test]
fn a_gpu_without_uuid_is_keyed_by_index() {
    let mut r = Recorder::new(vec![], vec![]);
    let mut g = gpu(50.0, 0.0, &Arc::new(vec![]), 0);
    g.uuid.clear();
    g.index = 3;
    r.record(&snapshot(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        vec![g],
    ));
    let batch = r.take_batch();
    assert_eq!(
        batch.gpus.values().next().map(|g| g.uuid.as_str()),
        Some("index-3")
    );
}

#[test]
fn a_process_start_names_its_pod_when_known() {
    let mut p = process(7, 10);
    assert_eq!(start_detail(&p, false), "p7");
    p.pod = Some(Arc::new(crate::gpu::PodContainer {
        namespace: "ml".into(),
        pod: "solo".into(),
        container: "main".into(),
    }));
    assert_eq!(start_detail(&p, false), "p7 in pod ml/solo container main");
    assert_eq!(
        start_detail(&p, true),
        "p7 in pod ml/solo container main (running when gpuwatch started)"
    );
}

fn occurrence(seq: u64, at_s: u64, backlog: bool) -> crate::gpu::node_health::XidOccurrence {
    crate::gpu::node_health::XidOccurrence {
        seq,
        gpu: 0,
        code: 79,
        at: UNIX_EPOCH + Duration::from_secs(at_s),
        source: crate::gpu::node_health::XidSource::KernelLog,
        pid: Some(1234),
        process: Some("python3".into()),
        text: Some("GPU has fallen off the bus.".into()),
        backlog,
    }
}

fn with_occurrences(
    mut s: Snapshot,
    list: Vec<crate::gpu::node_health::XidOccurrence>,
) -> Snapshot {
    s.collection.health.recent_xid = Arc::new(list);
    s
}

#[test]
fn xid_occurrences_are_events_at_their_own_time_with_details() {
    let mut r = Recorder::new(vec![(1, "GPU-test".into())], vec![])
        // Stored by the previous run: the backlog repeats it.
        .with_known_xid(vec![(1, 79, 5_000)]);
    let none = Arc::new(vec![]);
    let backlog = vec![occurrence(1, 5, true), occurrence(2, 8, true)];
    r.record(&with_occurrences(
        snapshot(10, vec![gpu(50.0, 0.0, &none, 0)]),
        backlog.clone(),
    ));
    // A live occurrence, counted once: no second, count-based event.
    let mut live = backlog.clone();
    live.push(occurrence(3, 11, false));
    r.record(&with_occurrences(
        snapshot(12, vec![gpu(50.0, 0.0, &none, 1)]),
        live.clone(),
    ));
    // The same list again: nothing new.
    r.record(&with_occurrences(
        snapshot(13, vec![gpu(50.0, 0.0, &none, 1)]),
        live,
    ));
    // A count without an occurrence (the list overflowed): the old event.
    r.record(&snapshot(14, vec![gpu(50.0, 0.0, &none, 2)]));
    type Row = (i64, Option<i64>, Option<i64>, Option<String>);
    let events: Vec<Row> = r
        .take_batch()
        .events
        .iter()
        .filter(|e| e.kind == "xid")
        .map(|e| (e.ts, e.code, e.value, e.detail.clone()))
        .collect();
    assert_eq!(
        events,
        vec![
            (
                8_000,
                Some(79),
                Some(1),
                Some("pid=1234, name=python3, GPU has fallen off the bus., (logged before the agent started)".into())
            ),
            (
                11_000,
                Some(79),
                Some(1),
                Some("pid=1234, name=python3, GPU has fallen off the bus.".into())
            ),
            (14_000, Some(79), Some(1), None),
        ]
    );
}

#[test]
fn an_nvml_xid_waits_briefly_for_the_kernel_logs_details() {
    let mut r = Recorder::new(vec![], vec![]);
    let none = Arc::new(vec![]);
    let mut nvml = occurrence(1, 10, false);
    nvml.source = crate::gpu::node_health::XidSource::Nvml;
    (nvml.pid, nvml.process, nvml.text) = (None, None, None);
    r.record(&with_occurrences(
        snapshot(10, vec![gpu(50.0, 0.0, &none, 1)]),
        vec![nvml.clone()],
    ));
    // Not yet written, and not written count-based either.
    assert!(r.take_batch().events.iter().all(|e| e.kind != "xid"));
    // The kernel log's line arrives: the same occurrence, with details.
    r.record(&with_occurrences(
        snapshot(11, vec![gpu(50.0, 0.0, &none, 1)]),
        vec![occurrence(1, 10, false)],
    ));
    let xid: Vec<_> = r
        .take_batch()
        .events
        .into_iter()
        .filter(|e| e.kind == "xid")
        .map(|e| (e.ts, e.value, e.detail))
        .collect();
    assert_eq!(
        xid,
        vec![(
            10_000,
            Some(1),
            Some("pid=1234, name=python3, GPU has fallen off the bus.".into())
        )]
    );
    // Without a line it is written after the wait, and at shutdown at once.
    let mut second = nvml.clone();
    (second.seq, second.at) = (2, UNIX_EPOCH + Duration::from_secs(20));
    r.record(&with_occurrences(
        snapshot(20, vec![gpu(50.0, 0.0, &none, 2)]),
        vec![second.clone()],
    ));
    assert!(r.take_batch().events.iter().all(|e| e.kind != "xid"));
    r.record(&with_occurrences(
        snapshot(24, vec![gpu(50.0, 0.0, &none, 2)]),
        vec![second.clone()],
    ));
    let xid: Vec<_> = r
        .take_batch()
        .events
        .into_iter()
        .filter(|e| e.kind == "xid")
        .map(|e| (e.ts, e.detail))
        .collect();
    assert_eq!(
        xid,
        vec![(20_000, None)],
        "at its own time, without details"
    );
    let mut third = nvml;
    (third.seq, third.at) = (3, UNIX_EPOCH + Duration::from_secs(30));
    r.record(&with_occurrences(
        snapshot(30, vec![gpu(50.0, 0.0, &none, 3)]),
        vec![third],
    ));
    assert_eq!(
        r.take_final_batch()
            .events
            .iter()
            .filter(|e| e.kind == "xid")
            .count(),
        1
    );
}
