//! The dispatcher on paused tokio time: no test waits for a timer for real.
//!
//! SQLite answers from its own thread, and a paused runtime that waits on
//! it would move time on to the next timer by itself (firing the pool's
//! 30 s acquire timeout, or the dispatcher's idle look, at once). So each
//! test holds the clock still ([`freeze`]) and moves it with
//! `tokio::time::advance` where it means to; waiting for the database or a
//! send (real work) is a loop of reads, bounded by [`REAL_LIMIT`].

use super::*;
use crate::history::{Durability, Store};
use crate::notify::{Backoff, Secret, WebhookConfig};
use crate::outbox::message::tests::OLD_ROW;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::Ordering;

/// How long a test waits for real work (the database, a send) before it
/// fails.
const REAL_LIMIT: Duration = Duration::from_secs(20);

/// Holds tokio's paused clock still while it lives: a paused current-thread
/// runtime does not move time on by itself while a blocking task runs.
struct Frozen {
    _held: std::sync::mpsc::Sender<()>,
}

/// Freezes the clock (see [`Frozen`]).
fn freeze() -> Frozen {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    tokio::task::spawn_blocking(move || {
        // Until the test drops its `Frozen`.
        let _ = rx.recv();
    });
    Frozen { _held: tx }
}

/// Reads with `read` until `done` holds, letting the dispatcher run
/// between reads; fails the test after [`REAL_LIMIT`] of real time.
async fn until<T, F>(mut read: impl FnMut() -> F, done: impl Fn(&T) -> bool) -> T
where
    F: std::future::Future<Output = T>,
{
    #[allow(
        clippy::disallowed_types,
        reason = "the test's own limit on real work, in real time"
    )]
    let start = std::time::Instant::now();
    loop {
        let value = read().await;
        if done(&value) {
            return value;
        }
        assert!(
            start.elapsed() < REAL_LIMIT,
            "the dispatcher did not act within {REAL_LIMIT:?}"
        );
        tokio::task::yield_now().await;
    }
}

/// The state, attempts and last error of the row `fingerprint`; `None`
/// once delivered (deleted).
async fn row(pool: &SqlitePool, fingerprint: &str) -> Option<(String, i64, Option<String>)> {
    sqlx::query_as::<_, (String, i64, Option<String>)>(
        "SELECT state, attempts, last_error FROM outbox WHERE fingerprint = ?",
    )
    .bind(fingerprint)
    .fetch_optional(pool)
    .await
    .expect("read")
}

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
        route: crate::routing::Route::default(),
    }
}

async fn store() -> (tempfile::TempDir, SqlitePool) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open_for_writing(&dir.path().join("h.db"), Durability::Normal)
        .await
        .expect("open");
    (dir, store.pool.clone())
}

async fn insert(pool: &SqlitePool, fingerprint: &str, payload: &str) {
    let mut tx = pool.begin().await.expect("begin");
    outbox::insert(&mut tx, "hook", fingerprint, payload, now_ms())
        .await
        .expect("insert");
    tx.commit().await.expect("commit");
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
        FiringAlerts::none(),
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
    let _frozen = freeze();
    let (_dir, pool) = store().await;
    insert(&pool, "f1", payload).await;
    let stats = Arc::new(ReceiverStats::new(&receiver.name));
    let (task, stop, _bell) = spawn_dispatcher(receiver, &pool, stats);
    let row = until(
        || row(&pool, "f1"),
        |r| r.as_ref().is_none_or(|r| r.0 != "pending"),
    )
    .await;
    let _ = stop.send(true);
    task.await.expect("dispatcher");
    row
}

/// Answers one HTTP request on `stream` with 200; returns its body.
fn answer_one(stream: std::net::TcpStream) -> String {
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
}

/// A row written in the shape of the versions before the typed message
/// is still delivered, and the webhook gets what it said.
#[tokio::test(start_paused = true)]
async fn a_row_in_the_old_shape_still_delivers() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/alerts", listener.local_addr().expect("address"));
    let server = std::thread::spawn(move || answer_one(listener.accept().expect("a request").0));
    let row = dispatch_one(webhook(url), OLD_ROW).await;
    assert_eq!(row, None, "delivered rows are deleted");
    let body: serde_json::Value =
        serde_json::from_str(&server.join().expect("server")).expect("JSON");
    let old: serde_json::Value = serde_json::from_str(OLD_ROW).expect("JSON");
    assert_eq!(body, old);
}

/// A row that is not a message fails at once, for good, saying why.
#[tokio::test(start_paused = true)]
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

/// A row queued after the dispatcher went idle is sent when the doorbell
/// rings, not at the next idle look (30 s later): with the clock held
/// still, the ring is all that can wake it.
#[tokio::test(start_paused = true)]
async fn a_row_queued_later_goes_when_the_doorbell_rings() {
    let _frozen = freeze();
    let (_dir, pool) = store().await;
    let receiver = webhook("http://127.0.0.1:1/alerts".into());
    let stats = Arc::new(ReceiverStats::new(&receiver.name));
    // A first row, failed for good, shows the dispatcher has looked.
    insert(&pool, "f0", "{}").await;
    let (task, stop, bell) = spawn_dispatcher(receiver, &pool, stats.clone());
    until(
        || row(&pool, "f0"),
        |r| r.as_ref().is_some_and(|r| r.0 == "failed"),
    )
    .await;
    // Its look after that one finds the queue empty; give it the reads.
    for _ in 0..50 {
        row(&pool, "f0").await;
        tokio::task::yield_now().await;
    }
    insert(&pool, "f1", "{}").await;
    bell.ring();
    let state = until(
        || row(&pool, "f1"),
        |r| r.as_ref().is_some_and(|r| r.0 != "pending"),
    )
    .await;
    assert_eq!(
        state.expect("kept").0,
        "failed",
        "the ring woke the dispatcher"
    );
    let _ = stop.send(true);
    task.await.expect("dispatcher");
}

