//! The Prometheus exporter: encodes the latest snapshot for /metrics. A
//! scrape never calls NVML and holds no lock while it encodes: it clones the
//! snapshot's `Arc` and lets go.
//!
//! The per-GPU families (and the drop-in compat ones) only change with the
//! snapshot, so they are encoded once per snapshot and format, and gzipped
//! once, then shared by every scrape until the next snapshot (`cache`). The
//! few series that change between scrapes — `process_*`, `gpuwatch_up`,
//! `gpuwatch_snapshot_age_seconds` and the other components' counters — are
//! encoded for each scrape and put in their places, so the body is byte for
//! byte what encoding everything at scrape time gives.

mod cache;
pub mod compat;
pub mod detail;
pub mod fabric_metrics;
pub mod gpm_metrics;
pub mod gpu_metrics;
pub mod gzip;
pub mod process_metrics;
pub mod self_metrics;
#[cfg(test)]
pub(crate) mod tests;
pub mod text;
pub mod workload_metrics;

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Bytes;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use crate::gpu::Snapshot;
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

/// The self metrics of one scrape: `build_info`, `up`, the snapshot's age.
#[derive(Debug)]
struct SelfCollector {
    snapshot: Option<Arc<Snapshot>>,
    stale_after: Duration,
}

impl Collector for SelfCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        self_metrics::encode(self.snapshot.as_deref(), self.stale_after, &mut encoder)
    }
}

/// The per-GPU, process, sharing and capacity families of one snapshot.
#[derive(Debug)]
struct GpuCollector {
    snapshot: Arc<Snapshot>,
    processes: process_metrics::ProcessExport,
    /// Xid escalations for the health verdict, read when the snapshot is
    /// first encoded.
    escalated: crate::health::escalation::Escalated,
    /// The detail sets exported besides the default families.
    detail: detail::Detail,
}

impl Collector for GpuCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        gpu_metrics::encode(
            &self.snapshot,
            &self.processes,
            &self.escalated,
            self.detail,
            &mut encoder,
        )
    }
}

#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        self_metrics::encode_process(&mut encoder)
    }
}

/// A /metrics body.
#[derive(Debug, Clone, PartialEq)]
pub struct Body {
    /// The bytes to send.
    pub bytes: Bytes,
    /// Whether they are gzipped (`Content-Encoding: gzip`).
    pub gzip: bool,
}

