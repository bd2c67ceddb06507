//! Alerting's queue of snapshots: the sampler offers it every snapshot
//! without waiting, the evaluation takes them in order. A snapshot that
//! finds the queue full is dropped for alerting (its rules skip that tick)
//! and counted, as `gpuwatch_alerting_dropped_snapshots_total`.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::gpu::Snapshot;
use crate::sampler::SnapshotSink;

/// Snapshots the queue holds before it drops (about a minute at 1 Hz: the
/// evaluation is far faster than the sampler unless it is stuck).
pub const CAPACITY: usize = 64;

/// The evaluation's end of the queue.
#[derive(Debug)]
pub struct AlertQueue {
    /// The snapshots, in order.
    pub snapshots: mpsc::Receiver<Arc<Snapshot>>,
    /// Snapshots dropped because the queue was full (the sampler counts).
    pub dropped: Arc<AtomicU64>,
}

/// A new queue: the sampler's end (to add to its sinks) and alerting's.
pub fn queue() -> (SnapshotSink, AlertQueue) {
    let (sender, snapshots) = mpsc::channel(CAPACITY);
    let dropped = Arc::new(AtomicU64::new(0));
    let sink = SnapshotSink {
        sender,
        dropped: dropped.clone(),
    };
    (sink, AlertQueue { snapshots, dropped })
}
