//! Notifications end to end: the agent on the faults scenario sends its
//! alerts to a webhook server under the test's control, which answers as
//! each test scripts it (5xx, 400, down, 200).

mod common;

use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Agent;
use gpuwatch::history::Store;

const LONG: Duration = Duration::from_secs(30);
const TOKEN: &str = "t0ken-never-logged";

/// One request the webhook server saw.
#[derive(Debug, Clone)]
struct Seen {
    body: serde_json::Value,
    authorization: String,
    answered: u16,
}

impl Seen {
    fn key(&self) -> (String, String) {
        (
            self.body["alerts"][0]["fingerprint"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            self.body["status"].as_str().unwrap_or("").to_string(),
        )
    }

    fn alertname(&self) -> &str {
        self.body["alerts"][0]["labels"]["alertname"]
            .as_str()
            .unwrap_or("")
    }
}

/// A webhook server: `policy(n)` is the status for the n-th (from 0)
/// request with the same fingerprint and status; 0 holds the connection
/// for 5 s without answering.
struct Hook {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Hook {
    fn start(listener: TcpListener, policy: fn(usize) -> u16) -> Hook {
        let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let Some(request) = common::read_request(&mut reader) else {
                    continue;
                };
                let body: serde_json::Value =
                    serde_json::from_slice(&request.body).unwrap_or(serde_json::Value::Null);
                let authorization = request
                    .headers
                    .get("authorization")
                    .cloned()
                    .unwrap_or_default();
                let mut seen = log.lock().expect("lock");
                let mut entry = Seen {
                    body,
                    authorization,
                    answered: 0,
                };
                let n = seen.iter().filter(|s| s.key() == entry.key()).count();
                entry.answered = policy(n);
                let answer = format!(
                    "HTTP/1.1 {} Scripted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    entry.answered
                );
                let hang = entry.answered == 0;
                seen.push(entry);
                drop(seen);
                if hang {
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_secs(5));
                        drop(stream);
                    });
                    continue;
                }
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        Hook { seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }

    /// Waits until a request for `alertname` firing was answered `status`.
    fn wait_for(&self, alertname: &str, status: u16, timeout: Duration) -> Seen {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.seen().into_iter().find(|s| {
                s.alertname() == alertname && s.body["status"] == "firing" && s.answered == status
            }) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "no {alertname} notification answered {status}; seen: {:#?}",
                self.seen()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// (fingerprint, status) -> how many requests were answered 2xx.
    fn delivered(&self) -> HashMap<(String, String), usize> {
        let mut counts = HashMap::new();
        for s in self.seen() {
            if (200..300).contains(&s.answered) {
                *counts.entry(s.key()).or_insert(0) += 1;
            }
        }
        counts
    }
}

fn config(dir: &std::path::Path, port: u16) -> String {
    config_with(dir, port, "2s")
}

fn config_with(dir: &std::path::Path, port: u16, timeout: &str) -> String {
    let path = dir.join("gpuwatch.toml");
    std::fs::write(
        &path,
        format!(
            "[[receivers]]\nname = \"hook\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:{port}/alerts\"\nbearer_token = \"{TOKEN}\"\ntimeout = \"{timeout}\"\nretry_min = \"200ms\"\nretry_max = \"1s\"\n"
        ),
    )
    .expect("config");
    path.to_str().expect("utf-8").to_string()
}

/// Scenario time from 55 s, 5x: GPU 1 is lost with Xid 79 at 60 s.
fn faults(config: &str, db: &str, start: &'static str) -> Agent {
    Agent::start(
        "faults",
        &["--config", config, "--history-db", db],
        &[("GPUWATCH_SIM_START", start), ("GPUWATCH_SIM_SPEED", "5")],
    )
}

fn notifications(m: &common::Metrics, outcome: &str) -> f64 {
    m.value(
        "gpuwatch_notifications_total",
        &[("receiver", "hook"), ("outcome", outcome)],
    )
    .unwrap_or(0.0)
}

fn assert_once(hook: &Hook) {
    for (key, count) in hook.delivered() {
        assert_eq!(count, 1, "{key:?} delivered {count} times");
    }
}

#[test]
fn gpu_lost_is_delivered_after_5xx_retries_exactly_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let hook = Hook::start(listener, |n| if n < 2 { 500 } else { 200 });
    let config = config(dir.path(), port);
    let db = dir.path().join("history.db");
    let agent = faults(&config, db.to_str().expect("utf-8"), "55");

