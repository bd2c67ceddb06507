//! Who uses each GPU and how many more jobs fit, end to end: the agent on
//! `tests/scenarios/sharing.toml` (processes arriving and leaving, an
//! exclusive-mode GPU, MPS, MIG). Capacity numbers are computed by hand from
//! the scenario.

mod common;

use std::time::Duration;

use common::{fixture, run_cli, Agent};
use gpuwatch::history::Store;

const LONG: Duration = Duration::from_secs(30);
const MIB: f64 = 1048576.0;

const CONFIG: &str = "[exporter]\ndetail = [\"processes\"]\n[sampler]\ninterval = \"200ms\"\nslow_interval = \"500ms\"\nprocess_interval = \"200ms\"\nprocess_top_n = 2\n\
[history]\nbatch_interval = \"1s\"\n\
[capacity]\nmemory_margin = \"1GiB\"\nalert_for = \"0s\"\n\
[[profiles]]\nname = \"infer\"\nmemory = \"6GiB\"\n\
[[profiles]]\nname = \"big\"\nmemory = \"35GiB\"\nsm_share = 0.3\n\
[[profiles]]\nname = \"huge\"\nmemory = \"70GiB\"\n";

fn scenario() -> String {
    fixture("scenarios/sharing.toml")
        .to_str()
        .expect("utf-8 path")
        .to_string()
}

fn write_config(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("gpuwatch.toml");
    std::fs::write(&path, CONFIG).expect("config");
    path.to_str().expect("utf-8 path").to_string()
}

fn events(db: &std::path::Path, pid: i64) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = Store::open_read_only(db).await.expect("open");
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT kind FROM event WHERE code = ? AND kind LIKE 'process_%' ORDER BY id",
        )
        .bind(pid)
        .fetch_all(&store.pool)
        .await
        .expect("events");
        rows.into_iter().map(|(k,)| k).collect()
    })
}

