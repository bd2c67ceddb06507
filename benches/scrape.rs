//! /metrics under load: 16 keep-alive clients scrape the agent's HTTP server
//! (in-process, on 127.0.0.1, its own single-threaded runtime as in the
//! agent) for the NVML simulator's `h100x8` snapshot, republished every
//! second as the sampler does.
//!
//! Prints, for the body encoded once per snapshot (what the agent serves) and
//! for the baseline that encodes and gzips everything at each scrape (the
//! agent before the cache), with and without gzip: scrapes per second, and
//! the server thread's CPU time per scrape (targets: >= 10 000 scrapes/s,
//! <= 0.1 ms CPU per scrape, with gzip as Prometheus asks for it).
//!
//! Then what each Prometheus scrape costs (one every 15 s, a snapshot every
//! second: every scrape meets a new snapshot): one client that publishes a
//! new snapshot before each request, the server thread's CPU per scrape for
//! the per-GPU part written by the direct text writer (now) against
//! `prometheus_client`'s encoder (previous main), alternately in one run,
//! gzip and identity, default and full detail (target: <= 0.15 ms at the
//! default, issue 23).
//!
//! Run: `cargo bench --bench scrape` (add `-- --quick` for shorter runs).

#[path = "common/mod.rs"]
mod common;

use common::{run_size, thread_cpu};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use gpuwatch::exporter::detail::Detail;
use gpuwatch::exporter::Exporter;
use gpuwatch::gpu::nvml::Driver;
use gpuwatch::gpu::Snapshot;
use gpuwatch::http::{serve_secured, HttpState, ServerLimits, WebSecurity};
use gpuwatch::panics::Panics;
use gpuwatch::sampler::procnames::ProcessNames;
use gpuwatch::sampler::reader::{NodeReader, Tiers};
use gpuwatch::sampler::Progress;

const CLIENTS: usize = 16;

/// CPU time of another thread of this process (its pthread CPU clock).
fn cpu_of(thread: libc::pthread_t) -> Duration {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the thread is alive (joined only after the last reading);
    // both calls write through valid pointers.
    let rc = unsafe { libc::pthread_getcpuclockid(thread, &mut clock) };
    assert_eq!(rc, 0, "pthread_getcpuclockid failed");
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// One keep-alive client: scrapes until `stop`, counting complete responses.
fn client(port: u16, gzip: bool, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the server");
    stream.set_nodelay(true).expect("nodelay");
    let mut writer = stream.try_clone().expect("clone the stream");
    let mut reader = BufReader::with_capacity(256 * 1024, stream);
    let mut body = Vec::new();
    let mut line = String::new();
    while !stop.load(Ordering::Relaxed) {
        scrape(&mut writer, &mut reader, gzip, &mut line, &mut body);
        done.fetch_add(1, Ordering::Relaxed);
    }
}

/// What Prometheus does: each scrape meets a snapshot no scrape has seen
/// (published here just before the request), one request at a time.
fn fresh_client(
    port: u16,
    gzip: bool,
    snapshots: (tokio::sync::watch::Sender<Option<Arc<Snapshot>>>, Snapshot),
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
) {
    let (tx, snapshot) = snapshots;
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the server");
    stream.set_nodelay(true).expect("nodelay");
    let mut writer = stream.try_clone().expect("clone the stream");
    let mut reader = BufReader::with_capacity(256 * 1024, stream);
    let mut body = Vec::new();
    let mut line = String::new();
    while !stop.load(Ordering::Relaxed) {
        let mut fresh = snapshot.clone();
        fresh.taken_at = SystemTime::now();
        tx.send_replace(Some(Arc::new(fresh)));
        scrape(&mut writer, &mut reader, gzip, &mut line, &mut body);
        done.fetch_add(1, Ordering::Relaxed);
    }
}

/// One request and its complete response.
fn scrape(
    writer: &mut TcpStream,
    reader: &mut BufReader<TcpStream>,
    gzip: bool,
    line: &mut String,
    body: &mut Vec<u8>,
) {
    let request = if gzip {
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip\r\n\r\n"
    } else {
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    };
    writer
        .write_all(request.as_bytes())
        .expect("send a request");
    let mut length = None;
    let mut status = true;
    loop {
        line.clear();
        reader.read_line(line).expect("read a header line");
        if status {
            assert!(line.starts_with("HTTP/1.1 200"), "{line}");
            status = false;
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<usize>().ok();
            }
        }
    }
    let length = length.expect("a Content-Length");
    body.resize(length, 0);
    reader.read_exact(body).expect("read the body");
}

/// How the server is scraped and what encodes the body.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// 16 keep-alive clients; a new snapshot every second.
    Load { cached: bool },
    /// One client, a new snapshot before each scrape; `direct`: the direct
    /// text writer (false: prometheus_client's encoder, previous main).
    Fresh { direct: bool },
}

struct Figures {
    scrapes_per_s: f64,
    cpu_ms_per_scrape: f64,
    body_bytes: usize,
}

