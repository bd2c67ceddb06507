//! One receiver's dispatcher: sends the head of its outbox queue when due,
//! and records what became of it. Receivers have a dispatcher each, so one
//! receiver's outage never holds up another's messages.
//!
//! An Alertmanager receiver's dispatcher also re-sends the firing alerts
//! every `resend_interval` (see [`super::alertmanager`]), read from the
//! alert state saved in the database: that state is committed with the
//! transitions and their outbox rows, so it survives a restart and agrees
//! with what the outbox sent; and because the re-send runs in this same
//! task, between two outbox messages, it never overtakes a resolved
//! message with a stale firing one.
//!
//! Every attempt, outbox message or re-send, goes through [`attempt`]: the
//! one place where an outcome's reason is cleaned of the receiver's secrets
//! (see [`super::redact`]) before it is counted, logged or stored.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use sqlx::SqlitePool;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::alertmanager::{self, AlertmanagerConfig};
use super::{
    now_ms, outbox, random_unit, Outcome, ReceiverConfig, ReceiverKind, ReceiverStats, Redactor,
};
use crate::outbox::doorbell::Listener;
use crate::outbox::OutboxMessage;

/// How long to wait for the next look at the outbox when the database
/// cannot be read.
const RETRY: Duration = Duration::from_millis(500);
/// How often the outbox is looked at when it is empty and the doorbell does
/// not ring (rows written by anything but this agent's alerting, e.g. an
/// older agent still running against the same file, are noticed within this).
const IDLE: Duration = Duration::from_secs(30);
/// The first re-send after a start waits at most this long (less with a
/// shorter `resend_interval`), so that the first evaluation has resolved
/// what stopped firing while the agent was down.
const FIRST_RESEND: Duration = Duration::from_secs(10);

