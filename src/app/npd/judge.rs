//! The pure half of `gpuwatch health`: reads the agent's `/api/v1/health`
//! document, picks the problems the caller asked about, names the action
//! each needs, and writes the one-line message node-problem-detector puts
//! on the node (cut to its `max_output_length`, which counts bytes).

use serde_json::Value;

use crate::health::action_class::ActionClass;

/// How the command exits, as node-problem-detector's custom-plugin
/// protocol reads it (`pkg/custompluginmonitor/types/types.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// 0, `OK`: nothing asked about is wrong (the condition is `False`).
    Ok = 0,
    /// 1, `NonOK`: a problem (the condition is `True`, or an event).
    Problem = 1,
    /// 2, `Unknown`: the agent could not be asked or gave no verdict.
    Unknown = 2,
}

/// Which problems count.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Count the degraded reasons (for a temporary event) instead of the
    /// unhealthy ones (for a permanent condition).
    pub degraded: bool,
    /// Only these actions (e.g. `RESET_GPU`); empty: every action.
    pub actions: Vec<String>,
}

/// What the command prints and how it exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// How it exits.
    pub status: Status,
    /// The one line for standard output, ASCII, at most the limit in bytes.
    pub message: String,
    /// Every problem in full (full UUIDs and texts), for standard error,
    /// which node-problem-detector writes to its log.
    pub details: Vec<String>,
}

/// The actions gpuwatch names (its own and NVIDIA's vocabulary), worst
/// first: the message leads with the worst.
pub const ACTIONS: [&str; 4] = [
    "INSPECT_HARDWARE",
    "REBOOT_SYSTEM",
    "RESET_GPU",
    "RESET_FABRIC",
];

/// One problem: a reason of a GPU's verdict, or a GPU the driver lost
/// track of.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Problem {
    /// `GPU 3 (GPU-3f8c1b2e)` or `GPU missing (PCI 0000:3b:00.0)`.
    who: String,
    /// The GPU's index, for the "+N more on GPU ..." tail.
    gpu: Option<u64>,
    /// Full identity for the log.
    full: String,
    action: String,
    text: String,
}

/// The action's name in one word, from the class the health judge gave the
/// reason: the classes are folded onto the four of [`ACTIONS`] where they
/// ask for the same thing (every fabric class is a fabric reset, a lost GPU
/// and the NVLink workflow start with a GPU reset); the others keep their
/// class's name (DRAIN_P2P, RESTART_APP, OTHER).
pub fn action_code(class: ActionClass) -> &'static str {
    match class {
        ActionClass::FabricNotRegistered
        | ActionClass::FabricUnhealthy
        | ActionClass::FabricDegraded => "RESET_FABRIC",
        ActionClass::GpuMissing | ActionClass::WorkflowNvlink => "RESET_GPU",
        other => other.as_str(),
    }
}

/// `text` with everything but printable ASCII replaced by `?`: the message
/// is cut at a byte count, which must not split a character, and outside
/// text must not carry control characters onto the node object.
fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// `head` + `text` + `tail` in at most `max` bytes: the text is shortened
/// (ending in `...`) so that the head (who, action) and tail (how many
/// more) survive; only when they alone are too long is the whole cut.
/// Every part is ASCII, so any cut is on a character boundary.
pub fn fit(head: &str, text: &str, tail: &str, max: usize) -> String {
    let whole = format!("{head}{text}{tail}");
    if whole.len() <= max {
        return whole;
    }
    let budget = max.saturating_sub(head.len() + tail.len());
    if budget >= 4 {
        return format!("{head}{}...{tail}", &text[..budget - 3]);
    }
    whole[..max].to_string()
}

/// A bad answer: the agent's document lacks what the verdict needs.
fn bad(what: &str) -> Answer {
    Answer {
        status: Status::Unknown,
        message: String::new(),
        details: vec![format!("the agent's /api/v1/health answer {what}")],
    }
}

