//! Connections that have sent nothing yet.
//!
//! A new connection waits for its first bytes before it asks for one of the
//! server's slots ([`super::slots`]), the way `TCP_DEFER_ACCEPT` does in
//! the kernel: a client sends its request right after connecting, so this
//! costs it nothing, while a connection that never sends (an idle flood)
//! never takes a slot from one that does. At most `max` connections wait
//! like this; a newcomer past that pushes the oldest out (it is closed),
//! so a flood of silent connections churns through this table and a real
//! client, whose bytes follow at once, gets through.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// The connections waiting for their first bytes, oldest first.
#[derive(Debug)]
pub struct Pending {
    max: usize,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    /// Ids grow, so the first entry is the oldest.
    waiting: BTreeMap<u64, Arc<Notify>>,
}

impl Pending {
    /// A table of at most `max` (at least 1) waiting connections.
    pub fn new(max: usize) -> Arc<Pending> {
        Arc::new(Pending {
            max: max.max(1),
            table: Mutex::new(Table::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // Nothing panics while holding the lock; a poisoned table is whole.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a new connection; if the table is full, the oldest one is
    /// pushed out ([`Waiting::pushed_out`] resolves for it).
    pub fn enter(self: &Arc<Self>) -> Waiting {
        let notify = Arc::new(Notify::new());
        let id = {
            let mut table = self.lock();
            while table.waiting.len() >= self.max {
                if let Some((_, oldest)) = table.waiting.pop_first() {
                    oldest.notify_one();
                }
            }
            let id = table.next_id;
            table.next_id += 1;
            table.waiting.insert(id, notify.clone());
            id
        };
        Waiting {
            pending: self.clone(),
            id,
            notify,
        }
    }

    /// Connections waiting now.
    pub fn len(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Whether none is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A connection's place in [`Pending`]; dropping it leaves the table.
#[derive(Debug)]
pub struct Waiting {
    pending: Arc<Pending>,
    id: u64,
    notify: Arc<Notify>,
}

impl Waiting {
    /// Resolves when newer connections have pushed this one out.
    pub async fn pushed_out(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.pending.lock().waiting.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn is_pushed_out(waiting: &Waiting) -> bool {
        tokio::time::timeout(Duration::from_millis(20), waiting.pushed_out())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_full_table_pushes_out_the_oldest() {
        let pending = Pending::new(2);
        let first = pending.enter();
        let second = pending.enter();
        assert!(!is_pushed_out(&first).await);
        let third = pending.enter();
        assert!(is_pushed_out(&first).await, "the oldest goes");
        assert!(!is_pushed_out(&second).await);
        assert!(!is_pushed_out(&third).await);
        assert_eq!(pending.len(), 2);
        drop(first);
        assert_eq!(pending.len(), 2, "a pushed-out connection is already gone");
        drop(second);
        let fourth = pending.enter();
        assert!(!is_pushed_out(&third).await, "room was free");
        drop((third, fourth));
        assert!(pending.is_empty());
    }
}
