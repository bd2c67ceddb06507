//! Gathering what a notification says beyond the alert's labels and
//! annotations (an [`outbox::Details`](crate::outbox::Details)): the rule's
//! condition and threshold, the GPU's name, the reading behind the alert
//! with the GPU's own limit, and a short history of that reading from the
//! history database. Done once, when the transition is written to the
//! outbox, on the producer's side: the outbox holds only the types.

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::SqlitePool;

use crate::gpu::{reasons, GpuSnapshot, Snapshot};
use crate::history::catalog;
use crate::history::query::{self, GpuSelector};
use crate::history::Retention;
use crate::outbox::details::{Details, HistorySummary, MetricDetails};
use crate::outbox::workload;
use crate::rules::{Condition, Metric, Rule, Target, Transition};

use super::plan;

/// How far back the history in a notification reaches.
pub const HISTORY_SPAN: Duration = Duration::from_secs(30 * 60);

/// The step of that history (60 points over 30 minutes, from the raw tier).
const HISTORY_STEP: Duration = Duration::from_secs(30);

/// The details of each alert in `messages` (by fingerprint): the rule's
/// condition and threshold, the GPU, and the reading's recent history, as of
/// the notice. Only alerts being notified get a history query.
pub async fn gather(
    pool: &SqlitePool,
    retention: Retention,
    rules: &[Rule],
    snapshot: &Snapshot,
    messages: &[plan::Message],
) -> BTreeMap<String, Details> {
    let mut all = BTreeMap::new();
    for notice in messages.iter().flat_map(|m| &m.notices) {
        if all.contains_key(&notice.fingerprint) {
            continue;
        }
        let t = &notice.transition;
        let rule = rules.iter().find(|r| r.name == t.key.rule);
        let mut d = describe(rule, snapshot, t);
        add_history(pool, retention, t, &mut d).await;
        all.insert(notice.fingerprint.clone(), d);
    }
    all
}

/// The reading an alert is about, for the history section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Related {
    /// The history metric (a [`catalog`] name).
    pub metric: &'static str,
    /// What a person reads.
    pub label: &'static str,
    /// The GPU's own limit shown next to it.
    pub limit: GpuLimit,
}

/// Which of the GPU's own limits goes with a reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuLimit {
    /// None.
    None,
    /// The slowdown temperature.
    Slowdown,
    /// The shutdown temperature.
    Shutdown,
    /// The enforced power limit.
    PowerLimit,
    /// The frame buffer size.
    MemoryTotal,
}

