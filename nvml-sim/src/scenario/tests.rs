use super::*;

fn err(src: &str) -> ScenarioError {
    Scenario::parse(src, "scenarios/x.toml").expect_err("scenario must be rejected")
}

const TWO_GPUS: &str = "name = \"t\"\n[[gpu]]\nname = \"A\"\ncount = 2\n";

#[test]
fn fault_on_missing_gpu_names_line_and_field() {
    let src = format!("{TWO_GPUS}\n[[fault]]\nat = \"1s\"\ngpu = 0\nkind = \"xid\"\ncode = 1\n\n[[fault]]\nat = \"2s\"\ngpu = 9\nkind = \"lost\"\n");
    let e = err(&src);
    assert_eq!(e.line, 14);
    assert_eq!(e.path, "fault[1].gpu");
    assert_eq!(
        e.to_string(),
        "scenarios/x.toml:14:7: fault[1].gpu: GPU 9 does not exist (the scenario has 2 GPUs)"
    );
}

#[test]
fn unknown_key_names_line_and_path() {
    let e = err("name = \"t\"\n[[gpu]]\nname = \"A\"\n\n[gpu.metrics]\npower = 3\n");
    assert_eq!(e.line, 6, "{e}");
    assert!(e.path.starts_with("gpu[0].metrics"), "{e}");
    assert!(e.message.contains("unknown field `power`"), "{e}");
}

#[test]
fn bad_timeline_names_line_and_path() {
    let e = err("name = \"t\"\n[[gpu]]\n[gpu.metrics]\nutilization_gpu = { wobble = 1 }\n");
    assert_eq!(e.line, 4, "{e}");
    assert!(e.path.contains("utilization_gpu"), "{e}");
    let e = err("name = \"t\"\n[[gpu]]\n[gpu.metrics]\n\ntemperature_gpu = { sine = { min = 9, max = 1, period = \"1m\" } }\n");
    assert_eq!(
        (e.line, e.path.as_str()),
        (5, "gpu[0].metrics.temperature_gpu"),
        "{e}"
    );
}

#[test]
fn unknown_feature_and_error_names_are_located() {
    let e = err("[[gpu]]\nunsupported = [\"power\", \"warp\"]\n");
    assert_eq!(e.line, 2, "{e}");
    assert!(e.message.contains("warp"), "{e}");
    let e = err("[init]\nerror = \"ON_FIRE\"\n");
    assert_eq!((e.line, e.path.as_str()), (2, "init.error"), "{e}");
}

#[test]
fn bad_duration_and_syntax_are_located() {
    let e = err("[[gpu]]\n[[fault]]\nat = \"5 parsecs\"\ngpu = 0\nkind = \"lost\"\n");
    assert_eq!(e.line, 3, "{e}");
    let e = err("name = \"t\"\nspeed = = 2\n");
    assert_eq!(e.line, 2, "{e}");
}

#[test]
fn fault_parameters_are_checked() {
    let e = err("[[gpu]]\n[[fault]]\nat = \"5s\"\ngpu = 0\nkind = \"xid\"\n");
    assert_eq!(e.path, "fault[0].code", "{e}");
    let e = err("[[gpu]]\n[[fault]]\nat = \"5s\"\ngpu = 0\nkind = \"lost\"\ncode = 3\n");
    assert_eq!((e.line, e.path.as_str()), (6, "fault[0].code"), "{e}");
}

#[test]
fn replicas_get_distinct_identities() {
    let s = Scenario::parse(TWO_GPUS, "x").expect("valid");
    assert_eq!(s.gpu_count(), 2);
    let (a, b) = (&s.gpus()[0], &s.gpus()[1]);
    assert_ne!(a.uuid, b.uuid);
    assert_ne!(a.serial, b.serial);
    assert_ne!(a.pci_bus_id, b.pci_bus_id);
    assert!(
        a.uuid.starts_with("GPU-") && a.uuid.len() == 40,
        "{}",
        a.uuid
    );
    assert_eq!(s.driver_version(), DEFAULT_DRIVER_VERSION);
}

