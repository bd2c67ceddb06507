//! Simulated GPU processes: explicit ones and the churning process pool.

use super::signal::Signal;
use crate::rng;
use crate::scenario::schema::{PoolSpec, ProcessKind, ProcessSpec};

/// One process running on a GPU at some time.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    /// Process id.
    pub pid: u32,
    /// Process name.
    pub name: String,
    /// Compute or graphics.
    pub kind: ProcessKind,
    /// Used GPU memory, bytes.
    pub used_bytes: u64,
    /// Explicit SM utilization, %, where the scenario gives one.
    pub sm_percent: Option<f64>,
    /// An MPS client (listed by the MPS call only).
    pub mps_client: bool,
    /// MIG GPU instance id.
    pub gpu_instance: Option<u32>,
}

/// An explicit `[[gpu.processes]]` entry, compiled.
#[derive(Debug)]
pub struct ExplicitProcess {
    spec: ProcessSpec,
    memory: Signal,
    sm: Option<Signal>,
}

impl ExplicitProcess {
    /// Compiles a process entry.
    pub fn new(spec: &ProcessSpec, seed: u64) -> Self {
        ExplicitProcess {
            memory: Signal::new(spec.memory_mib.get_ref(), seed),
            sm: spec
                .sm_percent
                .as_ref()
                .map(|s| Signal::new(s.get_ref(), seed ^ 0x5A)),
            spec: spec.clone(),
        }
    }

    /// The process at `t`, if it is running then.
    pub fn sample(&self, t: f64) -> Option<ProcessSample> {
        let running = t >= self.spec.start.secs()
            && self
                .spec
                .stop
                .as_ref()
                .is_none_or(|s| t < s.get_ref().secs());
        running.then(|| ProcessSample {
            pid: self.spec.pid,
            name: self.spec.name.clone(),
            kind: self.spec.kind,
            used_bytes: mib_to_bytes(self.memory.eval(t)),
            sm_percent: self.sm.as_ref().map(|s| s.eval(t).clamp(0.0, 100.0)),
            mps_client: self.spec.mps_client,
            gpu_instance: self.spec.gpu_instance,
        })
    }

    /// The name if `pid` is this process.
    pub fn name_of(&self, pid: u32) -> Option<&str> {
        (self.spec.pid == pid).then_some(self.spec.name.as_str())
    }
}

/// A `[gpu.process_pool]`: `count` slots; each slot runs one process at a
/// time and replaces it every `lifetime` (slots are staggered so churn is
/// spread out). Generation `g` of slot `s` has pid `pid_base + (g + 1) × count + s`.
#[derive(Debug)]
pub struct Pool {
    spec: PoolSpec,
    pid_base: u32,
    seed: u64,
}

impl Pool {
    /// A pool for the GPU with index `gpu`.
    pub fn new(spec: &PoolSpec, gpu: usize, seed: u64) -> Self {
        let pid_base = spec.pid_base.unwrap_or(100_000 + 10_000 * gpu as u32);
        Pool {
            spec: spec.clone(),
            pid_base,
            seed,
        }
    }

    fn lifetime(&self) -> f64 {
        self.spec.lifetime.get_ref().secs()
    }

    fn offset(&self, slot: u32) -> f64 {
        rng::unit(self.seed, u64::from(slot)) * self.lifetime()
    }

    fn generation(&self, slot: u32, t: f64) -> i64 {
        ((t - self.offset(slot)) / self.lifetime()).floor() as i64
    }

    fn key(&self, slot: u32, generation: i64) -> u64 {
        rng::mix(self.seed, (u64::from(slot) << 32) ^ generation as u64)
    }

    fn name(&self, key: u64) -> String {
        let names = &self.spec.names;
        names
            .get(key as usize % names.len().max(1))
            .cloned()
            .unwrap_or_default()
    }

    fn pid(&self, slot: u32, generation: i64) -> u32 {
        let g = (generation + 1).max(0) as u64;
        (u64::from(self.pid_base) + g * u64::from(self.spec.count) + u64::from(slot))
            .min(u64::from(u32::MAX)) as u32
    }

    /// The processes running at `t`.
    pub fn sample(&self, t: f64) -> impl Iterator<Item = ProcessSample> + '_ {
        (0..self.spec.count).map(move |slot| {
            let generation = self.generation(slot, t);
            let key = self.key(slot, generation);
            let mib =
                self.spec.min_mib + rng::unit(key, 1) * (self.spec.max_mib - self.spec.min_mib);
            ProcessSample {
                pid: self.pid(slot, generation),
                name: self.name(key),
                kind: self.spec.kind,
                used_bytes: mib_to_bytes(mib),
                sm_percent: None,
                mps_client: false,
                gpu_instance: None,
            }
        })
    }

    /// The name of pool process `pid` if it has started by `t`.
    pub fn name_of(&self, pid: u32, t: f64) -> Option<String> {
        let count = self.spec.count;
        let rel = pid.checked_sub(self.pid_base)?;
        let (g, slot) = (i64::from(rel / count) - 1, rel % count);
        (g <= self.generation(slot, t)).then(|| self.name(self.key(slot, g)))
    }
}

/// MiB (possibly fractional, clamped at 0) to bytes.
pub fn mib_to_bytes(mib: f64) -> u64 {
    (mib.max(0.0) * 1024.0 * 1024.0) as u64
}
