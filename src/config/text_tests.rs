//! Text that ends up in a request line, a header or an SMTP command holds
//! no control character; secret files are read bounded; every problem has
//! a line and column, also for a missing field or a check of two fields.

use super::{Config, ConfigError};

fn problems(source: &str) -> Vec<String> {
    match Config::parse(source, "c.toml") {
        Err(ConfigError::Invalid(problems)) => {
            for p in &problems {
                assert!(p.line.is_some() && p.column.is_some(), "no place: {p:?}");
            }
            problems.iter().map(ToString::to_string).collect()
        }
        Err(other) => panic!("expected problems, got {other}"),
        Ok(_) => panic!("expected problems, {source:?} was accepted"),
    }
}

fn assert_has(problems: &[String], prefix: &str, says: &str) {
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with(prefix) && p.contains(says)),
        "{prefix} ... {says} in {problems:#?}"
    );
}

const HOOK: &str = "[[receivers]]\nname = \"h\"\ntype = \"webhook\"\n";
const AM: &str =
    "[[receivers]]\nname = \"am\"\ntype = \"alertmanager\"\nurl = \"http://127.0.0.1:9093\"\n";

#[test]
fn line_breaks_in_tokens_headers_user_names_and_urls_are_refused() {
    let source = format!(
        "{HOOK}url = \"http://127.0.0.1:1/hook\\r\\nX-Injected: 1\"\nbearer_token = \"abc\\r\\nX-Evil: 1\"\nheaders = {{ X-Team = \"gpu\\n\", \"X-Bad\\r\" = \"v\" }}\n{AM}username = \"ops\\n\"\npassword = \"pw\"\n[server]\nexternal_url = \"http://node\\u0000:9842/\"\n"
    );
    let got = problems(&source);
    assert_has(
        &got,
        "c.toml:4:7: receivers[0].url",
        "control character (U+000D, a carriage return) at character 24",
    );
    assert_has(
        &got,
        "c.toml:5:16: receivers[0].bearer_token",
        "the bearer token contains a control character",
    );
    assert_has(
        &got,
        "c.toml:6:11: receivers[0].headers.X-Team",
        "header value contains a control character (U+000A, a line feed)",
    );
    assert_has(
        &got,
        "c.toml:6:11: receivers[0].headers.X-Bad\\r",
        "is not a header name",
    );
    assert_has(
        &got,
        "c.toml:11:12: receivers[1].username",
        "user name contains a control character",
    );
    assert_has(&got, "c.toml:14:16: server.external_url", "U+0000, a NUL");
    assert_eq!(got.len(), 6, "{got:#?}");
    // The token is never shown; the line break in a shown value is escaped,
    // so each problem stays on one line.
    let all = got.join("\n");
    assert!(!all.contains("abc"), "{all}");
    assert!(got.iter().all(|p| !p.contains('\r')), "{all}");
}

#[test]
fn a_colon_in_a_basic_auth_user_name_is_refused() {
    let got = problems(&format!("{AM}username = \"a:b\"\npassword = \"pw\"\n"));
    assert_has(
        &got,
        "c.toml:5:12: receivers[0].username",
        "cannot contain ':'",
    );
}

#[test]
fn email_fields_with_control_characters_are_refused() {
    let source = "[[receivers]]\nname = \"m\"\ntype = \"email\"\nsmarthost = \"smtp.example.com\\u0001:25\"\nfrom = \"gpu@example.com\"\nto = [\"ops@example.com\"]\nhello_name = \"node\\u0007\"\nusername = \"u\\r\"\npassword = \"p\\n\"\n";
    let got = problems(source);
    assert_has(
        &got,
        "c.toml:4:13: receivers[0].smarthost",
        "is not host:port",
    );
    assert_has(
        &got,
        "c.toml:7:14: receivers[0].hello_name",
        "host name without spaces",
    );
    assert_has(
        &got,
        "c.toml:8:12: receivers[0].username",
        "control character",
    );
    assert_has(
        &got,
        "c.toml:9:12: receivers[0].password",
        "the SMTP password contains a control character",
    );
    for address in [
        "ops@example.com\\r\\nBcc: x@example.com",
        "ops@exa\\u0000mple.com",
    ] {
        let got = problems(&format!(
            "[[receivers]]\nname = \"m\"\ntype = \"email\"\nsmarthost = \"smtp.example.com:25\"\nfrom = \"gpu@example.com\"\nto = [\"{address}\"]\n"
        ));
        assert_has(
            &got,
            "c.toml:6:6: receivers[0].to",
            "is not an email address",
        );
    }
}

#[test]
fn secret_files_are_trimmed_of_their_newline_but_not_of_an_embedded_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let good = dir.path().join("token");
    std::fs::write(&good, "t0ken\n").expect("write");
    let crlf = dir.path().join("token-crlf");
    std::fs::write(&crlf, "t0ken\r\n").expect("write");
    let embedded = dir.path().join("two-lines");
    std::fs::write(&embedded, "t0ken\nsecond-line-secret\n").expect("write");
    for ok in [&good, &crlf] {
        let source = format!(
            "{HOOK}url = \"http://127.0.0.1:1/\"\nbearer_token_file = \"{}\"\n",
            ok.display()
        );
        let config = Config::parse(&source, "c.toml").expect("valid");
        let crate::notify::ReceiverKind::Webhook(hook) = &config.receivers[0].kind else {
            panic!("a webhook");
        };
        assert_eq!(
            hook.bearer_token.as_ref().map(|t| t.expose()),
            Some("t0ken")
        );
    }
    let got = problems(&format!(
        "{AM}username = \"u\"\npassword_file = \"{}\"\n",
        embedded.display()
    ));
    assert_has(
        &got,
        "c.toml:6:17: receivers[0].password_file",
        "the password contains a control character (U+000A, a line feed) at character 6",
    );
    assert!(!got.join("\n").contains("second-line-secret"), "{got:#?}");
}