/// The problems of a GPU entry that count under `filter`.
fn gpu_problems(entry: &Value, filter: &Filter, out: &mut Vec<Problem>) -> Result<(), Answer> {
    let index = entry["gpu"]
        .as_u64()
        .ok_or_else(|| bad("has a GPU without an index"))?;
    let uuid = entry["uuid"].as_str().unwrap_or_default();
    let reasons = entry["reasons"]
        .as_array()
        .ok_or_else(|| bad("has a GPU without reasons"))?;
    for reason in reasons {
        let state = reason["state"].as_str().unwrap_or_default();
        let counts = match state {
            "unhealthy" => !filter.degraded,
            "degraded" => filter.degraded,
            "healthy" => false,
            _ => return Err(bad("has a reason without a known state")),
        };
        let class = reason["class"]
            .as_str()
            .and_then(ActionClass::parse)
            .ok_or_else(|| {
                bad("has a reason without a known action class (run the same gpuwatch version as the agent)")
            })?;
        let action = action_code(class).to_string();
        if !counts || !(filter.actions.is_empty() || filter.actions.contains(&action)) {
            continue;
        }
        let short: String = uuid.chars().take(12).collect();
        out.push(Problem {
            who: format!("GPU {index} ({})", sanitize(&short)),
            gpu: Some(index),
            full: format!("GPU {index} ({})", sanitize(uuid)),
            action,
            text: sanitize(reason["text"].as_str().unwrap_or_default()),
        });
    }
    Ok(())
}

/// Where the action ranks in the message: [`ACTIONS`] first, in order.
fn rank(action: &str) -> usize {
    ACTIONS
        .iter()
        .position(|a| *a == action)
        .unwrap_or(ACTIONS.len())
}

/// The answer to `document` (the agent's `/api/v1/health`) under `filter`,
/// its message cut to `max` bytes.
pub fn judge(document: &Value, filter: &Filter, max: usize) -> Answer {
    let mut answer = judge_uncut(document, filter, max);
    if answer.message.is_empty() {
        answer.message = answer
            .details
            .first()
            .map(|d| fit("", &sanitize(d), "", max))
            .unwrap_or_default();
    }
    answer
}

fn judge_uncut(document: &Value, filter: &Filter, max: usize) -> Answer {
    if !document.is_object() {
        return bad("is not a JSON object");
    }
    let Some(gpus) = document["gpus"].as_array() else {
        return bad("has no list of GPUs");
    };
    if document["state"].is_null() {
        return Answer {
            status: Status::Unknown,
            message: String::new(),
            details: vec![
                "the agent has taken no sample yet (it has just started, or NVML does not answer)"
                    .into(),
            ],
        };
    }
    let mut problems = Vec::new();
    if !filter.degraded {
        for pci in document["node"]["missing_from_driver"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let pci = sanitize(pci.as_str().unwrap_or_default());
            let action = "REBOOT_SYSTEM".to_string();
            if filter.actions.is_empty() || filter.actions.contains(&action) {
                problems.push(Problem {
                    who: format!("GPU missing (PCI {pci})"),
                    gpu: None,
                    full: format!("GPU missing (PCI {pci})"),
                    action,
                    text: "on the PCI bus, not in the driver".into(),
                });
            }
        }
    }
    for entry in gpus {
        if let Err(answer) = gpu_problems(entry, filter, &mut problems) {
            return answer;
        }
    }
    problems.sort_by_key(|p| (rank(&p.action), p.gpu));
    let details: Vec<String> = problems
        .iter()
        .map(|p| format!("{}: {}: {}", p.full, p.action, p.text))
        .collect();
    let Some(first) = problems.first() else {
        return Answer {
            status: Status::Ok,
            message: fit("", &nothing(filter, gpus), "", max),
            details,
        };
    };
    let mut others: Vec<u64> = problems[1..]
        .iter()
        .filter_map(|p| p.gpu)
        .filter(|g| Some(*g) != first.gpu)
        .collect();
    others.sort_unstable();
    others.dedup();
    let tail = match (problems.len() - 1, others.as_slice()) {
        (0, _) => String::new(),
        (n, []) => format!(" (+{n} more)"),
        (n, gpus) => {
            let list: Vec<String> = gpus.iter().map(u64::to_string).collect();
            format!(" (+{n} more, GPU {})", list.join(","))
        }
    };
    Answer {
        status: Status::Problem,
        message: fit(
            &format!("{}: {}: ", first.who, first.action),
            &first.text,
            &tail,
            max,
        ),
        details,
    }
}

/// The message when nothing counts.
/// In the default mode it says how many GPUs are degraded: usable, so no
/// condition, but worth a look.
fn nothing(filter: &Filter, gpus: &[Value]) -> String {
    let what = if filter.degraded {
        "degraded"
    } else {
        "unhealthy"
    };
    let degraded = gpus.iter().filter(|g| g["state"] == "degraded").count();
    let count = gpus.len();
    let mut gpus = format!("{count} GPU{} checked", if count == 1 { "" } else { "s" });
    if !filter.degraded && degraded > 0 {
        gpus.push_str(&format!(", {degraded} degraded"));
    }
    if filter.actions.is_empty() {
        format!("no GPU {what} ({gpus})")
    } else {
        format!(
            "no {what} GPU needs {} ({gpus})",
            filter.actions.join(" or ")
        )
    }
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
