//! Step lists of named states: `state = "completed"` or
//! `state = [["0s", "in_progress"], ["30s", "completed"]]` — what a
//! timeline is for numbers, for values that are names (fabric state,
//! recovery action).

use crate::duration::Duration;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// A value that changes at given scenario times.
#[derive(Debug, Clone, PartialEq)]
pub struct Steps<T> {
    /// (start time in seconds, value), in increasing time order.
    points: Vec<(f64, T)>,
}

impl<T> Steps<T> {
    /// A value that never changes.
    pub fn constant(value: T) -> Self {
        Steps {
            points: vec![(0.0, value)],
        }
    }

    /// The value at scenario time `t`: the last point at or before `t`, or
    /// the first point before it starts.
    pub fn at(&self, t: f64) -> &T {
        let index = self
            .points
            .iter()
            .rposition(|(at, _)| *at <= t)
            .unwrap_or(0);
        &self.points[index].1
    }

    /// Every value the list takes.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.points.iter().map(|(_, v)| v)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Steps<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StepsVisitor(std::marker::PhantomData))
    }
}

/// Reads either one value (a constant) or a list of `[time, value]` pairs,
/// keeping the value type's own error messages (e.g. the names it accepts).
struct StepsVisitor<T>(std::marker::PhantomData<T>);

impl<T> StepsVisitor<T> {
    fn one<E>(value: T) -> Result<Steps<T>, E> {
        Ok(Steps::constant(value))
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for StepsVisitor<T> {
    type Value = Steps<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value or a list of [time, value] pairs such as [[\"0s\", a], [\"30s\", b]]")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Steps<T>, E> {
        Self::one(T::deserialize(de::value::StrDeserializer::new(v))?)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Steps<T>, E> {
        Self::one(T::deserialize(de::value::BoolDeserializer::new(v))?)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Steps<T>, E> {
        Self::one(T::deserialize(de::value::I64Deserializer::new(v))?)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Steps<T>, E> {
        Self::one(T::deserialize(de::value::U64Deserializer::new(v))?)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Steps<T>, A::Error> {
        let mut points = Vec::new();
        while let Some((at, value)) = seq.next_element::<(Duration, T)>()? {
            points.push((at.secs(), value));
        }
        if points.is_empty() {
            return Err(de::Error::custom(
                "a step list needs at least one [time, value] pair",
            ));
        }
        if points.windows(2).any(|w| w[1].0 < w[0].0) {
            return Err(de::Error::custom("step times must be in increasing order"));
        }
        Ok(Steps { points })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct W {
        v: Steps<String>,
    }

    fn parse(src: &str) -> Result<Steps<String>, String> {
        toml::from_str::<W>(src)
            .map(|w| w.v)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_constant_or_a_list_of_steps() {
        let one = parse("v = \"completed\"").expect("constant");
        assert_eq!(one.at(1e9), "completed");
        let list = parse("v = [[\"0s\", \"a\"], [\"30s\", \"b\"]]").expect("list");
        assert_eq!(
            (list.at(0.0), list.at(29.9), list.at(30.0)),
            (&"a".into(), &"a".into(), &"b".into())
        );
        let late = parse("v = [[\"10s\", \"a\"]]").expect("late start");
        assert_eq!(late.at(0.0), "a");
    }

    #[test]
    fn rejects_empty_and_unordered_lists() {
        assert!(parse("v = []").is_err());
        let e = parse("v = [[\"30s\", \"a\"], [\"10s\", \"b\"]]").expect_err("unordered");
        assert!(e.contains("increasing"), "{e}");
        assert!(parse("v = [[\"soon\", \"a\"]]").is_err());
    }
}
