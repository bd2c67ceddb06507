//! Reading history: one metric of one GPU over a range at a step, from the
//! tier that covers the range at that resolution; and events.

use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;
// The series SQL names a catalogue column and a tier table, never input.
use sqlx::{AssertSqlSafe, Row, SqlitePool};

use crate::timespec::{format_rfc3339_ms, Step, Timestamp};

use super::catalog::{Field, Kind};
use super::retention::Retention;

/// Why a query cannot be answered.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// A parameter is wrong; the API answers 400.
    #[error("{parameter}: {message}")]
    BadParameter {
        /// Which parameter.
        parameter: &'static str,
        /// Why.
        message: String,
    },
    /// The database failed.
    #[error("reading the history database failed: {0}")]
    Sql(#[from] sqlx::Error),
}

fn bad(parameter: &'static str, message: impl Into<String>) -> QueryError {
    QueryError::BadParameter {
        parameter,
        message: message.into(),
    }
}

/// A GPU named by NVML index (as last seen) or UUID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuSelector {
    /// NVML index.
    Index(u32),
    /// UUID.
    Uuid(String),
}

/// Why a GPU selector is refused: it is empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("give a GPU index (0, 1, ...) or UUID")]
pub struct EmptyGpuSelector;

impl FromStr for GpuSelector {
    type Err = EmptyGpuSelector;

    fn from_str(text: &str) -> Result<Self, EmptyGpuSelector> {
        let text = text.trim();
        if text.is_empty() {
            return Err(EmptyGpuSelector);
        }
        Ok(match text.parse::<u32>() {
            Ok(index) => GpuSelector::Index(index),
            Err(_) => GpuSelector::Uuid(text.to_string()),
        })
    }
}

/// A stored GPU.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GpuRef {
    #[serde(skip)]
    id: i64,
    /// NVML index when last seen.
    pub index: i64,
    /// UUID.
    pub uuid: String,
    /// Product name.
    pub name: Option<String>,
}

/// Finds the GPU `selector` names.
pub async fn resolve_gpu(pool: &SqlitePool, selector: &GpuSelector) -> Result<GpuRef, QueryError> {
    let row = match selector {
        GpuSelector::Index(i) => {
            sqlx::query("SELECT id, last_index, uuid, name FROM gpu WHERE last_index = ? ORDER BY last_seen_ms DESC LIMIT 1")
                .bind(i64::from(*i))
                .fetch_optional(pool)
                .await?
        }
        GpuSelector::Uuid(u) => {
            sqlx::query("SELECT id, last_index, uuid, name FROM gpu WHERE uuid = ?")
                .bind(u)
                .fetch_optional(pool)
                .await?
        }
    };
    let Some(row) = row else {
        let known: Vec<String> =
            sqlx::query("SELECT last_index, uuid FROM gpu ORDER BY last_index")
                .fetch_all(pool)
                .await?
                .iter()
                .filter_map(|r| {
                    Some(format!(
                        "{} ({})",
                        r.try_get::<i64, _>(0).ok()?,
                        r.try_get::<String, _>(1).ok()?
                    ))
                })
                .collect();
        return Err(bad(
            "gpu",
            format!(
                "no such GPU in the history; known: {}",
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            ),
        ));
    };
    Ok(GpuRef {
        id: row.try_get("id")?,
        index: row.try_get("last_index")?,
        uuid: row.try_get("uuid")?,
        name: row.try_get("name")?,
    })
}

/// Which table a series came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Tier {
    /// Raw samples.
    #[serde(rename = "raw")]
    Raw,
    /// 1-minute rollups.
    #[serde(rename = "1m")]
    Minute,
    /// 1-hour rollups.
    #[serde(rename = "1h")]
    Hour,
}

