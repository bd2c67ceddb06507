use std::time::Duration;

use super::*;

#[test]
fn empty_file_gives_defaults() {
    let config = Config::parse("", "empty.toml").expect("empty is valid");
    assert_eq!(config, Config::default());
    assert_eq!(config.server.listen.port(), 9842);
    assert_eq!(config.sampler.interval, Duration::from_secs(1));
    assert_eq!(config.sampler.slow_interval, Duration::from_secs(30));
    assert_eq!(config.sampler.process_interval, Duration::from_secs(5));
    assert_eq!(config.sampler.stale_after(), Duration::from_secs(11));
}

#[test]
fn the_example_file_parses_and_matches_the_defaults() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/gpuwatch.example.toml");
    let config = Config::load(Some(Path::new(path))).expect("the example is valid");
    assert_eq!(config.sampler, Config::default().sampler);
    assert_eq!(config.server, Config::default().server);
    assert_eq!(config.kubernetes, Config::default().kubernetes);
    assert_eq!(config.remediation, Config::default().remediation);
}

#[test]
fn the_kubelet_socket_is_the_default_one_a_named_one_or_off() {
    let default = Config::default().kubernetes.expect("on by default");
    assert_eq!(
        default.socket,
        Path::new("/var/lib/kubelet/pod-resources/kubelet.sock")
    );
    assert!(!default.explicit, "a missing default socket is no problem");
    assert_eq!(default.refresh_interval, Duration::from_secs(5));
    let named = Config::parse(
        "[kubernetes]\npod_resources_socket = \"/run/k.sock\"\nrefresh_interval = \"1s\"\n",
        "k.toml",
    )
    .expect("valid")
    .kubernetes
    .expect("on");
    assert!(named.explicit);
    assert_eq!(named.socket, Path::new("/run/k.sock"));
    assert_eq!(named.refresh_interval, Duration::from_secs(1));
    let off =
        Config::parse("[kubernetes]\npod_resources_socket = \"\"\n", "k.toml").expect("valid");
    assert_eq!(off.kubernetes, None);
    let problem = |source: &str| match Config::parse(source, "k.toml") {
        Err(ConfigError::Invalid(problems)) => problems[0].to_string(),
        other => panic!("expected a problem, got {other:?}"),
    };
    let bad = problem("[kubernetes]\nrefresh_interval = \"often\"\n");
    assert!(
        bad.starts_with("k.toml:2:20: kubernetes.refresh_interval: \"often\" is not a duration"),
        "{bad}"
    );
    let unknown = problem("[kubernetes]\nsocket = \"/x\"\n");
    assert!(
        unknown.starts_with("k.toml:2:1:") && unknown.contains("socket"),
        "{unknown}"
    );
}

#[test]
fn every_problem_is_reported_with_line_and_field() {
    let source = "[server]\nlisten = \"nope\"\n\n[sampler]\ninterval = \"fast\"\nslow_interval = \"10ms\"\n\n[log]\nformat = \"xml\"\n";
    let Err(ConfigError::Invalid(problems)) = Config::parse(source, "bad.toml") else {
        panic!("expected problems");
    };
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 4, "{text:#?}");
    assert!(
        text[0].starts_with("bad.toml:2:10: server.listen: \"nope\" is not a listen address"),
        "{}",
        text[0]
    );
    assert!(
        text[1].starts_with("bad.toml:5:12: sampler.interval: \"fast\" is not a duration"),
        "{}",
        text[1]
    );
    assert!(
        text[2].starts_with("bad.toml:6:17: sampler.slow_interval: \"10ms\" is too short"),
        "{}",
        text[2]
    );
    assert!(
        text[3].starts_with("bad.toml:9:10: log.format: \"xml\" is not a log format"),
        "{}",
        text[3]
    );
}

#[test]
fn unknown_fields_are_rejected_with_their_line() {
    let source = "[sampler]\ninterval = \"2s\"\nintervall = \"3s\"\n";
    let Err(ConfigError::Invalid(problems)) = Config::parse(source, "typo.toml") else {
        panic!("expected a problem");
    };
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].line, Some(3));
    assert_eq!(problems[0].field, "sampler.intervall");
    assert!(
        problems[0].message.contains("unknown field `intervall`"),
        "{}",
        problems[0].message
    );
}

#[test]
fn listen_accepts_a_bare_port() {
    assert_eq!(parse_listen(":9000").expect("valid").port(), 9000);
    assert!(parse_listen("[::1]:9000").expect("valid").is_ipv6());
    assert!(parse_listen("localhost").is_err());
}

