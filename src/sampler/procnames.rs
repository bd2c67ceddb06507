//! Process names, users, containers and (when asked for) command lines
//! from /proc, cached per pid.
//!
//! NVML gives pids only; a person wants names, owners and containers.
//! Reading `/proc/PID/{comm,cmdline,status,cgroup}` costs syscalls, so what
//! /proc says is cached while the pid stays on a GPU. User names come from
//! the `etc/passwd` next to the /proc root (`/proc` → `/etc/passwd`,
//! `/host/proc` → `/host/etc/passwd`), read once.
//!
//! What a process writes into /proc is not trusted: every file is read up
//! to a bound, bytes that are not UTF-8 are replaced (a name is bytes to the
//! kernel, and `status` repeats it), and control characters become `?`.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::gpu::{HostProcess, SlurmJob};

use super::cgroup;
use super::cmdline::{self, printable};
use super::slurm;

/// Most bytes read of `/proc/PID/comm` (the kernel keeps 16, 64 for kernel
/// threads).
const COMM_READ_MAX: usize = 256;
/// Most bytes read of `/proc/PID/status` (the `Uid:` line is in its first
/// dozen lines; the whole file is under 2 KiB).
const STATUS_READ_MAX: usize = 16 * 1024;
/// Most bytes read of `/proc/PID/cgroup` (one line per hierarchy).
const CGROUP_READ_MAX: usize = 64 * 1024;
/// Most bytes read of the passwd file.
const PASSWD_READ_MAX: usize = 64 * 1024 * 1024;

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
    /// Whether command lines are read (`sampler.process_command_line`).
    command_lines: bool,
    cache: HashMap<u32, Entry>,
    users: Option<HashMap<u32, String>>,
}

impl ProcessNames {
    /// A resolver reading `proc_root` (usually `/proc`), or none at all;
    /// command lines are not read (see [`ProcessNames::with_command_lines`]).
    pub fn new(proc_root: Option<PathBuf>) -> Self {
        ProcessNames {
            proc_root,
            command_lines: false,
            cache: HashMap::new(),
            users: None,
        }
    }

    /// Also reads command lines, masked (see [`super::cmdline`]), when `on`.
    pub fn with_command_lines(mut self, on: bool) -> Self {
        self.command_lines = on;
        self
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
            let comm = read_text(&dir.join("comm"), COMM_READ_MAX)?;
            let comm = comm.trim();
            (!comm.is_empty()).then(|| printable(comm).into_owned())
        });
        let host = dir
            .as_ref()
            .filter(|dir| dir.is_dir())
            .map(|dir| Arc::new(self.host_process(dir)));
        let name = from_proc.or_else(|| fallback(pid).map(|n| printable(&n).into_owned()));
        let entry = Entry { name, host };
        self.cache.insert(pid, entry.clone());
        (entry.name, entry.host)
    }

    fn host_process(&mut self, dir: &Path) -> HostProcess {
        let command = self
            .command_lines
            .then(|| read_capped(&dir.join("cmdline"), cmdline::CMDLINE_READ_MAX + 1))
            .flatten()
            .and_then(|raw| cmdline::command_line(&raw));
        // `status` repeats the name, which need not be UTF-8: read it lossily,
        // or a process named in Latin-1 would have no user.
        let uid = read_text(&dir.join("status"), STATUS_READ_MAX).and_then(|s| real_uid(&s));
        let user = uid.map(|uid| match self.users().get(&uid) {
            Some(name) => name.clone(),
            None => uid.to_string(),
        });
        let cgroup_text = read_text(&dir.join("cgroup"), CGROUP_READ_MAX);
        let container = cgroup_text.as_deref().and_then(cgroup::parse);
        let slurm = slurm_job(dir, cgroup_text.as_deref(), uid);
        HostProcess {
            command,
            user,
            container,
            slurm,
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
            read_text(&passwd, PASSWD_READ_MAX)
                .map(|text| parse_passwd(&text))
                .unwrap_or_default()
        })
    }

    /// Forgets every pid not in `alive`, so a reused pid gets a fresh name.
    pub fn retain(&mut self, alive: impl Fn(u32) -> bool) {
        self.cache.retain(|pid, _| alive(*pid));
    }
}

/// The Slurm job of the process in `dir`: its cgroup's, with the
/// attributes of its environment (up to [`slurm::ENVIRON_READ_MAX`] bytes,
/// read once per pid like the other files; only `SLURM_*` keys are kept).
fn slurm_job(dir: &Path, cgroup_text: Option<&str>, uid: Option<u32>) -> Option<SlurmJob> {
    let from_cgroup = cgroup_text.and_then(slurm::from_cgroup);
    let from_environ = read_capped(&dir.join("environ"), slurm::ENVIRON_READ_MAX)
        .and_then(|bytes| slurm::from_environ(&bytes, uid));
    slurm::merge(from_cgroup, from_environ)
}

