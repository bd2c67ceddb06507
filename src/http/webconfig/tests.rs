use std::path::Path;

use super::*;

/// A bcrypt hash of "pw" at the lowest cost.
fn hash() -> String {
    bcrypt::hash("pw", 4).expect("hash")
}

/// Writes a self-signed certificate and its key into `dir`.
fn write_cert(dir: &Path, name: &str) {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("cert");
    std::fs::write(dir.join(format!("{name}.crt")), cert.pem()).expect("write cert");
    std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).expect("write key");
}

fn problems(source: &str, base: &Path) -> Vec<Problem> {
    match WebSecurity::parse(source, "web.yml", base) {
        Ok(_) => panic!("accepted:\n{source}"),
        Err(problems) => problems,
    }
}

fn fields(problems: &[Problem]) -> Vec<&str> {
    problems.iter().map(|p| p.field.as_str()).collect()
}

#[test]
fn an_empty_file_enables_nothing() {
    for source in ["", "# just a comment\n", "{}\n"] {
        let security = WebSecurity::parse(source, "web.yml", Path::new(".")).expect("valid");
        assert!(security.tls.is_none() && security.auth.is_none() && security.headers.is_empty());
        assert_eq!(security.scheme(), "http");
    }
}

#[test]
fn unknown_keys_are_errors_with_their_line() {
    let found = problems(
        "basic_auth_users: {}\ntls_server_config:\n  cert_file: a\n  ciphers: [x]\n",
        Path::new("."),
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].message.contains("unknown field `ciphers`"),
        "{found:?}"
    );
    assert_eq!(found[0].line, Some(4), "{found:?}");
    let found = problems("tls_config: {}\n", Path::new("."));
    assert!(found[0].message.contains("tls_server_config"), "{found:?}");
}

#[test]
fn tls_needs_files_that_exist() {
    let dir = tempfile::tempdir().expect("dir");
    let found = problems("tls_server_config:\n  cert_file: missing.crt\n", dir.path());
    assert_eq!(fields(&found), ["tls_server_config.key_file"], "{found:?}");
    let found = problems(
        "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n",
        dir.path(),
    );
    assert_eq!(
        fields(&found),
        ["tls_server_config.cert_file", "tls_server_config.key_file"],
        "{found:?}"
    );
    // Relative to the web config's directory, and the line is the field's.
    assert!(
        found[0]
            .message
            .contains(&dir.path().join("missing.crt").display().to_string()),
        "{found:?}"
    );
    assert_eq!(found[0].line, Some(2));
    assert_eq!(found[1].line, Some(3));
}

#[test]
fn a_valid_tls_config_builds_an_acceptor() {
    let dir = tempfile::tempdir().expect("dir");
    write_cert(dir.path(), "server");
    write_cert(dir.path(), "ca");
    let source = format!(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: {}\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS13\nbasic_auth_users:\n  prometheus: {}\nhttp_server_config:\n  headers:\n    x-content-type-options: nosniff\n",
        dir.path().join("server.key").display(),
        hash()
    );
    let security = WebSecurity::parse(&source, "web.yml", dir.path()).expect("valid");
    assert!(security.tls.is_some() && security.auth.is_some());
    assert_eq!(security.scheme(), "https");
    assert_eq!(security.headers.len(), 1);
    assert_eq!(security.headers[0].0.as_str(), "x-content-type-options");
}

#[test]
fn files_that_are_not_certificates_or_keys_are_named() {
    let dir = tempfile::tempdir().expect("dir");
    write_cert(dir.path(), "server");
    write_cert(dir.path(), "other");
    std::fs::write(dir.path().join("junk"), "not PEM at all\n").expect("write");
    let found = problems(
        "tls_server_config:\n  cert_file: junk\n  key_file: junk\n",
        dir.path(),
    );
    assert_eq!(
        fields(&found),
        ["tls_server_config.cert_file", "tls_server_config.key_file"],
        "{found:?}"
    );
    // A key of another certificate.
    let found = problems(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: other.key\n",
        dir.path(),
    );
    assert_eq!(fields(&found), ["tls_server_config.key_file"], "{found:?}");
    assert!(found[0].message.contains("usable pair"), "{found:?}");
}

