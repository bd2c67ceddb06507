//! The built-in rule pack: on by default; each rule can be tuned or
//! disabled by name from the configuration (see [`super::parse_rules`]).
//!
//! The names match the bundled Prometheus rules
//! (`deploy/prometheus/gpuwatch-rules.yml`), so an alert reads the same
//! whether gpuwatch or Prometheus raised it. Hold times follow the same
//! reasoning as there and as nvidia_gpu_exporter's and DCGM's health checks:
//! a state the hardware enters for seconds as a matter of course (thermal
//! slowdown at a load step, memory filling at a job start) must hold for
//! minutes before anyone is told; an event that already means the GPU needs
//! a reset (a fatal Xid, an uncorrectable ECC error, a lost GPU) fires at once.

use std::collections::BTreeMap;
use std::time::Duration;

use super::condition::{Condition, Counter, Flag, Metric, Op};
use super::rule::{Rule, Severity};
use super::template::Template;

use crate::health::catalog::{codes_of, Class};

/// One GiB.
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Adds NVIDIA's catalog advice for the Xid code to an Xid rule's
/// annotations: `action` (the immediate action) and `xid_description`.
fn with_xid_catalog(mut rule: Rule) -> Rule {
    for (key, text) in [
        ("action", "{{ .xid_action }}"),
        ("xid_description", "{{ .xid_description }}"),
    ] {
        if let Ok(template) = Template::parse(text) {
            rule.annotations.insert(key.to_string(), template);
        }
    }
    rule
}

/// The built-in rule of one catalog class: fires at once on a new Xid of
/// the class and keeps firing 30 minutes; Xid 63/64 left to the row-remap
/// rules where the GPU gives their readings.
fn xid_rule(class: Class, severity: Severity, summary: &str, description: &str) -> Rule {
    let name = class.rule().unwrap_or("GpuXid");
    with_xid_catalog(Rule {
        keep_firing_for: Duration::from_secs(30 * 60),
        ..rule(
            name,
            Condition::Xid {
                codes: codes_of(class),
                defer_to_remap: true,
            },
            0,
            severity,
            summary,
            description,
        )
    })
}

fn rule(
    name: &str,
    condition: Condition,
    for_secs: u64,
    severity: Severity,
    summary: &str,
    description: &str,
) -> Rule {
    let mut annotations = BTreeMap::new();
    for (key, text) in [("summary", summary), ("description", description)] {
        // The built-in texts are constants checked by a test; a failure
        // here would drop only that annotation.
        if let Ok(template) = Template::parse(text) {
            annotations.insert(key.to_string(), template);
        }
    }
    Rule {
        name: name.to_string(),
        condition,
        for_: Duration::from_secs(for_secs),
        keep_firing_for: Duration::ZERO,
        clear: None,
        severity,
        labels: BTreeMap::new(),
        annotations,
    }
}

fn compare(metric: Metric, op: Op, threshold: f64) -> Condition {
    Condition::Compare {
        metric,
        op,
        threshold,
    }
}

/// `GpuXidRecurring`: fires at once, keeps firing a day (the GPU stays
/// suspect); its `action` is INSPECT_HARDWARE whatever the catalog says
/// for the code.
fn xid_recurring_rule() -> Rule {
    let mut rule = with_xid_catalog(Rule {
        keep_firing_for: Duration::from_secs(24 * 3600),
        ..rule(
            XID_RECURRING,
            Condition::XidRecurring {
                after: crate::health::settings::DEFAULT_XID_ESCALATE_AFTER,
            },
            0,
            Severity::Critical,
            "Xid {{ .value }} keeps coming back on GPU {{ .gpu }} of {{ .host }}: inspect the hardware",
            "Xid {{ .value }} ({{ .xid_description }}) came back on GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) of {{ .host }} after {{ .threshold }} or more GPU resets or node reboots: resetting does not fix it. Drain the node, run the field diagnostics (DCGM level 3 / NVIDIA fieldiag) and contact NVIDIA support for a replacement.",
        )
    });
    if let Ok(action) = Template::parse(INSPECT_HARDWARE) {
        rule.annotations.insert("action".to_string(), action);
    }
    rule
}

