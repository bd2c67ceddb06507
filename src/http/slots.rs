//! Connection slots: which connections the server serves now, and which
//! it closes to make room for others.
//!
//! At most `limit` connections hold a slot. A connection is *idle* while
//! none of its requests is being handled: before its first request, during
//! a TLS handshake, between keep-alive requests, and while it trickles a
//! request head. When every slot is taken, a newcomer waits in a bounded
//! FIFO queue and room is made for it: the longest-idle connection is asked
//! to close ([`Slot::evicted`]; one that has not had a request answered yet
//! only once it has been idle for [`FRESH_GRACE`], so that a connection
//! is never closed before its request could be read); when none is idle, the next connection to
//! finish a response closes after it ([`Busy::finish`] says so, the server
//! answers `Connection: close`). So idle and slow connections cannot lock
//! others out, and busy keep-alive clients give way one response at a
//! time. A newcomer that finds the queue full is refused at once; one that
//! waits longer than its limit is refused then.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

/// How long a connection that has had no request answered yet is safe from
/// eviction: time for its first request head to be read. A client sends
/// its request right after connecting, so this only matters for
/// connections that send nothing (or trickle).
pub const FRESH_GRACE: Duration = Duration::from_millis(200);

/// How often a waiting connection looks again for one that can be evicted
/// (a fresh one whose grace ran out).
const RECHECK: Duration = Duration::from_millis(50);

/// The slot table, shared by the accept loop and every connection.
#[derive(Debug)]
pub struct Slots {
    limit: usize,
    max_waiting: usize,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    /// Connections holding a slot.
    conns: HashMap<u64, Entry>,
    /// Connections waiting for a slot, oldest first.
    waiters: VecDeque<Waiter>,
    /// Connections asked to close that still hold their slot.
    closing: usize,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    /// Hands the slot over.
    handed: oneshot::Sender<()>,
    /// Its [`Slot`]'s eviction signal, for its entry once it holds a slot.
    evict: Arc<Notify>,
}

#[derive(Debug)]
struct Entry {
    /// Since when no request of it is handled; `None` while one is.
    idle_since: Option<Instant>,
    /// Asked to close: it is not picked again, and its next response closes it.
    closing: bool,
    /// Whether a request of it has been answered (then it is a keep-alive
    /// connection between requests when idle, evictable at once).
    answered: bool,
    /// Woken when it is asked to close while idle.
    evict: Arc<Notify>,
}

/// Why a connection got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Every slot is busy and the queue is full.
    #[error("all {slots} connection slots (server.max_connections) are busy and {waiting} more connections already wait for one")]
    QueueFull {
        /// The slot count.
        slots: usize,
        /// The queue's length.
        waiting: usize,
    },
    /// Waited its limit without getting a slot.
    #[error("no connection slot came free within {waited:?}: all {slots} (server.max_connections) were busy")]
    TimedOut {
        /// The slot count.
        slots: usize,
        /// How long it waited.
        waited: Duration,
    },
}

