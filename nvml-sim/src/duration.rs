//! Human-friendly durations used throughout scenario files: `"90s"`, `"5m"`,
//! `"1h30m"`, `"250ms"`, or a bare number of seconds.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

/// A non-negative span of scenario time, stored in seconds.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Duration(pub f64);

impl Duration {
    /// The duration in seconds.
    pub fn secs(self) -> f64 {
        self.0
    }
}

/// Parses `"1h30m"`, `"90s"`, `"250ms"`, `"1.5s"`, `"2d"` into seconds.
pub fn parse_duration(text: &str) -> Result<f64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    let mut total = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!(
                "invalid duration `{text}`: expected a number before the unit"
            ));
        }
        let number: f64 = rest[..num_len].parse().map_err(|_| {
            format!(
                "invalid duration `{text}`: bad number `{}`",
                &rest[..num_len]
            )
        })?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            "" => {
                return Err(format!(
                    "invalid duration `{text}`: missing unit (ms, s, m, h, d)"
                ))
            }
            other => {
                return Err(format!(
                    "invalid duration `{text}`: unknown unit `{other}` (use ms, s, m, h, d)"
                ))
            }
        };
        total += number * scale;
    }
    Ok(total)
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;
        impl Visitor<'_> for DurationVisitor {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as \"90s\", \"5m\", \"1h30m\", \"250ms\" or a number of seconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                parse_duration(v).map(Duration).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
                self.visit_f64(v as f64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
                if v.is_finite() && v >= 0.0 {
                    Ok(Duration(v))
                } else {
                    Err(E::custom(
                        "a duration must be a finite, non-negative number of seconds",
                    ))
                }
            }
        }
        deserializer.deserialize_any(DurationVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn parses_compound_durations() {
        assert_eq!(parse_duration("90s"), Ok(90.0));
        assert_eq!(parse_duration("5m"), Ok(300.0));
        assert_eq!(parse_duration("1h30m"), Ok(5400.0));
        assert_eq!(parse_duration("250ms"), Ok(0.25));
        assert_eq!(parse_duration("1.5s"), Ok(1.5));
    }

    #[test]
    fn rejects_bad_durations() {
        assert!(parse_duration("").is_err());
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("m").is_err());
    }
}
