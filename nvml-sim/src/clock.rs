//! Scenario time: t = start + real seconds since the first nvmlInit × speed,
//! or a frozen t when `GPUWATCH_SIM_TIME` is set.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Real-time origin: the first nvmlInit of the process.
static ORIGIN: OnceLock<Instant> = OnceLock::new();

/// Scenario time set by a test (`nvmlSimSetTime`), as f64 bits; NaN: none.
static SET_TIME: AtomicU64 = AtomicU64::new(f64::NAN.to_bits());

/// Pins scenario time at `t` (tests step time exactly); `None` lets the
/// clock run (or stay frozen) as configured again.
pub fn set_time(t: Option<f64>) {
    SET_TIME.store(t.unwrap_or(f64::NAN).to_bits(), Ordering::Relaxed);
}

fn time_set() -> Option<f64> {
    let t = f64::from_bits(SET_TIME.load(Ordering::Relaxed));
    (!t.is_nan()).then_some(t)
}

/// How scenario time relates to real time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SimClock {
    /// Time is frozen at this many seconds.
    Frozen(f64),
    /// t = start + elapsed real seconds × speed.
    Running {
        /// Scenario time at the origin.
        start: f64,
        /// Scenario seconds per real second.
        speed: f64,
    },
}

impl SimClock {
    /// Reads the env vars (`ENV_TIME`, `ENV_START`, `ENV_SPEED`); `scenario_speed`
    /// applies when `ENV_SPEED` is unset. Also pins the real-time origin.
    pub fn from_env(scenario_speed: f64) -> Result<SimClock, String> {
        ORIGIN.get_or_init(Instant::now);
        set_time(None);
        if let Some(t) = env_f64(crate::ENV_TIME)? {
            return Ok(SimClock::Frozen(t.max(0.0)));
        }
        let start = env_f64(crate::ENV_START)?.unwrap_or(0.0).max(0.0);
        let speed = env_f64(crate::ENV_SPEED)?.unwrap_or(scenario_speed);
        if speed <= 0.0 {
            return Err(format!("{} must be positive", crate::ENV_SPEED));
        }
        Ok(SimClock::Running { start, speed })
    }

    /// Real time until `scenario_seconds` of scenario time have passed;
    /// `None` when time is frozen or set by a test (it never passes).
    pub fn real_delay(&self, scenario_seconds: f64) -> Option<std::time::Duration> {
        if time_set().is_some() {
            return None;
        }
        match *self {
            SimClock::Frozen(_) => None,
            SimClock::Running { speed, .. } => Some(std::time::Duration::from_secs_f64(
                scenario_seconds.max(0.0) / speed,
            )),
        }
    }

    /// Current scenario time, seconds (the time a test set, if any).
    pub fn now(&self) -> f64 {
        if let Some(t) = time_set() {
            return t;
        }
        match *self {
            SimClock::Frozen(t) => t,
            SimClock::Running { start, speed } => {
                let elapsed = ORIGIN.get_or_init(Instant::now).elapsed().as_secs_f64();
                start + elapsed * speed
            }
        }
    }
}

fn env_f64(name: &str) -> Result<Option<f64>, String> {
    match std::env::var(name) {
        Ok(text) if text.trim().is_empty() => Ok(None),
        Ok(text) => match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(Some(v)),
            _ => crate::duration::parse_duration(&text)
                .map(Some)
                .map_err(|_| format!("{name}={text:?} is not a number of seconds")),
        },
        Err(_) => Ok(None),
    }
}
