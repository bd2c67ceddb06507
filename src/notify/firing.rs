//! Where an Alertmanager receiver's dispatcher reads the alerts to re-send:
//! the alerts firing now that its route takes, neither silenced nor
//! inhibited. The agent wires it to the alert state saved in the database
//! (committed with the transitions and their outbox rows, so the re-sends
//! survive a restart and agree with what the outbox sent); the notifiers
//! name no alerting type, so data still flows from alerting to them only
//! through the outbox and this source.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::rules::Alert;

/// Why the firing alerts could not be read (the source's own error, as
/// text: the dispatcher only logs it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FiringError(pub String);

/// What one read of a [`FiringAlerts`] source gives.
type Read = Pin<Box<dyn Future<Output = Result<Vec<Alert>, FiringError>> + Send>>;

/// The source of one receiver's firing alerts.
#[derive(Clone)]
pub struct FiringAlerts(Arc<dyn Fn() -> Read + Send + Sync>);

impl FiringAlerts {
    /// Reads the alerts with `read` whenever asked.
    pub fn new<F>(read: impl Fn() -> F + Send + Sync + 'static) -> FiringAlerts
    where
        F: Future<Output = Result<Vec<Alert>, FiringError>> + Send + 'static,
    {
        FiringAlerts(Arc::new(move || Box::pin(read())))
    }

    /// No alerts ever (a receiver that re-sends nothing, or no alerting).
    pub fn none() -> FiringAlerts {
        FiringAlerts::new(|| async { Ok(Vec::new()) })
    }

    /// The firing alerts now.
    pub async fn current(&self) -> Result<Vec<Alert>, FiringError> {
        (self.0)().await
    }
}

impl Default for FiringAlerts {
    fn default() -> Self {
        FiringAlerts::none()
    }
}

impl fmt::Debug for FiringAlerts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FiringAlerts")
    }
}
