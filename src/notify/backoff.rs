//! How long a receiver's dispatcher waits before it tries a message again:
//! exponential from `min` to `max`, each delay spread ±20 % so that agents
//! restarted together do not retry in step.

use std::time::Duration;

/// The spread around each delay (±20 %).
const JITTER: f64 = 0.2;

/// A validated backoff: `0 < min <= max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    min: Duration,
    max: Duration,
}

/// Why two retry delays make no backoff.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackoffError {
    /// `min` is 0.
    #[error("the shortest retry delay must be more than 0")]
    ZeroMin,
    /// `max < min`.
    #[error("the longest retry delay ({}) is shorter than the shortest ({})", humantime::format_duration(*.max), humantime::format_duration(*.min))]
    Inverted {
        /// The shortest delay.
        min: Duration,
        /// The longest delay.
        max: Duration,
    },
}

impl Backoff {
    /// Checks `0 < min <= max`.
    pub fn new(min: Duration, max: Duration) -> Result<Backoff, BackoffError> {
        if min.is_zero() {
            return Err(BackoffError::ZeroMin);
        }
        if max < min {
            return Err(BackoffError::Inverted { min, max });
        }
        Ok(Backoff { min, max })
    }

    /// The delay after `attempts` failed attempts (1 for the first failure):
    /// `min * 2^(attempts - 1)`, at most `max`, times `1 ± 20 %` as `unit`
    /// (a random number in [0, 1)) says.
    pub fn delay(&self, attempts: u32, unit: f64) -> Duration {
        let doublings = attempts.saturating_sub(1).min(40);
        let base = self
            .min
            .saturating_mul(1u32 << doublings.min(31))
            .min(self.max);
        let unit = if unit.is_finite() {
            unit.clamp(0.0, 1.0)
        } else {
            0.5
        };
        base.mul_f64(1.0 + JITTER * (2.0 * unit - 1.0))
    }
}

impl Default for Backoff {
    /// 1 s up to 5 min.
    fn default() -> Self {
        Backoff {
            min: Duration::from_secs(1),
            max: Duration::from_secs(300),
        }
    }
}

/// A random number in [0, 1) from the system's generator.
pub fn random_unit() -> f64 {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 8];
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_min_up_to_max() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(300)).unwrap();
        let mid = |n| b.delay(n, 0.5);
        assert_eq!(mid(1), Duration::from_secs(1));
        assert_eq!(mid(2), Duration::from_secs(2));
        assert_eq!(mid(5), Duration::from_secs(16));
        assert_eq!(mid(9), Duration::from_secs(256));
        assert_eq!(mid(10), Duration::from_secs(300));
        assert_eq!(mid(1000), Duration::from_secs(300));
        assert_eq!(mid(0), Duration::from_secs(1));
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        let b = Backoff::new(Duration::from_secs(10), Duration::from_secs(10)).unwrap();
        assert_eq!(b.delay(3, 0.0), Duration::from_secs(8));
        assert_eq!(b.delay(3, 1.0), Duration::from_secs(12));
        assert_eq!(b.delay(3, f64::NAN), Duration::from_secs(10));
        for _ in 0..1000 {
            let d = b.delay(1, random_unit());
            assert!(
                d >= Duration::from_secs(8) && d <= Duration::from_secs(12),
                "{d:?}"
            );
        }
    }

    #[test]
    fn rejects_zero_and_inverted_bounds() {
        assert!(Backoff::new(Duration::ZERO, Duration::from_secs(1)).is_err());
        let e = Backoff::new(Duration::from_secs(2), Duration::from_secs(1)).unwrap_err();
        assert!(e.to_string().contains("shorter"), "{e}");
    }
}
