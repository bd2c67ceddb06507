//! The silences the agent keeps in memory, held to fixed limits so that no
//! client can make the agent grow without bound: at most [`MAX_LIVE`]
//! active or pending silences, at most [`MAX_EXPIRED`] expired ones kept
//! for listing (and none longer than [`KEEP_EXPIRED_MS`]), and all of them
//! together within [`MAX_MEMORY`] bytes (texts and compiled matchers, see
//! [`Silence::memory`]). Expired silences make room for new ones (oldest
//! end first); active and pending ones are never dropped: a new silence
//! that does not fit is refused. Pure: [`super::silence_store`] stores them.

use std::sync::Arc;

use super::silence::{Silence, SilenceState};

/// The most active and pending silences at once.
pub const MAX_LIVE: usize = 1000;
/// The most expired silences kept for listing.
pub const MAX_EXPIRED: usize = 1000;
/// The most memory all kept silences may take, about (16 MiB; the agent
/// itself takes about 17 MiB, the DaemonSet allows 64 MiB).
pub const MAX_MEMORY: usize = 16 << 20;
/// How long an expired silence stays listed before it is removed.
pub const KEEP_EXPIRED_MS: i64 = 5 * 24 * 3_600_000;

/// Why a new silence does not fit. The texts say the limit and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Full {
    /// [`MAX_LIVE`] active or pending silences already.
    #[error("there are already {live} active or pending silences, the most allowed ({MAX_LIVE}): expire one (gpuwatch silence expire ID) before adding another")]
    TooMany {
        /// How many there are.
        live: usize,
    },
    /// The active and pending ones with this one would pass [`MAX_MEMORY`].
    #[error("the active and pending silences would take about {would_kib} KiB of memory with this one, over the limit of {} KiB: expire some, or use fewer or simpler matchers", MAX_MEMORY / 1024)]
    TooLarge {
        /// How much they would take, in KiB.
        would_kib: usize,
    },
}

/// The kept silences, by id (ascending), with their memory.
#[derive(Debug, Clone, Default)]
pub struct SilenceSet {
    silences: Vec<Arc<Silence>>,
    memory: usize,
}

impl SilenceSet {
    /// An empty set.
    pub fn new() -> SilenceSet {
        SilenceSet::default()
    }

    /// Every kept silence, by id.
    pub fn all(&self) -> &[Arc<Silence>] {
        &self.silences
    }

    /// About how many bytes they take.
    pub fn memory(&self) -> usize {
        self.memory
    }

    /// The silence with this id.
    pub fn get(&self, id: i64) -> Option<&Arc<Silence>> {
        self.silences
            .binary_search_by_key(&id, |s| s.id)
            .ok()
            .map(|i| &self.silences[i])
    }

    fn live(&self, now_ms: i64) -> impl Iterator<Item = &Arc<Silence>> {
        self.silences
            .iter()
            .filter(move |s| s.state(now_ms) != SilenceState::Expired)
    }

    /// The expired silences to drop, oldest end first, so that at most
    /// [`MAX_EXPIRED`] stay, none older than [`KEEP_EXPIRED_MS`], and the
    /// set takes no more than [`MAX_MEMORY`] with `extra` bytes more.
    pub fn to_drop(&self, extra: usize, now_ms: i64) -> Vec<i64> {
        let mut expired: Vec<&Arc<Silence>> = self
            .silences
            .iter()
            .filter(|s| s.state(now_ms) == SilenceState::Expired)
            .collect();
        expired.sort_by_key(|s| (s.ends_ms, s.id));
        let cutoff = now_ms.saturating_sub(KEEP_EXPIRED_MS);
        let mut memory = self.memory.saturating_add(extra);
        let mut left = expired.len();
        let mut drop = Vec::new();
        for s in expired {
            if s.ends_ms >= cutoff && left <= MAX_EXPIRED && memory <= MAX_MEMORY {
                break;
            }
            drop.push(s.id);
            memory = memory.saturating_sub(s.memory());
            left -= 1;
        }
        drop
    }

    /// Whether `new` (not over at `now_ms`) fits: the ids of the expired
    /// silences to drop first, or why it does not fit.
    pub fn room_for(&self, new: &Silence, now_ms: i64) -> Result<Vec<i64>, Full> {
        let live = self.live(now_ms).count();
        if live >= MAX_LIVE {
            return Err(Full::TooMany { live });
        }
        let live_memory: usize = self.live(now_ms).map(|s| s.memory()).sum();
        let would = live_memory.saturating_add(new.memory());
        if would > MAX_MEMORY {
            return Err(Full::TooLarge {
                would_kib: would.div_ceil(1024),
            });
        }
        Ok(self.to_drop(new.memory(), now_ms))
    }

