//! `GpuWorkloadIdle` end to end: the agent on the `workloads` scenario,
//! whose GPU 3 is held by an idle process, with that process mapped to a
//! real one (`GPUWATCH_SIM_PID_MAP`) that runs in a Slurm job by its
//! environment (`SLURM_JOB_ID`, `SLURM_JOB_USER`, ...; the agent reads
//! `/proc/PID/environ`, as under `proctrack/linuxproc`). With the rule's
//! window cut to seconds, the job's alert reaches a webhook and a real
//! Alertmanager (Debian's `prometheus-alertmanager`) carrying the job's
//! identity; the per-GPU `GpuHeldButIdle` names the job; the working GPUs'
//! workloads never fire; and when the job ends, its alert resolves.

mod common;

use std::os::unix::fs::MetadataExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::alertmanager::Alertmanager;
use common::Agent;

const HOST: &str = "gpu-node-7";
const JOB: &str = "7700042";
const LONG: Duration = Duration::from_secs(60);

/// A webhook that answers 200 and keeps every body.
struct Hook {
    sink: common::webhook::Sink,
    port: u16,
}

impl Hook {
    fn start() -> Hook {
        let sink = common::webhook::Sink::start();
        Hook {
            port: sink.port,
            sink,
        }
    }

    /// Every alert of every message received, with its message's status.
    fn alerts(&self) -> Vec<serde_json::Value> {
        self.sink
            .received()
            .iter()
            .flat_map(|m| m.body["alerts"].as_array().cloned().unwrap_or_default())
            .collect()
    }

