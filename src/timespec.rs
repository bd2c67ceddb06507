//! Checked times, durations and counts from outside: HTTP query parameters
//! and bodies, command-line arguments. Everything a person or a client
//! writes goes through here once, so that the rest of the agent only sees
//! values in a range it can compute with (no overflow, no division by zero,
//! no time that cannot be formatted).
//!
//! - [`Timestamp`]: a point in time from 1970-01-01T00:00:00Z to
//!   9999-12-31T23:59:59.999Z (the years RFC 3339 can write), in ms since
//!   the Unix epoch. [`Timestamp::parse`] reads `now`, `-1h` / `6h` (that
//!   long ago), RFC 3339 or Unix seconds.
//! - [`parse_duration`] with a [`DurationRange`] ([`STEP`], [`SILENCE`]).
//! - [`Step`]: a history step, 1 s to 1 year.
//! - [`parse_count`]: a whole number in a range (`limit`).
//! - [`format_rfc3339_ms`] / [`format_rfc3339_seconds`]: total formatting
//!   (values outside the range are clamped, never a panic), for times read
//!   back from the database.
//!
//! Errors ([`SpecError`]) quote the input and say what is accepted; the
//! caller adds the parameter's name.

use std::fmt::{self, Write as _};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The earliest time accepted: 1970-01-01T00:00:00Z, in ms.
pub const EARLIEST_MS: i64 = 0;
/// The latest time accepted: 9999-12-31T23:59:59.999Z, in ms.
pub const LATEST_MS: i64 = 253_402_300_799_999;

/// The range of times, as error messages write it.
const TIME_RANGE: &str = "1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z";

/// The most characters of the input an error message repeats.
const QUOTE_CHARS: usize = 64;

/// What is wrong with a time, duration or count from outside. Each variant
/// quotes the input (shortened and escaped) and says what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Not any of the forms of a time.
    #[error("\"{text}\" is not a time: use now, a duration ago such as -1h or 6h, RFC 3339 such as 2026-11-29T02:00:00Z, or Unix seconds")]
    NotATime {
        /// The input, quoted.
        text: String,
    },
    /// Not an RFC 3339 time (where only that form is accepted).
    #[error("\"{text}\" is not an RFC 3339 time such as 2026-11-29T20:00:00Z")]
    NotRfc3339 {
        /// The input, quoted.
        text: String,
    },
    /// A time before 1970 or after 9999.
    #[error("\"{text}\" is outside the accepted times, {TIME_RANGE}")]
    TimeOutOfRange {
        /// The input, quoted.
        text: String,
    },
    /// Not a duration.
    #[error("\"{text}\" is not a duration: write it like {example}")]
    NotADuration {
        /// The input, quoted.
        text: String,
        /// How to write one, e.g. `30m, 2h or 1d`.
        example: &'static str,
    },
    /// A duration shorter or longer than accepted.
    #[error("\"{text}\" is outside the accepted range, {min} to {max}")]
    DurationOutOfRange {
        /// The input, quoted.
        text: String,
        /// The shortest accepted, e.g. `1s`.
        min: String,
        /// The longest accepted, e.g. `1year`.
        max: String,
    },
    /// Not a whole number.
    #[error("\"{text}\" is not a whole number from {min} to {max}")]
    NotACount {
        /// The input, quoted.
        text: String,
        /// The smallest accepted.
        min: u32,
        /// The largest accepted.
        max: u32,
    },
    /// A number outside the range.
    #[error("\"{text}\" is outside the accepted range, {min} to {max}")]
    CountOutOfRange {
        /// The input, quoted.
        text: String,
        /// The smallest accepted.
        min: u32,
        /// The largest accepted.
        max: u32,
    },
}

/// `text` as error messages repeat it: at most 64 characters (then `…`),
/// control characters and quotes escaped, so a hostile input can neither
/// flood a reply nor break a log line.
pub fn quote(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == QUOTE_CHARS {
            out.push('…');
            break;
        }
        out.extend(c.escape_debug());
    }
    out
}

