//! NVLink links of one GPU: which are up, the data they carry and their
//! error counters, all as functions of scenario time.

use super::counters::Integrator;
use super::signal::Signal;
use crate::rng;
use crate::scenario::health::{NvLinkCounter, NvLinkSpec, RemoteKind, MAX_LINKS};
use crate::scenario::{Fault, FaultEffect};

/// Error counters per link, in nvmlNvLinkErrorCounter_t order.
const ERRORS_PER_LINK: usize = NvLinkCounter::ALL.len();

/// Data counters of every link a GPU can have: tx (MiB), rx (MiB) per link.
/// A fixed array, so the GPM window read on every fast tick integrates
/// without allocating (the error counters, read on the slow tier, are a Vec
/// sized by the GPU's links).
type Traffic = [f64; 2 * MAX_LINKS as usize];

/// The NVLink model of one GPU.
#[derive(Debug)]
pub struct NvLinkSim {
    links: u32,
    version: u32,
    remote: RemoteKind,
    switches: u32,
    tx: Option<Signal>,
    rx: Option<Signal>,
    /// Whether fields 138/139 answer (`data_fields`).
    data_fields: bool,
    /// (link or every link, counter, errors per second).
    errors: Vec<(Option<u32>, NvLinkCounter, Signal)>,
    /// (link, fault window) from `nvlink_down` faults.
    down: Vec<(u32, Fault)>,
    /// Data sent and received per link (see [`Traffic`]).
    traffic: Integrator<Traffic>,
    /// Error counters per link (`ERRORS_PER_LINK` each).
    errors_counted: Integrator<Vec<f64>>,
}

impl NvLinkSim {
    /// Compiles `spec`; `faults` are the GPU's faults (its `nvlink_down` ones apply).
    pub fn new(spec: &NvLinkSpec, faults: &[Fault], seed: u64) -> Self {
        let links = *spec.links.get_ref();
        let signal =
            |name: &str, t: &Option<toml::Spanned<crate::scenario::timeline::TimelineSpec>>| {
                t.as_ref()
                    .map(|t| Signal::new(t.get_ref(), rng::mix(seed, rng::hash_str(name))))
            };
        NvLinkSim {
            links,
            version: spec.version,
            remote: spec.remote,
            switches: spec.switches.max(1),
            tx: signal("nvlink.tx", &spec.tx_mib_s),
            rx: signal("nvlink.rx", &spec.rx_mib_s),
            data_fields: spec.data_fields,
            errors: spec
                .errors
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let seed = rng::mix(seed, 0x4E56_0000 + i as u64);
                    (
                        e.link.as_ref().map(|l| *l.get_ref()),
                        e.counter,
                        Signal::new(e.per_second.get_ref(), seed),
                    )
                })
                .collect(),
            down: faults
                .iter()
                .filter_map(|f| match f.effect {
                    FaultEffect::NvlinkDown(link) => Some((link, f.clone())),
                    _ => None,
                })
                .collect(),
            traffic: Integrator::default(),
            errors_counted: Integrator::new(vec![0.0; links as usize * ERRORS_PER_LINK]),
        }
    }

    /// Whether the data counters (fields 138/139) answer.
    pub fn has_data_fields(&self) -> bool {
        self.data_fields
    }

    /// Number of links.
    pub fn links(&self) -> u32 {
        self.links
    }

    /// NVLink version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// What the links lead to.
    pub fn remote(&self) -> RemoteKind {
        self.remote
    }

    /// The NVSwitch `link` leads to (remote = switch).
    pub fn switch_of(&self, link: u32) -> u32 {
        link * self.switches / self.links.max(1)
    }

    /// Whether `link` is up at `t`.
    pub fn is_up(&self, link: u32, t: f64) -> bool {
        link < self.links && !self.down.iter().any(|(l, f)| *l == link && f.active(t))
    }

    /// Data rates per link at `s`, MiB/s: a link carries the GPU's tx/rx
    /// while it is up (links past `links` carry nothing).
    fn traffic_rates(&self, s: f64) -> Traffic {
        let (tx, rx) = (
            self.tx.as_ref().map_or(0.0, |x| x.eval(s).max(0.0)),
            self.rx.as_ref().map_or(0.0, |x| x.eval(s).max(0.0)),
        );
        let mut r = [0.0; 2 * MAX_LINKS as usize];
        for link in 0..self.links.min(MAX_LINKS) {
            if self.is_up(link, s) {
                r[2 * link as usize] = tx;
                r[2 * link as usize + 1] = rx;
            }
        }
        r
    }

    /// Error rates per link at `s` (see `ERRORS_PER_LINK` for the layout).
    fn error_rates(&self, s: f64) -> Vec<f64> {
        let mut r = vec![0.0; self.links as usize * ERRORS_PER_LINK];
        for link in 0..self.links {
            let base = link as usize * ERRORS_PER_LINK;
            for (only, counter, rate) in &self.errors {
                if only.is_none_or(|l| l == link) {
                    r[base + counter.code() as usize] += rate.eval(s).max(0.0);
                }
            }
        }
        r
    }

    /// Every error counter at `t`.
    fn error_totals(&self, t: f64) -> Vec<f64> {
        self.errors_counted.integral(t, |s| self.error_rates(s))
    }

    /// Errors of `counter` on `link` since t = 0.
    pub fn errors(&self, link: u32, counter: NvLinkCounter, t: f64) -> u64 {
        self.error_totals(t)
            .get(link as usize * ERRORS_PER_LINK + counter.code() as usize)
            .map_or(0, |v| v.floor() as u64)
    }

    /// Errors of `counter` summed over every link.
    pub fn errors_total(&self, counter: NvLinkCounter, t: f64) -> u64 {
        let totals = self.error_totals(t);
        (0..self.links as usize)
            .map(|l| totals[l * ERRORS_PER_LINK + counter.code() as usize].floor() as u64)
            .sum()
    }

    /// Data KiB sent (`tx`) or received on `link` since t = 0 (fields 138/139).
    pub fn data_kib(&self, link: u32, tx: bool, t: f64) -> u64 {
        let slot = 2 * link as usize + usize::from(!tx);
        self.traffic
            .integral(t, |s| self.traffic_rates(s))
            .get(slot)
            .map_or(0, |mib| (mib * 1024.0).floor() as u64)
    }

    /// Per link, the [tx, rx] MiB/s averaged over [t1, t2] (`None` when t2 < t1).
    pub fn window(&self, t1: f64, t2: f64) -> Option<Vec<[f64; 2]>> {
        let avg = self.traffic.average(t1, t2, |s| self.traffic_rates(s))?;
        Some(
            avg.chunks(2)
                .take(self.links as usize)
                .map(|c| [c[0], c[1]])
                .collect(),
        )
    }
}