/// What /metrics encodes: `process_*`, the drop-in compat families, then
/// `gpuwatch_*` from the snapshot and from the other components.
#[derive(Debug)]
pub struct Exporter {
    snapshots: SnapshotReceiver,
    stale_after: Duration,
    processes: process_metrics::ProcessExport,
    compat: Vec<compat::MetricsCompat>,
    /// dcgm-exporter's `hpc_job` label on the `DCGM_FI_*` series.
    compat_hpc_job: bool,
    /// The `process_*` families, read at each scrape.
    head: Registry,
    /// Other components' `gpuwatch_*` metrics, read at each scrape.
    tail: Registry,
    /// The snapshot's encodings; `None` encodes everything per scrape.
    cache: Option<cache::Cache>,
    /// Xid escalations for `gpuwatch_gpu_health` (none without rules).
    escalations: crate::health::escalation::EscalationSource,
    /// The size of the last encoding of each part fixed for a snapshot.
    fixed_sizes: [SizeHint; 2],
    /// The detail sets exported besides the default families.
    detail: detail::Detail,
    /// Whether the per-GPU part is written by [`text::TextSink`] (false:
    /// through `prometheus_client`'s encoder, the benchmark's baseline).
    direct_text: bool,
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
        let mut head = Registry::default();
        head.register_collector(Box::new(ProcessCollector));
        Exporter {
            snapshots,
            stale_after,
            processes,
            compat: Vec::new(),
            compat_hpc_job: false,
            head,
            tail: Registry::with_prefix("gpuwatch"),
            cache: Some(cache::Cache::default()),
            escalations: Default::default(),
            fixed_sizes: Default::default(),
            detail: detail::Detail::NONE,
            direct_text: true,
        }
    }

    /// Adds another component's `gpuwatch_*` metrics (e.g. the history
    /// writer's), encoded at scrape time.
    pub fn with(mut self, collector: Box<dyn Collector>) -> Exporter {
        self.add(collector);
        self
    }

    /// [`Exporter::with`] in place.
    pub fn add(&mut self, collector: Box<dyn Collector>) {
        self.tail.register_collector(collector);
    }

    /// Also exports the drop-in families of other exporters (`sets`; see
    /// [`compat`]), unprefixed, from the same snapshots.
    pub fn with_compat(mut self, sets: Vec<compat::MetricsCompat>) -> Exporter {
        self.compat = sets;
        self
    }

    /// Adds dcgm-exporter's `hpc_job` label to the `DCGM_FI_*` series (one
    /// copy of a GPU's series per Slurm job on it); off by default.
    pub fn with_compat_hpc_job(mut self, hpc_job: bool) -> Exporter {
        self.compat_hpc_job = hpc_job;
        self
    }

    /// Also exports the families of the detail sets in `detail` (see
    /// [`detail`]); the default exports none of them.
    pub fn with_detail(mut self, detail: detail::Detail) -> Exporter {
        self.detail = detail;
        self
    }

    /// Where the health verdict reads the Xid escalations (the alert state;
    /// wired by the agent).
    pub fn set_escalations(&mut self, source: crate::health::escalation::EscalationSource) {
        self.escalations = source;
    }

    /// Encodes everything at each scrape through `prometheus_client`'s
    /// encoder and gzips the whole body, as gpuwatch did before the
    /// per-snapshot cache and the direct text writer: the baseline the
    /// scrape benchmark compares with. The bytes served are the same.
    pub fn encode_per_scrape(mut self) -> Exporter {
        self.cache = None;
        self.direct_text = false;
        self
    }

    /// Writes the per-GPU part through `prometheus_client`'s encoder, as
    /// gpuwatch did before [`text::TextSink`]: the baseline of the scrape
    /// benchmark's scrapes that each meet a new snapshot. Same bytes.
    pub fn with_prometheus_client_encoder(mut self) -> Exporter {
        self.direct_text = false;
        self
    }

    /// Encodes every metric in `format`.
    pub fn render(&self, format: Format) -> Result<String, fmt::Error> {
        let snapshot = self.snapshots.borrow().clone();
        let live = self.encode_live(&snapshot, format)?;
        Ok(match &self.cache {
            Some(cache) => {
                let encoded = cache.get(&snapshot, format, |f| self.encode_fixed(&snapshot, f))?;
                join(&live, &encoded.text)
            }
            None => join(&live, &self.encode_fixed(&snapshot, format)?),
        })
    }

    /// The /metrics body in `format`, gzipped where `gzip` is asked for
    /// (and compression works; otherwise plain).
    pub fn body(&self, format: Format, gzip: bool) -> Result<Body, fmt::Error> {
        let Some(cache) = &self.cache else {
            let text = self.render(format)?;
            let gzipped = gzip
                .then(|| gzip::Piece::deflate(text.as_bytes()).ok())
                .flatten()
                .map(|piece| gzip::member(&[&piece]));
            return Ok(match gzipped {
                Some(bytes) => Body {
                    bytes: bytes.into(),
                    gzip: true,
                },
                None => Body {
                    bytes: text.into(),
                    gzip: false,
                },
            });
        };
        if !gzip {
            return Ok(Body {
                bytes: self.render(format)?.into(),
                gzip: false,
            });
        }
        let snapshot = self.snapshots.borrow().clone();
        let encoded = cache.get(&snapshot, format, |f| self.encode_fixed(&snapshot, f))?;
        let live = self.encode_live(&snapshot, format)?;
        let gzipped = encoded.deflated().and_then(|fixed| {
            let live: Vec<gzip::Piece> = live
                .iter()
                .map(|part| gzip::Piece::small(part.as_bytes()))
                .collect::<Result<_, _>>()
                .ok()?;
            let mut pieces = Vec::with_capacity(live.len() + fixed.len());
            for (i, part) in live.iter().enumerate() {
                pieces.push(part);
                if let Some(fixed) = fixed.get(i) {
                    pieces.push(fixed);
                }
            }
            Some(gzip::member(&pieces))
        });
        Ok(match gzipped {
            Some(bytes) => Body {
                bytes: bytes.into(),
                gzip: true,
            },
            None => Body {
                bytes: self.render(format)?.into(),
                gzip: false,
            },
        })
    }

    /// The parts fixed for a snapshot, in body order: the compat families,
    /// then the per-GPU ones.
    fn encode_fixed(
        &self,
        snapshot: &Option<Arc<Snapshot>>,
        format: Format,
    ) -> Result<[String; 2], fmt::Error> {
        let Some(snapshot) = snapshot else {
            return Ok([String::new(), String::new()]);
        };
        let mut compat = Registry::default();
        if !self.compat.is_empty() {
            compat.register_collector(Box::new(
                compat::CompatCollector::new(snapshot.clone(), self.compat.clone())
                    .with_hpc_job(self.compat_hpc_job),
            ));
        }
        let gpus = GpuCollector {
            snapshot: snapshot.clone(),
            processes: self.processes.clone(),
            escalated: self.escalations.current(),
            detail: self.detail,
        };
        let [compat_size, gpus_size] = &self.fixed_sizes;
        let compat = encode_sized(&compat, format, compat_size)?;
        if !self.direct_text {
            // The baseline: through prometheus_client's encoder, as before.
            let mut registry = Registry::with_prefix("gpuwatch");
            registry.register_collector(Box::new(gpus));
            return Ok([compat, encode_sized(&registry, format, gpus_size)?]);
        }
        let last = gpus_size.0.load(Ordering::Relaxed);
        let mut sink = text::TextSink::new(format, "gpuwatch", last + last / 8);
        gpu_metrics::encode(
            &gpus.snapshot,
            &gpus.processes,
            &gpus.escalated,
            gpus.detail,
            &mut sink,
        )?;
        let gpus = sink.finish();
        gpus_size.0.store(gpus.len(), Ordering::Relaxed);
        Ok([compat, gpus])
    }

    /// The parts read at each scrape, in body order: `process_*`; the self
    /// metrics; the other components' metrics (and the OpenMetrics end).
    fn encode_live(
        &self,
        snapshot: &Option<Arc<Snapshot>>,
        format: Format,
    ) -> Result<[String; 3], fmt::Error> {
        let mut own = Registry::with_prefix("gpuwatch");
        own.register_collector(Box::new(SelfCollector {
            snapshot: snapshot.clone(),
            stale_after: self.stale_after,
        }));
        let mut tail = encode(&self.tail, format)?;
        if format == Format::OpenMetrics {
            prometheus_client::encoding::text::encode_eof(&mut tail)?;
        }
        Ok([encode(&self.head, format)?, encode(&own, format)?, tail])
    }
}

