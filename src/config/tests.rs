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
    assert_eq!(problems[0].field, "intervall");
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
    assert_eq!(r.webhook.timeout, Duration::from_secs(3));
    assert_eq!(r.webhook.headers["X-Team"], "gpu");
    assert_eq!(
        r.webhook.bearer_token.as_ref().map(|t| t.expose()),
        Some("s3cret")
    );
    assert!(
        !format!("{config:?}").contains("s3cret"),
        "the token is never shown"
    );

    let bad = "[[receivers]]\nname = \"ops\"\ntype = \"email\"\nurl = \"ftp://x\"\nbearer_token = \"a\"\nbearer_token_env = \"GPUWATCH_TEST_NO_SUCH_VARIABLE\"\n\n[[receivers]]\nname = \"ops\"\ntype = \"webhook\"\nurl = \"http://x\"\nretry_min = \"10s\"\nretry_max = \"1s\"\n";
    let Err(ConfigError::Invalid(problems)) = Config::parse(bad, "bad.toml") else {
        panic!("expected problems");
    };
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    for field in [
        "receivers[0].type",
        "receivers[0].url",
        "receivers[0].bearer_token_env",
        "receivers[1].name",
        "receivers[1].retry_max",
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
