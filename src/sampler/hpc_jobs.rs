//! dcgm-exporter's HPC job mapping directory (`--hpc-job-mapping-dir`), for
//! sites whose Slurm prolog and epilog already write it: one file per GPU,
//! named by its index (`3`) or, for a MIG instance, index and GPU instance
//! (`3.1`), holding the ids of the jobs on it, one a line.
//!
//! Read again only when a file changed (its modification time or size), and
//! bounded: at most [`MAX_FILES`] files, [`FILE_MAX_BYTES`] each, and
//! [`MAX_JOBS_PER_FILE`] ids of at most [`JOB_ID_MAX`] characters. A file
//! that breaks a bound, or a name that is not a GPU, is skipped and named
//! in [`HpcJobs::skipped`], never read whole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use std::sync::Arc;

use crate::files::{read_bounded_string, FileError};
use crate::gpu::{GpuSnapshot, MappedJob};

/// Most files looked at in the directory (a node has at most a few dozen
/// GPUs and MIG instances).
pub const MAX_FILES: usize = 1024;
/// Most bytes of one file.
pub const FILE_MAX_BYTES: u64 = 4096;
/// Most job ids kept from one file (GPUs shared by more jobs than this are
/// not a Slurm layout).
pub const MAX_JOBS_PER_FILE: usize = 16;
/// Longest job id kept (`123456`, an array task `123456_7`, a het job
/// `123456+1`).
pub const JOB_ID_MAX: usize = 64;

/// A GPU, or one MIG instance of it, as the directory names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MappedDevice {
    /// NVML index of the GPU.
    pub gpu: u32,
    /// The GPU instance, for a MIG instance's file.
    pub gpu_instance_id: Option<u32>,
}

impl MappedDevice {
    /// The device a file name names: `3` or `3.1`.
    pub fn parse(name: &str) -> Option<MappedDevice> {
        let (gpu, instance) = match name.split_once('.') {
            Some((gpu, instance)) => (gpu, Some(instance)),
            None => (name, None),
        };
        let number = |text: &str| {
            (!text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit()))
                .then(|| text.parse::<u32>().ok())
                .flatten()
        };
        Some(MappedDevice {
            gpu: number(gpu)?,
            gpu_instance_id: match instance {
                Some(text) => Some(number(text)?),
                None => None,
            },
        })
    }
}

/// The jobs the directory names, by device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HpcJobs {
    /// Job ids per GPU or MIG instance, in file order.
    pub jobs: BTreeMap<MappedDevice, Vec<String>>,
    /// Files skipped (not a GPU's name, too large, unreadable), with why.
    pub skipped: Vec<(String, String)>,
    /// Whether the directory held more than [`MAX_FILES`] entries.
    pub truncated: bool,
}

impl HpcJobs {
    /// The jobs on `gpu` (its own file), and on its MIG instance
    /// `gpu_instance_id` when given (that instance's file).
    pub fn for_device(&self, gpu: u32, gpu_instance_id: Option<u32>) -> &[String] {
        self.jobs
            .get(&MappedDevice {
                gpu,
                gpu_instance_id,
            })
            .map_or(&[], Vec::as_slice)
    }
}

/// Sets `gpu.hpc_jobs` from `jobs`, and the mapped job of each of its
/// processes that shows no Slurm job of its own, where its device (the GPU,
/// or its MIG instance) is named with exactly one job.
pub fn attribute(gpu: &mut GpuSnapshot, jobs: &HpcJobs) {
    let named: Vec<MappedJob> = jobs
        .jobs
        .range(
            MappedDevice {
                gpu: gpu.index,
                gpu_instance_id: None,
            }..=MappedDevice {
                gpu: gpu.index,
                gpu_instance_id: Some(u32::MAX),
            },
        )
        .flat_map(|(device, ids)| {
            ids.iter().map(|job| MappedJob {
                gpu_instance_id: device.gpu_instance_id,
                job: job.clone(),
            })
        })
        .collect();
    let mapped_before = gpu.processes.iter().any(|p| p.mapped_job.is_some());
    if named.is_empty() && gpu.hpc_jobs.is_empty() && !mapped_before {
        return; // nothing named, nothing to undo: no copy of the list
    }
    gpu.hpc_jobs = Arc::new(named);
    let index = gpu.index;
    for process in Arc::make_mut(&mut gpu.processes) {
        let own = process.host.as_ref().is_some_and(|h| h.slurm.is_some());
        let on_device = jobs.for_device(index, process.gpu_instance_id);
        process.mapped_job = match on_device {
            [only] if !own => Some(only.clone()),
            _ => None,
        };
    }
}

