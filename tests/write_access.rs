//! Who may change silences: anyone on the node itself (a loopback peer,
//! over IPv4 or IPv6) without credentials, which is how `gpuwatch silence`
//! reaches its agent; with basic auth configured, authenticated users
//! (from anywhere). A non-loopback peer cannot be had here (tests use
//! loopback only): the refusal (403) is unit-tested on the pure check in
//! `src/http/access.rs`.

mod common;

use common::{run_cli, Agent};
use gpuwatch::app::RunOptions;
use serde_json::{json, Value};

fn http() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// `method` on `url` with an optional Authorization header: (status, JSON).
fn call(
    method: &str,
    url: &str,
    body: Option<&Value>,
    authorization: Option<&str>,
) -> (u16, Value) {
    let http = http();
    let mut response = match (method, body) {
        ("POST", Some(body)) => {
            let mut request = http.post(url).header("Content-Type", "application/json");
            if let Some(a) = authorization {
                request = request.header("Authorization", a);
            }
            request.send(body.to_string())
        }
        ("DELETE", None) => {
            let mut request = http.delete(url);
            if let Some(a) = authorization {
                request = request.header("Authorization", a);
            }
            request.call()
        }
        _ => panic!("{method} with body {body:?} is not used here"),
    }
    .expect("request");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn silence() -> Value {
    json!({"matchers": ["alertname=GpuHot"], "duration": "1h", "createdBy": "test", "comment": "access"})
}

#[test]
fn loopback_peers_may_change_silences_without_credentials() {
    // IPv4: the CLI, as an operator on the node uses it (the agent runs
    // in-process; the CLI is the binary).
    let agent = Agent::in_process("demo", RunOptions::default(), &[]);
    let (code, out, err) = run_cli(
        &[
            "silence",
            "add",
            "--url",
            &agent.url,
            "--match",
            "alertname=GpuHot",
            "--duration",
            "1h",
            "--comment",
            "from the node",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let id = out.trim();
    assert!(id.parse::<i64>().is_ok(), "the id: {out}");
    let (code, _, err) = run_cli(&["silence", "expire", "--url", &agent.url, id], &[]);
    assert_eq!(code, 0, "{err}");
    let (status, answer) = call(
        "POST",
        &format!("{}/api/v1/silences", agent.url),
        Some(&silence()),
        None,
    );
    assert_eq!(status, 200, "{answer}");
    drop(agent);

    // IPv6 loopback (::1).
    let agent = Agent::start_on("[::1]:0", "demo", &[], &[]);
    assert!(agent.url.contains("[::1]"), "{}", agent.url);
    let url = format!("{}/api/v1/silences", agent.url);
    let (status, answer) = call("POST", &url, Some(&silence()), None);
    assert_eq!(status, 200, "{answer}");
    let id = answer["silenceID"].as_i64().expect("id");
    let (status, answer) = call("DELETE", &format!("{url}/{id}"), None, None);
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn with_basic_auth_authenticated_users_may_change_silences() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().expect("temp dir");
    let web = dir.path().join("web.yml");
    let hash = bcrypt::hash("s3cret", 4).expect("bcrypt");
    std::fs::write(&web, format!("basic_auth_users:\n  ops: {hash}\n")).expect("web config");
    let agent = Agent::in_process(
        "demo",
        RunOptions {
            web_config: Some(web.clone()),
            ..RunOptions::default()
        },
        &[],
    );
    let url = format!("{}/api/v1/silences", agent.url);
    let (status, _) = call("POST", &url, Some(&silence()), None);
    assert_eq!(status, 401, "basic auth comes first, even on loopback");
    let auth = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("ops:s3cret")
    );
    let (status, answer) = call("POST", &url, Some(&silence()), Some(&auth));
    assert_eq!(status, 200, "{answer}");
    let id = answer["silenceID"].as_i64().expect("id");
    let (status, answer) = call("DELETE", &format!("{url}/{id}"), None, Some(&auth));
    assert_eq!(status, 200, "{answer}");
}
