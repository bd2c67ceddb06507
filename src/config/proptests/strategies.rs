//! Generators of configuration files: TOML-ish lines (mostly not even
//! TOML), and well-formed files of the known sections whose values are
//! mostly of the right type, so that validation is reached.

use proptest::prelude::*;

/// Each section or entry with its keys; a key's type follows its colon
/// (`i`nteger, `f`loat, `b`ool, `l`ist, `t`able), text otherwise.
const SECTIONS: &[&str] = &[
    "[server] listen max_connections:i request_timeout external_url web_config metrics_compat:l",
    "[sampler] interval slow_interval process_interval timeout process_top_n:i hostname proc_root",
    "[log] level format",
    "[history] enabled:b synchronous batch_interval raw_retention minute_retention hour_retention max_size queue:i",
    "[capacity] memory_margin alert_for",
    "[kubernetes] pod_resources_socket refresh_interval timeout",
    "[workloads] hpc_job_mapping_dir",
    "[exporter] detail:l compat_hpc_job:b",
    "[[receivers]] name type url headers:t bearer_token bearer_token_env bearer_token_file username password password_env password_file timeout resend_interval retry_min retry_max severities:l match:t match_re:t repeat_interval group_wait smarthost from to:l tls ca_file hello_name",
    "[[profiles]] name memory sm_share:f model",
    "[[rules]] name enabled:b condition for keep_firing_for clear:f severity labels:t annotations:t",
];

/// The header and the (key, type) pairs of one [`SECTIONS`] line.
fn section(spec: &'static str) -> (&'static str, Vec<(&'static str, char)>) {
    let mut words = spec.split(' ');
    let header = words.next().unwrap_or_default();
    let keys = words
        .map(|w| match w.split_once(':') {
            Some((key, kind)) => (key, kind.chars().next().unwrap_or('s')),
            None => (w, 's'),
        })
        .collect();
    (header, keys)
}

/// Headers of the sections and entries, plus nonsense.
fn header() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(SECTIONS).prop_map(|spec| section(spec).0.to_string()),
        1 => "\\[{1,2}[a-z.]{0,10}\\]{0,2}",
    ]
}

/// Keys of every section and entry (mixed: a key in the wrong section is
/// a problem too), plus nonsense.
fn key() -> impl Strategy<Value = String> {
    let keys: Vec<&'static str> = SECTIONS
        .iter()
        .flat_map(|spec| section(spec).1)
        .map(|(key, _)| key)
        .collect();
    prop_oneof![
        8 => proptest::sample::select(keys).prop_map(str::to_string),
        1 => "[a-zA-Z_\"-]{0,8}",
    ]
}

/// String contents that mean something to some field, or nothing.
fn text() -> impl Strategy<Value = String> {
    const ATOMS: &[&str] = &[
        "1s",
        "500ms",
        "10m",
        "0",
        "off",
        "3650d",
        "1000000000y",
        "99999999999999999999s",
        "2GiB",
        "0B",
        "1.5TB",
        "1e9",
        "info",
        "warnn",
        "gpuwatch=debug,info",
        "json",
        "webhook",
        "alertmanager",
        "email",
        "http://127.0.0.1:1/",
        "https://",
        "ftp://x",
        "smtp.example.com:587",
        "ops@example.com",
        "starttls",
        "none",
        "critical",
        "temperature > 85",
        "stale(30s)",
        "stale(400d)",
        "xid(48, 79)",
        "gpu_lost",
        "{{ .gpu }}",
        "GpuLost",
        "dcgm",
        "127.0.0.1:0",
        ":9842",
        "normal",
        "full",
        "/dev/zero",
        "/dev/null",
        "/nonexistent/x",
        "",
        " ",
        "\r\n",
        "\0",
        "\t",
        "é",
        "ツ",
    ];
    prop_oneof![
        4 => proptest::collection::vec(proptest::sample::select(ATOMS), 1..3)
            .prop_map(|parts| parts.concat()),
        1 => "\\PC{0,12}",
        1 => any::<String>(),
    ]
}

