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
