//! Annotation templates: text with `{{ .value }}`, `{{ .gpu }}`,
//! `{{ .uuid }}`, `{{ .name }}`, `{{ .host }}`, `{{ .threshold }}` and
//! `{{ .for }}` (the rule's hold, e.g. "5 minutes"), `{{ .value_percent }}`
//! and `{{ .threshold_percent }}` (a ratio as a percentage), and for workload
//! rules `{{ .workload }}` (who: "Slurm job 1234 of alice (account
//! physics)") and `{{ .gpus }}` ("0,1"). Placeholders are checked
//! when the template is parsed. A text that describes the rule takes its
//! numbers from the rule as configured through these placeholders, never
//! from a copy written into the text, so tuning a rule keeps its alert
//! truthful.

use std::fmt::Write as _;
use std::time::Duration;

/// A value a template can show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    /// The condition's value.
    Value,
    /// The GPU index.
    Gpu,
    /// The GPU UUID.
    Uuid,
    /// The GPU's product name.
    Name,
    /// The host name.
    Host,
    /// The rule's threshold.
    Threshold,
    /// How long the condition must hold (the rule's `for`).
    For,
    /// NVIDIA's immediate action for the Xid code in the value (catalog).
    XidAction,
    /// NVIDIA's description of the Xid code in the value (catalog).
    XidDescription,
    /// The PCI addresses of GPUs on the bus that NVML does not list.
    MissingPci,
    /// The value (a ratio) as a percentage, e.g. 0.002 → "0.2".
    ValuePercent,
    /// The threshold (a ratio) as a percentage.
    ThresholdPercent,
    /// The workload in words: kind, id, user, account or namespace.
    Workload,
    /// The GPUs the workload holds, e.g. "0,1".
    Gpus,
}

const PLACEHOLDERS: &[(Placeholder, &str)] = &[
    (Placeholder::Value, "value"),
    (Placeholder::Gpu, "gpu"),
    (Placeholder::Uuid, "uuid"),
    (Placeholder::Name, "name"),
    (Placeholder::Host, "host"),
    (Placeholder::Threshold, "threshold"),
    (Placeholder::For, "for"),
    (Placeholder::XidAction, "xid_action"),
    (Placeholder::XidDescription, "xid_description"),
    (Placeholder::MissingPci, "missing_pci"),
    (Placeholder::ValuePercent, "value_percent"),
    (Placeholder::ThresholdPercent, "threshold_percent"),
    (Placeholder::Workload, "workload"),
    (Placeholder::Gpus, "gpus"),
];

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Field(Placeholder),
}

/// A parsed annotation template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
}

/// What a template is rendered with; missing values render as "n/a".
#[derive(Debug, Clone, Default)]
pub struct Context<'a> {
    /// The condition's value.
    pub value: Option<f64>,
    /// The GPU index.
    pub gpu: Option<u32>,
    /// The GPU UUID.
    pub uuid: Option<&'a str>,
    /// The GPU's product name.
    pub name: Option<&'a str>,
    /// The host name.
    pub host: &'a str,
    /// The rule's threshold.
    pub threshold: Option<f64>,
    /// The rule's hold (`for`).
    pub hold: Duration,
    /// PCI addresses of GPUs NVML does not list (`GpusMissingFromDriver`).
    pub missing_pci: Option<&'a str>,
    /// The workload in words (workload rules).
    pub workload: Option<&'a str>,
    /// The GPUs the workload holds (workload rules).
    pub gpus: Option<&'a str>,
}

/// Why an annotation template does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A `{{` without its `}}`.
    #[error("\"{{{{\" is not closed by \"}}}}\"")]
    Unclosed,
    /// `{{ x }}` names no placeholder.
    #[error("\"{{{{ {0} }}}}\" is not a placeholder; use {{{{ .value }}}}, {{{{ .gpu }}}}, {{{{ .uuid }}}}, {{{{ .name }}}}, {{{{ .host }}}}, {{{{ .threshold }}}}, {{{{ .for }}}}, {{{{ .xid_action }}}}, {{{{ .xid_description }}}}, {{{{ .missing_pci }}}}, {{{{ .value_percent }}}}, {{{{ .threshold_percent }}}}, {{{{ .workload }}}} or {{{{ .gpus }}}}")]
    UnknownPlaceholder(String),
}

