//! The exposition text of gathered families, written straight into one
//! string: the per-GPU part of /metrics, encoded once for each snapshot,
//! which is every scrape Prometheus makes (one every 15 s, a snapshot every
//! second).
//!
//! The bytes are those `prometheus_client`'s encoders write for the same
//! families (the compat sets still go through them, and the scrape
//! benchmark's baseline does), without their per-write buffering through a
//! `dyn Write`, the per-label dispatch, and with whole numbers (most values:
//! bytes, counts, flags, hertz) written by `itoa` instead of the
//! shortest-digits float algorithm.

use std::fmt;

use prometheus_client::metrics::MetricType;

use super::Format;
use crate::families::{Family, Sink};

/// Writes families as exposition text into a string.
#[derive(Debug)]
pub struct TextSink {
    out: String,
    /// The name prefix without its `_` (`gpuwatch`).
    prefix: &'static str,
    format: Format,
}

impl TextSink {
    /// A sink for `format`, naming every family `{prefix}_{name}`, with
    /// room for `capacity` bytes.
    pub fn new(format: Format, prefix: &'static str, capacity: usize) -> TextSink {
        TextSink {
            out: String::with_capacity(capacity),
            prefix,
            format,
        }
    }

    /// The text written so far.
    pub fn finish(self) -> String {
        self.out
    }

    /// `prefix_name[_unit]`.
    fn push_base(&mut self, family: &Family<'_>) {
        self.out.push_str(self.prefix);
        self.out.push('_');
        self.out.push_str(family.name());
        if let Some(unit) = family.unit() {
            self.out.push('_');
            self.out.push_str(unit.as_str());
        }
    }

    /// Label value, escaped as `prometheus_client` does (`\\`, `"`, newline).
    fn push_label_value(&mut self, value: &str) {
        if !value.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
            self.out.push_str(value);
            return;
        }
        for c in value.chars() {
            match c {
                '\\' => self.out.push_str("\\\\"),
                '"' => self.out.push_str("\\\""),
                '\n' => self.out.push_str("\\n"),
                c => self.out.push(c),
            }
        }
    }

    fn push_descriptor(&mut self, family: &Family<'_>) {
        let counter = family.kind() == MetricType::Counter;
        let prometheus = self.format == Format::Prometheus;
        // Text 0.0.4 names a counter's descriptor with `_total`; OpenMetrics
        // without, and adds a UNIT line.
        let total = if counter && prometheus { "_total" } else { "" };
        self.out.push_str("# HELP ");
        self.push_base(family);
        self.out.push_str(total);
        self.out.push(' ');
        let help = family.help();
        if prometheus && help.bytes().any(|b| matches!(b, b'\\' | b'\n')) {
            for c in help.chars() {
                match c {
                    '\\' => self.out.push_str("\\\\"),
                    '\n' => self.out.push_str("\\n"),
                    c => self.out.push(c),
                }
            }
        } else {
            self.out.push_str(help);
        }
        self.out.push_str("\n# TYPE ");
        self.push_base(family);
        self.out.push_str(total);
        self.out.push(' ');
        self.out.push_str(match (family.kind(), prometheus) {
            (MetricType::Counter, _) => "counter",
            (MetricType::Unknown, true) => "untyped",
            (MetricType::Unknown, false) => "unknown",
            _ => "gauge",
        });
        self.out.push('\n');
        if !prometheus {
            if let Some(unit) = family.unit() {
                self.out.push_str("# UNIT ");
                self.push_base(family);
                self.out.push(' ');
                self.out.push_str(unit.as_str());
                self.out.push('\n');
            }
        }
    }
}

impl Sink for TextSink {
    fn family(&mut self, family: &Family<'_>) -> fmt::Result {
        self.push_descriptor(family);
        // The sample name, written once and copied for each series.
        let start = self.out.len();
        self.push_base(family);
        if family.kind() == MetricType::Counter {
            self.out.push_str("_total");
        }
        let name_end = self.out.len();
        let mut first = true;
        for (labels, value) in family.series() {
            if !first {
                self.out.extend_from_within(start..name_end);
            }
            first = false;
            if let Some(((key, value), rest)) = labels.split_first() {
                self.out.push('{');
                self.out.push_str(key);
                self.out.push_str("=\"");
                self.push_label_value(value);
                for (key, value) in rest {
                    self.out.push_str("\",");
                    self.out.push_str(key);
                    self.out.push_str("=\"");
                    self.push_label_value(value);
                }
                self.out.push_str("\"}");
            }
            self.out.push(' ');
            push_float(&mut self.out, *value, self.format);
            self.out.push('\n');
        }
        Ok(())
    }
}

/// The largest magnitude below which every whole f64 is exact as an i64
/// and written by `dtoa` as its digits and `.0` (2^53).
const EXACT: f64 = 9_007_199_254_740_992.0;

