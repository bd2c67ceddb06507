//! Parsing the condition syntax (see [`super::condition`]'s documentation)
//! into a [`Condition`].

use crate::gpu::reasons::CLOCK_EVENT_REASONS;
use crate::gpu::WorkloadKind;

use super::condition::{Condition, Metric, Op, COUNTERS, FLAGS, METRICS};

/// Why a condition does not parse; each message says what to write instead.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConditionError {
    /// "and" and "or" in one condition.
    #[error("\"{0}\" mixes \"and\" with \"or\"; write one rule per alternative")]
    MixedAndOr(String),
    /// A node-level condition joined with others by `joiner`.
    #[error("\"{part}\" is node-level or workload-level and cannot be combined with \"{joiner}\"")]
    NodeLevelCombined {
        /// The node-level part.
        part: String,
        /// "and" or "or".
        joiner: &'static str,
    },
    /// Nothing written.
    #[error("the condition is empty; {SYNTAX}")]
    Empty,
    /// A function call without its `)`.
    #[error("\"{0}\" lacks its closing parenthesis")]
    Unclosed(String),
    /// Words that form no condition.
    #[error("\"{0}\" is not a condition; {SYNTAX}")]
    NotACondition(String),
    /// An unknown metric name.
    #[error("\"{0}\" is not a metric; use one of {names}", names = metric_names())]
    UnknownMetric(String),
    /// An unknown comparison operator.
    #[error("\"{0}\" is not an operator; use >, >=, <, <=, == or !=")]
    UnknownOperator(String),
    /// A one-argument function called with another count.
    #[error("{function}(...) takes one argument in \"{text}\"")]
    OneArgument {
        /// The function.
        function: String,
        /// The whole condition.
        text: String,
    },
    /// `clock_event()` without a reason.
    #[error("clock_event(...) needs a reason in \"{0}\"")]
    NoReason(String),
    /// An unknown clock-event reason.
    #[error("\"{0}\" is not a clock-event reason; use one of {names}", names = reason_names())]
    UnknownReason(String),
    /// `xid()` without a code.
    #[error("xid(...) needs at least one code in \"{0}\"")]
    NoXidCode(String),
    /// An Xid code that is not a positive integer.
    #[error("\"{code}\" is not an Xid code (a positive integer)")]
    BadXidCode {
        /// The code as written.
        code: String,
        /// Why it is not an integer (none for 0).
        #[source]
        source: Option<std::num::ParseIntError>,
    },
    /// An unknown counter in `increase()`.
    #[error("\"{0}\" is not a counter; use one of {names}", names = counter_names())]
    UnknownCounter(String),
    /// A `stale()` age that is no duration in range.
    #[error(
        "\"{age}\" is not a positive duration (the range is {range}); write it like \"30s\" or \"2m\"",
        range = crate::limits::STALE_AGE.describe()
    )]
    BadStaleAge {
        /// The age as written.
        age: String,
        /// Why it is no duration (none when out of range).
        #[source]
        source: Option<humantime::DurationError>,
    },
    /// A margin that is not a positive number of °C.
    #[error("\"{margin}\" is not a margin; write a positive number of °C, e.g. {function}(10)")]
    BadMargin {
        /// The margin as written.
        margin: String,
        /// The function it was given to.
        function: String,
        /// Why it is not a number (none when not positive).
        #[source]
        source: Option<std::num::ParseFloatError>,
    },
    /// An escalation count out of range.
    #[error("\"{count}\" is not a number of GPU resets / node reboots; use 1 to 1000, e.g. xid_recurring(2)")]
    BadRecurrence {
        /// The count as written.
        count: String,
        /// Why it is not an integer (none when out of range).
        #[source]
        source: Option<std::num::ParseIntError>,
    },
    /// A `workload_idle` ratio that is not a number in 0..1.
    #[error("\"{0}\" is not a ratio of SM-active to held GPU time; write a number from 0 to 1, e.g. workload_idle(0.01)")]
    BadIdleRatio(String),
    /// A `workload_idle` kind that names no workload kind.
    #[error("\"{0}\" is not a workload kind; use slurm_job, pod, container or process")]
    UnknownWorkloadKind(String),
    /// An unknown function.
    #[error("\"{0}\" is not a condition function; use clock_event, xid, xid_recurring, increase, absent, stale, temperature_anomaly, peer_hotter or workload_idle")]
    UnknownFunction(String),
    /// A threshold of a byte metric that is neither a number nor a size.
    #[error("\"{0}\" is not a number or size; write it like 1073741824 or 1GiB")]
    NotANumberOrSize(String),
    /// A threshold that is not a number.
    #[error("\"{0}\" is not a number")]
    NotANumber(String),
}

