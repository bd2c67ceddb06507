//! The alert rules made from `[[profiles]]`: one node-level rule per profile
//! that fires when not one more instance of it fits on any GPU of the node.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::rules::{Condition, Rule, Severity, Template};

use super::CapacityConfig;

/// The name of the rule for `profile`: `GpuCapacityExhausted:<profile>`
/// (rule names are unique; the `profile` label carries the name too).
pub fn rule_name(profile: &str) -> String {
    format!("GpuCapacityExhausted:{profile}")
}

/// One warning rule per profile, holding for `hold` before it fires.
pub fn rules(config: &CapacityConfig, hold: Duration) -> Vec<Rule> {
    config
        .profiles
        .iter()
        .map(|profile| {
            let mut annotations = BTreeMap::new();
            let texts = [
                (
                    "summary",
                    format!(
                        "No GPU on {{{{ .host }}}} can take another {} instance",
                        profile.name
                    ),
                ),
                (
                    "description",
                    format!(
                        "Not one more instance of workload profile {} ({:.1} GiB each) fits on any GPU of {{{{ .host }}}}: free memory (minus the margin), compute modes, MIG instances or SM share rule it out. See `gpuwatch capacity`.",
                        profile.name,
                        profile.memory_bytes as f64 / (1u64 << 30) as f64
                    ),
                ),
            ];
            for (key, text) in texts {
                if let Ok(template) = Template::parse(&text) {
                    annotations.insert(key.to_string(), template);
                }
            }
            Rule {
                name: rule_name(&profile.name),
                condition: Condition::FitsNowhere {
                    profile: profile.clone(),
                    margin: config.memory_margin_bytes,
                },
                for_: hold,
                keep_firing_for: Duration::ZERO,
                clear: None,
                severity: Severity::Warning,
                labels: BTreeMap::from([("profile".to_string(), profile.name.clone())]),
                annotations,
            }
        })
        .collect()
}