/// `value` as `prometheus_client` writes it: `dtoa`'s shortest digits
/// (`1.0`, `0.25`, `1e-7`); non-finite values as `NaN`, `+Inf`, `-Inf` in
/// text 0.0.4 and as `dtoa` spells them in OpenMetrics.
pub fn push_float(out: &mut String, value: f64, format: Format) {
    // Whole numbers (negative zero aside): the integer's digits and ".0",
    // exactly what dtoa writes below 1e16.
    if value.fract() == 0.0 && value.abs() < EXACT && !(value == 0.0 && value.is_sign_negative()) {
        out.push_str(itoa::Buffer::new().format(value as i64));
        out.push_str(".0");
        return;
    }
    if !value.is_finite() && format == Format::Prometheus {
        out.push_str(if value.is_nan() {
            "NaN"
        } else if value.is_sign_positive() {
            "+Inf"
        } else {
            "-Inf"
        });
        return;
    }
    out.push_str(dtoa::Buffer::new().format(value));
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use prometheus_client::collector::Collector;
    use prometheus_client::encoding::DescriptorEncoder;
    use prometheus_client::registry::Registry;

    use super::*;
    use crate::families::{counter, gauge, unit};

    /// Floats `prometheus_client` writes in both formats: whole, fractional,
    /// tiny, huge, negative zero, non-finite, the edges of the fast path.
    const VALUES: &[f64] = &[
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        0.1,
        1e-7,
        123.456,
        81_559_289_856.0,
        1e15,
        1e16,
        1e17,
        1e21,
        1e22,
        9_007_199_254_740_991.0,
        9_007_199_254_740_992.0,
        -9_007_199_254_740_993.0,
        1.7976931348623157e308,
        f64::MIN_POSITIVE,
        5e-324,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];

    #[derive(Debug)]
    struct Families(Vec<(&'static str, MetricType, Option<&'static str>, &'static str)>);

    fn gather(
        spec: &(&'static str, MetricType, Option<&'static str>, &'static str),
    ) -> Family<'static> {
        let (name, kind, unit_name, help) = *spec;
        let mut f = match kind {
            MetricType::Counter => counter(name, help, unit_name.and_then(unit)),
            MetricType::Unknown => Family::untyped(name, help),
            _ => gauge(name, help, unit_name.and_then(unit)),
        };
        if name == "empty" {
            return f;
        }
        for (i, value) in VALUES.iter().enumerate() {
            let mut labels = vec![("gpu", crate::families::number(i as u32))];
            if i % 3 == 1 {
                labels.push(("odd", Cow::Borrowed("a \"quoted\" \\ back\nslash")));
            }
            if i % 5 == 2 {
                labels.clear();
            }
            f.push(labels, *value);
        }
        f
    }

    impl Collector for Families {
        fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
            for spec in &self.0 {
                gather(spec).encode(&mut encoder)?;
            }
            Ok(())
        }
    }

    fn specs() -> Families {
        Families(vec![
            ("temp", MetricType::Gauge, Some("celsius"), "A gauge."),
            (
                "ratio_thing",
                MetricType::Gauge,
                Some("ratio"),
                "Help with \\ and\nnewline.",
            ),
            ("errors", MetricType::Counter, None, "A counter."),
            (
                "energy",
                MetricType::Counter,
                Some("joules"),
                "A counter with a unit.",
            ),
            ("DCGM_LIKE", MetricType::Unknown, None, "Untyped."),
            ("empty", MetricType::Gauge, None, "No series: left out."),
        ])
    }

    #[test]
    fn writes_the_bytes_prometheus_client_writes_in_both_formats() {
        let families = specs();
        let mut registry = Registry::with_prefix("gpuwatch");
        registry.register_collector(Box::new(specs()));
        for format in [Format::Prometheus, Format::OpenMetrics] {
            let mut expected = String::new();
            match format {
                Format::Prometheus => {
                    prometheus_client::encoding::prometheus_text::encode(&mut expected, &registry)
                }
                Format::OpenMetrics => {
                    prometheus_client::encoding::text::encode_registry(&mut expected, &registry)
                }
            }
            .expect("encodes");
            let mut sink = TextSink::new(format, "gpuwatch", 0);
            for spec in &families.0 {
                gather(spec).encode(&mut sink).expect("writes");
            }
            let got = sink.finish();
            assert!(
                expected.contains(
                    "gpuwatch_errors_total{gpu=\"1\",odd=\"a \\\"quoted\\\" \\\\ back\\nslash\"}"
                ),
                "{expected}"
            );
            assert_eq!(got, expected, "{format:?}");
        }
    }

    #[test]
    fn floats_as_dtoa_writes_them() {
        for value in VALUES
            .iter()
            .copied()
            .chain((0..2000).map(|i| f64::from(i) * 0.37 - 300.0))
        {
            let mut fast = String::new();
            push_float(&mut fast, value, Format::OpenMetrics);
            assert_eq!(fast, dtoa::Buffer::new().format(value), "{value:e}");
        }
    }
}
