//! Counters that accumulate over scenario time (energy, violation time).
//!
//! Each counter is the integral of a rate from t = 0 to t, computed with a
//! fixed 1 s left-Riemann step, so its value is a pure, monotonic function of
//! t. Checkpoints every `CHECKPOINT` steps keep a call O(1) amortized, also
//! when callers ask for earlier times.

use std::sync::Mutex;

/// Integration step, scenario seconds.
pub const STEP: f64 = 1.0;
/// Steps between stored checkpoints.
const CHECKPOINT: u64 = 256;

/// Integrates an `N`-component rate function over scenario time.
#[derive(Debug)]
pub struct Integrator<const N: usize> {
    state: Mutex<State<N>>,
}

#[derive(Debug)]
struct State<const N: usize> {
    /// `checkpoints[i]` = integral over [0, i × CHECKPOINT × STEP].
    checkpoints: Vec<[f64; N]>,
    /// Most recent (step, integral up to that step).
    last: (u64, [f64; N]),
}

impl<const N: usize> Default for Integrator<N> {
    fn default() -> Self {
        Integrator {
            state: Mutex::new(State {
                checkpoints: vec![[0.0; N]],
                last: (0, [0.0; N]),
            }),
        }
    }
}

impl<const N: usize> Integrator<N> {
    /// ∫₀ᵗ rate(s) ds, component-wise; `rate` must be deterministic in s.
    pub fn integral(&self, t: f64, rate: impl Fn(f64) -> [f64; N]) -> [f64; N] {
        let t = t.max(0.0);
        let k = (t / STEP).floor() as u64;
        let mut state = match self.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let (mut step, mut acc) = if state.last.0 <= k {
            state.last
        } else {
            let idx = (k / CHECKPOINT).min(state.checkpoints.len() as u64 - 1);
            (idx * CHECKPOINT, state.checkpoints[idx as usize])
        };
        if state.last.0 < step {
            // Resuming from a checkpoint ahead of `last` never happens, but keep `last` sane.
            state.last = (step, acc);
        }
        while step < k {
            let r = rate(step as f64 * STEP);
            for (a, v) in acc.iter_mut().zip(r) {
                *a += v * STEP;
            }
            step += 1;
            if step % CHECKPOINT == 0 && (step / CHECKPOINT) as usize == state.checkpoints.len() {
                state.checkpoints.push(acc);
            }
        }
        state.last = (k, acc);
        drop(state);
        let partial = t - k as f64 * STEP;
        if partial > 0.0 {
            let r = rate(k as f64 * STEP);
            for (a, v) in acc.iter_mut().zip(r) {
                *a += v * partial;
            }
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrates_constant_and_step_rates() {
        let i = Integrator::<2>::default();
        let rate = |s: f64| [2.0, if s >= 10.0 { 1.0 } else { 0.0 }];
        assert_eq!(i.integral(5.0, rate), [10.0, 0.0]);
        assert_eq!(i.integral(15.5, rate), [31.0, 5.5]);
        // Going back in time gives the same answers (pure function of t).
        assert_eq!(i.integral(5.0, rate), [10.0, 0.0]);
        assert_eq!(i.integral(1000.0, rate), [2000.0, 990.0]);
        assert_eq!(i.integral(300.0, rate), [600.0, 290.0]);
    }

    #[test]
    fn monotonic_for_non_negative_rates() {
        let i = Integrator::<1>::default();
        let rate = |s: f64| [(s / 7.0).sin().abs()];
        let mut prev = 0.0;
        for n in 0..2000 {
            let v = i.integral(n as f64 * 0.37, rate)[0];
            assert!(v >= prev);
            prev = v;
        }
    }
}
