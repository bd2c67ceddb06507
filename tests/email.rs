//! The email receiver end to end, against a real SMTP server (Debian's
//! python3-aiosmtpd, `tests/smtp/sink.py`): the agent on the simulator
//! sends its alerts over STARTTLS (or implicit TLS) with a test CA and SMTP
//! AUTH; the server down for a while loses and repeats nothing; STARTTLS
//! missing, 5xx and 4xx replies end as the issue says.

mod common;
mod smtp;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use common::{free_port, Agent};
use gpuwatch::history::Store;
use smtp::{Mail, Options, Pki, Sink};

const LONG: Duration = Duration::from_secs(40);
const PASSWORD: &str = "smtp-s3cret-never-logged";
const PASSWORD_ENV: &str = "GPUWATCH_TEST_SMTP_PASSWORD";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// (alertname, to_state, labels) of every transition stored so far.
fn transitions(db: &Path) -> Vec<(String, String, BTreeMap<String, String>)> {
    runtime().block_on(async {
        let store = Store::open_read_only(db).await.expect("open");
        let rows: Vec<(String, String, String)> =
            sqlx::query_as("SELECT alertname, to_state, labels FROM alert_transition ORDER BY id")
                .fetch_all(&store.pool)
                .await
                .expect("transitions");
        rows.into_iter()
            .map(|(a, s, l)| (a, s, serde_json::from_str(&l).expect("labels JSON")))
            .collect()
    })
}

/// (state, attempts, last_error) of a receiver's outbox rows.
fn outbox(db: &Path, receiver: &str) -> Vec<(String, i64, Option<String>)> {
    runtime().block_on(async {
        let store = Store::open_read_only(db).await.expect("open");
        sqlx::query_as(
            "SELECT state, attempts, last_error FROM outbox WHERE receiver = ? ORDER BY id",
        )
        .bind(receiver)
        .fetch_all(&store.pool)
        .await
        .expect("outbox")
    })
}

fn receiver(name: &str, port: u16, extra: &str) -> String {
    format!(
        "[[receivers]]\nname = \"{name}\"\ntype = \"email\"\nsmarthost = \"127.0.0.1:{port}\"\n\
         from = \"gpuwatch <gpuwatch@example.com>\"\nto = [\"ops@example.com\", \"Oncall <oncall@example.com>\"]\n\
         timeout = \"5s\"\nretry_min = \"200ms\"\nretry_max = \"1s\"\n{extra}\n"
    )
}

fn write_config(dir: &Path, text: &str) -> String {
    let path = dir.join("gpuwatch.toml");
    std::fs::write(&path, text).expect("config");
    path.to_str().expect("utf-8").to_string()
}

fn count(m: &common::Metrics, receiver: &str, outcome: &str) -> f64 {
    m.value(
        "gpuwatch_notifications_total",
        &[("receiver", receiver), ("outcome", outcome)],
    )
    .unwrap_or(0.0)
}

fn depth(m: &common::Metrics, receiver: &str) -> Option<f64> {
    m.value("gpuwatch_outbox_depth", &[("receiver", receiver)])
}

/// (fingerprint, FIRING/RESOLVED) -> number of stored emails.
fn per_key(mails: &[Mail]) -> HashMap<(String, String), usize> {
    let mut counts = HashMap::new();
    for m in mails {
        let fingerprint = m.header("X-Gpuwatch-Fingerprint").unwrap_or_default();
        let status = m
            .subject()
            .split(']')
            .next()
            .unwrap_or("")
            .trim_start_matches('[')
            .to_string();
        *counts.entry((fingerprint, status)).or_insert(0) += 1;
    }
    counts
}

fn assert_once(mails: &[Mail]) {
    for (key, n) in per_key(mails) {
        assert_eq!(n, 1, "{key:?} delivered {n} times");
    }
}

