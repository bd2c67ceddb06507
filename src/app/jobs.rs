//! `gpuwatch jobs`: who used the GPUs and how well, from the history
//! database — one line per workload, like Slurm's `seff` for GPUs.

use std::fmt::Write as _;

use anyhow::anyhow;

use crate::escape::control_chars;
use crate::gpu::WorkloadKind;
use crate::history::workloads::{self, WorkloadFilter, WorkloadRecord};
use crate::timespec::Timestamp;

use super::history::{database, open, time, DbOptions};

/// Most workloads listed.
const LIMIT: i64 = 100_000;

/// Output format of `gpuwatch jobs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum JobsFormat {
    /// Aligned columns.
    Table,
    /// Comma-separated values with a header line.
    Csv,
    /// A JSON array of objects, as `/api/v1/workloads` returns them.
    Json,
}

/// Order of `gpuwatch jobs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum JobsSort {
    /// Newest start first.
    Started,
    /// Worst efficiency first (workloads that held no second last).
    Efficiency,
    /// Most GPU-seconds held first.
    Held,
}

/// `gpuwatch jobs`.
#[derive(Debug, Clone)]
pub struct JobsOptions {
    /// Database.
    pub db: DbOptions,
    /// Start.
    pub since: String,
    /// End.
    pub until: String,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only this user.
    pub user: Option<String>,
    /// Only this GPU index.
    pub gpu: Option<u32>,
    /// Output.
    pub format: JobsFormat,
    /// Order.
    pub sort: JobsSort,
}

/// Prints the workloads `options` asks for.
pub fn jobs(options: JobsOptions) -> anyhow::Result<()> {
    let now = Timestamp::now();
    let from = Timestamp::parse(&options.since, now).map_err(|e| anyhow!("--since: {e}"))?;
    let to = Timestamp::parse(&options.until, now).map_err(|e| anyhow!("--until: {e}"))?;
    let kind = match options.kind.as_deref() {
        Some(name) => Some(WorkloadKind::parse(name).ok_or_else(|| {
            anyhow!(
                "--kind: {name:?} is not a workload kind; use slurm_job, pod, container or process"
            )
        })?),
        None => None,
    };
    let filter = WorkloadFilter {
        from_ms: from.as_ms(),
        to_ms: to.as_ms(),
        kind,
        user: options.user.clone(),
        gpu: options.gpu,
        limit: LIMIT,
    };
    let (path, _) = database(&options.db)?;
    let (runtime, store) = open(&path)?;
    let mut found = runtime
        .block_on(workloads::workloads(&store.pool, &filter))
        .map_err(|e| anyhow!("{e}"))?;
    sort(&mut found, options.sort);
    print!("{}", render(&found, options.format)?);
    Ok(())
}

/// Sorts `records` as asked (they come newest first).
fn sort(records: &mut [WorkloadRecord], by: JobsSort) {
    match by {
        JobsSort::Started => {}
        JobsSort::Efficiency => records.sort_by(|a, b| {
            let key = |r: &WorkloadRecord| r.efficiency.unwrap_or(f64::INFINITY);
            key(a).total_cmp(&key(b))
        }),
        JobsSort::Held => records.sort_by(|a, b| b.gpu_seconds.total_cmp(&a.gpu_seconds)),
    }
}

