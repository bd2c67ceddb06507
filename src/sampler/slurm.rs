//! Which Slurm job a GPU process belongs to, with no prolog needed.
//!
//! Two sources, both read once per new pid (see [`super::procnames`]):
//!
//! - the cgroup path, which the kernel keeps and no process can change:
//!   `/slurm/uid_<U>/job_<J>/step_<S>/…` (cgroup v1) and
//!   `/system.slice/slurmstepd.scope/job_<J>/step_<S>/…` (v2, also with
//!   `…/user/task_<T>` under the step);
//! - where the cgroups do not show it (`ProctrackType=proctrack/linuxproc`,
//!   `TaskPlugin=task/none`), the `SLURM_*` variables of
//!   `/proc/PID/environ`. A process can set its own environment, so a
//!   job taken from there must name the process's own user
//!   (`SLURM_JOB_UID`): nobody can charge a GPU to another user's job.
//!
//! Pure text parsing, no I/O. The environment holds users' secrets: only
//! the `SLURM_*` keys below are kept, and nothing of it is logged.

use crate::gpu::SlurmJob;

/// Most bytes of `/proc/PID/environ` read (the kernel allows a few MiB;
/// Slurm's variables are a few hundred bytes among the user's).
pub const ENVIRON_READ_MAX: usize = 512 * 1024;

/// Longest attribute kept (user, account, partition, step): Slurm's own
/// names are short; a longer value would make an unbounded label.
pub const VALUE_MAX: usize = 64;

/// The job named by the text of `/proc/PID/cgroup`; `None` outside Slurm's
/// cgroups.
pub fn from_cgroup(text: &str) -> Option<SlurmJob> {
    text.lines().find_map(|line| {
        let path = line.splitn(3, ':').nth(2)?;
        from_cgroup_path(path)
    })
}

/// The job named by one cgroup path: the segment `job_<J>` under a
/// `slurm` (v1) or `slurmstepd.scope` (v2) segment, and the `step_<S>`
/// segment after it.
pub fn from_cgroup_path(path: &str) -> Option<SlurmJob> {
    let mut segments = path.split('/').filter(|s| !s.is_empty());
    segments.find(|s| *s == "slurm" || *s == "slurmstepd.scope" || s.starts_with("slurm_"))?;
    let mut job_id = None;
    let mut step = None;
    for segment in segments {
        if let Some(id) = segment.strip_prefix("job_") {
            job_id = Some(id.parse::<u64>().ok()?);
        } else if let Some(name) = segment.strip_prefix("step_") {
            if job_id.is_some() && step.is_none() {
                step = clean(name);
            }
        }
    }
    Some(SlurmJob {
        job_id: job_id?,
        step,
        user: None,
        account: None,
        partition: None,
    })
}

/// The job named by a process's environment (`KEY=value` entries separated
/// by NUL bytes), if it names a numeric `SLURM_JOB_ID` and, when
/// `process_uid` is known, a `SLURM_JOB_UID` equal to it.
pub fn from_environ(bytes: &[u8], process_uid: Option<u32>) -> Option<SlurmJob> {
    let mut job_id = None;
    let mut job_uid = None;
    let mut job = SlurmJob {
        job_id: 0,
        step: None,
        user: None,
        account: None,
        partition: None,
    };
    for entry in bytes.split(|b| *b == 0) {
        let Some(rest) = entry.strip_prefix(b"SLURM_") else {
            continue;
        };
        let Some(eq) = rest.iter().position(|b| *b == b'=') else {
            continue;
        };
        let (key, value) = (&rest[..eq], &rest[eq + 1..]);
        let Ok(value) = std::str::from_utf8(value) else {
            continue;
        };
        match key {
            b"JOB_ID" => job_id = value.trim().parse::<u64>().ok(),
            b"JOB_UID" => job_uid = value.trim().parse::<u32>().ok(),
            b"STEP_ID" => job.step = clean(value),
            b"JOB_USER" => job.user = clean(value),
            b"JOB_ACCOUNT" => job.account = clean(value),
            b"JOB_PARTITION" => job.partition = clean(value),
            _ => {}
        }
    }
    job.job_id = job_id?;
    if let (Some(process), Some(claimed)) = (process_uid, job_uid) {
        if process != claimed {
            return None;
        }
    }
    if process_uid.is_some() && job_uid.is_none() {
        return None;
    }
    Some(job)
}

/// The job from both sources: the cgroup's job when it names one (the
/// environment adds its attributes only when it names the same job), else
/// the environment's.
pub fn merge(cgroup: Option<SlurmJob>, environ: Option<SlurmJob>) -> Option<SlurmJob> {
    match (cgroup, environ) {
        (Some(mut from_cgroup), Some(from_env)) if from_env.job_id == from_cgroup.job_id => {
            from_cgroup.step = from_cgroup.step.or(from_env.step);
            from_cgroup.user = from_env.user;
            from_cgroup.account = from_env.account;
            from_cgroup.partition = from_env.partition;
            Some(from_cgroup)
        }
        (Some(from_cgroup), _) => Some(from_cgroup),
        (None, from_env) => from_env,
    }
}

