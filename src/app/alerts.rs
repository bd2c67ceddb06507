//! `gpuwatch alerts`: the alerts from the history database (the state the
//! agent last saved, marked silenced or inhibited) and their recent
//! transitions. Reads the database directly, read-only, like `history` and
//! `events`: it works whether the agent runs or not.

use std::time::SystemTime;

use anyhow::anyhow;
use serde_json::Value;

use crate::alerting::transition_log::{transitions, Filter};
use crate::timespec::Timestamp;

use super::history::{database, open, time, DbOptions, ListFormat};

/// `gpuwatch alerts`.
#[derive(Debug, Clone)]
pub struct AlertsOptions {
    /// Database.
    pub db: DbOptions,
    /// History from.
    pub since: String,
    /// History to.
    pub until: String,
    /// Only this rule.
    pub alertname: Option<String>,
    /// Only this GPU (index or UUID).
    pub gpu: Option<String>,
    /// Output.
    pub format: ListFormat,
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Number(n) => n
            .as_f64()
            .map(|v| {
                if v.fract() == 0.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.2}")
                }
            })
            .unwrap_or_default(),
        other => other.to_string(),
    }
}

/// Prints the alerts and their history.
pub fn alerts(options: AlertsOptions) -> anyhow::Result<()> {
    let now = Timestamp::now();
    let from = Timestamp::parse(&options.since, now).map_err(|e| anyhow!("--since: {e}"))?;
    let until = Timestamp::parse(&options.until, now).map_err(|e| anyhow!("--until: {e}"))?;
    let from_ms = from.as_ms();
    // `--until` is inclusive; the filter's end is not. In range: no overflow.
    let to_ms = until.as_ms().saturating_add(1);
    let (path, _) = database(&options.db)?;
    let (runtime, store) = open(&path)?;
    let state = runtime
        .block_on(crate::alerting::saved_state(&store.pool))
        .map_err(|e| anyhow!("cannot read the alert state from {}: {e}", path.display()))?
        .unwrap_or_default();
    let silences = runtime
        .block_on(crate::alerting::silence_store::live(&store.pool, now))
        .map_err(|e| anyhow!("cannot read the silences from {}: {e}", path.display()))?;
    let filter = Filter {
        from_ms,
        to_ms,
        alertname: options.alertname.clone(),
        gpu: options.gpu.clone(),
        limit: 100_000,
    };
    let mut records = runtime
        .block_on(transitions(&store.pool, &filter))
        .map_err(|e| anyhow!("cannot read the alert history from {}: {e}", path.display()))?;
    // Oldest first, as `gpuwatch events` lists.
    records.reverse();
    let keep = |a: &Value| {
        options
            .alertname
            .as_ref()
            .is_none_or(|name| a["alertname"] == name.as_str())
            && options.gpu.as_ref().is_none_or(|gpu| {
                a["labels"]["gpu"] == gpu.as_str() || a["labels"]["uuid"] == gpu.as_str()
            })
    };
    let active: Vec<Value> =
        crate::alerting::view::alerts_json(&state, &silences, SystemTime::now())
            .into_iter()
            .filter(keep)
            .collect();
    if options.format == ListFormat::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "alerts": active,
                "transitions": records,
            }))?
        );
        return Ok(());
    }
    println!("Alerts (as the agent last saved them):");
    if active.is_empty() {
        println!("  none");
    } else {
        println!(
            "{:<9} {:<28} {:>4} {:<9} {:<21} {:>10}  note",
            "state", "alert", "gpu", "severity", "since", "value"
        );
        for a in &active {
            let since = a["active_since"]
                .as_f64()
                .or(a["resolved_at"].as_f64())
                .map(time)
                .unwrap_or_default();
            let mut note = Vec::new();
            if let Some(ids) = a["silenced_by"].as_array().filter(|i| !i.is_empty()) {
                let ids: Vec<String> = ids.iter().map(text).collect();
                note.push(format!("silenced by {}", ids.join(", ")));
            }
            if let Some(by) = a["inhibited_by"].as_array().and_then(|b| b.first()) {
                note.push(format!("inhibited by {}", text(by)));
            }
            println!(
                "{:<9} {:<28} {:>4} {:<9} {:<21} {:>10}  {}",
                text(&a["state"]),
                text(&a["alertname"]),
                text(&a["labels"]["gpu"]),
                text(&a["labels"]["severity"]),
                since,
                text(&a["value"]),
                note.join("; ")
            );
        }
    }
    println!();
    println!(
        "History {} → {}:",
        time(from_ms as f64 / 1000.0),
        time(now.as_ms().min(to_ms) as f64 / 1000.0)
    );
    if records.is_empty() {
        println!("  no transitions in this range");
        return Ok(());
    }
    println!(
        "{:<21} {:<28} {:>4} {:<20} {:>10}",
        "time", "alert", "gpu", "change", "value"
    );
    for r in &records {
        println!(
            "{:<21} {:<28} {:>4} {:<20} {:>10}",
            time(r.t),
            r.alertname,
            r.gpu.as_deref().unwrap_or("-"),
            format!("{} → {}", r.from, r.to),
            r.value
                .map(|v| text(&serde_json::json!(v)))
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// The Xid escalations in the alert state the agent last saved to the
/// history database at `path` (what `GpuXidRecurring` decided), so that a
/// one-shot `gpuwatch status` judges health as the running agent does.
/// None where there is no database yet; a database that cannot be read is
/// said on standard error and leaves the escalations out.
pub fn saved_escalations(path: &std::path::Path) -> crate::health::escalation::Escalated {
    if !path.exists() {
        return Default::default();
    }
    let read = open(path).and_then(|(runtime, store)| {
        runtime
            .block_on(crate::alerting::saved_state(&store.pool))
            .map_err(anyhow::Error::from)
    });
    match read {
        Ok(state) => state.map(|s| s.xid_escalations()).unwrap_or_default(),
        Err(e) => {
            eprintln!(
                "Cannot read the saved alert state from {}: {}. The health verdict below leaves out Xid codes that came back after resets (GpuXidRecurring); check the file's permissions or pass the agent's database with history.path.",
                path.display(),
                crate::escape::control_chars(&format!("{e:#}"))
            );
            Default::default()
        }
    }
}
