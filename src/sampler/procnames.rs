//! Process names from /proc, cached per pid.
//!
//! NVML gives pids only; a person wants names. Reading `/proc/PID/comm` costs
//! a syscall, so names are cached while the pid stays on a GPU.

use std::collections::HashMap;
use std::path::PathBuf;

/// Resolves pids to short process names.
#[derive(Debug, Default)]
pub struct ProcessNames {
    /// Where /proc is mounted; `None` disables /proc (the simulator's pids are
    /// not this machine's processes).
    proc_root: Option<PathBuf>,
    cache: HashMap<u32, Option<String>>,
}

impl ProcessNames {
    /// A resolver reading `proc_root` (usually `/proc`), or none at all.
    pub fn new(proc_root: Option<PathBuf>) -> Self {
        ProcessNames {
            proc_root,
            cache: HashMap::new(),
        }
    }

    /// The name of `pid`, asking `fallback` (NVML) when /proc has none.
    pub fn name(
        &mut self,
        pid: u32,
        fallback: impl FnOnce(u32) -> Option<String>,
    ) -> Option<String> {
        if let Some(cached) = self.cache.get(&pid) {
            return cached.clone();
        }
        let from_proc = self.proc_root.as_ref().and_then(|root| {
            let comm = std::fs::read_to_string(root.join(pid.to_string()).join("comm")).ok()?;
            let comm = comm.trim();
            (!comm.is_empty()).then(|| comm.to_string())
        });
        let name = from_proc.or_else(|| fallback(pid));
        self.cache.insert(pid, name.clone());
        name
    }

    /// Forgets every pid not in `alive`, so a reused pid gets a fresh name.
    pub fn retain(&mut self, alive: impl Fn(u32) -> bool) {
        self.cache.retain(|pid, _| alive(*pid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_comm_and_falls_back_and_forgets() {
        let root = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(root.path().join("42")).expect("mkdir");
        std::fs::write(root.path().join("42/comm"), "python3\n").expect("write");
        let mut names = ProcessNames::new(Some(root.path().to_path_buf()));
        assert_eq!(names.name(42, |_| None).as_deref(), Some("python3"));
        assert_eq!(
            names.name(7, |_| Some("nvml-name".into())).as_deref(),
            Some("nvml-name")
        );
        std::fs::write(root.path().join("42/comm"), "other\n").expect("write");
        assert_eq!(
            names.name(42, |_| None).as_deref(),
            Some("python3"),
            "cached"
        );
        names.retain(|pid| pid == 7);
        assert_eq!(
            names.name(42, |_| None).as_deref(),
            Some("other"),
            "re-read after retain"
        );
    }
}