#[test]
fn processes_arrive_and_leave_and_their_series_follow() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(&dir);
    let agent = Agent::start(&scenario(), &["--config", &config], &[]);
    fn gpu0(pid: &str) -> [(&'static str, &str); 2] {
        [("gpu", "0"), ("pid", pid)]
    }
    // job-b (8000 MiB) runs from 2 s to 5 s: with the top 2 by memory it
    // has its own series, and notebook + infer (2000 + 4000) are "other".
    let during = agent.wait_for("job-b on GPU 0", LONG, |m| {
        m.value("gpuwatch_process_memory_used_bytes", &gpu0("1001"))
            .is_some()
    });
    assert_eq!(
        during.value("gpuwatch_process_memory_used_bytes", &gpu0("other")),
        Some(6000.0 * MIB)
    );
    assert_eq!(
        during.value("gpuwatch_gpu_processes", &[("gpu", "0")]),
        Some(4.0)
    );
    assert_eq!(during.find("gpuwatch_process_info", &gpu0("1001")).len(), 1);
    // It leaves: every series of pid 1001 goes; infer moves up, notebook
    // alone is "other".
    let after = agent.wait_for("job-b gone", LONG, |m| {
        m.value("gpuwatch_gpu_processes", &[("gpu", "0")]) == Some(3.0)
    });
    assert!(
        !after.text.contains("pid=\"1001\""),
        "series of an exited process remain:\n{}",
        after.text
    );
    assert_eq!(
        after.value("gpuwatch_process_memory_used_bytes", &gpu0("1003")),
        Some(4000.0 * MIB)
    );
    assert_eq!(
        after.value("gpuwatch_process_memory_used_bytes", &gpu0("other")),
        Some(2000.0 * MIB)
    );
    // SM share: trainer's own 60 %; infer gets 80 % × 4000 / 36000 = 8.9 → 9 %.
    assert_eq!(
        after.value("gpuwatch_process_sm_utilization_ratio", &gpu0("1000")),
        Some(0.6)
    );
    assert_eq!(
        after.value("gpuwatch_process_sm_utilization_ratio", &gpu0("1003")),
        Some(0.09)
    );
    // Start and stop went to history.
    let db = agent.history.clone();
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let kinds = events(&db, 1001);
        if kinds == ["process_start", "process_stop"] {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "events of pid 1001: {kinds:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn sharing_modes_and_capacity_by_hand() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(&dir);
    // Time frozen after job-b left.
    let agent = Agent::start(
        &scenario(),
        &["--config", &config],
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    let m = agent.wait_for(
        "processes, MIG instances and the capacity alert",
        LONG,
        |m| {
            m.find("gpuwatch_gpu_processes", &[]).len() == 4
                && m.value("gpuwatch_mig_instances", &[("gpu", "3")]).is_some()
                && m.value(
                    "gpuwatch_alerts",
                    &[
                        ("alertname", "GpuCapacityExhausted:huge"),
                        ("state", "firing"),
                    ],
                ) == Some(1.0)
        },
    );
    // Sharing modes.
    assert_eq!(
        m.value(
            "gpuwatch_compute_mode",
            &[("gpu", "1"), ("mode", "exclusive_process")]
        ),
        Some(1.0)
    );
    assert_eq!(
        m.value("gpuwatch_mps_server_running", &[("gpu", "2")]),
        Some(1.0)
    );
    assert_eq!(m.value("gpuwatch_mps_clients", &[("gpu", "2")]), Some(3.0));
    assert_eq!(
        m.value("gpuwatch_mps_server_running", &[("gpu", "0")]),
        Some(0.0)
    );
    assert_eq!(
        m.value("gpuwatch_mig_instances", &[("gpu", "3")]),
        Some(3.0)
    );
    assert_eq!(
        m.value(
            "gpuwatch_mig_instance_memory_used_bytes",
            &[("gpu", "3"), ("gpu_instance", "1")]
        ),
        Some(20000.0 * MIB)
    );
    assert!(m.find("gpuwatch_mig_instances", &[("gpu", "0")]).is_empty());
    // Each instance's profile, from its attributes (tests/scenarios/
    // sharing.toml: 3g.40gb, 2g.20gb, 1g.10gb), in one info series; none
    // for GPUs without MIG.
    let info = m.find("gpuwatch_mig_instance_info", &[]);
    let profiles: Vec<(&str, &str, &str, &str)> = info
        .iter()
        .map(|s| {
            let l = |k: &str| s.labels.get(k).map_or("", String::as_str);
            (l("gpu"), l("gpu_instance"), l("profile"), l("mig_uuid"))
        })
        .collect();
    let uuid = |gi| format!("MIG-53333333-3333-4333-8333-333333333333-{gi}");
    let (u1, u2, u3) = (uuid(1), uuid(2), uuid(3));
    assert_eq!(
        profiles,
        [
            ("3", "1", "3g.40gb", u1.as_str()),
            ("3", "2", "2g.20gb", u2.as_str()),
            ("3", "3", "1g.10gb", u3.as_str()),
        ]
    );
    assert!(info.iter().all(|s| s.value == 1.0));

    // Capacity, margin 1 GiB = 1024 MiB.
    // infer (6 GiB = 6144 MiB):
    //  GPU 0: 81559 − 527 − 36000 = 45032 free; (45032 − 1024) / 6144 = 7.2 → 7.
    //  GPU 1: exclusive process mode, busy → 0.
    //  GPU 2: MPS server under exclusive mode, clients may join:
    //         81559 − 527 − 15030 = 66002; (66002 − 1024) / 6144 = 10.6 → 10.
    //  GPU 3: per MIG instance: (40192 − 20000 − 1024) / 6144 = 3.1 → 3;
    //         (19968 − 1024) / 6144 = 3.1 → 3; (9728 − 9000 − 1024) → 0. Sum 6.
    //  Node: 7 + 0 + 10 + 6 = 23.
    // big (35 GiB = 35840 MiB, SM share 0.3):
    //  GPU 0: memory 44008 / 35840 = 1, but SM in use 0.60 + 0.09 + 0.04 =
    //         0.73; (1 − 0.73) / 0.3 = 0.9 → 0.
    //  GPU 2: memory 64978 / 35840 = 1; SM 0.3 in use: 0.7 / 0.3 = 2 → 1.
    //  GPU 3: no instance has 35 GiB free → 0. Node: 1.
    // huge (70 GiB): no GPU → 0 everywhere, and its alert fires.
    let fits = |gpu: &str, profile: &str| {
        m.value(
            "gpuwatch_gpu_capacity_fits",
            &[("gpu", gpu), ("profile", profile)],
        )
    };
    let infer: Vec<Option<f64>> = ["0", "1", "2", "3"]
        .iter()
        .map(|g| fits(g, "infer"))
        .collect();
    assert_eq!(infer, [Some(7.0), Some(0.0), Some(10.0), Some(6.0)]);
    let big: Vec<Option<f64>> = ["0", "1", "2", "3"]
        .iter()
        .map(|g| fits(g, "big"))
        .collect();
    assert_eq!(big, [Some(0.0), Some(0.0), Some(1.0), Some(0.0)]);
    let node = |profile: &str| m.value("gpuwatch_node_capacity_fits", &[("profile", profile)]);
    assert_eq!(node("infer"), Some(23.0));
    assert_eq!(node("big"), Some(1.0));
    assert_eq!(node("huge"), Some(0.0));
    assert_eq!(
        m.value(
            "gpuwatch_alerts",
            &[
                ("alertname", "GpuCapacityExhausted:big"),
                ("state", "firing")
            ]
        ),
        None,
        "big still fits on GPU 2"
    );

    // The CLI gives the same numbers.
    let (code, out, err) = run_cli(
        &[
            "capacity",
            "--simulate",
            &scenario(),
            "--config",
            &config,
            "--profile",
            "infer",
        ],
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| l.starts_with("infer"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 5, "{out}");
    let last = |row: &Vec<&str>| {
        row.iter()
            .rev()
            .find(|w| w.parse::<u64>().is_ok())
            .map(|w| w.to_string())
    };
    assert!(out.contains("exclusive, busy"), "{out}");
    assert_eq!(
        rows.last().and_then(last).as_deref(),
        Some("23"),
        "node total: {out}"
    );
    assert!(!out.contains("big"), "--profile shows one profile: {out}");
    let (code, _, err) = run_cli(
        &[
            "capacity",
            "--simulate",
            &scenario(),
            "--config",
            &config,
            "--profile",
            "nope",
        ],
        &[],
    );
    assert_ne!(code, 0);
    assert!(err.contains("no profile named \"nope\""), "{err}");

    // `status` shows the sharing modes.
    let (code, out, err) = run_cli(
        &["status", "--simulate", &scenario()],
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("MPS server running, 3 clients"), "{out}");
    assert!(out.contains("MIG on (gi 1 19.5/39.2 GiB"), "{out}");
    assert!(out.contains("mode exclusive_process"), "{out}");
}

/// `gpuwatch capacity` with no `[[profiles]]` answers for what runs: on the
/// `workloads` scenario (readings frozen), each running workload's measured
/// peak memory and SM share, how many more of it fit per GPU and on the
/// node, and whose workloads fill each GPU. Pid 5001 is Slurm job 7300001
/// of alice, found through its environment in a /proc tree.
#[test]
fn capacity_without_profiles_answers_for_the_running_workloads() {
    let dir = tempfile::tempdir().expect("temp dir");
    let proc = dir.path().join("proc/5001");
    std::fs::create_dir_all(&proc).expect("mkdir");
    std::fs::create_dir_all(dir.path().join("etc")).expect("mkdir etc");
    std::fs::write(
        dir.path().join("etc/passwd"),
        "alice:x:1001:1001::/home/alice:/bin/sh\n",
    )
    .expect("passwd");
    std::fs::write(proc.join("comm"), "torchrun\n").expect("comm");
    std::fs::write(
        proc.join("status"),
        "Name:\ttorchrun\nUid:\t1001\t1001\t1001\t1001\n",
    )
    .expect("status");
    std::fs::write(
        proc.join("environ"),
        "SLURM_JOB_ID=7300001\0SLURM_JOB_UID=1001\0SLURM_JOB_USER=alice\0",
    )
    .expect("environ");
    let config = dir.path().join("gpuwatch.toml");
    std::fs::write(
        &config,
        format!(
            "[sampler]\nproc_root = {:?}\n[capacity]\nmemory_margin = \"1GiB\"\n",
            dir.path().join("proc").to_str().expect("utf-8 path")
        ),
    )
    .expect("config");
    let config = config.to_str().expect("utf-8 path");
    let env = [("GPUWATCH_SIM_TIME", "10")];
    let (code, out, err) = run_cli(
        &["capacity", "--simulate", "workloads", "--config", config],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("no [[profiles]] configured"), "{out}");
    let row = |workload: &str, gpu: &str| -> Vec<String> {
        out.lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .find(|w| w.first().map(String::as_str) == Some(workload) && w.iter().any(|x| x == gpu))
            .unwrap_or_else(|| panic!("no row for {workload} on {gpu}: {out}"))
    };
    // The job: alice's, 58.6 GiB (60 000 MiB) and 90 % of the SMs (GPM):
    // fits nowhere, the node total says so.
    let job = row("slurm_job:7300001", "all");
    assert_eq!(
        (
            job[1].as_str(),
            job[2].as_str(),
            job[3].as_str(),
            job.last().map(String::as_str)
        ),
        ("alice", "58.6", "90", Some("0")),
        "{out}"
    );
    // The idle kernel on GPU 3: 30 GiB, no SM share, so memory alone. Free
    // minus the 1 GiB margin: GPU 0 19.5 → 0, GPU 1 54.7 → 1, GPU 2 39.1 →
    // 1, GPU 3 48.1 → 1, GPU 4's MIG instances 8.8 and 30.4 → 0 + 1: 4.
    let idle = row("process:5301", "all");
    assert_eq!(
        (idle[3].as_str(), idle.last().map(String::as_str)),
        ("-", Some("4")),
        "{out}"
    );
    for (gpu, fits) in [("0", "0"), ("1", "1"), ("2", "1"), ("3", "1"), ("4", "1")] {
        let r = out
            .lines()
            .find(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.first() == Some(&"process:5301") && w.get(4) == Some(&gpu)
            })
            .unwrap_or_else(|| panic!("process:5301 on GPU {gpu}: {out}"));
        let words: Vec<&str> = r.split_whitespace().collect();
        let free_at = words
            .iter()
            .rposition(|w| w.contains('.'))
            .expect("free GiB");
        assert_eq!(words[free_at + 1], fits, "GPU {gpu}: {r}");
    }
    // The small MIG job (7.8 GiB) fits once more on GPU 0, where the SMs
    // bound it (90 % busy), not memory. (Its SM share is two words, "9 %".)
    let small_on_0 = out
        .lines()
        .find(|l| l.starts_with("process:5402") && l.split_whitespace().nth(5) == Some("0"))
        .unwrap_or_else(|| panic!("process:5402 on GPU 0: {out}"));
    assert!(small_on_0.ends_with("sm share"), "{small_on_0}");
    // Who fills each GPU.
    let fills = out
        .split("Who fills each GPU")
        .nth(1)
        .unwrap_or_else(|| panic!("{out}"));
    assert!(fills.contains("slurm_job:7300001 (alice) 58.6"), "{fills}");
    assert!(
        fills.contains("gi 1: process:5401 29.3, gi 2: process:5402 7.8"),
        "{fills}"
    );
    // --profile names a configured profile; there is none.
    let (code, _, err) = run_cli(
        &[
            "capacity",
            "--simulate",
            "workloads",
            "--config",
            config,
            "--profile",
            "x",
        ],
        &env,
    );
    assert_ne!(code, 0);
    assert!(err.contains("no [[profiles]]"), "{err}");
}
