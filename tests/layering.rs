//! No import circles in the agent's library (issue 16 §2), and imports
//! between its top-level modules go with the data flow (issue 26).
//!
//! Reads `src/**/*.rs` (not `main.rs`, which is the binary crate) and builds
//! the graph of which source file needs which, then fails naming every
//! circle. Two granularities:
//!
//! - **Files** (the issue's measure): an edge `a.rs → b.rs` when `a.rs`
//!   names an item that `b.rs` defines — through `use crate::…`,
//!   `use super::…`, a child module's path, or an inline `crate::…` /
//!   `super::…` path. A `pub use` is a re-export, not a need: a path through
//!   a module's re-export (`crate::rules::Rule`, re-exported by
//!   `rules/mod.rs` from `rules/rule.rs`) is followed to the file that
//!   defines the item. Test-only modules (`#[cfg(test)] mod …`) are left
//!   out: tests may look at anything.
//! - **Top-level modules** (`crate::rules`, `crate::config`, …): the same
//!   edges with every file counted as its top-level module, so that a circle
//!   through several files of two modules (config → rules → config) shows
//!   too.
//!
//! - **Direction** (`FLOW`): each top-level module has a rank in the data
//!   flow (sampler → snapshot → exporter / history / rules → outbox →
//!   notify), and imports only modules of a lower rank. Here a path counts
//!   twice: the file that defines the item *and* the module the path names,
//!   so `crate::notify::now_ms` written in `outbox` is an `outbox → notify`
//!   edge even though `notify` only re-exports `now_ms` from `gpu`; and a
//!   `pub use` counts too (re-exporting is importing).
//!
//! The check is a small lexer, not a compiler: it strips comments and
//! string literals and reads paths. The allow-lists below name the circles
//! still known; each must be empty when the structure issue is done, and a
//! listed circle that no longer exists fails the test too (so the list
//! shrinks as circles are broken).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Circles between files still to break, each as the sorted list of the
/// files (module paths) in it.
const ALLOWED_FILE_CIRCLES: &[&[&str]] = &[];

/// Circles between top-level modules still to break.
const ALLOWED_MODULE_CIRCLES: &[&[&str]] = &[];

type ModPath = Vec<String>;

#[test]
fn source_files_import_each_other_without_circles() {
    let graph = Graph::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let files: BTreeMap<ModPath, BTreeSet<ModPath>> = graph.edges.clone();
    check("files", &files, ALLOWED_FILE_CIRCLES);
}

#[test]
fn top_level_modules_import_each_other_without_circles() {
    let graph = Graph::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let mut modules: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (from, tos) in &graph.edges {
        let from = top(from);
        let entry = modules.entry(from.clone()).or_default();
        for to in tos {
            let to = top(to);
            if to != from {
                entry.insert(to);
            }
        }
    }
    check("top-level modules", &modules, ALLOWED_MODULE_CIRCLES);
}

/// The data flow between top-level modules, as ranks: a module may import
/// only modules of a lower rank, never one of its own rank (siblings) or
/// above. Data flows sampler → snapshot (the `gpu` model) → exporter /
/// history / rules → outbox → notify; the leaves (text helpers, limits, the
/// model) import nothing above them; `config` builds every component's
/// settings from the TOML, and `app` wires everything.
const FLOW: &[(&str, u32, &str)] = &[
    ("escape", 0, "leaf: escaping outside text"),
    (
        "timespec",
        0,
        "leaf: times, durations and counts from outside",
    ),
    ("limits", 0, "leaf: the bounds on configured values"),
    ("problem", 0, "leaf: problem responses"),
    ("files", 0, "leaf: reading files within bounds"),
    (
        "gpu",
        0,
        "model: the snapshot every component reads, and the NVML adapter",
    ),
    (
        "families",
        1,
        "the metric-family encoder every exporter of metrics uses (reads the model's GPU ids)",
    ),
    ("kubernetes", 1, "who runs on each GPU, from the kubelet"),
    ("workload", 1, "who used each GPU"),
    ("panics", 2, "caught panics and their counter"),
    ("sampler", 2, "produces the snapshots"),
    (
        "health",
        3,
        "the kernel-log reader and the health verdict, fed by the sampler",
    ),
    ("capacity", 3, "how many more fit, from a snapshot"),
    ("rules", 4, "the rules engine's pure core, on snapshots"),
    ("exporter", 4, "a consumer of snapshots: /metrics"),
    ("history", 4, "a consumer of snapshots: the SQLite history"),
    ("sim", 4, "finds the simulator and its scenarios"),
    ("status", 4, "the status command's view of a snapshot"),
    (
        "outbox",
        5,
        "the contract between alerting and the notifiers",
    ),
    (
        "routing",
        5,
        "which alerts a receiver gets: read by alerting and the notifiers",
    ),
    ("alerting", 6, "runs the rules; writes outbox rows"),
    ("notify", 6, "reads outbox rows and injected sources; sends"),
    (
        "config",
        7,
        "builds every component's settings from the TOML",
    ),
    (
        "remediation",
        8,
        "acts on health; records in history and the outbox",
    ),
    ("http", 9, "serves what the components publish"),
    ("app", 10, "wires everything"),
];

