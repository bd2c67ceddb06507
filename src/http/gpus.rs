//! `GET /api/v1/gpus`: the GPUs as a person reads them — one flat object per
//! GPU with the values the web view's table shows (active clock-event
//! reasons by name, thresholds next to their readings, Xid and ECC totals,
//! processes, the health verdict as `/api/v1/health` gives it), plus what
//! the agent has turned on (history, alerting). Made from the latest
//! snapshot; `/api/v1/snapshot` has everything, raw.

use serde_json::{json, Value};

use crate::gpu::reasons::CLOCK_EVENT_REASONS;
use crate::gpu::{unix_seconds_f64, GpuSnapshot, GpuStatus};

use super::readiness::Readiness;
use super::HttpState;

/// The document: agent facts and one entry per GPU.
pub fn document(state: &HttpState) -> Value {
    let snapshot = state.snapshots.borrow().clone();
    let (ready, not_ready_reason) = match Readiness::of(state) {
        Readiness::Ready => (true, None),
        Readiness::NotReady(reason) => (false, Some(reason)),
    };
    let features = json!({
        "history": state.history.is_some(),
        "alerting": state.alerts.is_some(),
    });
    let escalated = super::health_api::escalations(state);
    match snapshot {
        None => json!({
            "taken_at": null,
            "hostname": null,
            "ready": ready,
            "not_ready_reason": not_ready_reason,
            "features": features,
            "gpus": [],
        }),
        Some(snapshot) => json!({
            "taken_at": unix_seconds_f64(snapshot.taken_at),
            "hostname": snapshot.hostname,
            "driver_version": snapshot.system.driver_version,
            "cuda_driver_version": snapshot.system.cuda_driver_version,
            "ready": ready,
            "not_ready_reason": not_ready_reason,
            "features": features,
            "gpus": snapshot
                .gpus
                .iter()
                .map(|g| gpu(&snapshot, g, &escalated))
                .collect::<Vec<_>>(),
        }),
    }
}

fn gpu(
    snapshot: &crate::gpu::Snapshot,
    gpu: &GpuSnapshot,
    escalated: &crate::health::escalation::Escalated,
) -> Value {
    let workloads = &snapshot.workloads;
    let r = &gpu.readings;
    let h = &gpu.health;
    let (status, lost_reason) = match &gpu.status {
        GpuStatus::Up => ("up", None),
        GpuStatus::Lost { reason } => ("lost", Some(reason.as_str())),
    };
    let reasons: Vec<Value> = r
        .clock_event_reasons
        .map(|mask| {
            CLOCK_EVENT_REASONS
                .iter()
                .filter(|reason| mask & reason.bit != 0)
                .map(|reason| json!({ "name": reason.name, "description": reason.description }))
                .collect()
        })
        .unwrap_or_default();
    let xid: Vec<Value> = gpu
        .xid_errors
        .iter()
        .map(|x| json!({ "code": x.code, "count": x.count, "last_seen": unix_seconds_f64(x.last_seen) }))
        .collect();
    // Processes as the snapshot has them, so fields added there later (user,
    // container) appear here without a change.
    let processes = serde_json::to_value(&*gpu.processes).unwrap_or(Value::Array(Vec::new()));
    let pods = serde_json::to_value(&*gpu.pods).unwrap_or(Value::Array(Vec::new()));
    // The verdict as /api/v1/health gives it, so the web view's Health
    // column reads the same reasons.
    let health = serde_json::to_value(crate::health::verdict::judge(snapshot, gpu, escalated))
        .unwrap_or(Value::Null);
    json!({
        "index": gpu.index,
        "uuid": gpu.uuid,
        "name": gpu.identity.name,
        "status": status,
        "lost_reason": lost_reason,
        "health": health,
        "utilization_percent": r.utilization_gpu_ratio.map(|u| u * 100.0),
        "sm_active_percent": gpu.gpm.sm_active_ratio().map(|u| u * 100.0),
        "gpm_supported": gpu.gpm.supported,
        "memory_used_bytes": r.memory.map(|m| m.used_bytes),
        "memory_total_bytes": r.memory.map(|m| m.total_bytes),
        "temperature_celsius": r.temperature_gpu_celsius,
        "temperature_slowdown_celsius": gpu.identity.temperature_slowdown_celsius,
        "temperature_shutdown_celsius": gpu.identity.temperature_shutdown_celsius,
        "power_watts": r.power_watts,
        "power_limit_watts": h.power_limit_watts,
        "clock_event_reasons": reasons,
        "xid_errors": xid,
        "xid_other": gpu.xid_other.map(|o| json!({ "count": o.count, "last_seen": unix_seconds_f64(o.last_seen) })),
        "ecc_enabled": h.ecc_enabled,
        "ecc_corrected_volatile": h.ecc.corrected_volatile,
        "ecc_uncorrected_volatile": h.ecc.uncorrected_volatile,
        "remapped_rows_pending": h.remapped_rows_pending,
        "remapped_rows_failure": h.remapped_rows_failure,
        "nvlink": nvlink(&h.links),
        "process_count": gpu.processes.len(),
        "processes": processes,
        "pods": pods,
        "workloads": gpu_workloads(gpu.index, workloads),
    })
}

