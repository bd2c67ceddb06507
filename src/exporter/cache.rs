//! The parts of /metrics fixed for one snapshot, encoded once per snapshot
//! and format (and deflated once, for gzip), shared by every scrape until the
//! sampler publishes the next snapshot.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use crate::gpu::Snapshot;

use super::gzip::Piece;
use super::Format;

/// The latest snapshot's encodings.
#[derive(Debug, Default)]
pub(super) struct Cache {
    current: Mutex<Option<Arc<Entry>>>,
}

/// One snapshot's encodings, made when a scrape first asks for them.
#[derive(Debug)]
struct Entry {
    /// The snapshot they encode (held, so that its address is not reused).
    snapshot: Option<Arc<Snapshot>>,
    /// Prometheus text, OpenMetrics.
    formats: [OnceLock<Arc<Encoded>>; 2],
}

/// The fixed parts in one format.
#[derive(Debug)]
pub(super) struct Encoded {
    /// The texts, in body order.
    pub text: [String; 2],
    /// The same, deflated for gzip; `None` where compression failed.
    deflated: OnceLock<Option<[Piece; 2]>>,
}

impl Encoded {
    /// The fixed parts deflated (once, at the first gzip scrape); a small
    /// part (the compat one is empty unless asked for) in stored blocks,
    /// which spares resetting the compressor's tables for it.
    pub fn deflated(&self) -> Option<&[Piece; 2]> {
        self.deflated
            .get_or_init(|| {
                let [a, b] = &self.text;
                Some([
                    Piece::small(a.as_bytes()).ok()?,
                    Piece::small(b.as_bytes()).ok()?,
                ])
            })
            .as_ref()
    }
}

fn same(a: &Option<Arc<Snapshot>>, b: &Option<Arc<Snapshot>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

impl Cache {
    /// The fixed parts of `snapshot` in `format`, encoded by `encode` unless
    /// an earlier scrape of the same snapshot did already.
    pub fn get(
        &self,
        snapshot: &Option<Arc<Snapshot>>,
        format: Format,
        encode: impl FnOnce(Format) -> Result<[String; 2], fmt::Error>,
    ) -> Result<Arc<Encoded>, fmt::Error> {
        let entry = {
            // A panic while holding this lock leaves a consistent value.
            let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
            match current.as_ref() {
                Some(entry) if same(&entry.snapshot, snapshot) => entry.clone(),
                _ => {
                    let entry = Arc::new(Entry {
                        snapshot: snapshot.clone(),
                        formats: Default::default(),
                    });
                    *current = Some(entry.clone());
                    entry
                }
            }
        };
        let slot = &entry.formats[match format {
            Format::Prometheus => 0,
            Format::OpenMetrics => 1,
        }];
        if let Some(encoded) = slot.get() {
            return Ok(encoded.clone());
        }
        let encoded = Arc::new(Encoded {
            text: encode(format)?,
            deflated: OnceLock::new(),
        });
        Ok(slot.get_or_init(|| encoded).clone())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::exporter::tests::snapshot;

    #[test]
    fn encodes_once_per_snapshot_and_format() {
        let cache = Cache::default();
        let calls = Cell::new(0);
        let encode = |f: Format| {
            calls.set(calls.get() + 1);
            Ok([format!("{f:?}"), calls.get().to_string()])
        };
        let a = Some(Arc::new(snapshot(0.5)));
        let first = cache.get(&a, Format::Prometheus, encode).unwrap();
        let again = cache.get(&a, Format::Prometheus, encode).unwrap();
        assert_eq!(calls.get(), 1, "the second scrape reuses the encoding");
        assert!(Arc::ptr_eq(&first, &again));
        let open = cache.get(&a, Format::OpenMetrics, encode).unwrap();
        assert_eq!(calls.get(), 2, "each format is encoded on its own");
        assert_eq!(open.text[0], "OpenMetrics");
        // An equal snapshot in a new Arc is a new snapshot: encoded again.
        let b = Some(Arc::new(snapshot(0.5)));
        let next = cache.get(&b, Format::Prometheus, encode).unwrap();
        assert_eq!(calls.get(), 3);
        assert_eq!(next.text[1], "3");
        // None (before the first sample) is a snapshot of its own too.
        cache.get(&None, Format::Prometheus, encode).unwrap();
        cache.get(&None, Format::Prometheus, encode).unwrap();
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn a_failed_encoding_is_not_kept() {
        let cache = Cache::default();
        let a = Some(Arc::new(snapshot(0.5)));
        assert!(cache
            .get(&a, Format::Prometheus, |_| Err(fmt::Error))
            .is_err());
        let ok = cache
            .get(&a, Format::Prometheus, |_| Ok(["x".into(), "y".into()]))
            .unwrap();
        assert_eq!(ok.text, ["x", "y"]);
        assert!(ok.deflated().is_some());
    }
}
