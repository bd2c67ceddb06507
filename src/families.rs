//! A thin layer over `prometheus_client`'s descriptor encoder: one call
//! encodes a whole family from a list of series, and an empty family is left
//! out (absent is not zero).

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use crate::gpu::GpuSnapshot;

/// A label set: keys are static, values borrow from the snapshot where they can.
pub type Labels<'a> = Vec<(&'static str, Cow<'a, str>)>;

/// One family's samples, gathered before encoding.
pub struct Family<'a> {
    name: &'static str,
    help: &'static str,
    unit: Option<Unit>,
    kind: MetricType,
    series: Vec<(Labels<'a>, f64)>,
}

impl<'a> Family<'a> {
    /// A gauge family.
    pub fn gauge(name: &'static str, help: &'static str, unit: Option<Unit>) -> Self {
        Family {
            name,
            help,
            unit,
            kind: MetricType::Gauge,
            series: Vec::new(),
        }
    }

    /// A counter family (the encoder appends `_total`).
    pub fn counter(name: &'static str, help: &'static str, unit: Option<Unit>) -> Self {
        Family {
            kind: MetricType::Counter,
            ..Family::gauge(name, help, unit)
        }
    }

    /// An untyped family (`untyped` in text 0.0.4, `unknown` in
    /// OpenMetrics): its samples keep the exact name, with no `_total`. For
    /// another exporter's counters whose names lack `_total` (the drop-in
    /// `DCGM_FI_*` names), which a counter family cannot keep.
    pub fn untyped(name: &'static str, help: &'static str) -> Self {
        Family {
            kind: MetricType::Unknown,
            ..Family::gauge(name, help, None)
        }
    }

    /// Adds one series.
    pub fn push(&mut self, labels: Labels<'a>, value: f64) {
        self.series.push((labels, value));
    }

    /// Adds one series when the value is known.
    pub fn push_some(&mut self, labels: Labels<'a>, value: Option<f64>) {
        if let Some(value) = value {
            self.push(labels, value);
        }
    }

    /// Writes the family; nothing when it has no series.
    pub fn encode(&self, sink: &mut impl Sink) -> fmt::Result {
        if self.series.is_empty() {
            return Ok(());
        }
        sink.family(self)
    }

    /// The name, without prefix, unit or `_total`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The help text.
    pub fn help(&self) -> &'static str {
        self.help
    }

    /// The unit, appended to the name.
    pub fn unit(&self) -> Option<&Unit> {
        self.unit.as_ref()
    }

    /// Gauge, counter or untyped.
    pub fn kind(&self) -> MetricType {
        self.kind
    }

    /// The series gathered, in order.
    pub fn series(&self) -> &[(Labels<'a>, f64)] {
        &self.series
    }
}

/// Where families are written: `prometheus_client`'s encoder (the compat
/// sets, the other components' collectors), or the direct text writer of
/// the per-GPU part (`exporter::text::TextSink`); both write the same bytes.
pub trait Sink {
    /// Writes one family that has series.
    fn family(&mut self, family: &Family<'_>) -> fmt::Result;
}

impl Sink for DescriptorEncoder<'_> {
    fn family(&mut self, f: &Family<'_>) -> fmt::Result {
        let mut family = self.encode_descriptor(f.name, f.help, f.unit.as_ref(), f.kind)?;
        for (labels, value) in &f.series {
            let metric = family.encode_family(labels)?;
            match f.kind {
                MetricType::Counter => ConstCounter::new(*value).encode(metric)?,
                _ => ConstGauge::new(*value).encode(metric)?,
            }
        }
        Ok(())
    }
}

/// Declares `struct Families`: one [`Family`] per entry, `new()` building
/// each, and `encode()` writing them in the order written. An entry reads
/// `field: constructor(arguments)`; the constructor is a function in the
/// calling module's scope ([`gauge`] and [`counter`] here, or the module's
/// own, as the compatibility families define theirs), so each table names
/// its families in its own terms.
macro_rules! families {
    ($( $field:ident: $constructor:ident($($argument:expr),* $(,)?) ),* $(,)?) => {
        struct Families<'a> { $( $field: $crate::families::Family<'a>, )* }
        impl<'a> Families<'a> {
            fn new() -> Self {
                Families { $( $field: $constructor($($argument),*), )* }
            }
            fn encode(
                &self,
                encoder: &mut impl $crate::families::Sink,
            ) -> ::std::fmt::Result {
                $( self.$field.encode(encoder)?; )*
                Ok(())
            }
        }
    };
}
pub(crate) use families;

/// A gauge family: `Family::gauge` by the name the `families!` tables use.
pub fn gauge<'a>(name: &'static str, help: &'static str, unit: Option<Unit>) -> Family<'a> {
    Family::gauge(name, help, unit)
}

/// A counter family: `Family::counter` by the name the `families!` tables use.
pub fn counter<'a>(name: &'static str, help: &'static str, unit: Option<Unit>) -> Family<'a> {
    Family::counter(name, help, unit)
}

/// `Unit::Other` for units prometheus_client has no variant for.
pub fn unit(name: &str) -> Option<Unit> {
    Some(match name {
        "bytes" => Unit::Bytes,
        "celsius" => Unit::Celsius,
        "joules" => Unit::Joules,
        "seconds" => Unit::Seconds,
        other => Unit::Other(other.to_string()),
    })
}

/// The `gpu` and `uuid` labels every GPU series carries, with room for
/// the two more most series add ([`with`]).
pub fn ids(gpu: &GpuSnapshot) -> Labels<'_> {
    let mut labels = Vec::with_capacity(4);
    labels.push(("gpu", number(gpu.index)));
    labels.push(("uuid", Cow::Borrowed(gpu.uuid.as_str())));
    labels
}

/// A number as a label value: GPU, link, engine and instance numbers are
/// small, so those below 100 are borrowed from a table instead of allocated
/// for each series of each encoding (thousands per scrape on 8 GPUs).
pub fn number(n: u32) -> Cow<'static, str> {
    static SMALL: LazyLock<Vec<String>> =
        LazyLock::new(|| (0..100).map(|n| n.to_string()).collect());
    match SMALL.get(n as usize) {
        Some(text) => Cow::Borrowed(text.as_str()),
        None => Cow::Owned(n.to_string()),
    }
}

/// `labels` with one more label.
pub fn with<'a>(
    mut labels: Labels<'a>,
    key: &'static str,
    value: impl Into<Cow<'a, str>>,
) -> Labels<'a> {
    labels.push((key, value.into()));
    labels
}

/// An optional text as a label value, borrowed: empty when unknown (a
/// label is there or not for the whole family, not per series).
pub fn text(value: &Option<String>) -> Cow<'_, str> {
    Cow::Borrowed(value.as_deref().unwrap_or(""))
}

/// 1 for true, 0 for false.
pub fn flag(value: bool) -> f64 {
    if value {
        1.0
    } else {
        0.0
    }
}

/// The `uuid` label value of the nvidia_smi compatibility families: "GPU-ABC..." becomes "abc...".
pub fn uuid_label(uuid: &str) -> String {
    let lower = uuid.to_ascii_lowercase();
    lower
        .strip_prefix("gpu-")
        .map(str::to_string)
        .unwrap_or(lower)
}
