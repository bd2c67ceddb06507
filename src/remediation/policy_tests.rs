use super::*;

fn t(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + secs)
}

fn trigger(gpu: u32) -> Trigger {
    Trigger {
        gpu: Some(gpu),
        uuid: format!("GPU-{gpu}"),
        action: "RESET_GPU",
        source: "recovery_action",
        text: "the driver asks for a recovery action: gpu_reset".into(),
    }
}

const TIMING: Timing = Timing {
    act_after: Duration::from_secs(30),
    resume: true,
    resume_after: Duration::from_secs(300),
    flap_window: Duration::from_secs(3600),
};

/// Feeds `triggers` at `at` and returns the intent.
fn step(state: &mut PolicyState, triggers: &[Trigger], at: u64) -> Option<Intent> {
    observe(state, triggers, t(at));
    decide(state, triggers, t(at), &TIMING)
}

fn drained(state: &mut PolicyState, intent: Option<Intent>) {
    let Some(Intent::Drain {
        reason,
        trigger,
        flapping,
    }) = intent
    else {
        panic!("expected a drain, got {intent:?}");
    };
    state.drained = Some(Drained {
        reason,
        trigger: Some(trigger),
        flapping,
    });
}

#[test]
fn a_trigger_drains_after_act_after_and_healthy_resumes_after_resume_after() {
    let mut s = PolicyState::default();
    let failing = [trigger(3)];
    assert_eq!(step(&mut s, &[], 0), None, "healthy: nothing");
    assert_eq!(step(&mut s, &failing, 10), None, "held 0 s");
    assert_eq!(step(&mut s, &failing, 39), None, "held 29 s");
    let intent = step(&mut s, &failing, 40);
    match &intent {
        Some(Intent::Drain {
            reason, flapping, ..
        }) => {
            assert_eq!(
                reason,
                "gpuwatch: GPU 3 GPU-3 needs RESET_GPU (the driver asks for a recovery action: gpu_reset)"
            );
            assert!(!flapping);
        }
        other => panic!("{other:?}"),
    }
    drained(&mut s, intent);
    assert_eq!(
        step(&mut s, &failing, 41),
        None,
        "drained once, not per tick"
    );
    assert_eq!(step(&mut s, &[], 100), None);
    assert_eq!(step(&mut s, &[], 399), None, "healthy 299 s");
    assert_eq!(step(&mut s, &[], 400), Some(Intent::Resume));
}

#[test]
fn a_blip_restarts_both_spells() {
    let mut s = PolicyState::default();
    assert_eq!(step(&mut s, &[trigger(0)], 0), None);
    assert_eq!(step(&mut s, &[], 20), None);
    assert_eq!(
        step(&mut s, &[trigger(0)], 25),
        None,
        "the spell starts again"
    );
    assert_eq!(step(&mut s, &[trigger(0)], 50), None);
    let intent = step(&mut s, &[trigger(0)], 55);
    drained(&mut s, intent);
    assert_eq!(step(&mut s, &[], 100), None);
    assert_eq!(
        step(&mut s, &[trigger(0)], 350),
        None,
        "failing again: no resume"
    );
    assert_eq!(step(&mut s, &[], 360), None);
    assert_eq!(step(&mut s, &[], 659), None);
    assert_eq!(step(&mut s, &[], 660), Some(Intent::Resume));
}

