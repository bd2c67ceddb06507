//! `gpuwatch health`: asks the running agent's `/api/v1/health` (through
//! the same client as `gpuwatch silence`, so TLS and basic auth work) and
//! answers as a node-problem-detector custom plugin: exit 0 when no GPU
//! has a problem asked about, 1 when one has, 2 when the agent cannot be
//! asked or gives no verdict; one short line on standard output (the
//! condition's message), every problem in full on standard error (NPD's
//! log). This way the node gets its conditions from NPD, which already has
//! the RBAC for it, and the agent itself holds no cluster credentials.

mod judge;

use std::time::Duration;

use crate::timespec::{parse_duration, DurationRange};

use super::silence::{AgentOptions, Client};

pub use judge::{action_code, fit, judge, Answer, Filter, Status, ACTIONS};

/// `gpuwatch health`.
#[derive(Debug, Clone)]
pub struct HealthOptions {
    /// How to reach the agent.
    pub agent: AgentOptions,
    /// `--npd`: only the one-line message on standard output (the full
    /// list goes to standard error).
    pub npd: bool,
    /// `--degraded`: count degraded reasons instead of unhealthy ones.
    pub degraded: bool,
    /// `--action`: only these actions.
    pub actions: Vec<String>,
    /// `--timeout`, as written.
    pub timeout: String,
    /// `--max-length`: the message's limit in bytes (NPD's
    /// `max_output_length`).
    pub max_length: usize,
}

/// How long the question may take: node-problem-detector kills a plugin
/// after its `timeout` (5 s by default), so the default, 3 s, leaves room.
const TIMEOUT: DurationRange = DurationRange {
    min: Duration::from_millis(100),
    max: Duration::from_secs(60),
    example: "3s or 500ms",
};

/// The answer: the agent's verdict, or `Unknown` with why.
fn ask(options: &HealthOptions, filter: &Filter) -> Answer {
    let unknown = |detail: String| Answer {
        status: Status::Unknown,
        message: fit(
            "",
            &format!("gpuwatch health unknown: {detail}"),
            "",
            options.max_length,
        ),
        details: vec![detail],
    };
    let timeout = match parse_duration(&options.timeout, TIMEOUT) {
        Ok(timeout) => timeout,
        Err(error) => return unknown(format!("--timeout: {error}")),
    };
    if let Some(bad) = options.actions.iter().find(|a| {
        a.is_empty()
            || !a
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    }) {
        return unknown(format!(
            "--action {bad}: give an action name in capitals, e.g. {}",
            ACTIONS.join(", ")
        ));
    }
    let client = match Client::with_timeout(&options.agent, timeout) {
        Ok(client) => client,
        Err(error) => return unknown(format!("{error:#}")),
    };
    let document = match client.call("GET", "/api/v1/health", None) {
        Ok(document) => document,
        Err(error) => return unknown(format!("{error:#}")),
    };
    let mut answer = judge(&document, filter, options.max_length);
    if answer.status == Status::Unknown {
        answer.message = fit(
            "",
            &format!("gpuwatch health unknown: {}", answer.message),
            "",
            options.max_length,
        );
        answer.details = answer
            .details
            .into_iter()
            .map(|d| format!("{d} (from {})", client.base))
            .collect();
    }
    answer
}

/// Runs `gpuwatch health`: prints the answer and returns the exit status.
pub fn health(options: HealthOptions) -> u8 {
    let filter = Filter {
        degraded: options.degraded,
        actions: options.actions.clone(),
    };
    let answer = ask(&options, &filter);
    if options.npd {
        println!("{}", answer.message);
        for detail in &answer.details {
            eprintln!("{}", crate::escape::control_chars(detail));
        }
    } else {
        for detail in &answer.details {
            println!("{}", crate::escape::control_chars(detail));
        }
        if answer.status == Status::Ok || answer.details.is_empty() {
            println!("{}", answer.message);
        }
    }
    answer.status as u8
}
