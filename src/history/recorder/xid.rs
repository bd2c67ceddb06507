//! Xid events from the occurrences the sampler carries: one event per
//! error at its own time, with the driver's pid, process name and text;
//! the kernel log's backlog only when the database does not hold it yet.

use std::time::{Duration, SystemTime};

use crate::gpu::node_health::XidOccurrence;
use crate::gpu::{unix_seconds_f64, Snapshot};

use super::{EventRow, Recorder};

/// A backlog occurrence this close (ms) to a stored Xid event of the same
/// GPU and code is that event.
const SAME_XID_MS: i64 = 2_000;

/// How long an NVML-only Xid occurrence waits for the kernel log's line
/// of the same error (which adds pid, process name and text) before it is
/// written without them: a kernel-log poll and a sampler tick, with room.
const DETAIL_WAIT: Duration = Duration::from_secs(3);

/// Whether an occurrence is written now rather than held for its details.
fn ready(occurrence: &XidOccurrence, now: SystemTime) -> bool {
    occurrence.backlog
        || occurrence.text.is_some()
        || now
            .duration_since(occurrence.at)
            .is_ok_and(|age| age >= DETAIL_WAIT)
}

impl Recorder {
    /// One event per new Xid occurrence, at its own time and with the
    /// driver's details (an occurrence only NVML reported waits up to
    /// [`DETAIL_WAIT`] for them).
    pub(super) fn xid_occurrences(&mut self, snapshot: &Snapshot) {
        let recent = snapshot.collection.health.recent_xid.clone();
        for (id, held) in std::mem::take(&mut self.xid_held) {
            let current = recent
                .iter()
                .find(|o| o.seq == held.seq)
                .cloned()
                .unwrap_or(held);
            if ready(&current, snapshot.taken_at) {
                self.write_xid(id, &current);
            } else {
                self.xid_held.push((id, current));
            }
        }
        let last = self.xid_seq;
        for occurrence in recent.iter().filter(|o| o.seq > last) {
            self.xid_seq = occurrence.seq;
            let Some(gpu) = snapshot.gpus.iter().find(|g| g.index == occurrence.gpu) else {
                continue;
            };
            let id = self.id_for(gpu);
            if occurrence.backlog {
                let ts = ms(occurrence.at);
                let known = self.known_xid.iter().any(|(g, c, t)| {
                    *g == id && *c == occurrence.code && (t - ts).abs() <= SAME_XID_MS
                });
                if known {
                    continue;
                }
                self.known_xid.push((id, occurrence.code, ts));
            } else {
                *self.xid_covered.entry((id, occurrence.code)).or_default() += 1;
            }
            if ready(occurrence, snapshot.taken_at) {
                self.write_xid(id, occurrence);
            } else {
                self.xid_held.push((id, occurrence.clone()));
            }
        }
    }

    /// Writes what is still held (at shutdown).
    pub(super) fn flush_xid(&mut self) {
        for (id, held) in std::mem::take(&mut self.xid_held) {
            self.write_xid(id, &held);
        }
    }

    fn write_xid(&mut self, id: i64, occurrence: &XidOccurrence) {
        self.batch.events.push(EventRow {
            ts: ms(occurrence.at),
            gpu: Some(id),
            kind: "xid",
            code: Some(occurrence.code as i64),
            value: Some(1),
            detail: xid_detail(occurrence),
        });
    }
}

fn ms(at: SystemTime) -> i64 {
    (unix_seconds_f64(at) * 1000.0).round() as i64
}

/// An Xid event's detail: the driver's pid, process name and text, and
/// whether it came from before the agent started.
fn xid_detail(occurrence: &XidOccurrence) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(pid) = occurrence.pid {
        parts.push(format!("pid={pid}"));
    }
    if let Some(name) = &occurrence.process {
        parts.push(format!("name={name}"));
    }
    if let Some(text) = occurrence.text.as_deref().filter(|t| !t.is_empty()) {
        parts.push(text.to_string());
    }
    if occurrence.backlog {
        parts.push("(logged before the agent started)".to_string());
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}
