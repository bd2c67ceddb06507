//! The email's inline SVG chart of the alert's metric history.

use std::fmt::Write as _;

use crate::outbox::details::HistorySummary;

/// A small line chart (inline SVG; clients that drop SVG still have the
/// table and the text sparkline). The GPU's limit, when known and in range,
/// is a dashed line.
pub(super) fn svg(h: &HistorySummary, limit: Option<f64>, colour: &str) -> String {
    const W: f64 = 360.0;
    const H: f64 = 80.0;
    let mut lo = h.min;
    let mut hi = h.max;
    if let Some(l) = limit.filter(|l| (*l - hi).abs() <= (hi - lo).max(1.0)) {
        lo = lo.min(l);
        hi = hi.max(l);
    }
    let span = if (hi - lo).abs() < f64::EPSILON {
        1.0
    } else {
        hi - lo
    };
    let n = h.points.len().max(2) as f64 - 1.0;
    let y = |v: f64| H - 4.0 - (v - lo) / span * (H - 8.0);
    let mut paths = Vec::new();
    let mut current = String::new();
    for (i, p) in h.points.iter().enumerate() {
        match p {
            Some(v) => {
                let _ = write!(
                    current,
                    "{}{:.1},{:.1}",
                    if current.is_empty() { "" } else { " " },
                    i as f64 / n * W,
                    y(*v)
                );
            }
            None if !current.is_empty() => paths.push(std::mem::take(&mut current)),
            None => {}
        }
    }
    if !current.is_empty() {
        paths.push(current);
    }
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" style=\"background:#fafafa;border:1px solid #ddd\">"
    );
    if let Some(l) = limit.filter(|l| *l >= lo && *l <= hi) {
        let _ = write!(
            out,
            "<line x1=\"0\" x2=\"{W}\" y1=\"{0:.1}\" y2=\"{0:.1}\" stroke=\"#c62828\" stroke-dasharray=\"4 3\"/>",
            y(l)
        );
    }
    for points in paths {
        if points.contains(' ') {
            let _ = write!(
                out,
                "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{points}\"/>"
            );
        } else if let Some((x, y)) = points.split_once(',') {
            let _ = write!(
                out,
                "<circle cx=\"{x}\" cy=\"{y}\" r=\"2\" fill=\"{colour}\"/>"
            );
        }
    }
    out.push_str("</svg>\n");
    out
}
