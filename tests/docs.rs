//! The docs the build keeps true (issue 26): README.md stays short and every
//! relative link in it and in docs/*.md resolves (files and `#anchors`);
//! docs/metrics-reference.md is what the agent's encoder exports on the
//! golden scenario, rendered family by family.
//!
//! Rewrite the reference with `GPUWATCH_UPDATE_DOCS=1 cargo test --test docs`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest README: what gpuwatch is, the two commands, the screenshot,
/// the five first things, the docs index; the reference lives in docs/.
const README_MAX_LINES: usize = 250;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md, as (path, text).
fn pages() -> Vec<(PathBuf, String)> {
    let mut paths = vec![repository().join("README.md")];
    let docs = std::fs::read_dir(repository().join("docs")).expect("docs/ exists");
    let mut found: Vec<PathBuf> = docs
        .map(|entry| entry.expect("docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    found.sort();
    paths.extend(found);
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, text)
        })
        .collect()
}

/// The lines of `text` outside fenced code blocks, with their numbers
/// (from 1).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((index + 1, line));
        }
    }
    out
}

/// A heading's anchor as GitHub makes it: lower case, every character but
/// letters, digits, `-`, `_` and spaces dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor of a Markdown page: its headings' slugs, a repeated one
/// numbered `-1`, `-2`, … as GitHub numbers them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let count = seen.entry(base.clone()).or_default();
        out.insert(if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    out
}

/// The targets of inline links and images (`[text](target)`) on a line,
/// leaving out inline code spans.
fn link_targets(line: &str) -> Vec<String> {
    let mut prose = String::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 0 {
            prose.push_str(part);
        } else {
            prose.push_str("code");
        }
    }
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        out.push(after[..end].to_string());
        rest = &after[end..];
    }
    out
}

/// Whether a link target leaves the repository (a URL, a mail address).
fn is_external(target: &str) -> bool {
    let scheme: String = target
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        .collect();
    !scheme.is_empty() && target[scheme.len()..].starts_with(':')
}

/// What is wrong with one relative link of `page`, if anything.
fn broken(page: &Path, page_text: &str, target: &str) -> Option<String> {
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let (file, text) = if path.is_empty() {
        (page.to_path_buf(), page_text.to_string())
    } else {
        let file = page.parent().expect("a page's folder").join(path);
        if !file.exists() {
            return Some(format!("{} does not exist", file.display()));
        }
        let text = if file.extension().is_some_and(|e| e == "md") && file.is_file() {
            std::fs::read_to_string(&file).unwrap_or_default()
        } else {
            String::new()
        };
        (file, text)
    };
    let anchor = anchor?;
    if file.extension().is_none_or(|e| e != "md") {
        return Some(format!(
            "#{anchor} into {}, which has no headings",
            file.display()
        ));
    }
    (!anchors(&text).contains(anchor))
        .then(|| format!("{} has no heading with anchor #{anchor}", file.display()))
}

