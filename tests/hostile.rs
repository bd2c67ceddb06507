//! Hostile clients against the real binary on 127.0.0.1: 1 000 idle
//! connections, slowloris on 200 (request heads trickled one byte at a
//! time), and a flood of busy keep-alive clients hammering /metrics. While
//! each attack runs, a scraper opens a fresh connection every second and
//! must get `200` for `GET /metrics` within Prometheus's default scrape
//! timeout (10 s) every time. A functional bound, not a speed figure: before
//! the server made room for new connections, each of these attacks held
//! every scrape back for as long as it lasted.
//!
//! Each attack is bounded in time and connections, and stops by itself.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Agent;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long each attack runs (the scraper scrapes once a second meanwhile).
const ATTACK: Duration = Duration::from_secs(6);
/// Prometheus's default scrape_timeout.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause before an attacker whose connection was closed opens another.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);

/// The test opens over a thousand sockets: raise the soft descriptor limit
/// to the hard one, and fail (not skip) if even that is too low.
fn raise_fd_limit(needed: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(got, 0, "getrlimit(RLIMIT_NOFILE) failed");
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: as above.
        let set = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
        assert_eq!(set, 0, "setrlimit(RLIMIT_NOFILE) to the hard limit failed");
    }
    assert!(
        limit.rlim_cur >= needed,
        "this test needs {needed} file descriptors; the hard limit is {}: raise it (ulimit -Hn)",
        limit.rlim_cur
    );
}

/// What the attackers did, to check that they really attacked.
#[derive(Default)]
struct Tally {
    connections: AtomicU64,
    responses: AtomicU64,
}

/// An attack: spawns its attackers on the runtime; they stop when `stop` is set.
type Attack = fn(&str, Arc<AtomicBool>, Arc<Tally>) -> Vec<tokio::task::JoinHandle<()>>;

async fn connect(address: &str, tally: &Tally) -> Option<TcpStream> {
    match tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(address)).await {
        Ok(Ok(stream)) => {
            tally.connections.fetch_add(1, Ordering::Relaxed);
            Some(stream)
        }
        _ => None,
    }
}

/// 1 000 connections that never send anything; one the server closes is
/// opened again.
fn idle(
    address: &str,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..1000)
        .map(|_| {
            let (address, stop, tally) = (address.to_string(), stop.clone(), tally.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(mut stream) = connect(&address, &tally).await {
                        let mut byte = [0u8; 1];
                        // Held until the server closes it or the attack ends.
                        while !stop.load(Ordering::Relaxed) {
                            match tokio::time::timeout(
                                Duration::from_millis(200),
                                stream.read(&mut byte),
                            )
                            .await
                            {
                                Err(_) => continue,
                                Ok(_) => break,
                            }
                        }
                    }
                    tokio::time::sleep(RECONNECT_PAUSE).await;
                }
            })
        })
        .collect()
}

/// 200 connections that send a request head one byte every 100 ms (with a
/// long header, so it never ends); one the server closes is opened again.
fn slowloris(
    address: &str,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..200)
        .map(|_| {
            let (address, stop, tally) = (address.to_string(), stop.clone(), tally.clone());
            tokio::spawn(async move {
                let mut head = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ".to_vec();
                head.extend(std::iter::repeat_n(b'a', 4096));
                while !stop.load(Ordering::Relaxed) {
                    if let Some(mut stream) = connect(&address, &tally).await {
                        for byte in &head {
                            if stop.load(Ordering::Relaxed)
                                || stream.write_all(std::slice::from_ref(byte)).await.is_err()
                            {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                    tokio::time::sleep(RECONNECT_PAUSE).await;
                }
            })
        })
        .collect()
}

/// 96 keep-alive clients, each sending `GET /metrics` again as soon as it
/// has read the answer; one whose connection closes opens another.
fn busy(
    address: &str,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..96)
        .map(|_| {
            let (address, stop, tally) = (address.to_string(), stop.clone(), tally.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let Some(mut stream) = connect(&address, &tally).await else {
                        tokio::time::sleep(RECONNECT_PAUSE).await;
                        continue;
                    };
                    while !stop.load(Ordering::Relaxed) {
                        let request = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
                        if stream.write_all(request).await.is_err() {
                            break;
                        }
                        let read = tokio::time::timeout(
                            Duration::from_secs(5),
                            read_response(&mut stream),
                        )
                        .await;
                        match read {
                            Ok(Some((_, _, close))) => {
                                tally.responses.fetch_add(1, Ordering::Relaxed);
                                if close {
                                    break;
                                }
                            }
                            _ => break,
                        }
                    }
                }
            })
        })
        .collect()
}