/// The running workloads that hold `index` (whole or a MIG instance of it):
/// who, and what they used of it so far.
fn gpu_workloads(index: u32, table: &crate::gpu::WorkloadTable) -> Vec<Value> {
    table
        .on_gpu(index)
        .map(|(w, d, usage)| {
            json!({
                "kind": w.key.kind.as_str(),
                "id": w.key.id,
                "user": w.attributes.user,
                "gpu_instance_id": d.gpu_instance_id,
                "gpu_seconds": usage.gpu_seconds,
                "efficiency": usage.efficiency(),
            })
        })
        .collect()
}

/// Which NVLink links are down and which count errors: the default
/// /metrics has only per-GPU totals (`gpuwatch_nvlink_links_down`,
/// `gpuwatch_nvlink_gpu_errors_total`), so this is where a person finds
/// the link. `null` without NVLink; `errors` lists only links that counted
/// some.
fn nvlink(links: &crate::gpu::links::LinkHealth) -> Value {
    if links.nvlink.is_empty() {
        return Value::Null;
    }
    let down: Vec<u32> = links
        .nvlink
        .iter()
        .filter(|l| !l.up)
        .map(|l| l.link)
        .collect();
    let errors: Vec<Value> = links
        .nvlink
        .iter()
        .filter(|l| l.errors.values().any(|n| *n > 0))
        .map(|l| json!({ "link": l.link, "errors": l.errors }))
        .collect();
    json!({ "links": links.nvlink.len(), "down": down, "errors": errors })
}

