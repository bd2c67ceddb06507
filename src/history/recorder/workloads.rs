//! Workload rows: each workload of the snapshot's table written when first
//! seen, once a minute while it runs, and once when it ends — so the
//! history holds every job's summary, and a running one's figures at most a
//! minute old if the agent stops.

use std::collections::HashMap;

use crate::gpu::{unix_ms, Workload, WorkloadKey, WorkloadTable};

/// How often a running workload's row is written again, ms.
const REFRESH_MS: i64 = 60_000;

/// One workload's row (inserted, or updated in place by its key).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadRow {
    /// `slurm_job`, `pod`, `container`, `process`.
    pub kind: &'static str,
    /// The id within the kind.
    pub id: String,
    /// First seen, ms.
    pub started_ms: i64,
    /// Last seen once it ended, ms; `None` while it runs.
    pub ended_ms: Option<i64>,
    /// Last seen, ms.
    pub last_seen_ms: i64,
    /// User, account, partition, namespace, pod, command.
    pub attributes: [Option<String>; 6],
    /// GPU indexes (`3`, or `3.1` for a MIG instance), comma-separated.
    pub gpus: String,
    /// GPU-seconds held.
    pub gpu_seconds: f64,
    /// SM-active seconds.
    pub sm_active_seconds: f64,
    /// Energy, joules.
    pub energy_joules: f64,
    /// Peak memory on one device, bytes.
    pub peak_memory_bytes: i64,
    /// Xid errors seen while it ran.
    pub xid_errors: i64,
    /// Seconds its GPUs throttled while it ran.
    pub throttle_seconds: f64,
    /// A pod's DRA claims, a JSON array; `None` without DRA.
    pub dra_claims: Option<String>,
}

impl WorkloadRow {
    /// The row of `workload`, ended or not.
    pub fn new(workload: &Workload, ended: bool) -> WorkloadRow {
        let total = workload.total();
        let a = &workload.attributes;
        let last_seen_ms = unix_ms(workload.last_seen);
        WorkloadRow {
            kind: workload.key.kind.as_str(),
            id: workload.key.id.clone(),
            started_ms: unix_ms(workload.started),
            ended_ms: ended.then_some(last_seen_ms),
            last_seen_ms,
            attributes: [
                a.user.clone(),
                a.account.clone(),
                a.partition.clone(),
                a.namespace.clone(),
                a.pod.clone(),
                a.command.clone(),
            ],
            gpus: workload
                .devices
                .keys()
                .map(|d| match d.gpu_instance_id {
                    Some(gi) => format!("{}.{gi}", d.gpu),
                    None => d.gpu.to_string(),
                })
                .collect::<Vec<_>>()
                .join(","),
            gpu_seconds: total.gpu_seconds,
            sm_active_seconds: total.sm_active_seconds,
            energy_joules: total.energy_joules,
            peak_memory_bytes: i64::try_from(total.peak_memory_bytes).unwrap_or(i64::MAX),
            xid_errors: i64::try_from(total.xid_errors).unwrap_or(i64::MAX),
            throttle_seconds: total.throttle_seconds,
            dra_claims: (!a.dra_claims.is_empty())
                .then(|| serde_json::to_string(&a.dra_claims).ok())
                .flatten(),
        }
    }
}

/// Which workloads were written, and when.
#[derive(Debug, Default)]
pub struct WorkloadRecorder {
    /// Live workloads by (key, started ms): when last written, ms.
    live: HashMap<(WorkloadKey, i64), i64>,
    /// Ended workloads already written, kept while the table still lists
    /// them.
    ended: HashMap<(WorkloadKey, i64), ()>,
}

impl WorkloadRecorder {
    /// The rows `table` calls for at `now_ms`.
    pub fn record(&mut self, now_ms: i64, table: &WorkloadTable, out: &mut Vec<WorkloadRow>) {
        let mut still_ended = HashMap::with_capacity(self.ended.len());
        for workload in &table.ended {
            let key = (workload.key.clone(), unix_ms(workload.started));
            self.live.remove(&key);
            if self.ended.remove(&key).is_none() {
                out.push(WorkloadRow::new(workload, true));
            }
            still_ended.insert(key, ());
        }
        self.ended = still_ended;
        let mut still_live = HashMap::with_capacity(table.live.len());
        for workload in &table.live {
            let key = (workload.key.clone(), unix_ms(workload.started));
            let written = match self.live.get(&key) {
                Some(last) if now_ms - last < REFRESH_MS => *last,
                _ => {
                    out.push(WorkloadRow::new(workload, false));
                    now_ms
                }
            };
            still_live.insert(key, written);
        }
        self.live = still_live;
    }

    /// Every live workload's row, ended when last seen, at shutdown: the
    /// accounting starts over with the next agent.
    pub fn flush(&mut self, table: &WorkloadTable, out: &mut Vec<WorkloadRow>) {
        out.extend(table.live.iter().map(|w| WorkloadRow::new(w, true)));
    }
}
