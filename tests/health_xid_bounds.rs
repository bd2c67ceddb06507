//! Bounded Xid series end to end (issue 22 §2): a flood of made-up Xid codes
//! on one GPU (1 000 distinct codes outside NVIDIA's catalog, from the
//! kernel log the agent follows) yields at most 32 series of their own and
//! one `xid="other"`, a `gpuwatch_xid_folded_total` that says how many were
//! folded, and a bounded `/api/v1/gpus` and `/api/v1/health`; a catalog
//! code arriving after the flood is still counted on its own (and still
//! makes the GPU unhealthy). Before the bound every code was a series of
//! its own, an entry in the GPU list and a reason in the verdict.

mod common;

use std::io::Write;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(90);
/// Made-up codes, far outside the catalog (which ends in the low hundreds).
const FIRST_CODE: u64 = 100_000;
const FLOOD: u64 = 1_000;
/// The table's bound on unknown codes per GPU (`MAX_UNKNOWN_XID_CODES`).
const BOUND: usize = 32;

#[test]
fn a_thousand_made_up_xid_codes_stay_bounded_in_metrics_and_the_api() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (agent, kmsg) = common::agent_following_kmsg(dir.path(), "health", LONG);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&kmsg)
        .expect("kmsg");
    // Stamped with the kernel's uptime now: the errors are recent (an Xid
    // counts against the verdict for 30 minutes from its own time).
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .expect("/proc/uptime")
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .expect("uptime seconds");
    let mut text = String::new();
    for code in FIRST_CODE..FIRST_CODE + FLOOD {
        text.push_str(&format!(
            "[{uptime:12.6}] NVRM: Xid (PCI:0000:18:00): {code}, pid=4242, name=flood, made up.\n"
        ));
    }
    text.push_str(&format!("[{uptime:12.6}] NVRM: Xid (PCI:0000:18:00): 79, pid=4242, name=train.py, GPU has fallen off the bus.\n"));
    file.write_all(text.as_bytes()).expect("write");
    drop(file);

    let gpu0 = [("gpu", "0")];
    let metrics = agent.wait_for("every Xid counted", LONG, |m| {
        let total: f64 = m
            .find("gpuwatch_xid_errors_total", &gpu0)
            .iter()
            .map(|s| s.value)
            .sum();
        total == (FLOOD + 1) as f64
    });
    let series = metrics.find("gpuwatch_xid_errors_total", &gpu0);
    // 32 made-up codes on their own, Xid 79 (in the catalog: never
    // folded), and "other".
    assert_eq!(series.len(), BOUND + 2, "series of GPU 0's Xids");
    assert_eq!(
        metrics.value("gpuwatch_xid_errors_total", &[("gpu", "0"), ("xid", "79")]),
        Some(1.0)
    );
    let folded = (FLOOD as usize - BOUND) as f64;
    assert_eq!(
        metrics.value(
            "gpuwatch_xid_errors_total",
            &[("gpu", "0"), ("xid", "other")]
        ),
        Some(folded)
    );
    assert_eq!(
        metrics.value("gpuwatch_xid_folded_total", &[("kind", "xid")]),
        Some(folded)
    );
    assert_eq!(
        metrics
            .find("gpuwatch_xid_last_seen_timestamp_seconds", &gpu0)
            .len(),
        BOUND + 2
    );

    // The GPU list the web view polls every 2 s: the same bounded counts,
    // and a bounded verdict.
    let (status, body) = agent.get("/api/v1/gpus");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.len() < 32 << 10,
        "/api/v1/gpus is {} bytes",
        body.len()
    );
    eprintln!(
        "after {} Xids of {} codes: /metrics {} bytes, {} Xid series on GPU 0; /api/v1/gpus {} bytes",
        FLOOD + 1,
        FLOOD + 1,
        metrics.text.len(),
        series.len(),
        body.len()
    );
    let gpus: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let first = gpus
        .as_array()
        .or_else(|| gpus["gpus"].as_array())
        .and_then(|list| list.iter().find(|g| g["index"] == 0))
        .expect("GPU 0 in /api/v1/gpus")
        .clone();
    let xids = first["xid_errors"].as_array().expect("xid_errors");
    assert_eq!(xids.len(), BOUND + 1, "{xids:?}");
    assert_eq!(first["xid_other"]["count"], folded as u64);
    let (status, body) = agent.get("/api/v1/health");
    assert_eq!(status, 200, "{body}");
    let health: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let gpu = &health["gpus"][0];
    assert_eq!(gpu["state"], "unhealthy", "Xid 79 still counts: {body}");
    let reasons = gpu["reasons"].as_array().expect("reasons");
    assert!(reasons.len() <= BOUND + 4, "{} reasons", reasons.len());
    // Codes beyond the catalog get no advice rather than a guess.
    for reason in reasons {
        let text = reason["text"].as_str().unwrap_or_default();
        if text.contains("not in NVIDIA's catalog") || text.contains("\"other\"") {
            assert_eq!(reason["action"], "unknown", "{reason}");
        }
    }
}