#[test]
fn the_readme_is_short_and_every_relative_link_resolves() {
    let readme = std::fs::read_to_string(repository().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, over {README_MAX_LINES}: move the detail into a docs/ page and link it"
    );
    let mut problems = Vec::new();
    let mut checked = 0;
    for (page, text) in pages() {
        for (number, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if is_external(&target) || target.starts_with('/') {
                    continue;
                }
                checked += 1;
                if let Some(why) = broken(&page, &text, &target) {
                    problems.push(format!("{}:{number}: ({target}): {why}", page.display()));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
    assert!(checked > 100, "only {checked} relative links found");
}

#[test]
fn slugs_and_link_targets_read_markdown_as_github_does() {
    assert_eq!(slug("Alerts (rules engine)"), "alerts-rules-engine");
    assert_eq!(
        slug("Kernel log: Xid with their text, SXid, the backlog since boot"),
        "kernel-log-xid-with-their-text-sxid-the-backlog-since-boot"
    );
    assert_eq!(
        slug("Links: `server.external_url`"),
        "links-serverexternal_url"
    );
    let page = "# A\n## Kubernetes\n```sh\n# not a heading\n```\n### Kubernetes\n";
    let expected: BTreeSet<String> = ["a", "kubernetes", "kubernetes-1"].map(String::from).into();
    assert_eq!(anchors(page), expected);
    assert_eq!(
        link_targets("see [a](b.md#c), `[x](not)` and ![i](p.png)"),
        vec!["b.md#c".to_string(), "p.png".to_string()]
    );
    assert!(is_external("https://example.com/x") && is_external("mailto:a@b"));
    assert!(!is_external("docs/web.md#web-view") && !is_external("#anchor"));
}

/// One family as the reference shows it.
#[derive(Debug, Default)]
struct Family {
    kind: String,
    unit: String,
    help: String,
    labels: BTreeSet<String>,
}

/// The families of a Prometheus text exposition in their order, with the
/// label names of all their samples.
fn families(text: &str) -> Vec<(String, Family)> {
    let mut order: Vec<String> = Vec::new();
    let mut by_name: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            if !by_name.contains_key(name) {
                order.push(name.to_string());
            }
            by_name.entry(name.to_string()).or_default().help = help.to_string();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            by_name.entry(name.to_string()).or_default().kind = kind.to_string();
        }
    }
    let metrics = common::Metrics::parse(text);
    for sample in &metrics.samples {
        let family = by_name
            .get_mut(&sample.name)
            .unwrap_or_else(|| panic!("sample {} has no # HELP of its own", sample.name));
        family.labels.extend(sample.labels.keys().cloned());
    }
    order
        .into_iter()
        .map(|name| {
            let family = by_name.remove(&name).expect("named family");
            (name, family)
        })
        .collect()
}

/// `# UNIT` lines of an OpenMetrics exposition, by the family's name in
/// the Prometheus text format (a counter's with `_total`).
fn units(openmetrics: &str) -> BTreeMap<String, String> {
    let mut kinds = BTreeMap::new();
    let mut units = Vec::new();
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some((name, kind)) = rest.split_once(' ') {
                kinds.insert(name.to_string(), kind.to_string());
            }
        } else if let Some(rest) = line.strip_prefix("# UNIT ") {
            if let Some((name, unit)) = rest.split_once(' ') {
                units.push((name.to_string(), unit.to_string()));
            }
        }
    }
    units
        .into_iter()
        .map(|(name, unit)| {
            let text_name = if kinds.get(&name).is_some_and(|k| k == "counter") {
                format!("{name}_total")
            } else {
                name
            };
            (text_name, unit)
        })
        .collect()
}

