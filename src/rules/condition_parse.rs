//! Parsing the condition syntax (see [`super::condition`]'s documentation)
//! into a [`Condition`].

use crate::gpu::reasons::CLOCK_EVENT_REASONS;

use super::condition::{Condition, Metric, Op, COUNTERS, FLAGS, METRICS};

impl Condition {
    /// Parses the condition syntax (see the module documentation).
    pub fn parse(text: &str) -> Result<Condition, String> {
        let parts: Vec<&str> = text.split(" and ").map(str::trim).collect();
        if parts.len() > 1 {
            let mut list = Vec::new();
            for part in parts {
                if part.contains(" or ") {
                    return Err(format!(
                        "\"{text}\" mixes \"and\" with \"or\"; write one rule per alternative"
                    ));
                }
                let condition = parse_one(part)?;
                if condition.is_node_level() {
                    return Err(format!(
                        "\"{part}\" is node-level and cannot be combined with \"and\""
                    ));
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
                if condition.is_node_level() {
                    return Err(format!(
                        "\"{part}\" is node-level and cannot be combined with \"or\""
                    ));
                }
                list.push(condition);
            }
            return Ok(Condition::Any(list));
        }
        parse_one(text.trim())
    }
}

const SYNTAX: &str = "write it like \"temperature > 85\", \"clock_event(hw_thermal_slowdown)\", \"xid(48, 79)\", \"increase(ecc_uncorrected)\", \"absent(power)\", \"gpu_lost\" or \"stale(30s)\"";

fn parse_one(text: &str) -> Result<Condition, String> {
    if text.is_empty() {
        return Err(format!("the condition is empty; {SYNTAX}"));
    }
    if let Some(open) = text.find('(') {
        let function = text[..open].trim();
        let Some(args) = text[open + 1..].strip_suffix(')') else {
            return Err(format!("\"{text}\" lacks its closing parenthesis"));
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
            .ok_or_else(|| format!("\"{text}\" is not a condition; {SYNTAX}")),
        [metric, op, number] => {
            let metric = Metric::parse(metric).ok_or_else(|| unknown_metric(metric))?;
            let op = Op::parse(op).ok_or_else(|| {
                format!("\"{op}\" is not an operator; use >, >=, <, <=, == or !=")
            })?;
            let threshold = parse_number(metric, number)?;
            Ok(Condition::Compare {
                metric,
                op,
                threshold,
            })
        }
        _ => Err(format!("\"{text}\" is not a condition; {SYNTAX}")),
    }
}

fn parse_call(function: &str, args: &[&str], text: &str) -> Result<Condition, String> {
    let one = || match args {
        [arg] => Ok(*arg),
        _ => Err(format!("{function}(...) takes one argument in \"{text}\"")),
    };
    match function {
        "clock_event" => {
            if args.is_empty() {
                return Err(format!("clock_event(...) needs a reason in \"{text}\""));
            }
            let mut mask = 0;
            for arg in args {
                let reason = CLOCK_EVENT_REASONS
                    .iter()
                    .find(|r| r.name == *arg)
                    .ok_or_else(|| {
                        let names: Vec<&str> = CLOCK_EVENT_REASONS.iter().map(|r| r.name).collect();
                        format!(
                            "\"{arg}\" is not a clock-event reason; use one of {}",
                            names.join(", ")
                        )
                    })?;
                mask |= reason.bit;
            }
            Ok(Condition::ClockEvent { mask })
        }
        "xid" => {
            if args.is_empty() {
                return Err(format!("xid(...) needs at least one code in \"{text}\""));
            }
            let mut codes = Vec::new();
            for arg in args {
                match arg.parse::<u64>() {
                    Ok(code) if code > 0 => codes.push(code),
                    _ => return Err(format!("\"{arg}\" is not an Xid code (a positive integer)")),
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
                _ => Err(format!(
                    "\"{arg}\" is not a number of GPU resets / node reboots; use 1 to 1000, e.g. xid_recurring(2)"
                )),
            }
        }
        "increase" => {
            let arg = one()?;
            COUNTERS
                .iter()
                .find(|(_, name)| *name == arg)
                .map(|(counter, _)| Condition::Increase { counter: *counter })
                .ok_or_else(|| {
                    let names: Vec<&str> = COUNTERS.iter().map(|(_, n)| *n).collect();
                    format!(
                        "\"{arg}\" is not a counter; use one of {}",
                        names.join(", ")
                    )
                })
        }
        "absent" => {
            let arg = one()?;
            let metric = Metric::parse(arg).ok_or_else(|| unknown_metric(arg))?;
            Ok(Condition::Absent { metric })
        }
        "stale" => {
            let arg = one()?;
            let limits = crate::limits::STALE_AGE;
            match humantime::parse_duration(arg) {
                Ok(max_age) if (limits.min..=limits.max).contains(&max_age) => {
                    Ok(Condition::Stale { max_age })
                }
                _ => Err(format!(
                    "\"{arg}\" is not a positive duration (the range is {}); write it like \"30s\" or \"2m\"",
                    limits.describe()
                )),
            }
        }
        "temperature_anomaly" | "peer_hotter" => {
            let arg = one()?;
            let margin = match arg.parse::<f64>() {
                Ok(m) if m.is_finite() && m > 0.0 => m,
                _ => {
                    return Err(format!(
                        "\"{arg}\" is not a margin; write a positive number of °C, e.g. {function}(10)"
                    ))
                }
            };
            Ok(if function == "peer_hotter" {
                Condition::PeerHotter { margin }
            } else {
                Condition::TemperatureAnomaly { margin }
            })
        }
        _ => Err(format!(
            "\"{function}\" is not a condition function; use clock_event, xid, increase, absent, stale, temperature_anomaly or peer_hotter"
        )),
    }
}

fn unknown_metric(name: &str) -> String {
    let names: Vec<&str> = METRICS.iter().map(|(_, n)| *n).collect();
    format!(
        "\"{name}\" is not a metric; use one of {}",
        names.join(", ")
    )
}

fn parse_number(metric: Metric, text: &str) -> Result<f64, String> {
    if let Ok(n) = text.parse::<f64>() {
        if n.is_finite() {
            return Ok(n);
        }
    }
    if metric.is_bytes() {
        if let Ok(bytes) = crate::limits::parse_size(text) {
            return Ok(bytes as f64);
        }
        return Err(format!(
            "\"{text}\" is not a number or size; write it like 1073741824 or 1GiB"
        ));
    }
    Err(format!("\"{text}\" is not a number"))
}
