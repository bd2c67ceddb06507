//! The exporter's body: the per-snapshot cache serves the same bytes as
//! encoding everything at each scrape, and the live series stay live.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::compat::MetricsCompat;
use super::families::Family;
use super::{Exporter, Format};
use crate::gpu::{testing, FastReadings, GpuSnapshot, Snapshot};

/// A one-GPU snapshot with the given utilization.
pub(crate) fn snapshot(utilization: f64) -> Snapshot {
    let gpu = GpuSnapshot {
        readings: FastReadings {
            utilization_gpu_ratio: Some(utilization),
            ..FastReadings::default()
        },
        ..testing::gpu(0)
    };
    testing::snapshot(SystemTime::now(), vec![gpu])
}

/// Counts its scrapes, as a component's counter would change between them.
#[derive(Debug, Default)]
struct Scrapes(Arc<AtomicU64>);

impl Collector for Scrapes {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let n = self.0.fetch_add(1, Ordering::Relaxed) + 1;
        let mut family = Family::gauge("test_scrapes", "Scrapes so far.", None);
        family.push(vec![], n as f64);
        family.encode(&mut encoder)
    }
}

/// The body without the values that change by themselves between two
/// encodings (CPU, memory, age, the scrape counter).
fn steady(text: &str) -> String {
    text.lines()
        .filter(|l| {
            !l.starts_with("process_")
                && !l.starts_with("gpuwatch_snapshot_age")
                && !l.starts_with("gpuwatch_test_scrapes")
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

fn gunzip(bytes: &[u8]) -> String {
    let mut out = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut out)
        .expect("a valid gzip body");
    out
}

fn exporters() -> (
    tokio::sync::watch::Sender<Option<Arc<Snapshot>>>,
    Exporter,
    Exporter,
    Arc<AtomicU64>,
) {
    let (tx, rx) = tokio::sync::watch::channel(None);
    let counted = Arc::new(AtomicU64::new(0));
    let make = |counter: Arc<AtomicU64>| {
        Exporter::new(rx.clone(), Duration::from_secs(3600))
            .with_compat(MetricsCompat::ALL.to_vec())
            .with(Box::new(Scrapes(counter)))
    };
    let cached = make(counted.clone());
    let per_scrape = make(Arc::new(AtomicU64::new(0))).encode_per_scrape();
    (tx, cached, per_scrape, counted)
}

#[test]
fn the_cached_body_is_the_per_scrape_body_in_every_format_and_encoding() {
    let (tx, cached, per_scrape, _) = exporters();
    for utilization in [None, Some(0.25), Some(0.75)] {
        tx.send_replace(utilization.map(|u| Arc::new(snapshot(u))));
        for format in [Format::Prometheus, Format::OpenMetrics] {
            // Twice: the second scrape is served from the cache.
            for _ in 0..2 {
                let expected = steady(&per_scrape.render(format).unwrap());
                assert_eq!(steady(&cached.render(format).unwrap()), expected);
                let plain = cached.body(format, false).unwrap();
                assert!(!plain.gzip);
                assert_eq!(steady(std::str::from_utf8(&plain.bytes).unwrap()), expected);
                let gzipped = cached.body(format, true).unwrap();
                assert!(gzipped.gzip);
                assert_eq!(steady(&gunzip(&gzipped.bytes)), expected);
                let baseline = per_scrape.body(format, true).unwrap();
                assert_eq!(steady(&gunzip(&baseline.bytes)), expected);
            }
            let text = cached.render(format).unwrap();
            match utilization {
                // A new snapshot is seen at once, not the cached one.
                Some(u) => assert_utilization(&text, u),
                None => assert!(!text.contains("gpuwatch_gpu_utilization_ratio")),
            }
            assert_eq!(
                text.contains("DCGM_FI_DEV_GPU_UTIL"),
                utilization.is_some(),
                "{text}"
            );
            assert!(text.contains("process_cpu_seconds_total"), "{text}");
            assert_eq!(
                text.ends_with("# EOF\n"),
                format == Format::OpenMetrics,
                "{text}"
            );
        }
    }
}

fn assert_utilization(text: &str, utilization: f64) {
    let line = text
        .lines()
        .find(|l| l.starts_with("gpuwatch_gpu_utilization_ratio{"))
        .expect("the utilization series");
    assert!(line.ends_with(&format!(" {utilization}")), "{line}");
}

#[test]
fn series_that_change_between_scrapes_are_read_at_each_scrape() {
    let (tx, cached, _, counted) = exporters();
    tx.send_replace(Some(Arc::new(snapshot(0.5))));
    let value = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("gpuwatch_test_scrapes "))
            .map(str::to_string)
    };
    let first = cached.render(Format::Prometheus).unwrap();
    let second = cached.render(Format::Prometheus).unwrap();
    let third = gunzip(&cached.body(Format::Prometheus, true).unwrap().bytes);
    assert_eq!(value(&first).as_deref(), Some("1.0"));
    assert_eq!(value(&second).as_deref(), Some("2.0"));
    assert_eq!(value(&third).as_deref(), Some("3.0"));
    assert_eq!(counted.load(Ordering::Relaxed), 3);
    // The snapshot's age is measured at the scrape, not at the encoding.
    let mut old = snapshot(0.5);
    old.taken_at = SystemTime::now() - Duration::from_secs(7200);
    tx.send_replace(Some(Arc::new(old)));
    let text = cached.render(Format::Prometheus).unwrap();
    assert!(text.contains("\ngpuwatch_up 0.0\n"), "{text}");
}

#[test]
fn a_part_is_encoded_into_a_string_sized_by_its_last_encoding() {
    let mut registry = prometheus_client::registry::Registry::with_prefix("gpuwatch");
    registry.register_collector(Box::new(super::GpuCollector {
        snapshot: Arc::new(snapshot(0.5)),
        processes: Default::default(),
        escalated: Default::default(),
    }));
    let hint = super::SizeHint::default();
    let first = super::encode_sized(&registry, Format::Prometheus, &hint).expect("encodes");
    assert!(first.contains("gpuwatch_gpu_utilization_ratio"), "{first}");
    let again = super::encode_sized(&registry, Format::Prometheus, &hint).expect("encodes");
    assert_eq!(again, first, "the same snapshot encodes to the same text");
    // Room for the last size and an eighth more, allocated once: the text
    // did not outgrow it (growing would have doubled the capacity).
    assert_eq!(again.capacity(), first.len() + first.len() / 8);
}
