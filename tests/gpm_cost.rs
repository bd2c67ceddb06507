//! What GPM costs the fast tier (issue 12 §5), counted where the calls land:
//! the agent in process on the simulator, with time frozen so that every
//! tick's figures are the same. Timing belongs to `benches/gpm.rs`.

mod common;

use gpuwatch::sampler::procnames::ProcessNames;
use gpuwatch::sampler::reader::{Cadence, NodeReader, Tiers};

/// The simulator's call counters are the process's: the tests take turns.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The simulator's counters, through the library the driver loaded.
struct SimCounters {
    _lib: libloading::Library,
    calls: unsafe extern "C" fn(*const std::ffi::c_char) -> u64,
    asked: unsafe extern "C" fn() -> u64,
}

impl SimCounters {
    fn open(path: &std::path::Path) -> SimCounters {
        // SAFETY: the simulator exports both functions with these
        // signatures; loading the library again returns the loaded instance.
        unsafe {
            let lib = libloading::Library::new(path).expect("load the simulator library");
            let calls = *lib
                .get::<unsafe extern "C" fn(*const std::ffi::c_char) -> u64>(b"nvmlSimCallCount\0")
                .expect("nvmlSimCallCount is exported");
            let asked = *lib
                .get::<unsafe extern "C" fn() -> u64>(b"nvmlSimGpmMetricsAsked\0")
                .expect("nvmlSimGpmMetricsAsked is exported");
            SimCounters {
                _lib: lib,
                calls,
                asked,
            }
        }
    }

    /// Calls of each GPM function and metric ids asked, so far.
    fn gpm(&self) -> [u64; 6] {
        let count = |name: &std::ffi::CStr| {
            // SAFETY: a NUL-terminated name; the function only reads it.
            unsafe { (self.calls)(name.as_ptr()) }
        };
        [
            count(c"nvmlGpmSampleAlloc"),
            count(c"nvmlGpmSampleFree"),
            count(c"nvmlGpmSampleGet"),
            count(c"nvmlGpmMigSampleGet"),
            count(c"nvmlGpmMetricsGet"),
            // SAFETY: a plain counter read.
            unsafe { (self.asked)() },
        ]
    }
}

fn since(before: [u64; 6], after: [u64; 6]) -> [u64; 6] {
    std::array::from_fn(|i| after[i] - before[i])
}

/// Once running, a GPU with GPM costs 2 calls a tick per stream (the GPU
/// and each MIG instance): a refill of a kept sample buffer and one metrics
/// call — no buffer allocated or freed — and each metrics call asks only
/// the ids the driver answered on the first one. The figures stay exact.
#[test]
fn steady_gpm_ticks_reuse_buffers_and_ask_only_answered_metrics() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let (library, driver) = common::frozen_simulator("scenarios/golden-full.toml");
    let counters = SimCounters::open(&library);
    // The simulator's counters are the process's: another test of this
    // file may have run first.
    let at_start = counters.gpm();
    let mut reader = NodeReader::new(&driver, "test".into(), ProcessNames::new(None));
    reader.tick(Tiers::ALL, None);

    // Tick 2: the first metrics calls ask every id (70 of the GPU, 30 of
    // each of the two MIG instances).
    let before = counters.gpm();
    let second = reader.tick(Tiers::default(), None);
    let [_, _, gets, mig_gets, metrics, asked] = since(before, counters.gpm());
    assert_eq!((gets, mig_gets, metrics), (1, 2, 3));
    assert_eq!(asked, 70 + 30 + 30);

    // Tick 3: tests/scenarios/golden-full.toml's GPU 0 answers 12 SM/pipe/
    // DRAM ids, 3 media engines (one of each kind), PCIe 2, NVLink totals 2
    // and 2 links × 2; each instance the 12 and 15 media engines (the
    // default 7 NVDEC, 7 NVJPG, 1 NVOFA).
    let before = counters.gpm();
    let third = reader.tick(Tiers::default(), None);
    let [allocs, frees, gets, mig_gets, metrics, asked] = since(before, counters.gpm());
    assert_eq!((allocs, frees), (0, 0));
    assert_eq!((gets, mig_gets, metrics), (1, 2, 3));
    assert_eq!(asked, (12 + 3 + 2 + 2 + 4) + 2 * (12 + 15));

    // Time is frozen: the same figures, every one of them, as on tick 2.
    assert!(second.gpus[0].gpm.gpu.is_some());
    assert_eq!(second.gpus[0].gpm.instances.len(), 2);
    assert_eq!(third.gpus[0].gpm, second.gpus[0].gpm);
    let allocs_so_far = counters.gpm()[0] - at_start[0];
    drop(reader);
    // The buffers were allocated once per stream (2 each) and are freed
    // with the reader.
    assert_eq!(allocs_so_far, 3 * 2);
    assert_eq!(counters.gpm()[1] - at_start[1], 3 * 2);
}

/// At the sampler's default 1 s tick GPM is sampled every 2 s (issue 23):
/// one sample and one metrics call per stream every second tick, the
/// figures carried on the tick between, and the same figures as when
/// sampled every tick (time is frozen).
#[test]
fn the_sampler_samples_gpm_every_other_tick_at_1_s() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let (library, driver) = common::frozen_simulator("scenarios/golden-full.toml");
    let counters = SimCounters::open(&library);
    let mut every = NodeReader::new(&driver, "test".into(), ProcessNames::new(None));
    every.tick(Tiers::ALL, None);
    let reference = every.tick(Tiers::default(), None);
    drop(every);

    let mut reader = NodeReader::new(&driver, "test".into(), ProcessNames::new(None));
    let cadence = Cadence::for_interval(std::time::Duration::from_secs(1));
    assert_eq!((cadence.gpm_every, cadence.clocks_every), (2, 5));
    reader.set_cadence(cadence);
    reader.tick(Tiers::ALL, None);
    let mut calls = Vec::new();
    let mut snapshots = Vec::new();
    for _ in 0..4 {
        let before = counters.gpm();
        snapshots.push(reader.tick(Tiers::default(), None));
        let [_, _, gets, mig_gets, metrics, _] = since(before, counters.gpm());
        calls.push((gets, mig_gets, metrics));
    }
    // Ticks 1..=4 after the first: GPM on ticks 2 and 4, the GPU and its
    // two MIG instances.
    assert_eq!(calls, [(0, 0, 0), (1, 2, 3), (0, 0, 0), (1, 2, 3)]);
    // Tick 1 carries the first tick's (none yet); ticks 2-4 hold the figures.
    assert!(snapshots[0].gpus[0].gpm.gpu.is_none());
    for snapshot in &snapshots[1..] {
        assert_eq!(snapshot.gpus[0].gpm, reference.gpus[0].gpm);
    }
}
