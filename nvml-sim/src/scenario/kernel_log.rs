//! `[[kernel_log]]`: kernel-log lines the simulator appends to the file
//! named by `GPUWATCH_SIM_KMSG`, in the driver's own formats (see
//! `driver_messages` for the message texts, `engine::kmsg` for the records).

use super::error::Locator;
use super::{Fault, FaultEffect, GpuConfig, ScenarioError};
use crate::driver_messages;
use crate::duration::Duration;
use serde::Deserialize;
use toml::Spanned;

/// What a `[[kernel_log]]` entry prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelLogKind {
    /// `NVRM: Xid (PCI:dddd:bb:dd): code, pid=..., name=..., message`.
    Xid,
    /// `nvidia-nvswitchN: SXid (PCI:dddd:bb:dd.f): code, message`.
    Sxid,
    /// Any line, verbatim.
    Line,
}

/// `[[kernel_log]]` as written in the scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelLogSpec {
    /// Scenario time the line is logged (exclusive with `ago`).
    pub at: Option<Spanned<Duration>>,
    /// Logged this long before the first nvmlInit (written at that init).
    pub ago: Option<Spanned<Duration>>,
    /// What the line is.
    pub kind: Spanned<KernelLogKind>,
    /// GPU index (xid).
    pub gpu: Option<Spanned<u32>>,
    /// Xid or SXid code.
    pub code: Option<Spanned<u64>>,
    /// Process id of the channel's owner (xid, with `name`).
    pub pid: Option<Spanned<u32>>,
    /// Process name (xid, with `pid`).
    pub name: Option<Spanned<String>>,
    /// MIG GPU instance the Xid is attributed to (xid).
    pub gpu_instance: Option<Spanned<u32>>,
    /// MIG compute instance (xid, with `gpu_instance`).
    pub compute_instance: Option<Spanned<u32>>,
    /// Older drivers' form without `pid=..., name=...` (xid).
    pub legacy: Option<Spanned<bool>>,
    /// Text after the code (xid, sxid; default from a small catalog), or the line (line).
    pub message: Option<Spanned<String>>,
    /// NVSwitch number N in `nvidia-nvswitchN` (sxid, default 0).
    pub switch: Option<Spanned<u32>>,
    /// The switch's PCI address `dddd:bb:dd.f` (sxid; default 0000:(05+N):00.0).
    pub pci_bus_id: Option<Spanned<String>>,
    /// Syslog level 0-7 (default 4 for NVRM lines, 3 for SXid, 6 for lines).
    pub priority: Option<Spanned<u8>>,
}

/// When a line is logged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum When {
    /// At this scenario time.
    At(f64),
    /// This many seconds before the first nvmlInit.
    Ago(f64),
}

/// A validated kernel-log line.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelLine {
    /// When it is logged.
    pub when: When,
    /// Syslog level.
    pub priority: u8,
    /// The message (no newline).
    pub message: String,
    /// For an Xid line: the GPU, whose identity lines the driver prints
    /// once before its first Xid.
    pub xid_gpu: Option<usize>,
}

/// Validates the `[[kernel_log]]` entries and adds one line per Xid fault.
pub(super) fn build(
    loc: &Locator,
    specs: &[KernelLogSpec],
    gpus: &[GpuConfig],
    faults: &[Fault],
) -> Result<Vec<KernelLine>, ScenarioError> {
    let mut lines = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| line(loc, i, spec, gpus))
        .collect::<Result<Vec<_>, _>>()?;
    for f in faults {
        if let (FaultEffect::Xid(code), Some(gpu)) = (f.effect, f.gpu) {
            if let Some(config) = gpus.get(gpu) {
                lines.push(KernelLine {
                    when: When::At(f.at),
                    priority: driver_messages::NVRM_PRIORITY,
                    message: driver_messages::xid_message(&driver_messages::XidLine {
                        pci_bus_id: &config.pci_bus_id,
                        code,
                        process: None,
                        mig: None,
                        legacy: false,
                        text: None,
                    }),
                    xid_gpu: Some(gpu),
                });
            }
        }
    }
    Ok(lines)
}

