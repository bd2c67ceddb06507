use serde_json::json;

use super::*;

/// A reason as `/api/v1/health` writes it, with the judge's action class.
fn reason(state: &str, source: &str, text: &str, class: &str) -> Value {
    json!({ "state": state, "source": source, "text": text, "action": "what to do", "class": class })
}

fn gpu(index: u64, state: &str, reasons: Vec<Value>) -> Value {
    json!({
        "gpu": index,
        "uuid": format!("GPU-{index}f8c1b2e-1111-2222-3333-444455556666"),
        "state": state,
        "reasons": reasons,
    })
}

fn document(gpus: Vec<Value>, missing: &[&str]) -> Value {
    json!({
        "taken_at": 1.0,
        "hostname": "node-1",
        "state": "unhealthy",
        "node": { "pci_gpus": 4, "missing_from_driver": missing, "kernel_log_up": true },
        "gpus": gpus,
    })
}

const ALL: Filter = Filter {
    degraded: false,
    actions: Vec::new(),
};

#[test]
fn actions_are_named_in_one_word_from_the_judges_class() {
    use crate::health::action_class::ActionClass as C;
    for (class, code) in [
        (C::ResetGpu, "RESET_GPU"),
        (C::RebootSystem, "REBOOT_SYSTEM"),
        (C::InspectHardware, "INSPECT_HARDWARE"),
        (C::FabricNotRegistered, "RESET_FABRIC"),
        (C::FabricUnhealthy, "RESET_FABRIC"),
        (C::FabricDegraded, "RESET_FABRIC"),
        (C::GpuMissing, "RESET_GPU"),
        (C::DrainP2p, "DRAIN_P2P"),
        (C::WorkflowNvlink, "RESET_GPU"),
        (C::RestartApp, "RESTART_APP"),
        (C::Other, "OTHER"),
    ] {
        assert_eq!(action_code(class), code, "{class:?}");
    }
}

#[test]
fn a_reason_without_a_known_class_is_an_unknown_answer() {
    for class in [json!(null), json!("reset the GPU"), json!(3)] {
        let mut r = reason("unhealthy", "xid", "Xid 79", "RESET_GPU");
        r["class"] = class;
        let doc = document(vec![gpu(0, "unhealthy", vec![r])], &[]);
        let answer = judge(&doc, &ALL, 80);
        assert_eq!(answer.status, Status::Unknown, "{answer:?}");
        assert!(answer.message.contains("action class"), "{answer:?}");
    }
}

#[test]
fn the_message_keeps_who_and_action_and_shortens_the_text() {
    assert_eq!(fit("a: ", "short", "", 80), "a: short");
    let long = "x".repeat(200);
    let cut = fit("GPU 3 (GPU-3f8c1b2e): RESET_GPU: ", &long, " (+2 more)", 80);
    assert_eq!(cut.len(), 80);
    assert!(
        cut.starts_with("GPU 3 (GPU-3f8c1b2e): RESET_GPU: xxx"),
        "{cut}"
    );
    assert!(cut.ends_with("x... (+2 more)"), "{cut}");
    // A limit too small for head and tail cuts the whole.
    assert_eq!(fit("abcdef", "ghi", "jkl", 5), "abcde");
}

