//! `[workloads]`: where the agent learns which job a GPU process works for,
//! beyond the process itself (its cgroup and environment).

use std::path::PathBuf;

use super::raw::RawWorkloads;
use super::Validator;

/// The checked `[workloads]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadsConfig {
    /// dcgm-exporter's HPC job mapping directory (one file per GPU index,
    /// job ids a line), for sites whose Slurm prolog writes it; `None`:
    /// not read.
    pub hpc_job_mapping_dir: Option<PathBuf>,
}

impl Validator<'_> {
    /// Checks `[workloads]`: a mapping directory must be an absolute path
    /// ("" or absent: none).
    pub(super) fn workloads(&mut self, raw: RawWorkloads) -> WorkloadsConfig {
        let hpc_job_mapping_dir = raw.hpc_job_mapping_dir.and_then(|path| {
            let span = path.span();
            let path = path.into_inner();
            if path.as_os_str().is_empty() {
                return None;
            }
            if !path.is_absolute() {
                self.problem(
                    "workloads.hpc_job_mapping_dir",
                    span,
                    &format!(
                        "{:?} is not an absolute path; name the directory your Slurm prolog writes, e.g. \"/run/dcgm-job-map\"",
                        path.display().to_string()
                    ),
                );
                return None;
            }
            Some(path)
        });
        WorkloadsConfig {
            hpc_job_mapping_dir,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn a_mapping_directory_named_absent_or_refused_with_where() {
        assert_eq!(Config::default().workloads.hpc_job_mapping_dir, None);
        let named = Config::parse(
            "[workloads]\nhpc_job_mapping_dir = \"/run/dcgm-job-map\"\n",
            "t.toml",
        )
        .expect("valid");
        assert_eq!(
            named.workloads.hpc_job_mapping_dir.as_deref(),
            Some(std::path::Path::new("/run/dcgm-job-map"))
        );
        let problems = Config::parse("[workloads]\nhpc_job_mapping_dir = \"run/map\"\n", "t.toml")
            .expect_err("relative");
        let text = problems.to_string();
        assert!(
            text.contains("t.toml:2:") && text.contains("workloads.hpc_job_mapping_dir"),
            "{text}"
        );
        assert!(Config::parse("[workloads]\nnope = 1\n", "t.toml").is_err());
    }
}