/// The text `gpuwatch jobs` prints.
pub fn render(records: &[WorkloadRecord], format: JobsFormat) -> anyhow::Result<String> {
    let mut out = String::new();
    match format {
        JobsFormat::Json => {
            out = serde_json::to_string_pretty(records)?;
            out.push('\n');
        }
        JobsFormat::Csv => {
            out.push_str("kind,id,user,account,namespace,gpus,started,ended,gpu_seconds,sm_active_seconds,efficiency,energy_joules,peak_memory_bytes,xid_errors\n");
            for r in records {
                let fields = [
                    r.kind.clone(),
                    r.id.clone(),
                    r.user.clone().unwrap_or_default(),
                    r.account.clone().unwrap_or_default(),
                    r.namespace.clone().unwrap_or_default(),
                    r.gpus.join(" "),
                    time(r.started),
                    r.ended.map(time).unwrap_or_default(),
                    format!("{:.1}", r.gpu_seconds),
                    format!("{:.1}", r.sm_active_seconds),
                    r.efficiency.map(|e| format!("{e:.3}")).unwrap_or_default(),
                    format!("{:.0}", r.energy_joules),
                    r.peak_memory_bytes.to_string(),
                    r.xid_errors.to_string(),
                ];
                let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
                let _ = writeln!(out, "{}", line.join(","));
            }
        }
        JobsFormat::Table => {
            let _ = writeln!(
                out,
                "{:<10} {:<24} {:<12} {:<8} {:<21} {:>10} {:>10} {:>6} {:>10} {:>9}",
                "kind",
                "id",
                "user",
                "gpus",
                "ended",
                "held",
                "sm-active",
                "eff",
                "energy",
                "peak mem"
            );
            for r in records {
                let _ = writeln!(
                    out,
                    "{:<10} {:<24} {:<12} {:<8} {:<21} {:>10} {:>10} {:>6} {:>10} {:>9}",
                    r.kind,
                    cut(&control_chars(&r.id), 24),
                    cut(&control_chars(r.user.as_deref().unwrap_or("-")), 12),
                    cut(&r.gpus.join(","), 8),
                    r.ended.map_or_else(|| "running".to_string(), time),
                    duration(r.gpu_seconds),
                    duration(r.sm_active_seconds),
                    r.efficiency
                        .map_or_else(|| "-".to_string(), |e| format!("{:.0}%", e * 100.0)),
                    energy(r.energy_joules),
                    memory(r.peak_memory_bytes),
                );
            }
            if records.is_empty() {
                out.push_str("no workloads in this range\n");
            }
        }
    }
    Ok(out)
}

/// A CSV field, quoted when it holds a comma, a quote or a line break;
/// control characters escaped.
fn csv_field(text: &str) -> String {
    let text = control_chars(text);
    if text.contains([',', '"']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.into_owned()
    }
}

fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// GPU-seconds as `h:mm:ss`.
fn duration(seconds: f64) -> String {
    let total = seconds.max(0.0).round() as u64;
    format!("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60)
}

fn energy(joules: f64) -> String {
    if joules >= 3.6e6 {
        format!("{:.2} kWh", joules / 3.6e6)
    } else {
        format!("{:.1} kJ", joules / 1000.0)
    }
}

fn memory(bytes: i64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, efficiency: Option<f64>, held: f64) -> WorkloadRecord {
        WorkloadRecord {
            kind: "slurm_job".into(),
            id: id.into(),
            user: Some("al,ice".into()),
            account: None,
            partition: None,
            namespace: None,
            pod: None,
            command: None,
            gpus: vec!["0".into(), "1.2".into()],
            started: 1_700_000_000.0,
            ended: None,
            gpu_seconds: held,
            sm_active_seconds: held * efficiency.unwrap_or(0.0),
            energy_joules: 12_000.0,
            peak_memory_bytes: 1 << 30,
            efficiency,
            xid_errors: 0,
            throttle_seconds: 0.0,
            dra_claims: Vec::new(),
        }
    }

    #[test]
    fn worst_efficiency_first_and_every_format() {
        let mut records = vec![
            record("1", Some(0.9), 100.0),
            record("2", None, 0.0),
            record("3", Some(0.1), 7200.0),
        ];
        sort(&mut records, JobsSort::Efficiency);
        let ids: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["3", "1", "2"]);
        let table = render(&records, JobsFormat::Table).expect("table");
        let first = table.lines().nth(1).expect("a row");
        assert!(
            first.contains("2:00:00") && first.contains("10%") && first.contains("running"),
            "{table}"
        );
        let csv = render(&records, JobsFormat::Csv).expect("csv");
        assert!(
            csv.lines()
                .nth(1)
                .expect("row")
                .starts_with("slurm_job,3,\"al,ice\",,,0 1.2,"),
            "{csv}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&render(&records, JobsFormat::Json).expect("json")).expect("JSON");
        for key in [
            "kind",
            "id",
            "user",
            "gpus",
            "started",
            "ended",
            "gpu_seconds",
            "sm_active_seconds",
            "energy_joules",
            "peak_memory_bytes",
            "efficiency",
        ] {
            assert!(json[0].get(key).is_some(), "{key} missing: {json}");
        }
        assert!(json[0]["ended"].is_null());
        assert_eq!(
            render(&[], JobsFormat::Table)
                .expect("table")
                .lines()
                .last(),
            Some("no workloads in this range")
        );
    }
}