/// The family names of the golden scenario's /metrics with `detail` (TOML
/// list items) and `args`.
fn family_names(detail: &str, args: &[&str]) -> BTreeSet<String> {
    let golden = common::golden::start(detail, args);
    families(&golden.metrics.text)
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// A table cell: `|` escaped, an empty value as "–".
fn cell(text: &str) -> String {
    if text.is_empty() {
        "–".to_string()
    } else {
        text.replace('|', "\\|")
    }
}

fn render(everything: &[(String, Family)], sets: &BTreeMap<String, String>) -> String {
    let mut out = String::from(
        "# Metrics reference\n\n\
         [gpuwatch](../README.md) › [documentation](../README.md#documentation)\n\n\
         <!-- Generated by tests/docs.rs from the agent's /metrics; do not edit by hand. \
         `GPUWATCH_UPDATE_DOCS=1 cargo test --test docs` rewrites it. -->\n\n\
         Every metric family the agent exports, as its encoder writes it: the\n\
         golden scenario (`tests/scenarios/golden-full.toml`, with the fixture\n\
         `/proc`, a stand-in kubelet, a kernel log, a PCI tree and the history\n\
         wired, as `tests/golden.rs` runs it) with every detail set and both\n\
         drop-in sets, in the order of the exposition. HELP, type and label\n\
         names come from the Prometheus text format, the unit from the\n\
         OpenMetrics one (`# UNIT`). The set says when a family is out: by\n\
         default, only with a [detail set](metrics.md#detail-sets) (found by\n\
         running each set alone), or only with a\n\
         [drop-in set](compat.md) (`--metrics-compat`). What each value means\n\
         and where it comes from: the tables of [Metrics](metrics.md) and\n\
         [Drop-in metric names](compat.md). Families this scenario does not\n\
         produce: acting on health's `gpuwatch_remediation_*` (its table is in\n\
         [Health](health.md#acting-on-health)) and TLS's `gpuwatch_tls_*`\n\
         (in [Web security](web.md#web-security-tls-and-basic-auth)).\n",
    );
    let sections = [
        ("gpuwatch's own names", false),
        ("Drop-in names (`--metrics-compat`)", true),
    ];
    for (title, compat) in sections {
        out.push_str(&format!(
            "\n## {title}\n\n| family | type | unit | labels | set | help |\n|---|---|---|---|---|---|\n"
        ));
        for (name, family) in everything {
            let set = &sets[name];
            if set.starts_with("drop-in") != compat {
                continue;
            }
            let labels: Vec<&str> = family.labels.iter().map(String::as_str).collect();
            out.push_str(&format!(
                "| `{name}` | {} | {} | {} | {} | {} |\n",
                cell(&family.kind),
                cell(&family.unit),
                cell(&labels.join(", ")),
                cell(set),
                cell(&family.help)
            ));
        }
    }
    out
}

#[test]
fn the_metrics_reference_is_what_the_encoder_exports() {
    const DETAIL_SETS: [&str; 6] = [
        "nvlink_links",
        "media_engines",
        "gpm_pipes",
        "processes",
        "collector_groups",
        "rule_values",
    ];
    const COMPAT_SETS: [&str; 2] = ["dcgm", "nvidia_smi"];
    // Everything: every detail set and both drop-in sets.
    let full = common::golden::start("\"full\"", &["--metrics-compat", "dcgm,nvidia_smi"]);
    let openmetrics = full
        .agent
        .get_with("/metrics", &[("Accept", "application/openmetrics-text")])
        .expect("OpenMetrics /metrics");
    assert_eq!(openmetrics.status, 200, "{}", openmetrics.body);
    assert!(
        openmetrics.body.contains("# UNIT "),
        "no # UNIT line: not OpenMetrics?\n{}",
        openmetrics.body
    );
    let units = units(&openmetrics.body);
    let mut everything = families(&full.metrics.text);
    drop(full);
    for (name, family) in &mut everything {
        family.unit = units.get(name).cloned().unwrap_or_default();
    }

    // Which set brings each family: the default, then each set alone.
    let default = family_names("", &[]);
    let mut sets: BTreeMap<String, String> = default
        .iter()
        .map(|name| (name.clone(), "default".to_string()))
        .collect();
    for set in DETAIL_SETS {
        for name in family_names(&format!("\"{set}\""), &[]) {
            sets.entry(name)
                .or_insert_with(|| format!("detail `{set}`"));
        }
    }
    for set in COMPAT_SETS {
        for name in family_names("", &["--metrics-compat", set]) {
            sets.entry(name)
                .or_insert_with(|| format!("drop-in `{set}`"));
        }
    }
    let unplaced: Vec<&String> = everything
        .iter()
        .map(|(name, _)| name)
        .filter(|name| !sets.contains_key(*name))
        .collect();
    assert!(
        unplaced.is_empty(),
        "families out with everything on but with no single set: {unplaced:?}"
    );

    // Every family of the hand-written tables is in the reference.
    let mut documented: BTreeSet<String> = common::docs_metric_table("metrics.md", "metrics-table")
        .into_keys()
        .collect();
    let compat_page = common::docs_page("compat.md");
    for marker in ["compat-dcgm-table", "compat-nvidia-smi-table"] {
        for row in common::docs_marked(&compat_page, "compat.md", marker)
            .lines()
            .filter(|l| l.starts_with("| `"))
        {
            let name = row.trim_matches('|').split('|').next().unwrap_or("");
            documented.insert(name.trim().trim_matches('`').to_string());
        }
    }
    let rendered: BTreeSet<String> = everything.iter().map(|(n, _)| n.clone()).collect();
    let missing: Vec<&String> = documented.difference(&rendered).collect();
    assert!(
        missing.is_empty(),
        "documented in docs/metrics.md or docs/compat.md but not exported here: {missing:?}"
    );

    let actual = render(&everything, &sets);
    let path = repository().join("docs/metrics-reference.md");
    if std::env::var_os("GPUWATCH_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &actual).expect("write docs/metrics-reference.md");
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        let expected_lines: Vec<&str> = expected.lines().collect();
        let actual_lines: Vec<&str> = actual.lines().collect();
        let first = expected_lines
            .iter()
            .zip(&actual_lines)
            .position(|(e, a)| e != a)
            .unwrap_or(expected_lines.len().min(actual_lines.len()));
        let show = |lines: &[&str]| -> String {
            lines
                .iter()
                .skip(first)
                .take(3)
                .copied()
                .collect::<Vec<_>>()
                .join("\n")
        };
        panic!(
            "docs/metrics-reference.md differs from what the encoder exports ({} vs {} lines), from line {}:\n- {}\n+ {}\nRun `GPUWATCH_UPDATE_DOCS=1 cargo test --test docs` if the change is intended, and check the diff.",
            expected_lines.len(),
            actual_lines.len(),
            first + 1,
            show(&expected_lines).replace('\n', "\n- "),
            show(&actual_lines).replace('\n', "\n+ "),
        );
    }
}
