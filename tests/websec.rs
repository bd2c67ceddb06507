//! `--web-config`: TLS and basic auth on the real binary, scraped by an
//! HTTPS client trusting a test CA and by a real Prometheus; invalid web
//! configurations refused by `validate` and `run`.
//!
//! Certificates are made at test time (rcgen): a CA, a server certificate
//! for 127.0.0.1 and localhost signed by it, a client certificate signed by
//! it, and a self-signed client certificate no one trusts.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use common::{run_cli, Agent};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

const USER: &str = "prometheus";
const PASSWORD: &str = "correct horse battery staple";

/// Test PKI written to a temp dir.
struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
    ca_pem: String,
    client_pem: String,
    client_key: String,
    stranger_pem: String,
    stranger_key: String,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().expect("temp dir");
        let (ca, ca_key) = new_ca("gpuwatch test CA");
        let leaf = |names: Vec<String>, purpose: ExtendedKeyUsagePurpose| {
            let (cert, key) = issue(&ca, &ca_key, names, purpose, None);
            (cert.pem(), key.serialize_pem())
        };
        let (server_pem, server_key) = leaf(
            vec!["localhost".into(), "127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_pem, client_key) = leaf(
            vec!["scraper.example".into()],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let stranger_key_pair = KeyPair::generate().expect("key");
        let mut stranger =
            CertificateParams::new(vec!["stranger.example".to_string()]).expect("params");
        stranger.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let stranger = stranger.self_signed(&stranger_key_pair).expect("cert");

        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write PEM");
        };
        write("ca.crt", &ca.pem());
        write("server.crt", &server_pem);
        write("server.key", &server_key);
        Pki {
            ca_pem: ca.pem(),
            ca,
            ca_key,
            client_pem,
            client_key,
            stranger_pem: stranger.pem(),
            stranger_key: stranger_key_pair.serialize_pem(),
            dir,
        }
    }

    /// A new server certificate for 127.0.0.1 and localhost signed by the
    /// CA, expiring at the start of `year`: (certificate, key).
    fn renewed_server(&self, year: i32) -> (rcgen::Certificate, KeyPair) {
        issue(
            &self.ca,
            &self.ca_key,
            vec!["localhost".into(), "127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
            Some(year),
        )
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `name` into the PKI's directory and returns its path.
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).expect("write");
        path
    }
}

/// A self-signed CA.
fn new_ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.distinguished_name.push(DnType::CommonName, name);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = ca_params.self_signed(&ca_key).expect("CA cert");
    (ca, ca_key)
}

/// A certificate for `names` signed by `ca`, expiring at the start of
/// `year` (rcgen's default otherwise).
fn issue(
    ca: &rcgen::Certificate,
    ca_key: &KeyPair,
    names: Vec<String>,
    purpose: ExtendedKeyUsagePurpose,
    year: Option<i32>,
) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(names).expect("params");
    params
        .distinguished_name
        .push(DnType::CommonName, "gpuwatch test");
    params.extended_key_usages = vec![purpose];
    if let Some(year) = year {
        params.not_after = rcgen::date_time_ymd(year, 1, 1);
    }
    let cert = params.signed_by(&key, ca, ca_key).expect("sign");
    (cert, key)
}

/// bcrypt of `password`, at cost 4 to keep debug builds quick (the cost is
/// the hash's business, not the server's).
fn bcrypt_hash(password: &str) -> String {
    bcrypt::hash(password, 4).expect("bcrypt")
}

/// An HTTPS client trusting the test CA, optionally presenting a certificate.
fn https_client(pki: &Pki, client: Option<(&str, &str)>) -> ureq::Agent {
    let ca = ureq::tls::Certificate::from_pem(pki.ca_pem.as_bytes()).expect("CA PEM");
    let mut tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::Specific(Arc::new(vec![ca])));
    if let Some((cert, key)) = client {
        let cert = ureq::tls::Certificate::from_pem(cert.as_bytes()).expect("client PEM");
        let key = ureq::tls::PrivateKey::from_pem(key.as_bytes()).expect("client key");
        tls = tls.client_cert(Some(ureq::tls::ClientCert::new_with_certs(&[cert], key)));
    }
    ureq::Agent::config_builder()
        .tls_config(tls.build())
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .new_agent()
}

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// (status, headers, body).
type Reply = (u16, Vec<(String, String)>, String);