/// The history metric behind a condition: temperatures for thermal
/// conditions (a thermal slowdown is about the temperature), power for
/// power caps and brakes, memory used for memory conditions, the reading
/// itself for other comparisons; `None` for events (Xid, lost GPU, ECC).
pub fn related(condition: &Condition) -> Option<Related> {
    let r = |metric, label, limit| {
        Some(Related {
            metric,
            label,
            limit,
        })
    };
    match condition {
        Condition::Compare { metric, .. } | Condition::Absent { metric } => match metric {
            Metric::Temperature | Metric::DegreesBelowSlowdown => {
                r("temperature", "GPU temperature", GpuLimit::Slowdown)
            }
            Metric::DegreesBelowShutdown => r("temperature", "GPU temperature", GpuLimit::Shutdown),
            Metric::MemoryTemperature => {
                r("memory_temperature", "Memory temperature", GpuLimit::None)
            }
            Metric::MemoryUsedRatio | Metric::MemoryUsedBytes | Metric::MemoryFreeBytes => {
                r("memory_used", "Memory used", GpuLimit::MemoryTotal)
            }
            Metric::Power | Metric::PowerLimitRatio => {
                r("power", "Power draw", GpuLimit::PowerLimit)
            }
            Metric::UtilizationGpu | Metric::UtilizationAvg5m => {
                r("utilization", "GPU utilization", GpuLimit::None)
            }
            Metric::UtilizationMemory => {
                r("memory_utilization", "Memory utilization", GpuLimit::None)
            }
            Metric::SmClock => r("sm_clock", "SM clock", GpuLimit::None),
            Metric::FanSpeed => r("fan", "Fan speed", GpuLimit::None),
            Metric::PerformanceState => r("pstate", "Performance state", GpuLimit::None),
            Metric::PcieLinkWidth => r("pcie_width", "PCIe link width", GpuLimit::None),
            Metric::SmActive => r("sm_active", "SM active (GPM)", GpuLimit::None),
            Metric::ProcessMemoryBytes => r("memory_used", "Memory used", GpuLimit::MemoryTotal),
            // No history series to chart.
            Metric::NvlinkDown | Metric::RecoveryActionNeeded | Metric::FabricNotRegistered => None,
            Metric::PcieDegraded => r("pcie_width", "PCIe link width", GpuLimit::None),
        },
        Condition::ClockEvent { mask } => {
            let any = |names: &[&str]| {
                reasons::CLOCK_EVENT_REASONS
                    .iter()
                    .any(|r| mask & r.bit != 0 && names.contains(&r.name))
            };
            if any(&["sw_thermal_slowdown", "hw_thermal_slowdown"]) {
                r("temperature", "GPU temperature", GpuLimit::Slowdown)
            } else if any(&["sw_power_cap", "hw_power_brake_slowdown"]) {
                r("power", "Power draw", GpuLimit::PowerLimit)
            } else {
                r("sm_clock", "SM clock", GpuLimit::None)
            }
        }
        Condition::TemperatureAnomaly { .. } | Condition::PeerHotter { .. } => {
            r("temperature", "GPU temperature", GpuLimit::Slowdown)
        }
        Condition::Any(list) => list.iter().find_map(related),
        Condition::All(list) => list.iter().rev().find_map(related),
        _ => None,
    }
}

/// Everything but the history, from the rule and the snapshot of the
/// transition. Pure.
pub fn describe(rule: Option<&Rule>, snapshot: &Snapshot, t: &Transition) -> Details {
    let gpu = match &t.key.target {
        Target::Gpu(id) => snapshot.gpus.iter().find(|g| g.alert_key() == *id),
        Target::Node | Target::Workload { .. } => None,
    };
    let related = rule.and_then(|r| related(&r.condition));
    Details {
        condition: rule.map(|r| r.condition.to_string()),
        value: t.value,
        threshold: rule.and_then(|r| r.condition.threshold()),
        gpu_name: gpu.and_then(|g| g.identity.name.clone()),
        metric: related.and_then(|rel| {
            let field = catalog::field(rel.metric)?;
            let gpu = gpu?;
            Some(MetricDetails {
                name: rel.metric.to_string(),
                label: rel.label.to_string(),
                unit: unit(field.unit).to_string(),
                current: (field.read)(gpu),
                limit: limit(gpu, rel.limit).map(|(_, v)| v),
                limit_name: limit(gpu, rel.limit).map(|(n, _)| n.to_string()),
                history: None,
            })
        }),
        workload: workload::of_target(snapshot, &t.key.target),
        workloads: gpu.map_or_else(Vec::new, |g| workload::on_gpu(&snapshot.workloads, g.index)),
    }
}

fn unit(catalog_unit: &str) -> &str {
    match catalog_unit {
        "celsius" => "°C",
        "percent" => "%",
        "watts" => "W",
        other => other,
    }
}

fn limit(gpu: &GpuSnapshot, limit: GpuLimit) -> Option<(&'static str, f64)> {
    match limit {
        GpuLimit::None => None,
        GpuLimit::Slowdown => Some((
            "slowdown threshold",
            gpu.identity.temperature_slowdown_celsius?,
        )),
        GpuLimit::Shutdown => Some((
            "shutdown threshold",
            gpu.identity.temperature_shutdown_celsius?,
        )),
        GpuLimit::PowerLimit => Some(("power limit", gpu.health.power_limit_watts?)),
        GpuLimit::MemoryTotal => Some((
            "total",
            gpu.readings.memory?.total_bytes as f64 / (1024.0 * 1024.0),
        )),
    }
}