/// A TOML basic string holding `text`, escaped.
fn quoted(text: String) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Values of every TOML type, with the extremes.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (text(), proptest::bool::weighted(0.05))
            .prop_map(|(t, raw)| if raw { format!("\"{t}\"") } else { quoted(t) }),
        2 => prop_oneof![
            any::<i64>(),
            Just(i64::MAX),
            Just(i64::MIN),
            Just(2_305_843_009_213_693_952),
            -3i64..2000,
        ]
        .prop_map(|n| n.to_string()),
        1 => prop_oneof![
            any::<f64>().prop_map(|f| format!("{f:?}")),
            Just("nan".to_string()),
            Just("-inf".to_string()),
            Just("0.25".to_string()),
        ],
        1 => any::<bool>().prop_map(|b| b.to_string()),
        1 => proptest::collection::vec(text().prop_map(quoted), 0..3)
            .prop_map(|items| format!("[{}]", items.join(", "))),
        1 => (key(), text()).prop_map(|(k, t)| format!("{{ {k} = {} }}", quoted(t))),
    ]
}

/// One line of a file.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => header(),
        8 => (key(), value()).prop_map(|(k, v)| format!("{k} = {v}")),
        1 => Just(String::new()),
        1 => "#\\PC{0,10}",
        1 => "\\PC{0,16}",
    ]
}

/// A file of TOML-ish lines.
pub fn document() -> impl Strategy<Value = String> {
    proptest::collection::vec(line(), 0..24).prop_map(|lines| lines.join("\n"))
}

/// A value of `kind`.
fn typed(kind: char) -> BoxedStrategy<String> {
    match kind {
        's' => text().prop_map(quoted).boxed(),
        'i' => prop_oneof![any::<i64>(), -3i64..2000]
            .prop_map(|n| n.to_string())
            .boxed(),
        'f' => prop_oneof![
            any::<f64>().prop_map(|f| format!("{f:?}")),
            (0u32..=100).prop_map(|n| format!("{}", f64::from(n) / 100.0)),
            Just("nan".to_string()),
            Just("inf".to_string()),
        ]
        .boxed(),
        'b' => any::<bool>().prop_map(|b| b.to_string()).boxed(),
        'l' => proptest::collection::vec(text().prop_map(quoted), 0..3)
            .prop_map(|items| format!("[{}]", items.join(", ")))
            .boxed(),
        _ => proptest::collection::btree_map("[a-zA-Z_][a-zA-Z0-9_-]{0,6}", text(), 0..3)
            .prop_map(|map| {
                let pairs: Vec<String> = map
                    .into_iter()
                    .map(|(k, v)| format!("\"{k}\" = {}", quoted(v)))
                    .collect();
                format!("{{ {} }}", pairs.join(", "))
            })
            .boxed(),
    }
}

/// One section or entry: its header and some of its keys (each once),
/// mostly with values of the right type.
fn table() -> impl Strategy<Value = String> {
    proptest::sample::select(SECTIONS).prop_flat_map(|spec| {
        let (header, keys) = section(spec);
        let most = keys.len().min(8);
        proptest::sample::subsequence(keys, 0..=most)
            .prop_flat_map(|fields| {
                fields
                    .into_iter()
                    .map(|(key, kind)| {
                        prop_oneof![19 => typed(kind), 1 => value().boxed()]
                            .prop_map(move |v| format!("{key} = {v}"))
                    })
                    .collect::<Vec<_>>()
            })
            .prop_map(move |lines| format!("{header}\n{}", lines.join("\n")))
    })
}

/// A well-formed file of known sections (a plain table twice is a TOML
/// error, as it should be).
pub fn structured() -> impl Strategy<Value = String> {
    proptest::collection::vec(table(), 0..6).prop_map(|tables| tables.join("\n\n"))
}