/// One step of a series. Gauges have avg / min / max / last; counters and
/// states have last; clock events have the OR of the bits in last.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Point {
    /// Start of the step, Unix seconds.
    pub t: f64,
    /// Average over the step.
    pub avg: Option<f64>,
    /// Minimum.
    pub min: Option<f64>,
    /// Maximum.
    pub max: Option<f64>,
    /// Last value in the step.
    pub last: Option<f64>,
}

/// A metric of a GPU over time.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// The GPU.
    pub gpu: GpuRef,
    /// Metric name.
    pub metric: &'static str,
    /// Unit of the values.
    pub unit: &'static str,
    /// Where the data came from.
    pub tier: Tier,
    /// Seconds per point.
    pub step_seconds: f64,
    /// Range start, Unix seconds.
    pub from: f64,
    /// Range end, Unix seconds.
    pub to: f64,
    /// One point per step that has data.
    pub points: Vec<Point>,
}

/// Most points one query returns (like Prometheus's limit).
pub const MAX_POINTS: i64 = 11_000;

/// Picks the tier: raw while it covers the range and the step is under a
/// minute, the minute tier while it covers it and the step is under an
/// hour, else the hour tier.
pub fn pick_tier(from_ms: i64, step_ms: i64, retention: Retention, now_ms: i64) -> Tier {
    let covers = |keep: Duration| {
        from_ms >= now_ms.saturating_sub(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX))
    };
    if step_ms < 60_000 && covers(retention.raw) {
        Tier::Raw
    } else if step_ms < 3_600_000 && covers(retention.minute) {
        Tier::Minute
    } else {
        Tier::Hour
    }
}