    /// Keeps a silence read back from the database at start-up if it fits
    /// (active and pending ones are offered first, by id, then expired ones,
    /// newest first); nothing is dropped for it. `Ok(false)`: an expired
    /// one there is no room for (it is only history); an error: an active
    /// or pending one that does not fit.
    pub fn keep_stored(&mut self, silence: Silence, now_ms: i64) -> Result<bool, Full> {
        if silence.state(now_ms) == SilenceState::Expired {
            let expired = self.silences.len() - self.live(now_ms).count();
            if expired >= MAX_EXPIRED
                || self.memory.saturating_add(silence.memory()) > MAX_MEMORY
                || silence.ends_ms < now_ms.saturating_sub(KEEP_EXPIRED_MS)
            {
                return Ok(false);
            }
        } else {
            // Live ones come first, so there is no expired one to drop.
            self.room_for(&silence, now_ms)?;
        }
        self.insert(silence);
        Ok(true)
    }

    /// Adds or replaces a silence (by id).
    pub fn insert(&mut self, silence: Silence) {
        self.memory = self.memory.saturating_add(silence.memory());
        match self.silences.binary_search_by_key(&silence.id, |s| s.id) {
            Ok(i) => {
                let old = std::mem::replace(&mut self.silences[i], Arc::new(silence));
                self.memory = self.memory.saturating_sub(old.memory());
            }
            Err(i) => self.silences.insert(i, Arc::new(silence)),
        }
    }

    /// Drops these silences.
    pub fn remove(&mut self, ids: &[i64]) {
        let mut freed = 0;
        self.silences.retain(|s| {
            let gone = ids.contains(&s.id);
            if gone {
                freed += s.memory();
            }
            !gone
        });
        self.memory = self.memory.saturating_sub(freed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::matcher::Matcher;

    fn silence(id: i64, ends_ms: i64, matcher: &str) -> Silence {
        Silence {
            id,
            matchers: vec![Matcher::parse(matcher).unwrap()],
            starts_ms: 0,
            ends_ms,
            created_by: "a".into(),
            comment: "c".into(),
            updated_ms: 0,
        }
    }

    #[test]
    fn the_thousand_and_first_live_silence_is_refused() {
        let now = 1_000;
        let mut set = SilenceSet::new();
        for id in 1..=MAX_LIVE as i64 {
            set.keep_stored(silence(id, now + 10, "alertname=X"), now)
                .unwrap();
        }
        let next = silence(5000, now + 10, "alertname=X");
        let e = set.room_for(&next, now).unwrap_err();
        assert_eq!(e, Full::TooMany { live: MAX_LIVE });
        assert!(e.to_string().contains("(1000)"), "{e}");
        // Once some have ended there is room, and nothing needs dropping.
        assert_eq!(set.room_for(&next, now + 10), Ok(vec![]));
    }

    #[test]
    fn expired_silences_make_room_oldest_first() {
        let now = 10 * KEEP_EXPIRED_MS;
        let mut set = SilenceSet::new();
        for id in 1..=MAX_EXPIRED as i64 {
            set.insert(silence(id, now - 1000 + id, "alertname=X"));
        }
        // One more expired: the one that ended first goes.
        set.insert(silence(2000, now - 1, "alertname=X"));
        assert_eq!(set.to_drop(0, now), vec![1]);
        // Expired longer than KEEP_EXPIRED_MS ago: dropped whatever the count.
        let mut old = SilenceSet::new();
        old.insert(silence(1, now - KEEP_EXPIRED_MS - 1, "alertname=X"));
        old.insert(silence(2, now - 1, "alertname=X"));
        assert_eq!(old.to_drop(0, now), vec![1]);
        old.remove(&[1]);
        assert_eq!(old.all().len(), 1);
        assert_eq!(old.memory(), old.all()[0].memory());
    }

    #[test]
    fn memory_is_budgeted() {
        let now = 1_000;
        let big = |id| {
            let mut s = silence(id, now + 10, "alertname=X");
            s.matchers = (0..16)
                .map(|i| Matcher::parse(&format!("l{i}=~(a|b|c){{1,60}}[a-z]{{200}}")).unwrap())
                .collect();
            s
        };
        let one = big(1).memory();
        assert!(one > 64 * 1024, "{one} bytes");
        let mut set = SilenceSet::new();
        let mut id = 1;
        while set.room_for(&big(id), now).is_ok() {
            set.keep_stored(big(id), now).unwrap();
            id += 1;
        }
        assert!(set.memory() <= MAX_MEMORY);
        assert!(set.memory() + one > MAX_MEMORY);
        let e = set.room_for(&big(id), now).unwrap_err();
        assert!(matches!(e, Full::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("16384 KiB"), "{e}");
    }
}
