//! The rules engine's pure core: rules, the built-in pack, conditions over a
//! [`Snapshot`](crate::gpu::Snapshot), and evaluation as a pure function of
//! (rules, snapshot, previous state, now) with Prometheus semantics.
//!
//! ```text
//! parse_rules(toml) ─▶ Vec<Rule> ─┐
//! Snapshot ───────────────────────┼─▶ evaluate(..) ─▶ (EvalState, Vec<Transition>)
//! EvalState (restored, serde) ────┘
//! ```
//!
//! Nothing here does I/O: the caller persists [`EvalState`] and hands the
//! [`Transition`]s to the outbox and notifiers.

pub mod anomaly;
pub mod builtin;
pub mod capacity;
pub mod check;
pub mod condition;
mod condition_parse;
mod escalation;
pub mod eval;
mod machine;
pub mod parse;
pub mod rule;
pub mod template;
pub mod window;
pub mod workload;

pub use builtin::builtin_rules;
pub use check::{metric_value, GpuEvalState};
pub use condition::{Condition, Counter, Direction, Flag, Metric, Op};
pub use condition_parse::ConditionError;
pub use eval::{evaluate, Alert, EvalState, ANNOTATION_REFRESH};
pub use parse::ClearError;
pub use parse::{parse_rules, rules_from_raw, RawRule, RawRules};
pub use rule::{fingerprint, AlertKey, AlertState, Rule, Severity, Target, Transition};
pub use template::{Context, Template, TemplateError};

#[cfg(test)]
mod gpm_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod xid_tests;