/// Edges against the flow still to remove: `(from, to, why)`. A listed
/// edge that no longer exists fails the test too, so the list shrinks.
const AGAINST_THE_FLOW: &[(&str, &str, &str)] = &[];

/// Imports between top-level modules go with the data flow ([`FLOW`]),
/// counting the module a path names as well as the file that defines the
/// item (a re-export does not hide an edge).
#[test]
fn top_level_modules_import_with_the_data_flow() {
    let graph = Graph::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let report = against_the_flow(&graph, "src", FLOW, AGAINST_THE_FLOW);
    assert!(report.is_empty(), "imports against the data flow:{report}");
}

/// Every import against `flow` not excused by `allowed`, one line
/// each with the file and the path written; and every allowed edge that is
/// gone. Empty when the tree goes with the flow.
fn against_the_flow(
    graph: &Graph,
    root: &str,
    flow: &[(&str, u32, &str)],
    allowed: &[(&str, &str, &str)],
) -> String {
    let rank = |m: &str| flow.iter().find(|(name, _, _)| *name == m).map(|r| r.1);
    let mut lines: BTreeSet<String> = BTreeSet::new();
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    for r in &graph.refs {
        let from = name(&top(&r.from));
        if from == "crate" {
            continue;
        }
        let mut targets: Vec<String> = vec![name(&top(&r.named)), name(&top(&r.defined))];
        targets.dedup();
        for to in targets.into_iter().filter(|t| *t != from && t != "crate") {
            let ok = match (rank(&from), rank(&to)) {
                (Some(a), Some(b)) => b < a,
                _ => {
                    lines.insert(format!(
                        "\n  {from} or {to} has no place in the flow table: add it"
                    ));
                    false
                }
            };
            if ok {
                continue;
            }
            seen.insert((from.clone(), to.clone()));
            if allowed.iter().any(|a| a.0 == from && a.1 == to) {
                continue;
            }
            let file = graph
                .sources
                .get(&r.from)
                .map_or_else(|| name(&r.from), |p| format!("{root}/{}", p.display()));
            lines.insert(format!(
                "\n  {file}: `{}` makes {from} import {to} (via {}, defined in {}), against the flow",
                r.written,
                name(&r.named),
                name(&r.defined),
            ));
        }
    }
    for a in allowed {
        if !seen.contains(&(a.0.to_string(), a.1.to_string())) {
            lines.insert(format!(
                "\n  allowed edge {} -> {} no longer exists: take it off the list",
                a.0, a.1
            ));
        }
    }
    lines.into_iter().collect()
}

/// The checker itself finds the circles it is meant to find.
#[test]
fn the_checker_sees_circles_through_uses_reexports_and_inline_paths() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a directory");
        std::fs::write(path, text).expect("a file");
    };
    write("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n");
    // a/mod.rs only re-exports: a path through it reaches a/inner.rs.
    write("a/mod.rs", "mod inner;\npub use inner::Thing;\n");
    write(
        "a/inner.rs",
        "// use crate::c::Ignored; (a comment)\nconst S: &str = \"crate::c::x\";\npub struct Thing(crate::b::Other);\n",
    );
    write("b.rs", "use crate::{a::Thing, c};\npub struct Other;\n");
    write(
        "c.rs",
        "pub fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::a::Thing;\n}\n",
    );
    let graph = Graph::load(dir.path());
    let circles = circles(&graph.edges);
    assert_eq!(
        circles,
        vec![vec!["a::inner".to_string(), "b".to_string()]],
        "edges: {:?}",
        graph.edges
    );
}