#[test]
fn thermal_incident_sends_one_firing_email_over_starttls_with_the_history() {
    smtp::require_aiosmtpd();
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = Pki::new(dir.path());
    let tls = Some((pki.cert.clone(), pki.key.clone()));
    let (starttls_port, implicit_port) = (free_port(), free_port());
    let starttls = Sink::start(
        &dir.path().join("starttls"),
        starttls_port,
        Options {
            starttls: tls.clone(),
            auth: Some(format!("alerts:{PASSWORD}")),
            ..Options::default()
        },
    );
    let implicit = Sink::start(
        &dir.path().join("implicit"),
        implicit_port,
        Options {
            implicit_tls: tls,
            ..Options::default()
        },
    );
    let ca = pki.ca.display().to_string();
    let config = write_config(
        dir.path(),
        &format!(
            // History committed every second, so the email's history
            // section has the seconds before the alert fired.
            "[history]\nbatch_interval = \"1s\"\n\n[[rules]]\nname = \"GpuHwThermalSlowdown\"\nfor = \"5s\"\n\n{}{}",
            receiver(
                "mail",
                starttls_port,
                &format!(
                    "ca_file = \"{ca}\"\nhello_name = \"gpu-node.test\"\nusername = \"alerts\"\npassword_env = \"{PASSWORD_ENV}\""
                )
            ),
            receiver(
                "mail-implicit",
                implicit_port,
                &format!("tls = \"implicit\"\nca_file = \"{ca}\"")
            ),
        ),
    );
    let db = dir.path().join("history.db");
    // Scenario time from 90 s at 5x: GPU 3 passes its slowdown threshold
    // (88 °C) at 100 s and stays above it until 5 min.
    let agent = Agent::start(
        "thermal-incident",
        &[
            "--config",
            &config,
            "--history-db",
            db.to_str().expect("utf-8"),
        ],
        &[
            ("GPUWATCH_SIM_START", "90"),
            ("GPUWATCH_SIM_SPEED", "5"),
            (PASSWORD_ENV, PASSWORD),
        ],
    );
    let is_firing = |m: &Mail| m.subject().starts_with("[FIRING] GpuHwThermalSlowdown ");
    let mail = starttls.wait_for("a firing GpuHwThermalSlowdown email", LONG, is_firing);
    implicit.wait_for("the same email over implicit TLS", LONG, is_firing);

    // The subject names the host, the GPU and its model.
    let subject = mail.subject();
    assert!(
        subject.contains(" gpu 3 (NVIDIA A100-SXM4-80GB)"),
        "{subject}"
    );
    // The fingerprint header is the alert's dedup key, as stored.
    let fired: Vec<_> = transitions(&db)
        .into_iter()
        .filter(|(a, s, _)| a == "GpuHwThermalSlowdown" && s == "firing")
        .collect();
    assert_eq!(fired.len(), 1, "{fired:?}");
    let labels = &fired[0].2;
    assert_eq!(labels["gpu"], "3");
    assert!(
        subject.contains(&format!("on {} gpu 3", labels["host"])),
        "{subject}"
    );
    let fingerprint = gpuwatch::rules::fingerprint(labels);
    assert_eq!(
        mail.header("X-Gpuwatch-Fingerprint"),
        Some(fingerprint.clone())
    );
    let message_id = mail.header("Message-ID").unwrap_or_default();
    assert!(message_id.contains(&fingerprint), "{message_id}");
    assert!(mail
        .header("Content-Type")
        .unwrap_or_default()
        .contains("multipart/alternative"));
    assert_eq!(
        mail.header("From").as_deref(),
        Some("gpuwatch <gpuwatch@example.com>")
    );

    let (text, html) = mail.parts();
    let uuid = &labels["uuid"];
    for needle in [
        "Alert:       GpuHwThermalSlowdown".to_string(),
        "Status:      firing".to_string(),
        "Severity:    critical".to_string(),
        format!("GPU:         3 NVIDIA A100-SXM4-80GB ({uuid})"),
        "Condition:   clock_event(hw_thermal_slowdown)".to_string(),
        // The scenario's slowdown threshold is 88 °C.
        "(slowdown threshold 88 °C)".to_string(),
        "GPU temperature, last 30 min".to_string(),
        format!("Fingerprint: {fingerprint}"),
        // Links to the agent (server.external_url, by default its host and
        // port).
        format!("/api/v1/history?gpu={uuid}&metric=temperature&from=-1h"),
        "/api/v1/alerts".to_string(),
    ] {
        assert!(
            text.contains(&needle),
            "{needle:?} not in the text part:\n{text}"
        );
    }
    // The reading when it fired: above the threshold (89 or 90 °C by the
    // scenario), and the history's maximum at least that.
    let reading: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Reading:     GPU temperature: "))
        .and_then(|r| r.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no temperature reading in\n{text}"));
    assert!((88.0..=90.0).contains(&reading), "{reading}");
    let stats = text
        .lines()
        .find(|l| l.trim_start().starts_with("min "))
        .unwrap_or_else(|| panic!("no min/avg/max line in\n{text}"));
    let numbers: Vec<f64> = stats
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(numbers.len(), 3, "{stats}");
    assert!(
        numbers[0] <= numbers[1] && numbers[1] <= numbers[2],
        "{stats}"
    );
    assert!(numbers[2] >= 86.0 && numbers[2] <= 90.0, "{stats}");
    assert!(html.contains("<svg"), "{html}");
    assert!(html.contains("GPU temperature, last 30 min"), "{html}");
    assert!(
        html.contains(&format!("3 NVIDIA A100-SXM4-80GB ({uuid})")),
        "{html}"
    );

    // Encrypted and authenticated; exactly one firing email per receiver.
    std::thread::sleep(Duration::from_secs(3));
    for sink in [&starttls, &implicit] {
        let attempts = sink.attempts();
        assert!(attempts.iter().all(|a| a.tls), "{attempts:?}");
        let firing = sink.mails().into_iter().filter(|m| is_firing(m)).count();
        assert_eq!(firing, 1, "one firing email");
        assert_once(&sink.mails());
    }
    assert!(starttls.attempts().iter().all(|a| a.auth));
    let log = agent.log();
    assert!(
        !log.contains(PASSWORD),
        "the password is never logged:\n{log}"
    );
}

/// The thermal email with the rule's hold set to 2 s: its text says the
/// configured hold (not the default's "1 minute"), and its history reaches
/// the reading that made it fire, though the database, written every 10 s,
/// lags behind the alert (its rows stop below the slowdown threshold).
#[test]
fn a_thermal_email_tells_the_configured_hold_and_the_reading_that_fired() {
    smtp::require_aiosmtpd();
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let sink = Sink::start(&dir.path().join("mail"), port, Options::default());
    let config = write_config(
        dir.path(),
        &format!(
            "[history]\nbatch_interval = \"10s\"\n\n[[rules]]\nname = \"GpuHwThermalSlowdown\"\nfor = \"2s\"\n\n{}",
            receiver("mail", port, "tls = \"none\"")
        ),
    );
    let db = dir.path().join("history.db");
    // Scenario time from 40 s at 5x: GPU 3 warms through 82 and 86 °C and
    // passes its slowdown threshold (88 °C) at 100 s, 12 s after the start.
    let _agent = Agent::start(
        "thermal-incident",
        &[
            "--config",
            &config,
            "--history-db",
            db.to_str().expect("utf-8"),
        ],
        &[("GPUWATCH_SIM_START", "40"), ("GPUWATCH_SIM_SPEED", "5")],
    );
    let mail = sink.wait_for("a firing GpuHwThermalSlowdown email", LONG, |m| {
        m.subject().starts_with("[FIRING] GpuHwThermalSlowdown ")
    });
    let (text, html) = mail.parts();
    assert!(
        text.contains("by the hardware thermal protection for over 2 seconds."),
        "the configured hold:\n{text}"
    );
    assert!(!text.contains("minute."), "{text}");
    let reading: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Reading:     GPU temperature: "))
        .and_then(|r| r.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no temperature reading in\n{text}"));
    assert!(
        reading >= 88.0,
        "fired above the slowdown threshold: {reading}"
    );
    let stats = text
        .lines()
        .find(|l| l.trim_start().starts_with("min "))
        .unwrap_or_else(|| panic!("no min/avg/max line in\n{text}"));
    let numbers: Vec<f64> = stats
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(numbers.len(), 3, "{stats}");
    assert_eq!(
        numbers[2], reading,
        "the history's max is the reading that fired: {stats}\n{text}"
    );
    assert!(html.contains(&format!("{reading} °C")), "{html}");
}

#[test]
fn an_smtp_outage_delays_but_neither_loses_nor_repeats_alerts() {
    smtp::require_aiosmtpd();
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = Pki::new(dir.path());
    let port = free_port();
    let config = write_config(
        dir.path(),
        &receiver("mail", port, &format!("ca_file = \"{}\"", pki.ca.display())),
    );
    let db = dir.path().join("history.db");
    // Scenario time from 55 s at 5x: GPU 1 is lost with Xid 79 at 60 s.
    let agent = Agent::start(
        "faults",
        &[
            "--config",
            &config,
            "--history-db",
            db.to_str().expect("utf-8"),
        ],
        &[("GPUWATCH_SIM_START", "55"), ("GPUWATCH_SIM_SPEED", "5")],
    );
    // The server is down: the alerts fire and wait in the outbox.
    agent.wait_for("notifications waiting for the SMTP server", LONG, |m| {
        count(m, "mail", "retry") >= 3.0 && depth(m, "mail").is_some_and(|d| d >= 2.0)
    });
    assert!(agent.log().contains("127.0.0.1:"), "{}", agent.log());
    let mut sink = Sink::start(
        &dir.path().join("mail"),
        port,
        Options {
            starttls: Some((pki.cert.clone(), pki.key.clone())),
            ..Options::default()
        },
    );
    // Down once more for a moment, then up for good.
    sink.wait_for("the first email after the outage", LONG, |_| true);
    sink.stop();
    std::thread::sleep(Duration::from_secs(2));
    sink.up();
    agent.wait_for("an empty outbox", LONG, |m| depth(m, "mail") == Some(0.0));

    let stored: Vec<_> = transitions(&db)
        .into_iter()
        .filter(|(_, s, _)| s == "firing" || s == "resolved")
        .collect();
    assert!(stored.len() >= 2, "{stored:?}");
    // Alerts inhibited by their GPU's GpuLost (GPU 1's Xid 79) are not sent.
    let (status, body) = agent.get("/api/v1/alerts");
    assert_eq!(status, 200, "{body}");
    let alerts: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let inhibited: Vec<String> = alerts["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .filter(|a| a["inhibited"] == true)
        .map(|a| a["fingerprint"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(
        !inhibited.is_empty(),
        "GPU 1's Xid alert is inhibited: {alerts:#}"
    );
    for (alertname, state, labels) in &stored {
        let key = (gpuwatch::rules::fingerprint(labels), state.to_uppercase());
        if inhibited.contains(&key.0) {
            continue;
        }
        let mail = sink.wait_for(&format!("{alertname} {state}"), LONG, |m| {
            per_key(std::slice::from_ref(m)).contains_key(&key)
        });
        assert!(
            mail.subject().contains(alertname.as_str()),
            "{}",
            mail.subject()
        );
    }
    std::thread::sleep(Duration::from_secs(2));
    let mails = sink.mails();
    assert_once(&mails);
    for fingerprint in &inhibited {
        assert!(
            !per_key(&mails).keys().any(|(f, _)| f == fingerprint),
            "an inhibited alert was mailed"
        );
    }
    assert!(sink.attempts().iter().all(|a| a.tls));
    assert!(
        outbox(&db, "mail").is_empty(),
        "every row delivered and gone"
    );
}

#[test]
fn starttls_missing_5xx_and_4xx_end_as_they_should() {
    smtp::require_aiosmtpd();
    let dir = tempfile::tempdir().expect("temp dir");
    let (plain_port, reject_port, flaky_port) = (free_port(), free_port(), free_port());
    // A server without STARTTLS, for a receiver that requires it (default).
    let plain = Sink::start(&dir.path().join("plain"), plain_port, Options::default());
    let reject = Sink::start(
        &dir.path().join("reject"),
        reject_port,
        Options {
            reject: Some("550 5.7.1 Relaying denied by the test".into()),
            ..Options::default()
        },
    );
    let flaky = Sink::start(
        &dir.path().join("flaky"),
        flaky_port,
        Options {
            fail_first: 2,
            fail_reply: Some("451 4.3.0 Greylisted by the test".into()),
            ..Options::default()
        },
    );
    let config = write_config(
        dir.path(),
        &format!(
            "{}{}{}",
            receiver("notls", plain_port, ""),
            receiver("reject", reject_port, "tls = \"none\""),
            receiver("flaky", flaky_port, "tls = \"none\""),
        ),
    );
    let db = dir.path().join("history.db");
    let agent = Agent::start(
        "faults",
        &[
            "--config",
            &config,
            "--history-db",
            db.to_str().expect("utf-8"),
        ],
        &[("GPUWATCH_SIM_START", "55"), ("GPUWATCH_SIM_SPEED", "5")],
    );
    agent.wait_for("every receiver's outcome", LONG, |m| {
        count(m, "notls", "failed") >= 2.0
            && count(m, "reject", "failed") >= 2.0
            && count(m, "flaky", "delivered") >= 2.0
            && depth(m, "notls") == Some(0.0)
            && depth(m, "reject") == Some(0.0)
            && depth(m, "flaky") == Some(0.0)
    });
    std::thread::sleep(Duration::from_secs(2));
    let m = agent.metrics();
    let log = agent.log();

    // STARTTLS required, not offered: nothing sent, failed for good, said
    // clearly.
    assert_eq!(count(&m, "notls", "retry"), 0.0);
    assert!(plain.attempts().is_empty(), "no message in plain text");
    assert!(plain.mails().is_empty());
    assert!(
        log.contains("does not offer STARTTLS, which this receiver requires"),
        "{log}"
    );
    assert!(
        log.contains("tls = \\\"none\\\" only if") || log.contains("tls = \"none\" only if"),
        "{log}"
    );
    let rows = outbox(&db, "notls");
    assert!(!rows.is_empty());
    for (state, attempts, error) in &rows {
        assert_eq!(state, "failed");
        assert_eq!(*attempts, 1);
        assert!(
            error.as_deref().unwrap_or("").contains("STARTTLS"),
            "{error:?}"
        );
    }

    // 5xx: failed for good with the server's reason, each message tried once.
    assert_eq!(count(&m, "reject", "retry"), 0.0);
    let rows = outbox(&db, "reject");
    assert_eq!(reject.attempts().len(), rows.len(), "not retried");
    assert!(reject.mails().is_empty());
    for (state, attempts, error) in &rows {
        assert_eq!(state, "failed");
        assert_eq!(*attempts, 1);
        assert!(
            error
                .as_deref()
                .unwrap_or("")
                .contains("Relaying denied by the test"),
            "{error:?}"
        );
    }
    assert!(log.contains("Relaying denied by the test"), "{log}");

    // 4xx: retried, then delivered once each.
    assert!(count(&m, "flaky", "retry") >= 2.0);
    let attempts = flaky.attempts();
    assert!(attempts[0].reply.starts_with("451") && attempts[1].reply.starts_with("451"));
    let mails = flaky.mails();
    assert_eq!(attempts.len(), mails.len() + 2, "{attempts:?}");
    assert_once(&mails);
    assert!(outbox(&db, "flaky").is_empty());
    assert!(log.contains("Greylisted by the test"), "{log}");
}

/// A server whose 535 quotes what the client sent (the AUTH PLAIN line's
/// base64 of "\0user\0password", and the password): the reply fails the
/// message for good, and neither form reaches the log or the outbox.
#[test]
fn an_auth_refusal_that_echoes_the_credentials_is_redacted() {
    use base64::Engine;

    smtp::require_aiosmtpd();
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = Pki::new(dir.path());
    let port = free_port();
    let sink = Sink::start(
        &dir.path().join("mail"),
        port,
        Options {
            starttls: Some((pki.cert.clone(), pki.key.clone())),
            auth: Some("alerts:not-the-configured-one".into()),
            auth_echo: true,
            ..Options::default()
        },
    );
    let config = write_config(
        dir.path(),
        &receiver(
            "mail",
            port,
            &format!(
                "ca_file = \"{}\"\nusername = \"alerts\"\npassword_env = \"{PASSWORD_ENV}\"",
                pki.ca.display()
            ),
        ),
    );
    let db = dir.path().join("history.db");
    let agent = Agent::start(
        "faults",
        &[
            "--config",
            &config,
            "--history-db",
            db.to_str().expect("utf-8"),
        ],
        &[
            ("GPUWATCH_SIM_START", "55"),
            ("GPUWATCH_SIM_SPEED", "5"),
            (PASSWORD_ENV, PASSWORD),
        ],
    );
    agent.wait_for("a failed notification", LONG, |m| {
        count(m, "mail", "failed") >= 1.0
    });
    let plain = base64::engine::general_purpose::STANDARD.encode(format!("\0alerts\0{PASSWORD}"));
    let rows = outbox(&db, "mail");
    let failed: Vec<_> = rows.iter().filter(|(s, _, _)| s == "failed").collect();
    assert!(!failed.is_empty(), "{rows:?}");
    for (_, _, error) in failed {
        let error = error.as_deref().unwrap_or("");
        assert!(error.contains("535"), "{error}");
        assert!(
            error.contains("AUTH PLAIN [REDACTED] (password [REDACTED])"),
            "the server echoed the credentials, redacted: {error}"
        );
        assert!(
            !error.contains(PASSWORD) && !error.contains(&plain),
            "{error}"
        );
    }
    let log = agent.log();
    assert!(log.contains("AUTH PLAIN [REDACTED]"), "{log}");
    assert!(
        !log.contains(PASSWORD),
        "the password is never logged:\n{log}"
    );
    assert!(!log.contains(&plain), "nor its base64:\n{log}");
    assert!(sink.mails().is_empty());
}

/// The library's SMTP client against the real server, without an agent:
/// each server behaviour gives its outcome.
#[test]
fn each_server_behaviour_gives_its_outcome() {
    use gpuwatch::notify::email::{deliver, CaFile, EmailConfig, TlsMode};
    use gpuwatch::notify::{Outcome, Secret};

    smtp::require_aiosmtpd();
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = Pki::new(dir.path());
    let tls = Some((pki.cert.clone(), pki.key.clone()));
    let ca = CaFile {
        path: pki.ca.clone(),
        pem: std::fs::read(&pki.ca).expect("CA"),
    };
    let config = |port: u16, tls: TlsMode, ca: Option<CaFile>| EmailConfig {
        host: "127.0.0.1".into(),
        port,
        from: "gpuwatch <gpuwatch@example.com>".into(),
        to: vec!["ops@example.com".into()],
        tls,
        username: None,
        password: None,
        ca,
        hello_name: Some("gpu-node.test".into()),
        timeout: Duration::from_secs(5),
    };
    let payload = serde_json::json!({
        "version": "4", "status": "firing", "receiver": "mail", "externalURL": "",
        "alerts": [{"status": "firing", "labels": {"alertname": "GpuLost", "severity": "critical",
            "host": "node-1", "gpu": "1", "uuid": "GPU-1"}, "annotations": {},
            "startsAt": "2026-11-29T18:00:00.000Z", "endsAt": "0001-01-01T00:00:00Z",
            "fingerprint": "0123456789abcdef"}]
    })
    .to_string();

    let starttls = Sink::start(
        &dir.path().join("starttls"),
        free_port(),
        Options {
            starttls: tls.clone(),
            auth: Some(format!("alerts:{PASSWORD}")),
            ..Options::default()
        },
    );
    let mut with_auth = config(starttls.port, TlsMode::StartTls, Some(ca.clone()));
    with_auth.username = Some("alerts".into());
    with_auth.password = Some(Secret::new(PASSWORD.into()));
    assert_eq!(deliver(&with_auth, &payload), Outcome::Delivered);
    assert_eq!(starttls.mails().len(), 1);
    assert!(starttls.attempts()[0].tls && starttls.attempts()[0].auth);
    // A wrong password: the server's 535 is permanent; the password is
    // not in the reason.
    with_auth.password = Some(Secret::new("wrong-password".into()));
    match deliver(&with_auth, &payload) {
        Outcome::Permanent(why) => assert!(!why.contains("wrong-password"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Without the test CA the certificate is not trusted: retried, with a
    // hint.
    match deliver(&config(starttls.port, TlsMode::StartTls, None), &payload) {
        Outcome::Retry(why) => assert!(why.contains("ca_file"), "{why}"),
        other => panic!("{other:?}"),
    }

    let implicit = Sink::start(
        &dir.path().join("implicit"),
        free_port(),
        Options {
            implicit_tls: tls,
            ..Options::default()
        },
    );
    let implicit_config = config(implicit.port, TlsMode::Implicit, Some(ca.clone()));
    assert_eq!(deliver(&implicit_config, &payload), Outcome::Delivered);
    assert!(implicit.attempts()[0].tls);

    let plain = Sink::start(&dir.path().join("plain"), free_port(), Options::default());
    match deliver(&config(plain.port, TlsMode::StartTls, Some(ca)), &payload) {
        Outcome::Permanent(why) => {
            assert!(why.contains("does not offer STARTTLS"), "{why}");
            assert!(why.contains("tls = \"none\" only if"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    assert!(plain.attempts().is_empty(), "nothing sent in plain text");
    assert_eq!(
        deliver(&config(plain.port, TlsMode::None, None), &payload),
        Outcome::Delivered
    );
    assert_eq!(plain.mails().len(), 1);

    let reject = Sink::start(
        &dir.path().join("reject"),
        free_port(),
        Options {
            reject: Some("550 5.1.1 No such user here".into()),
            ..Options::default()
        },
    );
    match deliver(&config(reject.port, TlsMode::None, None), &payload) {
        Outcome::Permanent(why) => assert!(
            why.contains("550") && why.contains("No such user here"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    let flaky = Sink::start(
        &dir.path().join("flaky"),
        free_port(),
        Options {
            fail_first: 1,
            fail_reply: Some("451 4.3.0 Greylisted".into()),
            ..Options::default()
        },
    );
    let flaky_config = config(flaky.port, TlsMode::None, None);
    match deliver(&flaky_config, &payload) {
        Outcome::Retry(why) => assert!(why.contains("451") && why.contains("Greylisted"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(deliver(&flaky_config, &payload), Outcome::Delivered);

    // No reply within the timeout: retried, saying so.
    let slow = Sink::start(
        &dir.path().join("slow"),
        free_port(),
        Options {
            hang_first: 1,
            ..Options::default()
        },
    );
    let mut slow_config = config(slow.port, TlsMode::None, None);
    slow_config.timeout = Duration::from_secs(1);
    match deliver(&slow_config, &payload) {
        Outcome::Retry(why) => assert!(why.contains("did not answer within 1s"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(deliver(&slow_config, &payload), Outcome::Delivered);
    assert_eq!(slow.mails().len(), 1);

    // Nobody listening: retried.
    let mut down = Sink::start(&dir.path().join("down"), free_port(), Options::default());
    down.stop();
    assert!(matches!(
        deliver(&config(down.port, TlsMode::None, None), &payload),
        Outcome::Retry(_)
    ));
}
