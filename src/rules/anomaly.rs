//! Cheap, robust temperature anomaly detection, as two derived values the
//! conditions `temperature_anomaly(MARGIN)` and `peer_hotter(MARGIN)` test:
//!
//! - **Own baseline**: per GPU and utilization bucket (five buckets of 20 %),
//!   an exponentially weighted mean of the temperature and of its absolute
//!   deviation (a time constant of 30 minutes, whatever the sampling
//!   interval). The value is how far the temperature is above the mean
//!   beyond four mean absolute deviations (≈ 3 σ), so that a noisy GPU needs
//!   a larger jump. A bucket must have been observed for 10 minutes (warm-up)
//!   before it judges anything, and an anomalous sample does not move the
//!   baseline (a slowly failing fan is not learnt as normal).
//! - **Peers**: how much hotter a GPU is than the median of the other GPUs of
//!   the node at similar utilization (within 15 points), with at least two
//!   such peers: the classic failing-fan case.
//!
//! Load changes move a GPU to another bucket (and its peers with it); the
//! temperature lags the load by a minute or two, which the rules' hold of
//! several minutes rides out.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::gpu::{GpuSnapshot, Snapshot};

/// Time constant of the baseline averages.
pub const TIME_CONSTANT: Duration = Duration::from_secs(30 * 60);
/// How long a utilization bucket must be observed before it judges.
pub const WARM_UP: Duration = Duration::from_secs(10 * 60);
/// Mean absolute deviations above the mean that are still normal.
pub const DEVIATIONS: f64 = 4.0;
/// Utilization difference within which two GPUs count as peers.
pub const PEER_UTILIZATION: f64 = 0.15;
/// Fewest peers for a comparison.
pub const MIN_PEERS: usize = 2;
/// °C above the band beyond which a sample is learnt ten times slower.
pub const LEARN_LIMIT: f64 = 3.0;
/// A bucket not observed for this long starts again.
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// Longest gap between samples credited to warm-up (a stopped agent does
/// not warm a bucket up).
const MAX_STEP: Duration = Duration::from_secs(60);

/// The baseline of one utilization bucket of one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// Mean temperature, °C.
    pub mean: f64,
    /// Mean absolute deviation from it, °C.
    pub deviation: f64,
    /// Time observed so far (warm-up), seconds.
    pub observed_seconds: f64,
    /// When it was last updated.
    pub updated: SystemTime,
}

/// The utilization bucket (0..=4) of a ratio.
pub fn bucket(utilization: f64) -> u8 {
    (utilization.clamp(0.0, 1.0) * 5.0).floor().min(4.0) as u8
}

/// How a temperature compares with its bucket's baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    /// Temperature minus the baseline mean, °C.
    pub above_mean: f64,
    /// The normal band above the mean: [`DEVIATIONS`] mean absolute
    /// deviations, °C.
    pub band: f64,
}

impl Score {
    /// Whether the temperature is above the band and at least `margin`
    /// above the mean.
    pub fn is_anomalous(&self, margin: f64) -> bool {
        self.above_mean > self.band.max(margin)
    }
}

/// Scores `temperature` against the bucket's baseline, then updates it;
/// `None` while the bucket warms up. `at` is the snapshot's time:
/// evaluating the same snapshot twice changes nothing. A sample more than
/// [`LEARN_LIMIT`] above the band is learnt ten times slower, so that a
/// failing fan is not taken as normal within the hold, yet a lasting change
/// (a warmer room) is absorbed within hours.
pub fn observe(
    baselines: &mut BTreeMap<u8, Baseline>,
    utilization: f64,
    temperature: f64,
    at: SystemTime,
) -> Option<Score> {
    let fresh = Baseline {
        mean: temperature,
        deviation: 0.0,
        observed_seconds: 0.0,
        updated: at,
    };
    let slot = baselines.entry(bucket(utilization)).or_insert(fresh);
    let step = at.duration_since(slot.updated).unwrap_or(Duration::ZERO);
    if step > FORGET_AFTER {
        // Not seen for long: this bucket starts again.
        *slot = fresh;
        return None;
    }
    let score = Score {
        above_mean: temperature - slot.mean,
        band: DEVIATIONS * slot.deviation,
    };
    let warm = slot.observed_seconds >= WARM_UP.as_secs_f64();
    let mut alpha = 1.0 - (-step.as_secs_f64() / TIME_CONSTANT.as_secs_f64()).exp();
    // While young, a plain running mean: the first samples (maybe taken
    // while the temperature still lags a load change) weigh no more than
    // the others.
    let credited = step.min(MAX_STEP).as_secs_f64();
    if slot.observed_seconds + credited > 0.0 {
        alpha = alpha.max(credited / (slot.observed_seconds + credited));
    }
    if warm && score.above_mean > score.band + LEARN_LIMIT {
        alpha /= 10.0;
    }
    slot.mean += alpha * score.above_mean;
    slot.deviation += alpha * (score.above_mean.abs() - slot.deviation);
    slot.observed_seconds += credited;
    slot.updated = at;
    warm.then_some(score)
}

/// For each GPU that is up with a temperature and a utilization: how many °C
/// it is above the median of its peers at similar utilization (`None` with
/// fewer than [`MIN_PEERS`] peers).
pub fn peer_excess(snapshot: &Snapshot) -> BTreeMap<String, f64> {
    let readings: Vec<(&GpuSnapshot, f64, f64)> = snapshot
        .gpus
        .iter()
        .filter(|g| g.is_up())
        .filter_map(|g| {
            Some((
                g,
                g.readings.utilization_gpu_ratio?,
                g.readings.temperature_gpu_celsius?,
            ))
        })
        .collect();
    let mut out = BTreeMap::new();
    for (gpu, utilization, temperature) in &readings {
        let mut peers: Vec<f64> = readings
            .iter()
            .filter(|(other, u, _)| {
                other.index != gpu.index && (u - utilization).abs() <= PEER_UTILIZATION
            })
            .map(|(_, _, t)| *t)
            .collect();
        if peers.len() < MIN_PEERS {
            continue;
        }
        peers.sort_by(f64::total_cmp);
        let middle = peers.len() / 2;
        let median = if peers.len().is_multiple_of(2) {
            (peers[middle - 1] + peers[middle]) / 2.0
        } else {
            peers[middle]
        };
        out.insert(gpu.alert_key(), temperature - median);
    }
    out
}
