//! Clocks of a simulated GPU: current and maximum clocks, clock-event
//! reasons (from the timeline or derived from load, power and temperature),
//! and the counters accumulated over time from them (energy, violation time).

use super::{GpuSim, COUNTERS};
use crate::engine::Unavailable;
use crate::scenario::Feature;

/// Clock-event reason bits (nvmlClocksEventReason*).
pub mod reasons {
    /// GPU idle.
    pub const IDLE: u64 = 0x1;
    /// Application clocks setting.
    pub const APPLICATIONS_CLOCKS: u64 = 0x2;
    /// Software power cap.
    pub const SW_POWER_CAP: u64 = 0x4;
    /// Hardware slowdown.
    pub const HW_SLOWDOWN: u64 = 0x8;
    /// Sync boost.
    pub const SYNC_BOOST: u64 = 0x10;
    /// Software thermal slowdown.
    pub const SW_THERMAL: u64 = 0x20;
    /// Hardware thermal slowdown.
    pub const HW_THERMAL: u64 = 0x40;
    /// Hardware power brake slowdown.
    pub const HW_POWER_BRAKE: u64 = 0x80;
    /// Display clock setting.
    pub const DISPLAY_CLOCK: u64 = 0x100;
    /// Every bit the simulator knows.
    pub const ALL: u64 = 0x1FF;
}

/// Which accumulated counter to read (see [`GpuSim::violation_ns`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    /// Time with one reason bit set (must be a single bit of 0x1..0x80).
    Reason(u64),
    /// Power policy: SW power cap or HW power brake.
    PowerPolicy,
    /// Thermal policy: SW or HW thermal slowdown.
    ThermalPolicy,
}

impl GpuSim {
    /// Clock event reason bits at `t` (timeline OR-ed with auto reasons).
    fn reasons_raw(&self, t: f64) -> u64 {
        let mut bits = self
            .signals
            .clocks_event_reasons
            .as_ref()
            .map_or(0, |s| s.eval(t).max(0.0).round() as u64)
            & reasons::ALL;
        let spec = self.spec();
        if spec.auto_reasons {
            if self.util_gpu(t) < 1.0 {
                bits |= reasons::IDLE;
            }
            if self.power_w(t) >= 0.98 * spec.power_limit_w {
                bits |= reasons::SW_POWER_CAP;
            }
            let temp = self.temp_gpu(t);
            let slowdown = f64::from(spec.temp_slowdown_c);
            if temp >= slowdown - 3.0 {
                bits |= reasons::SW_THERMAL;
            }
            if temp >= slowdown {
                bits |= reasons::HW_THERMAL;
            }
        }
        bits
    }

    fn counters(&self, t: f64) -> [f64; COUNTERS] {
        self.counters.integral(t, |s| {
            let bits = self.reasons_raw(s);
            let on = |mask: u64| if bits & mask != 0 { 1.0 } else { 0.0 };
            [
                self.power_w(s),
                on(0x1),
                on(0x2),
                on(0x4),
                on(0x8),
                on(0x10),
                on(0x20),
                on(0x40),
                on(0x80),
                on(reasons::SW_POWER_CAP | reasons::HW_POWER_BRAKE),
                on(reasons::SW_THERMAL | reasons::HW_THERMAL),
            ]
        })
    }

    /// Energy since t = 0, mJ (monotonic).
    pub fn energy_mj(&self, t: f64) -> Result<u64, Unavailable> {
        self.gated(Feature::Energy, t, || (self.counters(t)[0] * 1000.0) as u64)
    }

    /// Accumulated violation time, ns (monotonic).
    pub fn violation_ns(&self, which: Violation, t: f64) -> Result<u64, Unavailable> {
        self.check(Some(Feature::Violation), t)?;
        let slot = match which {
            Violation::Reason(bit) if bit.is_power_of_two() && bit <= 0x80 => {
                1 + bit.trailing_zeros() as usize
            }
            Violation::Reason(_) => return Err(Unavailable::NotSupported),
            Violation::PowerPolicy => 9,
            Violation::ThermalPolicy => 10,
        };
        Ok((self.counters(t)[slot] * 1e9) as u64)
    }

    /// Current clock (0 graphics, 1 SM, 2 memory, 3 video), MHz.
    pub fn clock_mhz(&self, clock: u32, t: f64) -> Result<u32, Unavailable> {
        self.check(Some(Feature::Clocks), t)?;
        let s = self.spec();
        let max_graphics = s.max_graphics_clock_mhz.unwrap_or(s.max_sm_clock_mhz);
        let busy = self.util_gpu(t) >= 1.0;
        let throttled = self.reasons_raw(t)
            & (reasons::HW_SLOWDOWN | reasons::HW_THERMAL | reasons::HW_POWER_BRAKE)
            != 0;
        let default_core = |max: u32| {
            let base = if busy {
                f64::from(max)
            } else {
                345.0_f64.min(f64::from(max))
            };
            if throttled {
                base * 0.5
            } else {
                base
            }
        };
        let value = match clock {
            0 => self
                .signals
                .graphics_clock_mhz
                .as_ref()
                .map_or_else(|| default_core(max_graphics), |x| x.eval(t)),
            1 => self
                .signals
                .sm_clock_mhz
                .as_ref()
                .map_or_else(|| default_core(s.max_sm_clock_mhz), |x| x.eval(t)),
            2 => self
                .signals
                .mem_clock_mhz
                .as_ref()
                .map_or(f64::from(s.max_mem_clock_mhz), |x| x.eval(t)),
            3 => default_core(s.max_video_clock_mhz),
            _ => return Err(Unavailable::InvalidArgument),
        };
        Ok(value.max(0.0).round() as u32)
    }

    /// Maximum clock (0 graphics, 1 SM, 2 memory, 3 video), MHz.
    pub fn max_clock_mhz(&self, clock: u32, t: f64) -> Result<u32, Unavailable> {
        self.check(Some(Feature::MaxClocks), t)?;
        let s = self.spec();
        match clock {
            0 => Ok(s.max_graphics_clock_mhz.unwrap_or(s.max_sm_clock_mhz)),
            1 => Ok(s.max_sm_clock_mhz),
            2 => Ok(s.max_mem_clock_mhz),
            3 => Ok(s.max_video_clock_mhz),
            _ => Err(Unavailable::InvalidArgument),
        }
    }

    /// Clock event reasons bitmask.
    pub fn clocks_event_reasons(&self, t: f64) -> Result<u64, Unavailable> {
        self.gated(Feature::ClocksEventReasons, t, || self.reasons_raw(t))
    }

    /// Supported clock event reasons bitmask.
    pub fn supported_clocks_event_reasons(&self, t: f64) -> Result<u64, Unavailable> {
        self.gated(Feature::ClocksEventReasons, t, || reasons::ALL)
    }
}
