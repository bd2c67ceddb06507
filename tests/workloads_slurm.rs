//! Workload accounting against a real Slurm (issue 24 §4): a one-node
//! Slurm on loopback ([`common::slurm::SlurmCluster`], proctrack/linuxproc,
//! four GRES GPUs backed by plain files) runs real `sbatch --gres=gpu:N`
//! jobs whose scripts sleep; the simulator reports those jobs' real pids as
//! GPU processes (`GPUWATCH_SIM_PID_MAP`) on the GPUs Slurm gave them, and
//! the agent reads the real `/proc` (`[sampler] proc_root`). The scenario
//! holds SM activity at 60 % (GPM) and power at 300 W on every GPU, so the
//! figures can be checked exactly.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::slurm::{GresFiles, SlurmCluster};
use common::{run_cli, Agent, Metrics};

const LONG: Duration = Duration::from_secs(120);

/// Every GPU's power in the scenario, watts.
const POWER_W: f64 = 300.0;
/// Every GPU's SM activity in the scenario (GPM), as a ratio; NVML's
/// utilization says 95 %, so a figure built on it would show.
const SM_ACTIVE: f64 = 0.6;
/// The agent's sample interval (and process interval), seconds.
const SAMPLE_S: f64 = 1.0;
/// How often the agent reads a GPU's energy counter (`ENERGY_EVERY`).
const ENERGY_READ_S: f64 = 5.0;

/// slurm.conf lines that let jobs run side by side: each takes one of the
/// node's two cores, no memory (the node declares none to share).
const SIDE_BY_SIDE: &str = "SelectTypeParameters=CR_Core";

/// One cluster at a time: each test starts its own daemons.
static SERIAL: Mutex<()> = Mutex::new(());

/// Slurm jobs cancelled when dropped, so no job's `sleep` outlives a
/// failed test (slurmd's death does not end them).
struct Jobs<'a> {
    cluster: &'a SlurmCluster,
    ids: Vec<u64>,
}

impl Drop for Jobs<'_> {
    fn drop(&mut self) {
        for id in &self.ids {
            let _ = self.cluster.command("scancel").arg(id.to_string()).output();
        }
    }
}

impl<'a> Jobs<'a> {
    fn new(cluster: &'a SlurmCluster) -> Self {
        Jobs {
            cluster,
            ids: Vec::new(),
        }
    }

    /// Submits a job on one GPU whose script writes its pid and then
    /// becomes `sleep seconds` (the same pid, Slurm's environment); waits
    /// until it runs: (job id, its GPU index, its pid).
    fn submit(&mut self, dir: &Path, seconds: u64) -> (u64, u32, u32) {
        let script = dir.join(format!("job-{}.sh", self.ids.len()));
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n\
                 echo $$ > {d}/.pid-$SLURM_JOB_ID && mv {d}/.pid-$SLURM_JOB_ID {d}/pid-$SLURM_JOB_ID\n\
                 exec sleep {seconds}\n",
                d = dir.display()
            ),
        )
        .expect("job script");
        let output = format!("--output={}/job-%j.out", dir.display());
        let chdir = format!("--chdir={}", dir.display());
        let id = self.cluster.sbatch(
            &[
                "--gres=gpu:1",
                "--account=physics",
                "--job-name=train",
                &output,
                &chdir,
            ],
            &script,
        );
        self.ids.push(id);
        let pid_file = dir.join(format!("pid-{id}"));
        let pid = wait_until(
            &format!("job {id} running (its pid file)"),
            self.cluster,
            None,
            || {
                std::fs::read_to_string(&pid_file)
                    .ok()
                    .and_then(|t| t.trim().parse::<u32>().ok())
            },
        );
        let gpus = wait_until(
            &format!("job {id}'s GPU in scontrol"),
            self.cluster,
            None,
            || Some(self.cluster.job_gpus(id)).filter(|g| !g.is_empty()),
        );
        assert_eq!(gpus.len(), 1, "job {id} asked for one GPU: {gpus:?}");
        (id, gpus[0], pid)
    }
}

/// The simulated driver's view of real processes: scenario pid → real pid
/// (`GPUWATCH_SIM_PID_MAP`). A real driver drops a process from its list
/// when it exits; [`PidMap::follow`] does that here (maps it to 0).
struct PidMap {
    path: PathBuf,
    pairs: Vec<(u32, u32)>,
}