/// The snapshot's GPUs, for tests of this module.
#[cfg(test)]
fn gpus(snapshot: &crate::gpu::Snapshot) -> Vec<Value> {
    snapshot
        .gpus
        .iter()
        .map(|g| gpu(snapshot, g, &Default::default()))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::SystemTime;

    use super::*;
    use crate::gpu::{testing, FastReadings, GpuIdentity, Snapshot};

    fn one_gpu(status: GpuStatus, mask: Option<u64>) -> Snapshot {
        let gpu = GpuSnapshot {
            status,
            identity: Arc::new(GpuIdentity {
                name: Some("Test GPU".into()),
                temperature_slowdown_celsius: Some(88.0),
                ..GpuIdentity::default()
            }),
            readings: FastReadings {
                utilization_gpu_ratio: Some(0.5),
                clock_event_reasons: mask,
                ..FastReadings::default()
            },
            ..testing::gpu(0)
        };
        testing::snapshot(SystemTime::now(), vec![gpu])
    }

    #[test]
    fn reasons_are_named_and_missing_readings_are_null() {
        let list = gpus(&one_gpu(GpuStatus::Up, Some(0x40 | 0x4)));
        let g = &list[0];
        assert_eq!(g["utilization_percent"], 50.0);
        assert_eq!(g["temperature_slowdown_celsius"], 88.0);
        assert!(g["power_watts"].is_null(), "absent, not zero");
        let names: Vec<&str> = g["clock_event_reasons"]
            .as_array()
            .expect("array")
            .iter()
            .map(|r| r["name"].as_str().expect("name"))
            .collect();
        assert_eq!(names, ["sw_power_cap", "hw_thermal_slowdown"]);
    }

    #[test]
    fn a_lost_gpu_says_why() {
        let list = gpus(&one_gpu(
            GpuStatus::Lost {
                reason: "gpu_lost".into(),
            },
            None,
        ));
        assert_eq!(list[0]["status"], "lost");
        assert_eq!(list[0]["lost_reason"], "gpu_lost");
        assert_eq!(list[0]["health"]["state"], "unhealthy");
        assert_eq!(list[0]["health"]["reasons"][0]["source"], "nvml");
        assert_eq!(list[0]["clock_event_reasons"], json!([]));
    }

    #[test]
    fn each_gpu_names_its_running_workloads() {
        let mut snapshot = one_gpu(GpuStatus::Up, None);
        let device = crate::gpu::Device {
            gpu: 0,
            gpu_instance_id: None,
        };
        let usage = crate::gpu::Usage {
            gpu_seconds: 10.0,
            sm_active_seconds: 2.5,
            ..Default::default()
        };
        let other = crate::gpu::Device {
            gpu: 5,
            gpu_instance_id: None,
        };
        snapshot.workloads = Arc::new(crate::gpu::WorkloadTable {
            live: vec![crate::gpu::Workload::new(
                crate::gpu::WorkloadKey {
                    kind: crate::gpu::WorkloadKind::SlurmJob,
                    id: "9100001".into(),
                },
                crate::gpu::WorkloadAttributes {
                    user: Some("alice".into()),
                    ..Default::default()
                },
                SystemTime::UNIX_EPOCH,
                SystemTime::UNIX_EPOCH,
                [(device, usage), (other, usage)]
                    .into_iter()
                    .collect::<crate::gpu::DeviceUsages>(),
            )],
            ..Default::default()
        });
        let list = gpus(&snapshot);
        let workloads = list[0]["workloads"].as_array().expect("array");
        assert_eq!(workloads.len(), 1, "only its own device: {workloads:?}");
        assert_eq!(workloads[0]["kind"], "slurm_job");
        assert_eq!(workloads[0]["id"], "9100001");
        assert_eq!(workloads[0]["user"], "alice");
        assert_eq!(workloads[0]["efficiency"], 0.25);
    }

    #[test]
    fn nvlink_names_the_links_down_and_those_counting_errors() {
        use crate::gpu::links::{LinkHealth, NvLinkState};
        let link = |n: u32, up: bool, replay: u64| NvLinkState {
            link: n,
            up,
            errors: [("replay", replay), ("crc_flit", 0)].into_iter().collect(),
        };
        let gpu = GpuSnapshot {
            health: Arc::new(crate::gpu::SlowReadings {
                links: LinkHealth {
                    nvlink: vec![link(0, true, 0), link(1, false, 0), link(2, true, 7)],
                    recovery_action: None,
                    recovery_action_value: None,
                },
                ..Default::default()
            }),
            ..testing::gpu(0)
        };
        let list = gpus(&testing::snapshot(SystemTime::now(), vec![gpu]));
        assert_eq!(
            list[0]["nvlink"],
            json!({ "links": 3, "down": [1], "errors": [{ "link": 2, "errors": { "crc_flit": 0, "replay": 7 } }] })
        );
        // Without NVLink: null, not an empty record.
        assert!(gpus(&one_gpu(GpuStatus::Up, None))[0]["nvlink"].is_null());
    }
}
