//! Turns snapshots into rows: raw samples, finished minute and hour rollups,
//! events (Xid, GPU lost / recovered, process start / stop) and counter
//! offsets. Pure: no I/O, so it is tested with hand-made snapshots; the
//! writer commits what it produces.

use std::collections::HashMap;
use std::sync::Arc;

use crate::gpu::{unix_seconds_f64, GpuSnapshot, GpuStatus, Snapshot};

use super::catalog::{Kind, FIELDS};
use super::rollup::Accumulator;

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;
const MIB: f64 = 1024.0 * 1024.0;

#[derive(Debug, Default)]
struct Process {
    name: Option<String>,
    peak_mib: i64,
}

#[derive(Debug, Default)]
struct Seen {
    up: Option<bool>,
    xid: HashMap<u64, u64>,
    processes: HashMap<u32, Process>,
    processes_at: usize,
    minute: Option<Accumulator>,
    hour: Option<Accumulator>,
}

/// Turns snapshots into batches.
#[derive(Debug)]
pub struct Recorder {
    ids: HashMap<String, i64>,
    next_id: i64,
    counters: HashMap<(i64, &'static str), CounterState>,
    seen: HashMap<i64, Seen>,
    /// The GPU rows as last handed to the database.
    written_gpus: HashMap<i64, GpuRow>,
    batch: Batch,
    started: bool,
    /// The last Xid occurrence turned into an event (see
    /// [`NodeHealth::recent_xid`](crate::gpu::node_health::NodeHealth)).
    xid_seq: u64,
    /// Live Xid occurrences already written as their own event, per (GPU
    /// id, code): the count-based event leaves them out.
    xid_covered: HashMap<(i64, u64), u64>,
    /// Xid events already in the database (GPU id, code, ms): a backlog
    /// occurrence among them is not written again.
    known_xid: Vec<(i64, u64, i64)>,
    /// Occurrences waiting for the kernel log's details (GPU id, occurrence).
    xid_held: Vec<(i64, crate::gpu::node_health::XidOccurrence)>,
    /// Which workloads were written, and when.
    workloads: WorkloadRecorder,
    /// The last snapshot's workloads, written once more at shutdown.
    last_workloads: Arc<crate::gpu::WorkloadTable>,
}

impl Recorder {
    /// A recorder that knows the GPUs (id, uuid) and counter states already
    /// in the database.
    pub fn new(gpus: Vec<(i64, String)>, counters: Vec<((i64, String), CounterState)>) -> Self {
        let next_id = gpus.iter().map(|(id, _)| *id).max().unwrap_or(0) + 1;
        let counters = counters
            .into_iter()
            .filter_map(|((gpu, column), state)| {
                FIELDS
                    .iter()
                    .find(|f| f.column == column)
                    .map(|f| ((gpu, f.column), state))
            })
            .collect();
        Recorder {
            ids: gpus.into_iter().map(|(id, uuid)| (uuid, id)).collect(),
            next_id,
            counters,
            seen: HashMap::new(),
            written_gpus: HashMap::new(),
            batch: Batch::default(),
            started: false,
            xid_seq: 0,
            xid_covered: HashMap::new(),
            known_xid: Vec::new(),
            xid_held: Vec::new(),
            workloads: WorkloadRecorder::default(),
            last_workloads: Arc::default(),
        }
    }

    /// The Xid events the database already holds (GPU id, code, ms), so
    /// that the kernel log's backlog is not written twice.
    pub fn with_known_xid(mut self, known: Vec<(i64, u64, i64)>) -> Self {
        self.known_xid = known;
        self
    }

    /// Records one snapshot.
    pub fn record(&mut self, snapshot: &Snapshot) {
        let ts = (unix_seconds_f64(snapshot.taken_at) * 1000.0).round() as i64;
        if !self.started {
            self.started = true;
            self.batch.events.push(EventRow {
                ts,
                gpu: None,
                kind: "agent_start",
                code: None,
                value: Some(snapshot.gpus.len() as i64),
                detail: snapshot.system.driver_version.clone(),
            });
        }
        self.xid_occurrences(snapshot);
        for gpu in &snapshot.gpus {
            self.record_gpu(ts, gpu);
        }
        self.workloads
            .record(ts, &snapshot.workloads, &mut self.batch.workloads);
        self.last_workloads = snapshot.workloads.clone();
    }