/// One metric of one GPU between `from_ms` and `to_ms`. The times must lie
/// in 1970..9999 and the step in 1 s..1 year (see [`crate::timespec`]);
/// anything else is a [`QueryError::BadParameter`], never an overflow.
#[allow(clippy::too_many_arguments)]
pub async fn series(
    pool: &SqlitePool,
    gpu: &GpuSelector,
    field: &'static Field,
    from_ms: i64,
    to_ms: i64,
    step: Option<Duration>,
    retention: Retention,
    now_ms: i64,
) -> Result<Series, QueryError> {
    let out_of_range = |ms: i64| {
        format!(
            "{} is outside the accepted times, 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z",
            format_rfc3339_ms(ms)
        )
    };
    let from_ms = Timestamp::from_ms(from_ms)
        .ok_or_else(|| bad("from", out_of_range(from_ms)))?
        .as_ms();
    let to_ms = Timestamp::from_ms(to_ms)
        .ok_or_else(|| bad("to", out_of_range(to_ms)))?
        .as_ms();
    let step = step
        .map(Step::new)
        .transpose()
        .map_err(|e| bad("step", e.to_string()))?;
    if to_ms <= from_ms {
        return Err(bad("from", "must be before `to`"));
    }
    // Both in 1970..9999: no overflow; the step is at least a second.
    let span = to_ms - from_ms;
    let mut step_ms = match step {
        Some(step) => step.as_ms(),
        None => (span / 240).max(1000),
    };
    if span / step_ms > MAX_POINTS {
        if step.is_some() {
            return Err(bad("step", format!("{} points at this step; at most {MAX_POINTS}: use a larger step or a shorter range", span / step_ms)));
        }
        step_ms = span / MAX_POINTS + 1;
    }
    let tier = pick_tier(from_ms, step_ms, retention, now_ms);
    let tier_step = match tier {
        Tier::Raw => 1000,
        Tier::Minute => 60_000,
        Tier::Hour => 3_600_000,
    };
    if step.is_none() {
        step_ms = step_ms.max(tier_step);
    }
    let gpu = resolve_gpu(pool, gpu).await?;
    let c = field.column;
    // Values come back as REAL whatever their storage class.
    let r = |e: &str| format!("CAST({e} AS REAL)");
    let (mn, mx, av, ls) = match (tier, field.kind) {
        (Tier::Raw, _) => (r(c), r(c), r(c), r(c)),
        (_, Kind::Gauge) => (
            r(&format!("{c}_min")),
            r(&format!("{c}_max")),
            r(&format!("{c}_avg")),
            r(&format!("{c}_last")),
        ),
        (_, Kind::Bits) => (
            "NULL".into(),
            "NULL".into(),
            "NULL".into(),
            r(&format!("{c}_any")),
        ),
        (_, Kind::Counter | Kind::State) => (
            "NULL".into(),
            "NULL".into(),
            "NULL".into(),
            r(&format!("{c}_last")),
        ),
    };
    let n = if tier == Tier::Raw { "1" } else { "n" };
    let sql = format!(
        "SELECT ts, {n} AS n, {mn} AS mn, {mx} AS mx, {av} AS av, {ls} AS ls FROM {} WHERE gpu = ? AND ts >= ? AND ts < ? ORDER BY ts",
        table(tier)
    );
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(gpu.id)
        .bind(from_ms - from_ms.rem_euclid(tier_step))
        .bind(to_ms)
        .fetch_all(pool)
        .await?;
    let mut points: Vec<Point> = Vec::new();
    let mut weights: Vec<f64> = Vec::new();
    let scale = field.scale;
    for row in rows {
        let ts: i64 = row.try_get("ts")?;
        let n: i64 = row.try_get("n")?;
        let value = |name: &str| -> Result<Option<f64>, sqlx::Error> {
            Ok(row.try_get::<Option<f64>, _>(name)?.map(|v| v / scale))
        };
        let (mn, mx, av, ls) = (value("mn")?, value("mx")?, value("av")?, value("ls")?);
        let bits = field.kind == Kind::Bits;
        let (mn, mx, av) = match field.kind {
            Kind::Gauge => (mn, mx, av),
            _ => (None, None, None),
        };
        let ts = ts.max(from_ms);
        let start = ts - ts.rem_euclid(step_ms);
        let t = start as f64 / 1000.0;
        match points.last_mut() {
            Some(p) if p.t == t => {
                let w = weights.last_mut().expect("a weight per point");
                p.min = opt(p.min, mn, f64::min);
                p.max = opt(p.max, mx, f64::max);
                if let Some(av) = av {
                    p.avg = Some(match p.avg {
                        Some(prev) => (prev * *w + av * n as f64) / (*w + n as f64),
                        None => av,
                    });
                    *w += n as f64;
                }
                p.last = if bits {
                    opt(p.last, ls, |a, b| ((a as i64) | (b as i64)) as f64)
                } else {
                    ls.or(p.last)
                };
            }
            _ => {
                points.push(Point {
                    t,
                    avg: av,
                    min: mn,
                    max: mx,
                    last: ls,
                });
                weights.push(if av.is_some() { n as f64 } else { 0.0 });
            }
        }
    }
    Ok(Series {
        gpu,
        metric: field.name,
        unit: field.unit,
        tier,
        step_seconds: step_ms as f64 / 1000.0,
        from: from_ms as f64 / 1000.0,
        to: to_ms as f64 / 1000.0,
        points,
    })
}

fn table(tier: Tier) -> &'static str {
    match tier {
        Tier::Raw => "sample",
        Tier::Minute => "rollup_1m",
        Tier::Hour => "rollup_1h",
    }
}

fn opt(a: Option<f64>, b: Option<f64>, f: impl Fn(f64, f64) -> f64) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(f(a, b)),
        (a, b) => a.or(b),
    }
}

/// One event.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Event {
    /// When, Unix seconds.
    pub t: f64,
    /// What happened: xid, gpu_lost, gpu_recovered, process_start, process_stop, agent_start, remediation.
    pub kind: String,
    /// NVML index of the GPU (when last seen), if the event belongs to one.
    pub gpu: Option<i64>,
    /// Its UUID.
    pub uuid: Option<String>,
    /// Xid code, or pid.
    pub code: Option<i64>,
    /// Xid count, or memory in MiB (peak, for process_stop).
    pub value: Option<i64>,
    /// Process name, loss reason, driver version; for an Xid the driver's
    /// pid, process name and text when the kernel log had them.
    pub detail: Option<String>,
    /// For an Xid in NVIDIA's catalog: its immediate action (RESTART_APP,
    /// RESET_GPU, ...). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<&'static str>,
    /// For an Xid in NVIDIA's catalog: its description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<&'static str>,
}