/// The direction check sees an edge against the flow that goes through a
/// re-export (`producer` calls `sender::now_ms`, which `sender` only
/// re-exports from `model`), names the file and the path, and passes the
/// same call written to the model directly.
#[test]
fn the_direction_check_sees_an_edge_against_the_flow_through_a_reexport() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a directory");
        std::fs::write(path, text).expect("a file");
    };
    write(
        "lib.rs",
        "pub mod model;\npub mod producer;\npub mod sender;\n",
    );
    write("model.rs", "pub fn now_ms() -> i64 { 0 }\n");
    write("sender/mod.rs", "pub use crate::model::now_ms;\n");
    write(
        "producer.rs",
        "pub fn stamp() -> i64 {\n    crate::sender::now_ms()\n}\n",
    );
    let flow: &[(&str, u32, &str)] = &[
        ("model", 0, "leaf"),
        ("producer", 1, "writes"),
        ("sender", 2, "reads"),
    ];
    let report = against_the_flow(&Graph::load(dir.path()), "src", flow, &[]);
    assert_eq!(
        report,
        "\n  src/producer.rs: `crate::sender::now_ms` makes producer import sender \
         (via sender, defined in model), against the flow",
    );
    // Allowed but gone: said so.
    write(
        "producer.rs",
        "pub fn stamp() -> i64 {\n    crate::model::now_ms()\n}\n",
    );
    let graph = Graph::load(dir.path());
    assert_eq!(against_the_flow(&graph, "src", flow, &[]), "");
    let stale = against_the_flow(&graph, "src", flow, &[("producer", "sender", "old")]);
    assert!(
        stale.contains("producer -> sender no longer exists"),
        "{stale}"
    );
}

fn top(path: &ModPath) -> ModPath {
    path.iter().take(1).cloned().collect()
}

fn name(path: &ModPath) -> String {
    if path.is_empty() {
        "crate".to_string()
    } else {
        path.join("::")
    }
}

/// Fails with every circle not in `allowed`, and every allowed circle that
/// is gone.
fn check(what: &str, edges: &BTreeMap<ModPath, BTreeSet<ModPath>>, allowed: &[&[&str]]) {
    let found = circles(edges);
    let allowed: Vec<Vec<String>> = allowed
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    let mut report = String::new();
    for circle in found.iter().filter(|c| !allowed.contains(c)) {
        report.push_str(&format!(
            "\n  circle between {what}: {}\n    {}",
            circle.join(", "),
            describe(circle, edges)
        ));
    }
    for circle in allowed.iter().filter(|c| !found.contains(c)) {
        report.push_str(&format!(
            "\n  allowed circle {} no longer exists (or changed): update the allow-list",
            circle.join(", ")
        ));
    }
    assert!(report.is_empty(), "import circles:{report}");
}

/// The edges inside one circle, "a -> b; b -> a".
fn describe(circle: &[String], edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> String {
    let mut out = Vec::new();
    for (from, tos) in edges {
        if !circle.contains(&name(from)) {
            continue;
        }
        for to in tos.iter().filter(|t| circle.contains(&name(t))) {
            out.push(format!("{} -> {}", name(from), name(to)));
        }
    }
    out.join("; ")
}

/// The strongly connected components with more than one member (Tarjan),
/// each sorted, by name.
fn circles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a ModPath) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    component.push(name(w));
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.found.sort();
    t.found
}

/// One `use` of a module: the path as written, the name it binds (`*` for
/// a glob), and whether it is a re-export (`pub use`).
struct Use {
    path: Vec<String>,
    bound: String,
    public: bool,
}

/// The file graph of one source tree.
struct Graph {
    /// Every module that is a file (`[]` is lib.rs).
    files: BTreeSet<ModPath>,
    /// Each file module's path under the source directory.
    sources: BTreeMap<ModPath, PathBuf>,
    /// The `use` declarations of each file.
    uses: BTreeMap<ModPath, Vec<Use>>,
    /// File → the files it needs (test-only files left out).
    edges: BTreeMap<ModPath, BTreeSet<ModPath>>,
    /// Every path a file writes to something of the crate (test-only files
    /// left out), for the direction check.
    refs: Vec<Ref>,
}

