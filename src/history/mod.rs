//! Local history in SQLite: what the GPUs did, kept on the node so a person
//! can ask "what was GPU 3 doing at 02:00 when the job died?" without a
//! Prometheus.
//!
//! - [`catalog`]: the stored readings (column, unit, scale, kind).
//! - [`recorder`]: snapshots → rows (raw samples, minute and hour rollups,
//!   events, monotonic counters); pure.
//! - [`writer`]: the task that batches and commits them, and prunes.
//! - [`store`] / [`sql`]: opening, migrating and writing the database;
//!   [`inspect`]: what is at the path, found out before anything is written.
//! - [`attach`]: the database as it becomes available: retried in the
//!   background when the storage fails at start.
//! - [`retention`]: per-tier retention and the size cap.
//! - [`query`] / [`chart`]: reading it back for the API and CLI (times and
//!   steps from outside are checked by [`crate::timespec`]).
//! - [`stats`]: the `gpuwatch_history_*` metrics.

pub mod attach;
pub mod catalog;
pub mod chart;
pub mod inspect;
pub mod query;
pub mod recorder;
pub mod retention;
pub mod rollup;
pub mod sql;
pub mod stats;
pub mod store;
pub mod workloads;
pub mod writer;

#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod migration_tests;
#[cfg(test)]
mod open_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod workload_tests;

use std::path::{Path, PathBuf};

pub use retention::Retention;
pub use store::{Durability, HistoryError, Store};

/// The database file when the config names none: systemd's
/// `$STATE_DIRECTORY` for the service, else `$XDG_STATE_HOME/gpuwatch` or
/// `~/.local/state/gpuwatch` when run by hand. Simulated runs get their own
/// file so simulated data never mixes with a real GPU's.
pub fn default_path(simulated: bool) -> PathBuf {
    let file = if simulated {
        "history-simulated.db"
    } else {
        "history.db"
    };
    // systemd may list several state directories, separated by colons.
    let dir = std::env::var("STATE_DIRECTORY")
        .ok()
        .and_then(|d| d.split(':').next().map(PathBuf::from))
        .or_else(|| std::env::var_os("XDG_STATE_HOME").map(|d| Path::new(&d).join("gpuwatch")))
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/state/gpuwatch")))
        .unwrap_or_else(|| PathBuf::from("."));
    dir.join(file)
}
