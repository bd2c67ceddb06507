//! Timelines: how one metric evolves over scenario time.
//!
//! In a scenario file a timeline is either a number (a constant) or an inline
//! table with exactly one shape key, e.g. `{ ramp = { from = 30, to = 80,
//! start = "1m", duration = "10m" } }`. [`TimelineSpec`] is the parsed form;
//! [`Signal`] is the compiled, seeded form the engine evaluates.

use crate::duration::Duration;
use crate::rng;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::sync::Mutex;

/// A parsed timeline, as written in a scenario file.
#[derive(Debug, Clone, PartialEq)]
pub enum TimelineSpec {
    /// A bare number: the value never changes.
    Const(f64),
    /// One of the shapes.
    Shape(Shape),
}

/// The shapes a timeline can take (`{ <shape> = ... }` in TOML).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Shape {
    /// `{ const = 42 }`.
    Const(f64),
    /// Linear move from `from` to `to` between `start` and `start + duration`.
    Ramp(Ramp),
    /// Piecewise constant: `[["0s", 10], ["30s", 90]]`; the value before the
    /// first point is the first value.
    Step(Vec<(Duration, f64)>),
    /// A sine wave between `min` and `max`.
    Sine(Sine),
    /// A square wave: `high` for `duty` of each `period`, `low` otherwise.
    Square(Square),
    /// A seeded random walk, deterministic in t.
    RandomWalk(RandomWalk),
    /// The sum of several timelines (e.g. a shape plus noise).
    Sum(Vec<TimelineSpec>),
}

/// Parameters of a ramp.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ramp {
    /// Value before `start`.
    pub from: f64,
    /// Value after `start + duration`.
    pub to: f64,
    /// When the ramp begins (default 0s).
    #[serde(default)]
    pub start: Duration,
    /// How long the ramp lasts.
    pub duration: Duration,
}

/// Parameters of a sine wave.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sine {
    /// Lowest value.
    pub min: f64,
    /// Highest value.
    pub max: f64,
    /// Length of one cycle.
    pub period: Duration,
    /// Time offset of the cycle (default 0s): at t = -phase the wave is at its midpoint, rising.
    #[serde(default)]
    pub phase: Duration,
}

/// Parameters of a square wave.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Square {
    /// Value outside the high part of each period.
    pub low: f64,
    /// Value during the first `duty` fraction of each period.
    pub high: f64,
    /// Length of one cycle.
    pub period: Duration,
    /// Fraction of the period spent high, 0..1 (default 0.5).
    #[serde(default = "half")]
    pub duty: f64,
}

fn half() -> f64 {
    0.5
}

/// Parameters of a random walk.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomWalk {
    /// Value at t = 0.
    pub start: f64,
    /// Lower bound (the walk reflects off it).
    pub min: f64,
    /// Upper bound (the walk reflects off it).
    pub max: f64,
    /// Largest change per step.
    pub step: f64,
    /// Time between steps (default 1s); values are interpolated in between.
    #[serde(default = "one_second")]
    pub every: Duration,
}

fn one_second() -> Duration {
    Duration(1.0)
}