/// Up to `max` bytes of `path`; `None` when it cannot be read (the process
/// exited, or /proc hides it).
fn read_capped(path: &Path, max: usize) -> Option<Vec<u8>> {
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(max as u64).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Up to `max` bytes of `path` as text, bytes that are not UTF-8 replaced.
fn read_text(path: &Path, max: usize) -> Option<String> {
    read_capped(path, max).map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
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
        let mut names = ProcessNames::new(Some(proc.clone())).with_command_lines(true);
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
        // Off by default: the name, user and container, no command line.
        let (name, host) = ProcessNames::new(Some(proc)).lookup(42, |_| None);
        assert_eq!(name.as_deref(), Some("python3"));
        let host = host.expect("host facts");
        assert_eq!(host.command, None, "command lines are off by default");
        assert_eq!(host.user.as_deref(), Some("alice"));
    }

    /// A Slurm job's process: by its cgroup (attributes from its environment)
    /// on one pid, by its environment alone on another (proctrack/linuxproc),
    /// and a process claiming another user's job gets none.
    #[test]
    fn slurm_jobs_from_cgroup_and_environment() {
        let root = tempfile::tempdir().expect("temp dir");
        let proc = root.path().join("proc");
        let environ = |job: u32, uid: u32| {
            format!("HOME=/h\0SLURM_JOB_ID={job}\0SLURM_JOB_UID={uid}\0SLURM_JOB_ACCOUNT=physics\0")
        };
        let write = |pid: u32, cgroup: &str, env: &str| {
            let dir = proc.join(pid.to_string());
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::write(dir.join("status"), "Uid:\t1001\t1001\t1001\t1001\n").expect("write");
            std::fs::write(dir.join("cgroup"), cgroup).expect("write");
            std::fs::write(dir.join("environ"), env).expect("write");
        };
        write(
            50,
            "0::/system.slice/slurmstepd.scope/job_9100001/step_0/user/task_0\n",
            &environ(9100001, 1001),
        );
        write(51, "0::/user.slice\n", &environ(9100002, 1001));
        write(52, "0::/user.slice\n", &environ(9100003, 0));
        let mut names = ProcessNames::new(Some(proc));
        let job = |names: &mut ProcessNames, pid| {
            let (_, host) = names.lookup(pid, |_| None);
            host.expect("host facts").slurm.clone()
        };
        let by_cgroup = job(&mut names, 50).expect("a job");
        assert_eq!(
            (by_cgroup.job_id, by_cgroup.step.as_deref()),
            (9100001, Some("0"))
        );
        assert_eq!(by_cgroup.account.as_deref(), Some("physics"));
        assert_eq!(job(&mut names, 51).map(|j| j.job_id), Some(9100002));
        assert_eq!(job(&mut names, 52), None, "another user's job");
    }

    /// A name is bytes to the kernel, and `status` repeats it: a Latin-1
    /// name (or a terminal escape) must not cost the process its user.
    #[test]
    fn a_name_that_is_not_utf8_keeps_its_user() {
        let root = tempfile::tempdir().expect("temp dir");
        let proc = root.path().join("proc");
        std::fs::create_dir_all(proc.join("42")).expect("mkdir");
        std::fs::create_dir_all(root.path().join("etc")).expect("mkdir");
        // A GECOS field in Latin-1 must not cost every user its name either.
        std::fs::write(
            root.path().join("etc/passwd"),
            b"alice:x:1001:100:Ren\xe9:/:/bin/sh\n".as_slice(),
        )
        .expect("write");
        std::fs::write(proc.join("42/comm"), b"caf\xe9\x1b[2J\n".as_slice()).expect("write");
        std::fs::write(
            proc.join("42/status"),
            b"Name:\tcaf\xe9\x1b[2J\nUmask:\t0022\nUid:\t1001\t1001\t1001\t1001\n".as_slice(),
        )
        .expect("write");
        std::fs::write(proc.join("42/cmdline"), b"caf\xe9\0--x\0".as_slice()).expect("write");
        let mut names = ProcessNames::new(Some(proc)).with_command_lines(true);
        let (name, host) = names.lookup(42, |_| None);
        assert_eq!(name.as_deref(), Some("caf\u{fffd}?[2J"));
        let host = host.expect("host facts");
        assert_eq!(host.user.as_deref(), Some("alice"));
        assert_eq!(host.command.as_deref(), Some("caf\u{fffd} --x"));
        // NVML's name is cleaned the same way.
        let (name, _) = names.lookup(7, |_| Some("x\u{1b}]0;pwned\u{7}".into()));
        assert_eq!(name.as_deref(), Some("x?]0;pwned?"));
    }
}
