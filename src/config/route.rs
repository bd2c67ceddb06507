//! A receiver's routing fields (`severities`, `match`, `match_re`,
//! `repeat_interval`, `group_wait`), checked into a
//! [`Route`](crate::routing::Route) with file, line and field.

use std::time::Duration;

use toml::Spanned;

use crate::routing::matcher::{MatchOp, Matcher};
use crate::routing::route::{Route, DEFAULT_REPEAT};
use crate::rules::Severity;

use super::limits;
use super::raw::RawReceiver;
use super::Validator;

type LabelMap = Spanned<std::collections::BTreeMap<String, Spanned<String>>>;

impl Validator<'_> {
    /// Checks `r`'s routing fields; `field` names a field of this receiver.
    /// `table` is the receiver's entry, for an empty `severities`
    /// (its list has no position of its own).
    pub(super) fn route(
        &mut self,
        field: &dyn Fn(&str) -> String,
        r: &RawReceiver,
        table: &std::ops::Range<usize>,
    ) -> Route {
        let mut route = Route::default();
        for s in r.severities.iter().flatten() {
            match Severity::parse(s.get_ref()) {
                Some(severity) => route.severities.push(severity),
                None => self.problem(
                    &field("severities"),
                    s.span(),
                    &format!(
                        "\"{}\" is not a severity; use info, warning or critical",
                        s.get_ref()
                    ),
                ),
            }
        }
        if r.severities.as_ref().is_some_and(Vec::is_empty) {
            self.problem(
                &field("severities"),
                table.clone(),
                "is empty, so the receiver would get nothing: list severities, or leave it out for all",
            );
        }
        self.matchers(
            &field("match"),
            r.match_labels.as_ref(),
            MatchOp::Equal,
            &mut route,
        );
        self.matchers(
            &field("match_re"),
            r.match_re.as_ref(),
            MatchOp::Regex,
            &mut route,
        );
        if let Some(text) = &r.repeat_interval {
            route.repeat_interval = match text.get_ref().trim() {
                "0" | "off" | "never" => None,
                _ => {
                    let given = Some(text);
                    let d = self.duration(
                        &field("repeat_interval"),
                        given,
                        DEFAULT_REPEAT,
                        &limits::REPEAT_INTERVAL,
                    );
                    Some(d)
                }
            };
        }
        if let Some(text) = &r.group_wait {
            route.group_wait = match text.get_ref().trim() {
                "0" | "off" => Duration::ZERO,
                _ => self.duration(
                    &field("group_wait"),
                    Some(text),
                    Duration::ZERO,
                    &limits::GROUP_WAIT,
                ),
            };
        }
        route
    }

    fn matchers(&mut self, field: &str, map: Option<&LabelMap>, op: MatchOp, route: &mut Route) {
        let Some(map) = map else { return };
        for (name, value) in map.get_ref() {
            match Matcher::new(name, op, value.get_ref()) {
                Ok(m) => route.matchers.push(m),
                Err(error) => {
                    let span = if error.is_about_name() {
                        map.span()
                    } else {
                        value.span()
                    };
                    self.problem(&format!("{field}.{name}"), span, &error.to_string());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::{Config, ConfigError};
    use crate::rules::Severity;

    const HOOK: &str =
        "[[receivers]]\nname = \"pager\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:1/\"\n";

    #[test]
    fn routing_fields_become_the_route() {
        let source = format!(
            "{HOOK}severities = [\"critical\", \"warning\"]\nmatch = {{ alertname = \"GpuLost\" }}\nmatch_re = {{ gpu = \"[0-3]\" }}\nrepeat_interval = \"30m\"\ngroup_wait = \"30s\"\n"
        );
        let config = Config::parse(&source, "r.toml").expect("valid");
        let route = &config.receivers[0].route;
        assert_eq!(
            route.severities,
            vec![Severity::Critical, Severity::Warning]
        );
        let matchers: Vec<String> = route.matchers.iter().map(ToString::to_string).collect();
        assert_eq!(matchers, vec!["alertname=GpuLost", "gpu=~[0-3]"]);
        assert_eq!(route.repeat_interval, Some(Duration::from_secs(1800)));
        assert_eq!(route.group_wait, Duration::from_secs(30));
        let plain = Config::parse(HOOK, "r.toml").expect("valid");
        assert_eq!(plain.receivers[0].route, crate::routing::Route::default());
        for off in ["0", "off", "never"] {
            let c = Config::parse(&format!("{HOOK}repeat_interval = \"{off}\"\n"), "r.toml")
                .expect("valid");
            assert_eq!(c.receivers[0].route.repeat_interval, None, "{off}");
        }
    }

    #[test]
    fn bad_routing_fields_name_file_line_and_field() {
        let source = format!(
            "{HOOK}severities = [\"critical\", \"urgent\"]\nmatch = {{ \"9gpu\" = \"0\" }}\nmatch_re = {{ gpu = \"[0-\" }}\nrepeat_interval = \"often\"\ngroup_wait = \"1h\"\n"
        );
        let Err(ConfigError::Invalid(problems)) = Config::parse(&source, "bad.toml") else {
            panic!("expected problems");
        };
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        let expect = [
            "bad.toml:5:27: receivers[0].severities: \"urgent\" is not a severity",
            "bad.toml:6:9: receivers[0].match.9gpu: \"9gpu\" is not a label name",
            "bad.toml:7:20: receivers[0].match_re.gpu: \"[0-\" is not a regular expression: ",
            "bad.toml:8:19: receivers[0].repeat_interval: \"often\" is not a duration",
            "bad.toml:9:14: receivers[0].group_wait: \"1h\" is too long; use at most 10m",
        ];
        assert_eq!(problems.len(), expect.len(), "{text:#?}");
        for (got, want) in text.iter().zip(expect) {
            assert!(got.starts_with(want), "{got}\n  should start with\n{want}");
        }
    }
}