    /// The history id of `gpu`, assigned on first sight.
    fn id_for(&mut self, gpu: &GpuSnapshot) -> i64 {
        let key = gpu_key(gpu);
        match self.ids.get(&key) {
            Some(id) => *id,
            None => {
                let id = self.next_id;
                self.next_id += 1;
                self.ids.insert(key, id);
                id
            }
        }
    }

    fn record_gpu(&mut self, ts: i64, gpu: &GpuSnapshot) {
        let id = self.id_for(gpu);
        let key = gpu_key(gpu);
        // The GPU row is written when it is new or changed, and its
        // last-seen time refreshed once a minute: rewriting it on every
        // commit would cost a page in the WAL each time.
        let row = GpuRow {
            id,
            uuid: key,
            index: gpu.index,
            name: gpu.identity.name.clone(),
            seen_ms: ts,
        };
        let stale = match self.written_gpus.get(&id) {
            Some(last) => {
                last.index != row.index || last.name != row.name || ts - last.seen_ms >= MINUTE_MS
            }
            None => true,
        };
        if stale {
            self.written_gpus.insert(id, row.clone());
            self.batch.gpus.insert(id, row);
        }
        let up = gpu.is_up();
        let values: Vec<Option<i64>> = FIELDS
            .iter()
            .map(|field| {
                let scaled = (field.read)(gpu).map(|v| v * field.scale)?;
                let scaled = match field.kind {
                    Kind::Counter => self.monotonic(id, field.column, scaled),
                    _ => scaled,
                };
                Some(scaled.round() as i64)
            })
            .collect();
        self.roll_up(id, ts, up, &values);
        self.batch.samples.push(SampleRow {
            ts,
            gpu: id,
            up,
            values,
        });
        self.events(id, ts, gpu);
    }

    /// The driver's counter `raw` made monotonic: a drop means the driver
    /// reset it, so what it had counted is carried in the offset.
    fn monotonic(&mut self, gpu: i64, column: &'static str, raw: f64) -> f64 {
        let state = self.counters.entry((gpu, column)).or_insert(CounterState {
            last_raw: raw,
            offset: 0.0,
        });
        let reset = raw + 0.5 < state.last_raw;
        if reset {
            state.offset += state.last_raw;
        }
        state.last_raw = raw;
        // Persisted when the offset changes and, with the minute rollups,
        // once a minute (see `roll_up`): enough to notice a reset across a
        // restart without a WAL page per commit.
        if reset {
            self.batch.counters.insert((gpu, column), *state);
        }
        raw + state.offset
    }

    fn roll_up(&mut self, gpu: i64, ts: i64, up: bool, values: &[Option<i64>]) {
        let seen = self.seen.entry(gpu).or_default();
        let minute_start = ts - ts.rem_euclid(MINUTE_MS);
        if seen
            .minute
            .as_ref()
            .is_some_and(|m| m.start_ms != minute_start)
        {
            if let Some(done) = seen.minute.take() {
                finish_minute(gpu, seen, done, &mut self.batch);
            }
            for (key, state) in self.counters.iter().filter(|((g, _), _)| *g == gpu) {
                self.batch.counters.insert(*key, *state);
            }
        }
        seen.minute
            .get_or_insert_with(|| Accumulator::new(minute_start))
            .add_sample(up, values);
    }

