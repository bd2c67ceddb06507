//! The checkpoint cursor: one mechanism for every sequence the engine
//! computes step by step from step 0 — a random walk's values
//! ([`Signal`](super::signal::Signal)) and a counter's running integral
//! ([`Integrator`](super::counters::Integrator)).
//!
//! Such a sequence is x₀ (given) and xₖ₊₁ = next(xₖ, k), so the value at
//! step k costs the steps from the nearest known value below k. What is
//! kept, so that any read pattern stays cheap:
//!
//! - a checkpoint every `EVERY` steps (a read far back in time walks at
//!   most `EVERY` steps);
//! - the newest step reached going forward (a clock that moves forward costs
//!   only the new steps);
//! - the values of the `RECENT` newest steps (a reader a few steps behind the
//!   newest one — the GPM integrator summing whole seconds just behind the
//!   fast tier's "now" — reads them without stepping);
//! - the last step read behind the newest one (readers that move forward
//!   behind another — a GPM window that starts 10 s back, an integrator
//!   evaluating a walk from t = 0 after "now" was read — step on from
//!   there instead of from a checkpoint).

/// A sequence computed step by step, with its checkpoints and cursors: a
/// checkpoint every `EVERY` steps, the `RECENT` newest steps kept (both
/// constants, so that the per-step bookkeeping divides by a constant).
#[derive(Debug, Clone)]
pub struct Checkpoints<S, const EVERY: u64, const RECENT: usize> {
    /// `saved[i]` is the value at step `i × EVERY`.
    saved: Vec<S>,
    /// The newest step reached going forward, and its value.
    newest: (u64, S),
    /// `recent[s % RECENT]` is the value at step `s`, for the steps in
    /// `recent_from..=newest.0` (at most `RECENT` of them).
    recent: [S; RECENT],
    recent_from: u64,
    /// The last step read behind the newest one, and its value.
    behind: Option<(u64, S)>,
}

impl<S: Clone, const EVERY: u64, const RECENT: usize> Checkpoints<S, EVERY, RECENT> {
    /// A sequence starting at `start` (step 0).
    pub fn new(start: S) -> Self {
        const { assert!(EVERY > 0, "a checkpoint every 0 steps") };
        Checkpoints {
            saved: vec![start.clone()],
            newest: (0, start.clone()),
            recent: std::array::from_fn(|_| start.clone()),
            recent_from: 0,
            behind: None,
        }
    }

    /// The value at step `k`; `next(x, s)` turns the value at step `s` into
    /// the value at step `s + 1` (it must be the same pure function on every
    /// call: its results are kept).
    #[inline]
    pub fn at(&mut self, k: u64, mut next: impl FnMut(&mut S, u64)) -> S {
        if let Some(value) = self.recent_value(k) {
            return value;
        }
        let forward = self.newest.0 <= k;
        let (mut step, mut value) = if forward {
            self.newest.clone()
        } else {
            self.start_below(k)
        };
        while step < k {
            next(&mut value, step);
            step += 1;
            if step % EVERY == 0 && (step / EVERY) as usize == self.saved.len() {
                self.saved.push(value.clone());
            }
            if forward && RECENT > 0 {
                self.recent[step as usize % RECENT].clone_from(&value);
            }
        }
        if forward {
            self.newest = (k, value.clone());
            self.recent_from = self.recent_from.max((k + 1).saturating_sub(RECENT as u64));
        } else {
            self.behind = Some((k, value.clone()));
        }
        value
    }

    /// The value at step `k`, where it is one of the newest steps kept.
    #[inline]
    fn recent_value(&self, k: u64) -> Option<S> {
        (RECENT > 0 && k >= self.recent_from && k <= self.newest.0)
            .then(|| self.recent[k as usize % RECENT].clone())
    }

    /// The known step nearest below `k` (which is behind the newest step):
    /// the last step read behind, or the checkpoint below `k`.
    #[cold]
    fn start_below(&self, k: u64) -> (u64, S) {
        let idx = (k / EVERY).min(self.saved.len() as u64 - 1);
        let checkpoint = idx * EVERY;
        match &self.behind {
            Some((step, value)) if *step <= k && *step >= checkpoint => (*step, value.clone()),
            _ => (checkpoint, self.saved[idx as usize].clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sequence whose steps are counted: x_{s+1} = x_s + s + 1 (so x_k =
    /// k (k + 1) / 2).
    fn triangle<const EVERY: u64, const RECENT: usize>() -> Checkpoints<u64, EVERY, RECENT> {
        Checkpoints::new(0)
    }

    fn read<const EVERY: u64, const RECENT: usize>(
        seq: &mut Checkpoints<u64, EVERY, RECENT>,
        k: u64,
        steps: &mut u64,
    ) -> u64 {
        seq.at(k, |x, s| {
            *steps += 1;
            *x += s + 1;
        })
    }

    #[test]
    fn any_read_order_gives_the_sequence() {
        let mut seq = triangle::<16, 4>();
        let mut steps = 0;
        for k in [500, 3, 499, 17, 16, 1000, 998, 0, 64, 65, 2000] {
            assert_eq!(read(&mut seq, k, &mut steps), k * (k + 1) / 2, "step {k}");
        }
    }

    #[test]
    fn forward_reads_cost_only_the_new_steps() {
        let mut seq = triangle::<16, 4>();
        let mut steps = 0;
        read(&mut seq, 100, &mut steps);
        assert_eq!(steps, 100);
        steps = 0;
        read(&mut seq, 103, &mut steps);
        assert_eq!(steps, 3);
    }

    #[test]
    fn the_newest_steps_are_read_without_stepping() {
        let mut seq = triangle::<16, 4>();
        let mut steps = 0;
        read(&mut seq, 100, &mut steps);
        steps = 0;
        for k in 97..=100 {
            assert_eq!(read(&mut seq, k, &mut steps), k * (k + 1) / 2);
        }
        assert_eq!(steps, 0);
        // Five behind: from the checkpoint at 80.
        assert_eq!(read(&mut seq, 95, &mut steps), 95 * 96 / 2);
        assert_eq!(steps, 15);
    }

    #[test]
    fn a_reader_behind_the_newest_step_steps_on_from_its_last_read() {
        let mut seq = triangle::<1024, 8>();
        let mut steps = 0;
        read(&mut seq, 5000, &mut steps);
        steps = 0;
        read(&mut seq, 1000, &mut steps);
        assert_eq!(steps, 1000, "from step 0, the checkpoint below");
        for k in 1001..1100 {
            steps = 0;
            assert_eq!(read(&mut seq, k, &mut steps), k * (k + 1) / 2);
            let expected = if k % 1024 == 0 { 0 } else { 1 };
            assert_eq!(
                steps, expected,
                "step {k}: a checkpoint or one step from the last read"
            );
        }
        // Before the last read behind: from the checkpoint again.
        steps = 0;
        assert_eq!(read(&mut seq, 500, &mut steps), 500 * 501 / 2);
        assert_eq!(steps, 500);
    }

    #[test]
    fn without_recent_steps_the_newest_is_still_kept() {
        let mut seq = triangle::<16, 0>();
        let mut steps = 0;
        read(&mut seq, 40, &mut steps);
        steps = 0;
        assert_eq!(read(&mut seq, 40, &mut steps), 40 * 41 / 2);
        assert_eq!(steps, 0);
    }
}