#[test]
fn client_auth_rules() {
    let dir = tempfile::tempdir().expect("dir");
    write_cert(dir.path(), "server");
    let base = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    let found = problems(
        &format!("{base}  client_auth_type: RequireAndVerifyClientCert\n"),
        dir.path(),
    );
    assert_eq!(fields(&found), ["tls_server_config.client_ca_file"]);
    let found = problems(&format!("{base}  client_ca_file: server.crt\n"), dir.path());
    assert_eq!(fields(&found), ["tls_server_config.client_ca_file"]);
    let found = problems(
        &format!("{base}  client_auth_type: Sometimes\n"),
        dir.path(),
    );
    assert_eq!(fields(&found), ["tls_server_config.client_auth_type"]);
    for ok in ["RequestClientCert", "RequireAnyClientCert", "NoClientCert"] {
        WebSecurity::parse(
            &format!("{base}  client_auth_type: {ok}\n"),
            "web.yml",
            dir.path(),
        )
        .unwrap_or_else(|p| panic!("{ok}: {p:?}"));
    }
    let found = problems(&format!("{base}  min_version: TLS10\n"), dir.path());
    assert_eq!(fields(&found), ["tls_server_config.min_version"]);
    let found = problems(
        &format!("{base}  min_version: TLS13\n  max_version: TLS12\n"),
        dir.path(),
    );
    assert_eq!(fields(&found), ["tls_server_config.min_version"]);
}

#[test]
fn users_need_bcrypt_hashes() {
    let found = problems(
        &format!(
            "basic_auth_users:\n  good: {}\n  plain: hunter2\n  \"a:b\": {}\n",
            hash(),
            hash()
        ),
        Path::new("."),
    );
    assert_eq!(
        fields(&found),
        ["basic_auth_users.a:b", "basic_auth_users.plain"],
        "{found:?}"
    );
    assert!(found[1].message.contains("bcrypt"), "{found:?}");
    assert!(!found[1].message.contains("hunter2"), "{found:?}");
    assert_eq!(found[1].line, Some(3));
    assert!(check_bcrypt(&hash()).is_ok());
    assert!(check_bcrypt("$2y$10$short").is_err());
}

#[test]
fn only_security_headers_can_be_set() {
    let found = problems(
        "http_server_config:\n  headers:\n    Server: gpuwatch\n    X-Frame-Options: allow\n",
        Path::new("."),
    );
    assert_eq!(
        fields(&found),
        [
            "http_server_config.headers.Server",
            "http_server_config.headers.X-Frame-Options"
        ],
        "{found:?}"
    );
}

#[test]
fn the_flag_wins_and_the_config_key_is_relative_to_its_file() {
    let flag = Path::new("flag.yml");
    let toml = Path::new("/etc/gpuwatch/gpuwatch.toml");
    assert_eq!(
        choose_file(Some(flag), Some(toml), Some(Path::new("web.yml"))),
        Some(PathBuf::from("flag.yml"))
    );
    assert_eq!(
        choose_file(None, Some(toml), Some(Path::new("web.yml"))),
        Some(PathBuf::from("/etc/gpuwatch/web.yml"))
    );
    assert_eq!(
        choose_file(None, Some(toml), Some(Path::new("/srv/web.yml"))),
        Some(PathBuf::from("/srv/web.yml"))
    );
    assert_eq!(choose_file(None, Some(toml), None), None);
}

#[test]
fn the_example_file_is_valid_but_for_its_certificate_paths() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/web-config.example.yml");
    let source = std::fs::read_to_string(path).expect("example");
    let dir = tempfile::tempdir().expect("dir");
    write_cert(dir.path(), "server");
    let here = source
        .replace(
            "/etc/gpuwatch/tls/server.crt",
            &dir.path().join("server.crt").display().to_string(),
        )
        .replace(
            "/etc/gpuwatch/tls/server.key",
            &dir.path().join("server.key").display().to_string(),
        );
    let security = WebSecurity::parse(&here, path, dir.path()).unwrap_or_else(|p| panic!("{p:#?}"));
    assert!(security.tls.is_some() && security.auth.is_some());
    assert_eq!(security.headers.len(), 2);
}

