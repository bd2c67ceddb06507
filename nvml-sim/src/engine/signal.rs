//! Signals: timelines compiled for the engine — a [`TimelineSpec`] bound to
//! a seed, evaluable at any scenario time. A random walk's values are a
//! `Checkpoints` sequence, like a counter's integral.

use super::checkpoints::Checkpoints;
use crate::rng;
use crate::scenario::timeline::{Ramp, RandomWalk, Shape, Sine, Square, TimelineSpec};
use std::sync::Mutex;

/// How many walk steps separate two checkpoints.
const WALK_CHECKPOINT: u64 = 1024;
/// How many of the newest walk steps are kept: callers a few steps behind
/// the newest one (the GPM integrator sums whole seconds just behind the
/// fast tier's "now") read those instead of stepping again.
const WALK_RECENT: usize = 8;

/// A random walk's values, step by step.
type WalkValues = Checkpoints<f64, WALK_CHECKPOINT, WALK_RECENT>;

/// A compiled timeline: a [`TimelineSpec`] bound to a seed, evaluable at any t.
#[derive(Debug)]
pub struct Signal {
    kind: SignalKind,
}

#[derive(Debug)]
enum SignalKind {
    Const(f64),
    Ramp(Ramp),
    Step(Vec<(f64, f64)>),
    Sine(Sine),
    Square(Square),
    Walk(RandomWalk, u64, Mutex<WalkValues>),
    Sum(Vec<Signal>),
}

impl Signal {
    /// Compiles `spec`; `seed` drives random walks (children of a sum get derived seeds).
    pub fn new(spec: &TimelineSpec, seed: u64) -> Signal {
        let kind = match spec {
            TimelineSpec::Const(v) | TimelineSpec::Shape(Shape::Const(v)) => SignalKind::Const(*v),
            TimelineSpec::Shape(Shape::Ramp(r)) => SignalKind::Ramp(r.clone()),
            TimelineSpec::Shape(Shape::Step(p)) => {
                SignalKind::Step(p.iter().map(|(t, v)| (t.secs(), *v)).collect())
            }
            TimelineSpec::Shape(Shape::Sine(s)) => SignalKind::Sine(s.clone()),
            TimelineSpec::Shape(Shape::Square(s)) => SignalKind::Square(s.clone()),
            TimelineSpec::Shape(Shape::RandomWalk(w)) => {
                SignalKind::Walk(w.clone(), seed, Mutex::new(WalkValues::new(w.start)))
            }
            TimelineSpec::Shape(Shape::Sum(parts)) => SignalKind::Sum(
                parts
                    .iter()
                    .enumerate()
                    .map(|(i, p)| Signal::new(p, rng::mix(seed, i as u64 + 1)))
                    .collect(),
            ),
        };
        Signal { kind }
    }

    /// A constant signal.
    pub fn constant(value: f64) -> Signal {
        Signal {
            kind: SignalKind::Const(value),
        }
    }

    /// The value at scenario time `t` (seconds).
    pub fn eval(&self, t: f64) -> f64 {
        match &self.kind {
            SignalKind::Const(v) => *v,
            SignalKind::Ramp(r) => {
                let (start, len) = (r.start.secs(), r.duration.secs());
                if t <= start {
                    r.from
                } else if len <= 0.0 || t >= start + len {
                    r.to
                } else {
                    r.from + (r.to - r.from) * (t - start) / len
                }
            }
            SignalKind::Step(points) => points
                .iter()
                .take_while(|(at, _)| *at <= t)
                .last()
                .or(points.first())
                .map_or(0.0, |(_, v)| *v),
            SignalKind::Sine(s) => {
                let phase = (t + s.phase.secs()) / s.period.secs() * std::f64::consts::TAU;
                let mid = (s.min + s.max) / 2.0;
                mid + (s.max - s.min) / 2.0 * phase.sin()
            }
            SignalKind::Square(s) => {
                let pos = (t / s.period.secs()).rem_euclid(1.0);
                if pos < s.duty {
                    s.high
                } else {
                    s.low
                }
            }
            SignalKind::Walk(w, seed, cache) => walk(w, *seed, cache, t),
            SignalKind::Sum(parts) => parts.iter().map(|p| p.eval(t)).sum(),
        }
    }
}

/// Random walk value at `t`: step `k` moves by `step * u` (u uniform in -1..1),
/// reflecting at the bounds; linear interpolation between steps.
fn walk(w: &RandomWalk, seed: u64, values: &Mutex<WalkValues>, t: f64) -> f64 {
    let pos = t.max(0.0) / w.every.secs();
    let k = pos.floor() as u64;
    let frac = pos - k as f64;
    let next = |v: &mut f64, step: u64| {
        *v = reflect(
            *v + w.step * (2.0 * rng::unit(seed, step) - 1.0),
            w.min,
            w.max,
        );
    };
    let mut values = match values.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    let a = values.at(k, next);
    if frac == 0.0 {
        return a;
    }
    let b = values.at(k + 1, next);
    a + (b - a) * frac
}

fn reflect(v: f64, min: f64, max: f64) -> f64 {
    if v < min {
        (2.0 * min - v).min(max)
    } else if v > max {
        (2.0 * max - v).max(min)
    } else {
        v
    }
}

#[cfg(test)]
#[path = "signal_tests.rs"]
mod tests;