#[test]
fn latency_names_functions_and_fields_or_says_where() {
    let ok = Scenario::parse(
        "name = \"t\"\n[[gpu]]\n[latency.functions]\nnvmlDeviceGetTotalEnergyConsumption = \"3ms\"\n[latency.fields]\n\"83\" = \"3.4ms\"\n",
        "x.toml",
    )
    .expect("valid latency");
    assert_eq!(
        ok.function_latency_us["nvmlDeviceGetTotalEnergyConsumption"],
        3000
    );
    assert_eq!(ok.field_latency_us[&83], 3400);
    let e = err("name = \"t\"\n[[gpu]]\n[latency.functions]\nnvmlDeviceGetWarpDrive = \"1ms\"\n");
    assert_eq!(
        (e.line, e.path.as_str()),
        (4, "latency.functions.nvmlDeviceGetWarpDrive"),
        "{e}"
    );
    let e = err("name = \"t\"\n[[gpu]]\n[latency.fields]\nenergy = \"1ms\"\n");
    assert_eq!(
        (e.line, e.path.as_str()),
        (4, "latency.fields.energy"),
        "{e}"
    );
    assert!(e.message.contains("field ids"), "{e}");
}

#[test]
fn gpm_tables_are_checked_with_their_lines() {
    let e = err("[[gpu]]\n[gpu.gpm]\nsm_busy = 3\n");
    assert_eq!(e.line, 3, "{e}");
    assert!(e.path.starts_with("gpu[0].gpm"), "{e}");
    assert!(e.message.contains("unknown field `sm_busy`"), "{e}");
    let e = err("[[gpu]]\n[gpu.gpm]\nunsupported = [2, 8]\n");
    assert_eq!(
        (e.line, e.path.as_str()),
        (3, "gpu[0].gpm.unsupported[1]"),
        "{e}"
    );
    assert!(e.message.contains("not an NVML GPM metric id"), "{e}");
    let e = err("[[gpu]]\n[gpu.gpm]\n\nnvdec_engines = 9\n");
    assert_eq!(
        (e.line, e.path.as_str()),
        (4, "gpu[0].gpm.nvdec_engines"),
        "{e}"
    );
    let e =
        err("[[gpu]]\n[gpu.gpm]\nsm_active = { sine = { min = 9, max = 1, period = \"1m\" } }\n");
    assert_eq!(
        (e.line, e.path.as_str()),
        (3, "gpu[0].gpm.sm_active"),
        "{e}"
    );
    let e = err("[[gpu]]\nmig = true\n[[gpu.mig_instances]]\nid = 1\nmemory_mib = 100\n[gpu.mig_instances.gpm]\nsm_active = 5\n");
    assert_eq!(e.path, "gpu[0].mig_instances[0].gpm", "{e}");
    assert!(e.message.contains("add [gpu.gpm]"), "{e}");
}

