//! Memory and cost of the silences the agent keeps (see
//! `gpuwatch::alerting::silence_set`): heap bytes counted by a counting
//! allocator, so the figures are exact and the same on every machine.
//!
//! - The heap a full set takes: worst-case silences (16 regex matchers, each
//!   the largest `\w{k}` the per-regex limit lets compile) added until the
//!   memory limit refuses one, then every matcher run once (search caches).
//!   Checked against the limit: more than twice `MAX_MEMORY` fails.
//! - The heap 1 000 ordinary silences take.
//! - What a refused regex (`\w{500}`, 20 MB with the regex crate's default
//!   limits) leaves behind: nothing (checked).
//! - CPU per added silence (parse the body, check the limits, keep it) with
//!   10 and with 1 000 silences kept: about the same (printed, not checked).
//!
//! Run: `cargo bench --bench silences`.

#[path = "common/mod.rs"]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicIsize, Ordering};

use common::{median, run_size, thread_cpu};
use gpuwatch::alerting::silence::{parse_new, Silence, MAX_MATCHERS};
use gpuwatch::alerting::silence_set::{SilenceSet, MAX_LIVE, MAX_MEMORY};
use gpuwatch::routing::matcher::Matcher;
use gpuwatch::timespec::Timestamp;

/// The system allocator, counting the bytes in use.
struct Counting;

static IN_USE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; the
// counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        IN_USE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's layout is passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: ptr came from System.alloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        IN_USE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: as for realloc's contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn in_use() -> isize {
    IN_USE.load(Ordering::Relaxed)
}

const NOW_MS: i64 = 1_800_000_000_000;

fn silence(id: i64, matchers: Vec<Matcher>) -> Silence {
    Silence {
        id,
        matchers,
        starts_ms: NOW_MS,
        ends_ms: NOW_MS + 3_600_000,
        created_by: "bench@node".into(),
        comment: "c".repeat(1024),
        updated_ms: NOW_MS,
    }
}

fn labels() -> BTreeMap<String, String> {
    (0..MAX_MATCHERS)
        .map(|i| (format!("l{i}"), "gpu".to_string()))
        .chain([("alertname".to_string(), "GpuHot".to_string())])
        .collect()
}

fn main() {
    let (smoke, _) = run_size();
    let labels = labels();

    // The largest `\w{k}` that compiles within the per-regex limit.
    let worst = (1..=64)
        .rev()
        .map(|k| format!(r"\w{{{k}}}"))
        .find(|regex| Matcher::parse(&format!("l0=~{regex}")).is_ok())
        .expect("some \\w{k} compiles");

    // One matcher of each kind, after a search (which builds its cache):
    // the heap it takes against what `Matcher::memory` accounts for it.
    for text in [
        "alertname=GpuHot",
        "alertname=~Gpu(Hot|Lost)",
        "gpu=~[0-7]",
        r"host=~\w+",
    ] {
        let before = in_use();
        let m = Matcher::parse(text).expect("valid");
        std::hint::black_box(m.matches(&labels));
        let heap = in_use() - before;
        println!("{text}: heap {heap} bytes, accounted {} bytes", m.memory());
    }
    let before = in_use();
    for _ in 0..10 {
        let refused = Matcher::parse(r"gpu=~\w{500}");
        assert!(refused.is_err(), "\\w{{500}} is refused");
    }
    let left = in_use() - before;
    println!("10 refused \\w{{500}} regexes leave {left} bytes on the heap");
    assert!(left < 4096, "a refused regex leaves {left} bytes");

    let before = in_use();
    let mut set = SilenceSet::new();
    let mut id = 1;
    loop {
        let matchers = (0..MAX_MATCHERS)
            .map(|i| Matcher::parse(&format!("l{i}=~{worst}")).expect("compiles"))
            .collect();
        let s = silence(id, matchers);
        if set.room_for(&s, NOW_MS).is_err() {
            break;
        }
        set.insert(s);
        id += 1;
    }
    let matched = set
        .all()
        .iter()
        .filter(|s| s.mutes(&labels, NOW_MS + 1))
        .count();
    let heap = in_use() - before;
    println!(
        "full set of worst-case silences ({} of 16 x {worst}): accounted {} KiB, heap {} KiB after matching ({matched} matched); limit {} KiB",
        set.all().len(),
        set.memory() / 1024,
        heap / 1024,
        MAX_MEMORY / 1024
    );
    assert!(
        heap as usize <= 2 * MAX_MEMORY,
        "the heap ({heap} bytes) is over twice the limit"
    );
    drop(set);

    let body = |i: usize| {
        format!(
            r#"{{"matchers": ["alertname=~Gpu(Hot|Lost)", "gpu={i}"], "duration": "2h", "createdBy": "ops", "comment": "fan swap"}}"#
        )
    };
    let now = Timestamp::clamped(NOW_MS);
    let rounds = if smoke { 20 } else { 2000 };
    let mut per_add = Vec::new();
    let before = in_use();
    let mut set = SilenceSet::new();
    for kept in [10, MAX_LIVE - 1] {
        while set.all().len() < kept {
            let new = parse_new(body(set.all().len()).as_bytes(), now).expect("valid");
            let id = set.all().len() as i64 + 1;
            set.insert(silence(id, new.matchers));
        }
        let mut cpu = Vec::with_capacity(rounds);
        for round in 0..rounds {
            let start = thread_cpu();
            let new = parse_new(body(round).as_bytes(), now).expect("valid");
            let s = silence(1_000_000, new.matchers);
            let drop = set.room_for(&s, NOW_MS).expect("room");
            let mut copy = std::hint::black_box(&set).all().to_vec();
            copy.push(std::sync::Arc::new(s));
            std::hint::black_box((drop, copy));
            cpu.push((thread_cpu() - start).as_secs_f64() * 1e6);
        }
        per_add.push((kept, median(&mut cpu)));
    }
    let heap = in_use() - before;
    println!(
        "{} ordinary silences (a regex and an equality each, 1 KiB comment): heap {} KiB, accounted {} KiB",
        set.all().len(),
        heap / 1024,
        set.memory() / 1024
    );
    for (kept, us) in per_add {
        println!(
            "adding one (parse, check limits, publish) with {kept} kept: median {us:.1} µs CPU"
        );
    }
}