/// Fills in the history of the alert's reading: the [`HISTORY_SPAN`] up to
/// the transition, from the history database, ending with the reading of
/// the transition's own snapshot (see [`history_with_reading`]). A query
/// that fails leaves only that reading; no reading and no rows leave the
/// history out (the message goes without it).
pub async fn add_history(
    pool: &SqlitePool,
    retention: Retention,
    t: &Transition,
    details: &mut Details,
) {
    let (Target::Gpu(uuid), Some(metric)) = (&t.key.target, details.metric.as_mut()) else {
        return;
    };
    let Some(field) = catalog::field(&metric.name) else {
        return;
    };
    let to_ms = crate::gpu::unix_ms(t.at) + 1;
    let from_ms = to_ms - HISTORY_SPAN.as_millis() as i64;
    let series = query::series(
        pool,
        &GpuSelector::Uuid(uuid.clone()),
        field,
        from_ms,
        to_ms,
        Some(HISTORY_STEP),
        retention,
        crate::gpu::now_ms(),
    )
    .await;
    let (points, step_seconds) = match series {
        Ok(series) => (series.points, series.step_seconds),
        Err(e) => {
            // E.g. a GPU whose first rows are not written yet.
            tracing::debug!(alert = %t.key, error = %e, "No history for the notification.");
            (Vec::new(), HISTORY_STEP.as_secs_f64())
        }
    };
    metric.history = history_with_reading(points, metric.current, step_seconds, from_ms, to_ms);
}

/// The history of a reading from the database's `points`, with `current`
/// (the reading in the snapshot that made the transition) added as the
/// newest point at `to_ms`. The database lags behind the alert by up to
/// one write batch (`history.batch_interval`), so without it a message
/// could show a history that never reached the value that made the alert
/// fire, next to a Reading line that does; with it the history's range
/// always contains the Reading. (When the database already has that
/// sample it counts twice in the average, never in the min or max.)
pub fn history_with_reading(
    mut points: Vec<query::Point>,
    current: Option<f64>,
    step_seconds: f64,
    from_ms: i64,
    to_ms: i64,
) -> Option<HistorySummary> {
    if let Some(value) = current {
        points.push(query::Point {
            t: (to_ms - 1) as f64 / 1000.0,
            avg: Some(value),
            min: Some(value),
            max: Some(value),
            last: Some(value),
        });
    }
    summarize(&points, step_seconds, from_ms, to_ms)
}

