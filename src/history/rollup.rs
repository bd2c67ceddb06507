//! Rollup accumulators: fold raw samples into a minute, minutes into an
//! hour, keeping min / max / avg / last per gauge, last per counter or state,
//! and the OR of clock-event bits.

use super::catalog::{Kind, FIELDS};

/// A stored value: what a rollup column holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// An integer column.
    Int(i64),
    /// A REAL column (averages).
    Real(f64),
    /// Not available.
    Null,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct GaugeAcc {
    min: Option<i64>,
    max: Option<i64>,
    /// Sum and count of the values seen (for the average).
    sum: f64,
    count: u64,
    last: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum FieldAcc {
    Gauge(GaugeAcc),
    Last(Option<i64>),
    Bits(Option<i64>),
}

/// One GPU's accumulator for one period.
#[derive(Debug, Clone, PartialEq)]
pub struct Accumulator {
    /// Start of the period, ms since the epoch.
    pub start_ms: i64,
    /// Raw samples folded in.
    pub n: u64,
    /// Samples in which the GPU was up.
    pub up_n: u64,
    fields: Vec<FieldAcc>,
}

impl Accumulator {
    /// An empty accumulator for the period starting at `start_ms`.
    pub fn new(start_ms: i64) -> Self {
        Accumulator {
            start_ms,
            n: 0,
            up_n: 0,
            fields: FIELDS
                .iter()
                .map(|f| match f.kind {
                    Kind::Gauge => FieldAcc::Gauge(GaugeAcc::default()),
                    Kind::Counter | Kind::State => FieldAcc::Last(None),
                    Kind::Bits => FieldAcc::Bits(None),
                })
                .collect(),
        }
    }

    /// Folds in one raw sample: `values` in [`FIELDS`] order, stored units.
    pub fn add_sample(&mut self, up: bool, values: &[Option<i64>]) {
        self.n += 1;
        self.up_n += u64::from(up);
        for (acc, value) in self.fields.iter_mut().zip(values) {
            let Some(v) = *value else { continue };
            match acc {
                FieldAcc::Gauge(g) => {
                    g.min = Some(g.min.map_or(v, |m| m.min(v)));
                    g.max = Some(g.max.map_or(v, |m| m.max(v)));
                    g.sum += v as f64;
                    g.count += 1;
                    g.last = Some(v);
                }
                FieldAcc::Last(last) => *last = Some(v),
                FieldAcc::Bits(bits) => *bits = Some(bits.unwrap_or(0) | v),
            }
        }
    }

    /// Folds in a finished accumulator of a shorter period (a minute into
    /// an hour).
    pub fn merge(&mut self, other: &Accumulator) {
        self.n += other.n;
        self.up_n += other.up_n;
        for (acc, o) in self.fields.iter_mut().zip(&other.fields) {
            match (acc, o) {
                (FieldAcc::Gauge(g), FieldAcc::Gauge(h)) => {
                    g.min = opt(g.min, h.min, i64::min);
                    g.max = opt(g.max, h.max, i64::max);
                    g.sum += h.sum;
                    g.count += h.count;
                    g.last = h.last.or(g.last);
                }
                (FieldAcc::Last(a), FieldAcc::Last(b)) => *a = b.or(*a),
                (FieldAcc::Bits(a), FieldAcc::Bits(b)) => *a = opt(*a, *b, |x, y| x | y),
                _ => {}
            }
        }
    }

    /// The rollup columns, in the order of [`super::catalog::rollup_columns`]
    /// over [`FIELDS`].
    pub fn values(&self) -> Vec<Value> {
        let int = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
        let mut out = Vec::with_capacity(FIELDS.len() * 4);
        for acc in &self.fields {
            match acc {
                FieldAcc::Gauge(g) => {
                    out.push(int(g.min));
                    out.push(int(g.max));
                    out.push(if g.count > 0 {
                        Value::Real(g.sum / g.count as f64)
                    } else {
                        Value::Null
                    });
                    out.push(int(g.last));
                }
                FieldAcc::Last(v) | FieldAcc::Bits(v) => out.push(int(*v)),
            }
        }
        out
    }
}

fn opt(a: Option<i64>, b: Option<i64>, f: impl Fn(i64, i64) -> i64) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(f(a, b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::catalog::rollup_columns;

    fn sample(temp: i64, events: i64, energy: i64) -> Vec<Option<i64>> {
        FIELDS
            .iter()
            .map(|f| match f.column {
                "temp_gpu" => Some(temp),
                "clock_events" => Some(events),
                "energy" => Some(energy),
                _ => None,
            })
            .collect()
    }

    fn column(acc: &Accumulator, name: &str) -> Value {
        let columns: Vec<String> = FIELDS.iter().flat_map(rollup_columns).collect();
        let i = columns
            .iter()
            .position(|c| c == name)
            .expect("column exists");
        acc.values()[i]
    }

    #[test]
    fn gauges_counters_and_bits_roll_up() {
        let mut minute = Accumulator::new(60_000);
        minute.add_sample(true, &sample(60, 0x4, 100));
        minute.add_sample(true, &sample(70, 0x40, 110));
        minute.add_sample(false, &sample(65, 0, 120));
        assert_eq!((minute.n, minute.up_n), (3, 2));
        assert_eq!(column(&minute, "temp_gpu_min"), Value::Int(60));
        assert_eq!(column(&minute, "temp_gpu_max"), Value::Int(70));
        assert_eq!(column(&minute, "temp_gpu_avg"), Value::Real(65.0));
        assert_eq!(column(&minute, "temp_gpu_last"), Value::Int(65));
        assert_eq!(column(&minute, "energy_last"), Value::Int(120));
        assert_eq!(column(&minute, "clock_events_any"), Value::Int(0x44));
        assert_eq!(
            column(&minute, "power_avg"),
            Value::Null,
            "absent stays absent"
        );

        let mut other = Accumulator::new(120_000);
        other.add_sample(true, &sample(50, 0x1, 130));
        let mut hour = Accumulator::new(0);
        hour.merge(&minute);
        hour.merge(&other);
        assert_eq!(hour.n, 4);
        assert_eq!(column(&hour, "temp_gpu_min"), Value::Int(50));
        assert_eq!(column(&hour, "temp_gpu_avg"), Value::Real(61.25));
        assert_eq!(column(&hour, "temp_gpu_last"), Value::Int(50));
        assert_eq!(column(&hour, "energy_last"), Value::Int(130));
        assert_eq!(column(&hour, "clock_events_any"), Value::Int(0x45));
    }
}