/// GET: (status, headers, body), or the transport error as text.
fn get(client: &ureq::Agent, url: &str, authorization: Option<&str>) -> Result<Reply, String> {
    let mut request = client.get(url);
    if let Some(value) = authorization {
        request = request.header("Authorization", value);
    }
    let mut response = request.call().map_err(|e| e.to_string())?;
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let body = response
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    Ok((response.status().as_u16(), headers, body))
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn start(pki: &Pki, web_yml: &str) -> Agent {
    let web = pki.write("web.yml", web_yml);
    Agent::start(
        "demo",
        &["--web-config", web.to_str().expect("utf-8 path")],
        &[("RUST_LOG", "info,gpuwatch=debug")],
    )
}

#[test]
fn tls_and_basic_auth_guard_every_path() {
    let pki = Pki::new();
    // Relative paths: relative to web.yml's directory.
    let agent = start(
        &pki,
        &format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
             basic_auth_users:\n  {USER}: {}\n  other: {}\n\
             http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n",
            bcrypt_hash(PASSWORD),
            bcrypt_hash("other-password")
        ),
    );
    assert!(agent.url.starts_with("https://"), "{}", agent.url);
    let client = https_client(&pki, None);
    let url = |path: &str| format!("{}{path}", agent.url);

    // Every path asks for credentials, health included.
    for path in [
        "/metrics",
        "/-/healthy",
        "/-/ready",
        "/api/v1/snapshot",
        "/api/v1/gpus",
        "/",
        "/assets/app.js",
    ] {
        let (status, headers, _) = get(&client, &url(path), None).expect("TLS request");
        assert_eq!(status, 401, "{path} without credentials");
        assert_eq!(
            header(&headers, "WWW-Authenticate"),
            Some("Basic realm=\"gpuwatch\""),
            "{path}"
        );
        assert_eq!(header(&headers, "X-Content-Type-Options"), Some("nosniff"));
    }
    for wrong in [
        basic(USER, "wrong"),
        basic(USER, ""),
        basic("nobody", PASSWORD),
        basic("other", PASSWORD),
        "Bearer abc".to_string(),
        "Basic not-base64!".to_string(),
    ] {
        let (status, _, _) = get(&client, &url("/metrics"), Some(&wrong)).expect("request");
        assert_eq!(status, 401, "{wrong}");
    }

    let right = basic(USER, PASSWORD);
    let (status, headers, body) = get(&client, &url("/metrics"), Some(&right)).expect("request");
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "X-Content-Type-Options"), Some("nosniff"));
    assert!(body.contains("gpuwatch_build_info"), "{body}");
    let (status, _, _) = get(&client, &url("/-/healthy"), Some(&right)).expect("request");
    assert_eq!(status, 200);
    // The second user, and the cached first one again.
    let (status, _, _) = get(
        &client,
        &url("/metrics"),
        Some(&basic("other", "other-password")),
    )
    .expect("request");
    assert_eq!(status, 200);
    let (status, _, _) = get(&client, &url("/metrics"), Some(&right)).expect("request");
    assert_eq!(status, 200);

    // Plain HTTP to the TLS port gets no HTTP answer; the server lives on.
    let address = agent.url.trim_start_matches("https://").to_string();
    let mut plain = std::net::TcpStream::connect(&address).expect("connect");
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    plain
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("send");
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(
        !answer.starts_with(b"HTTP/"),
        "plain HTTP was answered: {}",
        String::from_utf8_lossy(&answer)
    );
    let plain_client = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .new_agent();
    assert!(
        plain_client
            .get(&format!("http://{address}/metrics"))
            .call()
            .is_err(),
        "an http:// client must fail against the TLS port"
    );
    // A client that does not trust the CA fails the handshake.
    let untrusting = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .new_agent();
    assert!(untrusting.get(&url("/metrics")).call().is_err());
    let (status, _, _) = get(&client, &url("/metrics"), Some(&right)).expect("still serving");
    assert_eq!(status, 200);

    let log = agent.log();
    assert!(log.contains("TLS handshake failed"), "{log}");
    assert!(log.contains("Basic auth failed"), "{log}");
    assert!(
        !log.contains(PASSWORD) && !log.contains("other-password"),
        "{log}"
    );
    let status = agent.terminate();
    assert!(status.success(), "{status:?}");
}