fn measure(snapshot: &Snapshot, detail: Detail, mode: Mode, gzip: bool, seconds: f64) -> Figures {
    let (tx, rx) = tokio::sync::watch::channel(Some(Arc::new(snapshot.clone())));
    let mut exporter = Exporter::new(rx.clone(), Duration::from_secs(3600)).with_detail(detail);
    match mode {
        Mode::Load { cached: false } => exporter = exporter.encode_per_scrape(),
        Mode::Fresh { direct: false } => exporter = exporter.with_prometheus_client_encoder(),
        _ => {}
    }
    let body_bytes = exporter
        .body(gpuwatch::exporter::Format::Prometheus, gzip)
        .expect("encode")
        .bytes
        .len();
    let state = Arc::new(HttpState {
        exporter,
        snapshots: rx,
        stale_after: Duration::from_secs(3600),
        progress: Arc::new(Progress::default()),
        history: None,
        alerts: None,
        silences: None,
        panics: Arc::new(Panics::default()),
    });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("bound address").port();
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let limits = ServerLimits {
                max_connections: 64,
                request_timeout: Duration::from_secs(10),
                idle_timeout: Duration::from_secs(10),
            };
            serve_secured(
                listener,
                state,
                limits,
                Arc::new(WebSecurity::none()),
                shutdown_rx,
            )
            .await
            .expect("serve");
        });
    });
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = match mode {
        Mode::Load { .. } => (0..CLIENTS)
            .map(|_| {
                let (stop, done) = (stop.clone(), done.clone());
                std::thread::spawn(move || client(port, gzip, stop, done))
            })
            .collect(),
        Mode::Fresh { .. } => {
            let (stop, done) = (stop.clone(), done.clone());
            let snapshots = (tx.clone(), snapshot.clone());
            vec![std::thread::spawn(move || {
                fresh_client(port, gzip, snapshots, stop, done)
            })]
        }
    };
    // Warm up, then measure; a new snapshot every second as the sampler
    // publishes them.
    std::thread::sleep(Duration::from_millis(200));
    let (n0, c0, t0) = (
        done.load(Ordering::Relaxed),
        cpu_of(server.as_pthread_t()),
        Instant::now(),
    );
    let mut next = Duration::from_secs(1);
    while t0.elapsed().as_secs_f64() < seconds {
        std::thread::sleep(Duration::from_millis(50));
        if matches!(mode, Mode::Load { .. }) && t0.elapsed() >= next {
            let mut fresh = snapshot.clone();
            fresh.taken_at = SystemTime::now();
            tx.send_replace(Some(Arc::new(fresh)));
            next += Duration::from_secs(1);
        }
    }
    let (n1, c1, elapsed) = (
        done.load(Ordering::Relaxed),
        cpu_of(server.as_pthread_t()),
        t0.elapsed(),
    );
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().expect("client thread");
    }
    let _ = shutdown_tx.send(true);
    server.join().expect("server thread");
    let scrapes = (n1 - n0).max(1) as f64;
    Figures {
        scrapes_per_s: scrapes / elapsed.as_secs_f64(),
        cpu_ms_per_scrape: (c1 - c0).as_secs_f64() * 1e3 / scrapes,
        body_bytes,
    }
}

/// Where a scrape of a new snapshot spends, in this thread, without HTTP:
/// the whole body's encoding (ms, median over `n` new snapshots), and the
/// deflate of the per-GPU text (ms), for the direct writer or not.
fn split(snapshot: &Snapshot, detail: Detail, direct: bool, n: usize) -> (f64, f64, usize) {
    let (tx, rx) = tokio::sync::watch::channel(Some(Arc::new(snapshot.clone())));
    let mut exporter = Exporter::new(rx, Duration::from_secs(3600)).with_detail(detail);
    if !direct {
        exporter = exporter.with_prometheus_client_encoder();
    }
    let (mut encode, mut deflate, mut size) = (Vec::new(), Vec::new(), 0);
    for _ in 0..n {
        let mut fresh = snapshot.clone();
        fresh.taken_at = SystemTime::now();
        tx.send_replace(Some(Arc::new(fresh)));
        let t0 = thread_cpu();
        let text = exporter
            .render(gpuwatch::exporter::Format::Prometheus)
            .expect("encode");
        let t1 = thread_cpu();
        let piece = gpuwatch::exporter::gzip::Piece::deflate(text.as_bytes()).expect("deflate");
        let t2 = thread_cpu();
        std::hint::black_box(piece);
        size = text.len();
        encode.push((t1 - t0).as_secs_f64() * 1e3);
        deflate.push((t2 - t1).as_secs_f64() * 1e3);
    }
    (median(encode), median(deflate), size)
}