#[test]
fn a_missing_file_names_the_path() {
    let error = Config::load(Some(Path::new("/nonexistent/gpuwatch.toml"))).expect_err("missing");
    assert!(
        error.to_string().contains("/nonexistent/gpuwatch.toml"),
        "{error}"
    );
}

#[test]
fn webhook_receivers_are_read_and_checked() {
    let source = "[[receivers]]\nname = \"ops\"\ntype = \"webhook\"\nurl = \"http://hooks.example:8080/gpu\"\nheaders = { X-Team = \"gpu\" }\nbearer_token = \"s3cret\"\ntimeout = \"3s\"\nretry_min = \"200ms\"\nretry_max = \"2s\"\n";
    let config = Config::parse(source, "ok.toml").expect("valid");
    let r = &config.receivers[0];
    assert_eq!(r.name, "ops");
    let crate::notify::ReceiverKind::Webhook(hook) = &r.kind else {
        panic!("a webhook: {r:?}");
    };
    assert_eq!(hook.timeout, Duration::from_secs(3));
    assert_eq!(hook.headers["X-Team"], "gpu");
    assert_eq!(
        hook.bearer_token.as_ref().map(|t| t.expose()),
        Some("s3cret")
    );
    assert!(
        !format!("{config:?}").contains("s3cret"),
        "the token is never shown"
    );

    let bad = "[[receivers]]\nname = \"ops\"\ntype = \"webhook\"\nurl = \"ftp://x\"\nbearer_token = \"a\"\nbearer_token_env = \"GPUWATCH_TEST_NO_SUCH_VARIABLE\"\n\n[[receivers]]\nname = \"ops\"\ntype = \"webhook\"\nurl = \"http://x\"\nretry_min = \"10s\"\nretry_max = \"1s\"\n\n[[receivers]]\nname = \"pager\"\ntype = \"pager\"\n";
    let Err(ConfigError::Invalid(problems)) = Config::parse(bad, "bad.toml") else {
        panic!("expected problems");
    };
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    for field in [
        "receivers[0].url",
        "receivers[0].bearer_token_env",
        "receivers[1].name",
        "receivers[1].retry_max",
        "receivers[2].type",
    ] {
        assert!(
            text.iter()
                .any(|t| t.contains(field) && t.starts_with("bad.toml:")),
            "{field} in {text:#?}"
        );
    }
    assert!(!text.join("\n").contains("\"a\""), "{text:#?}");
}

#[test]
fn alertmanager_receivers_are_read_and_checked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let password = dir.path().join("am-password");
    std::fs::write(&password, "pa55word\n").expect("write");
    let source = format!(
        "[[receivers]]\nname = \"am\"\ntype = \"alertmanager\"\nurl = \"http://alertmanager:9093/\"\nusername = \"gpuwatch\"\npassword_file = \"{}\"\nresend_interval = \"30s\"\n\n[[receivers]]\nname = \"am2\"\ntype = \"alertmanager\"\nurl = \"https://am.example\"\nbearer_token = \"tok\"\n",
        password.display()
    );
    let config = Config::parse(&source, "ok.toml").expect("valid");
    let crate::notify::ReceiverKind::Alertmanager(am) = &config.receivers[0].kind else {
        panic!("an alertmanager: {:?}", config.receivers[0]);
    };
    assert_eq!(am.endpoint(), "http://alertmanager:9093/api/v2/alerts");
    assert_eq!(am.resend_interval, Duration::from_secs(30));
    assert_eq!(am.valid_for(), Duration::from_secs(120));
    assert_eq!(am.timeout, Duration::from_secs(10));
    assert!(matches!(
        &am.auth,
        Some(crate::notify::Auth::Basic { username, password })
            if username == "gpuwatch" && password.expose() == "pa55word"
    ));
    let crate::notify::ReceiverKind::Alertmanager(am2) = &config.receivers[1].kind else {
        panic!("an alertmanager: {:?}", config.receivers[1]);
    };
    assert_eq!(am2.resend_interval, Duration::from_secs(60), "the default");
    assert!(matches!(&am2.auth, Some(crate::notify::Auth::Bearer(t)) if t.expose() == "tok"));
    assert!(!format!("{config:?}").contains("pa55word"));

    let bad = "[[receivers]]\nname = \"a\"\ntype = \"alertmanager\"\nurl = \"http://am:9093/api/v2/alerts\"\nresend_interval = \"100ms\"\n\n[[receivers]]\nname = \"b\"\ntype = \"alertmanager\"\nurl = \"http://am:9093\"\nusername = \"u\"\n\n[[receivers]]\nname = \"c\"\ntype = \"alertmanager\"\nurl = \"http://am:9093\"\nusername = \"u\"\npassword = \"secret-pw\"\nbearer_token = \"t\"\n\n[[receivers]]\nname = \"d\"\ntype = \"webhook\"\nurl = \"http://hook\"\nresend_interval = \"1m\"\n";
    let Err(ConfigError::Invalid(problems)) = Config::parse(bad, "bad.toml") else {
        panic!("expected problems");
    };
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    for (prefix, says) in [
        ("bad.toml:4:7: receivers[0].url", "base URL"),
        ("bad.toml:5:19: receivers[0].resend_interval", "too short"),
        ("bad.toml:11:12: receivers[1].username", "needs a password"),
        ("bad.toml:17:12: receivers[2].username", "not both"),
        (
            "bad.toml:25:19: receivers[3].resend_interval",
            "not a setting of \"webhook\"",
        ),
    ] {
        assert!(
            text.iter()
                .any(|t| t.starts_with(prefix) && t.contains(says)),
            "{prefix} ... {says} in {text:#?}"
        );
    }
    assert_eq!(text.len(), 5, "{text:#?}");
    assert!(!text.join("\n").contains("secret-pw"), "{text:#?}");
}

