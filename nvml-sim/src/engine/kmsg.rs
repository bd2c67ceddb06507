//! The kernel log a scenario writes: its lines scheduled in log order (each
//! GPU's identity lines before its first Xid) as `/dev/kmsg` records
//! `PRI,SEQ,TS_USEC,FLAGS;MESSAGE` (one record per line). The message
//! texts come from [`crate::driver_messages`].

use crate::driver_messages::{driver_pci, NVRM_PRIORITY};
use crate::scenario::kernel_log::{KernelLine, When};
use crate::scenario::GpuConfig;
use std::collections::HashSet;

/// Sequence number of the first record written (a booted kernel has
/// logged many lines before a monitoring agent starts).
pub const FIRST_SEQ: u64 = 1000;

/// A kernel-log record due at scenario time `t`.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Scenario time of the record.
    pub t: f64,
    /// Syslog level.
    pub priority: u8,
    /// The message.
    pub message: String,
}

/// The lines the driver prints once per GPU before its first Xid.
pub fn identity_lines(gpu: &GpuConfig) -> [String; 2] {
    [
        format!(
            "NVRM: GPU at PCI:{}: {}",
            driver_pci(&gpu.pci_bus_id),
            gpu.uuid
        ),
        format!("NVRM: GPU Board Serial Number: {}", gpu.serial),
    ]
}

/// The records of `lines` in log order, with `ago` lines placed before
/// `t_init` (the first nvmlInit) and each GPU's identity lines before its
/// first Xid. Ties keep the scenario's order.
pub fn schedule(lines: &[KernelLine], gpus: &[GpuConfig], t_init: f64) -> Vec<Record> {
    let mut timed: Vec<(f64, &KernelLine)> = lines
        .iter()
        .map(|l| {
            let t = match l.when {
                When::At(at) => at,
                When::Ago(ago) => t_init - ago,
            };
            (t, l)
        })
        .collect();
    timed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut seen = HashSet::new();
    let mut records = Vec::with_capacity(timed.len());
    for (t, line) in timed {
        if let Some(gpu) = line
            .xid_gpu
            .filter(|g| seen.insert(*g))
            .and_then(|g| gpus.get(g))
        {
            for message in identity_lines(gpu) {
                records.push(Record {
                    t,
                    priority: NVRM_PRIORITY,
                    message,
                });
            }
        }
        records.push(Record {
            t,
            priority: line.priority,
            message: line.message.clone(),
        });
    }
    records
}

/// One `/dev/kmsg` record line: `PRI,SEQ,TS_USEC,-;MESSAGE\n` (the kernel
/// facility is 0, so PRI is the level).
pub fn format_record(seq: u64, ts_usec: u64, record: &Record) -> String {
    format!("{},{seq},{ts_usec},-;{}\n", record.priority, record.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_kmsg_lines() {
        let r = Record {
            t: 1.0,
            priority: 4,
            message: "NVRM: hello".into(),
        };
        assert_eq!(
            format_record(1000, 5_000_000, &r),
            "4,1000,5000000,-;NVRM: hello\n"
        );
    }
}
