//! The Prometheus exporter: a `prometheus_client` [`Collector`] that encodes
//! the latest snapshot at scrape time. A scrape never calls NVML and holds no
//! lock while it encodes: it clones the snapshot's `Arc` and lets go.

pub mod compat;
pub mod families;
pub mod gpm_metrics;
#[macro_use]
pub mod gpu_metrics;
pub mod process_metrics;
pub mod self_metrics;

use std::fmt;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use crate::sampler::SnapshotReceiver;

/// Which exposition format to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4: the default, and what `promtool check
    /// metrics` reads.
    Prometheus,
    /// OpenMetrics 1.0 text, for scrapers that ask for it.
    OpenMetrics,
}

impl Format {
    /// Picks the format from an HTTP `Accept` header.
    pub fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The `Content-Type` of this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// Encodes the latest snapshot on each scrape.
#[derive(Debug)]
struct SnapshotCollector {
    snapshots: SnapshotReceiver,
    stale_after: Duration,
    processes: process_metrics::ProcessExport,
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let snapshot = self.snapshots.borrow().clone();
        self_metrics::encode(snapshot.as_deref(), self.stale_after, &mut encoder)?;
        if let Some(snapshot) = snapshot {
            gpu_metrics::encode(&snapshot, &self.processes, &mut encoder)?;
        }
        Ok(())
    }
}

#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        self_metrics::encode_process(&mut encoder)
    }
}

/// The registry /metrics encodes: `gpuwatch_*` from the snapshot, plus the
/// standard `process_*` families.
#[derive(Debug)]
pub struct Exporter {
    registry: Registry,
}

impl Exporter {
    /// An exporter reading `snapshots`; a snapshot older than `stale_after`
    /// makes `gpuwatch_up` 0.
    pub fn new(snapshots: SnapshotReceiver, stale_after: Duration) -> Exporter {
        Exporter::with_processes(snapshots, stale_after, Default::default())
    }

    /// [`Exporter::new`] with the process cap and capacity profiles of the
    /// configuration.
    pub fn with_processes(
        snapshots: SnapshotReceiver,
        stale_after: Duration,
        processes: process_metrics::ProcessExport,
    ) -> Exporter {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ProcessCollector));
        registry
            .sub_registry_with_prefix("gpuwatch")
            .register_collector(Box::new(SnapshotCollector {
                snapshots,
                stale_after,
                processes,
            }));
        Exporter { registry }
    }

    /// Adds another component's `gpuwatch_*` metrics (e.g. the history
    /// writer's), encoded at scrape time like the snapshot's.
    pub fn with(mut self, collector: Box<dyn Collector>) -> Exporter {
        self.registry
            .sub_registry_with_prefix("gpuwatch")
            .register_collector(collector);
        self
    }

    /// Also exports the drop-in families of other exporters (`sets`; see
    /// [`compat`]), unprefixed, from the same snapshots.
    pub fn with_compat(
        mut self,
        snapshots: SnapshotReceiver,
        sets: Vec<compat::MetricsCompat>,
    ) -> Exporter {
        if !sets.is_empty() {
            self.registry
                .register_collector(Box::new(compat::CompatCollector::new(snapshots, sets)));
        }
        self
    }

    /// Encodes every metric in `format`.
    pub fn render(&self, format: Format) -> Result<String, fmt::Error> {
        let mut out = String::with_capacity(64 * 1024);
        match format {
            Format::Prometheus => {
                prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?
            }
            Format::OpenMetrics => {
                prometheus_client::encoding::text::encode(&mut out, &self.registry)?
            }
        }
        Ok(out)
    }
}
