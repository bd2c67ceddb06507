//! The outbox's doorbell: alerting rings it after it committed new rows, and
//! each receiver's dispatcher waits on it instead of polling the table, so
//! an agent with receivers but nothing to send does not wake up for nothing.

use std::sync::Arc;

use tokio::sync::watch;

/// Rung after new outbox rows are committed; cloned into every writer.
#[derive(Debug, Clone)]
pub struct Doorbell(Arc<watch::Sender<u64>>);

/// One dispatcher's ear on the [`Doorbell`]: hears every ring since it last
/// listened (a ring while it was busy sending is not lost).
#[derive(Debug)]
pub struct Listener(watch::Receiver<u64>);

impl Default for Doorbell {
    fn default() -> Self {
        Doorbell(Arc::new(watch::channel(0).0))
    }
}

impl Doorbell {
    /// Tells every listener that new rows may be waiting.
    pub fn ring(&self) {
        self.0.send_modify(|rings| *rings = rings.wrapping_add(1));
    }

    /// A new listener; it has heard the rings so far.
    pub fn listener(&self) -> Listener {
        Listener(self.0.subscribe())
    }
}

impl Listener {
    /// Returns at the next ring (at once if one came since the last call);
    /// never, once every doorbell is gone.
    pub async fn rung(&mut self) {
        if self.0.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::time::timeout;

    #[tokio::test]
    async fn a_ring_while_busy_is_heard_later() {
        let bell = Doorbell::default();
        let mut ear = bell.listener();
        assert!(
            timeout(Duration::from_millis(20), ear.rung())
                .await
                .is_err(),
            "no ring yet"
        );
        bell.ring();
        bell.ring();
        assert!(timeout(Duration::from_millis(20), ear.rung()).await.is_ok());
        assert!(
            timeout(Duration::from_millis(20), ear.rung())
                .await
                .is_err(),
            "two rings, one wake-up"
        );
    }

    #[tokio::test]
    async fn every_listener_hears_a_ring() {
        let bell = Doorbell::default();
        let (mut a, mut b) = (bell.listener(), bell.listener());
        bell.clone().ring();
        assert!(timeout(Duration::from_millis(20), a.rung()).await.is_ok());
        assert!(timeout(Duration::from_millis(20), b.rung()).await.is_ok());
    }

    #[tokio::test]
    async fn a_gone_doorbell_never_rings() {
        let bell = Doorbell::default();
        let mut ear = bell.listener();
        drop(bell);
        assert!(
            timeout(Duration::from_millis(20), ear.rung())
                .await
                .is_err(),
            "no busy loop"
        );
    }
}
