//! Alerting cost and speed.
//!
//! Prints:
//! - rule evaluation time per snapshot for 8 GPUs (the simulator's `h100x8`
//!   scenario, read through the agent's own sampler) with the full built-in
//!   pack plus 20 user rules (target ≤ 50 µs), beside the built-in pack alone
//!   as the baseline measured in the same run;
//! - latency from a condition turning true to the notification reaching a
//!   webhook: the real `gpuwatch` binary on a scenario whose temperature
//!   steps up at a known time, a user rule with a 3 s hold, and a webhook
//!   server here that records when the message arrives (target ≤ hold + one
//!   sampling interval + 1 s).
//!
//! Run: `cargo bench --bench rules` (add `-- --quick` for fewer rounds).

#[path = "common/mod.rs"]
mod common;

use common::{percentile, run_size};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use gpuwatch::gpu::nvml::Driver;
use gpuwatch::gpu::Snapshot;
use gpuwatch::rules::{evaluate, parse_rules, EvalState, Rule};
use gpuwatch::sampler::procnames::ProcessNames;
use gpuwatch::sampler::reader::{NodeReader, Tiers};

/// Twenty user rules of every condition kind, with annotation templates.
const USER_RULES: &str = r#"
[[rules]]
name = "Hot80"
condition = "temperature > 80"
for = "2m"
clear = 75
annotations = { summary = "GPU {{ .gpu }} ({{ .name }}) on {{ .host }} at {{ .value }} °C" }
[[rules]]
name = "Hot85"
condition = "temperature > 85"
for = "1m"
severity = "critical"
[[rules]]
name = "MemTempHigh"
condition = "memory_temperature > 90"
for = "1m"
[[rules]]
name = "NearSlowdown3"
condition = "degrees_below_slowdown < 3"
for = "30s"
[[rules]]
name = "MemAlmostFull"
condition = "memory_used_ratio > 0.9"
for = "10m"
labels = { team = "ml-infra" }
[[rules]]
name = "MemFreeLow"
condition = "memory_free_bytes < 2GiB"
for = "5m"
[[rules]]
name = "PowerAtCap"
condition = "power_limit_ratio > 0.97"
for = "15m"
[[rules]]
name = "PowerLow"
condition = "power < 60"
for = "30m"
[[rules]]
name = "Idle"
condition = "utilization < 5"
for = "1h"
severity = "info"
[[rules]]
name = "MemBusy"
condition = "memory_utilization > 95"
for = "10m"
[[rules]]
name = "SmClockLow"
condition = "sm_clock < 800"
for = "5m"
[[rules]]
name = "PstateLow"
condition = "performance_state > 2"
for = "10m"
[[rules]]
name = "PcieNarrow"
condition = "pcie_link_width < 16"
for = "5m"
[[rules]]
name = "HwSlowdown"
condition = "clock_event(hw_slowdown) or clock_event(hw_thermal_slowdown)"
for = "1m"
[[rules]]
name = "PowerCapped"
condition = "clock_event(sw_power_cap)"
for = "30m"
severity = "info"
[[rules]]
name = "XidAny"
condition = "xid(13, 31, 43, 45, 63, 64, 74, 79, 92, 94, 95)"
keep_firing_for = "10m"
[[rules]]
name = "EccUp"
condition = "increase(ecc_uncorrected)"
keep_firing_for = "1h"
[[rules]]
name = "NoPower"
condition = "absent(power)"
for = "5m"
[[rules]]
name = "TempAnomaly5"
condition = "temperature_anomaly(5)"
for = "10m"
severity = "info"
[[rules]]
name = "PeerHot10"
condition = "peer_hotter(10)"
for = "10m"
severity = "info"
"#;