/// Runs until `shutdown` turns true; looks at the outbox when `doorbell`
/// rings, when the head of the queue is due, and every `IDLE`.
pub async fn run(
    receiver: ReceiverConfig,
    pool: SqlitePool,
    stats: Arc<ReceiverStats>,
    mut doorbell: Listener,
    mut shutdown: watch::Receiver<bool>,
) {
    let kind = Arc::new(receiver.kind.clone());
    let redactor = Redactor::for_receiver(&receiver.kind);
    let mut resend = match &receiver.kind {
        ReceiverKind::Alertmanager(config) => Some(Resend {
            config: Arc::new(config.clone()),
            next: Instant::now() + config.resend_interval.min(FIRST_RESEND),
            failing: false,
            route: receiver.route.clone(),
        }),
        _ => None,
    };
    loop {
        if *shutdown.borrow() {
            break;
        }
        if let Some(resend) = &mut resend {
            if Instant::now() >= resend.next {
                resend
                    .run(&receiver.name, &pool, &stats, &redactor, &mut shutdown)
                    .await;
                resend.next = Instant::now() + resend.config.resend_interval;
            }
        }
        let mut wait = match step(&receiver, &kind, &redactor, &pool, &stats, &mut shutdown).await {
            Ok(wait) => wait,
            Err(e) => {
                warn!(receiver = %receiver.name, error = %e, "Cannot read or update the notification outbox; trying again shortly.");
                RETRY
            }
        };
        if let Some(resend) = &resend {
            wait = wait.min(resend.next.saturating_duration_since(Instant::now()));
        }
        if wait.is_zero() {
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = doorbell.rung() => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Sends the head of the queue if due; returns how long to wait before the
/// next look.
async fn step(
    receiver: &ReceiverConfig,
    kind: &Arc<ReceiverKind>,
    redactor: &Redactor,
    pool: &SqlitePool,
    stats: &ReceiverStats,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Duration, sqlx::Error> {
    let (depth, oldest) = outbox::depth(pool, &receiver.name).await?;
    stats.set_depth(depth, oldest);
    let Some(row) = outbox::head(pool, &receiver.name).await? else {
        return Ok(IDLE);
    };
    let now = now_ms();
    if row.due_ms > now {
        // Only this dispatcher moves its head: nothing to look at before
        // it is due (a new row queues behind it and rings the doorbell).
        return Ok(Duration::from_millis((row.due_ms - now) as u64).min(IDLE));
    }
    let outcome = match OutboxMessage::parse(&row.payload) {
        Ok(message) => {
            let sending = kind.clone();
            // At shutdown the row stays, and goes out again after the restart.
            let Some(outcome) = attempt(move || sending.send(&message), redactor, shutdown).await
            else {
                return Ok(RETRY);
            };
            outcome
        }
        // Written by a broken version, or by hand: no retry can send it.
        Err(e) => Outcome::Permanent(format!(
            "the outbox message is not an alert notification: {e}"
        )),
    };
    stats.count(&outcome);
    let attempts = u32::try_from(row.attempts + 1).unwrap_or(u32::MAX);
    match &outcome {
        Outcome::Delivered => {
            debug!(receiver = %receiver.name, fingerprint = %row.fingerprint, attempts, "Notification delivered.");
            outbox::delivered(pool, row.id).await?;
        }
        Outcome::Retry(why) => {
            let delay = receiver.backoff.delay(attempts, random_unit());
            info!(receiver = %receiver.name, fingerprint = %row.fingerprint, attempts, error = %why,
                retry_in = %humantime::format_duration(Duration::from_millis(delay.as_millis() as u64)),
                "Notification not delivered; will retry.");
            outbox::retry(pool, row.id, now_ms() + delay.as_millis() as i64, why).await?;
        }
        Outcome::Permanent(why) => {
            warn!(receiver = %receiver.name, fingerprint = %row.fingerprint, attempts, error = %why,
                "Notification cannot be delivered and will not be retried (kept in the outbox as failed); fix what the error says.");
            outbox::failed(pool, row.id, why).await?;
        }
    }
    let (depth, oldest) = outbox::depth(pool, &receiver.name).await?;
    stats.set_depth(depth, oldest);
    Ok(Duration::ZERO)
}

/// Runs one blocking send on a blocking thread and returns its outcome with
/// the reason cleaned by `redactor`; `None` when `shutdown` came first.
async fn attempt(
    send: impl FnOnce() -> Outcome + Send + 'static,
    redactor: &Redactor,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<Outcome> {
    let sent = tokio::task::spawn_blocking(send);
    let outcome = tokio::select! {
        done = sent => done.unwrap_or_else(|e| Outcome::Retry(format!("the sending thread failed: {e}"))),
        _ = shutdown.changed() => return None,
    };
    Some(redactor.outcome(outcome))
}

/// An Alertmanager receiver's periodic re-send of its firing alerts.
struct Resend {
    config: Arc<AlertmanagerConfig>,
    next: Instant,
    /// The last re-send failed (so the next failure is not logged loudly
    /// again).
    failing: bool,
    /// The receiver's route: only the alerts it takes are re-sent.
    route: crate::alerting::Route,
}

impl Resend {
    /// Sends the alerts firing now, as saved in the database. A failure is
    /// not retried: the next re-send is due in `resend_interval` anyway.
    async fn run(
        &mut self,
        receiver: &str,
        pool: &SqlitePool,
        stats: &ReceiverStats,
        redactor: &Redactor,
        shutdown: &mut watch::Receiver<bool>,
    ) {
        let alerts = match crate::alerting::saved_alerts(pool, &self.route).await {
            Ok(alerts) => alerts,
            Err(e) => {
                warn!(receiver = %receiver, error = %e, "Cannot read the firing alerts to re-send to Alertmanager; trying again at the next re-send.");
                return;
            }
        };
        let Some(body) = alertmanager::resend_body(
            &alerts,
            &self.config.external_url,
            SystemTime::now(),
            self.config.valid_for(),
        ) else {
            return;
        };
        let config = self.config.clone();
        let sending = move || alertmanager::post(&config, &body);
        let Some(outcome) = attempt(sending, redactor, shutdown).await else {
            return;
        };
        stats.count(&outcome);
        let next = humantime::format_duration(self.config.resend_interval);
        match &outcome {
            Outcome::Delivered => {
                if self.failing {
                    info!(receiver = %receiver, "Firing alerts re-sent to Alertmanager again.");
                } else {
                    debug!(receiver = %receiver, "Firing alerts re-sent to Alertmanager.");
                }
                self.failing = false;
            }
            Outcome::Retry(why) | Outcome::Permanent(why) => {
                if self.failing {
                    debug!(receiver = %receiver, error = %why, next_in = %next, "Cannot re-send the firing alerts to Alertmanager.");
                } else {
                    warn!(receiver = %receiver, error = %why, next_in = %next,
                        "Cannot re-send the firing alerts to Alertmanager; trying again at the next re-send (they expire there 4 re-send intervals after the last one that arrived).");
                }
                self.failing = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Durability, Store};
    use crate::notify::{Backoff, Secret, WebhookConfig};
    use crate::outbox::message::tests::OLD_ROW;
    use std::collections::BTreeMap;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::atomic::Ordering;

    fn webhook(url: String) -> ReceiverConfig {
        ReceiverConfig {
            name: "hook".into(),
            kind: ReceiverKind::Webhook(WebhookConfig {
                url,
                headers: BTreeMap::new(),
                bearer_token: None,
                timeout: Duration::from_secs(5),
            }),
            backoff: Backoff::default(),
            route: crate::alerting::Route::default(),
        }
    }

    /// Starts the dispatcher of `receiver`; returns its task, the switch
    /// that stops it and the doorbell it listens to.
    fn spawn_dispatcher(
        receiver: ReceiverConfig,
        pool: &SqlitePool,
        stats: Arc<ReceiverStats>,
    ) -> (
        tokio::task::JoinHandle<()>,
        watch::Sender<bool>,
        crate::outbox::Doorbell,
    ) {
        let (stop, shutdown) = watch::channel(false);
        let bell = crate::outbox::Doorbell::default();
        let task = tokio::spawn(run(
            receiver,
            pool.clone(),
            stats,
            bell.listener(),
            shutdown,
        ));
        (task, stop, bell)
    }

    /// Runs the dispatcher of `receiver` until its only row is no longer
    /// pending; returns (state, attempts, last_error), or `None` when the
    /// row was delivered (deleted).
    async fn dispatch_one(
        receiver: ReceiverConfig,
        payload: &str,
    ) -> Option<(String, i64, Option<String>)> {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open_for_writing(&dir.path().join("h.db"), Durability::Normal)
            .await
            .expect("open");
        let pool = store.pool.clone();
        let mut tx = pool.begin().await.expect("begin");
        outbox::insert(&mut tx, &receiver.name, "f1", payload, now_ms())
            .await
            .expect("insert");
        tx.commit().await.expect("commit");
        let stats = Arc::new(ReceiverStats::new(&receiver.name));
        let (task, stop, _bell) = spawn_dispatcher(receiver, &pool, stats);
        let mut row = None;
        for _ in 0..200 {
            row = sqlx::query_as::<_, (String, i64, Option<String>)>(
                "SELECT state, attempts, last_error FROM outbox WHERE fingerprint = 'f1'",
            )
            .fetch_optional(&pool)
            .await
            .expect("read");
            if row.as_ref().is_none_or(|r| r.0 != "pending") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = stop.send(true);
        task.await.expect("dispatcher");
        row
    }

    /// A row written in the shape of the versions before the typed message
    /// is still delivered, and the webhook gets what it said.
    #[tokio::test]
    async fn a_row_in_the_old_shape_still_delivers() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/alerts", listener.local_addr().expect("address"));
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().expect("a request");
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).expect("a header line");
                if line.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().expect("a length");
                    }
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).expect("the body");
            let mut stream = stream;
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .expect("answer");
            String::from_utf8(body).expect("utf-8")
        });
        let row = dispatch_one(webhook(url), OLD_ROW).await;
        assert_eq!(row, None, "delivered rows are deleted");
        let body: serde_json::Value =
            serde_json::from_str(&server.join().expect("server")).expect("JSON");
        let old: serde_json::Value = serde_json::from_str(OLD_ROW).expect("JSON");
        assert_eq!(body, old);
    }

    /// A row that is not a message fails at once, for good, saying why.
    #[tokio::test]
    async fn a_row_that_is_not_a_message_fails_for_good() {
        let row = dispatch_one(webhook("http://127.0.0.1:1/alerts".into()), "{}").await;
        let (state, attempts, error) = row.expect("kept");
        assert_eq!((state.as_str(), attempts), ("failed", 1));
        assert!(
            error
                .unwrap_or_default()
                .contains("not an alert notification"),
            "says why"
        );
    }

    /// A row queued after the dispatcher went idle is sent when the
    /// doorbell rings, not at the next idle look (30 s later): the
    /// dispatcher no longer polls the outbox twice a second.
    #[tokio::test]
    async fn a_row_queued_later_goes_when_the_doorbell_rings() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open_for_writing(&dir.path().join("h.db"), Durability::Normal)
            .await
            .expect("open");
        let pool = store.pool.clone();
        let receiver = webhook("http://127.0.0.1:1/alerts".into());
        let stats = Arc::new(ReceiverStats::new(&receiver.name));
        let (task, stop, bell) = spawn_dispatcher(receiver, &pool, stats.clone());
        // Its first look at the empty outbox takes milliseconds; then it
        // waits (formerly: 500 ms, now: the doorbell or 30 s).
        tokio::time::sleep(Duration::from_millis(700)).await;
        let mut tx = pool.begin().await.expect("begin");
        outbox::insert(&mut tx, "hook", "f1", "{}", now_ms())
            .await
            .expect("insert");
        tx.commit().await.expect("commit");
        bell.ring();
        let mut state = String::new();
        for _ in 0..200 {
            state = sqlx::query_scalar("SELECT state FROM outbox WHERE fingerprint = 'f1'")
                .fetch_one(&pool)
                .await
                .expect("row");
            if state != "pending" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = stop.send(true);
        task.await.expect("dispatcher");
        assert_eq!(state, "failed", "the ring woke the dispatcher");
    }

    /// A webhook whose header value has a line break can never be sent:
    /// its message fails at the first attempt and stays failed (it used to
    /// be retried forever), with a reason that has no secret in it.
    #[tokio::test]
    async fn a_request_that_cannot_be_made_fails_once_and_for_good() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open_for_writing(&dir.path().join("h.db"), Durability::Normal)
            .await
            .expect("open");
        let pool = store.pool.clone();
        let mut tx = pool.begin().await.expect("begin");
        outbox::insert(&mut tx, "hook", "f1", OLD_ROW, now_ms())
            .await
            .expect("insert");
        tx.commit().await.expect("commit");
        let receiver = ReceiverConfig {
            name: "hook".into(),
            kind: ReceiverKind::Webhook(WebhookConfig {
                url: "http://127.0.0.1:1/alerts".into(),
                headers: BTreeMap::from([("X-Team".to_string(), "ml\r\nX-Evil: 1".to_string())]),
                bearer_token: Some(Secret::new("tok-never-stored".into())),
                timeout: Duration::from_secs(1),
            }),
            backoff: Backoff::default(),
            route: crate::alerting::Route::default(),
        };
        let stats = Arc::new(ReceiverStats::new("hook"));
        let (task, stop, _bell) = spawn_dispatcher(receiver, &pool, stats.clone());
        let read = || async {
            sqlx::query_as::<_, (String, i64, Option<String>)>(
                "SELECT state, attempts, last_error FROM outbox WHERE fingerprint = 'f1'",
            )
            .fetch_one(&pool)
            .await
            .expect("row")
        };
        let mut row = read().await;
        for _ in 0..200 {
            if row.0 != "pending" || row.1 > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            row = read().await;
        }
        // Long enough for a retry after the shortest backoff (1 s ± 20 %).
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let row = read().await;
        let _ = stop.send(true);
        task.await.expect("dispatcher");
        let (state, attempts, error) = row;
        assert_eq!((state.as_str(), attempts), ("failed", 1), "{error:?}");
        let error = error.unwrap_or_default();
        assert!(error.contains("cannot be built"), "{error}");
        assert!(!error.contains("tok-never-stored"), "{error}");
        assert_eq!(stats.failed.load(Ordering::Relaxed), 1);
        assert_eq!(stats.retried.load(Ordering::Relaxed), 0);
    }
}