impl PidMap {
    fn new(dir: &Path, pairs: &[(u32, u32)]) -> PidMap {
        let map = PidMap {
            path: dir.join("pid-map"),
            pairs: pairs.to_vec(),
        };
        map.write();
        map
    }

    fn write(&self) {
        let text: String = self
            .pairs
            .iter()
            .map(|(scenario, real)| format!("{scenario} {real}\n"))
            .collect();
        let temp = self.path.with_extension("tmp");
        std::fs::write(&temp, text).expect("pid map");
        std::fs::rename(&temp, &self.path).expect("pid map in place");
    }

    /// Maps every exited process to 0, as the driver forgets it.
    fn follow(&mut self) {
        let mut changed = false;
        for (_, real) in self.pairs.iter_mut() {
            if *real != 0 && !alive(*real) {
                *real = 0;
                changed = true;
            }
        }
        if changed {
            self.write();
        }
    }
}

/// Whether `pid` runs (exists and is not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .to_string();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

/// A simulated GPU process: its GPU, scenario pid, name, memory, and the
/// window it runs in (seconds of simulated time; whole run when `None`).
struct SimProcess {
    gpu: u32,
    pid: u32,
    name: &'static str,
    memory_mib: u64,
    window: Option<(u64, u64)>,
}

/// Four H100s with GPM, SM activity 60 % and 300 W each, running
/// `processes` (listed per GPU in the order given).
fn scenario(dir: &Path, processes: &[SimProcess]) -> String {
    let mut text = String::from(
        "name = \"slurm-jobs\"\ndescription = \"four H100s at 60 % SM activity and 300 W, running Slurm jobs' processes\"\nseed = 3\n",
    );
    for gpu in 0..4 {
        text.push_str(&format!(
            "\n[[gpu]]\nname = \"NVIDIA H100 80GB HBM3\"\npci_device_id = 0x233010DE\nunsupported = [\"retired_pages\"]\nmig = false\n\n\
             [gpu.metrics]\nutilization_gpu = 95\npower_w = {POWER_W}\ntemperature_gpu = 50\n\n\
             [gpu.gpm]\nsm_active = {}\n",
            SM_ACTIVE * 100.0
        ));
        for p in processes.iter().filter(|p| p.gpu == gpu) {
            text.push_str(&format!(
                "\n[[gpu.processes]]\npid = {}\nname = \"{}\"\nmemory_mib = {}\n",
                p.pid, p.name, p.memory_mib
            ));
            if let Some((start, stop)) = p.window {
                text.push_str(&format!("start = \"{start}s\"\nstop = \"{stop}s\"\n"));
            }
        }
    }
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).expect("scenario");
    path.to_str().expect("utf-8").to_string()
}

/// The agent on `scenario`, reading the real /proc, every tier each
/// second, the simulator's pids mapped by `map`; `[workloads]` as given.
fn agent(dir: &Path, scenario: &str, map: &PidMap, workloads: &str) -> Agent {
    let config = dir.join("gpuwatch.toml");
    std::fs::write(
        &config,
        format!(
            "[sampler]\nslow_interval = \"1s\"\nprocess_interval = \"1s\"\nproc_root = \"/proc\"\n\n\
             [workloads]\n{workloads}\n"
        ),
    )
    .expect("config");
    Agent::start(
        scenario,
        &["--config", config.to_str().expect("utf-8")],
        &[("GPUWATCH_SIM_PID_MAP", map.path.to_str().expect("utf-8"))],
    )
}