/// One path written in a file: the file, the path as written, the file
/// whose module the path names (a re-export's module), and the file that
/// defines the item (after following re-exports).
struct Ref {
    from: ModPath,
    written: String,
    named: ModPath,
    defined: ModPath,
}

impl Graph {
    fn load(src: &Path) -> Graph {
        let mut sources = BTreeMap::new();
        let mut source_paths = BTreeMap::new();
        for path in rust_files(src) {
            let relative = path.strip_prefix(src).expect("under src");
            let mut parts: Vec<String> = relative
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            if parts == ["main"] {
                continue;
            }
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            let text = std::fs::read_to_string(&path).expect("a readable source file");
            source_paths.insert(parts.clone(), relative.to_path_buf());
            sources.insert(parts, tokens(&strip(&text)));
        }
        let files: BTreeSet<ModPath> = sources.keys().cloned().collect();
        let mut test_only = BTreeSet::new();
        let mut bodies = BTreeMap::new();
        for (module, tokens) in &sources {
            let (body, tests) = drop_test_modules(tokens);
            for child in tests {
                let mut path = module.clone();
                path.push(child);
                test_only.insert(path);
            }
            bodies.insert(module.clone(), body);
        }
        let is_test = |m: &ModPath| (1..=m.len()).any(|k| test_only.contains(&m[..k]));
        let mut graph = Graph {
            files,
            sources: source_paths,
            uses: BTreeMap::new(),
            edges: BTreeMap::new(),
            refs: Vec::new(),
        };
        let mut inline = BTreeMap::new();
        for (module, body) in &bodies {
            let (uses, paths) = paths(body);
            graph.uses.insert(module.clone(), uses);
            inline.insert(module.clone(), paths);
        }
        for module in bodies.keys().filter(|m| !is_test(m)) {
            let mut needs = BTreeSet::new();
            let used = graph.uses[module]
                .iter()
                .filter(|u| !u.public)
                .map(|u| u.path.clone());
            for path in used.chain(inline[module].iter().cloned()) {
                if let Some(target) = graph
                    .absolute(module, &path)
                    .and_then(|p| graph.resolve(&p, 0))
                {
                    if &target != module && !is_test(&target) {
                        needs.insert(target);
                    }
                }
            }
            graph.edges.insert(module.clone(), needs);
            // The direction check also counts re-exports (`pub use`): a
            // module that re-exports another's item imports it.
            let mut refs = Vec::new();
            let every_use = graph.uses[module].iter().map(|u| u.path.clone());
            for path in every_use.chain(inline[module].iter().cloned()) {
                let Some(absolute) = graph.absolute(module, &path) else {
                    continue;
                };
                let Some(defined) = graph.resolve(&absolute, 0) else {
                    continue;
                };
                let named = graph.named(&absolute);
                if is_test(&defined) || is_test(&named) {
                    continue;
                }
                refs.push(Ref {
                    from: module.clone(),
                    written: path.join("::"),
                    named,
                    defined,
                });
            }
            graph.refs.extend(refs);
        }
        graph
    }

