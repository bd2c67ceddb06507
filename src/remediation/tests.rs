//! The remediation task against an in-memory scheduler: what it calls, in
//! which mode, and what it records.

use std::sync::Mutex;
use std::time::Duration;

use super::policy::NodeView;
use super::scheduler::Listed;
use super::*;

/// A scheduler kept in memory: its nodes, a switch that makes every call
/// fail, and the calls it got.
#[derive(Default)]
struct Memory {
    nodes: Mutex<Vec<Listed>>,
    down: Mutex<bool>,
    calls: Mutex<Vec<String>>,
}

impl Memory {
    fn with(nodes: &[(&str, &str, Option<&str>)]) -> Memory {
        let m = Memory::default();
        *m.nodes.lock().unwrap() = nodes
            .iter()
            .map(|(n, s, r)| Listed {
                name: n.to_string(),
                view: NodeView {
                    state: s.to_string(),
                    reason: r.map(str::to_string),
                },
            })
            .collect();
        m
    }

    fn view(&self) -> NodeView {
        self.nodes.lock().unwrap()[0].view.clone()
    }

    fn updates(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| *c != "list")
            .cloned()
            .collect()
    }

    fn fail(&self) -> Result<(), SchedulerError> {
        if *self.down.lock().unwrap() {
            return Err(SchedulerError::Unreachable {
                program: "scontrol".into(),
                stderr: "Unable to contact slurm controller".into(),
            });
        }
        Ok(())
    }

    fn set(&self, state: &str, reason: Option<String>) {
        self.nodes.lock().unwrap()[0].view = NodeView {
            state: state.into(),
            reason,
        };
    }
}

impl Scheduler for &Memory {
    fn node(&self) -> &str {
        "gpu-01"
    }

    async fn list(&self) -> Result<Vec<Listed>, SchedulerError> {
        self.calls.lock().unwrap().push("list".into());
        self.fail()?;
        Ok(self.nodes.lock().unwrap().clone())
    }

    async fn drain(&self, reason: &str) -> Result<(), SchedulerError> {
        self.calls.lock().unwrap().push(format!("drain {reason}"));
        self.fail()?;
        self.set("drained", Some(reason.to_string()));
        Ok(())
    }

    async fn resume(&self) -> Result<(), SchedulerError> {
        self.calls.lock().unwrap().push("resume".into());
        self.fail()?;
        self.set("idle", None);
        Ok(())
    }
}

fn t(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000 + secs)
}

fn trigger() -> Trigger {
    Trigger {
        gpu: Some(3),
        uuid: "GPU-3".into(),
        action: "RESET_GPU",
        source: "recovery_action",
        text: "the driver asks for a recovery action: gpu_reset".into(),
    }
}

fn remediation(s: &Memory, mode: RemediationMode) -> (Remediation<&Memory>, Arc<RemediationStats>) {
    let config = RemediationConfig {
        mode,
        resume_after: Duration::from_secs(60),
        retry_min: Duration::from_secs(10),
        retry_max: Duration::from_secs(40),
        ..RemediationConfig::default()
    };
    let stats = Arc::new(RemediationStats::new(mode.as_str()));
    let sinks = Sinks {
        store: None,
        receivers: Vec::new(),
        doorbell: None,
        external_url: String::new(),
        host: "gpu-01".into(),
        mode: mode.as_str(),
    };
    (Remediation::new(s, config, sinks, stats.clone()), stats)
}

const REASON: &str =
    "gpuwatch: GPU 3 GPU-3 needs RESET_GPU (the driver asks for a recovery action: gpu_reset)";

#[tokio::test]
async fn on_drains_once_and_resumes_after_resume_after() {
    let s = Memory::with(&[("gpu-01", "idle", None), ("gpu-02", "idle", None)]);
    let (mut r, stats) = remediation(&s, RemediationMode::On);
    r.tick(&[], t(0)).await;
    r.tick(&[trigger()], t(1)).await;
    r.tick(&[trigger()], t(2)).await;
    assert_eq!(s.updates(), [format!("drain {REASON}")]);
    assert_eq!(s.view().state, "drained");
    r.tick(&[], t(3)).await;
    r.tick(&[], t(62)).await;
    assert_eq!(s.updates().len(), 1, "healthy 59 s");
    r.tick(&[], t(63)).await;
    assert_eq!(s.updates().last().map(String::as_str), Some("resume"));
    assert_eq!(s.view().state, "idle");
    assert_eq!(stats.actions("drain", Outcome::Done), 1);
    assert_eq!(stats.actions("resume", Outcome::Done), 1);
}

#[tokio::test]
async fn dry_run_changes_nothing_but_records_what_it_would_do() {
    let s = Memory::with(&[("gpu-01", "idle", None)]);
    let (mut r, stats) = remediation(&s, RemediationMode::DryRun);
    r.tick(&[trigger()], t(0)).await;
    r.tick(&[trigger()], t(1)).await;
    r.tick(&[], t(2)).await;
    r.tick(&[], t(70)).await;
    assert!(s.updates().is_empty(), "{:?}", s.updates());
    assert_eq!(s.view().state, "idle");
    assert_eq!(stats.actions("drain", Outcome::Would), 1);
    assert_eq!(stats.actions("resume", Outcome::Would), 1);
    // A scheduler that cannot be asked does not stop a dry run's record.
    *s.down.lock().unwrap() = true;
    r.tick(&[trigger()], t(200)).await;
    assert_eq!(stats.actions("drain", Outcome::Would), 2);
    assert_eq!(stats.actions("drain", Outcome::Error), 0);
}