#[test]
fn nvlink_fabric_and_recovery_are_checked_with_their_lines() {
    let e = err("[[gpu]]\n[gpu.nvlink]\nlinks = 19\n");
    assert_eq!((e.line, e.path.as_str()), (3, "gpu[0].nvlink.links"), "{e}");
    let e = err("[[gpu]]\n[gpu.nvlink]\nlinks = 4\n[[gpu.nvlink.errors]]\nlink = 4\ncounter = \"crc_flit\"\nper_second = 1\n");
    assert_eq!(
        (e.line, e.path.as_str()),
        (5, "gpu[0].nvlink.errors[0].link"),
        "{e}"
    );
    let e = err(
        "[[gpu]]\n[gpu.nvlink]\n[[gpu.nvlink.errors]]\ncounter = \"crc_bits\"\nper_second = 1\n",
    );
    assert_eq!(e.line, 4, "{e}");
    assert!(e.message.contains("crc_flit"), "names the counters: {e}");
    let e = err("[[gpu]]\n[gpu.nvlink]\nlinks = 4\n[[fault]]\nat = \"1s\"\ngpu = 0\nkind = \"nvlink_down\"\nlink = 4\n");
    assert_eq!((e.line, e.path.as_str()), (8, "fault[0].link"), "{e}");
    let e = err("[[gpu]]\n[[fault]]\nat = \"1s\"\ngpu = 0\nkind = \"nvlink_down\"\n");
    assert_eq!(e.path, "fault[0].link", "{e}");
    let e = err("[[gpu]]\n[[fault]]\nat = \"1s\"\ngpu = 0\nkind = \"lost\"\nlink = 2\n");
    assert_eq!((e.line, e.path.as_str()), (6, "fault[0].link"), "{e}");
    let e =
        err("[[gpu]]\n[gpu.fabric]\nstatus = [[\"0s\", \"NOT_READY\"], [\"9s\", \"ALL_GOOD\"]]\n");
    assert_eq!(
        (e.line, e.path.as_str()),
        (3, "gpu[0].fabric.status"),
        "{e}"
    );
    let e = err("[[gpu]]\n[gpu.fabric]\nstruct_version = 4\n");
    assert_eq!(
        (e.line, e.path.as_str()),
        (3, "gpu[0].fabric.struct_version"),
        "{e}"
    );
    let e = err("[[gpu]]\n[gpu.fabric]\ncluster_uuid = \"not-a-uuid\"\n");
    assert_eq!(
        (e.line, e.path.as_str()),
        (3, "gpu[0].fabric.cluster_uuid"),
        "{e}"
    );
    let e =
        err("[[gpu]]\n[gpu.fabric]\nstate = [[\"0s\", \"completed\"], [\"1m\", \"exploded\"]]\n");
    assert_eq!(e.line, 3, "{e}");
    assert!(e.message.contains("in_progress"), "names the states: {e}");
    let e = err(
        "[[gpu]]\n[gpu.fabric]\nstate = [[\"1m\", \"completed\"], [\"0s\", \"in_progress\"]]\n",
    );
    assert!(e.message.contains("increasing"), "{e}");
    let e = err("[[gpu]]\nrecovery_action = \"reboot_the_world\"\n");
    assert_eq!(
        (e.line, e.path.as_str()),
        (2, "gpu[0].recovery_action"),
        "{e}"
    );
    assert!(e.message.contains("gpu_reset"), "{e}");
}

