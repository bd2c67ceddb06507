//! Process names, command lines, users and containers from /proc, cached
//! per pid.
//!
//! NVML gives pids only; a person wants names, owners and containers.
//! Reading `/proc/PID/{comm,cmdline,status,cgroup}` costs syscalls, so what
//! /proc says is cached while the pid stays on a GPU. User names come from
//! the `etc/passwd` next to the /proc root (`/proc` → `/etc/passwd`,
//! `/host/proc` → `/host/etc/passwd`), read once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::gpu::HostProcess;

use super::cgroup;

/// Longest command line kept, in characters.
pub const COMMAND_MAX_CHARS: usize = 256;

#[derive(Debug, Clone)]
struct Entry {
    name: Option<String>,
    host: Option<Arc<HostProcess>>,
}

/// Resolves pids to names and host facts.
#[derive(Debug, Default)]
pub struct ProcessNames {
    /// Where /proc is mounted; `None` disables /proc (the simulator's pids are
    /// not this machine's processes).
    proc_root: Option<PathBuf>,
    cache: HashMap<u32, Entry>,
    users: Option<HashMap<u32, String>>,
}

impl ProcessNames {
    /// A resolver reading `proc_root` (usually `/proc`), or none at all.
    pub fn new(proc_root: Option<PathBuf>) -> Self {
        ProcessNames {
            proc_root,
            cache: HashMap::new(),
            users: None,
        }
    }

    /// The name of `pid`, asking `fallback` (NVML) when /proc has none.
    pub fn name(
        &mut self,
        pid: u32,
        fallback: impl FnOnce(u32) -> Option<String>,
    ) -> Option<String> {
        self.lookup(pid, fallback).0
    }

    /// The name of `pid` (from /proc, else `fallback`) and what /proc tells
    /// about it (absent when /proc does not show the pid).
    pub fn lookup(
        &mut self,
        pid: u32,
        fallback: impl FnOnce(u32) -> Option<String>,
    ) -> (Option<String>, Option<Arc<HostProcess>>) {
        if let Some(cached) = self.cache.get(&pid) {
            return (cached.name.clone(), cached.host.clone());
        }
        let dir = self
            .proc_root
            .as_ref()
            .map(|root| root.join(pid.to_string()));
        let from_proc = dir.as_ref().and_then(|dir| {
            let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
            let comm = comm.trim();
            (!comm.is_empty()).then(|| comm.to_string())
        });
        let host = dir
            .as_ref()
            .filter(|dir| dir.is_dir())
            .map(|dir| Arc::new(self.host_process(dir)));
        let entry = Entry {
            name: from_proc.or_else(|| fallback(pid)),
            host,
        };
        self.cache.insert(pid, entry.clone());
        (entry.name, entry.host)
    }

    fn host_process(&mut self, dir: &Path) -> HostProcess {
        let command = std::fs::read(dir.join("cmdline"))
            .ok()
            .and_then(|raw| command_line(&raw));
        let user = std::fs::read_to_string(dir.join("status"))
            .ok()
            .and_then(|status| real_uid(&status))
            .map(|uid| match self.users().get(&uid) {
                Some(name) => name.clone(),
                None => uid.to_string(),
            });
        let container = std::fs::read_to_string(dir.join("cgroup"))
            .ok()
            .and_then(|text| cgroup::parse(&text));
        HostProcess {
            command,
            user,
            container,
        }
    }

    fn users(&mut self) -> &HashMap<u32, String> {
        let proc_root = self.proc_root.clone();
        self.users.get_or_insert_with(|| {
            let passwd = proc_root
                .as_deref()
                .and_then(Path::parent)
                .map(|root| root.join("etc/passwd"))
                .unwrap_or_else(|| PathBuf::from("/etc/passwd"));
            std::fs::read_to_string(passwd)
                .map(|text| parse_passwd(&text))
                .unwrap_or_default()
        })
    }

    /// Forgets every pid not in `alive`, so a reused pid gets a fresh name.
    pub fn retain(&mut self, alive: impl Fn(u32) -> bool) {
        self.cache.retain(|pid, _| alive(*pid));
    }
}