/// NVIDIA's catalog row of an Xid event's code.
fn xid_info(kind: &str, code: Option<i64>) -> Option<&'static crate::health::catalog::XidInfo> {
    if kind != "xid" {
        return None;
    }
    crate::health::catalog::lookup(u64::try_from(code?).ok()?)
}

/// Events between `from_ms` and `to_ms`, oldest first, at most `limit`.
pub async fn events(
    pool: &SqlitePool,
    from_ms: i64,
    to_ms: i64,
    gpu: Option<&GpuSelector>,
    kind: Option<&str>,
    limit: i64,
) -> Result<Vec<Event>, QueryError> {
    let gpu_id = match gpu {
        Some(selector) => Some(resolve_gpu(pool, selector).await?.id),
        None => None,
    };
    let rows = sqlx::query(
        "SELECT e.ts, e.kind, e.code, e.value, e.detail, g.last_index, g.uuid FROM event e LEFT JOIN gpu g ON g.id = e.gpu \
         WHERE e.ts >= ? AND e.ts < ? AND (? IS NULL OR e.gpu = ?) AND (? IS NULL OR e.kind = ?) ORDER BY e.ts, e.id LIMIT ?",
    )
    .bind(from_ms)
    .bind(to_ms)
    .bind(gpu_id)
    .bind(gpu_id)
    .bind(kind)
    .bind(kind)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            let kind: String = r.try_get("kind")?;
            let code: Option<i64> = r.try_get("code")?;
            let info = xid_info(&kind, code);
            Ok(Event {
                t: r.try_get::<i64, _>("ts")? as f64 / 1000.0,
                kind,
                gpu: r.try_get("last_index")?,
                uuid: r.try_get("uuid")?,
                code,
                value: r.try_get("value")?,
                detail: r.try_get("detail")?,
                action: info.map(|i| i.action.as_str()),
                description: info.map(|i| i.description),
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(QueryError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xid_events_carry_the_catalogs_advice() {
        let info = xid_info("xid", Some(13)).expect("in the catalog");
        assert_eq!(info.action.as_str(), "RESTART_APP");
        let fell_off = xid_info("xid", Some(79)).expect("in the catalog");
        assert_eq!(fell_off.action.as_str(), "RESTART_BM");
        assert!(
            xid_info("xid", Some(163)).is_none(),
            "a code NVIDIA has not published"
        );
        assert!(
            xid_info("process_start", Some(13)).is_none(),
            "a pid, not an Xid"
        );
        assert!(xid_info("xid", Some(-1)).is_none());
    }

    #[test]
    fn tiers_follow_range_and_step() {
        let r = Retention::default();
        let now = 10_000_000_000_i64;
        assert_eq!(pick_tier(now - 3_600_000, 1000, r, now), Tier::Raw);
        assert_eq!(pick_tier(now - 3_600_000, 60_000, r, now), Tier::Minute);
        assert_eq!(
            pick_tier(now - 3 * 86_400_000, 1000, r, now),
            Tier::Minute,
            "raw keeps 48 h"
        );
        assert_eq!(pick_tier(now - 86_400_000, 3_600_000, r, now), Tier::Hour);
        assert_eq!(
            pick_tier(now - 40 * 86_400_000, 60_000, r, now),
            Tier::Hour,
            "minutes keep 30 days"
        );
        assert_eq!("3".parse(), Ok(GpuSelector::Index(3)));
        assert_eq!("GPU-x".parse(), Ok(GpuSelector::Uuid("GPU-x".into())));
    }
}