/// `value` if it is a short run of printable ASCII without spaces (Slurm's
/// names are); anything else is dropped, not shown.
fn clean(value: &str) -> Option<String> {
    let value = value.trim();
    let ok = !value.is_empty()
        && value.len() <= VALUE_MAX
        && value.bytes().all(|b| b.is_ascii_graphic());
    ok.then(|| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u64, step: Option<&str>) -> SlurmJob {
        SlurmJob {
            job_id: id,
            step: step.map(str::to_string),
            user: None,
            account: None,
            partition: None,
        }
    }

    /// `/proc/PID/cgroup` of a batch step's task on a cgroup v1 node
    /// (task/cgroup, proctrack/cgroup), as Slurm 22.05 lays it out.
    const V1: &str = "12:pids:/slurm/uid_1000/job_4242001/step_batch/task_0\n\
11:memory:/slurm/uid_1000/job_4242001/step_batch/task_0\n\
10:devices:/slurm/uid_1000/job_4242001/step_batch\n\
9:cpuset:/slurm/uid_1000/job_4242001/step_batch\n\
1:name=systemd:/system.slice/slurmd.service\n\
0::/system.slice/slurmd.service\n";

    /// The same on a cgroup v2 node (Slurm ≥ 22.05 with cgroup/v2).
    const V2: &str = "0::/system.slice/slurmstepd.scope/job_4242002/step_0/user/task_1\n";

    #[test]
    fn cgroup_v1_and_v2_layouts() {
        assert_eq!(from_cgroup(V1), Some(job(4242001, Some("batch"))));
        assert_eq!(from_cgroup(V2), Some(job(4242002, Some("0"))));
        let extern_step = "0::/system.slice/slurmstepd.scope/job_77/step_extern/slurm_processes\n";
        assert_eq!(from_cgroup(extern_step), Some(job(77, Some("extern"))));
        let job_level = "0::/system.slice/slurmstepd.scope/job_78\n";
        assert_eq!(from_cgroup(job_level), Some(job(78, None)));
    }

    #[test]
    fn other_cgroups_name_no_job() {
        for text in [
            "0::/user.slice/user-1000.slice/session-3.scope\n",
            "0::/system.slice/slurmd.service\n",
            "0::/system.slice/slurmstepd.scope/system\n",
            "0::/job_12/step_0\n",
            "0::/system.slice/slurmstepd.scope/job_x1/step_0\n",
            "0::/system.slice/slurmstepd.scope/job_99999999999999999999999/step_0\n",
            "",
            "garbage",
        ] {
            assert_eq!(from_cgroup(text), None, "{text:?}");
        }
    }

    fn environ(entries: &[&str]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for e in entries {
            bytes.extend_from_slice(e.as_bytes());
            bytes.push(0);
        }
        bytes
    }

    #[test]
    fn environ_gives_the_job_and_its_attributes() {
        let env = environ(&[
            "PATH=/usr/bin",
            "AWS_SECRET_ACCESS_KEY=hunter2",
            "SLURM_JOB_ID=5550001",
            "SLURM_JOB_UID=1000",
            "SLURM_STEP_ID=0",
            "SLURM_JOB_USER=alice",
            "SLURM_JOB_ACCOUNT=physics",
            "SLURM_JOB_PARTITION=gpu",
            "SLURM_JOB_NAME=secret name with spaces",
        ]);
        let found = from_environ(&env, Some(1000)).expect("a job");
        assert_eq!(
            found,
            SlurmJob {
                job_id: 5550001,
                step: Some("0".into()),
                user: Some("alice".into()),
                account: Some("physics".into()),
                partition: Some("gpu".into()),
            }
        );
        assert!(!format!("{found:?}").contains("hunter2"));
    }

    #[test]
    fn a_job_claimed_for_another_user_is_refused() {
        let env = environ(&["SLURM_JOB_ID=5550001", "SLURM_JOB_UID=1001"]);
        assert_eq!(from_environ(&env, Some(1000)), None);
        let no_uid = environ(&["SLURM_JOB_ID=5550001"]);
        assert_eq!(from_environ(&no_uid, Some(1000)), None);
        assert!(from_environ(&no_uid, None).is_some(), "uid unknown: taken");
    }

    #[test]
    fn bad_values_are_dropped_not_kept() {
        let env = environ(&[
            "SLURM_JOB_ID=12a",
            "SLURM_JOB_UID=0",
            "SLURM_JOB_USER=alice",
        ]);
        assert_eq!(from_environ(&env, Some(0)), None, "id not a number");
        let long = format!("SLURM_JOB_ACCOUNT={}", "a".repeat(VALUE_MAX + 1));
        let env = environ(&[
            "SLURM_JOB_ID=12",
            "SLURM_JOB_UID=0",
            &long,
            "SLURM_JOB_USER=al\u{1b}[2Jice",
            "SLURM_JOB_PARTITION=\u{ff}",
        ]);
        let found = from_environ(&env, Some(0)).expect("a job");
        assert_eq!(
            (found.account, found.user, found.partition),
            (None, None, None)
        );
        let mut invalid = environ(&["SLURM_JOB_ID=13", "SLURM_JOB_UID=0"]);
        invalid.extend_from_slice(b"SLURM_JOB_USER=\xff\xfe\0=\0SLURM_\0");
        assert_eq!(from_environ(&invalid, Some(0)).map(|j| j.job_id), Some(13));
    }

    #[test]
    fn the_cgroup_wins_and_the_environment_adds_attributes_of_the_same_job() {
        let env = |id: u64| SlurmJob {
            job_id: id,
            step: Some("3".into()),
            user: Some("alice".into()),
            account: Some("physics".into()),
            partition: Some("gpu".into()),
        };
        let merged = merge(Some(job(7, Some("batch"))), Some(env(7))).expect("a job");
        assert_eq!(merged.step.as_deref(), Some("batch"));
        assert_eq!(merged.account.as_deref(), Some("physics"));
        assert_eq!(merge(Some(job(7, None)), Some(env(8))), Some(job(7, None)));
        assert_eq!(merge(None, Some(env(8))), Some(env(8)));
        assert_eq!(merge(None, None), None);
    }
}