#[test]
fn every_problem_has_a_line_and_column_missing_fields_at_their_section() {
    let dir = tempfile::tempdir().expect("dir");
    write_cert(dir.path(), "server");
    // cert_file and key_file are not written: their section's line.
    let found = problems(
        "basic_auth_users: {}\ntls_server_config:\n  min_version: TLS12\n",
        dir.path(),
    );
    assert_eq!(
        fields(&found),
        ["tls_server_config.cert_file", "tls_server_config.key_file"]
    );
    for p in &found {
        assert_eq!((p.line, p.column), (Some(2), Some(1)), "{p}");
    }
    // A CA required by client_auth_type: that key's line.
    let found = problems(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n",
        dir.path(),
    );
    assert_eq!(fields(&found), ["tls_server_config.client_ca_file"]);
    assert_eq!((found[0].line, found[0].column), (Some(4), Some(3)));
    // Syntax errors and every other check carry a place too.
    for source in [
        "tls_server_config: [\n",
        "basic_auth_users:\n  'x': nope\n",
        "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n  min_version: TLS10\n",
        "http_server_config:\n  headers:\n    Server: x\n",
    ] {
        for p in problems(source, dir.path()) {
            assert!(p.line.is_some() && p.column.is_some(), "{source}: {p:?}");
        }
    }
}

#[test]
fn certificate_files_that_are_devices_or_fifos_are_refused_not_read() {
    let dir = tempfile::tempdir().expect("dir");
    write_cert(dir.path(), "server");
    let fifo = dir.path().join("key.fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo (coreutils) runs");
    assert!(status.success());
    let found = problems(
        "tls_server_config:\n  cert_file: /dev/zero\n  key_file: key.fifo\n",
        dir.path(),
    );
    assert_eq!(
        fields(&found),
        ["tls_server_config.cert_file", "tls_server_config.key_file"],
        "{found:?}"
    );
    assert!(
        found[0].message.contains("/dev/zero is a character device"),
        "{found:?}"
    );
    assert!(
        found[1].message.contains("is a FIFO (named pipe)"),
        "{found:?}"
    );
    // A symlink to a good pair (certbot's live/ directory) is followed.
    std::os::unix::fs::symlink(dir.path().join("server.crt"), dir.path().join("live.crt"))
        .expect("symlink");
    WebSecurity::parse(
        "tls_server_config:\n  cert_file: live.crt\n  key_file: server.key\n",
        "web.yml",
        dir.path(),
    )
    .unwrap_or_else(|p| panic!("{p:#?}"));
}

#[test]
fn an_unreadable_web_config_is_reported_where_the_configuration_names_it() {
    let dir = tempfile::tempdir().expect("dir");
    let toml = dir.path().join("gpuwatch.toml");
    let source = "[server]\nlisten = \"127.0.0.1:0\"\nweb_config = \"/dev/zero\"\n";
    let config = crate::config::Config::parse(source, &toml.display().to_string()).expect("valid");
    let Some((file, Err(found))) = load_chosen(None, Some(&toml), &config.server) else {
        panic!("/dev/zero is not a web configuration");
    };
    assert_eq!(file, Path::new("/dev/zero"));
    assert_eq!(found.len(), 1, "{found:?}");
    let shown = found[0].to_string();
    assert!(
        shown.starts_with(&format!("{}:3:14: server.web_config: cannot load the web configuration file: /dev/zero is a character device", toml.display())),
        "{shown}"
    );
    // Named by the flag, the problem is the file's own.
    let Some((_, Err(found))) =
        load_chosen(Some(Path::new("/dev/zero")), Some(&toml), &config.server)
    else {
        panic!("/dev/zero is not a web configuration");
    };
    assert_eq!(found[0].file, "/dev/zero");
    // Too large.
    let big = dir.path().join("web.yml");
    std::fs::write(
        &big,
        vec![b'#'; (crate::files::MAX_CONFIG_BYTES + 1) as usize],
    )
    .expect("write");
    let found = WebSecurity::load(&big).expect_err("too large");
    assert!(
        found[0].message.contains("is larger than 1048576 bytes"),
        "{found:?}"
    );
}
