//! A GPU's utilization averaged over the last five minutes: the
//! `utilization_avg_5m` reading of rule conditions, Prometheus's
//! `avg_over_time(gpuwatch_gpu_utilization_ratio[5m])`.
//!
//! NVML's utilization of a busy GPU wanders by a few percent from one
//! second to the next; a rule on the raw reading near its threshold flaps
//! between pending and inactive and never holds long enough to fire. The
//! average moves slowly. Samples are summed in 10 s buckets (30 of them), so
//! the memory is small and cheap to copy and save on each evaluation.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// How far back the average reaches.
pub const WINDOW: Duration = Duration::from_secs(300);
/// Width of one bucket, seconds.
const BUCKET_SECS: u64 = 10;
/// Buckets in the window.
const BUCKETS: u64 = WINDOW.as_secs() / BUCKET_SECS;

/// Samples of the last [`WINDOW`], summed per 10 s bucket. Saved with the
/// evaluation state, so a restart keeps the average (buckets older than the
/// window, counted from the newest sample, drop out on the next sample).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowAverage {
    /// (bucket number since the epoch, sum, samples), oldest first.
    buckets: VecDeque<(u64, f64, u32)>,
    /// When the last sample was taken: the same snapshot evaluated again
    /// (the 15 s timer that notices a hung sampler) is not counted twice.
    last: Option<SystemTime>,
}

impl WindowAverage {
    /// Adds the sample `value` taken at `at`; buckets older than the window
    /// (counted from the newest) are dropped. A sample older than the newest
    /// bucket (the clock stepped back) counts in the newest.
    pub fn add(&mut self, at: SystemTime, value: f64) {
        if !value.is_finite() || self.last == Some(at) {
            return;
        }
        self.last = Some(at);
        let bucket = at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / BUCKET_SECS);
        match self.buckets.back_mut() {
            Some((newest, sum, count)) if *newest >= bucket => {
                *sum += value;
                *count += 1;
            }
            _ => self.buckets.push_back((bucket, value, 1)),
        }
        let newest = self.buckets.back().map_or(bucket, |b| b.0);
        while self
            .buckets
            .front()
            .is_some_and(|(b, _, _)| *b + BUCKETS <= newest)
        {
            self.buckets.pop_front();
        }
    }

    /// The average of the samples in the window; `None` without any.
    pub fn average(&self) -> Option<f64> {
        let (sum, count) = self
            .buckets
            .iter()
            .fold((0.0, 0u32), |(s, n), (_, sum, count)| (s + sum, n + count));
        (count > 0).then(|| sum / f64::from(count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_000_000 + s)
    }

    #[test]
    fn averages_the_last_five_minutes_only() {
        let mut w = WindowAverage::default();
        assert_eq!(w.average(), None);
        for s in 0..300 {
            w.add(at(s), 0.2);
        }
        assert!((w.average().unwrap_or(0.0) - 0.2).abs() < 1e-9);
        // Five more minutes at 0.8 push the 0.2 samples out.
        for s in 300..600 {
            w.add(at(s), 0.8);
        }
        assert!((w.average().unwrap_or(0.0) - 0.8).abs() < 1e-9);
        assert!(w.buckets.len() as u64 <= BUCKETS);
    }

    #[test]
    fn a_clock_stepping_back_counts_in_the_newest_bucket() {
        let mut w = WindowAverage::default();
        w.add(at(100), 1.0);
        w.add(at(50), 0.0);
        assert_eq!(w.average(), Some(0.5));
        assert_eq!(w.buckets.len(), 1);
        w.add(at(200), f64::NAN);
        assert_eq!(w.average(), Some(0.5));
        // The same snapshot evaluated again counts once.
        w.add(at(50), 0.0);
        assert_eq!(w.average(), Some(0.5));
    }
}
