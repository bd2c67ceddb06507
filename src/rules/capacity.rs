//! The alert rules made from `[[profiles]]`: one node-level rule per profile
//! that fires when not one more instance of it fits on any GPU of the node.
//! (Here, not in [`crate::capacity`]: rules use capacity, not the reverse.)

use std::collections::BTreeMap;
use std::time::Duration;

use crate::capacity::CapacityConfig;

use super::condition::Condition;
use super::rule::{Rule, Severity};
use super::template::{Template, TemplateError};

/// An annotation of a profile's rule that does not parse as a template (a
/// profile name with `{{` in it, which the configuration refuses, but a
/// [`CapacityConfig`] built in code may hold).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {annotation} annotation of the capacity rule of profile \"{profile}\" is not a valid template ({source}); use letters, digits, '-', '_' and '.' in profile names")]
pub struct ProfileRuleError {
    /// The profile.
    pub profile: String,
    /// The annotation, e.g. "summary".
    pub annotation: &'static str,
    /// Why its template does not parse.
    #[source]
    pub source: TemplateError,
}

/// The name of the rule for `profile`: `GpuCapacityExhausted:<profile>`
/// (rule names are unique; the `profile` label carries the name too).
pub fn rule_name(profile: &str) -> String {
    format!("GpuCapacityExhausted:{profile}")
}

/// One warning rule per profile, holding for `hold` before it fires.
pub fn rules(config: &CapacityConfig, hold: Duration) -> Result<Vec<Rule>, ProfileRuleError> {
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
                let template = Template::parse(&text).map_err(|source| ProfileRuleError {
                    profile: profile.name.clone(),
                    annotation: key,
                    source,
                })?;
                annotations.insert(key.to_string(), template);
            }
            Ok(Rule {
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
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::Profile;

    fn config(name: &str) -> CapacityConfig {
        CapacityConfig {
            profiles: vec![Profile {
                name: name.to_string(),
                memory_bytes: 1 << 30,
                sm_share: None,
                model: None,
            }],
            memory_margin_bytes: 0,
            alert_for: Duration::ZERO,
        }
    }

    #[test]
    fn each_profile_gets_its_rule_with_both_annotations() {
        let rules = rules(&config("train"), Duration::ZERO).expect("a valid name");
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].name, "GpuCapacityExhausted:train");
        let keys: Vec<&str> = rules[0].annotations.keys().map(String::as_str).collect();
        assert_eq!(keys, ["description", "summary"]);
    }

    /// Before: the annotation was dropped without a word.
    #[test]
    fn an_annotation_that_does_not_parse_is_an_error_naming_it() {
        let error = rules(&config("a{{b"), Duration::ZERO).expect_err("not a template");
        assert_eq!(error.annotation, "summary");
        assert_eq!(error.profile, "a{{b");
        let message = error.to_string();
        assert!(
            message.contains("summary annotation") && message.contains("\"a{{b\""),
            "{message}"
        );
    }
}