impl Slots {
    /// `limit` slots (at least 1) and a queue of at most `max_waiting`.
    pub fn new(limit: usize, max_waiting: usize) -> Arc<Slots> {
        Arc::new(Slots {
            limit: limit.max(1),
            max_waiting,
            table: Mutex::new(Table::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // No code below panics while holding the lock; if one ever did, the
        // table's counts are still whole numbers, so go on with them.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for a new connection: at once while one is free, else after
    /// waiting (at most `wait`) while room is made.
    pub async fn admit(self: &Arc<Self>, wait: Duration) -> Result<Slot, Refused> {
        let evict = Arc::new(Notify::new());
        // A Slot is made only once the lock is released: dropping one
        // takes the lock.
        let (id, handed) = {
            let mut table = self.lock();
            let id = table.next_id;
            table.next_id += 1;
            if table.conns.len() < self.limit && table.waiters.is_empty() {
                table.conns.insert(id, Entry::idle(evict.clone()));
                (id, None)
            } else if table.waiters.len() >= self.max_waiting {
                return Err(Refused::QueueFull {
                    slots: self.limit,
                    waiting: table.waiters.len(),
                });
            } else {
                let (sender, handed) = oneshot::channel();
                table.waiters.push_back(Waiter {
                    id,
                    handed: sender,
                    evict: evict.clone(),
                });
                table.make_room(Instant::now());
                (id, Some(handed))
            }
        };
        let slot = Slot {
            slots: self.clone(),
            id,
            evict,
        };
        let Some(handed) = handed else {
            return Ok(slot);
        };
        // Dropping `slot` takes it out of the queue (or gives back the slot
        // handed over meanwhile), so every way out below is clean.
        let deadline = Instant::now() + wait;
        let mut handed = std::pin::pin!(handed);
        loop {
            let tick = (Instant::now() + RECHECK).min(deadline);
            match tokio::time::timeout_at(tick, handed.as_mut()).await {
                Ok(Ok(())) => return Ok(slot),
                // The table never drops a live waiter's sender; treat it
                // as a timeout all the same.
                Ok(Err(_)) => break,
                Err(_) if tick >= deadline => break,
                Err(_) => self.lock().make_room(Instant::now()),
            }
        }
        let handed_meanwhile = self.lock().conns.contains_key(&slot.id);
        if handed_meanwhile {
            return Ok(slot);
        }
        Err(Refused::TimedOut {
            slots: self.limit,
            waited: wait,
        })
    }

    #[cfg(test)]
    /// (connections holding a slot, connections waiting), for tests and logs.
    pub fn usage(&self) -> (usize, usize) {
        let table = self.lock();
        (table.conns.len(), table.waiters.len())
    }
}

impl Entry {
    fn idle(evict: Arc<Notify>) -> Entry {
        Entry {
            idle_since: Some(Instant::now()),
            closing: false,
            answered: false,
            evict,
        }
    }
}

impl Table {
    /// Asks the longest-idle connections to close, one per waiter not yet
    /// covered by a connection that is closing anyway.
    fn make_room(&mut self, now: Instant) {
        while self.waiters.len() > self.closing {
            // Longest idle first; of two idle since the same instant, the older.
            let victim = self
                .conns
                .iter_mut()
                .filter(|(_, e)| !e.closing)
                .filter_map(|(id, e)| e.idle_since.map(|since| ((since, *id), e)))
                .filter(|((since, _), e)| e.answered || now.duration_since(*since) >= FRESH_GRACE)
                .min_by_key(|(key, _)| *key)
                .map(|(_, e)| e);
            let Some(victim) = victim else { return };
            victim.closing = true;
            victim.evict.notify_one();
            self.closing += 1;
        }
    }

    /// A slot came free: the oldest waiter still waiting gets it.
    fn release(&mut self, id: u64) {
        let Some(entry) = self.conns.remove(&id) else {
            // Still queued: it only leaves the queue.
            self.waiters.retain(|waiter| waiter.id != id);
            return;
        };
        if entry.closing {
            self.closing -= 1;
        }
        while let Some(waiter) = self.waiters.pop_front() {
            if waiter.handed.send(()).is_ok() {
                self.conns.insert(waiter.id, Entry::idle(waiter.evict));
                break;
            }
        }
        self.make_room(Instant::now());
    }
}

/// A connection's place: in the queue, then holding a slot. Dropping it
/// leaves the queue or frees the slot.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    id: u64,
    evict: Arc<Notify>,
}

impl Slot {
    /// Resolves when this connection is asked to close to make room (it
    /// was idle then; check [`Slot::serving`] before closing it hard).
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }

    /// Whether one of its requests is being handled now.
    pub fn serving(&self) -> bool {
        let table = self.slots.lock();
        table
            .conns
            .get(&self.id)
            .is_some_and(|e| e.idle_since.is_none())
    }

    /// Whether a request of it has been answered (a response may still be
    /// on its way out).
    pub fn answered(&self) -> bool {
        let table = self.slots.lock();
        table.conns.get(&self.id).is_some_and(|e| e.answered)
    }

    /// Marks a request as being handled until the returned guard finishes
    /// or is dropped.
    pub fn begin_request(self: &Arc<Self>) -> Busy {
        let mut table = self.slots.lock();
        if let Some(entry) = table.conns.get_mut(&self.id) {
            entry.idle_since = None;
        }
        Busy {
            slot: self.clone(),
            finished: false,
        }
    }

    fn end_request(&self) -> bool {
        let mut table = self.slots.lock();
        let waiting = table.waiters.len();
        let closing = table.closing;
        let Some(entry) = table.conns.get_mut(&self.id) else {
            return false;
        };
        entry.idle_since = Some(Instant::now());
        entry.answered = true;
        if entry.closing {
            return true;
        }
        if waiting > closing {
            // Nobody idle was there to make room when they came: this
            // connection gives way after its response.
            entry.closing = true;
            table.closing += 1;
            return true;
        }
        false
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.lock().release(self.id);
    }
}

/// A request being handled on a connection.
#[derive(Debug)]
pub struct Busy {
    slot: Arc<Slot>,
    finished: bool,
}

impl Busy {
    /// The request is answered: whether its response should close the
    /// connection (`Connection: close`) to give its slot to a waiter.
    pub fn finish(mut self) -> bool {
        self.finished = true;
        self.slot.end_request()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if !self.finished {
            self.slot.end_request();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_secs(30);

    /// Whether `slot` has been asked to close (without waiting).
    async fn is_evicted(slot: &Slot) -> bool {
        tokio::time::timeout(Duration::from_millis(20), slot.evicted())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_oldest_waiter() {
        let slots = Slots::new(1, 4);
        let first = Arc::new(slots.admit(WAIT).await.expect("a free slot"));
        // Keep the holder busy so that nobody is evicted.
        let busy = first.begin_request();
        let slots2 = slots.clone();
        let second = tokio::spawn(async move { slots2.admit(WAIT).await });
        let slots3 = slots.clone();
        tokio::task::yield_now().await;
        while slots.usage().1 < 1 {
            tokio::task::yield_now().await;
        }
        let third = tokio::spawn(async move { slots3.admit(WAIT).await });
        while slots.usage().1 < 2 {
            tokio::task::yield_now().await;
        }
        assert_eq!(slots.usage(), (1, 2));
        assert!(busy.finish(), "a busy holder gives way after its response");
        drop(first);
        let second = second.await.expect("task").expect("slot handed over");
        assert_eq!(slots.usage(), (1, 1));
        assert!(!third.is_finished());
        drop(second);
        let third = third.await.expect("task").expect("slot handed over");
        assert_eq!(slots.usage(), (1, 0));
        drop(third);
        assert_eq!(slots.usage(), (0, 0));
    }

    /// Answers one request on `slot`, so that it counts as a keep-alive
    /// connection between requests.
    fn answer_one(slot: &Arc<Slot>) {
        assert!(!slot.begin_request().finish());
    }

    #[tokio::test]
    async fn a_newcomer_evicts_the_longest_idle_connection_only() {
        let slots = Slots::new(3, 4);
        let oldest = Arc::new(slots.admit(WAIT).await.expect("slot"));
        let newer = Arc::new(slots.admit(WAIT).await.expect("slot"));
        let serving = Arc::new(slots.admit(WAIT).await.expect("slot"));
        answer_one(&oldest);
        answer_one(&newer);
        let busy = serving.begin_request();
        let slots2 = slots.clone();
        let newcomer = tokio::spawn(async move { slots2.admit(WAIT).await });
        oldest.evicted().await;
        assert!(!oldest.serving());
        assert!(!is_evicted(&newer).await, "one waiter, one eviction");
        assert!(
            !is_evicted(&serving).await,
            "a connection being served is never evicted"
        );
        drop(oldest);
        let newcomer = newcomer.await.expect("task").expect("slot");
        assert!(!busy.finish(), "nobody waits any more: keep-alive goes on");
        assert_eq!(slots.usage(), (3, 0));
        drop((newcomer, newer, serving));
        assert_eq!(slots.usage(), (0, 0));
    }

    #[test]
    fn a_fresh_connection_is_safe_for_its_grace_only() {
        let (handed, _receiver) = oneshot::channel();
        let since = Instant::now();
        let fresh = Arc::new(Notify::new());
        let mut table = Table::default();
        table.conns.insert(
            0,
            Entry {
                idle_since: Some(since),
                closing: false,
                answered: false,
                evict: fresh.clone(),
            },
        );
        table.waiters.push_back(Waiter {
            id: 1,
            handed,
            evict: Arc::new(Notify::new()),
        });
        table.make_room(since + FRESH_GRACE / 2);
        assert_eq!(table.closing, 0, "within its grace");
        table.make_room(since + FRESH_GRACE);
        assert_eq!(table.closing, 1, "after its grace");
        assert!(table.conns[&0].closing);
        table.make_room(since + FRESH_GRACE * 2);
        assert_eq!(table.closing, 1, "asked once");
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_and_a_long_wait_gives_up() {
        let slots = Slots::new(1, 1);
        let holder = Arc::new(slots.admit(WAIT).await.expect("slot"));
        let busy = holder.begin_request();
        let slots2 = slots.clone();
        let waiter = tokio::spawn(async move { slots2.admit(Duration::from_millis(100)).await });
        while slots.usage().1 < 1 {
            tokio::task::yield_now().await;
        }
        match slots.admit(WAIT).await {
            Err(Refused::QueueFull {
                slots: 1,
                waiting: 1,
            }) => {}
            other => panic!("expected QueueFull, got {other:?}"),
        }
        match waiter.await.expect("task") {
            Err(Refused::TimedOut { slots: 1, .. }) => {}
            other => panic!("expected TimedOut, got {other:?}"),
        }
        assert_eq!(slots.usage(), (1, 0), "the waiter left the queue");
        // The holder was asked to close for the waiter that left; its
        // response still closes the connection, which is harmless.
        drop(busy);
        drop(holder);
        assert_eq!(slots.usage(), (0, 0));
    }

    #[tokio::test]
    async fn a_cancelled_waiter_leaves_the_queue() {
        let slots = Slots::new(1, 4);
        let holder = Arc::new(slots.admit(WAIT).await.expect("slot"));
        let _busy = holder.begin_request();
        let slots2 = slots.clone();
        let waiter = tokio::spawn(async move { slots2.admit(WAIT).await });
        while slots.usage().1 < 1 {
            tokio::task::yield_now().await;
        }
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(slots.usage(), (1, 0));
    }

    #[tokio::test]
    async fn a_request_dropped_midway_leaves_the_connection_idle() {
        let slots = Slots::new(1, 4);
        let holder = Arc::new(slots.admit(WAIT).await.expect("slot"));
        let busy = holder.begin_request();
        assert!(holder.serving());
        drop(busy);
        assert!(!holder.serving());
    }
}
