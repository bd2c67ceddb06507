//! Routing: which alerts a receiver gets (its `severities`, `match` and
//! `match_re`), how often an alert that stays firing is sent to it again
//! (`repeat_interval`), and how long it waits to group alerts
//! (`group_wait`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::rules::Severity;

use crate::routing::matcher::{all_match, Matcher};

/// Alertmanager's default `repeat_interval`.
pub const DEFAULT_REPEAT: Duration = Duration::from_secs(4 * 3600);

/// One receiver's route. The default takes every alert and repeats every
/// 4 hours without grouping.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// The severities it gets; empty: all.
    pub severities: Vec<Severity>,
    /// Label matchers that must all match (`match` as `=`, `match_re` as
    /// `=~`).
    pub matchers: Vec<Matcher>,
    /// Send a firing alert again after this long; `None`: never.
    pub repeat_interval: Option<Duration>,
    /// Hold a new firing alert this long to send it together with the
    /// node's other alerts that fire meanwhile; zero: send at once.
    pub group_wait: Duration,
}

impl Default for Route {
    fn default() -> Self {
        Route {
            severities: Vec::new(),
            matchers: Vec::new(),
            repeat_interval: Some(DEFAULT_REPEAT),
            group_wait: Duration::ZERO,
        }
    }
}

impl Route {
    /// Whether an alert with these labels goes to the receiver.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let severity_ok = self.severities.is_empty()
            || labels
                .get("severity")
                .and_then(|s| Severity::parse(s))
                .is_some_and(|s| self.severities.contains(&s));
        severity_ok && all_match(&self.matchers, labels)
    }
}

/// A receiver as the alerting task sees it: its name and route.
#[derive(Debug, Clone, PartialEq)]
pub struct Destination {
    /// The `[[receivers]]` name.
    pub name: String,
    /// What it gets.
    pub route: Route,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::matcher::tests::labels;
    use crate::routing::matcher::{MatchOp, Matcher};

    #[test]
    fn the_default_route_takes_everything() {
        let route = Route::default();
        assert!(route.matches(&labels(&[("alertname", "GpuHot")])));
        assert!(route.matches(&BTreeMap::new()));
        assert_eq!(route.repeat_interval, Some(DEFAULT_REPEAT));
    }

    #[test]
    fn severities_and_matchers_must_all_agree() {
        let route = Route {
            severities: vec![Severity::Critical],
            matchers: vec![
                Matcher::new("alertname", MatchOp::Equal, "GpuLost").unwrap(),
                Matcher::new("gpu", MatchOp::Regex, "[0-3]").unwrap(),
            ],
            ..Route::default()
        };
        let lost = |severity, gpu| {
            labels(&[
                ("alertname", "GpuLost"),
                ("severity", severity),
                ("gpu", gpu),
            ])
        };
        assert!(route.matches(&lost("critical", "2")));
        assert!(!route.matches(&lost("warning", "2")));
        assert!(!route.matches(&lost("critical", "7")));
        assert!(!route.matches(&labels(&[
            ("alertname", "GpuHot"),
            ("severity", "critical"),
            ("gpu", "0")
        ])));
        // No severity label: not a critical alert.
        assert!(!route.matches(&labels(&[("alertname", "GpuLost"), ("gpu", "0")])));
    }
}