/// Why the directory cannot be listed.
#[derive(Debug, thiserror::Error)]
#[error("cannot list the HPC job mapping directory {path}: {source}. Check [workloads] hpc_job_mapping_dir (the directory your Slurm prolog writes), or remove it")]
pub struct ListError {
    /// The directory.
    pub path: PathBuf,
    /// What failed.
    pub source: std::io::Error,
}

#[derive(Debug, Clone)]
struct Seen {
    modified: Option<SystemTime>,
    len: u64,
    outcome: Result<Vec<String>, String>,
}

/// Follows one mapping directory, re-reading only files that changed.
#[derive(Debug)]
pub struct HpcJobMap {
    dir: PathBuf,
    seen: BTreeMap<String, Seen>,
}

impl HpcJobMap {
    /// Follows `dir`; nothing is read until [`HpcJobMap::refresh`].
    pub fn new(dir: PathBuf) -> Self {
        HpcJobMap {
            dir,
            seen: BTreeMap::new(),
        }
    }

    /// What the directory says now. Files whose modification time and
    /// size are unchanged are not read again; removed files are forgotten.
    pub fn refresh(&mut self) -> Result<HpcJobs, ListError> {
        let list_error = |source| ListError {
            path: self.dir.clone(),
            source,
        };
        let entries = std::fs::read_dir(&self.dir).map_err(list_error)?;
        let mut out = HpcJobs::default();
        let mut present = BTreeMap::new();
        for (count, entry) in entries.enumerate() {
            if count >= MAX_FILES {
                out.truncated = true;
                break;
            }
            let Ok(entry) = entry else { continue };
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue; // a prolog's temporary file, written then renamed
            }
            let Some(device) = MappedDevice::parse(&name) else {
                out.skipped
                    .push((name, "not a GPU index (N or N.GI)".into()));
                continue;
            };
            let metadata = std::fs::metadata(entry.path()).ok();
            let modified = metadata.as_ref().and_then(|m| m.modified().ok());
            let len = metadata.as_ref().map_or(0, |m| m.len());
            let seen = match self.seen.remove(&name) {
                Some(seen)
                    if seen.modified == modified && seen.len == len && modified.is_some() =>
                {
                    seen
                }
                _ => Seen {
                    modified,
                    len,
                    outcome: read_jobs(&entry.path()),
                },
            };
            match &seen.outcome {
                Ok(jobs) if !jobs.is_empty() => {
                    out.jobs.insert(device, jobs.clone());
                }
                Ok(_) => {}
                Err(why) => out.skipped.push((name.clone(), why.clone())),
            }
            present.insert(name, seen);
        }
        self.seen = present;
        Ok(out)
    }
}

/// The job ids of one file, or why it was skipped.
fn read_jobs(path: &Path) -> Result<Vec<String>, String> {
    let text = read_bounded_string(path, FILE_MAX_BYTES).map_err(|e: FileError| e.to_string())?;
    Ok(parse_jobs(&text))
}

