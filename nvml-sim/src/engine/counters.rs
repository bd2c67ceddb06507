//! Counters that accumulate over scenario time (energy, violation time,
//! GPM activity, NVLink bytes and errors).
//!
//! Each counter is the integral of a rate from t = 0 to t, computed with a
//! fixed 1 s left-Riemann step, so its value is a pure, monotonic function of
//! t. The running integral is a `Checkpoints` sequence (a checkpoint every
//! `CHECKPOINT` steps, the newest step and the last one read behind it), so a
//! call is O(1) amortized, also when callers ask for earlier times.

use super::checkpoints::Checkpoints;
use std::sync::Mutex;

/// Integration step, scenario seconds.
pub const STEP: f64 = 1.0;
/// Steps between stored checkpoints.
const CHECKPOINT: u64 = 256;
/// Newest integration steps kept: none (a window's start is the previous
/// window's end, at the cursor, or a step read behind it).
const RECENT: usize = 0;

/// A vector of counter values: what an [`Integrator`] accumulates.
pub trait Accumulator: Clone {
    /// `self += other × k`, component-wise.
    fn add_scaled(&mut self, other: &Self, k: f64);
    /// `self ×= k`, component-wise.
    fn scale(&mut self, k: f64);
}

impl<const N: usize> Accumulator for [f64; N] {
    fn add_scaled(&mut self, other: &Self, k: f64) {
        for (a, v) in self.iter_mut().zip(other) {
            *a += v * k;
        }
    }

    fn scale(&mut self, k: f64) {
        self.iter_mut().for_each(|a| *a *= k);
    }
}

impl Accumulator for Vec<f64> {
    fn add_scaled(&mut self, other: &Self, k: f64) {
        for (a, v) in self.iter_mut().zip(other) {
            *a += v * k;
        }
    }

    fn scale(&mut self, k: f64) {
        self.iter_mut().for_each(|a| *a *= k);
    }
}

/// Integrates a vector-valued rate function over scenario time.
#[derive(Debug)]
pub struct Integrator<A> {
    state: Mutex<State<A>>,
}

#[derive(Debug)]
struct State<A> {
    /// The integral over [0, k × STEP] at step k.
    integral: Checkpoints<A, CHECKPOINT, RECENT>,
    /// The rate at the last step it was evaluated at: a window's end is
    /// the next window's start, so each step's rate would otherwise be
    /// evaluated twice or three times (the partial step of I(t1), the full
    /// step to I(t2), the partial step of the next window's I(t1)).
    rate_at: RateAt<A>,
}

/// The rate at one step, kept.
#[derive(Debug)]
struct RateAt<A>(Option<(u64, A)>);

impl<A: Clone> RateAt<A> {
    /// The rate at `step`, evaluated once per step in a row.
    fn rate(&mut self, step: u64, rate: &impl Fn(f64) -> A) -> A {
        match &self.0 {
            Some((at, r)) if *at == step => r.clone(),
            _ => {
                let r = rate(step as f64 * STEP);
                self.0 = Some((step, r.clone()));
                r
            }
        }
    }
}

impl<const N: usize> Default for Integrator<[f64; N]> {
    fn default() -> Self {
        Integrator::new([0.0; N])
    }
}