#[test]
fn external_url_is_checked_and_defaults_to_host_and_port() {
    let config = Config::parse("", "empty.toml").expect("valid");
    assert_eq!(
        config.server.external_url_or("http", "node1", 9842),
        "http://node1:9842/"
    );
    let config = Config::parse(
        "[server]\nexternal_url = \"https://gpu.example.com/watch\"\n",
        "ok.toml",
    )
    .expect("valid");
    assert_eq!(
        config.server.external_url_or("http", "node1", 9842),
        "https://gpu.example.com/watch/"
    );
    let Err(ConfigError::Invalid(problems)) =
        Config::parse("[server]\nexternal_url = \"gpu.example.com\"\n", "bad.toml")
    else {
        panic!("expected a problem");
    };
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0]
            .to_string()
            .starts_with("bad.toml:2:16: server.external_url: \"gpu.example.com\" is not an http:// or https:// URL"),
        "{}",
        problems[0]
    );
}

#[test]
fn email_receivers_are_read_with_safe_defaults() {
    let source = "[[receivers]]\nname = \"mail\"\ntype = \"email\"\nsmarthost = \"smtp.example.com:587\"\nfrom = \"gpuwatch <gpuwatch@example.com>\"\nto = [\"ops@example.com\", \"Oncall <oncall@example.com>\"]\nusername = \"gpuwatch\"\npassword = \"pa55word\"\n\n[[receivers]]\nname = \"smtps\"\ntype = \"email\"\nsmarthost = \"smtp.example.com:465\"\nfrom = \"gpu@example.com\"\nto = [\"ops@example.com\"]\n\n[[receivers]]\nname = \"relay\"\ntype = \"email\"\nsmarthost = \"127.0.0.1:25\"\ntls = \"none\"\nfrom = \"gpu@example.com\"\nto = [\"ops@example.com\"]\nhello_name = \"node-1.example.com\"\ntimeout = \"5s\"\n";
    let config = Config::parse(source, "ok.toml").expect("valid");
    let email = |i: usize| match &config.receivers[i].kind {
        crate::notify::ReceiverKind::Email(e) => e.clone(),
        other => panic!("an email receiver: {other:?}"),
    };
    use crate::notify::email::TlsMode;
    let mail = email(0);
    assert_eq!((mail.host.as_str(), mail.port), ("smtp.example.com", 587));
    assert_eq!(mail.tls, TlsMode::StartTls, "STARTTLS by default");
    assert_eq!(mail.to.len(), 2);
    assert_eq!(mail.timeout, Duration::from_secs(30));
    assert_eq!(mail.password.as_ref().map(|p| p.expose()), Some("pa55word"));
    assert!(!format!("{config:?}").contains("pa55word"), "never shown");
    assert_eq!(email(1).tls, TlsMode::Implicit, "implicit TLS on 465");
    let relay = email(2);
    assert_eq!(relay.tls, TlsMode::None, "plain only when written");
    assert_eq!(relay.hello_name.as_deref(), Some("node-1.example.com"));
}