    let lost = hook.wait_for("GpuLost", 200, LONG);
    let body = &lost.body;
    assert_eq!(body["version"], "4");
    assert_eq!(body["receiver"], "hook");
    assert_eq!(body["truncatedAlerts"], 0);
    assert_eq!(body["groupLabels"]["alertname"], "GpuLost");
    let alert = &body["alerts"][0];
    assert_eq!(alert["status"], "firing");
    assert_eq!(alert["labels"]["gpu"], "1");
    assert_eq!(alert["labels"]["severity"], "critical");
    assert_eq!(alert["endsAt"], "0001-01-01T00:00:00Z");
    // No server.external_url: http://HOSTNAME:PORT/ of the agent.
    let external = body["externalURL"].as_str().expect("externalURL");
    let port = agent.url.rsplit(':').next().expect("port");
    assert!(
        external.starts_with("http://") && external.ends_with(&format!(":{port}/")),
        "{external}"
    );
    assert_eq!(alert["generatorURL"], format!("{external}api/v1/alerts"));
    assert!(alert["startsAt"].as_str().is_some_and(|s| s.ends_with('Z')));
    let fingerprint = alert["fingerprint"].as_str().expect("fingerprint");
    assert!(
        fingerprint.len() == 16 && fingerprint.bytes().all(|b| b.is_ascii_hexdigit()),
        "{fingerprint}"
    );
    assert_eq!(lost.authorization, format!("Bearer {TOKEN}"));
    let attempts: Vec<u16> = hook
        .seen()
        .iter()
        .filter(|s| s.key() == lost.key())
        .map(|s| s.answered)
        .collect();
    assert_eq!(attempts, vec![500, 500, 200], "two 5xx, then delivered");

    let m = agent.wait_for("the notification metrics", LONG, |m| {
        notifications(m, "delivered") >= 1.0 && notifications(m, "retry") >= 2.0
    });
    assert!(m.has("gpuwatch_outbox_depth"));
    assert!(m.has("gpuwatch_outbox_oldest_age_seconds"));
    std::thread::sleep(Duration::from_secs(2));
    assert_once(&hook);
    let log = agent.log();
    assert!(!log.contains(TOKEN), "the token is never logged:\n{log}");
    assert!(log.contains("will retry"), "{log}");
}

#[test]
fn a_400_fails_for_good_and_is_not_retried() {
    let dir = tempfile::tempdir().expect("temp dir");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let hook = Hook::start(listener, |_| 400);
    let config = config(dir.path(), port);
    let db = dir.path().join("history.db");
    let agent = faults(&config, db.to_str().expect("utf-8"), "55");

    let lost = hook.wait_for("GpuLost", 400, LONG);
    agent.wait_for("a failed notification", LONG, |m| {
        notifications(m, "failed") >= 1.0
    });
    std::thread::sleep(Duration::from_secs(2));
    let seen = hook.seen();
    assert_eq!(
        seen.iter().filter(|s| s.key() == lost.key()).count(),
        1,
        "not retried: {seen:#?}"
    );
    let m = agent.metrics();
    assert_eq!(notifications(&m, "retry"), 0.0);
    assert_eq!(notifications(&m, "failed"), seen.len() as f64);
    assert!(agent.log().contains("HTTP 400"), "{}", agent.log());

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let rows: Vec<(String, i64, Option<String>)> = runtime.block_on(async {
        let store = Store::open_read_only(&db).await.expect("open");
        sqlx::query_as("SELECT state, attempts, last_error FROM outbox WHERE fingerprint = ?")
            .bind(lost.key().0)
            .fetch_all(&store.pool)
            .await
            .expect("outbox")
    });
    assert_eq!(
        rows,
        vec![("failed".to_string(), 1, Some("HTTP 400".to_string()))]
    );
}