impl<A: Accumulator> Integrator<A> {
    /// An integrator whose counters start at `zero` (which fixes their number).
    pub fn new(zero: A) -> Self {
        Integrator {
            state: Mutex::new(State {
                integral: Checkpoints::new(zero),
                rate_at: RateAt(None),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<A>> {
        match self.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// ∫₀ᵗ rate(s) ds, component-wise; `rate` must be deterministic in s
    /// (and the same function on every call: its values are cached).
    pub fn integral(&self, t: f64, rate: impl Fn(f64) -> A) -> A {
        let t = t.max(0.0);
        let k = (t / STEP).floor() as u64;
        let mut guard = self.lock();
        let State { integral, rate_at } = &mut *guard;
        let mut acc = integral.at(k, |acc, step| {
            acc.add_scaled(&rate_at.rate(step, &rate), STEP);
        });
        let partial = t - k as f64 * STEP;
        if partial > 0.0 {
            acc.add_scaled(&rate_at.rate(k, &rate), partial);
        }
        acc
    }

    /// The time-average of `rate` over [t1, t2]: (I(t2) − I(t1)) / (t2 − t1).
    /// When t1 = t2 it is the rate the integral grows with at t1 (the limit
    /// of the average as the window shrinks); `None` when t2 < t1.
    pub fn average(&self, t1: f64, t2: f64, rate: impl Fn(f64) -> A) -> Option<A> {
        if t2 < t1 {
            return None;
        }
        if t2 == t1 {
            let step = (t1.max(0.0) / STEP).floor() as u64;
            return Some(self.lock().rate_at.rate(step, &rate));
        }
        // t1 first: a caller averaging consecutive windows ([t0, t1], then
        // [t1, t2]) finds I(t1) at the cursor and steps forward to t2 only.
        // Asking t2 first moved the cursor past t1, so I(t1) was read behind
        // it: from the last read behind or a checkpoint.
        let start = self.integral(t1, &rate);
        let mut avg = self.integral(t2, &rate);
        avg.add_scaled(&start, -1.0);
        avg.scale(1.0 / (t2 - t1));
        Some(avg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrates_constant_and_step_rates() {
        let i = Integrator::<[f64; 2]>::default();
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
        let i = Integrator::<[f64; 1]>::default();
        let rate = |s: f64| [(s / 7.0).sin().abs()];
        let mut prev = 0.0;
        for n in 0..2000 {
            let v = i.integral(n as f64 * 0.37, rate)[0];
            assert!(v >= prev);
            prev = v;
        }
    }

    #[test]
    fn consecutive_windows_step_forward_without_walking_back() {
        // GPM and NVLink averages come one window after the other ([t0, t1],
        // [t1, t2], ...): each must cost a few rate evaluations, not a walk
        // from the last checkpoint.
        let i = Integrator::<[f64; 1]>::default();
        let calls = std::cell::Cell::new(0u32);
        let rate = |s: f64| {
            calls.set(calls.get() + 1);
            [s]
        };
        assert!(i.average(1000.0, 1001.0, rate).is_some());
        for t in 1001..1100 {
            calls.set(0);
            let (t1, t2) = (f64::from(t), f64::from(t + 1));
            assert_eq!(i.average(t1, t2, rate), Some([t1]));
            assert!(
                calls.get() <= 2,
                "window at {t1} evaluated the rate {} times",
                calls.get()
            );
        }
    }

    #[test]
    fn windows_that_start_behind_the_cursor_step_on_from_the_last_one() {
        // A second reader's window starts 10 s back, after the first moved
        // the cursor to "now": its start is read behind the cursor, one
        // step on from its previous start, not from the last checkpoint.
        let i = Integrator::<[f64; 1]>::default();
        let calls = std::cell::Cell::new(0u32);
        let rate = |s: f64| {
            calls.set(calls.get() + 1);
            [s]
        };
        for t in 1000..1100 {
            let t = f64::from(t);
            assert_eq!(i.average(t - 1.0, t, rate), Some([t - 1.0]));
            calls.set(0);
            assert_eq!(i.average(t - 10.0, t, rate), Some([t - 5.5]));
            assert!(
                t == 1000.0 || calls.get() <= 2,
                "window [{}, {t}] evaluated the rate {} times",
                t - 10.0,
                calls.get()
            );
        }
    }

    #[test]
    fn averages_are_exact_for_steps_and_the_rate_at_zero_width() {
        let i = Integrator::new(vec![0.0, 0.0]);
        let rate = |s: f64| vec![if s >= 60.0 { 100.0 } else { 0.0 }, 7.0];
        assert_eq!(i.average(30.0, 90.0, rate), Some(vec![50.0, 7.0]));
        assert_eq!(i.average(60.0, 60.0, rate), Some(vec![100.0, 7.0]));
        assert_eq!(i.average(59.5, 59.5, rate), Some(vec![0.0, 7.0]));
        assert_eq!(i.average(90.0, 30.0, rate), None);
    }
}
