//! `[history]`: the local SQLite history.

use std::path::PathBuf;
use std::time::Duration;

use crate::history::{Durability, Retention};

use super::limits;
use super::raw::RawHistory;
use super::Validator;

/// Local history settings.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryConfig {
    /// Record history at all.
    pub enabled: bool,
    /// Database file; `None` for the default (see [`crate::history::default_path`]).
    pub path: Option<PathBuf>,
    /// How hard commits are synced.
    pub durability: Durability,
    /// Commit period: at most this much is lost on a crash.
    pub batch_interval: Duration,
    /// Retention per tier.
    pub retention: Retention,
    /// Size cap in bytes, if any.
    pub max_size: Option<u64>,
    /// Snapshots the writer may fall behind by before they are dropped.
    pub queue: usize,
}

impl Validator<'_> {
    /// Checks `[history]`.
    pub(super) fn history(&mut self, raw: RawHistory) -> HistoryConfig {
        let durability = match raw
            .synchronous
            .as_ref()
            .map(|s| (s.get_ref().as_str(), s.span()))
        {
            None | Some(("normal", _)) => Durability::Normal,
            Some(("full", _)) => Durability::Full,
            Some((other, span)) => {
                self.problem(
                    "history.synchronous",
                    span,
                    &format!("\"{other}\" is not a setting; use \"normal\" or \"full\""),
                );
                Durability::Normal
            }
        };
        let retention = Retention {
            raw: self.duration(
                "history.raw_retention",
                raw.raw_retention.as_ref(),
                Duration::from_secs(48 * 3600),
                &limits::RAW_RETENTION,
            ),
            minute: self.duration(
                "history.minute_retention",
                raw.minute_retention.as_ref(),
                Duration::from_secs(30 * 86_400),
                &limits::MINUTE_RETENTION,
            ),
            hour: self.duration(
                "history.hour_retention",
                raw.hour_retention.as_ref(),
                Duration::from_secs(365 * 86_400),
                &limits::HOUR_RETENTION,
            ),
        };
        let max_size = self.size(
            "history.max_size",
            raw.max_size.as_ref(),
            &limits::HISTORY_MAX_SIZE,
        );
        let queue = self.count(
            "history.queue",
            raw.queue.as_ref(),
            64,
            &limits::HISTORY_QUEUE,
        );
        let batch_interval = self.duration(
            "history.batch_interval",
            raw.batch_interval.as_ref(),
            Duration::from_secs(10),
            &limits::BATCH_INTERVAL,
        );
        HistoryConfig {
            enabled: raw.enabled.unwrap_or(true),
            path: raw.path,
            durability,
            batch_interval,
            retention,
            max_size,
            queue: usize::try_from(queue).unwrap_or(64),
        }
    }
}