/// A webhook that refuses every request with a 400 whose body echoes the
/// request's headers, as some receivers' error pages do.
fn echoing_hook(listener: TcpListener) {
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let Some(request) = common::read_request(&mut reader) else {
                continue;
            };
            let mut body = String::from("Bad request. You sent:\n");
            for (name, value) in &request.headers {
                body.push_str(&format!("{name}: {value}\n"));
            }
            let answer = format!(
                "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
}

#[test]
fn secrets_a_refusing_receiver_echoes_are_kept_out_of_log_and_outbox() {
    const API_KEY: &str = "hdr-k3y-never-logged";
    let dir = tempfile::tempdir().expect("temp dir");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    echoing_hook(listener);
    let path = dir.path().join("gpuwatch.toml");
    std::fs::write(
        &path,
        format!(
            "[[receivers]]\nname = \"hook\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:{port}/alerts\"\n\
             bearer_token = \"{TOKEN}\"\nheaders = {{ X-Api-Key = \"{API_KEY}\", X-Team = \"ml\" }}\n"
        ),
    )
    .expect("config");
    let db = dir.path().join("history.db");
    let agent = faults(
        path.to_str().expect("utf-8"),
        db.to_str().expect("utf-8"),
        "55",
    );
    agent.wait_for("a failed notification", LONG, |m| {
        notifications(m, "failed") >= 1.0
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let errors: Vec<Option<String>> = runtime.block_on(async {
        let store = Store::open_read_only(&db).await.expect("open");
        sqlx::query_scalar("SELECT last_error FROM outbox WHERE state = 'failed'")
            .fetch_all(&store.pool)
            .await
            .expect("outbox")
    });
    assert!(!errors.is_empty());
    for error in &errors {
        let error = error.as_deref().unwrap_or("");
        assert!(error.starts_with("HTTP 400: Bad request."), "{error}");
        // The echo is kept, the secrets in it are not; the line breaks of
        // the answer are flattened.
        assert!(
            error.contains("authorization: Bearer [REDACTED]"),
            "{error}"
        );
        assert!(error.contains("x-api-key: [REDACTED]"), "{error}");
        assert!(
            !error.contains(TOKEN) && !error.contains(API_KEY),
            "{error}"
        );
        assert!(!error.contains('\n'), "{error}");
    }
    let log = agent.log();
    assert!(log.contains("Bearer [REDACTED]"), "{log}");
    assert!(!log.contains(TOKEN), "the token is never logged:\n{log}");
    assert!(!log.contains(API_KEY), "nor a header value:\n{log}");
}

#[test]
fn a_kill_9_while_the_receiver_is_down_loses_and_repeats_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A port nobody listens on: connection refused.
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let config = config(dir.path(), port);
    let db = dir.path().join("history.db");
    let db_arg = db.to_str().expect("utf-8");
    let agent = faults(&config, db_arg, "55");
    agent.wait_for("undelivered notifications", LONG, |m| {
        notifications(m, "retry") >= 1.0
            && m.value("gpuwatch_outbox_depth", &[("receiver", "hook")])
                .is_some_and(|d| d >= 1.0)
    });
    drop(agent); // kill -9

    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the same port");
    let hook = Hook::start(listener, |_| 200);
    let agent = faults(&config, db_arg, "70");
    hook.wait_for("GpuLost", 200, LONG);
    agent.wait_for("an empty outbox", LONG, |m| {
        m.value("gpuwatch_outbox_depth", &[("receiver", "hook")]) == Some(0.0)
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_once(&hook);
    let firing: Vec<_> = hook
        .seen()
        .into_iter()
        .filter(|s| s.alertname() == "GpuLost")
        .collect();
    assert_eq!(firing.len(), 1, "{firing:#?}");
}

#[test]
fn a_receiver_that_does_not_answer_in_time_is_retried() {
    let dir = tempfile::tempdir().expect("temp dir");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let hook = Hook::start(listener, |n| if n == 0 { 0 } else { 200 });
    let config = config_with(dir.path(), port, "500ms");
    let db = dir.path().join("history.db");
    let agent = faults(&config, db.to_str().expect("utf-8"), "55");

    let lost = hook.wait_for("GpuLost", 200, LONG);
    let attempts: Vec<u16> = hook
        .seen()
        .iter()
        .filter(|s| s.key() == lost.key())
        .map(|s| s.answered)
        .collect();
    assert_eq!(attempts, vec![0, 200], "timed out once, then delivered");
    let log = agent.log();
    assert!(log.contains("no answer within 500ms"), "{log}");
    std::thread::sleep(Duration::from_secs(1));
    assert_once(&hook);
}

#[test]
fn the_outbox_is_cleaned_of_old_failures_and_removed_receivers_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let day = 86_400_000;
    // (receiver, fingerprint, state, due_ms)
    let rows = [
        ("renamed", "c-renamed-1", "pending", now_ms),
        ("renamed", "c-renamed-2", "failed", now_ms),
        ("hook", "c-hook-old", "failed", now_ms - 8 * day),
        ("hook", "c-hook-recent", "failed", now_ms - day),
    ];
    runtime.block_on(async {
        let store = Store::open_for_writing(&db, gpuwatch::history::Durability::Normal)
            .await
            .expect("open");
        for (receiver, fingerprint, state, due) in rows {
            sqlx::query(
                "INSERT INTO outbox (receiver, fingerprint, payload, created_ms, due_ms, attempts, state) \
                 VALUES (?, ?, '{}', ?, ?, 1, ?)",
            )
            .bind(receiver)
            .bind(fingerprint)
            .bind(due)
            .bind(due)
            .bind(state)
            .execute(&store.pool)
            .await
            .expect("insert");
        }
        store.pool.close().await;
    });

    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let _hook = Hook::start(listener, |_| 200);
    let config = config(dir.path(), port);
    let agent = faults(&config, db.to_str().expect("utf-8"), "0");
    let deadline = Instant::now() + LONG;
    while !(agent.log().contains("no longer configured") && agent.log().contains("older than")) {
        assert!(
            Instant::now() < deadline,
            "no cleanup logged:\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = plain(&agent.log());
    let line = log
        .lines()
        .find(|l| l.contains("no longer configured"))
        .expect("the line");
    assert!(
        line.contains("renamed") && line.contains("undelivered=1") && line.contains("failed=1"),
        "{line}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("older than") && l.contains("removed=1")),
        "{log}"
    );
    let left: Vec<String> = runtime.block_on(async {
        let store = Store::open_read_only(&db).await.expect("open");
        sqlx::query_scalar("SELECT fingerprint FROM outbox WHERE fingerprint LIKE 'c-%'")
            .fetch_all(&store.pool)
            .await
            .expect("outbox")
    });
    assert_eq!(left, vec!["c-hook-recent".to_string()]);
}

/// `text` without ANSI colour codes.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn an_alert_that_fires_while_the_history_database_is_down_is_sent_once_it_opens() {
    let dir = tempfile::tempdir().expect("temp dir");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let hook = Hook::start(listener, |_| 200);
    let config = config(dir.path(), port);
    // A file where the database's directory should be: it cannot be opened.
    let blocker = dir.path().join("state");
    std::fs::write(&blocker, b"not a directory").expect("blocker");
    let db = blocker.join("history.db");
    let agent = faults(&config, db.to_str().expect("utf-8"), "55");
    agent.wait_for("GpuLost firing while history is down", LONG, |m| {
        m.value("gpuwatch_history_up", &[]) == Some(0.0)
            && !m
                .find(
                    "gpuwatch_alerts",
                    &[("alertname", "GpuLost"), ("state", "firing")],
                )
                .is_empty()
    });
    assert!(
        hook.seen().is_empty(),
        "nothing can be queued without the outbox: {:#?}",
        hook.seen()
    );
    assert!(
        agent.log().contains("alert notifications are held"),
        "{}",
        agent.log()
    );

    std::fs::remove_file(&blocker).expect("unblock");
    std::fs::create_dir(&blocker).expect("the directory");
    hook.wait_for("GpuLost", 200, Duration::from_secs(90));
    agent.wait_for("an empty outbox", LONG, |m| {
        m.value("gpuwatch_history_up", &[]) == Some(1.0)
            && m.value("gpuwatch_outbox_depth", &[("receiver", "hook")]) == Some(0.0)
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_once(&hook);
}
