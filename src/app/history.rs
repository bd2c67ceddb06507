//! `gpuwatch history` and `gpuwatch events`: read the history database
//! directly (read-only; works whether the agent runs or not).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};

use crate::config::Config;
use crate::history::chart::sparkline;
use crate::history::query::{self, GpuSelector, Series};
use crate::history::{catalog, default_path, Store};
use crate::timespec::{format_rfc3339_seconds, Step, Timestamp};

/// Output format of the list commands (`events`, `alerts`, `silence list`):
/// rows have no series to put in CSV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    /// Aligned columns.
    Table,
    /// JSON, as the HTTP API returns it.
    Json,
}

/// Output format of `history` (a series).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// A table with a sparkline.
    Table,
    /// Comma-separated values.
    Csv,
    /// JSON, as the HTTP API returns it.
    Json,
}

/// Where the database is and which config names it.
#[derive(Debug, Clone, Default)]
pub struct DbOptions {
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--db`.
    pub db: Option<PathBuf>,
}

/// `gpuwatch history`.
#[derive(Debug, Clone)]
pub struct HistoryOptions {
    /// Database.
    pub db: DbOptions,
    /// GPU index or UUID.
    pub gpu: String,
    /// Metric name.
    pub metric: String,
    /// Start: a duration ago or a time.
    pub since: String,
    /// End.
    pub until: String,
    /// Step.
    pub step: Option<String>,
    /// Output.
    pub format: OutputFormat,
}

/// `gpuwatch events`.
#[derive(Debug, Clone)]
pub struct EventsOptions {
    /// Database.
    pub db: DbOptions,
    /// Start.
    pub since: String,
    /// End.
    pub until: String,
    /// Only this GPU.
    pub gpu: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Output (table or json).
    pub format: ListFormat,
}

/// The agent's database: `--db`, else the config's history.path, else the
/// default file (the simulated one when only that exists).
pub(crate) fn database(
    options: &DbOptions,
) -> anyhow::Result<(PathBuf, crate::history::Retention)> {
    let config = Config::load(options.config.as_deref())?;
    let path = options
        .db
        .clone()
        .or(config.history.path.clone())
        .unwrap_or_else(|| {
            let real = default_path(false);
            let simulated = default_path(true);
            if !real.exists() && simulated.exists() {
                eprintln!(
                    "Reading the simulated history at {} (no real one at {}).",
                    simulated.display(),
                    real.display()
                );
                simulated
            } else {
                real
            }
        });
    Ok((path, config.history.retention))
}

/// Opens the database read-only, with a runtime to query it on.
pub(crate) fn open(path: &Path) -> anyhow::Result<(tokio::runtime::Runtime, Store)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let store = runtime.block_on(Store::open_read_only(path))?;
    Ok((runtime, store))
}

/// Unix seconds as RFC 3339 (seconds); never panics (a time outside
/// 1970..9999 read from the database is clamped).
pub(crate) fn time(seconds: f64) -> String {
    format_rfc3339_seconds(seconds)
}

fn number(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| {
        if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    })
}

/// Prints one metric of one GPU over time.
pub fn history(options: HistoryOptions) -> anyhow::Result<()> {
    let field = catalog::field(&options.metric).ok_or_else(|| {
        anyhow!(
            "--metric {}: unknown metric; one of {}",
            options.metric,
            catalog::names().join(", ")
        )
    })?;
    let gpu: GpuSelector = options.gpu.parse().map_err(|m| anyhow!("--gpu: {m}"))?;
    let now = Timestamp::now();
    let from = Timestamp::parse(&options.since, now).map_err(|e| anyhow!("--since: {e}"))?;
    let to = Timestamp::parse(&options.until, now).map_err(|e| anyhow!("--until: {e}"))?;
    let step = options
        .step
        .as_deref()
        .map(Step::parse)
        .transpose()
        .map_err(|e| anyhow!("--step: {e}"))?
        .map(Step::get);
    let (path, retention) = database(&options.db)?;
    let (runtime, store) = open(&path)?;
    let series = runtime
        .block_on(query::series(
            &store.pool,
            &gpu,
            field,
            from.as_ms(),
            to.as_ms(),
            step,
            retention,
            now.as_ms(),
        ))
        .map_err(|e| anyhow!("{e}"))?;
    print!("{}", render_series(&series, options.format)?);
    Ok(())
}

/// Renders a series as a table (with a sparkline), CSV or JSON.
pub fn render_series(series: &Series, format: OutputFormat) -> anyhow::Result<String> {
    let mut out = String::new();
    match format {
        OutputFormat::Json => out = serde_json::to_string_pretty(series)? + "\n",
        OutputFormat::Csv => {
            out.push_str("time,avg,min,max,last\n");
            for p in &series.points {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{}",
                    time(p.t),
                    number(p.avg),
                    number(p.min),
                    number(p.max),
                    number(p.last)
                );
            }
        }
        OutputFormat::Table => {
            let _ = writeln!(
                out,
                "GPU {} {} ({}) · {} [{}] · {} tier, step {}s · {} → {}",
                series.gpu.index,
                series.gpu.name.as_deref().unwrap_or("?"),
                series.gpu.uuid,
                series.metric,
                series.unit,
                match series.tier {
                    query::Tier::Raw => "raw",
                    query::Tier::Minute => "1-minute",
                    query::Tier::Hour => "1-hour",
                },
                series.step_seconds,
                time(series.from),
                time(series.to),
            );
            if series.points.is_empty() {
                out.push_str("no data in this range\n");
                return Ok(out);
            }
            let values: Vec<Option<f64>> = series.points.iter().map(|p| p.avg.or(p.last)).collect();
            let known: Vec<f64> = values.iter().flatten().copied().collect();
            let lo = known.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = known.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let _ = writeln!(
                out,
                "{}  min {} max {} last {}",
                sparkline(&values, 60),
                number(lo.is_finite().then_some(lo)),
                number(hi.is_finite().then_some(hi)),
                number(values.iter().rev().flatten().next().copied()),
            );
            let _ = writeln!(
                out,
                "{:<21} {:>10} {:>10} {:>10} {:>10}",
                "time", "avg", "min", "max", "last"
            );
            for p in &series.points {
                let _ = writeln!(
                    out,
                    "{:<21} {:>10} {:>10} {:>10} {:>10}",
                    time(p.t),
                    number(p.avg),
                    number(p.min),
                    number(p.max),
                    number(p.last)
                );
            }
        }
    }
    Ok(out)
}

/// Prints events.
pub fn events(options: EventsOptions) -> anyhow::Result<()> {
    let now = Timestamp::now();
    let from = Timestamp::parse(&options.since, now).map_err(|e| anyhow!("--since: {e}"))?;
    let to = Timestamp::parse(&options.until, now).map_err(|e| anyhow!("--until: {e}"))?;
    let gpu: Option<GpuSelector> = options
        .gpu
        .as_deref()
        .map(str::parse)
        .transpose()
        .map_err(|e: query::EmptyGpuSelector| anyhow!("--gpu: {e}"))?;
    let (path, _) = database(&options.db)?;
    let (runtime, store) = open(&path)?;
    let events = runtime
        .block_on(query::events(
            &store.pool,
            from.as_ms(),
            to.as_ms(),
            gpu.as_ref(),
            options.kind.as_deref(),
            100_000,
        ))
        .map_err(|e| anyhow!("{e}"))?;
    if options.format == ListFormat::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "events": events }))?
        );
        return Ok(());
    }
    print!("{}", render_events(&events));
    Ok(())
}

/// Renders events as a table. Text from outside (the kernel log's Xid text,
/// process names) has its control characters escaped: a hostile line cannot
/// move the cursor or retitle the terminal.
pub fn render_events(events: &[query::Event]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<21} {:<14} {:>4} {:>8} {:>8}  detail",
        "time", "kind", "gpu", "code", "value"
    );
    for e in events {
        let detail = match (e.action, e.description) {
            (Some(action), Some(description)) => format!(
                "{action}: {description}{}",
                e.detail
                    .as_deref()
                    .map_or_else(String::new, |d| format!(" ({d})"))
            ),
            _ => e.detail.clone().unwrap_or_default(),
        };
        let _ = writeln!(
            out,
            "{:<21} {:<14} {:>4} {:>8} {:>8}  {}",
            time(e.t),
            crate::escape::control_chars(&e.kind),
            e.gpu.map_or_else(|| "-".into(), |g| g.to_string()),
            e.code.map_or_else(String::new, |c| c.to_string()),
            e.value.map_or_else(String::new, |v| v.to_string()),
            crate::escape::control_chars(&detail),
        );
    }
    if events.is_empty() {
        out.push_str("no events in this range\n");
    }
    out
}

#[cfg(test)]
mod event_tests {
    use super::*;

    #[test]
    fn terminal_escapes_in_event_text_are_escaped() {
        let event = query::Event {
            t: 1_700_000_000.0,
            kind: "xid".into(),
            gpu: Some(0),
            uuid: None,
            code: Some(13),
            value: Some(1),
            detail: Some("pid=1, name=\u{1b}]0;owned\u{7}x, \u{1b}[2Jgone\u{9b}1m".into()),
            action: None,
            description: None,
        };
        let text = render_events(&[event]);
        assert!(
            !text.contains(['\u{1b}', '\u{7}', '\u{9b}']),
            "raw control characters reach the terminal: {text:?}"
        );
        assert!(text.contains("\\u{1b}]0;owned\\u{7}x"), "{text}");
        assert!(render_events(&[]).contains("no events in this range"));
    }
}
