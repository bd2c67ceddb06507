//! Tests of the Xid catalog: its rows, classes and the built-in Xid
//! rules' annotations.

use super::*;

#[test]
fn rows_are_sorted_and_unique() {
    assert!(CATALOG.windows(2).all(|w| w[0].code < w[1].code));
}

#[test]
fn lookup_answers_read_rows_only() {
    let info = lookup(13).unwrap();
    assert_eq!(info.action.as_str(), "RESTART_APP");
    assert_eq!(info.description, "Graphics Engine Exception");
    assert_eq!(lookup(8).unwrap().action, Action::RestartApp);
    assert_eq!(lookup(1).unwrap().action, Action::ContactSupport);
    let fell_off = lookup(79).unwrap();
    assert_eq!(fell_off.action, Action::RestartBm);
    assert_eq!(fell_off.description, "GPU has fallen off the bus");
    assert_eq!(
        fell_off.mnemonic,
        "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
    );
    // NVIDIA's descriptions for the common codes beyond 13.
    for (code, text) in [
        (31, "GPU memory page fault"),
        (43, "GPU stopped processing"),
        (48, "Double Bit ECC Error"),
        (63, "GPU memory remapping event"),
        (64, "GPU memory remapping failure"),
        (74, "NVLINK Error"),
        (94, "Contained memory error"),
        (95, "Uncontained memory error"),
        (109, "Context Switch Timeout Error"),
        (119, "GSP RPC Timeout"),
        (120, "GSP Error"),
        (140, "ECC Unrecovered Error"),
        (149, "NVLINK: NETIR Error"),
        (154, "GPU Recovery Action Changed"),
    ] {
        assert_eq!(lookup(code).unwrap().description, text, "Xid {code}");
    }
    // Every row has a description of its own (no mnemonic standing in).
    assert!(CATALOG
        .iter()
        .all(|i| i.description != i.mnemonic && !i.description.is_empty()));
    assert_eq!(lookup(94).unwrap().action, Action::RestartApp);
    assert_eq!(lookup(48).unwrap().action, Action::WorkflowXid48);
    assert!(lookup(154).unwrap().follows_another);
    assert_eq!(CATALOG.len(), 162);
    // Codes NVIDIA has not published: no advice rather than a guess.
    assert_eq!(lookup(163), None);
    assert_eq!(lookup(0), None);
}

#[test]
fn classes_follow_the_actions() {
    let fatal = codes_of(Class::Reset);
    for code in [
        46, 48, 62, 64, 74, 79, 95, 119, 120, 136, 140, 143, 144, 151,
    ] {
        assert!(fatal.contains(&code), "Xid {code}");
    }
    assert_eq!(class_of(13), Some(Class::Contained));
    assert_eq!(class_of(94), Some(Class::Contained));
    assert_eq!(class_of(159), Some(Class::Contained), "CHECK_UVM");
    assert_eq!(
        class_of(61),
        Some(Class::Support),
        "NVIDIA: CONTACT_SUPPORT"
    );
    assert_eq!(class_of(54), Some(Class::Support), "CHECK_MECHANICALS");
    assert_eq!(class_of(63), Some(Class::Ignore));
    assert_eq!(class_of(45), Some(Class::Ignore), "follows another Xid");
    assert_eq!(class_of(154), Some(Class::Ignore), "follows another Xid");
    assert_eq!(class_of(163), None);
    // Every row is in exactly one class.
    let total: usize = Class::ALL.iter().map(|c| codes_of(*c).len()).sum();
    assert_eq!(total, CATALOG.len());
    assert_eq!(Class::Ignore.rule(), None);
}

#[test]
fn xid_alerts_carry_the_catalogs_action_and_description() {
    use crate::rules::template::Context;
    for name in ["GpuXidFatal", "GpuXidContained", "GpuXidContactSupport"] {
        let rule = crate::rules::builtin_rules()
            .into_iter()
            .find(|r| r.name == name)
            .unwrap();
        let render = |key: &str, code: f64| {
            rule.annotations[key].render(&Context {
                value: Some(code),
                host: "n1",
                ..Context::default()
            })
        };
        assert_eq!(render("action", 13.0), "RESTART_APP", "{name}");
        assert_eq!(render("xid_description", 13.0), "Graphics Engine Exception");
        assert_eq!(render("action", 79.0), "RESTART_BM", "{name}");
        assert_eq!(render("action", 163.0), "n/a", "not published: no guess");
        assert!(render("xid_description", 163.0).contains("not in"));
    }
}
