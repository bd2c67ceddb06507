//! Detail sets: the series a fleet does not read by default, exported on
//! request (`[exporter] detail`, `--metrics-detail`).
//!
//! A node's default /metrics carries what a fleet reads, per GPU: on an
//! 8-GPU NVSwitch node about 690 series instead of 2 289. The per-link,
//! per-engine, per-pipe, per-process, per-field-group and per-rule families
//! are each a named set; the agent keeps all of it in its API, history and
//! web view either way. The sets are decided once, at start: the encoder
//! skips whole families, it never filters series per scrape.

use std::fmt;

/// One detail set: families left out of /metrics unless asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DetailSet {
    /// Per NVLink link: `gpuwatch_nvlink_up`, `gpuwatch_nvlink_errors_total`,
    /// `gpuwatch_nvlink_data_bytes_total`,
    /// `gpuwatch_gpm_nvlink_link_bytes_per_second` (18 links per GPU on
    /// Hopper: 126 series per GPU).
    NvlinkLinks,
    /// Per media engine (NVDEC, NVJPG, NVOFA):
    /// `gpuwatch_gpm_media_engine_active_ratio` and its MIG twin.
    MediaEngines,
    /// Per GPM pipe (tensor HMMA/IMMA/DFMA, FP64/32/16, integer):
    /// `gpuwatch_gpm_pipe_active_ratio` and its MIG twin.
    GpmPipes,
    /// Per process: `gpuwatch_process_info`, `_memory_used_bytes`,
    /// `_sm_utilization_ratio`, `_memory_utilization_ratio`.
    Processes,
    /// Per NVML field group: `gpuwatch_collector_success`.
    CollectorGroups,
    /// Per alert rule: `gpuwatch_rule_values_total`.
    RuleValues,
}

impl DetailSet {
    /// Every set, in the order docs/metrics.md lists them.
    pub const ALL: [DetailSet; 6] = [
        DetailSet::NvlinkLinks,
        DetailSet::MediaEngines,
        DetailSet::GpmPipes,
        DetailSet::Processes,
        DetailSet::CollectorGroups,
        DetailSet::RuleValues,
    ];

    /// The name used in the configuration and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            DetailSet::NvlinkLinks => "nvlink_links",
            DetailSet::MediaEngines => "media_engines",
            DetailSet::GpmPipes => "gpm_pipes",
            DetailSet::Processes => "processes",
            DetailSet::CollectorGroups => "collector_groups",
            DetailSet::RuleValues => "rule_values",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// The detail sets in effect: a small set of [`DetailSet`]s. The default
/// holds none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Detail(u8);

impl Detail {
    /// No detail: the default /metrics.
    pub const NONE: Detail = Detail(0);

    /// Every set (`"full"`).
    pub fn full() -> Detail {
        DetailSet::ALL.into_iter().collect()
    }

    /// Whether `set` is exported.
    pub fn has(self, set: DetailSet) -> bool {
        self.0 & set.bit() != 0
    }

    /// This with `set` added.
    pub fn with(self, set: DetailSet) -> Detail {
        Detail(self.0 | set.bit())
    }

    /// The sets in effect, in [`DetailSet::ALL`]'s order.
    pub fn sets(self) -> impl Iterator<Item = DetailSet> {
        DetailSet::ALL.into_iter().filter(move |s| self.has(*s))
    }

    /// Parses one name: a set, `full` (every set) or `none` (no set).
    pub fn parse_name(name: &str) -> Result<Detail, UnknownDetail> {
        let name = name.trim();
        match name {
            "full" => Ok(Detail::full()),
            "none" => Ok(Detail::NONE),
            _ => DetailSet::ALL
                .into_iter()
                .find(|s| s.as_str() == name)
                .map(|s| Detail::NONE.with(s))
                .ok_or_else(|| UnknownDetail(name.to_string())),
        }
    }

    /// Parses the values of `--metrics-detail` (each may be a
    /// comma-separated list); `none` adds nothing, so that the flag can
    /// switch off what the configuration turned on.
    pub fn parse_list<'a>(
        values: impl IntoIterator<Item = &'a str>,
    ) -> Result<Detail, UnknownDetail> {
        let mut out = Detail::NONE;
        for value in values {
            for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                out = Detail(out.0 | Detail::parse_name(name)?.0);
            }
        }
        Ok(out)
    }
}

impl FromIterator<DetailSet> for Detail {
    fn from_iter<I: IntoIterator<Item = DetailSet>>(iter: I) -> Detail {
        iter.into_iter().fold(Detail::NONE, Detail::with)
    }
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.sets().map(DetailSet::as_str).collect();
        f.write_str(&names.join(","))
    }
}

/// A name that is no detail set (the name, trimmed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{name}\" is not a metrics detail set; use {known}, \"full\" or \"none\"", name = .0, known = known())]
pub struct UnknownDetail(pub String);

fn known() -> String {
    let names: Vec<String> = DetailSet::ALL
        .iter()
        .map(|s| format!("\"{}\"", s.as_str()))
        .collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_to_their_sets() {
        for set in DetailSet::ALL {
            assert_eq!(Detail::parse_name(set.as_str()), Ok(Detail::NONE.with(set)));
        }
        assert_eq!(Detail::parse_name("full"), Ok(Detail::full()));
        assert_eq!(Detail::full().sets().count(), DetailSet::ALL.len());
        assert_eq!(Detail::parse_name(" none "), Ok(Detail::NONE));
    }

    #[test]
    fn lists_combine_and_unknown_names_say_what_exists() {
        let both = Detail::parse_list(["nvlink_links, processes", "", "none"]).unwrap();
        assert!(both.has(DetailSet::NvlinkLinks) && both.has(DetailSet::Processes));
        assert!(!both.has(DetailSet::MediaEngines));
        assert_eq!(both.to_string(), "nvlink_links,processes");
        let error = Detail::parse_list(["nvlinks"]).unwrap_err();
        assert_eq!(error.0, "nvlinks");
        assert!(error.to_string().contains("\"nvlink_links\""), "{error}");
    }
}