/// A webhook whose header value has a line break can never be sent: its
/// message fails at the first attempt and stays failed (it used to be
/// retried forever), with a reason that has no secret in it.
#[tokio::test(start_paused = true)]
async fn a_request_that_cannot_be_made_fails_once_and_for_good() {
    let _frozen = freeze();
    let (_dir, pool) = store().await;
    insert(&pool, "f1", OLD_ROW).await;
    let receiver = ReceiverConfig {
        name: "hook".into(),
        kind: ReceiverKind::Webhook(WebhookConfig {
            url: "http://127.0.0.1:1/alerts".into(),
            headers: BTreeMap::from([("X-Team".to_string(), "ml\r\nX-Evil: 1".to_string())]),
            bearer_token: Some(Secret::new("tok-never-stored".into())),
            timeout: Duration::from_secs(1),
        }),
        backoff: Backoff::default(),
        route: crate::routing::Route::default(),
    };
    let stats = Arc::new(ReceiverStats::new("hook"));
    let (task, stop, _bell) = spawn_dispatcher(receiver, &pool, stats.clone());
    until(
        || row(&pool, "f1"),
        |r| r.as_ref().is_some_and(|r| r.0 != "pending" || r.1 > 0),
    )
    .await;
    // Past a retry after the shortest backoff (1 s ± 20 %), and past the
    // idle look: nothing more is sent.
    tokio::time::advance(IDLE + Duration::from_secs(2)).await;
    for _ in 0..50 {
        row(&pool, "f1").await;
        tokio::task::yield_now().await;
    }
    let (state, attempts, error) = row(&pool, "f1").await.expect("kept");
    let _ = stop.send(true);
    task.await.expect("dispatcher");
    assert_eq!((state.as_str(), attempts), ("failed", 1), "{error:?}");
    let error = error.unwrap_or_default();
    assert!(error.contains("cannot be built"), "{error}");
    assert!(!error.contains("tok-never-stored"), "{error}");
    assert_eq!(stats.failed.load(Ordering::Relaxed), 1);
    assert_eq!(stats.retried.load(Ordering::Relaxed), 0);
}

/// An Alertmanager receiver re-sends what its injected source gives: the
/// first time `FIRST_RESEND` after the start, then every
/// `resend_interval`, reading the source anew each time; nothing before.
/// On paused time: the 10 s and the 60 s are not waited for.
#[tokio::test(start_paused = true)]
async fn an_alertmanager_receiver_resends_what_its_source_gives() {
    use crate::notify::AlertmanagerConfig;
    use crate::rules::{Alert, AlertState};
    use std::sync::atomic::AtomicUsize;

    let _frozen = freeze();
    let (_dir, pool) = store().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let (bodies, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            if bodies.send(answer_one(stream)).is_err() {
                return;
            }
        }
    });
    let reads = Arc::new(AtomicUsize::new(0));
    let counted = reads.clone();
    let firing = FiringAlerts::new(move || {
        let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            Ok(vec![Alert {
                state: AlertState::Firing {
                    since: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
                    last_true: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
                },
                value: None,
                labels: BTreeMap::from([
                    ("alertname".to_string(), "GpuHot".to_string()),
                    ("read".to_string(), n.to_string()),
                ]),
                annotations: BTreeMap::new(),
                annotated_at: None,
            }])
        }
    });
    let resend_interval = Duration::from_secs(60);
    let receiver = ReceiverConfig {
        name: "am".into(),
        kind: ReceiverKind::Alertmanager(AlertmanagerConfig {
            url,
            headers: BTreeMap::new(),
            auth: None,
            timeout: Duration::from_secs(5),
            resend_interval,
            external_url: "http://node:9400".into(),
        }),
        backoff: Backoff::default(),
        route: crate::routing::Route::default(),
    };
    let stats = Arc::new(ReceiverStats::new("am"));
    let (stop, shutdown) = watch::channel(false);
    let bell = crate::outbox::Doorbell::default();
    let task = tokio::spawn(run(
        receiver,
        pool.clone(),
        stats.clone(),
        bell.listener(),
        shutdown,
        firing,
    ));
    // Its first looks at the (empty) outbox: no re-send yet.
    for _ in 0..50 {
        row(&pool, "none").await;
        tokio::task::yield_now().await;
    }
    assert_eq!(reads.load(Ordering::SeqCst), 0, "not before FIRST_RESEND");
    let next_body = || {
        until(
            || async { received.try_recv().ok() },
            |b: &Option<String>| b.is_some(),
        )
    };
    tokio::time::advance(FIRST_RESEND).await;
    let first = next_body().await.expect("a re-send");
    let first: serde_json::Value = serde_json::from_str(&first).expect("JSON");
    assert_eq!(first[0]["labels"]["alertname"], "GpuHot", "{first}");
    assert_eq!(first[0]["labels"]["read"], "1", "{first}");
    // Once the answer is counted, the next re-send is due in a minute.
    let delivered = || async { stats.delivered.load(Ordering::Relaxed) };
    until(delivered, |n| *n == 1).await;
    tokio::time::advance(resend_interval).await;
    let second = next_body().await.expect("a second re-send");
    let second: serde_json::Value = serde_json::from_str(&second).expect("JSON");
    assert_eq!(second[0]["labels"]["read"], "2", "read anew: {second}");
    until(delivered, |n| *n == 2).await;
    assert_eq!(reads.load(Ordering::SeqCst), 2, "one read per re-send");
    let _ = stop.send(true);
    task.await.expect("dispatcher");
}