/// The name of the escalation rule, which the health verdict follows.
pub const XID_RECURRING: &str = "GpuXidRecurring";

/// The `action` of `GpuXidRecurring`: not one of the catalog's buckets.
pub const INSPECT_HARDWARE: &str = "INSPECT_HARDWARE";

/// Sets the resets/reboots after which `GpuXidRecurring` escalates
/// (`[health] xid_escalate_after`), unless the rule file gave it a
/// condition of its own (then that one stands).
pub fn set_xid_escalation(rules: &mut [Rule], after: u32) {
    let built_in = Condition::XidRecurring {
        after: crate::health::settings::DEFAULT_XID_ESCALATE_AFTER,
    };
    for rule in rules
        .iter_mut()
        .filter(|r| r.name == "GpuXidRecurring" && r.condition == built_in)
    {
        rule.condition = Condition::XidRecurring { after };
    }
}

/// The built-in rules, in a stable order.
pub fn builtin_rules() -> Vec<Rule> {
    let half_hour = Duration::from_secs(30 * 60);
    vec![
        // Hardware thermal slowdown halves clocks or worse; 1 minute rides out
        // a transient at a load step. Warning: the GPU protects itself, the
        // near-shutdown rule is the critical one.
        rule(
            "GpuHwThermalSlowdown",
            Condition::ClockEvent { mask: 0x40 },
            60,
            Severity::Critical,
            "GPU {{ .gpu }} on {{ .host }} is in hardware thermal slowdown",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} has had its clocks cut by the hardware thermal protection for over {{ .for }}. Check cooling and airflow.",
        ),
        // Software thermal slowdown is the driver's gentler response and is
        // normal for seconds under load: 5 minutes.
        rule(
            "GpuSwThermalSlowdown",
            Condition::ClockEvent { mask: 0x20 },
            300,
            Severity::Warning,
            "GPU {{ .gpu }} on {{ .host }} is thermally throttled",
            "The driver has lowered the clocks of GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} for temperature for over {{ .for }}.",
        ),
        // Headroom to the GPU's own slowdown threshold (from NVML, never a
        // fixed 85 °C): 5 °C for 5 minutes means it will throttle soon.
        rule(
            "GpuTemperatureNearSlowdown",
            compare(Metric::DegreesBelowSlowdown, Op::Le, 5.0),
            300,
            Severity::Warning,
            "GPU {{ .gpu }} on {{ .host }} is near its slowdown temperature",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} has been {{ .value }} °C below its slowdown threshold (alert at {{ .threshold }} °C or less) for {{ .for }}.",
        ),
        // 3 °C from shutdown: a job is about to die with the GPU; 1 minute.
        rule(
            "GpuTemperatureNearShutdown",
            compare(Metric::DegreesBelowShutdown, Op::Le, 3.0),
            60,
            Severity::Critical,
            "GPU {{ .gpu }} on {{ .host }} is near its shutdown temperature",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} is {{ .value }} °C below the temperature at which it shuts down.",
        ),
        // An external power-brake signal (PSU, chassis): never normal, but
        // brief assertions happen on power events; 1 minute.
        rule(
            "GpuHwPowerBrake",
            Condition::ClockEvent { mask: 0x80 },
            60,
            Severity::Critical,
            "GPU {{ .gpu }} on {{ .host }} is slowed by the hardware power brake",
            "An external power-brake signal has been slowing GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} for over {{ .for }}.",
        ),
        // Jobs fill memory at start and frameworks cache; 5 minutes above
        // 95 % (or under 1 GiB free) means the next allocation will fail.
        rule(
            "GpuMemoryPressure",
            Condition::Any(vec![
                compare(Metric::MemoryUsedRatio, Op::Gt, 0.95),
                compare(Metric::MemoryFreeBytes, Op::Lt, GIB),
            ]),
            300,
            Severity::Warning,
            "GPU {{ .gpu }} on {{ .host }} is almost out of memory",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} has been short of memory for {{ .for }} (value {{ .value }}).",
        ),
        // A lost GPU does not come back by itself: at once.
        rule(
            "GpuLost",
            Condition::GpuLost,
            0,
            Severity::Critical,
            "GPU {{ .gpu }} on {{ .host }} is lost",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} stopped answering NVML. It usually needs a reset or a reboot.",
        ),
        // An Xid is an event: fire at once and stay firing for 30 minutes so
        // that it is seen and not resolved at the next sample. One rule per
        // class of NVIDIA's catalog (the code lists come from it).
        xid_rule(
            Class::Reset,
            Severity::Critical,
            "Fatal Xid {{ .value }} on GPU {{ .gpu }} of {{ .host }}",
            "The driver reported Xid {{ .value }} ({{ .xid_description }}) on GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) of {{ .host }}. NVIDIA's action: {{ .xid_action }}; the GPU needs a reset or the node a reboot: drain the node.",
        ),
        xid_rule(
            Class::Contained,
            Severity::Warning,
            "Xid {{ .value }} contained to an application on GPU {{ .gpu }} of {{ .host }}",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) of {{ .host }} reported Xid {{ .value }} ({{ .xid_description }}): the error was contained to the application that hit it. NVIDIA's action: {{ .xid_action }}; restart the affected job. The GPU keeps working.",
        ),
        xid_rule(
            Class::Support,
            Severity::Warning,
            "Unexpected Xid {{ .value }} on GPU {{ .gpu }} of {{ .host }}",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) of {{ .host }} reported Xid {{ .value }} ({{ .xid_description }}). NVIDIA's action: {{ .xid_action }}; collect a bug report (nvidia-bug-report.sh) for NVIDIA support.",
        ),
        // A reset-class Xid that comes back on the same GPU after the
        // remedy (GPU resets / node reboots, `[health] xid_escalate_after`,
        // default 2) is the hardware: inspect it (GPUd escalates likewise).
        xid_recurring_rule(),
        // Any uncorrectable ECC error corrupts data: at once, and kept for
        // 30 minutes like an Xid (it is an event too).
        Rule {
            keep_firing_for: half_hour,
            ..rule(
                "GpuEccUncorrectable",
                Condition::Increase {
                    counter: Counter::EccUncorrected,
                },
                0,
                Severity::Critical,
                "Uncorrectable ECC errors on GPU {{ .gpu }} of {{ .host }}",
                "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) of {{ .host }} counted {{ .value }} new uncorrectable ECC errors.",
            )
        },
        // A failed remap means the GPU needs replacing: at once.
        rule(
            "GpuRowRemapFailure",
            Condition::Flag {
                flag: Flag::RemapFailure,
            },
            0,
            Severity::Critical,
            "Row remapping failed on GPU {{ .gpu }} of {{ .host }}",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) of {{ .host }} could not remap a faulty memory row: the GPU should be replaced (RMA).",
        ),
        // A pending remap needs a reset at the next convenient time.
        rule(
            "GpuRowRemapPending",
            Condition::Flag {
                flag: Flag::RemapPending,
            },
            0,
            Severity::Warning,
            "GPU {{ .gpu }} of {{ .host }} needs a reset to remap memory rows",
            "A memory row remap on GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) of {{ .host }} takes effect only after a GPU reset.",
        ),
        // Anomalies are hints, not faults: severity info, and 5 minutes of
        // hold so that the temperature's lag behind a load change (a minute
        // or two) never fires. 8 °C above its own baseline at the same load
        // is well outside run-to-run variation (a few °C); 15 °C above its
        // peers at similar load is the classic failing fan.
        rule(
            "GpuTemperatureAnomaly",
            Condition::TemperatureAnomaly { margin: 8.0 },
            300,
            Severity::Info,
            "GPU {{ .gpu }} on {{ .host }} runs hotter than usual at this load",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} has been {{ .value }} °C above its usual temperature at this utilization for {{ .for }} (alert from {{ .threshold }} °C). Check its fans and airflow.",
        ),
        rule(
            "GpuHotterThanPeers",
            Condition::PeerHotter { margin: 15.0 },
            300,
            Severity::Info,
            "GPU {{ .gpu }} on {{ .host }} runs hotter than its neighbours",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} has been {{ .value }} °C hotter than the median of the node's GPUs at similar utilization for {{ .for }} (alert from {{ .threshold }} °C). A failing fan or blocked airflow is likely.",
        ),
        // GPM (Hopper and newer; quiet without it, since sm_active is then
        // absent). Busy but starved: nvidia-smi's utilization says a kernel
        // ran nearly all the time, yet under a fifth of the SMs had work —
        // the job waits on data loading, the host or communication. 15
        // minutes rides out start-up and checkpoints. Utilization is the
        // 5-minute average, at least 85 %: a starved job's utilization
        // wanders around 90 %, and on the raw reading the alert flapped
        // pending/inactive without ever firing. Info: an efficiency finding.
        rule(
            "GpuBusyButStarved",
            Condition::All(vec![
                compare(Metric::UtilizationAvg5m, Op::Ge, 0.85),
                compare(Metric::SmActive, Op::Lt, 0.2),
            ]),
            900,
            Severity::Info,
            "GPU {{ .gpu }} on {{ .host }} looks busy but its SMs are mostly idle",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} has reported utilization averaging 85 % or more for {{ .for }} while only {{ .value }} of its SMs' time had work (alert below {{ .threshold }}). The job is likely starved: waiting on data loading, the CPU, storage or communication. Profile its input pipeline.",
        ),
        // Held but idle: processes hold GPU memory while no SM works for
        // 30 minutes — an allocated GPU doing nothing, the most expensive
        // waste in a cluster (a notebook left open, a hung job).
        rule(
            "GpuHeldButIdle",
            Condition::All(vec![
                compare(Metric::ProcessMemoryBytes, Op::Gt, 0.0),
                compare(Metric::SmActive, Op::Lt, 0.01),
            ]),
            1800,
            Severity::Warning,
            "GPU {{ .gpu }} on {{ .host }} is held by processes but idle",
            "Processes hold memory on GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }}, yet its SMs have been active {{ .value }} of the time (alert below {{ .threshold }}) for {{ .for }}. The allocation is likely idle: a notebook left open or a hung job. Free it for others.",
        ),
        // The same waste named by its owner: one alert per workload (Slurm
        // job, pod, container, plain process) whose SM-active seconds per
        // GPU-second held over the last 30 minutes (the `for` is the
        // window) stayed below 1 %. Plain processes count too: on a shared
        // workstation or a node without a scheduler the process and its
        // user are the only owner there is (the MPS server is skipped: its
        // clients are the workloads). Warning like GpuHeldButIdle: nothing
        // breaks, but someone should free the GPUs today.
        rule(
            "GpuWorkloadIdle",
            Condition::WorkloadIdle {
                below: 0.01,
                kinds: Vec::new(),
            },
            1800,
            Severity::Warning,
            "{{ .workload }} on {{ .host }} holds GPUs {{ .gpus }} but idles",
            "{{ .workload }} has held GPUs {{ .gpus }} on {{ .host }} for {{ .for }} with SM activity {{ .value_percent }} % (alert below {{ .threshold_percent }} %): SM-active seconds per GPU-second held over that window. Ask its owner to free the GPUs, or cancel it.",
        ),
        // The snapshot is older than 30 s (several intervals plus the
        // sampler's 10 s timeout) for 2 minutes: NVML or the driver hangs.
        rule(
            "GpuwatchStale",
            Condition::Stale {
                max_age: Duration::from_secs(30),
            },
            120,
            Severity::Warning,
            "gpuwatch on {{ .host }} has no fresh sample",
            "The latest snapshot on {{ .host }} is {{ .value }} s old (limit {{ .threshold }} s): NVML is failing or a driver call hung.",
        ),
        // An NVLink link that is down cuts the GPU's bandwidth to its peers
        // (and, on NVSwitch systems, can stop multi-GPU jobs): at once.
        rule(
            "GpuNvlinkDown",
            Condition::Compare {
                metric: Metric::NvlinkDown,
                op: Op::Gt,
                threshold: 0.0,
            },
            0,
            Severity::Critical,
            "{{ .value }} NVLink link(s) of GPU {{ .gpu }} on {{ .host }} are down",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} has {{ .value }} NVLink link(s) down (gpuwatch_nvlink_links_down; which ones: /api/v1/gpus or the web view). Multi-GPU jobs lose bandwidth or fail; follow NVIDIA's NVLink workflow (reset the GPU, then check the links and switches).",
        ),
        // The driver itself says what the GPU needs (field 230).
        rule(
            "GpuRecoveryActionRequired",
            Condition::Compare {
                metric: Metric::RecoveryActionNeeded,
                op: Op::Gt,
                threshold: 0.0,
            },
            0,
            Severity::Critical,
            "GPU {{ .gpu }} on {{ .host }} needs a recovery action",
            "The driver reports a recovery action for GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} (gpuwatch_recovery_action: gpu_reset, node_reboot, drain_p2p or drain_and_reset). Drain it and do what it asks.",
        ),
        // A busy GPU on a narrower or slower PCIe link than it supports
        // (a bad riser, slot or retimer): transfers slow down. Idle GPUs
        // downshift on purpose, so only busy ones count; the hold skips
        // the moments a link retrains.
        rule(
            "GpuPcieDegraded",
            Condition::Compare {
                metric: Metric::PcieDegraded,
                op: Op::Gt,
                threshold: 0.0,
            },
            300,
            Severity::Warning,
            "PCIe link of GPU {{ .gpu }} on {{ .host }} is degraded",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} has been busy on a PCIe link below its maximum width or generation for {{ .for }} (gpuwatch_pcie_link_width vs gpuwatch_pcie_link_max_width, generation likewise). Reseat the GPU or check its riser and slot.",
        ),
        // A GPU on the PCI bus that the driver never enumerated (fell off
        // the bus before it loaded, failed to initialise): NVML just counts
        // one GPU fewer, so only the bus shows it.
        rule(
            "GpuMissingFromDriver",
            Condition::GpusMissingFromDriver,
            0,
            Severity::Critical,
            "{{ .value }} GPU(s) on the PCI bus of {{ .host }} are missing from the driver",
            "NVIDIA GPUs at {{ .missing_pci }} sit on the PCI bus of {{ .host }} but NVML does not list them: they fell off the bus or failed to initialise. Check `dmesg` for the Xid that took them off the bus (`gpuwatch events`); they usually need a node reboot, else a reseat or replacement.",
        ),
        // A GPU that cannot join the NVLink fabric (NVSwitch systems)
        // cannot run multi-GPU jobs: critical. Registration takes seconds
        // to a minute after the fabric manager starts, so 5 minutes of
        // grace; a registration that completed with an error stays so and
        // fires after the same hold.
        rule(
            "GpuFabricNotRegistered",
            Condition::Compare {
                metric: Metric::FabricNotRegistered,
                op: Op::Gt,
                threshold: 0.0,
            },
            300,
            Severity::Critical,
            "GPU {{ .gpu }} on {{ .host }} is not in the NVLink fabric",
            "GPU {{ .gpu }} ({{ .name }}, {{ .uuid }}) on {{ .host }} has not completed its NVLink fabric registration for {{ .for }}, or completed it with an error (gpuwatch_fabric_state, gpuwatch_fabric_info's status). Multi-GPU jobs cannot use it: check that nvidia-fabricmanager (or the NVLink subnet manager) runs and its log, then reset the GPU or reboot the node.",
        ),
    ]
}
