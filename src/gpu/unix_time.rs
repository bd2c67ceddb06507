//! Times as the snapshot, history and outbox write them: seconds or
//! milliseconds since the Unix epoch (a leaf, so that every part of the
//! snapshot can use it).

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, as a float (0 for times before it).
pub fn unix_seconds_f64(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Milliseconds since the Unix epoch (0 for times before it): how the
/// history, alert and outbox tables store times.
pub fn unix_ms(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// [`unix_ms`] of now.
pub fn now_ms() -> i64 {
    unix_ms(SystemTime::now())
}

pub(crate) fn unix_seconds<S: serde::Serializer>(
    time: &SystemTime,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_f64(unix_seconds_f64(*time))
}