/// The live parts with the fixed ones between them: the body in order.
fn join(live: &[String; 3], fixed: &[String; 2]) -> String {
    let size = live.iter().chain(fixed).map(String::len).sum();
    let mut out = String::with_capacity(size);
    for (i, part) in live.iter().enumerate() {
        out.push_str(part);
        if let Some(fixed) = fixed.get(i) {
            out.push_str(fixed);
        }
    }
    out
}

/// Encodes one registry, without the OpenMetrics end marker.
fn encode(registry: &Registry, format: Format) -> Result<String, fmt::Error> {
    encode_into(String::new(), registry, format)
}

/// The size a part of the body had when last encoded: its next encoding
/// starts with room for it (and an eighth more) instead of growing a string
/// from empty, copying it at each doubling (the per-GPU part of 8 GPUs is
/// ~250 KB: a dozen reallocations, and fresh pages when it passes a power
/// of two).
#[derive(Debug, Default)]
struct SizeHint(AtomicUsize);

/// [`encode`], into a string sized by `hint`, which learns the new size.
fn encode_sized(
    registry: &Registry,
    format: Format,
    hint: &SizeHint,
) -> Result<String, fmt::Error> {
    let last = hint.0.load(Ordering::Relaxed);
    let out = encode_into(String::with_capacity(last + last / 8), registry, format)?;
    hint.0.store(out.len(), Ordering::Relaxed);
    Ok(out)
}

fn encode_into(mut out: String, registry: &Registry, format: Format) -> Result<String, fmt::Error> {
    match format {
        Format::Prometheus => {
            prometheus_client::encoding::prometheus_text::encode(&mut out, registry)?
        }
        Format::OpenMetrics => {
            prometheus_client::encoding::text::encode_registry(&mut out, registry)?
        }
    }
    Ok(out)
}
