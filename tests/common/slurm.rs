//! A one-node Slurm on loopback for tests (Debian's `slurm-wlm` and
//! `munge`): a private munged (its own key and socket), slurmctld and
//! slurmd in the foreground with their state in a temporary directory, the
//! node named as `hostname -s` names this host with four GPUs (gres files
//! that are plain files), and extra node entries (`fake1`..`fake4`, never
//! answering) for tests that need other nodes in the cluster. The daemons
//! are killed when the [`SlurmCluster`] is dropped.
//!
//! Reusable: `scontrol`, `sinfo` and `sbatch` run against it with
//! [`SlurmCluster::command`] (SLURM_CONF set).

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A daemon's program; panics with the install hint when it is missing.
fn program(name: &str) -> PathBuf {
    for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        let path = Path::new(dir).join(name);
        if path.is_file() {
            return path;
        }
    }
    panic!("{name} is not installed: apt-get install slurm-wlm munge (the Slurm tests need a real Slurm)");
}

/// What backs the test node's four GPUs (gres.conf `File=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GresFiles {
    /// Empty plain files: slurmd logs that they are no devices and sets
    /// no GPU variables (`SLURM_JOB_GPUS`, `CUDA_VISIBLE_DEVICES`) for
    /// jobs, prologs or epilogs; scheduling works.
    Plain,
    /// Character devices with `/dev/null`'s numbers (1:3), so slurmd
    /// treats them as GPU devices and sets the GPU variables as on a real
    /// GPU node. Needs CAP_MKNOD (root).
    CharDevices,
}