#[test]
fn secret_and_ca_files_that_are_devices_fifos_or_too_large_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo (coreutils) runs");
    assert!(status.success());
    let big = dir.path().join("big");
    std::fs::write(&big, vec![b'a'; 64 * 1024 + 1]).expect("write");
    for (path, says) in [
        (
            "/dev/zero".to_string(),
            "is a character device, not a regular file",
        ),
        (
            fifo.display().to_string(),
            "is a FIFO (named pipe), not a regular file",
        ),
        (big.display().to_string(), "is larger than 65536 bytes"),
    ] {
        let got = problems(&format!(
            "{HOOK}url = \"http://127.0.0.1:1/\"\nbearer_token_file = \"{path}\"\n"
        ));
        assert_has(&got, "c.toml:5:21: receivers[0].bearer_token_file", says);
    }
    let got = problems(
        "[[receivers]]\nname = \"m\"\ntype = \"email\"\nsmarthost = \"smtp.example.com:587\"\nfrom = \"a@example.com\"\nto = [\"b@example.com\"]\nca_file = \"/dev/zero\"\n",
    );
    assert_has(
        &got,
        "c.toml:7:11: receivers[0].ca_file",
        "/dev/zero is a character device",
    );
}

#[test]
fn missing_fields_are_reported_at_their_entry() {
    let source = "[[receivers]]\nname = \"a\"\n\n[[receivers]]\ntype = \"webhook\"\nseverities = []\n\n[[receivers]]\nname = \"m\"\ntype = \"email\"\n\n[[profiles]]\nmemory = \"1GB\"\n\n[[rules]]\ncondition = \"gpu_lost\"\n";
    let got = problems(source);
    for (prefix, says) in [
        ("c.toml:1:1: receivers[0].type", "is missing"),
        ("c.toml:4:1: receivers[1].name", "is missing"),
        ("c.toml:4:1: receivers[1].url", "is missing"),
        ("c.toml:4:1: receivers[1].severities", "is empty"),
        ("c.toml:8:1: receivers[2].smarthost", "is missing"),
        ("c.toml:8:1: receivers[2].from", "is missing"),
        ("c.toml:8:1: receivers[2].to", "is missing"),
        ("c.toml:12:1: profiles[0].name", "is missing"),
        ("c.toml:15:1: rules[0]", "\"name\" is required"),
    ] {
        assert_has(&got, prefix, says);
    }
    assert_eq!(got.len(), 9, "{got:#?}");
    // Inline tables: the entry's opening brace.
    let got = problems("receivers = [{ name = \"x\" }]\n");
    assert_has(&got, "c.toml:1:14: receivers[0].type", "is missing");
}

#[test]
fn checks_between_two_fields_point_at_the_one_written() {
    // slow_interval is left at its default (30s): the interval made it short.
    let got = problems("[sampler]\ninterval = \"1m\"\n");
    assert_eq!(got.len(), 2, "{got:#?}");
    assert_has(
        &got,
        "c.toml:2:12: sampler.interval",
        "sampler.slow_interval (30s) must not be shorter than sampler.interval (1m)",
    );
    assert_has(
        &got,
        "c.toml:2:12: sampler.interval",
        "sampler.process_interval (5s) must not be shorter",
    );
    let got = problems("[sampler]\ninterval = \"2s\"\nprocess_interval = \"1s\"\n");
    assert_has(
        &got,
        "c.toml:3:20: sampler.process_interval",
        "must not be shorter than sampler.interval (2s)",
    );
    // retry_min alone, longer than the default retry_max (5m).
    let got = problems(&format!(
        "{HOOK}url = \"http://127.0.0.1:1/\"\nretry_min = \"10m\"\n"
    ));
    assert_has(
        &got,
        "c.toml:5:13: receivers[0].retry_min",
        "shorter than the shortest",
    );
}

#[test]
fn toml_errors_name_the_field_where_the_text_tells() {
    for (source, expect) in [
        (
            "[server]\nmax_connections = 1.5\n",
            "c.toml:2:19: server.max_connections: invalid type: floating point `1.5`",
        ),
        (
            "[[receivers]]\nname = \"a\"\n[[receivers]]\nname = 1\n",
            "c.toml:4:8: receivers[1].name: invalid type: integer `1`",
        ),
        (
            "[sampler]\ninterval = \"1s\"\ninterval = \"2s\"\n",
            "c.toml:3:1: sampler.interval: duplicate key",
        ),
        ("listen = 1\n", "c.toml:1:1: listen: unknown field `listen`"),
    ] {
        let got = problems(source);
        assert_eq!(got.len(), 1, "{got:#?}");
        assert!(
            got[0].starts_with(expect),
            "{}\n  should start with\n{expect}",
            got[0]
        );
    }
}

#[test]
fn a_misspelt_log_level_is_refused_where_it_is_written() {
    let got = problems("[log]\nlevel = \"warnn\"\n");
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_has(&got, "c.toml:2:9: log.level", "\"warnn\" is not a level");
    for good in ["info", "gpuwatch=debug,info"] {
        let config = Config::parse(&format!("[log]\nlevel = \"{good}\"\n"), "c.toml")
            .expect("a valid filter");
        assert_eq!(config.log.level, good);
    }
    let got = problems("[log]\nlevel = \"gpuwatch=loud\"\n");
    assert_has(
        &got,
        "c.toml:2:9: log.level",
        "\"loud\" in \"gpuwatch=loud\" is not a level",
    );
}