/// A point in time from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z,
/// in ms since the Unix epoch. Adding or subtracting is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The earliest: 1970-01-01T00:00:00Z.
    pub const EARLIEST: Timestamp = Timestamp(EARLIEST_MS);
    /// The latest: 9999-12-31T23:59:59.999Z.
    pub const LATEST: Timestamp = Timestamp(LATEST_MS);

    /// `ms` since the epoch, if in the range.
    pub const fn from_ms(ms: i64) -> Option<Timestamp> {
        if ms >= EARLIEST_MS && ms <= LATEST_MS {
            Some(Timestamp(ms))
        } else {
            None
        }
    }

    /// `ms` since the epoch, moved into the range.
    pub fn clamped(ms: i64) -> Timestamp {
        Timestamp(ms.clamp(EARLIEST_MS, LATEST_MS))
    }

    /// The system clock now (clamped: a clock before 1970 reads as 1970).
    pub fn now() -> Timestamp {
        Timestamp::of(SystemTime::now())
    }

    /// A `SystemTime`, clamped into the range.
    pub fn of(time: SystemTime) -> Timestamp {
        match time.duration_since(UNIX_EPOCH) {
            Ok(d) => Timestamp::clamped(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            Err(_) => Timestamp::EARLIEST,
        }
    }

    /// Milliseconds since the Unix epoch.
    pub fn as_ms(self) -> i64 {
        self.0
    }

    /// Seconds since the Unix epoch.
    pub fn as_seconds_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// `self + d`, if still in the range.
    pub fn checked_add(self, d: Duration) -> Option<Timestamp> {
        let ms = i64::try_from(d.as_millis()).ok()?;
        Timestamp::from_ms(self.0.checked_add(ms)?)
    }

    /// `self - d`, if still in the range.
    pub fn checked_sub(self, d: Duration) -> Option<Timestamp> {
        let ms = i64::try_from(d.as_millis()).ok()?;
        Timestamp::from_ms(self.0.checked_sub(ms)?)
    }

    /// How long from `earlier` to `self` (zero when `earlier` is later).
    pub fn since(self, earlier: Timestamp) -> Duration {
        // Both in range: the difference fits and is small enough.
        Duration::from_millis(u64::try_from(self.0 - earlier.0).unwrap_or(0))
    }

    /// Parses a time as people write it: `now` (or nothing), a duration ago
    /// (`-1h`, or `6h` meaning the same as `-6h`), RFC 3339
    /// (`2026-11-29T02:00:00Z`), or Unix seconds (`1764381600`,
    /// `1764381600.5`). `now` anchors relative times.
    pub fn parse(text: &str, now: Timestamp) -> Result<Timestamp, SpecError> {
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed == "now" {
            return Ok(now);
        }
        let out_of_range = || SpecError::TimeOutOfRange { text: quote(text) };
        if looks_numeric(trimmed) {
            if let Ok(seconds) = trimmed.parse::<f64>() {
                let ms = (seconds * 1000.0).round();
                // NaN fails both comparisons.
                if !(ms >= EARLIEST_MS as f64 && ms <= LATEST_MS as f64) {
                    return Err(out_of_range());
                }
                return Timestamp::from_ms(ms as i64).ok_or_else(out_of_range);
            }
        }
        let relative = trimmed.strip_prefix('-').unwrap_or(trimmed);
        if let Ok(ago) = humantime::parse_duration(relative) {
            return now.checked_sub(ago).ok_or_else(out_of_range);
        }
        Timestamp::parse_rfc3339(trimmed).map_err(|e| match e {
            SpecError::NotRfc3339 { .. } => SpecError::NotATime { text: quote(text) },
            _ => out_of_range(),
        })
    }

    /// Parses an RFC 3339 time (only that form), e.g. `2026-11-29T20:00:00Z`.
    pub fn parse_rfc3339(text: &str) -> Result<Timestamp, SpecError> {
        let time = humantime::parse_rfc3339_weak(text.trim()).map_err(|e| match e {
            humantime::TimestampError::OutOfRange => {
                SpecError::TimeOutOfRange { text: quote(text) }
            }
            _ => SpecError::NotRfc3339 { text: quote(text) },
        })?;
        // The parser accepts a leap second, which can step past 9999.
        time.duration_since(UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_millis()).ok())
            .and_then(Timestamp::from_ms)
            .ok_or_else(|| SpecError::TimeOutOfRange { text: quote(text) })
    }

    /// RFC 3339 with milliseconds, UTC, e.g. `2026-11-29T20:00:00.000Z`.
    pub fn to_rfc3339_ms(self) -> String {
        self.format(humantime::format_rfc3339_millis)
    }

    /// RFC 3339 in whole seconds, UTC, e.g. `2026-11-29T20:00:00Z`.
    pub fn to_rfc3339_seconds(self) -> String {
        self.format(humantime::format_rfc3339_seconds)
    }

    fn format<F: fmt::Display>(self, how: fn(SystemTime) -> F) -> String {
        // In range, so never negative and never past 9999 (where
        // humantime's Display fails).
        let time = UNIX_EPOCH + Duration::from_millis(u64::try_from(self.0).unwrap_or(0));
        let mut out = String::new();
        match write!(out, "{}", how(time)) {
            Ok(()) => out,
            Err(_) => "9999-12-31T23:59:59Z".to_string(),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339_seconds())
    }
}

