//! What one email notification costs, against a real SMTP server on
//! loopback (Debian's python3-aiosmtpd, `tests/smtp/sink.py`):
//!
//! - rendering (subject, text and HTML with a 60-point history), µs;
//! - the SMTP handoff of one message (connect, EHLO, STARTTLS with the
//!   test CA, MAIL/RCPT/DATA, QUIT), ms, beside the same handoff in plain
//!   text (the baseline: the ratio is what TLS adds).
//!
//! The handoff is the last part of the latency from condition true to
//! handoff (hold + one evaluation interval + the outbox poll, ≤ 0.5 s, +
//! this). Prints medians and p90; asserts nothing.
//!
//! Run: `cargo bench --bench email`.

#[path = "../tests/smtp/mod.rs"]
mod smtp;

#[path = "common/mod.rs"]
mod common;

use common::{percentile, run_size};

use std::time::{Duration, Instant};

use gpuwatch::notify::email::{deliver, render::render, CaFile, EmailConfig, TlsMode};
use gpuwatch::notify::Outcome;
use gpuwatch::outbox::details::{Details, HistorySummary, MetricDetails};
use gpuwatch::outbox::OutboxMessage;

fn payload() -> String {
    let p = serde_json::json!({
        "version": "4", "status": "firing", "receiver": "mail", "externalURL": "http://node-1:9842",
        "alerts": [{"status": "firing", "labels": {"alertname": "GpuHwThermalSlowdown",
            "severity": "warning", "host": "node-1", "gpu": "3", "uuid": "GPU-3333"},
            "annotations": {"summary": "GPU 3 on node-1 is in hardware thermal slowdown"},
            "startsAt": "2026-11-29T18:00:00.000Z", "endsAt": "0001-01-01T00:00:00Z",
            "fingerprint": "0123456789abcdef"}]
    });
    let points = (0..60).map(|i| Some(64.0 + f64::from(i) * 0.4)).collect();
    let mut message: OutboxMessage = serde_json::from_value(p).expect("a message");
    message.alerts[0].details = Some(Details {
        condition: Some("clock_event(hw_thermal_slowdown)".into()),
        value: Some(1.0),
        threshold: None,
        gpu_name: Some("NVIDIA H100 80GB HBM3".into()),
        metric: Some(MetricDetails {
            name: "temperature".into(),
            label: "GPU temperature".into(),
            unit: "°C".into(),
            current: Some(89.0),
            limit: Some(88.0),
            limit_name: Some("slowdown threshold".into()),
            history: Some(HistorySummary {
                from: 1_795_000_000.0,
                to: 1_795_001_800.0,
                step_seconds: 30.0,
                min: 64.0,
                avg: 76.0,
                max: 88.0,
                points,
            }),
        }),
        ..Details::default()
    });
    message.to_json().expect("JSON")
}

fn main() {
    let (smoke, _) = run_size();
    let (render_rounds, send_rounds) = if smoke { (50, 3) } else { (2000, 40) };
    let body = payload();
    let value = OutboxMessage::parse(&body).expect("payload");

    let mut render_us = Vec::new();
    for _ in 0..render_rounds {
        let start = Instant::now();
        let r = render(&value);
        render_us.push(start.elapsed().as_secs_f64() * 1e6);
        assert!(!r.html.is_empty());
    }
    println!(
        "render one email (60-point history): median {:.1} us, p90 {:.1} us",
        percentile(&mut render_us.clone(), 0.5),
        percentile(&mut render_us, 0.9)
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let pki = smtp::Pki::new(dir.path());
    let port = |p: std::net::TcpListener| p.local_addr().expect("address").port();
    let free = || port(std::net::TcpListener::bind("127.0.0.1:0").expect("bind"));
    let tls_sink = smtp::Sink::start(
        &dir.path().join("tls"),
        free(),
        smtp::Options {
            starttls: Some((pki.cert.clone(), pki.key.clone())),
            ..smtp::Options::default()
        },
    );
    let plain_sink = smtp::Sink::start(&dir.path().join("plain"), free(), smtp::Options::default());
    let config = |port: u16, tls: TlsMode| EmailConfig {
        host: "127.0.0.1".into(),
        port,
        from: "gpuwatch <gpuwatch@example.com>".into(),
        to: vec!["ops@example.com".into()],
        tls,
        username: None,
        password: None,
        ca: (tls != TlsMode::None).then(|| CaFile {
            path: pki.ca.clone(),
            pem: std::fs::read(&pki.ca).expect("CA"),
        }),
        hello_name: Some("bench.test".into()),
        timeout: Duration::from_secs(10),
    };
    let measure = |c: &EmailConfig| {
        let mut ms = Vec::new();
        for _ in 0..send_rounds {
            let start = Instant::now();
            let outcome = deliver(c, &body);
            ms.push(start.elapsed().as_secs_f64() * 1e3);
            assert_eq!(outcome, Outcome::Delivered);
        }
        (percentile(&mut ms.clone(), 0.5), percentile(&mut ms, 0.9))
    };
    let (plain_med, plain_p90) = measure(&config(plain_sink.port, TlsMode::None));
    let (tls_med, tls_p90) = measure(&config(tls_sink.port, TlsMode::StartTls));
    println!(
        "SMTP handoff of one email on loopback: STARTTLS median {tls_med:.1} ms (p90 {tls_p90:.1}), \
         plain (baseline) median {plain_med:.1} ms (p90 {plain_p90:.1}), ratio {:.2}",
        tls_med / plain_med
    );
}