    /// Waits for an alert named `alertname` with `status` about the job
    /// (its `workload` label, or the `workloads` annotation of a GPU alert).
    fn wait_for(&self, alertname: &str, status: &str) -> serde_json::Value {
        let ours = |a: &serde_json::Value| {
            a["labels"]["workload"] == JOB
                || a["annotations"]["workloads"]
                    .as_str()
                    .is_some_and(|w| w.contains(JOB))
        };
        let deadline = Instant::now() + LONG;
        loop {
            if let Some(a) = self
                .alerts()
                .into_iter()
                .find(|a| a["labels"]["alertname"] == alertname && a["status"] == status && ours(a))
            {
                return a;
            }
            assert!(
                Instant::now() < deadline,
                "no {status} {alertname} at the webhook; it saw {:#?}",
                self.alerts()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// A real process that runs in Slurm job [`JOB`] of alice by its
/// environment (the job's uid must be the process's own).
fn job_process() -> Child {
    let uid = std::fs::metadata("/proc/self").expect("/proc/self").uid();
    Command::new("sleep")
        .arg("600")
        .env("SLURM_JOB_ID", JOB)
        .env("SLURM_JOB_UID", uid.to_string())
        .env("SLURM_JOB_USER", "alice")
        .env("SLURM_JOB_ACCOUNT", "physics")
        .env("SLURM_JOB_PARTITION", "gpu")
        .spawn()
        .expect("start sleep")
}

#[test]
fn an_idle_slurm_job_is_named_to_webhook_and_alertmanager_and_resolves_when_it_ends() {
    let am = Alertmanager::start();
    let hook = Hook::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut job = job_process();
    let pid_map = dir.path().join("pids");
    std::fs::write(&pid_map, format!("5301 {}\n", job.id())).expect("pid map");
    let config = dir.path().join("gpuwatch.toml");
    std::fs::write(
        &config,
        format!(
            "[sampler]\nhostname = \"{HOST}\"\nprocess_interval = \"1s\"\nproc_root = \"/proc\"\n\n\
             [[rules]]\nname = \"GpuWorkloadIdle\"\nfor = \"6s\"\n\n\
             [[rules]]\nname = \"GpuHeldButIdle\"\nfor = \"2s\"\n\n\
             [[receivers]]\nname = \"hook\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:{}/alerts\"\n\
             timeout = \"2s\"\nretry_min = \"200ms\"\nretry_max = \"1s\"\n\n\
             [[receivers]]\nname = \"am\"\ntype = \"alertmanager\"\nurl = \"{}\"\n\
             resend_interval = \"1m\"\ntimeout = \"2s\"\nretry_min = \"200ms\"\nretry_max = \"1s\"\n",
            hook.port, am.url
        ),
    )
    .expect("config");
    let agent = Agent::start(
        "workloads",
        &["--config", config.to_str().expect("utf-8")],
        &[("GPUWATCH_SIM_PID_MAP", pid_map.to_str().expect("utf-8"))],
    );

    // The webhook: labels and the `gpuwatch` member carry the identity.
    let fired = hook.wait_for("GpuWorkloadIdle", "firing");
    let labels = &fired["labels"];
    assert_eq!(labels["kind"], "slurm_job", "{fired:#}");
    assert_eq!(labels["workload"], JOB);
    assert_eq!(labels["user"], "alice");
    assert_eq!(labels["account"], "physics");
    assert_eq!(labels["gpus"], "3");
    assert_eq!(labels["host"], HOST);
    assert_eq!(labels["severity"], "warning");
    let who = format!("Slurm job {JOB} of alice (account physics, partition gpu)");
    let description = fired["annotations"]["description"].as_str().expect("text");
    assert!(
        description.starts_with(&format!(
            "{who} has held GPUs 3 on {HOST} for 6 seconds with SM activity 0 %"
        )),
        "{description}"
    );
    let details = &fired["gpuwatch"]["workload"];
    assert_eq!(details["kind"], "slurm_job", "{fired:#}");
    assert_eq!(details["id"], JOB);
    assert_eq!(details["user"], "alice");
    assert_eq!(details["account"], "physics");
    assert_eq!(details["partition"], "gpu");
    assert_eq!(details["gpus"], serde_json::json!([3]));
    assert!(
        details["gpuSeconds"].as_f64().is_some_and(|s| s >= 5.0),
        "{details}"
    );
    assert_eq!(details["smActiveSeconds"], 0.0);

    // The per-GPU rule names the job on its GPU.
    let held = hook.wait_for("GpuHeldButIdle", "firing");
    assert_eq!(held["labels"]["gpu"], "3");
    assert_eq!(
        held["annotations"]["workloads"],
        format!("slurm_job {JOB} (alice)")
    );
    assert_eq!(held["gpuwatch"]["workloads"][0]["id"], JOB);

    // Alertmanager holds the same alert, labels and annotations.
    let pushed = am.wait_for("GpuWorkloadIdle pushed", "GpuWorkloadIdle", LONG, |a| {
        a.iter().any(|a| a["labels"]["workload"] == JOB)
    });
    let pushed = pushed
        .iter()
        .find(|a| a["labels"]["workload"] == JOB)
        .expect("the job's alert");
    assert_eq!(pushed["labels"], fired["labels"]);
    assert_eq!(
        pushed["annotations"]["summary"],
        fired["annotations"]["summary"]
    );

    // The working GPUs' workloads (plain processes 5001, 5101: SM active
    // 90 % and 30 %) never fire.
    for alert in hook.alerts() {
        if alert["labels"]["alertname"] == "GpuWorkloadIdle" {
            assert!(
                !["5001", "5101"].contains(&alert["labels"]["workload"].as_str().unwrap_or("")),
                "a working workload fired: {alert:#}"
            );
        }
    }

    // The job ends: its process goes, and the alert resolves everywhere.
    std::fs::write(&pid_map, "5301 0\n").expect("pid map");
    let _ = job.kill();
    let _ = job.wait();
    let resolved = hook.wait_for("GpuWorkloadIdle", "resolved");
    assert_eq!(resolved["labels"], fired["labels"], "the same alert");
    assert!(resolved["endsAt"]
        .as_str()
        .is_some_and(|e| !e.starts_with("0001")));
    am.wait_for("GpuWorkloadIdle resolved", "GpuWorkloadIdle", LONG, |a| {
        a.iter().all(|a| a["labels"]["workload"] != JOB)
    });
    let (status, body) = agent.get("/api/v1/alerts");
    assert_eq!(status, 200);
    assert!(body.contains("GpuWorkloadIdle"), "{body}");
}
