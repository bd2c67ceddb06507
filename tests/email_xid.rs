//! An Xid alert's email, end to end against a real SMTP server (Debian's
//! python3-aiosmtpd, `tests/smtp/sink.py`): it says what to do first
//! (NVIDIA's action from the Xid catalog) and what the Xid means.

mod common;
mod smtp;

use std::time::Duration;

use common::{free_port, Agent};
use smtp::{Options, Sink};

const LONG: Duration = Duration::from_secs(40);

#[test]
fn an_xid_email_carries_nvidias_action_and_description() {
    smtp::require_aiosmtpd();
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let sink = Sink::start(&dir.path().join("mail"), port, Options::default());
    let config = dir.path().join("gpuwatch.toml");
    std::fs::write(
        &config,
        format!(
            "[[receivers]]\nname = \"mail\"\ntype = \"email\"\nsmarthost = \"127.0.0.1:{port}\"\n\
             from = \"gpuwatch <gpuwatch@example.com>\"\nto = [\"ops@example.com\"]\n\
             timeout = \"5s\"\nretry_min = \"200ms\"\nretry_max = \"1s\"\ntls = \"none\"\n"
        ),
    )
    .expect("config");
    let db = dir.path().join("history.db");
    // Scenario time from 25 s: GPU 2's Xid 94 (a contained ECC error,
    // RESTART_APP) comes 5 s in.
    let _agent = Agent::start(
        "faults",
        &[
            "--config",
            config.to_str().expect("utf-8"),
            "--history-db",
            db.to_str().expect("utf-8"),
        ],
        &[("GPUWATCH_SIM_START", "25")],
    );
    let mail = sink.wait_for("a firing GpuXidContained email", LONG, |m| {
        m.subject().starts_with("[FIRING] GpuXidContained ")
    });
    let (text, html) = mail.parts();
    assert!(text.contains("What to do first: RESTART_APP\n"), "{text}");
    let xid = text
        .lines()
        .find_map(|l| l.strip_prefix("Xid:"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no Xid row in\n{text}"));
    let catalog = gpuwatch::health::catalog::lookup(94).expect("Xid 94 is in the catalog");
    assert_eq!(xid, catalog.description, "{text}");
    assert!(
        html.contains("<strong>What to do first: RESTART_APP</strong>"),
        "{html}"
    );
}
