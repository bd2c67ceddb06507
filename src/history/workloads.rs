//! Reading the workload summaries (`gpuwatch jobs`, `/api/v1/workloads`):
//! who used which GPUs between two times, and how well.

use serde::Serialize;
use sqlx::{Row, SqlitePool};

use crate::gpu::WorkloadKind;

use super::query::QueryError;

/// Which workloads to list.
#[derive(Debug, Clone, Default)]
pub struct WorkloadFilter {
    /// Those running at or after this time, ms.
    pub from_ms: i64,
    /// Those started before this time, ms.
    pub to_ms: i64,
    /// Only this kind.
    pub kind: Option<WorkloadKind>,
    /// Only this user.
    pub user: Option<String>,
    /// Only those that used this GPU (index).
    pub gpu: Option<u32>,
    /// At most this many, newest first.
    pub limit: i64,
}

/// One workload's summary, as the CLI and the API show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadRecord {
    /// `slurm_job`, `pod`, `container` or `process`.
    pub kind: String,
    /// Job id, `namespace/pod`, container id or pid.
    pub id: String,
    /// The user (Slurm's job user, else the process's).
    pub user: Option<String>,
    /// Slurm account.
    pub account: Option<String>,
    /// Slurm partition.
    pub partition: Option<String>,
    /// Kubernetes namespace.
    pub namespace: Option<String>,
    /// Kubernetes pod.
    pub pod: Option<String>,
    /// The first process's name.
    pub command: Option<String>,
    /// GPUs used: index, or `index.gpu_instance` for a MIG instance.
    pub gpus: Vec<String>,
    /// First seen, Unix seconds.
    pub started: f64,
    /// Last seen once ended, Unix seconds; `null` while running.
    pub ended: Option<f64>,
    /// GPU-seconds held (a GPU shared by two workloads counts for both).
    pub gpu_seconds: f64,
    /// SM-active GPU-seconds.
    pub sm_active_seconds: f64,
    /// Energy, joules.
    pub energy_joules: f64,
    /// The most memory held on one GPU at once, bytes.
    pub peak_memory_bytes: i64,
    /// SM-active seconds per GPU-second held, 0..1; `null` before a second
    /// was held.
    pub efficiency: Option<f64>,
    /// Xid errors on its GPUs while it ran.
    pub xid_errors: i64,
    /// Seconds its GPUs throttled while it ran.
    pub throttle_seconds: f64,
    /// Kubernetes: the DRA claims through which the pod held its GPUs
    /// (namespace, name, driver, pool, device); empty without DRA.
    pub dra_claims: Vec<crate::gpu::DraClaim>,
}

/// The workloads `filter` asks for, newest first.
pub async fn workloads(
    pool: &SqlitePool,
    filter: &WorkloadFilter,
) -> Result<Vec<WorkloadRecord>, QueryError> {
    let rows = sqlx::query(
        "SELECT kind, id, started, ended, user, account, partition, namespace, pod, command, gpus, \
         gpu_seconds, sm_active_seconds, energy_joules, peak_memory_bytes, xid_errors, throttle_seconds, dra_claims \
         FROM workload WHERE started < ? AND (ended IS NULL OR ended >= ?) \
         AND (? IS NULL OR kind = ?) AND (? IS NULL OR user = ?) \
         ORDER BY started DESC, kind, id",
    )
    .bind(filter.to_ms)
    .bind(filter.from_ms)
    .bind(filter.kind.map(WorkloadKind::as_str))
    .bind(filter.kind.map(WorkloadKind::as_str))
    .bind(filter.user.as_deref())
    .bind(filter.user.as_deref())
    .fetch_all(pool)
    .await?;
    let mut out = Vec::new();
    for row in &rows {
        let record = record(row)?;
        if record.matches(filter) {
            out.push(record);
            if out.len() as i64 >= filter.limit {
                break;
            }
        }
    }
    Ok(out)
}

fn record(row: &sqlx::sqlite::SqliteRow) -> Result<WorkloadRecord, sqlx::Error> {
    let gpus: String = row.try_get("gpus")?;
    let gpu_seconds: f64 = row.try_get("gpu_seconds")?;
    let sm_active_seconds: f64 = row.try_get("sm_active_seconds")?;
    Ok(WorkloadRecord {
        kind: row.try_get("kind")?,
        id: row.try_get("id")?,
        user: row.try_get("user")?,
        account: row.try_get("account")?,
        partition: row.try_get("partition")?,
        namespace: row.try_get("namespace")?,
        pod: row.try_get("pod")?,
        command: row.try_get("command")?,
        gpus: gpus
            .split(',')
            .filter(|g| !g.is_empty())
            .map(str::to_string)
            .collect(),
        started: row.try_get::<i64, _>("started")? as f64 / 1000.0,
        ended: row
            .try_get::<Option<i64>, _>("ended")?
            .map(|ms| ms as f64 / 1000.0),
        gpu_seconds,
        sm_active_seconds,
        energy_joules: row.try_get("energy_joules")?,
        peak_memory_bytes: row.try_get("peak_memory_bytes")?,
        efficiency: (gpu_seconds > 0.0).then(|| (sm_active_seconds / gpu_seconds).clamp(0.0, 1.0)),
        xid_errors: row.try_get("xid_errors")?,
        throttle_seconds: row.try_get("throttle_seconds")?,
        dra_claims: dra_claims(row.try_get("dra_claims")?),
    })
}

/// The claims of a row's `dra_claims` JSON; none where it is absent or
/// unreadable (a summary's other figures are still worth showing).
fn dra_claims(json: Option<String>) -> Vec<crate::gpu::DraClaim> {
    json.and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

impl WorkloadRecord {
    /// The record of a workload running now, from the snapshot's table
    /// (fresher than its row, which is written once a minute).
    pub fn live(workload: &crate::gpu::Workload) -> WorkloadRecord {
        let row = super::recorder::WorkloadRow::new(workload, false);
        let [user, account, partition, namespace, pod, command] = row.attributes;
        WorkloadRecord {
            kind: row.kind.to_string(),
            id: row.id,
            user,
            account,
            partition,
            namespace,
            pod,
            command,
            gpus: row
                .gpus
                .split(',')
                .filter(|g| !g.is_empty())
                .map(str::to_string)
                .collect(),
            started: row.started_ms as f64 / 1000.0,
            ended: None,
            gpu_seconds: row.gpu_seconds,
            sm_active_seconds: row.sm_active_seconds,
            energy_joules: row.energy_joules,
            peak_memory_bytes: row.peak_memory_bytes,
            efficiency: workload.total().efficiency(),
            xid_errors: row.xid_errors,
            throttle_seconds: row.throttle_seconds,
            dra_claims: workload.attributes.dra_claims.clone(),
        }
    }

    /// Whether `filter` (kind, user, GPU; not the times) takes it.
    pub fn matches(&self, filter: &WorkloadFilter) -> bool {
        filter.kind.is_none_or(|k| k.as_str() == self.kind)
            && filter
                .user
                .as_deref()
                .is_none_or(|u| self.user.as_deref() == Some(u))
            && filter
                .gpu
                .is_none_or(|gpu| self.gpus.iter().any(|g| gpu_index(g) == Some(gpu)))
    }
}

/// The GPU index of a `gpus` entry (`3` or `3.1`).
fn gpu_index(entry: &str) -> Option<u32> {
    entry.split('.').next()?.parse().ok()
}