impl Template {
    /// Parses `source`; an unknown placeholder or an unclosed `{{` is an error.
    pub fn parse(source: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut rest = source;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_string()));
            }
            let after = &rest[open + 2..];
            let Some(close) = after.find("}}") else {
                return Err(TemplateError::Unclosed);
            };
            let inner = after[..close].trim();
            let field = inner
                .strip_prefix('.')
                .and_then(|name| PLACEHOLDERS.iter().find(|(_, n)| *n == name))
                .map(|(p, _)| *p)
                .ok_or_else(|| TemplateError::UnknownPlaceholder(inner.to_string()))?;
            parts.push(Part::Field(field));
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok(Template {
            source: source.to_string(),
            parts,
        })
    }

    /// The template as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders the template.
    pub fn render(&self, context: &Context<'_>) -> String {
        let mut out = String::with_capacity(self.source.len() + 16);
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Field(field) => {
                    let _ = match field {
                        Placeholder::Value => write!(out, "{}", number(context.value)),
                        Placeholder::Threshold => write!(out, "{}", number(context.threshold)),
                        Placeholder::Gpu => match context.gpu {
                            Some(i) => write!(out, "{i}"),
                            None => write!(out, "n/a"),
                        },
                        Placeholder::Uuid => write!(out, "{}", context.uuid.unwrap_or("n/a")),
                        Placeholder::Name => write!(out, "{}", context.name.unwrap_or("n/a")),
                        Placeholder::Host => write!(out, "{}", context.host),
                        Placeholder::For => write!(out, "{}", duration(context.hold)),
                        Placeholder::XidAction => write!(out, "{}", xid_catalog(context.value).0),
                        Placeholder::XidDescription => {
                            write!(out, "{}", xid_catalog(context.value).1)
                        }
                        Placeholder::MissingPci => {
                            write!(out, "{}", context.missing_pci.unwrap_or("n/a"))
                        }
                        Placeholder::ValuePercent => {
                            write!(out, "{}", number(context.value.map(|v| v * 100.0)))
                        }
                        Placeholder::ThresholdPercent => {
                            write!(out, "{}", number(context.threshold.map(|v| v * 100.0)))
                        }
                        Placeholder::Workload => {
                            write!(out, "{}", context.workload.unwrap_or("n/a"))
                        }
                        Placeholder::Gpus => write!(out, "{}", context.gpus.unwrap_or("n/a")),
                    };
                }
            }
        }
        out
    }
}

/// NVIDIA's (action, description) of the Xid code in `value`.
fn xid_catalog(value: Option<f64>) -> (&'static str, &'static str) {
    const UNKNOWN: (&str, &str) = ("n/a", "not in gpuwatch's embedded Xid catalog yet");
    match value.filter(|v| v.is_finite() && *v >= 0.0) {
        Some(code) => crate::health::catalog::lookup(code as u64)
            .map_or(UNKNOWN, |info| (info.action.as_str(), info.description)),
        None => UNKNOWN,
    }
}

/// A number for people: integers without decimals, others with up to two.
pub fn number(value: Option<f64>) -> String {
    match value {
        None => "n/a".to_string(),
        Some(v) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{}", v as i64),
        Some(v) => {
            let text = format!("{v:.2}");
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        }
    }
}

/// A duration for people, in words: "2 seconds", "1 minute", "1 hour 30
/// minutes", "500 ms" (below a second), "0 seconds".
pub fn duration(d: Duration) -> String {
    if d > Duration::ZERO && d < Duration::from_secs(1) {
        return format!("{} ms", d.as_millis());
    }
    let mut left = d.as_secs();
    let mut parts = Vec::new();
    for (unit, seconds) in [
        ("day", 86_400),
        ("hour", 3_600),
        ("minute", 60),
        ("second", 1),
    ] {
        let n = left / seconds;
        left %= seconds;
        if n > 0 {
            parts.push(format!("{n} {unit}{}", if n == 1 { "" } else { "s" }));
        }
    }
    if parts.is_empty() {
        "0 seconds".to_string()
    } else {
        parts.join(" ")
    }
}