    fn events(&mut self, gpu: i64, ts: i64, snapshot: &GpuSnapshot) {
        let seen = self.seen.entry(gpu).or_default();
        let up = snapshot.is_up();
        match (&snapshot.status, seen.up) {
            (GpuStatus::Lost { reason }, None | Some(true)) => self.batch.events.push(EventRow {
                ts,
                gpu: Some(gpu),
                kind: "gpu_lost",
                code: None,
                value: None,
                detail: Some(reason.clone()),
            }),
            (GpuStatus::Up, Some(false)) => self.batch.events.push(EventRow {
                ts,
                gpu: Some(gpu),
                kind: "gpu_recovered",
                code: None,
                value: None,
                detail: None,
            }),
            _ => {}
        }
        seen.up = Some(up);
        for xid in snapshot.xid_errors.iter() {
            let before = seen.xid.insert(xid.code, xid.count).unwrap_or(0);
            let mut new = xid.count.saturating_sub(before);
            // Occurrences written as their own event are not counted twice.
            if let Some(covered) = self.xid_covered.get_mut(&(gpu, xid.code)) {
                let taken = new.min(*covered);
                (new, *covered) = (new - taken, *covered - taken);
            }
            if new > 0 {
                self.batch.events.push(EventRow {
                    ts,
                    gpu: Some(gpu),
                    kind: "xid",
                    code: Some(xid.code as i64),
                    value: Some(new as i64),
                    detail: None,
                });
            }
        }
        // A lost GPU shows no processes; that is not the processes stopping.
        let list = Arc::as_ptr(&snapshot.processes) as usize;
        if !up || list == seen.processes_at {
            return;
        }
        let first_look = seen.processes_at == 0;
        seen.processes_at = list;
        let mut still = HashMap::with_capacity(snapshot.processes.len());
        for p in snapshot.processes.iter() {
            let mib = p
                .used_memory_bytes
                .map_or(0, |b| (b as f64 / MIB).round() as i64);
            let entry = match seen.processes.remove(&p.pid) {
                Some(mut known) => {
                    known.peak_mib = known.peak_mib.max(mib);
                    known
                }
                None => {
                    self.batch.events.push(EventRow {
                        ts,
                        gpu: Some(gpu),
                        kind: "process_start",
                        code: Some(i64::from(p.pid)),
                        value: Some(mib),
                        detail: Some(start_detail(p, first_look)),
                    });
                    Process {
                        name: p.name.clone(),
                        peak_mib: mib,
                    }
                }
            };
            still.insert(p.pid, entry);
        }
        for (pid, gone) in seen.processes.drain() {
            self.batch.events.push(EventRow {
                ts,
                gpu: Some(gpu),
                kind: "process_stop",
                code: Some(i64::from(pid)),
                value: Some(gone.peak_mib),
                detail: gone.name,
            });
        }
        seen.processes = still;
    }

    /// The rows recorded since the last call.
    pub fn take_batch(&mut self) -> Batch {
        std::mem::take(&mut self.batch)
    }

    /// Like [`Recorder::take_batch`], plus the minutes and hours still open
    /// (at shutdown). Rollup rows merge in the database, so continuing the
    /// same minute after a restart adds to it rather than replacing it.
    pub fn take_final_batch(&mut self) -> Batch {
        self.flush_xid();
        self.workloads
            .flush(&self.last_workloads, &mut self.batch.workloads);
        self.batch
            .counters
            .extend(self.counters.iter().map(|(k, v)| (*k, *v)));
        for (gpu, seen) in &mut self.seen {
            if let Some(minute) = seen.minute.take() {
                finish_minute(*gpu, seen, minute, &mut self.batch);
            }
            if let Some(hour) = seen.hour.take() {
                self.batch.hours.push(row(*gpu, &hour));
            }
        }
        self.take_batch()
    }
}

fn finish_minute(gpu: i64, seen: &mut Seen, minute: Accumulator, batch: &mut Batch) {
    batch.minutes.push(row(gpu, &minute));
    let hour_start = minute.start_ms - minute.start_ms.rem_euclid(HOUR_MS);
    if seen.hour.as_ref().is_some_and(|h| h.start_ms != hour_start) {
        if let Some(done) = seen.hour.take() {
            batch.hours.push(row(gpu, &done));
        }
    }
    seen.hour
        .get_or_insert_with(|| Accumulator::new(hour_start))
        .merge(&minute);
}

fn row(gpu: i64, acc: &Accumulator) -> RollupRow {
    RollupRow {
        ts: acc.start_ms,
        gpu,
        n: acc.n,
        up_n: acc.up_n,
        values: acc.values(),
    }
}

/// What a process_start event says: the name, the Kubernetes pod where
/// known, and whether it was already running when the agent started.
fn start_detail(p: &crate::gpu::GpuProcess, first_look: bool) -> String {
    let mut detail = p.name.clone().unwrap_or_default();
    if let Some(pod) = &p.pod {
        detail.push_str(&format!(" in pod {}/{}", pod.namespace, pod.pod));
        if !pod.container.is_empty() {
            detail.push_str(&format!(" container {}", pod.container));
        }
    }
    if first_look {
        detail.push_str(" (running when gpuwatch started)");
    }
    detail
}

mod batch;
#[cfg(test)]
mod tests;
mod workloads;
mod xid;

pub use batch::{Batch, CounterState, EventRow, GpuRow, RollupRow, SampleRow};

use workloads::WorkloadRecorder;
pub use workloads::WorkloadRow;

/// The history key of a GPU: its UUID, or `index-N` when NVML gave none.
fn gpu_key(gpu: &GpuSnapshot) -> String {
    if gpu.uuid.is_empty() {
        format!("index-{}", gpu.index)
    } else {
        gpu.uuid.clone()
    }
}
