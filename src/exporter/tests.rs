//! The exporter's body: the per-snapshot cache serves the same bytes as
//! encoding everything at each scrape, and the live series stay live.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::compat::MetricsCompat;
use super::{Exporter, Format};
use crate::families::Family;
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
        detail: super::detail::Detail::full(),
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

/// A GPU with three NVLink links (link 1 down, errors on links 0 and 2)
/// and the pre-Hopper data counters on two of them.
fn linked_gpu() -> Snapshot {
    use crate::gpu::links::{LinkHealth, NvLinkState, NvLinkTraffic};
    let link = |n: u32, up: bool, replay: u64, crc: u64| NvLinkState {
        link: n,
        up,
        errors: [("replay", replay), ("crc_flit", crc)]
            .into_iter()
            .collect(),
    };
    let traffic = |n: u32, tx: Option<u64>| NvLinkTraffic {
        link: n,
        tx_bytes: tx,
        rx_bytes: Some(1024),
    };
    let gpu = GpuSnapshot {
        health: Arc::new(crate::gpu::SlowReadings {
            links: LinkHealth {
                nvlink: vec![
                    link(0, true, 2, 1),
                    link(1, false, 0, 0),
                    link(2, true, 0, 4),
                ],
                recovery_action: None,
                recovery_action_value: None,
            },
            nvlink_traffic: vec![traffic(0, Some(4096)), traffic(1, None)],
            ..Default::default()
        }),
        ..testing::gpu(0)
    };
    testing::snapshot(SystemTime::now(), vec![gpu])
}

fn exposition(snapshot: Snapshot, detail: super::detail::Detail) -> String {
    let (tx, rx) = tokio::sync::watch::channel(Some(Arc::new(snapshot)));
    let exporter = Exporter::new(rx, Duration::from_secs(3600)).with_detail(detail);
    let text = exporter.render(Format::Prometheus).expect("renders");
    drop(tx);
    text
}

#[test]
fn the_default_sums_the_links_per_gpu_and_the_detail_set_adds_each_link() {
    use super::detail::{Detail, DetailSet};
    let default = exposition(linked_gpu(), Detail::NONE);
    let lines = |text: &str, family: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with(&format!("{family}{{")))
            .map(|l| l.replace(",uuid=\"GPU-0\"", ""))
            .collect()
    };
    assert_eq!(
        lines(&default, "gpuwatch_nvlink_links_down"),
        ["gpuwatch_nvlink_links_down{gpu=\"0\"} 1.0"]
    );
    // 2 + 1 + 4 errors over the links and types.
    assert_eq!(
        lines(&default, "gpuwatch_nvlink_gpu_errors_total"),
        ["gpuwatch_nvlink_gpu_errors_total{gpu=\"0\"} 7.0"]
    );
    // tx: only link 0 answered; rx: both links.
    assert_eq!(
        lines(&default, "gpuwatch_nvlink_gpu_data_bytes_total"),
        [
            "gpuwatch_nvlink_gpu_data_bytes_total{gpu=\"0\",direction=\"tx\"} 4096.0",
            "gpuwatch_nvlink_gpu_data_bytes_total{gpu=\"0\",direction=\"rx\"} 2048.0",
        ]
    );
    for family in [
        "gpuwatch_nvlink_up",
        "gpuwatch_nvlink_errors_total",
        "gpuwatch_nvlink_data_bytes_total",
        "gpuwatch_collector_success",
    ] {
        assert!(
            lines(&default, family).is_empty(),
            "{family} is detail:\n{default}"
        );
    }
    let links = exposition(linked_gpu(), Detail::NONE.with(DetailSet::NvlinkLinks));
    assert_eq!(lines(&links, "gpuwatch_nvlink_up").len(), 3);
    assert_eq!(lines(&links, "gpuwatch_nvlink_errors_total").len(), 6);
    assert_eq!(lines(&links, "gpuwatch_nvlink_data_bytes_total").len(), 3);
    // The per-GPU totals stay with the detail set.
    assert_eq!(lines(&links, "gpuwatch_nvlink_links_down").len(), 1);
    assert!(lines(&links, "gpuwatch_collector_success").is_empty());
}