#[tokio::test]
async fn an_operators_drain_is_neither_overwritten_nor_resumed() {
    let s = Memory::with(&[("gpu-01", "drained", Some("bad DIMM, ticket 4711"))]);
    let (mut r, stats) = remediation(&s, RemediationMode::On);
    for at in 0..5 {
        r.tick(&[trigger()], t(at)).await;
    }
    r.tick(&[], t(10)).await;
    r.tick(&[], t(100)).await;
    assert!(s.updates().is_empty(), "{:?}", s.updates());
    assert_eq!(s.view().reason.as_deref(), Some("bad DIMM, ticket 4711"));
    assert_eq!(
        stats.actions("drain", Outcome::LeftAlone),
        1,
        "once per episode"
    );
    // gpuwatch drained it, then a person resumed and drained it again for
    // their own reason: gpuwatch lets go.
    let s = Memory::with(&[("gpu-01", "idle", None)]);
    let (mut r, stats) = remediation(&s, RemediationMode::On);
    r.tick(&[trigger()], t(0)).await;
    s.set("drained", Some("operator: keep out".into()));
    r.tick(&[], t(1)).await;
    r.tick(&[], t(100)).await;
    assert_eq!(s.updates(), [format!("drain {REASON}")]);
    assert_eq!(stats.actions("resume", Outcome::LeftAlone), 1);
    assert_eq!(r.state().drained, None);
}

#[tokio::test]
async fn the_breaker_refuses_then_drains_when_others_are_back() {
    let other = Some("gpuwatch: GPU 0 GPU-x needs RESET_GPU (y)");
    let s = Memory::with(&[("gpu-01", "idle", None), ("gpu-02", "drained", other)]);
    let (mut r, stats) = remediation(&s, RemediationMode::On);
    r.tick(&[trigger()], t(0)).await;
    r.tick(&[trigger()], t(1)).await;
    assert!(s.updates().is_empty());
    assert_eq!(stats.actions("drain", Outcome::Refused), 1);
    r.tick(&[trigger()], t(5)).await;
    assert_eq!(
        stats.actions("drain", Outcome::Refused),
        1,
        "not before the backoff (10 s +-20 %)"
    );
    r.tick(&[trigger()], t(14)).await;
    assert_eq!(
        stats.actions("drain", Outcome::Refused),
        2,
        "tried again after the backoff"
    );
    s.nodes.lock().unwrap()[1].view = NodeView {
        state: "idle".into(),
        reason: None,
    };
    r.tick(&[trigger()], t(100)).await;
    assert_eq!(s.updates(), [format!("drain {REASON}")]);
}

#[tokio::test]
async fn scheduler_errors_keep_the_decision_and_back_off() {
    let s = Memory::with(&[("gpu-01", "idle", None)]);
    let (mut r, stats) = remediation(&s, RemediationMode::On);
    r.tick(&[], t(0)).await;
    *s.down.lock().unwrap() = true;
    r.tick(&[trigger()], t(1)).await;
    assert_eq!(stats.actions("drain", Outcome::Error), 1);
    let calls = s.calls.lock().unwrap().len();
    r.tick(&[trigger()], t(2)).await;
    r.tick(&[trigger()], t(5)).await;
    assert_eq!(
        s.calls.lock().unwrap().len(),
        calls,
        "waits for the backoff (about 10 s)"
    );
    r.tick(&[trigger()], t(13)).await;
    assert_eq!(stats.actions("drain", Outcome::Error), 2);
    *s.down.lock().unwrap() = false;
    r.tick(&[trigger()], t(100)).await;
    assert_eq!(stats.actions("drain", Outcome::Done), 1);
    assert_eq!(s.view().reason.as_deref(), Some(REASON));
}

#[tokio::test]
async fn an_unreachable_scheduler_at_start_is_asked_again_after_retry_min_not_every_tick() {
    let s = Memory::with(&[("gpu-01", "drained", Some(REASON))]);
    *s.down.lock().unwrap() = true;
    let (mut r, _) = remediation(&s, RemediationMode::On);
    for at in 0..5 {
        r.tick(&[], t(at)).await;
    }
    assert_eq!(s.calls.lock().unwrap().len(), 1, "one look, then wait 10 s");
    *s.down.lock().unwrap() = false;
    r.tick(&[], t(10)).await;
    assert!(r.state().drained.is_some(), "its earlier drain found");
    r.tick(&[], t(71)).await;
    assert_eq!(s.updates(), ["resume"]);
}

#[tokio::test]
async fn a_restarted_agent_resumes_its_own_earlier_drain() {
    let s = Memory::with(&[("gpu-01", "drained", Some(REASON))]);
    let (mut r, _) = remediation(&s, RemediationMode::On);
    r.tick(&[], t(0)).await;
    assert!(r.state().drained.is_some());
    r.tick(&[], t(61)).await;
    assert_eq!(s.updates(), ["resume"]);
}