#[test]
fn kernel_log_entries_are_checked_with_their_lines() {
    let gpu = "[[gpu]]\n";
    let e = err(&format!(
        "{gpu}[[kernel_log]]\nkind = \"xid\"\ngpu = 0\ncode = 79\n"
    ));
    assert_eq!((e.line, e.path.as_str()), (3, "kernel_log[0].at"), "{e}");
    let e = err(&format!(
        "{gpu}[[kernel_log]]\nat = \"1s\"\nago = \"1m\"\nkind = \"line\"\nmessage = \"x\"\n"
    ));
    assert_eq!((e.line, e.path.as_str()), (4, "kernel_log[0].ago"), "{e}");
    let e = err(&format!(
        "{gpu}[[kernel_log]]\nat = \"1s\"\nkind = \"xid\"\ngpu = 3\ncode = 79\n"
    ));
    assert_eq!((e.line, e.path.as_str()), (5, "kernel_log[0].gpu"), "{e}");
    let e = err(&format!(
        "{gpu}[[kernel_log]]\nat = \"1s\"\nkind = \"xid\"\ngpu = 0\ncode = 79\npid = 4\n"
    ));
    assert_eq!((e.line, e.path.as_str()), (7, "kernel_log[0].name"), "{e}");
    let e = err(&format!("{gpu}[[kernel_log]]\nat = \"1s\"\nkind = \"xid\"\ngpu = 0\ncode = 79\npid = 4\nname = \"x\"\nlegacy = true\n"));
    assert_eq!(e.path, "kernel_log[0].legacy", "{e}");
    let e = err(&format!(
        "{gpu}[[kernel_log]]\nat = \"1s\"\nkind = \"sxid\"\ncode = 1\ngpu = 0\n"
    ));
    assert_eq!((e.line, e.path.as_str()), (6, "kernel_log[0].gpu"), "{e}");
    let e = err(&format!(
        "{gpu}[[kernel_log]]\nat = \"1s\"\nkind = \"line\"\nmessage = \"two\\nlines\"\n"
    ));
    assert_eq!(
        (e.line, e.path.as_str()),
        (5, "kernel_log[0].message"),
        "{e}"
    );
    let e = err(&format!(
        "{gpu}[[kernel_log]]\nat = \"1s\"\nkind = \"line\"\nmessage = \"x\"\npriority = 9\n"
    ));
    assert_eq!(
        (e.line, e.path.as_str()),
        (6, "kernel_log[0].priority"),
        "{e}"
    );
    let e = err(&format!(
        "{gpu}[[kernel_log]]\nat = \"1s\"\nkind = \"sxid\"\ncode = 1\npci_bus_id = \"05\"\n"
    ));
    assert_eq!(e.path, "kernel_log[0].pci_bus_id", "{e}");
    let e = err(&format!(
        "{gpu}[[kernel_log]]\nat = \"1s\"\nkind = \"line\"\n"
    ));
    assert_eq!(e.path, "kernel_log[0].message", "{e}");
}

#[test]
fn latency_knows_the_gpm_and_health_functions() {
    let ok = Scenario::parse(
        "[[gpu]]\n[latency.functions]\nnvmlGpmSampleGet = \"0.1ms\"\nnvmlGpmMetricsGet = \"0.02ms\"\nnvmlGpmMigSampleGet = \"0.1ms\"\nnvmlDeviceGetNvLinkState = \"0.005ms\"\nnvmlDeviceGetGpuFabricInfoV = \"0.2ms\"\n",
        "x.toml",
    )
    .expect("valid latency");
    assert_eq!(ok.function_latency_us["nvmlGpmSampleGet"], 100);
    assert_eq!(ok.function_latency_us["nvmlGpmMetricsGet"], 20);
    assert_eq!(ok.function_latency_us["nvmlDeviceGetGpuFabricInfoV"], 200);
}

#[test]
fn the_readme_example_is_a_valid_scenario() {
    let readme = include_str!("../../README.md");
    let start = readme.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let end = start + readme[start..].find("```").expect("its end");
    let scenario = Scenario::parse(&readme[start..end], "README.md").expect("valid example");
    assert_eq!(scenario.gpu_count(), 2);
    assert_eq!(scenario.kernel_log.len(), 1);
}

#[test]
fn a_recovery_action_may_be_a_raw_value() {
    use super::schema::RecoveryAction;
    let scenario = Scenario::parse(
        "name = \"t\"\n[[gpu]]\nrecovery_action = 7\n[[gpu]]\nrecovery_action = [[\"0s\", \"none\"], [\"1m\", 4294967295]]\n",
        "scenarios/x.toml",
    )
    .expect("raw values parse");
    let first = scenario.gpus[0].spec.recovery_action.as_ref().expect("set");
    assert_eq!(*first.at(0.0), RecoveryAction::Raw(7));
    let second = scenario.gpus[1].spec.recovery_action.as_ref().expect("set");
    assert_eq!(*second.at(0.0), RecoveryAction::None);
    assert_eq!(*second.at(120.0), RecoveryAction::Raw(4_294_967_295));
    let e = err("[[gpu]]\nrecovery_action = -1\n");
    assert_eq!(e.path, "gpu[0].recovery_action", "{e}");
    assert!(e.message.contains("raw value"), "{e}");
}