/// `/proc/PID/cmdline` (arguments separated by NULs) as one line, cut at
/// [`COMMAND_MAX_CHARS`]; `None` for kernel threads and zombies (empty).
pub fn command_line(raw: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(raw);
    let mut args: Vec<String> = Vec::new();
    let mut hide_next = false;
    for arg in text.split('\0').filter(|a| !a.is_empty()) {
        if std::mem::take(&mut hide_next) && !arg.starts_with('-') {
            args.push("***".into());
            continue;
        }
        match arg.split_once('=') {
            Some((key, _)) if looks_secret(key) => args.push(format!("{key}=***")),
            Some(_) => args.push(arg.to_string()),
            None => {
                hide_next = arg.starts_with('-') && looks_secret(arg);
                args.push(arg.to_string());
            }
        }
    }
    let joined = args.join(" ");
    if joined.is_empty() {
        return None;
    }
    Some(if joined.chars().count() > COMMAND_MAX_CHARS {
        joined.chars().take(COMMAND_MAX_CHARS).collect()
    } else {
        joined
    })
}

/// Whether an argument or variable name suggests its value is a secret
/// (`--password`, `--api-token`, `AWS_SECRET_ACCESS_KEY`, ...): command lines
/// end up in labels and JSON, and secrets must not.
fn looks_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["password", "passwd", "secret", "token", "key", "credential"]
        .iter()
        .any(|word| name.contains(word))
}

/// The real uid from the `Uid:` line of `/proc/PID/status`.
pub fn real_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// uid → user name from a passwd file (`name:x:uid:gid:...`); malformed
/// lines are skipped.
pub fn parse_passwd(text: &str) -> HashMap<u32, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            let uid = fields.nth(1)?.parse().ok()?;
            (!name.is_empty()).then(|| (uid, name.to_string()))
        })
        .collect()
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

    #[test]
    fn command_lines_join_arguments_and_are_cut() {
        assert_eq!(
            command_line(b"python3\0train.py\0--epochs\x0010\0").as_deref(),
            Some("python3 train.py --epochs 10")
        );
        assert_eq!(command_line(b""), None);
        assert_eq!(
            command_line(b"serve\0--api-token\0abc123\0--password=hunter2\0AWS_SECRET_ACCESS_KEY=x\0--port\08000\0")
                .as_deref(),
            Some("serve --api-token *** --password=*** AWS_SECRET_ACCESS_KEY=*** --port 8000"),
            "secret-looking values are hidden"
        );
        let long = vec![b'a'; 1000];
        assert_eq!(
            command_line(&long).map(|c| c.chars().count()),
            Some(COMMAND_MAX_CHARS)
        );
    }

    #[test]
    fn uid_and_passwd() {
        let status = "Name:\tpython3\nUmask:\t0022\nUid:\t1001\t1001\t1001\t1001\nGid:\t100\n";
        assert_eq!(real_uid(status), Some(1001));
        assert_eq!(real_uid("Name: x\n"), None);
        let users = parse_passwd("root:x:0:0:root:/root:/bin/bash\n# comment\nbroken\nalice:x:1001:100::/home/alice:/bin/sh\n");
        assert_eq!(users.get(&0).map(String::as_str), Some("root"));
        assert_eq!(users.get(&1001).map(String::as_str), Some("alice"));
        assert_eq!(users.len(), 2);
    }

    #[test]
    fn host_facts_from_a_fixture_tree() {
        let root = tempfile::tempdir().expect("temp dir");
        let proc = root.path().join("proc");
        std::fs::create_dir_all(proc.join("42")).expect("mkdir");
        std::fs::create_dir_all(root.path().join("etc")).expect("mkdir");
        std::fs::write(
            root.path().join("etc/passwd"),
            "alice:x:1001:100::/:/bin/sh\n",
        )
        .expect("write");
        std::fs::write(proc.join("42/comm"), "python3\n").expect("write");
        std::fs::write(proc.join("42/cmdline"), b"python3\0serve.py\0").expect("write");
        std::fs::write(proc.join("42/status"), "Uid:\t1001\t1001\t1001\t1001\n").expect("write");
        std::fs::write(proc.join("42/cgroup"), "0::/user.slice\n").expect("write");
        std::fs::create_dir_all(proc.join("43")).expect("mkdir");
        std::fs::write(proc.join("43/status"), "Uid:\t4242\t0\t0\t0\n").expect("write");
        let mut names = ProcessNames::new(Some(proc));
        let (name, host) = names.lookup(42, |_| None);
        assert_eq!(name.as_deref(), Some("python3"));
        let host = host.expect("host facts");
        assert_eq!(host.command.as_deref(), Some("python3 serve.py"));
        assert_eq!(host.user.as_deref(), Some("alice"));
        assert_eq!(host.container, None);
        let (_, unknown) = names.lookup(43, |_| Some("nvml".into()));
        assert_eq!(unknown.expect("host").user.as_deref(), Some("4242"));
        let (_, absent) = names.lookup(44, |_| None);
        assert_eq!(absent, None, "no /proc entry: no host facts");
    }
}