fn metric_names() -> String {
    let names: Vec<&str> = METRICS.iter().map(|(_, n)| *n).collect();
    names.join(", ")
}

fn reason_names() -> String {
    let names: Vec<&str> = CLOCK_EVENT_REASONS.iter().map(|r| r.name).collect();
    names.join(", ")
}

fn counter_names() -> String {
    let names: Vec<&str> = COUNTERS.iter().map(|(_, n)| *n).collect();
    names.join(", ")
}

impl Condition {
    /// Parses the condition syntax (see the module documentation).
    pub fn parse(text: &str) -> Result<Condition, ConditionError> {
        let parts: Vec<&str> = text.split(" and ").map(str::trim).collect();
        if parts.len() > 1 {
            let mut list = Vec::new();
            for part in parts {
                if part.contains(" or ") {
                    return Err(ConditionError::MixedAndOr(text.to_string()));
                }
                let condition = parse_one(part)?;
                if condition.is_node_level() || condition.is_workload_level() {
                    return Err(ConditionError::NodeLevelCombined {
                        part: part.to_string(),
                        joiner: "and",
                    });
                }
                list.push(condition);
            }
            return Ok(Condition::All(list));
        }
        let parts: Vec<&str> = text.split(" or ").map(str::trim).collect();
        if parts.len() > 1 {
            let mut list = Vec::new();
            for part in parts {
                let condition = parse_one(part)?;
                if condition.is_node_level() || condition.is_workload_level() {
                    return Err(ConditionError::NodeLevelCombined {
                        part: part.to_string(),
                        joiner: "or",
                    });
                }
                list.push(condition);
            }
            return Ok(Condition::Any(list));
        }
        parse_one(text.trim())
    }
}

const SYNTAX: &str = "write it like \"temperature > 85\", \"clock_event(hw_thermal_slowdown)\", \"xid(48, 79)\", \"increase(ecc_uncorrected)\", \"absent(power)\", \"gpu_lost\" or \"stale(30s)\"";

