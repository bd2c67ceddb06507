//! `[capacity]` and `[[profiles]]`: what "how many more fit" means.

use std::time::Duration;

use toml::Spanned;

use super::limits;
use super::raw::{RawCapacity, RawProfile};
use super::Validator;

impl Validator<'_> {
    /// Checks `[capacity]` and every `[[profiles]]` entry; only entries
    /// without problems are kept (the caller fails on any problem anyway).
    pub(super) fn capacity(
        &mut self,
        raw: RawCapacity,
        profiles: Vec<Spanned<RawProfile>>,
    ) -> crate::capacity::CapacityConfig {
        let memory_margin_bytes = match &raw.memory_margin {
            None => 1 << 30,
            Some(_) => self
                .size(
                    "capacity.memory_margin",
                    raw.memory_margin.as_ref(),
                    &limits::MEMORY_MARGIN,
                )
                .unwrap_or(0),
        };
        let mut out: Vec<crate::capacity::Profile> = Vec::new();
        for (i, entry) in profiles.into_iter().enumerate() {
            let table = entry.span();
            let p = entry.into_inner();
            let before = self.problems.len();
            if let Some(profile) = self.profile(i, &p, table, &out) {
                if self.problems.len() == before {
                    out.push(profile);
                }
            }
        }
        let alert_for = self.duration(
            "capacity.alert_for",
            raw.alert_for.as_ref(),
            Duration::from_secs(120),
            &limits::CAPACITY_ALERT_FOR,
        );
        crate::capacity::CapacityConfig {
            profiles: out,
            memory_margin_bytes,
            alert_for,
        }
    }

    /// One `[[profiles]]` entry; `table` is where it starts, for the
    /// fields it lacks.
    fn profile(
        &mut self,
        i: usize,
        p: &RawProfile,
        table: std::ops::Range<usize>,
        seen: &[crate::capacity::Profile],
    ) -> Option<crate::capacity::Profile> {
        let field = |name: &str| format!("profiles[{i}].{name}");
        let name = match &p.name {
            Some(n)
                if n.get_ref().is_empty()
                    || !n
                        .get_ref()
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) =>
            {
                self.problem(
                    &field("name"),
                    n.span(),
                    &format!(
                        "\"{}\" is not a profile name; use letters, digits, '-', '_' and '.'",
                        n.get_ref()
                    ),
                );
                None
            }
            Some(n) if seen.iter().any(|o| &o.name == n.get_ref()) => {
                self.problem(
                    &field("name"),
                    n.span(),
                    &format!("\"{}\" names another profile already", n.get_ref()),
                );
                None
            }
            Some(n) => Some(n.get_ref().clone()),
            None => {
                self.problem(
                    &field("name"),
                    table.clone(),
                    "is missing: give each profile a name",
                );
                None
            }
        };
        let memory_bytes = match &p.memory {
            Some(text) => match super::limits::parse_size(text.get_ref()) {
                Ok(0) => {
                    self.problem(&field("memory"), text.span(), "must be more than 0");
                    None
                }
                Ok(_) => self.size(&field("memory"), Some(text), &limits::PROFILE_MEMORY),
                Err(error) => {
                    self.problem(&field("memory"), text.span(), &error.to_string());
                    None
                }
            },
            None => {
                self.problem(
                    &field("memory"),
                    p.name.as_ref().map_or(table, Spanned::span),
                    "is missing: how much GPU memory does one instance need? (e.g. \"1.8GB\")",
                );
                None
            }
        };
        let sm_share = match &p.sm_share {
            Some(s) if !(*s.get_ref() > 0.0 && *s.get_ref() <= 1.0) => {
                self.problem(
                    &field("sm_share"),
                    s.span(),
                    "must be a share of the SMs above 0 and at most 1, e.g. 0.25",
                );
                None
            }
            Some(s) => Some(*s.get_ref()),
            None => None,
        };
        let model = match &p.model {
            Some(m) if m.get_ref().trim().is_empty() => {
                self.problem(
                    &field("model"),
                    m.span(),
                    "must not be empty; leave it out to match every GPU",
                );
                None
            }
            Some(m) => Some(m.get_ref().trim().to_string()),
            None => None,
        };
        Some(crate::capacity::Profile {
            name: name?,
            memory_bytes: memory_bytes?,
            sm_share,
            model,
        })
    }
}