#[test]
fn required_client_certificates_are_verified() {
    let pki = Pki::new();
    let agent = start(
        &pki,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS12\n",
    );
    let url = format!("{}/metrics", agent.url);

    let no_cert = get(&https_client(&pki, None), &url, None);
    assert!(
        no_cert.is_err(),
        "a client without a certificate got {no_cert:?}"
    );
    let stranger = get(
        &https_client(&pki, Some((&pki.stranger_pem, &pki.stranger_key))),
        &url,
        None,
    );
    assert!(
        stranger.is_err(),
        "a certificate from an unknown CA got {stranger:?}"
    );
    let (status, _, body) = get(
        &https_client(&pki, Some((&pki.client_pem, &pki.client_key))),
        &url,
        None,
    )
    .expect("a client with a certificate from the CA");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("gpuwatch_build_info"));
    assert!(agent.log().contains("TLS handshake failed"));
}

/// A Prometheus server scraping two jobs of the same agent: one with the
/// right password, one with a wrong one.
fn start_prometheus(target: &str, ca_file: &Path) -> common::PrometheusServer {
    let job = |name: &str, password: &str| {
        format!(
            "  - job_name: {name}\n    scheme: https\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    \
             tls_config:\n      ca_file: {}\n    basic_auth:\n      username: {USER}\n      password: '{password}'\n    \
             static_configs:\n      - targets: ['{target}']\n",
            ca_file.display()
        )
    };
    common::PrometheusServer::start(&format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n{}{}",
        job("good", PASSWORD),
        job("bad", "not the password")
    ))
}

fn json(client: &ureq::Agent, url: &str) -> Option<serde_json::Value> {
    let mut response = client.get(url).call().ok()?;
    serde_json::from_str(&response.body_mut().read_to_string().ok()?).ok()
}