impl<'de> Deserialize<'de> for TimelineSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SpecVisitor;
        impl<'de> Visitor<'de> for SpecVisitor {
            type Value = TimelineSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or a table with one of const, ramp, step, sine, square, random_walk, sum")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<TimelineSpec, E> {
                Ok(TimelineSpec::Const(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<TimelineSpec, E> {
                Ok(TimelineSpec::Const(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<TimelineSpec, E> {
                Ok(TimelineSpec::Const(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TimelineSpec, A::Error> {
                Shape::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(TimelineSpec::Shape)
            }
        }
        deserializer.deserialize_any(SpecVisitor)
    }
}

impl TimelineSpec {
    /// Checks parameters that the type system cannot (periods > 0, min ≤ max...).
    pub fn validate(&self) -> Result<(), String> {
        let shape = match self {
            TimelineSpec::Const(v) => return finite(*v),
            TimelineSpec::Shape(shape) => shape,
        };
        match shape {
            Shape::Const(v) => finite(*v),
            Shape::Ramp(r) => finite(r.from).and(finite(r.to)),
            Shape::Step(points) => {
                if points.is_empty() {
                    return Err("step needs at least one [time, value] point".into());
                }
                if points.windows(2).any(|w| w[1].0 .0 < w[0].0 .0) {
                    return Err("step points must be in increasing time order".into());
                }
                points.iter().try_for_each(|(_, v)| finite(*v))
            }
            Shape::Sine(s) => {
                positive(s.period.secs(), "sine period")?;
                ordered(s.min, s.max)
            }
            Shape::Square(s) => {
                positive(s.period.secs(), "square period")?;
                if !(0.0..=1.0).contains(&s.duty) {
                    return Err(format!("square duty must be within 0..1, got {}", s.duty));
                }
                finite(s.low).and(finite(s.high))
            }
            Shape::RandomWalk(w) => {
                positive(w.every.secs(), "random_walk every")?;
                ordered(w.min, w.max)?;
                if !(w.min..=w.max).contains(&w.start) {
                    return Err(format!("random_walk start {} is outside min..max", w.start));
                }
                finite(w.step)
            }
            Shape::Sum(parts) => {
                if parts.is_empty() {
                    return Err("sum needs at least one timeline".into());
                }
                parts.iter().try_for_each(TimelineSpec::validate)
            }
        }
    }
}

fn finite(v: f64) -> Result<(), String> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(format!("value {v} is not a finite number"))
    }
}

fn positive(v: f64, what: &str) -> Result<(), String> {
    if v > 0.0 {
        Ok(())
    } else {
        Err(format!("{what} must be greater than zero"))
    }
}

fn ordered(min: f64, max: f64) -> Result<(), String> {
    finite(min)?;
    finite(max)?;
    if min <= max {
        Ok(())
    } else {
        Err(format!("min ({min}) must not exceed max ({max})"))
    }
}

/// How many walk steps separate two cached checkpoints.
const WALK_CHECKPOINT: u64 = 1024;

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
    Walk(RandomWalk, u64, Mutex<WalkCache>),
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
                SignalKind::Walk(w.clone(), seed, Mutex::new(WalkCache::new(w.start)))
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

/// What a random walk remembers: a checkpoint every `WALK_CHECKPOINT`
/// steps (for going back in time), the last step computed (so a clock
/// that moves forward costs only the new steps) and the values of the
/// `WALK_RECENT` steps up to it. Callers a few steps behind the newest one
/// (the GPM integrator sums whole seconds just behind the fast tier's
/// "now") read those instead of walking again from a checkpoint: up to
/// `WALK_CHECKPOINT` steps per read.
#[derive(Debug)]
pub struct WalkCache {
    checkpoints: Vec<f64>,
    last: (u64, f64),
    /// `recent[s % WALK_RECENT]` is the value at step `s`, for the steps in
    /// `recent_from..=last.0` (at most `WALK_RECENT` of them).
    recent: [f64; WALK_RECENT as usize],
    recent_from: u64,
}

/// How many of the newest walk steps a [`WalkCache`] keeps.
const WALK_RECENT: u64 = 8;

impl WalkCache {
    fn new(start: f64) -> Self {
        WalkCache {
            checkpoints: vec![start],
            last: (0, start),
            recent: [start; WALK_RECENT as usize],
            recent_from: 0,
        }
    }

    /// The value at step `k`, where it is one of the newest steps kept.
    fn recent(&self, k: u64) -> Option<f64> {
        (k >= self.recent_from && k <= self.last.0).then(|| self.recent[(k % WALK_RECENT) as usize])
    }
}

/// Random walk value at `t`: step `k` moves by `step * u` (u uniform in -1..1),
/// reflecting at the bounds; linear interpolation between steps.
fn walk(w: &RandomWalk, seed: u64, cache: &Mutex<WalkCache>, t: f64) -> f64 {
    let pos = t.max(0.0) / w.every.secs();
    let k = pos.floor() as u64;
    let frac = pos - k as f64;
    let value_at = |k: u64, cache: &mut WalkCache| -> f64 {
        if let Some(v) = cache.recent(k) {
            return v;
        }
        // Forward from the newest step (each step is kept as recent), or
        // from the checkpoint below k (nothing kept: the newest stay).
        let forward = cache.last.0 <= k;
        let (mut step, mut v) = if forward {
            cache.last
        } else {
            let idx = (cache.checkpoints.len() as u64 - 1).min(k / WALK_CHECKPOINT);
            (idx * WALK_CHECKPOINT, cache.checkpoints[idx as usize])
        };
        while step < k {
            v = reflect(
                v + w.step * (2.0 * rng::unit(seed, step) - 1.0),
                w.min,
                w.max,
            );
            step += 1;
            if step % WALK_CHECKPOINT == 0
                && (step / WALK_CHECKPOINT) as usize == cache.checkpoints.len()
            {
                cache.checkpoints.push(v);
            }
            if forward {
                cache.recent[(step % WALK_RECENT) as usize] = v;
            }
        }
        if forward {
            cache.last = (k, v);
            cache.recent_from = cache.recent_from.max((k + 1).saturating_sub(WALK_RECENT));
        }
        v
    };
    let mut cache = match cache.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    let a = value_at(k, &mut cache);
    if frac == 0.0 {
        return a;
    }
    let b = value_at(k + 1, &mut cache);
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
#[path = "timeline_tests.rs"]
mod tests;