#[test]
fn bad_email_receivers_are_reported_with_file_line_and_field() {
    let bad = "[[receivers]]\nname = \"a\"\ntype = \"email\"\nsmarthost = \"smtp.example.com\"\nfrom = \"not an address\"\nto = []\ntls = \"ssl\"\n\n[[receivers]]\nname = \"b\"\ntype = \"email\"\nsmarthost = \"smtp.example.com:587\"\nfrom = \"gpu@example.com\"\nto = [\"ops@example.com\", \"@@\"]\nusername = \"u\"\nurl = \"http://x\"\nca_file = \"/nonexistent/ca.pem\"\n\n[[receivers]]\nname = \"c\"\ntype = \"email\"\nto = [\"ops@example.com\"]\npassword = \"hunter2-secret\"\npassword_env = \"GPUWATCH_TEST_NO_SUCH_VARIABLE\"\n\n[[receivers]]\nname = \"d\"\ntype = \"webhook\"\nurl = \"http://x\"\nsmarthost = \"smtp.example.com:25\"\n";
    let Err(ConfigError::Invalid(problems)) = Config::parse(bad, "bad.toml") else {
        panic!("expected problems");
    };
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    for (field, line) in [
        ("receivers[0].smarthost", Some(4)),
        ("receivers[0].from", Some(5)),
        ("receivers[0].to", Some(6)),
        ("receivers[0].tls", Some(7)),
        ("receivers[1].to", Some(14)),
        ("receivers[1].username", Some(15)),
        ("receivers[1].url", Some(16)),
        ("receivers[1].ca_file", Some(17)),
        ("receivers[2].smarthost", None),
        ("receivers[2].from", None),
        ("receivers[2].username", None),
        ("receivers[2].password_env", Some(24)),
        ("receivers[3].smarthost", Some(30)),
    ] {
        let prefix = match line {
            Some(line) => format!("bad.toml:{line}:"),
            None => "bad.toml".to_string(),
        };
        assert!(
            text.iter()
                .any(|t| t.contains(field) && t.starts_with(&prefix)),
            "{field} at {prefix} in {text:#?}"
        );
    }
    let all = text.join("\n");
    assert!(!all.contains("hunter2-secret"), "{all}");
    assert!(all.contains("\"starttls\" (the default)"), "{all}");
}

#[test]
fn profiles_are_read_and_checked_with_line_and_field() {
    let good = "[sampler]\nprocess_top_n = 3\n[capacity]\nmemory_margin = \"512MiB\"\n[[profiles]]\nname = \"resnet50\"\nmemory = \"1.8GB\"\nsm_share = 0.1\n[[profiles]]\nname = \"bert\"\nmemory = \"12GiB\"\nmodel = \"H100\"\n";
    let config = Config::parse(good, "good.toml").expect("valid");
    assert_eq!(config.sampler.process_top_n, 3);
    assert_eq!(config.capacity.memory_margin_bytes, 512 << 20);
    assert_eq!(config.capacity.profiles.len(), 2);
    assert_eq!(config.capacity.profiles[0].memory_bytes, 1_800_000_000);
    assert_eq!(config.capacity.profiles[0].sm_share, Some(0.1));
    assert_eq!(config.capacity.profiles[1].model.as_deref(), Some("H100"));
    assert_eq!(Config::default().capacity.memory_margin_bytes, 1 << 30);

    let bad = "[capacity]\nmemory_margin = \"lots\"\n[[profiles]]\nname = \"a b\"\nmemory = \"1GB\"\n[[profiles]]\nname = \"x\"\nmemory = \"0\"\nsm_share = 1.5\n[[profiles]]\nname = \"y\"\n";
    let Err(ConfigError::Invalid(problems)) = Config::parse(bad, "bad.toml") else {
        panic!("expected problems");
    };
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 5, "{text:#?}");
    assert!(
        text[0].starts_with("bad.toml:2:17: capacity.memory_margin: \"lots\" is not a size"),
        "{}",
        text[0]
    );
    assert!(
        text[1].starts_with("bad.toml:4:8: profiles[0].name: \"a b\" is not a profile name"),
        "{}",
        text[1]
    );
    assert!(
        text[2].starts_with("bad.toml:8:10: profiles[1].memory: must be more than 0"),
        "{}",
        text[2]
    );
    assert!(
        text[3].starts_with("bad.toml:9:12: profiles[1].sm_share: must be a share"),
        "{}",
        text[3]
    );
    assert!(
        text[4].starts_with("bad.toml:11:8: profiles[2].memory: is missing"),
        "{}",
        text[4]
    );
}