#[test]
fn prometheus_scrapes_over_tls_with_basic_auth() {
    let pki = Pki::new();
    let agent = start(
        &pki,
        &format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
             basic_auth_users:\n  {USER}: {}\n",
            bcrypt_hash(PASSWORD)
        ),
    );
    let target = agent.url.trim_start_matches("https://").to_string();
    let server = start_prometheus(&target, &pki.path("ca.crt"));
    let client = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .new_agent();

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    loop {
        let targets = json(&client, &format!("{}/api/v1/targets", server.url));
        let metric = json(
            &client,
            &format!(
                "{}/api/v1/query?query=gpuwatch_gpus%7Bjob%3D%22good%22%7D",
                server.url
            ),
        );
        if let (Some(targets), Some(metric)) = (&targets, &metric) {
            let active = targets["data"]["activeTargets"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let of = |job: &str| {
                active
                    .iter()
                    .find(|t| t["labels"]["job"] == job)
                    .cloned()
                    .unwrap_or_default()
            };
            let (good, bad) = (of("good"), of("bad"));
            let gpus = metric["data"]["result"][0]["value"][1]
                .as_str()
                .unwrap_or("")
                .to_string();
            last = format!("good: {good}\nbad: {bad}\ngpuwatch_gpus: {metric}");
            if good["health"] == "up"
                && bad["health"] == "down"
                && bad["lastError"].as_str().unwrap_or("").contains("401")
                && !gpus.is_empty()
            {
                assert_eq!(gpus, "4", "the demo scenario has four GPUs");
                let up = json(
                    &client,
                    &format!("{}/api/v1/query?query=up%7Bjob%3D%22good%22%7D", server.url),
                )
                .expect("query up");
                assert_eq!(up["data"]["result"][0]["value"][1], "1", "{up}");
                break;
            }
        }
        if Instant::now() > deadline {
            panic!(
                "Prometheus did not scrape as expected within 60 s\n{last}\nagent log:\n{}",
                agent.log()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Web configurations that must be refused, with the field named.
fn invalid_cases() -> Vec<(&'static str, String, &'static str)> {
    vec![
        (
            "unknown key",
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n".to_string(),
            "unknown field `cipher_suites`",
        ),
        (
            "missing cert file",
            "tls_server_config:\n  cert_file: nowhere.crt\n  key_file: server.key\n".to_string(),
            "tls_server_config.cert_file",
        ),
        (
            "non-bcrypt hash",
            format!("basic_auth_users:\n  {USER}: {PASSWORD}\n"),
            "basic_auth_users.prometheus",
        ),
    ]
}

#[test]
fn invalid_web_configs_are_refused_by_validate_and_run() {
    let pki = Pki::new();
    for (what, yaml, field) in invalid_cases() {
        let web = pki.write("bad-web.yml", &yaml);
        let web_str = web.to_str().expect("utf-8");

        let (code, stdout, stderr) = run_cli(&["validate", "--web-config", web_str], &[]);
        assert_eq!(code, 1, "{what}: validate exit code\n{stdout}{stderr}");
        assert!(
            stdout.contains(web_str) && stdout.contains(field),
            "{what}: validate must name the file and {field}:\n{stdout}"
        );
        assert!(!stdout.contains(PASSWORD), "{what}: {stdout}");

        // Through the configuration file's server.web_config, relative to it.
        let toml = pki.write("gpuwatch.toml", "[server]\nweb_config = \"bad-web.yml\"\n");
        let (code, stdout, _) = run_cli(
            &["validate", "--config", toml.to_str().expect("utf-8")],
            &[],
        );
        assert_eq!(code, 1, "{what}: validate --config\n{stdout}");
        assert!(
            stdout.contains(web_str) && stdout.contains(field),
            "{stdout}"
        );

        let (code, stdout, stderr) = run_cli(
            &[
                "run",
                "--simulate",
                "--listen",
                "127.0.0.1:0",
                "--web-config",
                web_str,
            ],
            &[],
        );
        assert_eq!(code, 1, "{what}: run must refuse\n{stdout}{stderr}");
        assert!(
            stderr.contains(web_str)
                && stderr.contains(field)
                && stderr.contains("gpuwatch validate --web-config"),
            "{what}: run's message:\n{stderr}"
        );
        assert!(!stderr.contains("Serving"), "{stderr}");
    }

    let good = pki.write(
        "good-web.yml",
        &format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  {USER}: {}\n",
            bcrypt_hash(PASSWORD)
        ),
    );
    let (code, stdout, _) = run_cli(
        &["validate", "--web-config", good.to_str().expect("utf-8")],
        &[],
    );
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("valid"), "{stdout}");
}

#[test]
fn a_stalled_handshake_gives_way_and_is_closed() {
    let pki = Pki::new();
    pki.write(
        "web.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
    );
    // server.web_config, relative to the configuration file.
    let toml = pki.write(
        "gpuwatch.toml",
        "[server]\nweb_config = \"web.yml\"\nrequest_timeout = \"1s\"\nidle_timeout = \"1s\"\nmax_connections = 1\n",
    );
    let agent = Agent::start(
        "demo",
        &["--config", toml.to_str().expect("utf-8")],
        &[("RUST_LOG", "info,gpuwatch=debug")],
    );
    assert!(agent.url.starts_with("https://"), "{}", agent.url);
    let address = agent.url.trim_start_matches("https://").to_string();
    let connect = || {
        let stream = std::net::TcpStream::connect(&address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        stream
    };
    // Closed by the server: end of stream or a reset, not the read timeout.
    let closed_by_server = |mut stream: std::net::TcpStream, what: &str| {
        let mut buffer = [0u8; 16];
        match stream.read(&mut buffer) {
            Ok(0) => {}
            Err(e)
                if !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            other => panic!("{what} is still open: {other:?}"),
        }
    };
    let scrape = || {
        let (status, _, _) = get(
            &https_client(&pki, None),
            &format!("{}/metrics", agent.url),
            None,
        )
        .expect("served");
        assert_eq!(status, 200);
    };

    // A client that never starts the handshake takes no slot, and is closed
    // after server.idle_timeout.
    let silent = connect();
    std::thread::sleep(Duration::from_millis(100));
    scrape();
    closed_by_server(silent, "a silent connection");

    // One that starts it and stalls holds the only slot until a newcomer
    // needs it.
    let mut stalled = connect();
    stalled.write_all(&[0x16, 0x03, 0x01]).expect("send");
    std::thread::sleep(Duration::from_millis(100));
    scrape();
    closed_by_server(stalled, "a stalled handshake");
    agent.wait_for_log("in its TLS handshake to make room", Duration::from_secs(10));

    // Without a newcomer it is closed after server.request_timeout.
    let mut stalled = connect();
    stalled.write_all(&[0x16, 0x03, 0x01]).expect("send");
    closed_by_server(stalled, "a stalled handshake");
    agent.wait_for_log("TLS handshake timed out", Duration::from_secs(10));
}

// ---- Certificate renewal without a restart ----

/// A TLS 1.3 client trusting `ca_pem` that completes the handshake on a
/// fresh connection (and so sees the certificate new connections get).
struct TlsProbe {
    tls: tokio_rustls::rustls::ClientConnection,
    tcp: std::net::TcpStream,
}

impl TlsProbe {
    fn connect(address: &str, ca_pem: &str) -> Result<TlsProbe, String> {
        use pki_types::pem::PemObject;
        use tokio_rustls::rustls::{self, pki_types};
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("CA PEM"))
            .expect("CA");
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = pki_types::ServerName::try_from("localhost").expect("name");
        let mut tls =
            rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
        let mut tcp = std::net::TcpStream::connect(address).map_err(|e| e.to_string())?;
        tcp.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        while tls.is_handshaking() {
            tls.complete_io(&mut tcp).map_err(|e| e.to_string())?;
        }
        Ok(TlsProbe { tls, tcp })
    }

    /// The DER of the leaf certificate the server presented.
    fn leaf(&self) -> Vec<u8> {
        self.tls.peer_certificates().expect("server certificates")[0].to_vec()
    }

    /// GET `path` on this connection (keep-alive): the status line. The
    /// whole response is read, so that the connection can be used again.
    fn status_line(&mut self, path: &str, authorization: &str) -> String {
        let mut stream = tokio_rustls::rustls::Stream::new(&mut self.tls, &mut self.tcp);
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: {authorization}\r\n\r\n"
        )
        .expect("send");
        stream.flush().expect("flush");
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                other => panic!("reading the response head: {other:?}"),
            }
        }
        let head = String::from_utf8_lossy(&head).to_string();
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .expect("Content-Length");
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).expect("body");
        head.lines().next().unwrap_or("").to_string()
    }
}

