//! Times and steps as people write them: `now`, `-1h` / `6h` (that long
//! ago), RFC 3339 (`2026-11-29T02:00:00Z`), or Unix seconds.

use std::time::Duration;

/// Parses a point in time; `now_ms` anchors relative times. Returns ms
/// since the epoch.
pub fn parse_time(text: &str, now_ms: i64) -> Result<i64, String> {
    let text = text.trim();
    if text.is_empty() || text == "now" {
        return Ok(now_ms);
    }
    if let Ok(seconds) = text.parse::<f64>() {
        if seconds.is_finite() && seconds >= 0.0 {
            return Ok((seconds * 1000.0) as i64);
        }
    }
    let relative = text.strip_prefix('-').unwrap_or(text);
    if let Ok(ago) = humantime::parse_duration(relative) {
        return Ok(now_ms - ago.as_millis() as i64);
    }
    match humantime::parse_rfc3339_weak(text) {
        Ok(time) => Ok(time
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)),
        Err(_) => Err(format!(
            "\"{text}\" is not a time: use now, a duration ago such as -1h or 6h, RFC 3339 such as 2026-11-29T02:00:00Z, or Unix seconds"
        )),
    }
}

/// Parses a step such as `1m`; at least one second.
pub fn parse_step(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text.trim()) {
        Ok(step) if step >= Duration::from_secs(1) => Ok(step),
        Ok(_) => Err(format!("\"{text}\" is shorter than the smallest step, 1s")),
        Err(_) => Err(format!(
            "\"{text}\" is not a step: write it like 10s, 1m or 1h"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_every_form() {
        let now = 1_800_000_000_000;
        assert_eq!(parse_time("now", now), Ok(now));
        assert_eq!(parse_time("-1h", now), Ok(now - 3_600_000));
        assert_eq!(parse_time("6h", now), Ok(now - 6 * 3_600_000));
        assert_eq!(parse_time("1700000000", now), Ok(1_700_000_000_000));
        assert_eq!(
            parse_time("2026-11-29T02:00:00Z", now),
            Ok(1_795_917_600_000)
        );
        assert!(parse_time("yesterday-ish", now)
            .unwrap_err()
            .contains("RFC 3339"));
        assert_eq!(parse_step("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_step("10ms").is_err());
    }
}