/// Makes `path` a character device with /dev/null's numbers; panics with
/// what is missing when it cannot.
fn null_device(path: &Path) {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a valid NUL-terminated path; mknod only creates a node
    // (1:3 is /dev/null: reading it gives nothing, writing discards).
    let made = unsafe { libc::mknod(c_path.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) };
    assert_eq!(
        made,
        0,
        "cannot make {} a character device ({}): the Slurm GPU-variable tests need root with CAP_MKNOD",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// A running test cluster.
pub struct SlurmCluster {
    /// Its state, configuration and logs.
    pub dir: tempfile::TempDir,
    /// Its slurm.conf (SLURM_CONF for every client command).
    pub conf: PathBuf,
    /// This host's node name in it.
    pub node: String,
    munged: Option<Child>,
    slurmctld: Option<Child>,
    slurmd: Option<Child>,
}

/// This host's short name, as Slurm names the node.
pub fn short_hostname() -> String {
    let out = Command::new("hostname")
        .arg("-s")
        .output()
        .expect("run hostname -s");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl SlurmCluster {
    /// Starts munged, slurmctld and slurmd, and waits until the node is
    /// idle.
    pub fn start() -> SlurmCluster {
        SlurmCluster::start_with(GresFiles::Plain, |_| String::new())
    }

    /// [`SlurmCluster::start`] with the GPUs' gres files as `gres`
    /// says, and more slurm.conf lines (`Prolog=`, `Epilog=`, ...): `extra`
    /// gets the cluster's directory (for scripts and files placed there)
    /// and returns the lines.
    pub fn start_with(gres: GresFiles, extra: impl FnOnce(&Path) -> String) -> SlurmCluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        for sub in ["state", "spool", "gres"] {
            std::fs::create_dir_all(d.join(sub)).expect("dirs");
        }
        for i in 0..4 {
            let path = d.join("gres").join(format!("gpu{i}"));
            match gres {
                GresFiles::Plain => std::fs::write(&path, "").expect("gres file"),
                GresFiles::CharDevices => null_device(&path),
            }
        }
        let key = d.join("munge.key");
        let mut random = [0u8; 1024];
        std::io::Read::read_exact(
            &mut std::fs::File::open("/dev/urandom").expect("/dev/urandom"),
            &mut random,
        )
        .expect("random bytes");
        std::fs::write(&key, random).expect("munge key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).expect("key mode");
        let socket = d.join("munge.sock");
        let munged = Command::new(program("munged"))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--pid-file={}", d.join("munged.pid").display()))
            .arg(format!("--log-file={}", d.join("munged.log").display()))
            .arg(format!("--seed-file={}", d.join("munge.seed").display()))
            .args(["--foreground", "--force"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start munged");
        let node = short_hostname();
        let (ctld_port, d_port) = (super::free_port(), super::free_port());
        let conf = d.join("slurm.conf");
        let extra = extra(d);
        std::fs::write(
            &conf,
            format!(
                "ClusterName=gwtest\n\
                 SlurmctldHost={node}(127.0.0.1)\n\
                 SlurmUser=root\nSlurmdUser=root\n\
                 SlurmctldPort={ctld_port}\nSlurmdPort={d_port}\n\
                 AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={sock}\n\
                 StateSaveLocation={dir}/state\nSlurmdSpoolDir={dir}/spool\n\
                 SlurmctldPidFile={dir}/slurmctld.pid\nSlurmdPidFile={dir}/slurmd.pid\n\
                 SlurmctldLogFile={dir}/slurmctld.log\nSlurmdLogFile={dir}/slurmd.log\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
                 JobAcctGatherType=jobacct_gather/none\nSelectType=select/cons_tres\n\
                 GresTypes=gpu\nFirstJobId=100000\nReturnToService=2\nMpiDefault=none\n\
                 MessageTimeout=5\n\
                 {extra}\n\
                 NodeName={node} NodeAddr=127.0.0.1 CPUs=2 Gres=gpu:4 State=UNKNOWN\n\
                 NodeName=fake[1-4] NodeAddr=127.0.0.2 CPUs=1 State=UNKNOWN\n\
                 PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
                sock = socket.display(),
                dir = d.display(),
            ),
        )
        .expect("slurm.conf");
        std::fs::write(
            d.join("gres.conf"),
            format!(
                "NodeName={node} Name=gpu File={}/gres/gpu[0-3]\n",
                d.display()
            ),
        )
        .expect("gres.conf");
        let mut cluster = SlurmCluster {
            conf,
            node,
            munged: Some(munged),
            slurmctld: None,
            slurmd: None,
            dir,
        };
        cluster.wait_for("munged's socket", || socket.exists());
        cluster.start_controller();
        cluster.slurmd = Some(cluster.daemon("slurmd"));
        let node = cluster.node.clone();
        cluster.wait_for("the node idle", || {
            cluster
                .node_state(&node)
                .is_some_and(|(state, _)| state == "idle")
        });
        cluster
    }

    fn daemon(&self, name: &str) -> Child {
        Command::new(program(name))
            .args(["-D", "-f"])
            .arg(&self.conf)
            .env("SLURM_CONF", &self.conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"))
    }

    /// Starts slurmctld (again), keeping the saved state.
    pub fn start_controller(&mut self) {
        assert!(self.slurmctld.is_none(), "slurmctld runs already");
        self.slurmctld = Some(self.daemon("slurmctld"));
        self.wait_for("slurmctld answering", || self.sinfo().is_some());
    }

    /// Stops slurmctld (slurmd keeps running): client commands fail.
    pub fn stop_controller(&mut self) {
        if let Some(child) = self.slurmctld.take() {
            stop(child);
        }
    }

    /// A client command (`scontrol`, `sinfo`, `sbatch`, ...) against this
    /// cluster.
    pub fn command(&self, name: &str) -> Command {
        let mut c = Command::new(name);
        c.env("SLURM_CONF", &self.conf).stdin(Stdio::null());
        c
    }

    /// Runs `scontrol` with `args`; panics when it fails.
    pub fn scontrol(&self, args: &[&str]) -> Output {
        let out = self
            .command("scontrol")
            .args(args)
            .output()
            .expect("run scontrol");
        assert!(
            out.status.success(),
            "scontrol {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Drains `node` with `reason`, as a person would.
    pub fn drain(&self, node: &str, reason: &str) {
        self.scontrol(&[
            "update",
            &format!("nodename={node}"),
            "state=drain",
            &format!("reason={reason}"),
        ]);
    }

    /// Submits `script` with `sbatch --parsable` and `args` (e.g.
    /// `--gres=gpu:1`); the job id. Panics with Slurm's answer when it
    /// refuses.
    pub fn sbatch(&self, args: &[&str], script: &Path) -> u64 {
        let out = self
            .command("sbatch")
            .arg("--parsable")
            .args(args)
            .arg(script)
            .output()
            .expect("run sbatch");
        let text = String::from_utf8_lossy(&out.stdout);
        let id = text.trim().split(';').next().unwrap_or("").parse::<u64>();
        match (out.status.success(), id) {
            (true, Ok(id)) => id,
            _ => panic!(
                "sbatch {args:?} {}: {text}{}\n{}",
                script.display(),
                String::from_utf8_lossy(&out.stderr),
                self.logs()
            ),
        }
    }

    /// Cancels `job`.
    pub fn scancel(&self, job: u64) {
        let out = self
            .command("scancel")
            .arg(job.to_string())
            .output()
            .expect("run scancel");
        assert!(
            out.status.success(),
            "scancel {job}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `scontrol -d show job`'s fields of `job` as `Key=Value` pairs (the
    /// per-node lines too); `None` when Slurm does not know it.
    pub fn job_fields(&self, job: u64) -> Option<Vec<(String, String)>> {
        let out = self
            .command("scontrol")
            .args(["-d", "show", "job", &job.to_string()])
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        Some(
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter_map(|word| {
                    let (key, value) = word.split_once('=')?;
                    Some((key.to_string(), value.to_string()))
                })
                .collect(),
        )
    }

    /// `job`'s state (`RUNNING`, `COMPLETED`, `CANCELLED`, ...).
    pub fn job_state(&self, job: u64) -> Option<String> {
        self.job_fields(job)?
            .into_iter()
            .find(|(k, _)| k == "JobState")
            .map(|(_, v)| v)
    }

    /// The GPU indexes Slurm gave `job` on this node (`GRES=gpu:2(IDX:0-1)`
    /// of `scontrol -d show job`); empty before it runs.
    pub fn job_gpus(&self, job: u64) -> Vec<u32> {
        let Some(fields) = self.job_fields(job) else {
            return Vec::new();
        };
        let Some((_, gres)) = fields
            .iter()
            .find(|(k, v)| k == "GRES" && v.contains("IDX:"))
        else {
            return Vec::new();
        };
        let list = gres
            .split("IDX:")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap_or("");
        let mut gpus = Vec::new();
        for part in list.split(',') {
            let mut ends = part.splitn(2, '-').map(|n| n.trim().parse::<u32>());
            match (ends.next(), ends.next()) {
                (Some(Ok(first)), None) => gpus.push(first),
                (Some(Ok(first)), Some(Ok(last))) => gpus.extend(first..=last),
                _ => {}
            }
        }
        gpus
    }

    /// `sinfo -N` as (node, state, reason) rows; `None` when it fails.
    pub fn sinfo(&self) -> Option<Vec<(String, String, String)>> {
        let out = self
            .command("sinfo")
            .args(["-h", "-N", "--all", "-o", "%N|%T|%E"])
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        Some(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| {
                    let mut f = l.splitn(3, '|');
                    Some((
                        f.next()?.to_string(),
                        f.next()?.to_string(),
                        f.next()?.to_string(),
                    ))
                })
                .collect(),
        )
    }

    /// `node`'s state and reason (`none` when it has none).
    pub fn node_state(&self, node: &str) -> Option<(String, String)> {
        self.sinfo()?
            .into_iter()
            .find(|(n, _, _)| n == node)
            .map(|(_, s, r)| (s, r))
    }

    /// The daemons' logs and the queue, for failure messages.
    pub fn logs(&self) -> String {
        let queue = self
            .command("squeue")
            .args(["-h", "-o", "%i %T %r %b"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let logs = ["slurmctld.log", "slurmd.log", "munged.log", "prolog.log"]
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                format!(
                    "--- {f}\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        format!("--- squeue (id state reason gres)\n{queue}{logs}")
    }

    fn wait_for(&self, what: &str, mut ready: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if ready() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "the test Slurm did not get ready ({what}) within 60 s:\n{}",
            self.logs()
        );
    }
}

/// Stops `child` with SIGTERM and waits (SIGKILL after 10 s).
fn stop(mut child: Child) {
    // SAFETY: kill(2) with a pid this process started and has not waited for.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        for child in [
            self.slurmd.take(),
            self.slurmctld.take(),
            self.munged.take(),
        ]
        .into_iter()
        .flatten()
        {
            stop(child);
        }
    }
}
