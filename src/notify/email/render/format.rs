//! Text formatting for the email: HTML escaping, URL encoding, numbers
//! with units, times.

use std::time::{Duration, UNIX_EPOCH};

use crate::outbox::details::HistorySummary;

/// Escapes text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes a URL query value.
pub(super) fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A number without noise: 90, 0.95, 1.5e9 → "1500000000".
pub(super) fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

pub(super) fn with_unit(v: f64, unit: &str) -> String {
    let n = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.1}");
        s.trim_end_matches(".0").to_string()
    };
    match unit {
        "" => n,
        "%" | "°C" => format!("{n} {unit}").replace(" %", "%"),
        _ => format!("{n} {unit}"),
    }
}

pub(super) fn minutes(h: &HistorySummary) -> String {
    format!("{} min", ((h.to - h.from) / 60.0).round())
}

/// "18:42 UTC" for Unix seconds.
pub(super) fn clock(unix: f64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs_f64(unix.max(0.0));
    let text = humantime::format_rfc3339_seconds(t).to_string();
    // 2026-11-29T18:42:05Z
    text.get(11..16)
        .map(|hm| format!("{hm} UTC"))
        .unwrap_or(text)
}