/// Whether `text` is written as a plain number (Rust's float parser also
/// takes `inf` and `NaN`, which are no times).
fn looks_numeric(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'+' | b'-' | b'e' | b'E'))
        && text.bytes().any(|b| b.is_ascii_digit())
}

/// Any ms since the epoch as RFC 3339 with milliseconds; a value outside
/// 1970..9999 (a row from an older version) is clamped into it. Never
/// panics.
pub fn format_rfc3339_ms(ms: i64) -> String {
    Timestamp::clamped(ms).to_rfc3339_ms()
}

/// Any Unix seconds as RFC 3339 in whole seconds, clamped like
/// [`format_rfc3339_ms`] (NaN reads as 1970). Never panics.
pub fn format_rfc3339_seconds(seconds: f64) -> String {
    let ms = (seconds * 1000.0).floor();
    let ms = if ms.is_nan() {
        EARLIEST_MS
    } else {
        ms.clamp(EARLIEST_MS as f64, LATEST_MS as f64) as i64
    };
    Timestamp::clamped(ms).to_rfc3339_seconds()
}

/// The durations accepted for one use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationRange {
    /// The shortest.
    pub min: Duration,
    /// The longest.
    pub max: Duration,
    /// How to write one, for the error message.
    pub example: &'static str,
}

/// One year as humantime counts it (`1y` = 365.25 days).
pub const YEAR: Duration = Duration::from_secs(31_557_600);

/// A history step: 1 s to 1 year.
pub const STEP: DurationRange = DurationRange {
    min: Duration::from_secs(1),
    max: YEAR,
    example: "10s, 1m or 1h",
};

/// How long a silence lasts: 1 s to 1 year.
pub const SILENCE: DurationRange = DurationRange {
    min: Duration::from_secs(1),
    max: YEAR,
    example: "30m, 2h or 1d",
};

impl DurationRange {
    /// `d`, if in the range; `text` is what the error quotes.
    pub fn check(&self, d: Duration, text: &str) -> Result<Duration, SpecError> {
        if d < self.min || d > self.max {
            return Err(SpecError::DurationOutOfRange {
                text: quote(text),
                min: humantime::format_duration(self.min).to_string(),
                max: humantime::format_duration(self.max).to_string(),
            });
        }
        Ok(d)
    }
}

/// Parses a duration such as `30s`, `2h`, `1d` or `1h 30m` and checks it
/// against `range`.
pub fn parse_duration(text: &str, range: DurationRange) -> Result<Duration, SpecError> {
    let d = humantime::parse_duration(text.trim()).map_err(|_| SpecError::NotADuration {
        text: quote(text),
        example: range.example,
    })?;
    range.check(d, text)
}

/// A history step: 1 s to 1 year, so a division by it is safe and its
/// milliseconds fit any arithmetic with times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Step(Duration);

impl Step {
    /// Parses a step such as `10s`, `1m` or `1h`.
    pub fn parse(text: &str) -> Result<Step, SpecError> {
        parse_duration(text, STEP).map(Step)
    }

    /// `d`, if it is 1 s to 1 year.
    pub fn new(d: Duration) -> Result<Step, SpecError> {
        STEP.check(d, &humantime::format_duration(d).to_string())
            .map(Step)
    }

    /// The step.
    pub fn get(self) -> Duration {
        self.0
    }

    /// In milliseconds: 1 000 to 31 557 600 000.
    pub fn as_ms(self) -> i64 {
        // At most a year: fits.
        i64::try_from(self.0.as_millis()).unwrap_or(i64::MAX)
    }
}

/// Parses a whole number from `min` to `max` (e.g. a `limit`).
pub fn parse_count(text: &str, min: u32, max: u32) -> Result<u32, SpecError> {
    let trimmed = text.trim();
    if trimmed.is_empty() || !trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SpecError::NotACount {
            text: quote(text),
            min,
            max,
        });
    }
    match trimmed.parse::<u32>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(SpecError::CountOutOfRange {
            text: quote(text),
            min,
            max,
        }),
    }
}

#[cfg(test)]
mod tests;