/// One value per step over `[from_ms, to_ms)` and their min/avg/max; `None`
/// when no step has data.
fn summarize(
    series: &[query::Point],
    step_seconds: f64,
    from_ms: i64,
    to_ms: i64,
) -> Option<HistorySummary> {
    let step = step_seconds.max(1.0);
    let from = from_ms as f64 / 1000.0;
    let to = to_ms as f64 / 1000.0;
    let slots = ((to - from) / step).ceil().max(1.0) as usize;
    let mut points = vec![None; slots];
    let (mut lo, mut hi, mut sum, mut n) = (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0usize);
    for p in series {
        let Some(avg) = p.avg.or(p.last) else {
            continue;
        };
        let slot = ((p.t - from) / step).floor();
        if slot >= 0.0 && (slot as usize) < slots {
            points[slot as usize] = Some(avg);
        }
        lo = lo.min(p.min.unwrap_or(avg));
        hi = hi.max(p.max.unwrap_or(avg));
        sum += avg;
        n += 1;
    }
    (n > 0).then(|| HistorySummary {
        from,
        to,
        step_seconds: step,
        min: lo,
        avg: sum / n as f64,
        max: hi,
        points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::query::Point;

    #[test]
    fn thermal_and_power_conditions_map_to_their_readings() {
        let thermal = Condition::parse("clock_event(hw_thermal_slowdown)").unwrap();
        assert_eq!(related(&thermal).unwrap().metric, "temperature");
        assert_eq!(related(&thermal).unwrap().limit, GpuLimit::Slowdown);
        let brake = Condition::parse("clock_event(hw_power_brake_slowdown)").unwrap();
        assert_eq!(related(&brake).unwrap().metric, "power");
        let memory = Condition::parse("memory_used_ratio > 0.95").unwrap();
        assert_eq!(related(&memory).unwrap().metric, "memory_used");
        let shutdown = Condition::parse("degrees_below_shutdown <= 3").unwrap();
        assert_eq!(related(&shutdown).unwrap().limit, GpuLimit::Shutdown);
        assert!(related(&Condition::parse("xid(79)").unwrap()).is_none());
        assert!(related(&Condition::parse("gpu_lost").unwrap()).is_none());
        let any = Condition::parse("gpu_lost or temperature > 80").unwrap();
        assert_eq!(related(&any).unwrap().metric, "temperature");
        for (condition, _) in crate::rules::condition::METRICS {
            let c = Condition::Compare {
                metric: *condition,
                op: crate::rules::Op::Gt,
                threshold: 1.0,
            };
            // Link state and the recovery action have no history series.
            if matches!(
                condition,
                Metric::NvlinkDown | Metric::RecoveryActionNeeded | Metric::FabricNotRegistered
            ) {
                assert!(related(&c).is_none());
                continue;
            }
            let metric = related(&c).unwrap().metric;
            assert!(catalog::field(metric).is_some(), "{metric}");
        }
    }

    #[test]
    fn history_is_summarized_per_step_with_gaps() {
        let point = |t: f64, avg: f64, min: f64, max: f64| Point {
            t,
            avg: Some(avg),
            min: Some(min),
            max: Some(max),
            last: Some(avg),
        };
        let points = vec![
            point(1000.0, 60.0, 59.0, 61.0),
            point(1090.0, 80.0, 70.0, 90.0),
        ];
        let s = summarize(&points, 30.0, 1_000_000, 1_120_000).unwrap();
        assert_eq!(s.points, vec![Some(60.0), None, None, Some(80.0)]);
        assert_eq!((s.min, s.avg, s.max), (59.0, 70.0, 90.0));
        assert!(summarize(&[], 30.0, 1_000_000, 1_120_000).is_none());
    }

    #[test]
    fn the_triggering_reading_ends_the_history_even_when_the_database_lags() {
        let point = |t: f64, v: f64| Point {
            t,
            avg: Some(v),
            min: Some(v),
            max: Some(v),
            last: Some(v),
        };
        // The database's rows stop at 62 °C; the alert fired at 91 °C.
        let rows = vec![point(1000.0, 61.0), point(1030.0, 62.0)];
        let s = history_with_reading(rows.clone(), Some(91.0), 30.0, 1_000_000, 1_120_001)
            .expect("a history");
        assert_eq!(s.max, 91.0);
        assert_eq!(s.min, 61.0);
        assert_eq!(s.points.last(), Some(&Some(91.0)));
        // No rows yet: the reading alone.
        let s = history_with_reading(Vec::new(), Some(91.0), 30.0, 1_000_000, 1_120_001)
            .expect("a history");
        assert_eq!((s.min, s.avg, s.max), (91.0, 91.0, 91.0));
        // No reading: the rows as they are; neither: no history.
        let s = history_with_reading(rows, None, 30.0, 1_000_000, 1_120_001).expect("rows");
        assert_eq!(s.max, 62.0);
        assert!(history_with_reading(Vec::new(), None, 30.0, 1_000_000, 1_120_001).is_none());
    }
}