/// Polls `found` every 200 ms until it answers; panics after [`LONG`]
/// with Slurm's logs (and the agent's).
fn wait_until<T>(
    what: &str,
    cluster: &SlurmCluster,
    agent: Option<&Agent>,
    mut found: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + LONG;
    loop {
        if let Some(value) = found() {
            return value;
        }
        if Instant::now() > deadline {
            panic!(
                "timed out waiting for {what}\nagent log:\n{}\nslurm:\n{}",
                agent.map(Agent::log).unwrap_or_default(),
                cluster.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One workload family's value for Slurm job `job` on `gpu`.
fn job_value(m: &Metrics, family: &str, job: u64, gpu: u32) -> Option<f64> {
    m.value(
        family,
        &[
            ("kind", "slurm_job"),
            ("workload", &job.to_string()),
            ("gpu", &gpu.to_string()),
        ],
    )
}

/// The three counters of `job` on `gpu`: (held, SM-active, energy).
fn job_counters(m: &Metrics, job: u64, gpu: u32) -> Option<(f64, f64, f64)> {
    Some((
        job_value(m, "gpuwatch_workload_gpu_seconds_total", job, gpu)?,
        job_value(m, "gpuwatch_workload_sm_active_seconds_total", job, gpu)?,
        job_value(m, "gpuwatch_workload_energy_joules_total", job, gpu)?,
    ))
}

/// The GPU's energy counter as exported.
fn gpu_energy(m: &Metrics, gpu: u32) -> Option<f64> {
    m.find(
        "gpuwatch_energy_consumption_joules_total",
        &[("gpu", &gpu.to_string())],
    )
    .first()
    .map(|s| s.value)
}

/// Slurm job `job`'s record in `/api/v1/workloads`.
fn api_record(agent: &Agent, job: u64) -> Option<serde_json::Value> {
    let id = job.to_string();
    let (status, body) = agent.get("/api/v1/workloads?kind=slurm_job&from=-1h");
    assert_eq!(status, 200, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    body["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .find(|w| w["id"] == id.as_str())
        .cloned()
}

/// Every record of `/api/v1/workloads` (all kinds).
fn api_records(agent: &Agent) -> Vec<serde_json::Value> {
    let (status, body) = agent.get("/api/v1/workloads?from=-1h");
    assert_eq!(status, 200, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    body["workloads"].as_array().expect("workloads").clone()
}

/// Slurm job `job`'s row through `gpuwatch jobs --format json --db`.
fn cli_record(agent: &Agent, job: u64) -> Option<serde_json::Value> {
    let id = job.to_string();
    let db = agent.history.to_str().expect("utf-8");
    let (code, out, err) = run_cli(
        &[
            "jobs",
            "--db",
            db,
            "--since",
            "1h",
            "--kind",
            "slurm_job",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(code, 0, "gpuwatch jobs: {err}");
    let rows: serde_json::Value = serde_json::from_str(&out).expect("JSON array");
    rows.as_array()
        .expect("an array")
        .iter()
        .find(|w| w["id"] == id.as_str())
        .cloned()
}

fn number(record: &serde_json::Value, field: &str) -> f64 {
    record[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} is not a number: {record}"))
}

/// `a` and `b` equal to within `tolerance`, with a message naming `what`.
fn close(a: f64, b: f64, tolerance: f64, what: &str) {
    assert!(
        (a - b).abs() <= tolerance,
        "{what}: {a} vs {b} (tolerance {tolerance})"
    );
}

/// The record's figures equal the last /metrics counters (held, SM-active,
/// energy), and it names the job's GPU, user, account and partition.
fn assert_record(record: &serde_json::Value, counters: (f64, f64, f64), gpu: u32, source: &str) {
    assert_eq!(record["kind"], "slurm_job", "{source}: {record}");
    assert_eq!(record["user"], "root", "{source}: {record}");
    assert_eq!(record["account"], "physics", "{source}: {record}");
    assert_eq!(record["partition"], "gpu", "{source}: {record}");
    assert_eq!(
        record["gpus"],
        serde_json::json!([gpu.to_string()]),
        "{source}: {record}"
    );
    close(
        number(record, "gpu_seconds"),
        counters.0,
        1e-6,
        &format!("{source} gpu_seconds"),
    );
    close(
        number(record, "sm_active_seconds"),
        counters.1,
        1e-6,
        &format!("{source} sm_active_seconds"),
    );
    close(
        number(record, "energy_joules"),
        counters.2,
        1e-3,
        &format!("{source} energy_joules"),
    );
    close(
        number(record, "efficiency"),
        counters.1 / counters.0,
        1e-9,
        &format!("{source} efficiency"),
    );
    assert!(
        record["peak_memory_bytes"].as_i64().unwrap_or(0) > 0,
        "{source}: {record}"
    );
}

/// A job alone on a GPU for a window of 40 s of the scenario: attributed
/// through its environment (proctrack/linuxproc puts it in no Slurm
/// cgroup), with the user, account and partition Slurm set, and charged
/// 40 GPU-seconds, 60 % of them SM-active, and the GPU's energy over the
/// same samples.
#[test]
fn a_job_alone_on_a_gpu_is_found_by_its_environment_and_charged_exactly() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = SlurmCluster::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut jobs = Jobs::new(&cluster);
    let (job, gpu, pid) = jobs.submit(dir.path(), 300);
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    assert!(
        !cgroup.contains("job_"),
        "proctrack/linuxproc: the job's process is in no Slurm cgroup, so only its environment names the job: {cgroup}"
    );
    // On the simulated GPU from 4 s to 44 s of the scenario's clock.
    let (start, stop) = (4, 44);
    let map = PidMap::new(dir.path(), &[(7000, pid)]);
    let scenario = scenario(
        dir.path(),
        &[SimProcess {
            gpu,
            pid: 7000,
            name: "train",
            memory_mib: 20000,
            window: Some((start, stop)),
        }],
    );
    let agent = agent(dir.path(), &scenario, &map, "");

    // Scrape until the job has ended on the GPU. In every scrape while it
    // runs, the GPU's energy counter minus the job's energy is the same:
    // alone on the GPU, the job is charged every joule the counter adds.
    let mut offsets: Vec<f64> = Vec::new();
    let mut last_live_gpu_energy = None;
    let mut labels_checked = false;
    let mut previous_held = 0.0;
    let ended = wait_until(
        &format!("job {job} ended on GPU {gpu}"),
        &cluster,
        Some(&agent),
        || {
            let m = agent.metrics();
            let record = api_record(&agent, job);
            if record.as_ref().is_some_and(|r| !r["ended"].is_null()) {
                return Some((m, record?));
            }
            if let (Some((held, _, energy)), Some(total)) =
                (job_counters(&m, job, gpu), gpu_energy(&m, gpu))
            {
                // Held grew since the last scrape: this snapshot charged the
                // job (it is live, not one of the ended ones still exported).
                if held > previous_held {
                    offsets.push(total - energy);
                    last_live_gpu_energy = Some(total);
                }
                previous_held = held;
                if !labels_checked {
                    let series = m.find(
                        "gpuwatch_workload_gpu_seconds_total",
                        &[("kind", "slurm_job"), ("workload", &job.to_string())],
                    );
                    assert_eq!(series.len(), 1, "one series, on GPU {gpu}: {series:?}");
                    let labels = &series[0].labels;
                    assert_eq!(
                        labels.get("gpu").map(String::as_str),
                        Some(gpu.to_string().as_str())
                    );
                    assert_eq!(
                        labels.get("user").map(String::as_str),
                        Some("root"),
                        "{labels:?}"
                    );
                    assert_eq!(
                        labels.get("account").map(String::as_str),
                        Some("physics"),
                        "{labels:?}"
                    );
                    assert_eq!(
                        labels.get("partition").map(String::as_str),
                        Some("gpu"),
                        "{labels:?}"
                    );
                    labels_checked = true;
                }
            }
            None
        },
    );
    let (m, record) = ended;
    let (held, sm_active, energy) = job_counters(&m, job, gpu)
        .unwrap_or_else(|| panic!("job {job}'s series stay after it ended:\n{}", m.text));
    let window = (stop - start) as f64;
    eprintln!(
        "job {job} on GPU {gpu}: held {held:.3} s, SM-active {sm_active:.3} s, energy {energy:.1} J, {} scrapes while it ran",
        offsets.len()
    );
    // Each end of the window is seen at the first sample after it: the
    // job's first sighting is up to one sample late, its last up to one
    // sample early. Held time is exactly the span between the two.
    let span = number(&record, "ended") - number(&record, "started");
    close(held, span, 0.002, "held = last sighting − first sighting");
    assert!(
        held <= window + 0.05 && held >= window - 2.0 * SAMPLE_S - 0.5,
        "held {held} s for a {window} s window (at most one sample short at each end)"
    );
    close(
        sm_active,
        SM_ACTIVE * held,
        1e-6,
        "SM-active = 60 % of held (GPM, not the 95 % utilization)",
    );
    close(
        sm_active,
        SM_ACTIVE * window,
        SM_ACTIVE * (2.0 * SAMPLE_S + 0.5),
        "SM-active ≈ 24 s",
    );
    // Energy: the GPU's counter over the same samples, to the joule.
    assert!(
        offsets.len() >= 5,
        "scraped the running job {} times",
        offsets.len()
    );
    let (min, max) = offsets
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), o| (lo.min(*o), hi.max(*o)));
    assert!(
        max - min <= 0.01,
        "GPU energy − job energy moved while the job ran alone: {offsets:?}"
    );
    let after = gpu_energy(&m, gpu).expect("GPU energy");
    let at_last_sighting = offsets[0] + energy;
    let before = last_live_gpu_energy.expect("a live scrape");
    assert!(
        at_last_sighting >= before - 0.01 && at_last_sighting <= after + 0.01,
        "the job's final energy {energy} J is the GPU's counter at its last sighting ({at_last_sighting} J, between {before} and {after})"
    );
    // And in watts: 300 W × held, within one energy reading (the counter
    // is read every 5 s, so each end may be up to 5 s stale).
    close(
        energy,
        POWER_W * held,
        POWER_W * (ENERGY_READ_S + SAMPLE_S),
        "energy ≈ 300 W × held",
    );

    let counters = (held, sm_active, energy);
    assert_record(&record, counters, gpu, "/api/v1/workloads");
    let stored = wait_until("the ended row in history", &cluster, Some(&agent), || {
        cli_record(&agent, job).filter(|r| !r["ended"].is_null())
    });
    assert_record(&stored, counters, gpu, "gpuwatch jobs --format json --db");
    close(
        number(&stored, "ended"),
        number(&record, "ended"),
        0.002,
        "ended",
    );
    close(
        number(&stored, "started"),
        number(&record, "started"),
        0.002,
        "started",
    );
    assert_eq!(
        cluster.job_state(job).as_deref(),
        Some("RUNNING"),
        "the job runs on; its process left the GPU"
    );
}

/// A job cancelled with `scancel` and a job that ends by itself: each
/// gets its summary row with `ended` set at its last sighting, and its
/// figures, final, equal to its last counters.
#[test]
fn a_jobs_summary_is_final_after_scancel_and_after_its_normal_end() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = SlurmCluster::start_with(GresFiles::Plain, |_| SIDE_BY_SIDE.to_string());
    let dir = tempfile::tempdir().expect("temp dir");
    let mut jobs = Jobs::new(&cluster);
    let (cancelled, gpu_c, pid_c) = jobs.submit(dir.path(), 300);
    let (finishing, gpu_f, pid_f) = jobs.submit(dir.path(), 25);
    assert_ne!(gpu_c, gpu_f, "Slurm gave two jobs one GPU");
    let mut map = PidMap::new(dir.path(), &[(7100, pid_c), (7200, pid_f)]);
    let scenario = scenario(
        dir.path(),
        &[
            SimProcess {
                gpu: gpu_c,
                pid: 7100,
                name: "train",
                memory_mib: 20000,
                window: None,
            },
            SimProcess {
                gpu: gpu_f,
                pid: 7200,
                name: "train",
                memory_mib: 20000,
                window: None,
            },
        ],
    );
    let agent = agent(dir.path(), &scenario, &map, "");
    let mut scancelled_at = None;
    let mut last: [Option<(f64, f64, f64)>; 2] = [None, None];
    let records = wait_until("both jobs ended", &cluster, Some(&agent), || {
        map.follow();
        let m = agent.metrics();
        for (slot, (job, gpu)) in [(cancelled, gpu_c), (finishing, gpu_f)]
            .into_iter()
            .enumerate()
        {
            if let Some(counters) = job_counters(&m, job, gpu) {
                last[slot] = Some(counters);
            }
        }
        if scancelled_at.is_none() && last[0].is_some_and(|(held, _, _)| held >= 5.0) {
            cluster.scancel(cancelled);
            scancelled_at = Some(std::time::SystemTime::now());
        }
        let both = (
            api_record(&agent, cancelled)?,
            api_record(&agent, finishing)?,
        );
        (!both.0["ended"].is_null() && !both.1["ended"].is_null()).then_some(both)
    });
    assert!(
        !alive(pid_c) && !alive(pid_f),
        "both jobs' processes are gone"
    );
    let state = wait_until("Slurm's final job states", &cluster, Some(&agent), || {
        let states = (cluster.job_state(cancelled)?, cluster.job_state(finishing)?);
        (states.0 != "RUNNING"
            && states.1 != "RUNNING"
            && states.1 != "COMPLETING"
            && states.0 != "COMPLETING")
            .then_some(states)
    });
    assert_eq!(state, ("CANCELLED".to_string(), "COMPLETED".to_string()));
    let scancelled_at = scancelled_at
        .expect("scancel sent")
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    // The last counters, once the series no longer move.
    let m = agent.metrics();
    for (slot, (job, gpu, record)) in [
        (cancelled, gpu_c, &records.0),
        (finishing, gpu_f, &records.1),
    ]
    .into_iter()
    .enumerate()
    {
        let counters = job_counters(&m, job, gpu)
            .unwrap_or_else(|| panic!("job {job}'s series stay after it ended:\n{}", m.text));
        assert_eq!(
            Some(counters),
            last[slot],
            "job {job}'s counters did not move after it ended"
        );
        assert_record(record, counters, gpu, "/api/v1/workloads");
        let span = number(record, "ended") - number(record, "started");
        close(
            counters.0,
            span,
            0.002,
            "held = last sighting − first sighting",
        );
        close(
            counters.1,
            SM_ACTIVE * counters.0,
            1e-6,
            "SM-active = 60 % of held",
        );
        let stored = wait_until(
            &format!("job {job}'s ended row"),
            &cluster,
            Some(&agent),
            || cli_record(&agent, job).filter(|r| !r["ended"].is_null()),
        );
        assert_record(&stored, counters, gpu, "gpuwatch jobs --format json --db");
        close(
            number(&stored, "ended"),
            number(record, "ended"),
            0.002,
            "ended",
        );
    }
    let cancelled_end = number(&records.0, "ended");
    assert!(
        cancelled_end <= scancelled_at + 10.0 && number(&records.0, "gpu_seconds") >= 5.0,
        "the cancelled job ended at its last sighting ({cancelled_end}), within a few samples of scancel ({scancelled_at})"
    );
    // The job that slept 25 s held its GPU for most of it (the agent
    // started after the job did).
    let held = number(&records.1, "gpu_seconds");
    assert!(held > 10.0 && held <= 25.5, "held {held} s of a 25 s job");
    // Final: a later read gives the same row.
    std::thread::sleep(Duration::from_secs(3));
    for (job, gpu, record) in [
        (cancelled, gpu_c, &records.0),
        (finishing, gpu_f, &records.1),
    ] {
        let again = cli_record(&agent, job).expect("still stored");
        for field in ["gpu_seconds", "sm_active_seconds", "energy_joules", "ended"] {
            close(
                number(&again, field),
                number(record, field),
                1e-3,
                &format!("job {job} on GPU {gpu}: {field} is final"),
            );
        }
    }
}

/// A real Slurm prolog writes dcgm-exporter's HPC job mapping directory
/// (one file per GPU index, the job id in it) and the epilog removes it;
/// a process started outside Slurm on the job's GPU (its environment names
/// no job) is charged to the job through the directory, until the job ends.
#[test]
fn a_process_outside_slurm_is_charged_to_the_job_its_prolog_mapped_the_gpu_to() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let map_dir = tempfile::tempdir().expect("temp dir");
    let map_path = map_dir.path().to_path_buf();
    let cluster = SlurmCluster::start_with(GresFiles::CharDevices, |d| {
        let prolog = d.join("prolog.sh");
        let epilog = d.join("epilog.sh");
        let log = d.join("prolog.log");
        std::fs::write(
            &prolog,
            format!(
                "#!/bin/sh\n\
                 # dcgm-exporter's HPC job mapping layout: one file per GPU index naming the job.\n\
                 gpus=\"${{SLURM_JOB_GPUS:-$CUDA_VISIBLE_DEVICES}}\"\n\
                 echo \"prolog job=$SLURM_JOB_ID gpus=$gpus\" >> {log}\n\
                 env | grep -E '^(SLURM|CUDA)' | sort >> {log}\n\
                 for g in $(echo \"$gpus\" | tr ',' ' '); do\n\
                   printf '%s\\n' \"$SLURM_JOB_ID\" > {m}/.$g.$SLURM_JOB_ID && mv {m}/.$g.$SLURM_JOB_ID {m}/$g\n\
                 done\n\
                 exit 0\n",
                log = log.display(),
                m = map_path.display()
            ),
        )
        .expect("prolog");
        std::fs::write(
            &epilog,
            format!(
                "#!/bin/sh\n\
                 echo \"epilog job=$SLURM_JOB_ID gpus=$SLURM_JOB_GPUS\" >> {log}\n\
                 for f in {m}/*; do\n\
                   [ \"$(cat \"$f\" 2>/dev/null)\" = \"$SLURM_JOB_ID\" ] && rm -f \"$f\"\n\
                 done\n\
                 exit 0\n",
                log = log.display(),
                m = map_path.display()
            ),
        )
        .expect("epilog");
        for script in [&prolog, &epilog] {
            std::fs::set_permissions(script, std::fs::Permissions::from_mode(0o755))
                .expect("script mode");
        }
        format!(
            "{SIDE_BY_SIDE}\nProlog={}\nEpilog={}",
            prolog.display(),
            epilog.display()
        )
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let mut jobs = Jobs::new(&cluster);
    let (job, gpu, pid) = jobs.submit(dir.path(), 300);
    let mapped = std::fs::read_to_string(map_path.join(gpu.to_string())).unwrap_or_else(|e| {
        panic!(
            "the prolog wrote no file for GPU {gpu}: {e}\n{}",
            cluster.logs()
        )
    });
    assert_eq!(
        mapped,
        format!("{job}\n"),
        "the prolog's file for GPU {gpu}"
    );
    // A process started outside Slurm (no SLURM_* in its environment).
    let outside = Outside::start();
    let mut map = PidMap::new(dir.path(), &[(7300, outside.pid()), (7301, pid)]);
    // The outside process is listed first on the job's GPU.
    let scenario = scenario(
        dir.path(),
        &[
            SimProcess {
                gpu,
                pid: 7300,
                name: "tool",
                memory_mib: 10000,
                window: None,
            },
            SimProcess {
                gpu,
                pid: 7301,
                name: "train",
                memory_mib: 20000,
                window: None,
            },
        ],
    );
    let workloads = format!("hpc_job_mapping_dir = \"{}\"", map_path.display());
    let agent = agent(dir.path(), &scenario, &map, &workloads);
    // One workload, the job: both processes' memory is its peak, and the
    // job's own process gives it the account and partition.
    let both = 30000.0 * 1024.0 * 1024.0;
    let m = agent.wait_for("both processes charged to the job", LONG, |m| {
        job_value(m, "gpuwatch_workload_peak_memory_bytes", job, gpu) == Some(both)
            && job_value(m, "gpuwatch_workload_gpu_seconds_total", job, gpu)
                .is_some_and(|h| h >= 3.0)
    });
    let series = m.find(
        "gpuwatch_workload_gpu_seconds_total",
        &[("workload", &job.to_string())],
    );
    assert_eq!(series.len(), 1, "{series:?}");
    let labels = &series[0].labels;
    assert_eq!(
        labels.get("account").map(String::as_str),
        Some("physics"),
        "{labels:?}"
    );
    assert_eq!(
        labels.get("partition").map(String::as_str),
        Some("gpu"),
        "{labels:?}"
    );
    let gpus = serde_json::json!([gpu.to_string()]);
    let records = api_records(&agent);
    assert!(
        records.iter().all(|w| w["kind"] == "slurm_job"),
        "the outside process is no workload of its own while the job holds its GPU: {records:?}"
    );
    // The job ends: the epilog removes the file, the job's process is gone,
    // and the outside process is its own workload again (a container or a
    // process, as its cgroup says: the test may run in a container).
    cluster.scancel(job);
    let job_id = job.to_string();
    let record = wait_until(
        "the job ended and the outside process on its own",
        &cluster,
        Some(&agent),
        || {
            map.follow();
            let records = api_records(&agent);
            let job_record = records
                .iter()
                .find(|w| w["kind"] == "slurm_job" && w["id"] == job_id.as_str())?;
            let own = records
                .iter()
                .any(|w| w["kind"] != "slurm_job" && w["gpus"] == gpus && w["ended"].is_null());
            (!job_record["ended"].is_null() && own).then(|| job_record.clone())
        },
    );
    assert!(
        !map_path.join(gpu.to_string()).exists(),
        "the epilog removed GPU {gpu}'s file\n{}",
        cluster.logs()
    );
    assert_eq!(
        record["gpus"],
        serde_json::json!([gpu.to_string()]),
        "{record}"
    );
    assert!(number(&record, "gpu_seconds") >= 3.0, "{record}");
    close(
        number(&record, "sm_active_seconds"),
        SM_ACTIVE * number(&record, "gpu_seconds"),
        1e-6,
        "SM-active = 60 % of held, from the agent's first tick on",
    );
    assert!(alive(outside.pid()), "the outside process runs on");
}

/// A `sleep` started by the test outside Slurm, with an environment that
/// names no job; killed when dropped.
struct Outside(Child);

impl Outside {
    fn start() -> Outside {
        let child = Command::new("sleep")
            .arg("300")
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::null())
            .spawn()
            .expect("start sleep");
        Outside(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
