//! Timelines: how one metric evolves over scenario time, as a scenario file
//! writes it.
//!
//! A timeline is either a number (a constant) or an inline table with
//! exactly one shape key, e.g. `{ ramp = { from = 30, to = 80, start = "1m",
//! duration = "10m" } }`. [`TimelineSpec`] is the parsed, checked form; the
//! engine compiles it into a seeded [`Signal`](crate::engine::signal::Signal).

use crate::duration::Duration;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;

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

#[cfg(test)]
#[path = "timeline_tests.rs"]
mod tests;