/// Job ids, one a line (blank lines and `#` comments skipped); ids that are
/// not a short run of `[A-Za-z0-9_.+-]` are dropped; at most
/// [`MAX_JOBS_PER_FILE`], duplicates once.
pub fn parse_jobs(text: &str) -> Vec<String> {
    let mut jobs: Vec<String> = Vec::new();
    for line in text.lines() {
        let id = line.trim();
        let ok = !id.is_empty()
            && id.len() <= JOB_ID_MAX
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'+' | b'-'));
        if ok && !jobs.iter().any(|j| j == id) {
            jobs.push(id.to_string());
            if jobs.len() == MAX_JOBS_PER_FILE {
                break;
            }
        }
    }
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(gpu: u32, gpu_instance_id: Option<u32>) -> MappedDevice {
        MappedDevice {
            gpu,
            gpu_instance_id,
        }
    }

    #[test]
    fn file_names_are_gpus_or_mig_instances() {
        assert_eq!(MappedDevice::parse("3"), Some(device(3, None)));
        assert_eq!(MappedDevice::parse("3.1"), Some(device(3, Some(1))));
        for bad in [
            "", "x", "3.", ".1", "3.1.2", "-1", "999999", "3 ", "GPU-abc",
        ] {
            assert_eq!(MappedDevice::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn job_ids_one_a_line_bounded() {
        assert_eq!(
            parse_jobs("4242001\n\n# comment\n4242002_3\n4242001\nbad id\n\u{1b}[2J\n"),
            ["4242001", "4242002_3"]
        );
        let many: String = (0..100).map(|i| format!("{i}\n")).collect();
        assert_eq!(parse_jobs(&many).len(), MAX_JOBS_PER_FILE);
        assert!(parse_jobs(&"9".repeat(JOB_ID_MAX + 1)).is_empty());
    }

    #[test]
    fn a_directory_written_by_a_prolog_read_again_only_when_it_changes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path();
        std::fs::write(path.join("0"), "4242001\n").expect("write");
        std::fs::write(path.join("1.2"), "4242002\n4242003\n").expect("write");
        std::fs::write(path.join("notes"), "x").expect("write");
        std::fs::write(path.join(".0.tmp"), "4242009\n").expect("write");
        std::fs::write(path.join("2"), "1\n".repeat(FILE_MAX_BYTES as usize)).expect("write");
        let mut map = HpcJobMap::new(path.to_path_buf());
        let jobs = map.refresh().expect("listed");
        assert_eq!(jobs.for_device(0, None), ["4242001"]);
        assert_eq!(jobs.for_device(1, Some(2)), ["4242002", "4242003"]);
        assert!(jobs.for_device(1, None).is_empty());
        let mut skipped: Vec<&str> = jobs.skipped.iter().map(|(n, _)| n.as_str()).collect();
        skipped.sort_unstable();
        assert_eq!(skipped, ["2", "notes"], "{:?}", jobs.skipped);
        // The epilog removes a file, the prolog of the next job writes one.
        std::fs::remove_file(path.join("0")).expect("remove");
        std::fs::write(path.join("1.2"), "4242004\n").expect("write");
        let jobs = map.refresh().expect("listed");
        assert!(jobs.for_device(0, None).is_empty());
        assert_eq!(jobs.for_device(1, Some(2)), ["4242004"]);
    }

    #[test]
    fn a_fifo_or_a_device_is_skipped_without_blocking() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("0");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a node.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("1")).expect("symlink");
        let jobs = HpcJobMap::new(dir.path().to_path_buf())
            .refresh()
            .expect("listed");
        assert!(jobs.jobs.is_empty());
        assert_eq!(jobs.skipped.len(), 2, "{:?}", jobs.skipped);
    }

    /// A process with no Slurm job of its own takes the one job its device
    /// is mapped to; one with its own job keeps it; a device shared by two
    /// mapped jobs names none; the GPU lists what its files say.
    #[test]
    fn processes_take_the_single_job_of_their_device() {
        use crate::gpu::{GpuProcess, HostProcess, SlurmJob};
        let mut jobs = HpcJobs::default();
        jobs.jobs.insert(device(0, None), vec!["4242001".into()]);
        jobs.jobs
            .insert(device(0, Some(1)), vec!["4242002".into(), "4242003".into()]);
        jobs.jobs.insert(device(1, None), vec!["4242009".into()]);
        let own = SlurmJob {
            job_id: 77,
            step: None,
            user: None,
            account: None,
            partition: None,
        };
        let mut gpu = crate::gpu::testing::gpu(0);
        gpu.processes = Arc::new(vec![
            GpuProcess {
                pid: 1,
                ..GpuProcess::default()
            },
            GpuProcess {
                pid: 2,
                host: Some(Arc::new(HostProcess {
                    slurm: Some(own),
                    ..HostProcess::default()
                })),
                ..GpuProcess::default()
            },
            GpuProcess {
                pid: 3,
                gpu_instance_id: Some(1),
                ..GpuProcess::default()
            },
        ]);
        attribute(&mut gpu, &jobs);
        let mapped: Vec<Option<&str>> = gpu
            .processes
            .iter()
            .map(|p| p.mapped_job.as_deref())
            .collect();
        assert_eq!(mapped, [Some("4242001"), None, None]);
        let named: Vec<(Option<u32>, &str)> = gpu
            .hpc_jobs
            .iter()
            .map(|j| (j.gpu_instance_id, j.job.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                (None, "4242001"),
                (Some(1), "4242002"),
                (Some(1), "4242003")
            ]
        );
        // The epilog removed the files: the mapping is undone.
        attribute(&mut gpu, &HpcJobs::default());
        assert!(gpu.hpc_jobs.is_empty() && gpu.processes.iter().all(|p| p.mapped_job.is_none()));
    }

    #[test]
    fn a_missing_directory_says_what_to_do() {
        let error = HpcJobMap::new("/nonexistent/gpuwatch-map".into())
            .refresh()
            .expect_err("missing");
        assert!(error.to_string().contains("hpc_job_mapping_dir"), "{error}");
    }
}