#[test]
fn failing_again_soon_after_a_resume_is_flapping_and_stays_drained() {
    let mut s = PolicyState::default();
    let intent = step(&mut s, &[trigger(1)], 0);
    assert_eq!(intent, None);
    let intent = step(&mut s, &[trigger(1)], 30);
    drained(&mut s, intent);
    assert_eq!(step(&mut s, &[], 40), None);
    assert_eq!(step(&mut s, &[], 340), Some(Intent::Resume));
    s.drained = None;
    s.last_resume = Some(t(340));
    step(&mut s, &[trigger(1)], 1000);
    let intent = step(&mut s, &[trigger(1)], 1030);
    match &intent {
        Some(Intent::Drain {
            reason, flapping, ..
        }) => {
            assert!(flapping);
            assert!(reason.ends_with(FLAPPING), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    drained(&mut s, intent);
    assert_eq!(step(&mut s, &[], 1100), None);
    assert_eq!(step(&mut s, &[], 100_000), None, "a person resumes it");
    // Beyond the window it is a new failure.
    let mut s = PolicyState {
        last_resume: Some(t(0)),
        ..PolicyState::default()
    };
    step(&mut s, &[trigger(1)], 5000);
    match step(&mut s, &[trigger(1)], 5030) {
        Some(Intent::Drain { flapping, .. }) => assert!(!flapping),
        other => panic!("{other:?}"),
    }
}

#[test]
fn resume_false_leaves_resuming_to_people() {
    let timing = Timing {
        resume: false,
        act_after: Duration::ZERO,
        ..TIMING
    };
    let mut s = PolicyState::default();
    observe(&mut s, &[trigger(0)], t(0));
    let intent = decide(&s, &[trigger(0)], t(0), &timing);
    drained(&mut s, intent);
    observe(&mut s, &[], t(10));
    assert_eq!(decide(&s, &[], t(100_000), &timing), None);
}

#[test]
fn a_settled_episode_is_not_tried_again_until_healthy() {
    let mut s = PolicyState::default();
    step(&mut s, &[trigger(0)], 0);
    assert!(step(&mut s, &[trigger(0)], 30).is_some());
    s.settled = Some(Settled::LeftAlone);
    assert_eq!(step(&mut s, &[trigger(0)], 60), None);
    step(&mut s, &[], 70);
    assert_eq!(s.settled, None);
    step(&mut s, &[trigger(0)], 80);
    assert!(step(&mut s, &[trigger(0)], 110).is_some());
}

#[test]
fn reasons_are_printable_bounded_and_name_the_gpu() {
    let mut hostile = trigger(7);
    hostile.text = format!(
        "evil \"quote\" | pipe\nnew line \u{7} bell ünïcode {}",
        "x".repeat(400)
    );
    let r = reason(&[hostile.clone(), trigger(2)], true);
    assert!(r.len() <= MAX_REASON, "{} > {MAX_REASON}", r.len());
    assert!(
        r.starts_with(
            "gpuwatch: GPU 7 GPU-7 needs RESET_GPU (evil quote / pipe new line ? bell ?n?code"
        ),
        "{r}"
    );
    assert!(r.ends_with(&format!("... +1 more {FLAPPING}")), "{r}");
    assert!(r.chars().all(|c| c.is_ascii_graphic() || c == ' '), "{r}");
    let missing = Trigger {
        gpu: None,
        uuid: "0000:3b:00.0".into(),
        action: "GPU_MISSING",
        source: "pci",
        text: "gone".into(),
    };
    assert_eq!(
        reason(&[missing], false),
        "gpuwatch: GPU at 0000:3b:00.0 needs GPU_MISSING (gone)"
    );
}

fn view(state: &str, reason: Option<&str>) -> NodeView {
    NodeView {
        state: state.into(),
        reason: reason.map(str::to_string),
    }
}

#[test]
fn only_an_idle_node_is_drained_and_only_our_drain_resumed() {
    assert_eq!(plan_drain(&view("idle", None), 0, 1), Step::Drain);
    assert_eq!(plan_drain(&view("mixed", None), 0, 1), Step::Drain);
    assert_eq!(
        plan_drain(
            &view("drained", Some("gpuwatch: GPU 0 x needs RESET_GPU (y)")),
            5,
            1
        ),
        Step::AlreadyOurs
    );
    for (state, why) in [
        ("drained", Some("bad dimm, ticket 42")),
        ("down*", Some("Not responding")),
        ("draining", None),
    ] {
        assert!(
            matches!(plan_drain(&view(state, why), 0, 1), Step::LeaveAlone { .. }),
            "{state}"
        );
        assert!(
            matches!(plan_resume(&view(state, why)), Step::Forget { .. }),
            "{state}"
        );
    }
    assert_eq!(
        plan_drain(&view("idle", None), 1, 1),
        Step::Refuse { drained: 1, max: 1 }
    );
    assert_eq!(
        plan_resume(&view(
            "drained",
            Some("gpuwatch: GPU 0 x needs RESET_GPU (y)")
        )),
        Step::Resume
    );
    assert!(matches!(
        plan_resume(&view("idle", None)),
        Step::Forget { .. }
    ));
    // A reason left behind on a node back in service is not a drain.
    assert!(!view("idle", Some("gpuwatch: old")).ours());
    assert_eq!((default_max_drained(3), default_max_drained(250)), (1, 25));
}