/// Evaluates `rules` once per snapshot, carrying the state as the agent
/// does; returns each evaluation's time in µs.
fn time_evaluations(rules: &[Rule], snapshots: &[Snapshot]) -> Vec<f64> {
    let mut state = EvalState::default();
    let mut times = Vec::with_capacity(snapshots.len());
    for snapshot in snapshots {
        let t0 = Instant::now();
        let (next, transitions) = evaluate(rules, snapshot, &state, snapshot.taken_at);
        times.push(t0.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(transitions);
        state = next;
    }
    times
}

fn evaluation_cost(rounds: usize) {
    std::env::set_var(nvml_sim::ENV_SCENARIO, "builtin:h100x8");
    let library = gpuwatch::sim::locate_library()
        .expect("build the simulator first: cargo build --workspace --release");
    let driver = Driver::open(Some(&library)).expect("open the simulator");
    let mut reader = NodeReader::new(&driver, "bench".into(), ProcessNames::new(None));
    // Real snapshots from the sampler, one simulated second apart.
    let start = SystemTime::now();
    let snapshots: Vec<Snapshot> = (0..rounds)
        .map(|i| {
            let mut s = reader.tick(if i == 0 { Tiers::ALL } else { Tiers::default() }, None);
            s.taken_at = start + Duration::from_secs(i as u64);
            s
        })
        .collect();
    let gpus = snapshots[0].gpus.len();
    let full = parse_rules(USER_RULES, "bench.toml").expect("the bench's rules are valid");
    let builtin = parse_rules("", "bench.toml").expect("the built-in pack");
    // Interleave the two sets so machine noise hits both alike.
    let (mut with_user, mut pack_only) = (Vec::new(), Vec::new());
    for chunk in snapshots.chunks(50) {
        with_user.extend(time_evaluations(&full, chunk));
        pack_only.extend(time_evaluations(&builtin, chunk));
    }
    let (p50, p99) = (
        percentile(&mut with_user, 0.5),
        percentile(&mut with_user, 0.99),
    );
    let base = percentile(&mut pack_only, 0.5);
    println!(
        "rule evaluation, {gpus} GPUs, {} rules ({} built-in + 20 user), {rounds} snapshots: \
         p50 {p50:.1} us, p99 {p99:.1} us (target <= 50 us); built-in pack alone p50 {base:.1} us; ratio {:.2}",
        full.len(),
        builtin.len(),
        p50 / base
    );
}

/// A webhook server that reports when each message arrives, with its body.
fn webhook_server() -> (u16, mpsc::Receiver<(Instant, String)>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().expect("port").port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let arrived = Instant::now();
            let mut reader = BufReader::new(&stream);
            let mut length = 0usize;
            let mut line = String::new();
            while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                if line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let _ = (&stream)
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let _ = tx.send((arrived, String::from_utf8_lossy(&body).into_owned()));
        }
    });
    (port, rx)
}

fn handoff_latency(runs: usize) {
    const STEP_AT: u64 = 8; // scenario seconds until the temperature steps up
    const HOLD: u64 = 3;
    const INTERVAL: u64 = 1;
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = dir.path().join("step.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"step\"\n[[gpu]]\nname = \"NVIDIA A100-SXM4-80GB\"\ntemp_slowdown_c = 90\n\
             [gpu.metrics]\nutilization_gpu = 80\ntemperature_gpu = {{ step = [[\"0s\", 60], [\"{STEP_AT}s\", 84]] }}\n"
        ),
    )
    .expect("write the scenario");
    let mut latencies = Vec::new();
    for run in 0..runs {
        let (port, arrivals) = webhook_server();
        let config = dir.path().join(format!("gpuwatch-{run}.toml"));
        std::fs::write(
            &config,
            format!(
                "[history]\npath = \"{}\"\n\n[[rules]]\nname = \"BenchHot\"\ncondition = \"temperature > 80\"\nfor = \"{HOLD}s\"\n\n\
                 [[receivers]]\nname = \"bench\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:{port}/\"\n",
                dir.path().join(format!("history-{run}.db")).display()
            ),
        )
        .expect("write the config");
        let spawned = Instant::now();
        let mut agent = Command::new(env!("CARGO_BIN_EXE_gpuwatch"))
            .args(["run", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .arg("--simulate")
            .arg(&scenario)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start gpuwatch");
        let deadline = spawned + Duration::from_secs(STEP_AT + HOLD + 30);
        let mut arrived = None;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match arrivals.recv_timeout(left) {
                Ok((at, body)) if body.contains("BenchHot") && body.contains("firing") => {
                    arrived = Some(at);
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let _ = agent.kill();
        let _ = agent.wait();
        let arrived = arrived.expect("the BenchHot notification reached the webhook");
        // The simulator's clock starts at nvmlInit, after the spawn: the true
        // condition start is later than spawn + STEP_AT, so this overstates
        // the latency (by the agent's start-up time).
        let latency = arrived.duration_since(spawned).as_secs_f64() - STEP_AT as f64;
        latencies.push(latency);
    }
    let median = percentile(&mut latencies, 0.5);
    let worst = percentile(&mut latencies, 1.0);
    println!(
        "condition true -> webhook handoff, hold {HOLD} s, interval {INTERVAL} s, {runs} runs: median {median:.2} s, worst {worst:.2} s \
         (target <= {} s; includes the agent's start-up)",
        HOLD + INTERVAL + 1
    );
}

fn main() {
    let (smoke, quick) = run_size();
    evaluation_cost(if smoke {
        100
    } else if quick {
        1000
    } else {
        5000
    });
    handoff_latency(if smoke {
        1
    } else if quick {
        3
    } else {
        5
    });
}