fn line(
    loc: &Locator,
    i: usize,
    spec: &KernelLogSpec,
    gpus: &[GpuConfig],
) -> Result<KernelLine, ScenarioError> {
    let path = format!("kernel_log[{i}]");
    let kind = *spec.kind.get_ref();
    let err = |span: std::ops::Range<usize>, field: &str, msg: String| {
        Err(loc.error(Some(span.start), format!("{path}.{field}"), msg))
    };
    let when = match (&spec.at, &spec.ago) {
        (Some(at), None) => When::At(at.get_ref().secs()),
        (None, Some(ago)) => When::Ago(ago.get_ref().secs()),
        (Some(_), Some(ago)) => {
            return err(
                ago.span(),
                "ago",
                "give either `at` or `ago`, not both".into(),
            )
        }
        (None, None) => {
            return err(
                spec.kind.span(),
                "at",
                "needs `at` (scenario time) or `ago` (before the first nvmlInit)".into(),
            )
        }
    };
    let used = |name: &str| match kind {
        KernelLogKind::Xid => matches!(
            name,
            "gpu"
                | "code"
                | "pid"
                | "name"
                | "gpu_instance"
                | "compute_instance"
                | "legacy"
                | "message"
        ),
        KernelLogKind::Sxid => matches!(name, "code" | "message" | "switch" | "pci_bus_id"),
        KernelLogKind::Line => name == "message",
    };
    let given = [
        ("gpu", spec.gpu.as_ref().map(Spanned::span)),
        ("code", spec.code.as_ref().map(Spanned::span)),
        ("pid", spec.pid.as_ref().map(Spanned::span)),
        ("name", spec.name.as_ref().map(Spanned::span)),
        (
            "gpu_instance",
            spec.gpu_instance.as_ref().map(Spanned::span),
        ),
        (
            "compute_instance",
            spec.compute_instance.as_ref().map(Spanned::span),
        ),
        ("legacy", spec.legacy.as_ref().map(Spanned::span)),
        ("message", spec.message.as_ref().map(Spanned::span)),
        ("switch", spec.switch.as_ref().map(Spanned::span)),
        ("pci_bus_id", spec.pci_bus_id.as_ref().map(Spanned::span)),
    ];
    for (name, span) in given {
        if let Some(span) = span {
            if !used(name) {
                return err(
                    span,
                    name,
                    format!("`{name}` has no meaning for kind {kind:?}"),
                );
            }
        }
    }
    let needs = |field: &str| {
        loc.error(
            Some(spec.kind.span().start),
            format!("{path}.{field}"),
            format!("kind {kind:?} needs `{field}`"),
        )
    };
    for text in [&spec.message, &spec.name].into_iter().flatten() {
        if text.get_ref().chars().any(char::is_control) {
            return err(
                text.span(),
                "message",
                "kernel-log text cannot hold newlines or other control characters".into(),
            );
        }
    }
    if let Some(p) = &spec.priority {
        if *p.get_ref() > 7 {
            return err(
                p.span(),
                "priority",
                "priority is a syslog level, 0 (emerg) to 7 (debug)".into(),
            );
        }
    }
    let priority = |default: u8| spec.priority.as_ref().map_or(default, |p| *p.get_ref());
    let message = spec.message.as_ref().map(|m| m.get_ref().as_str());
    match kind {
        KernelLogKind::Line => Ok(KernelLine {
            when,
            priority: priority(driver_messages::INFO_PRIORITY),
            message: message.ok_or_else(|| needs("message"))?.to_string(),
            xid_gpu: None,
        }),
        KernelLogKind::Sxid => {
            let code = *spec.code.as_ref().ok_or_else(|| needs("code"))?.get_ref();
            let switch = spec.switch.as_ref().map_or(0, |s| *s.get_ref());
            let pci = match &spec.pci_bus_id {
                Some(p) if driver_messages::parse_pci(p.get_ref()).is_none() => {
                    return err(
                        p.span(),
                        "pci_bus_id",
                        "expected a PCI address like 0000:05:00.0".into(),
                    )
                }
                Some(p) => p.get_ref().clone(),
                None => format!("0000:{:02x}:00.0", 0x05 + switch),
            };
            Ok(KernelLine {
                when,
                priority: priority(driver_messages::SXID_PRIORITY),
                message: driver_messages::sxid_message(switch, &pci, code, message),
                xid_gpu: None,
            })
        }
        KernelLogKind::Xid => {
            let gpu_spec = spec.gpu.as_ref().ok_or_else(|| needs("gpu"))?;
            let gpu = *gpu_spec.get_ref() as usize;
            let Some(config) = gpus.get(gpu) else {
                return err(
                    gpu_spec.span(),
                    "gpu",
                    format!(
                        "GPU {gpu} does not exist (the scenario has {} GPUs)",
                        gpus.len()
                    ),
                );
            };
            let code = *spec.code.as_ref().ok_or_else(|| needs("code"))?.get_ref();
            let process = match (&spec.pid, &spec.name) {
                (Some(pid), Some(name)) => Some((*pid.get_ref(), name.get_ref().as_str())),
                (None, None) => None,
                (Some(pid), None) => {
                    return err(pid.span(), "name", "`pid` needs `name` too".into())
                }
                (None, Some(name)) => {
                    return err(name.span(), "pid", "`name` needs `pid` too".into())
                }
            };
            let mig = match (&spec.gpu_instance, &spec.compute_instance) {
                (Some(gi), ci) => Some((*gi.get_ref(), ci.as_ref().map(|c| *c.get_ref()))),
                (None, Some(ci)) => {
                    return err(
                        ci.span(),
                        "gpu_instance",
                        "`compute_instance` needs `gpu_instance`".into(),
                    )
                }
                (None, None) => None,
            };
            let legacy = spec.legacy.as_ref().is_some_and(|l| *l.get_ref());
            if legacy && (process.is_some() || mig.is_some()) {
                return err(
                    spec.kind.span(),
                    "legacy",
                    "the legacy form prints no pid, name or MIG instance".into(),
                );
            }
            Ok(KernelLine {
                when,
                priority: priority(driver_messages::NVRM_PRIORITY),
                message: driver_messages::xid_message(&driver_messages::XidLine {
                    pci_bus_id: &config.pci_bus_id,
                    code,
                    process,
                    mig,
                    legacy,
                    text: message,
                }),
                xid_gpu: Some(gpu),
            })
        }
    }
}