    /// `path` as written in `module`, from the crate root; `None` for
    /// paths outside the crate (std, dependencies) and local names.
    fn absolute(&self, module: &ModPath, path: &[String]) -> Option<ModPath> {
        let (first, rest) = path.split_first()?;
        let mut base = module.clone();
        match first.as_str() {
            "crate" => return Some(rest.to_vec()),
            "self" => {}
            "super" => {
                base.pop();
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            child => {
                let mut candidate = base.clone();
                candidate.push(child.to_string());
                if !self.files.contains(&candidate) {
                    return None;
                }
                base.push(child.to_string());
            }
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file whose module `path` (from the crate root) names, without
    /// following its `use`s: `crate::notify::now_ms` names `notify` even
    /// when `notify` only re-exports `now_ms`.
    fn named(&self, path: &[String]) -> ModPath {
        let k = (0..=path.len())
            .rev()
            .find(|&k| self.files.contains(&path[..k]))
            .unwrap_or(0);
        path[..k].to_vec()
    }

    /// The file that defines what `path` (from the crate root) names:
    /// the deepest file module on the path, and from there through its
    /// `use` of the next name, if any.
    fn resolve(&self, path: &[String], depth: usize) -> Option<ModPath> {
        if depth > 16 {
            return None;
        }
        let k = (0..=path.len())
            .rev()
            .find(|&k| self.files.contains(&path[..k]))?;
        let module = path[..k].to_vec();
        let Some((next, rest)) = path[k..].split_first() else {
            return Some(module);
        };
        let uses = self.uses.get(&module).map(Vec::as_slice).unwrap_or(&[]);
        if let Some(u) = uses.iter().find(|u| &u.bound == next) {
            let Some(mut full) = self.absolute(&module, &u.path) else {
                return Some(module);
            };
            full.extend(rest.iter().cloned());
            return Some(self.resolve(&full, depth + 1).unwrap_or(module));
        }
        for u in uses.iter().filter(|u| u.bound == "*") {
            let glob = &u.path[..u.path.len() - 1];
            if let Some(mut target) = self.absolute(&module, glob) {
                target.extend(path[k..].iter().cloned());
                if let Some(found) = self.resolve(&target, depth + 1) {
                    if found.len() > glob.len() || found != module {
                        return Some(found);
                    }
                }
            }
        }
        Some(module)
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("a readable source directory")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// `text` without comments and with every string and character literal
/// emptied, so that neither is read as code.
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let at = |i: usize, s: &str| {
        s.chars()
            .enumerate()
            .all(|(k, c)| chars.get(i + k) == Some(&c))
    };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        let after_ident = i > 0 && ident(chars[i - 1]);
        if at(i, "//") {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if at(i, "/*") {
            let mut depth = 0;
            while i < chars.len() {
                if at(i, "/*") {
                    depth += 1;
                    i += 2;
                } else if at(i, "*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if !after_ident && (c == 'r' || at(i, "br")) && {
            let start = if c == 'r' { i + 1 } else { i + 2 };
            let hashes = chars[start..].iter().take_while(|&&h| h == '#').count();
            chars.get(start + hashes) == Some(&'"')
        } {
            let start = if c == 'r' { i + 1 } else { i + 2 };
            let hashes = chars[start..].iter().take_while(|&&h| h == '#').count();
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            i = start + hashes + 1;
            while i < chars.len() && !at(i, &close) {
                i += 1;
            }
            i += close.chars().count();
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && chars.get(i + 1) == Some(&'\\') {
            // '\n', '\'', '\u{1b}'
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Identifiers and punctuation (`::` as one token).
fn tokens(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".to_string());
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

/// `tokens` without the `#[cfg(test)]` modules written inline, and the
/// names of those declared as files (`#[cfg(test)] mod tests;`).
fn drop_test_modules(tokens: &[String]) -> (Vec<String>, Vec<String>) {
    const CFG_TEST: [&str; 7] = ["#", "[", "cfg", "(", "test", ")", "]"];
    let mut out = Vec::new();
    let mut files = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if !tokens[i..].starts_with(&CFG_TEST.map(String::from)) {
            out.push(tokens[i].clone());
            i += 1;
            continue;
        }
        let mut j = i + CFG_TEST.len();
        // Further attributes and `pub(...)` before `mod`.
        loop {
            if tokens.get(j).is_some_and(|t| t == "#") {
                j = close(tokens, j + 1, "[", "]");
            } else if tokens.get(j).is_some_and(|t| t == "pub") {
                j += 1;
                if tokens.get(j).is_some_and(|t| t == "(") {
                    j = close(tokens, j, "(", ")");
                }
            } else {
                break;
            }
        }
        if tokens.get(j).is_some_and(|t| t == "mod") {
            let name = tokens.get(j + 1).cloned().unwrap_or_default();
            match tokens.get(j + 2).map(String::as_str) {
                Some(";") => {
                    files.push(name);
                    i = j + 3;
                }
                Some("{") => i = close(tokens, j + 2, "{", "}"),
                _ => i = j,
            }
        } else {
            // A test-only item other than a module: keep it.
            out.push(tokens[i].clone());
            i += 1;
        }
    }
    (out, files)
}

/// The index after the bracket that closes the one at `start`.
fn close(tokens: &[String], start: usize, open: &str, shut: &str) -> usize {
    let mut depth = 0;
    let mut i = start;
    while i < tokens.len() {
        if tokens[i] == open {
            depth += 1;
        } else if tokens[i] == shut {
            depth -= 1;
            if depth == 0 {
                return i + 1;
            }
        }
        i += 1;
    }
    tokens.len()
}

/// The `use` declarations of a file and the other paths it writes from
/// `crate`, `super` or `self`.
fn paths(tokens: &[String]) -> (Vec<Use>, Vec<Vec<String>>) {
    let mut uses = Vec::new();
    let mut inline = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        let after_path = i > 0 && tokens[i - 1] == "::";
        if t == "use" && !after_path {
            let public = i > 0
                && (tokens[i - 1] == "pub"
                    || (tokens[i - 1] == ")" && i >= 4 && tokens[i - 4] == "pub")
                    || (tokens[i - 1] == ")" && i >= 5 && tokens[i - 5] == "pub"));
            let end = tokens[i..]
                .iter()
                .position(|t| t == ";")
                .map_or(tokens.len(), |p| i + p);
            let tree: Vec<&str> = tokens[i + 1..end].iter().map(String::as_str).collect();
            let mut expanded = Vec::new();
            use_tree(&tree, &mut 0, Vec::new(), &mut expanded);
            for (path, bound) in expanded {
                uses.push(Use {
                    path,
                    bound,
                    public,
                });
            }
            i = end + 1;
        } else if matches!(t, "crate" | "super" | "self")
            && !after_path
            && tokens.get(i + 1).is_some_and(|t| t == "::")
        {
            let mut path = vec![t.to_string()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|t| t == "::")
                && tokens
                    .get(j + 1)
                    .is_some_and(|t| t.chars().all(|c| c.is_alphanumeric() || c == '_'))
            {
                path.push(tokens[j + 1].clone());
                j += 2;
            }
            inline.push(path);
            i = j;
        } else {
            i += 1;
        }
    }
    (uses, inline)
}

/// Expands the use tree at `tokens[*i..]` (`a::{b, c::d as e, f::*}`)
/// into `out` as (path, bound name) pairs; `self` in a group names the
/// group's module. Stops before the `,` or `}` that ends it.
fn use_tree(
    tokens: &[&str],
    i: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, String)>,
) {
    let mut path = prefix;
    loop {
        match tokens.get(*i).copied() {
            Some("::") => *i += 1,
            Some("{") => {
                *i += 1;
                while *i < tokens.len() {
                    if tokens[*i] == "}" {
                        *i += 1;
                        break;
                    }
                    use_tree(tokens, i, path.clone(), out);
                    if tokens.get(*i) == Some(&",") {
                        *i += 1;
                    }
                }
                return;
            }
            Some("*") => {
                *i += 1;
                path.push("*".to_string());
                out.push((path, "*".to_string()));
                return;
            }
            Some("as") => {
                let alias = tokens.get(*i + 1).copied().unwrap_or("_").to_string();
                *i += 2;
                out.push((path, alias));
                return;
            }
            None | Some(",") | Some("}") => {
                if path.last().is_some_and(|s| s == "self") {
                    path.pop();
                }
                if let Some(bound) = path.last().cloned() {
                    out.push((path, bound));
                }
                return;
            }
            Some(name) => {
                path.push(name.to_string());
                *i += 1;
            }
        }
    }
}

/// The simulator's files and top-level modules (`scenario` → `engine` →
/// `ffi`, the shared leaves beside them) import each other without circles,
/// with nothing allowed (issue 26).
#[test]
fn nvml_sim_files_import_each_other_without_circles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("nvml-sim/src");
    let graph = Graph::load(&src);
    check("nvml-sim files", &graph.edges, &[]);
    let mut modules: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (from, tos) in &graph.edges {
        let from = top(from);
        let entry = modules.entry(from.clone()).or_default();
        entry.extend(tos.iter().map(top).filter(|to| *to != from));
    }
    check("nvml-sim top-level modules", &modules, &[]);
}
