//! Writes the scenario's kernel-log records to the file `GPUWATCH_SIM_KMSG`
//! names, each when scenario time reaches it, in the `/dev/kmsg` record
//! format — so an agent's kernel-log reader can be tested on a plain file.
//!
//! At the first nvmlInit of a scenario (and file) the file is truncated and
//! every record already due is written at once, `ago` lines and lines
//! before `GPUWATCH_SIM_START` included; a thread writes the later ones.
//! A re-initialised library continues where it stopped. `TS_USEC` is the
//! host's uptime (`/proc/uptime`) at the first init, moved by the records'
//! scenario time distance at the clock's speed (1 when time is frozen), so
//! past lines carry past timestamps that convert to wall time as real ones.

use super::state::Runtime;
use crate::clock::SimClock;
use crate::engine::kmsg::{self, Record};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

/// Longest the writer thread sleeps before it looks again (so it notices a
/// shutdown soon).
const MAX_SLEEP: Duration = Duration::from_millis(200);

/// The kernel log being written.
struct Writer {
    /// (scenario origin, file): another pair starts a new log.
    key: (String, PathBuf),
    file: File,
    records: Vec<Record>,
    /// Index of the next record to write.
    next: usize,
    /// Host uptime (µs) at the first init.
    boot_us: f64,
    /// Scenario time at the first init.
    t_init: f64,
    /// Scenario seconds per real second.
    speed: f64,
}

static WRITER: Mutex<Option<Writer>> = Mutex::new(None);

fn writer() -> MutexGuard<'static, Option<Writer>> {
    WRITER.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts (or resumes) the kernel log of a newly loaded runtime.
pub(crate) fn start(runtime: &Arc<Runtime>) {
    let Some(path) = std::env::var_os(crate::ENV_KMSG).filter(|p| !p.is_empty()) else {
        *writer() = None; // no log for this scenario: forget an earlier one
        return;
    };
    let path = PathBuf::from(path);
    let key = (runtime.origin.clone(), path.clone());
    {
        let mut guard = writer();
        if guard.as_ref().map(|w| &w.key) != Some(&key) {
            match open(runtime, key) {
                Ok(w) => *guard = Some(w),
                Err(e) => {
                    report(&path, &e);
                    *guard = None;
                    return;
                }
            }
        }
    }
    write_due(runtime.clock.now());
    let weak = Arc::downgrade(runtime);
    let spawned = std::thread::Builder::new()
        .name("nvml-sim-kmsg".into())
        .spawn(move || follow(weak));
    if let Err(e) = spawned {
        report(&path, &e);
    }
}

/// Truncates the file and lays out the scenario's records.
fn open(runtime: &Runtime, key: (String, PathBuf)) -> std::io::Result<Writer> {
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&key.1)?;
    let t_init = runtime.clock.now();
    let speed = match runtime.clock {
        SimClock::Frozen(_) => 1.0,
        SimClock::Running { speed, .. } => speed,
    };
    Ok(Writer {
        key,
        file,
        records: runtime.engine.kernel_log(t_init),
        next: 0,
        boot_us: (host_uptime_s().unwrap_or(t_init.max(0.0)) * 1e6).round(),
        t_init,
        speed,
    })
}

/// Writes every record due at scenario time `now`.
pub(crate) fn write_due(now: f64) {
    let mut guard = writer();
    let Some(w) = guard.as_mut() else {
        return;
    };
    let mut text = String::new();
    while let Some(record) = w.records.get(w.next).filter(|r| r.t <= now) {
        let ts = (w.boot_us + (record.t - w.t_init) / w.speed * 1e6).max(0.0) as u64;
        text.push_str(&kmsg::format_record(
            kmsg::FIRST_SEQ + w.next as u64,
            ts,
            record,
        ));
        w.next += 1;
    }
    if !text.is_empty() {
        if let Err(e) = w
            .file
            .write_all(text.as_bytes())
            .and_then(|()| w.file.flush())
        {
            let path = w.key.1.clone();
            drop(guard);
            report(&path, &e);
        }
    }
}

/// Scenario time of the next record not written yet.
fn next_due() -> Option<f64> {
    writer()
        .as_ref()
        .and_then(|w| w.records.get(w.next))
        .map(|r| r.t)
}

/// Writes records as they fall due, while the runtime lives.
fn follow(runtime: Weak<Runtime>) {
    loop {
        let Some(rt) = runtime.upgrade() else {
            return;
        };
        let now = rt.clock.now();
        write_due(now);
        let Some(next) = next_due() else {
            return;
        };
        let Some(wait) = rt.clock.real_delay(next - now) else {
            return; // frozen time: nothing else ever falls due
        };
        drop(rt);
        std::thread::sleep(wait.min(MAX_SLEEP));
    }
}

/// Host uptime in seconds, from `/proc/uptime`.
fn host_uptime_s() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/uptime").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Prints a kernel-log write problem to stderr, once per distinct message.
fn report(path: &Path, error: &std::io::Error) {
    static LAST: Mutex<Option<String>> = Mutex::new(None);
    let message = format!(
        "nvml-sim: cannot write the kernel log {} ({}): {error}",
        path.display(),
        crate::ENV_KMSG
    );
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if last.as_deref() != Some(message.as_str()) {
        eprintln!("{message}");
        *last = Some(message);
    }
}