/// Reads one response with a Content-Length body: (status, body, whether
/// the server closes the connection after it).
async fn read_response(stream: &mut TcpStream) -> Option<(u16, String, bool)> {
    let mut raw = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        raw.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())?;
    let close = head.lines().any(|line| line == "connection: close");
    let mut body = raw[head_end + 4..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    Some((status, String::from_utf8_lossy(&body).into_owned(), close))
}

/// One scrape on a fresh connection: (status, body) or why it failed.
async fn scrape(address: &str) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect(address)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| format!("send: {e}"))?;
    read_response(&mut stream)
        .await
        .map(|(status, body, _)| (status, body))
        .ok_or_else(|| "the connection closed before a whole response".to_string())
}

/// Runs `attack` for [`ATTACK`] while scraping once a second; every scrape
/// must answer 200 within [`SCRAPE_TIMEOUT`]. Returns the attackers' tally
/// and the slowest scrape.
async fn scrapes_survive(address: &str, name: &str, attack: Attack) -> (Arc<Tally>, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let attackers = attack(address, stop.clone(), tally.clone());
    // Let the attack take hold before the first scrape.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let began = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut scrapes = 0;
    while began.elapsed() < ATTACK {
        let start = Instant::now();
        let result = tokio::time::timeout(SCRAPE_TIMEOUT, scrape(address)).await;
        let took = start.elapsed();
        slowest = slowest.max(took);
        scrapes += 1;
        match result {
            Ok(Ok((200, body))) => assert!(
                body.contains("gpuwatch_up"),
                "{name}: /metrics body: {body}"
            ),
            Ok(Ok((status, body))) => panic!("{name}: scrape {scrapes} answered {status}: {body}"),
            Ok(Err(error)) => panic!("{name}: scrape {scrapes} failed after {took:?}: {error}"),
            Err(_) => panic!("{name}: scrape {scrapes} got no answer within {SCRAPE_TIMEOUT:?}"),
        }
        tokio::time::sleep(Duration::from_secs(1).saturating_sub(took)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for attacker in attackers {
        let _ = tokio::time::timeout(Duration::from_secs(10), attacker).await;
    }
    eprintln!(
        "{name}: {scrapes} scrapes, slowest {slowest:?}; attackers opened {} connections, got {} responses",
        tally.connections.load(Ordering::Relaxed),
        tally.responses.load(Ordering::Relaxed)
    );
    (tally, slowest)
}

#[test]
fn scrapes_are_answered_under_hostile_clients() {
    raise_fd_limit(1500);
    let agent = Agent::start("demo", &["--no-history"], &[]);
    agent.wait_ready(200, Duration::from_secs(20));
    let address = agent.url.trim_start_matches("http://").to_string();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let (tally, _) = scrapes_survive(&address, "1000 idle connections", idle).await;
        assert!(
            tally.connections.load(Ordering::Relaxed) >= 1000,
            "the idle attack did not open its 1000 connections"
        );
        let (tally, _) = scrapes_survive(&address, "slowloris on 200", slowloris).await;
        assert!(tally.connections.load(Ordering::Relaxed) >= 200);
        let (tally, _) = scrapes_survive(&address, "96 busy keep-alive clients", busy).await;
        assert!(
            tally.responses.load(Ordering::Relaxed) > 96,
            "the busy clients got too few answers to have been hammering"
        );
    });
    // The agent came through: healthy, and nothing panicked.
    assert_eq!(agent.get("/-/healthy").0, 200);
    let metrics = agent.metrics();
    assert_eq!(
        metrics.value("gpuwatch_panics_total", &[("subsystem", "http")]),
        Some(0.0),
        "{}",
        agent.log()
    );
}
