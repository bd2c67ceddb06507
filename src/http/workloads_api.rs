//! `/api/v1/workloads?from=&to=&kind=&user=&gpu=&limit=`: who used the GPUs
//! and how well — the history's workload summaries, with the running ones
//! as the latest snapshot has them (the same objects as `gpuwatch jobs
//! --format json`). Without history: the running ones only.

use hyper::StatusCode;
use serde_json::json;

use crate::gpu::WorkloadKind;
use crate::history::workloads::{self, WorkloadFilter, WorkloadRecord};
use crate::timespec::Timestamp;

use super::history_api::failed;
use super::params::{limit_param, params, time_param, unavailable, ParamError};
use super::response::{json_response, HttpResponse};
use super::HttpState;

/// The most workloads one answer lists.
const MAX_WORKLOADS: u32 = 100_000;

/// The parameters, checked.
pub(super) fn filter(query: Option<&str>, now: Timestamp) -> Result<WorkloadFilter, ParamError> {
    let p = params(query);
    let kind = match p.get("kind") {
        Some(name) => Some(WorkloadKind::parse(name).ok_or_else(|| {
            ParamError::new(
                "kind",
                format!(
                    "{name:?} is not a workload kind; use slurm_job, pod, container or process"
                ),
            )
        })?),
        None => None,
    };
    let gpu = match p.get("gpu") {
        Some(text) => Some(text.parse::<u32>().map_err(|_| {
            ParamError::new("gpu", format!("{text:?} is not a GPU index (0, 1, ...)"))
        })?),
        None => None,
    };
    Ok(WorkloadFilter {
        from_ms: time_param(&p, "from", "-1d", now)?.as_ms(),
        to_ms: time_param(&p, "to", "now", now)?.as_ms(),
        kind,
        user: p.get("user").cloned(),
        gpu,
        limit: i64::from(limit_param(&p, 1000, MAX_WORKLOADS)?),
    })
}

/// The answer: `{"workloads": [...]}`, newest first.
pub async fn workloads(state: &HttpState, query: Option<&str>) -> HttpResponse {
    let filter = match filter(query, Timestamp::now()) {
        Ok(filter) => filter,
        Err(e) => return e.response(),
    };
    let snapshot = state.snapshots.borrow().clone();
    let live: Vec<WorkloadRecord> = snapshot
        .iter()
        .flat_map(|s| s.workloads.live.iter())
        .map(WorkloadRecord::live)
        .filter(|r| r.matches(&filter) && (r.started * 1000.0) < filter.to_ms as f64)
        .collect();
    let mut stored = match &state.history {
        None => Vec::new(),
        Some(api) => match api.store.get() {
            Ok(store) => match workloads::workloads(&store.pool, &filter).await {
                Ok(found) => found,
                Err(e) => return failed(e),
            },
            Err(down) => return unavailable(&down.reason),
        },
    };
    // A running workload's row is up to a minute old: the snapshot's wins.
    stored.retain(|r| {
        !live
            .iter()
            .any(|l| l.kind == r.kind && l.id == r.id && l.started == r.started)
    });
    let mut all = live;
    all.extend(stored);
    all.sort_by(|a, b| b.started.total_cmp(&a.started));
    all.truncate(usize::try_from(filter.limit).unwrap_or(usize::MAX));
    json_response(StatusCode::OK, &json!({ "workloads": all }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_checked_and_name_the_bad_one() {
        let now = Timestamp::parse("2026-12-03T00:00:00Z", Timestamp::now()).expect("time");
        let f = filter(
            Some("kind=slurm_job&user=alice&gpu=3&from=-2h&limit=5"),
            now,
        )
        .expect("valid");
        assert_eq!(f.kind, Some(WorkloadKind::SlurmJob));
        assert_eq!(
            (f.user.as_deref(), f.gpu, f.limit),
            (Some("alice"), Some(3), 5)
        );
        assert_eq!(f.to_ms - f.from_ms, 2 * 3600 * 1000);
        for (query, parameter) in [
            ("kind=job", "kind"),
            ("gpu=GPU-1", "gpu"),
            ("limit=0", "limit"),
            ("from=yesterday-ish", "from"),
        ] {
            let error = filter(Some(query), now).expect_err(query);
            assert_eq!(error.parameter, parameter, "{query}");
        }
    }
}