/// Alternating runs of default and full per configuration.
const ROUNDS: usize = 3;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let (smoke, quick) = run_size();
    let seconds = if smoke {
        0.3
    } else if quick {
        2.0
    } else {
        5.0
    };
    std::env::set_var(nvml_sim::ENV_SCENARIO, "builtin:h100x8");
    let library = gpuwatch::sim::locate_library()
        .expect("build the simulator first: cargo build --workspace --release");
    let driver = Driver::open(Some(&library)).expect("open the simulator");
    let mut reader = NodeReader::new(&driver, "bench".into(), ProcessNames::new(None));
    // Two ticks a second apart: GPM figures need a pair of samples, as in
    // a running agent's /metrics.
    let _ = reader.tick(Tiers::ALL, None);
    std::thread::sleep(Duration::from_millis(1100));
    let mut snapshot = reader.tick(Tiers::ALL, None);
    snapshot.taken_at = SystemTime::now();
    let processes: usize = snapshot.gpus.iter().map(|g| g.processes.len()).sum();
    println!(
        "scenario h100x8: {} GPUs, {processes} processes; {CLIENTS} keep-alive clients, {seconds} s per run",
        snapshot.gpus.len()
    );
    // The default /metrics against every detail set (the families the
    // agent exported before detail sets, plus 16 per-GPU NVLink series),
    // alternately, `ROUNDS` times: medians of each.
    let rounds = if smoke { 1 } else { ROUNDS };
    for gzip in [true, false] {
        for cached in [false, true] {
            let mut figures: [Vec<Figures>; 2] = [Vec::new(), Vec::new()];
            for _ in 0..rounds {
                for (i, detail) in [Detail::NONE, Detail::full()].into_iter().enumerate() {
                    figures[i].push(measure(
                        &snapshot,
                        detail,
                        Mode::Load { cached },
                        gzip,
                        seconds,
                    ));
                }
            }
            let mut cpu = [0.0; 2];
            for (i, name) in ["default", "full"].into_iter().enumerate() {
                let f = &mut figures[i];
                cpu[i] = median(f.iter().map(|f| f.cpu_ms_per_scrape).collect());
                println!(
                    "{:<44} {:>6} bytes: {:>8.0} scrapes/s, {:.3} ms server CPU per scrape (median of {rounds})",
                    format!(
                        "{name}, {}, {}",
                        if cached {
                            "encoded once per snapshot"
                        } else {
                            "encoded per scrape (baseline)"
                        },
                        if gzip { "gzip" } else { "identity" }
                    ),
                    f[0].body_bytes,
                    median(f.iter().map(|f| f.scrapes_per_s).collect()),
                    cpu[i]
                );
            }
            println!("  default / full CPU per scrape: {:.2}", cpu[0] / cpu[1]);
        }
    }
    println!("targets: >= 10000 scrapes/s and <= 0.100 ms CPU per scrape under load");
    // What each Prometheus scrape costs: a new snapshot at every scrape,
    // the direct text writer against prometheus_client's encoder
    // alternately.
    println!("each scrape meets a new snapshot (what Prometheus sees), one client:");
    for gzip in [true, false] {
        for (d, detail) in [("default", Detail::NONE), ("full", Detail::full())] {
            let mut figures: [Vec<Figures>; 2] = [Vec::new(), Vec::new()];
            for _ in 0..rounds {
                for (i, direct) in [false, true].into_iter().enumerate() {
                    figures[i].push(measure(
                        &snapshot,
                        detail,
                        Mode::Fresh { direct },
                        gzip,
                        seconds,
                    ));
                }
            }
            let mut cpu = [0.0; 2];
            for (i, name) in [
                "prometheus_client encoder (previous main)",
                "direct text writer (now)",
            ]
            .into_iter()
            .enumerate()
            {
                let f = &figures[i];
                cpu[i] = median(f.iter().map(|f| f.cpu_ms_per_scrape).collect());
                println!(
                    "{:<62} {:>6} bytes: {:.3} ms server CPU per scrape (median of {rounds})",
                    format!("{d}, {}, {name}", if gzip { "gzip" } else { "identity" }),
                    f[0].body_bytes,
                    cpu[i]
                );
            }
            println!("  now / previous main: {:.2}", cpu[1] / cpu[0]);
        }
    }
    println!(
        "target: <= 0.150 ms CPU per scrape that meets a new snapshot, at the default (issue 23)"
    );
    // The same split by step, in this thread, without HTTP.
    let n = if smoke { 20 } else { 400 };
    for (d, detail) in [("default", Detail::NONE), ("full", Detail::full())] {
        let mut rows = [(0.0, 0.0, 0); 2];
        for _ in 0..rounds {
            for (i, direct) in [false, true].into_iter().enumerate() {
                let (e, z, size) = split(&snapshot, detail, direct, n);
                rows[i] = (
                    rows[i].0 + e / rounds as f64,
                    rows[i].1 + z / rounds as f64,
                    size,
                );
            }
        }
        for (i, name) in [
            "prometheus_client encoder (previous main)",
            "direct text writer (now)",
        ]
        .into_iter()
        .enumerate()
        {
            println!(
                "{d}, {name}: encoding the body {:.3} ms, deflating it (miniz_oxide level 1) {:.3} ms, {} bytes (medians of {n} new snapshots, mean of {rounds} runs)",
                rows[i].0, rows[i].1, rows[i].2
            );
        }
        println!(
            "  encoding now / previous main: {:.2}",
            rows[1].0 / rows[0].0
        );
    }
    drop(reader);
    drop(driver);
}
