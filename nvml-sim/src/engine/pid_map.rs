//! Scenario pids as real ones: a test that runs real processes (a Slurm
//! job's, say) names them in a file (`GPUWATCH_SIM_PID_MAP`), one
//! `SCENARIO_PID REAL_PID` pair a line, and the simulator reports the real
//! pid wherever the scenario's process appears — so the agent reads that
//! process's `/proc` entry. A scenario pid mapped to 0 is not running yet
//! (or any more): it is left out. The file is read again when it changes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use super::processes::ProcessSample;

/// Most bytes of the map file read.
const MAX_BYTES: u64 = 64 * 1024;

/// The map as last read: the file's modification time and size, and the
/// pairs.
type Cached = Option<(Option<SystemTime>, u64, HashMap<u32, u32>)>;

static CACHE: Mutex<Cached> = Mutex::new(None);

/// The pairs of `text` (`SCENARIO REAL` a line; `#` comments, blank and
/// malformed lines skipped).
pub fn parse(text: &str) -> HashMap<u32, u32> {
    text.lines()
        .filter_map(|line| {
            let line = line.split('#').next()?.trim();
            let mut words = line.split_whitespace();
            let scenario = words.next()?.parse().ok()?;
            let real = words.next()?.parse().ok()?;
            words.next().is_none().then_some((scenario, real))
        })
        .collect()
}

/// The current map, or `None` when no map file is named.
fn current() -> Option<HashMap<u32, u32>> {
    let path = std::env::var_os(crate::ENV_PID_MAP).filter(|p| !p.is_empty())?;
    let metadata = std::fs::metadata(&path).ok();
    let stamp = (
        metadata.as_ref().and_then(|m| m.modified().ok()),
        metadata.as_ref().map_or(0, |m| m.len()),
    );
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((modified, len, map)) = cache.as_ref() {
        if (*modified, *len) == stamp && modified.is_some() {
            return Some(map.clone());
        }
    }
    let map = std::fs::File::open(&path)
        .ok()
        .and_then(|file| {
            use std::io::Read;
            let mut text = String::new();
            file.take(MAX_BYTES).read_to_string(&mut text).ok()?;
            Some(parse(&text))
        })
        .unwrap_or_default();
    *cache = Some((stamp.0, stamp.1, map.clone()));
    Some(map)
}

/// Rewrites the pids of `processes` by the map (those mapped to 0 left
/// out); unchanged without a map.
pub fn apply(processes: &mut Vec<ProcessSample>) {
    let Some(map) = current() else {
        return;
    };
    processes.retain_mut(|p| match map.get(&p.pid) {
        Some(0) => false,
        Some(real) => {
            p.pid = *real;
            true
        }
        None => true,
    });
}

/// The scenario pid of a pid the simulator reported (the inverse of the
/// map).
pub fn scenario_pid(pid: u32) -> u32 {
    current()
        .and_then(|map| {
            map.iter()
                .find(|(_, real)| **real == pid && pid != 0)
                .map(|(scenario, _)| *scenario)
        })
        .unwrap_or(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_a_line_the_rest_skipped() {
        let map = parse("1 4242\n# comment\n2 0\nbad line\n3 x\n4 5 6\n\n 7   8  # trailing\n");
        assert_eq!(map, HashMap::from([(1, 4242), (2, 0), (7, 8)]));
    }
}
