//! Workloads: who used each GPU (a Slurm job, a Kubernetes pod, a
//! container, a plain process — [`identity`]) and how well, integrated on
//! every snapshot ([`accounting`]).

pub mod accounting;
pub mod identity;
