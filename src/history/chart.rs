//! A one-line chart of a series for the terminal, so a trend shows at a glance.

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Draws `values` as a sparkline at most `width` characters wide (values
/// are averaged into columns; a gap is a space).
pub fn sparkline(values: &[Option<f64>], width: usize) -> String {
    if values.is_empty() || width == 0 {
        return String::new();
    }
    let columns = width.min(values.len());
    let per = values.len() as f64 / columns as f64;
    let mut buckets: Vec<Option<f64>> = Vec::with_capacity(columns);
    for c in 0..columns {
        let start = (c as f64 * per) as usize;
        let end = (((c + 1) as f64 * per) as usize).clamp(start + 1, values.len());
        let seen: Vec<f64> = values[start..end].iter().flatten().copied().collect();
        buckets.push((!seen.is_empty()).then(|| seen.iter().sum::<f64>() / seen.len() as f64));
    }
    let known = buckets.iter().flatten();
    let lo = known.clone().copied().fold(f64::INFINITY, f64::min);
    let hi = known.copied().fold(f64::NEG_INFINITY, f64::max);
    buckets
        .iter()
        .map(|b| match b {
            None => ' ',
            Some(_) if (hi - lo).abs() < f64::EPSILON => BARS[3],
            Some(v) => BARS[(((v - lo) / (hi - lo)) * 7.0).round() as usize],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_ramp_gaps_and_flat_lines() {
        let ramp: Vec<Option<f64>> = (0..8).map(|v| Some(f64::from(v))).collect();
        assert_eq!(sparkline(&ramp, 8), "▁▂▃▄▅▆▇█");
        assert_eq!(sparkline(&ramp, 4), "▁▃▆█");
        assert_eq!(sparkline(&[Some(1.0), None, Some(3.0)], 10), "▁ █");
        assert_eq!(sparkline(&[Some(5.0), Some(5.0)], 10), "▄▄");
        assert_eq!(sparkline(&[], 10), "");
    }
}