#[test]
fn unhealthy_reasons_are_problems_worst_action_first_with_a_count_of_the_rest() {
    let doc = document(
        vec![
            gpu(0, "healthy", vec![]),
            gpu(
                1,
                "unhealthy",
                vec![reason(
                    "unhealthy",
                    "recovery_action",
                    "the driver asks for a recovery action: gpu_reset",
                    "RESET_GPU",
                )],
            ),
            gpu(
                2,
                "unhealthy",
                vec![reason(
                    "unhealthy",
                    "xid",
                    "Xid 79 (GPU has fallen off the bus) keeps coming back after GPU resets or node reboots",
                    "INSPECT_HARDWARE",
                )],
            ),
            gpu(
                3,
                "degraded",
                vec![reason("degraded", "xid", "Xid 13 (Graphics Engine Exception) within 30 minutes", "RESTART_APP")],
            ),
        ],
        &[],
    );
    let answer = judge(&doc, &ALL, 80);
    assert_eq!(answer.status, Status::Problem);
    assert!(
        answer
            .message
            .starts_with("GPU 2 (GPU-2f8c1b2e): INSPECT_HARDWARE: Xid 79"),
        "{answer:?}"
    );
    assert!(
        answer.message.ends_with("... (+1 more, GPU 1)"),
        "{answer:?}"
    );
    assert!(answer.message.len() <= 80);
    assert_eq!(answer.details.len(), 2, "{answer:?}");
    assert!(answer.details[0].contains("GPU-2f8c1b2e-1111-2222-3333-444455556666"));
    assert!(answer.details[1].starts_with("GPU 1 ("), "{answer:?}");

    // Only the reset: GPU 1 alone.
    let reset = Filter {
        degraded: false,
        actions: vec!["RESET_GPU".into()],
    };
    let answer = judge(&doc, &reset, 80);
    assert_eq!(answer.status, Status::Problem);
    assert_eq!(
        answer.message,
        "GPU 1 (GPU-1f8c1b2e): RESET_GPU: the driver asks for a recovery action: gpu_r...",
        "{answer:?}"
    );
    // Nothing needs a reboot.
    let reboot = Filter {
        degraded: false,
        actions: vec!["REBOOT_SYSTEM".into()],
    };
    let answer = judge(&doc, &reboot, 80);
    assert_eq!(answer.status, Status::Ok);
    assert_eq!(
        answer.message,
        "no unhealthy GPU needs REBOOT_SYSTEM (4 GPUs checked, 1 degraded)"
    );
    // The degraded reason is an event's problem, not the condition's.
    let degraded = Filter {
        degraded: true,
        actions: Vec::new(),
    };
    let answer = judge(&doc, &degraded, 80);
    assert_eq!(answer.status, Status::Problem);
    assert_eq!(
        answer.message,
        "GPU 3 (GPU-3f8c1b2e): RESTART_APP: Xid 13 (Graphics Engine Exception) within ..."
    );
}

#[test]
fn a_gpu_missing_from_the_driver_needs_a_reboot() {
    let doc = document(vec![gpu(0, "healthy", vec![])], &["0000:3b:00.0"]);
    let answer = judge(&doc, &ALL, 80);
    assert_eq!(answer.status, Status::Problem);
    assert_eq!(
        answer.message,
        "GPU missing (PCI 0000:3b:00.0): REBOOT_SYSTEM: on the PCI bus, not in the driver"
    );
}

#[test]
fn healthy_is_ok_and_bad_answers_are_unknown() {
    let doc = document(
        vec![gpu(0, "healthy", vec![]), gpu(1, "healthy", vec![])],
        &[],
    );
    let answer = judge(&doc, &ALL, 80);
    assert_eq!(
        (answer.status, answer.message.as_str()),
        (Status::Ok, "no GPU unhealthy (2 GPUs checked)")
    );
    for (bad, why) in [
        (json!("not json"), "is not a JSON object"),
        (json!({ "state": "healthy" }), "has no list of GPUs"),
        (
            json!({ "state": "unhealthy", "gpus": [{ "uuid": "GPU-1", "reasons": [] }] }),
            "has a GPU without an index",
        ),
        (
            json!({ "state": "unhealthy", "gpus": [{ "gpu": 0, "reasons": [{ "state": "on fire" }] }] }),
            "has a reason without a known state",
        ),
        (
            json!({ "taken_at": null, "state": null, "gpus": [], "node": null }),
            "no sample yet",
        ),
    ] {
        let answer = judge(&bad, &ALL, 80);
        assert_eq!(answer.status, Status::Unknown, "{bad}");
        assert!(answer.details[0].contains(why), "{bad}: {answer:?}");
        assert!(!answer.message.is_empty() && answer.message.len() <= 80);
    }
}

#[test]
fn outside_text_reaches_the_message_as_printable_ascii() {
    let doc = document(
        vec![gpu(
            0,
            "unhealthy",
            vec![reason(
                "unhealthy",
                "xid",
                "Xid 79 \u{1b}]0;owned\u{7} ümlaut",
                "RESET_GPU",
            )],
        )],
        &[],
    );
    let answer = judge(&doc, &ALL, 80);
    assert_eq!(
        answer.message,
        "GPU 0 (GPU-0f8c1b2e): RESET_GPU: Xid 79 ?]0;owned? ?mlaut"
    );
}