#[test]
fn grouping_is_refused_for_email_receivers_where_it_is_not_built() {
    let source = "[[receivers]]\nname = \"m\"\ntype = \"email\"\nsmarthost = \"smtp.example.com:587\"\nfrom = \"gpu@example.com\"\nto = [\"ops@example.com\"]\ngroup_wait = \"30s\"\n";
    let Err(ConfigError::Invalid(problems)) = Config::parse(source, "mail.toml") else {
        panic!("group_wait on an email receiver must be refused");
    };
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(text.len(), 1, "{text:#?}");
    assert!(
        text[0].starts_with(
            "mail.toml:7:14: receivers[0].group_wait: grouping is not built for email"
        ),
        "{text:#?}"
    );
    let without = source.replace("group_wait = \"30s\"\n", "");
    assert!(Config::parse(&without, "mail.toml").is_ok());
}

#[test]
fn command_lines_are_off_unless_switched_on() {
    assert!(!Config::default().sampler.process_command_line);
    let on = Config::parse("[sampler]\nprocess_command_line = true\n", "on.toml").expect("valid");
    assert!(on.sampler.process_command_line);
    let Err(ConfigError::Invalid(problems)) =
        Config::parse("[sampler]\nprocess_command_line = \"yes\"\n", "bad.toml")
    else {
        panic!("a string is not a switch");
    };
    let text = problems[0].to_string();
    assert!(
        text.starts_with("bad.toml:2:") && text.contains("expected a boolean"),
        "{text}"
    );
}

#[test]
fn idle_timeout_has_a_default_and_a_range() {
    let config = Config::parse("", "empty.toml").expect("valid");
    assert_eq!(config.server.idle_timeout, Duration::from_secs(5));
    let config = Config::parse("[server]\nidle_timeout = \"30s\"\n", "ok.toml").expect("valid");
    assert_eq!(config.server.idle_timeout, Duration::from_secs(30));
    for (value, why) in [
        ("\"50ms\"", "too short"),
        ("\"2h\"", "too long"),
        ("\"soon\"", "not a duration"),
    ] {
        let source = format!("[server]\nidle_timeout = {value}\n");
        let Err(ConfigError::Invalid(problems)) = Config::parse(&source, "bad.toml") else {
            panic!("{value} accepted");
        };
        assert_eq!(problems.len(), 1, "{problems:?}");
        let text = problems[0].to_string();
        assert!(
            text.starts_with("bad.toml:2:16: server.idle_timeout: "),
            "{text}"
        );
        assert!(text.contains(why), "{text}");
    }
}

#[test]
fn detail_sets_are_read_and_unknown_ones_reported_with_line_and_field() {
    use crate::exporter::detail::{Detail, DetailSet};
    assert_eq!(Config::default().exporter.detail, Detail::NONE);
    let some = Config::parse(
        "[exporter]\ndetail = [\"nvlink_links\", \"processes\"]\n",
        "some.toml",
    )
    .expect("valid");
    assert!(some.exporter.detail.has(DetailSet::NvlinkLinks));
    assert!(some.exporter.detail.has(DetailSet::Processes));
    assert!(!some.exporter.detail.has(DetailSet::MediaEngines));
    let full = Config::parse("[exporter]\ndetail = [\"full\"]\n", "full.toml").expect("valid");
    assert_eq!(full.exporter.detail, Detail::full());
    let Err(ConfigError::Invalid(problems)) = Config::parse(
        "[exporter]\ndetail = [\n  \"processes\",\n  \"nvlinks\",\n]\n",
        "bad.toml",
    ) else {
        panic!("an unknown set is refused");
    };
    assert_eq!(problems.len(), 1);
    let text = problems[0].to_string();
    assert!(text.starts_with("bad.toml:4:"), "{text}");
    assert_eq!(problems[0].field, "exporter.detail");
    assert!(
        text.contains("\"nvlinks\"") && text.contains("\"nvlink_links\""),
        "{text}"
    );
}

#[test]
fn the_dcgm_hpc_job_label_is_off_unless_switched_on_and_must_be_a_bool() {
    assert!(!Config::default().exporter.compat_hpc_job);
    let on = Config::parse("[exporter]\ncompat_hpc_job = true\n", "on.toml").expect("valid");
    assert!(on.exporter.compat_hpc_job);
    let Err(ConfigError::Invalid(problems)) =
        Config::parse("[exporter]\ncompat_hpc_job = \"yes\"\n", "bad.toml")
    else {
        panic!("a string is refused");
    };
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].line, Some(2));
    let text = problems[0].to_string();
    assert!(text.contains("compat_hpc_job"), "{text}");
}