/// The leaf certificate a new connection to `agent` gets.
fn served_leaf(agent: &Agent, ca_pem: &str) -> Vec<u8> {
    let address = agent.url.trim_start_matches("https://");
    TlsProbe::connect(address, ca_pem)
        .unwrap_or_else(|e| panic!("TLS handshake: {e}\n{}", agent.log()))
        .leaf()
}

/// Polls until a new connection gets `leaf`, for up to 30 s.
fn wait_for_leaf(agent: &Agent, ca_pem: &str, leaf: &[u8], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while served_leaf(agent, ca_pem) != leaf {
        if Instant::now() > deadline {
            panic!("{what}: not served within 30 s\nlog:\n{}", agent.log());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// /metrics over TLS with basic auth, parsed.
fn tls_metrics(pki: &Pki, agent: &Agent) -> common::Metrics {
    let (status, _, body) = get(
        &https_client(pki, None),
        &format!("{}/metrics", agent.url),
        Some(&basic(USER, PASSWORD)),
    )
    .expect("/metrics over TLS");
    assert_eq!(status, 200, "{body}");
    common::Metrics::parse(&body)
}

/// The `gpuwatch_tls_*` table of docs/web.md's Web security section.
fn readme_tls_table() -> common::Documented {
    common::docs_metric_table("web.md", "tls-metrics-table")
}

fn start_with_auth(pki: &Pki, tls: &str) -> Agent {
    start(
        pki,
        &format!(
            "tls_server_config:\n{tls}basic_auth_users:\n  {USER}: {}\n",
            bcrypt_hash(PASSWORD)
        ),
    )
}

fn der_of(pem: &str) -> Vec<u8> {
    use tokio_rustls::rustls::pki_types::{pem::PemObject, CertificateDer};
    CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("PEM")
        .to_vec()
}

#[test]
fn renewed_certificates_are_served_without_a_restart() {
    let pki = Pki::new();
    let agent = start_with_auth(&pki, "  cert_file: server.crt\n  key_file: server.key\n");
    let first = der_of(&std::fs::read_to_string(pki.path("server.crt")).expect("read"));
    assert_eq!(served_leaf(&agent, &pki.ca_pem), first);
    let metrics = tls_metrics(&pki, &agent);
    let (ok, said) = common::promtool_check_metrics(&metrics.text);
    assert!(ok && said.trim().is_empty(), "promtool: {said}");
    // The TLS families are documented in docs/web.md's Web security section.
    common::assert_documented(
        &metrics,
        &readme_tls_table(),
        |name| name.starts_with("gpuwatch_tls_"),
        "the TLS metrics table of docs/web.md",
    );
    assert_eq!(
        metrics.value("gpuwatch_tls_reloads_total", &[("result", "success")]),
        Some(0.0)
    );
    let log = agent.log();
    assert!(log.contains("TLS certificate in use"), "{log}");

    // A connection opened before the renewal.
    let address = agent.url.trim_start_matches("https://").to_string();
    let mut before = TlsProbe::connect(&address, &pki.ca_pem).expect("connect");
    let line = before.status_line("/-/healthy", &basic(USER, PASSWORD));
    assert!(line.contains(" 200 "), "{line}");

    // Renewed in place, certificate first, as certbot does.
    let (cert, key) = pki.renewed_server(2040);
    pki.write("server.crt", &cert.pem());
    pki.write("server.key", &key.serialize_pem());
    wait_for_leaf(&agent, &pki.ca_pem, cert.der(), "the renewed certificate");
    let https = https_client(&pki, None);
    let (status, _, _) = get(
        &https,
        &format!("{}/-/healthy", agent.url),
        Some(&basic(USER, PASSWORD)),
    )
    .expect("a request with the renewed certificate");
    assert_eq!(status, 200);

    // The old connection keeps its session and is still served.
    assert_eq!(before.leaf(), first);
    let line = before.status_line("/-/healthy", &basic(USER, PASSWORD));
    assert!(line.contains(" 200 "), "{line}");

    let metrics = tls_metrics(&pki, &agent);
    assert_eq!(
        metrics.value("gpuwatch_tls_certificate_expiry_timestamp_seconds", &[]),
        Some(rcgen::date_time_ymd(2040, 1, 1).unix_timestamp() as f64)
    );
    assert!(
        metrics
            .value("gpuwatch_tls_reloads_total", &[("result", "success")])
            .is_some_and(|v| v >= 1.0),
        "{}",
        metrics.text
    );
    assert_eq!(
        metrics.value("gpuwatch_tls_last_reload_successful", &[]),
        Some(1.0)
    );
    let log = agent.log();
    assert!(log.contains("New TLS certificate in use"), "{log}");
    assert!(!log.contains(key.serialize_pem().lines().nth(1).expect("key body")));
}

#[test]
fn a_broken_renewal_keeps_the_old_certificate_and_warns_once() {
    let pki = Pki::new();
    let agent = start_with_auth(&pki, "  cert_file: server.crt\n  key_file: server.key\n");
    let old_pem = std::fs::read_to_string(pki.path("server.crt")).expect("read");
    let old_key = std::fs::read_to_string(pki.path("server.key")).expect("read");
    let first = der_of(&old_pem);
    let expiry =
        |m: &common::Metrics| m.value("gpuwatch_tls_certificate_expiry_timestamp_seconds", &[]);
    let old_expiry = expiry(&tls_metrics(&pki, &agent));
    assert!(old_expiry.is_some());

    // A renewal that stopped halfway: the new certificate, half its key.
    let (cert, key) = pki.renewed_server(2041);
    let key_pem = key.serialize_pem();
    pki.write("server.crt", &cert.pem());
    pki.write("server.key", &key_pem[..key_pem.len() / 2]);
    const WARNING: &str = "The TLS files changed but cannot be used";
    let deadline = Instant::now() + Duration::from_secs(30);
    while !agent.log().contains(WARNING) {
        assert!(
            Instant::now() < deadline,
            "no warning within 30 s\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Several more checks: still one warning, still the old certificate.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(served_leaf(&agent, &pki.ca_pem), first);
    let log = agent.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains(WARNING)).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    let key_file = pki.path("server.key").display().to_string();
    assert!(
        warnings[0].contains(&key_file) && warnings[0].contains("WARN"),
        "{}",
        warnings[0]
    );
    for secret in [&old_key, &key_pem] {
        for line in secret.lines().filter(|l| !l.starts_with("-----")) {
            assert!(!log.contains(line), "key material in the log: {log}");
        }
    }
    let metrics = tls_metrics(&pki, &agent);
    assert_eq!(expiry(&metrics), old_expiry, "the old certificate's expiry");
    assert_eq!(
        metrics.value("gpuwatch_tls_reloads_total", &[("result", "failure")]),
        Some(1.0)
    );
    assert_eq!(
        metrics.value("gpuwatch_tls_last_reload_successful", &[]),
        Some(0.0)
    );

    // Fixed: the new certificate is served.
    pki.write("server.key", &key_pem);
    wait_for_leaf(&agent, &pki.ca_pem, cert.der(), "the fixed renewal");
    let metrics = tls_metrics(&pki, &agent);
    assert_eq!(
        metrics.value("gpuwatch_tls_last_reload_successful", &[]),
        Some(1.0)
    );
    assert_eq!(
        expiry(&metrics),
        Some(rcgen::date_time_ymd(2041, 1, 1).unix_timestamp() as f64)
    );
    assert!(agent.log().contains("New TLS certificate in use"));
}

#[test]
fn a_rotated_client_ca_is_used_for_new_connections() {
    let pki = Pki::new();
    pki.write("client-ca.crt", &pki.ca_pem);
    let agent = start(
        &pki,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client-ca.crt\n",
    );
    let url = format!("{}/-/healthy", agent.url);
    let old_client = https_client(&pki, Some((&pki.client_pem, &pki.client_key)));
    let (status, _, _) = get(&old_client, &url, None).expect("a client of the first CA");
    assert_eq!(status, 200);

    // The clients' CA is replaced by a new one.
    let (new_ca, new_ca_key) = new_ca("gpuwatch test clients CA 2");
    let (client, client_key) = issue(
        &new_ca,
        &new_ca_key,
        vec!["scraper2.example".into()],
        ExtendedKeyUsagePurpose::ClientAuth,
        None,
    );
    let new_client = https_client(&pki, Some((&client.pem(), &client_key.serialize_pem())));
    assert!(get(&new_client, &url, None).is_err(), "not trusted yet");
    pki.write("client-ca.crt", &new_ca.pem());
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(&new_client, &url, None).map(|r| r.0) != Ok(200) {
        assert!(
            Instant::now() < deadline,
            "the new clients' CA was not used within 30 s\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let refused = get(
        &https_client(&pki, Some((&pki.client_pem, &pki.client_key))),
        &url,
        None,
    );
    assert!(
        refused.is_err(),
        "a client of the replaced CA got {refused:?}"
    );
    assert!(agent.log().contains("New TLS certificate in use"));
}