fn parse_one(text: &str) -> Result<Condition, ConditionError> {
    if text.is_empty() {
        return Err(ConditionError::Empty);
    }
    if let Some(open) = text.find('(') {
        let function = text[..open].trim();
        let Some(args) = text[open + 1..].strip_suffix(')') else {
            return Err(ConditionError::Unclosed(text.to_string()));
        };
        let args: Vec<&str> = args
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        return parse_call(function, &args, text);
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    match words.as_slice() {
        ["gpu_lost"] => Ok(Condition::GpuLost),
        ["gpus_missing_from_driver"] => Ok(Condition::GpusMissingFromDriver),
        [flag] => FLAGS
            .iter()
            .find(|(_, name)| name == flag)
            .map(|(flag, _)| Condition::Flag { flag: *flag })
            .ok_or_else(|| ConditionError::NotACondition(text.to_string())),
        [metric, op, number] => {
            let metric = Metric::parse(metric)
                .ok_or_else(|| ConditionError::UnknownMetric(metric.to_string()))?;
            let op =
                Op::parse(op).ok_or_else(|| ConditionError::UnknownOperator(op.to_string()))?;
            let threshold = parse_number(metric, number)?;
            Ok(Condition::Compare {
                metric,
                op,
                threshold,
            })
        }
        _ => Err(ConditionError::NotACondition(text.to_string())),
    }
}

fn parse_call(function: &str, args: &[&str], text: &str) -> Result<Condition, ConditionError> {
    let one = || match args {
        [arg] => Ok(*arg),
        _ => Err(ConditionError::OneArgument {
            function: function.to_string(),
            text: text.to_string(),
        }),
    };
    match function {
        "clock_event" => {
            if args.is_empty() {
                return Err(ConditionError::NoReason(text.to_string()));
            }
            let mut mask = 0;
            for arg in args {
                let reason = CLOCK_EVENT_REASONS
                    .iter()
                    .find(|r| r.name == *arg)
                    .ok_or_else(|| ConditionError::UnknownReason(arg.to_string()))?;
                mask |= reason.bit;
            }
            Ok(Condition::ClockEvent { mask })
        }
        "xid" => {
            if args.is_empty() {
                return Err(ConditionError::NoXidCode(text.to_string()));
            }
            let mut codes = Vec::new();
            for arg in args {
                match arg.parse::<u64>() {
                    Ok(code) if code > 0 => codes.push(code),
                    result => {
                        return Err(ConditionError::BadXidCode {
                            code: arg.to_string(),
                            source: result.err(),
                        })
                    }
                }
            }
            codes.sort_unstable();
            codes.dedup();
            Ok(Condition::Xid {
                codes,
                defer_to_remap: false,
            })
        }
        "xid_recurring" => {
            let arg = one()?;
            match arg.parse::<u32>() {
                Ok(after @ 1..=1000) => Ok(Condition::XidRecurring { after }),
                Ok(_) => Err(ConditionError::BadRecurrence {
                    count: arg.to_string(),
                    source: None,
                }),
                Err(e) => Err(ConditionError::BadRecurrence {
                    count: arg.to_string(),
                    source: Some(e),
                }),
            }
        }
        "increase" => {
            let arg = one()?;
            COUNTERS
                .iter()
                .find(|(_, name)| *name == arg)
                .map(|(counter, _)| Condition::Increase { counter: *counter })
                .ok_or_else(|| ConditionError::UnknownCounter(arg.to_string()))
        }
        "absent" => {
            let arg = one()?;
            let metric =
                Metric::parse(arg).ok_or_else(|| ConditionError::UnknownMetric(arg.to_string()))?;
            Ok(Condition::Absent { metric })
        }
        "stale" => {
            let arg = one()?;
            let limits = crate::limits::STALE_AGE;
            match humantime::parse_duration(arg) {
                Ok(max_age) if (limits.min..=limits.max).contains(&max_age) => {
                    Ok(Condition::Stale { max_age })
                }
                result => Err(ConditionError::BadStaleAge {
                    age: arg.to_string(),
                    source: result.err(),
                }),
            }
        }
        "temperature_anomaly" | "peer_hotter" => {
            let arg = one()?;
            let margin = match arg.parse::<f64>() {
                Ok(m) if m.is_finite() && m > 0.0 => m,
                result => {
                    return Err(ConditionError::BadMargin {
                        margin: arg.to_string(),
                        function: function.to_string(),
                        source: result.err(),
                    })
                }
            };
            Ok(if function == "peer_hotter" {
                Condition::PeerHotter { margin }
            } else {
                Condition::TemperatureAnomaly { margin }
            })
        }
        "workload_idle" => {
            let Some((ratio, kinds)) = args.split_first() else {
                return Err(ConditionError::BadIdleRatio(String::new()));
            };
            let below = match ratio.parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => r,
                _ => return Err(ConditionError::BadIdleRatio(ratio.to_string())),
            };
            let mut list = Vec::new();
            for name in kinds {
                let kind = WorkloadKind::parse(name)
                    .ok_or_else(|| ConditionError::UnknownWorkloadKind(name.to_string()))?;
                if !list.contains(&kind) {
                    list.push(kind);
                }
            }
            Ok(Condition::WorkloadIdle { below, kinds: list })
        }
        _ => Err(ConditionError::UnknownFunction(function.to_string())),
    }
}

fn parse_number(metric: Metric, text: &str) -> Result<f64, ConditionError> {
    if let Ok(n) = text.parse::<f64>() {
        if n.is_finite() {
            return Ok(n);
        }
    }
    if metric.is_bytes() {
        if let Ok(bytes) = crate::limits::parse_size(text) {
            return Ok(bytes as f64);
        }
        return Err(ConditionError::NotANumberOrSize(text.to_string()));
    }
    Err(ConditionError::NotANumber(text.to_string()))
}
