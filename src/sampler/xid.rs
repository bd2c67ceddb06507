//! Xid critical errors: a dedicated thread waits on an NVML event set and
//! counts each (GPU, Xid code) with the time it was last seen.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

use crate::gpu::nvml::{Driver, XidWait};
use crate::gpu::XidCount;

/// Xid counts per GPU index, shared between the event thread (writer) and
/// the sampler (reader). A plain mutex: both sides hold it for microseconds.
#[derive(Debug, Clone, Default)]
pub struct XidTable {
    inner: Arc<Mutex<HashMap<u32, BTreeMap<u64, XidCount>>>>,
}

impl XidTable {
    /// Records one event.
    pub fn record(&self, gpu: u32, code: u64, at: SystemTime) {
        let mut table = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = table
            .entry(gpu)
            .or_default()
            .entry(code)
            .or_insert(XidCount {
                code,
                count: 0,
                last_seen: at,
            });
        entry.count += 1;
        entry.last_seen = at;
    }

    /// A copy of the counts, per GPU, codes ascending.
    pub fn counts(&self) -> HashMap<u32, Vec<XidCount>> {
        let table = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        table
            .iter()
            .map(|(gpu, codes)| (*gpu, codes.values().cloned().collect()))
            .collect()
    }
}

/// The running event thread; stops when dropped.
pub struct XidWatcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How long one wait blocks: also how soon the thread notices it should stop
/// (within the sampler's 2 s stop grace). An event ends the wait at once, so
/// this does not delay Xid errors; each timeout costs a thread wake-up, so
/// it is no shorter than it needs to be.
const WAIT_MS: u32 = 1000;

impl XidWatcher {
    /// Starts waiting for Xid events on the GPUs in `indices`.
    pub fn start(driver: Arc<Driver>, indices: Vec<u32>, table: XidTable) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("gpuwatch-xid".into())
            .spawn(move || watch(&driver, &indices, &table, &flag))?;
        Ok(XidWatcher {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for XidWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            // The thread wakes at least every WAIT_MS; a hung driver would
            // keep it, so never wait for it longer than a few waits.
            let deadline =
                std::time::Instant::now() + Duration::from_millis(u64::from(WAIT_MS) * 4);
            while !thread.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}

fn watch(driver: &Driver, indices: &[u32], table: &XidTable, stop: &AtomicBool) {
    let listener = match driver.xid_listener(indices) {
        Ok(listener) => listener,
        Err(error) => {
            warn!(error = %error, "Cannot listen for Xid events; Xid errors will not be counted.");
            return;
        }
    };
    info!(gpus = ?listener.registered(), "Listening for Xid events.");
    let mut failures = 0u32;
    while !stop.load(Ordering::Relaxed) {
        match listener.wait(WAIT_MS) {
            XidWait::Event { gpu, code } => {
                warn!(gpu, xid = code, "Xid error reported by the driver.");
                table.record(gpu, code, SystemTime::now());
                failures = 0;
            }
            XidWait::Timeout => failures = 0,
            XidWait::Failed(error) => {
                failures += 1;
                if failures == 1 {
                    warn!(error = %error, "Waiting for Xid events failed; retrying.");
                }
                std::thread::sleep(Duration::from_millis(u64::from(WAIT_MS)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_gpu_and_code() {
        let table = XidTable::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(10);
        let t1 = t0 + Duration::from_secs(5);
        table.record(1, 79, t0);
        table.record(1, 79, t1);
        table.record(1, 13, t0);
        table.record(2, 94, t0);
        let counts = table.counts();
        let gpu1 = &counts[&1];
        assert_eq!(gpu1.len(), 2);
        assert_eq!((gpu1[0].code, gpu1[0].count), (13, 1));
        assert_eq!(
            (gpu1[1].code, gpu1[1].count, gpu1[1].last_seen),
            (79, 2, t1)
        );
        assert_eq!(counts[&2][0].code, 94);
    }
}
