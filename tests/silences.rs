//! Silences, inhibition, routing and repeat notifications end to end: the
//! agent on the faults scenario (GPU 2 has Xid 94 at 30 s, GPU 3 an
//! uncorrected ECC error at 45 s, GPU 1 is lost with Xid 79 at 60 s) sends
//! to webhook receivers under the test's control; silences are managed
//! with the `gpuwatch silence` CLI and the HTTP API.

mod common;

use std::time::{Duration, Instant};

use common::{run_cli, Agent};
use serde_json::{json, Value};

const LONG: Duration = Duration::from_secs(40);

/// One notification a receiver got.
type Got = common::webhook::Received;

impl Got {
    fn alertnames(&self) -> Vec<String> {
        self.body["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| a["labels"]["alertname"].as_str().unwrap_or("").to_string())
            .collect()
    }

    fn is(&self, path: &str, alertname: &str, status: &str) -> bool {
        self.path == path
            && self.body["status"] == status
            && self.alertnames().iter().any(|a| a == alertname)
    }
}

/// A webhook server that answers 200 to everything and records it.
struct Hook {
    port: u16,
    sink: common::webhook::Sink,
}

impl Hook {
    fn start() -> Hook {
        let sink = common::webhook::Sink::start();
        Hook {
            port: sink.port,
            sink,
        }
    }

    fn got(&self) -> Vec<Got> {
        self.sink.received()
    }

    fn count(&self, path: &str, alertname: &str, status: &str) -> usize {
        self.got()
            .iter()
            .filter(|g| g.is(path, alertname, status))
            .count()
    }

    fn wait_for(&self, what: &str, timeout: Duration, check: impl Fn(&[Got]) -> bool) {
        let deadline = Instant::now() + timeout;
        while !check(&self.got()) {
            assert!(
                Instant::now() < deadline,
                "{what}: not within {timeout:?}; got: {:#?}",
                self.got()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn receiver(&self, name: &str, extra: &str) -> String {
        format!(
            "[[receivers]]\nname = \"{name}\"\ntype = \"webhook\"\nurl = \"http://127.0.0.1:{}/{name}\"\nretry_min = \"100ms\"\nretry_max = \"1s\"\n{extra}\n",
            self.port
        )
    }
}

fn write_config(dir: &std::path::Path, text: &str) -> String {
    let path = dir.join("gpuwatch.toml");
    std::fs::write(&path, text).expect("config");
    path.to_str().expect("utf-8").to_string()
}

fn alerts(agent: &Agent) -> Vec<Value> {
    let (status, body) = agent.get("/api/v1/alerts");
    assert_eq!(status, 200, "{body}");
    let value: Value = serde_json::from_str(&body).expect("JSON");
    value["alerts"].as_array().cloned().unwrap_or_default()
}

fn find(alerts: &[Value], alertname: &str, gpu: &str) -> Option<Value> {
    alerts
        .iter()
        .find(|a| a["alertname"] == alertname && a["labels"]["gpu"] == gpu)
        .cloned()
}

fn wait_alert(agent: &Agent, what: &str, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + LONG;
    loop {
        let list = alerts(agent);
        if check(&list) {
            return list;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {LONG:?}; alerts: {list:#?}\nlog:\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn firing(list: &[Value], alertname: &str, gpu: &str) -> bool {
    find(list, alertname, gpu).is_some_and(|a| a["state"] == "firing")
}

#[test]
fn a_silence_holds_back_notifications_until_it_is_expired_and_a_lost_gpu_inhibits_its_others() {
    let dir = tempfile::tempdir().expect("temp dir");
    let hook = Hook::start();
    let config = write_config(dir.path(), &hook.receiver("all", ""));
    // From 40 s at 2x: GPU 1 is lost (with Xid 79) about 10 s after start.
    let agent = Agent::start(
        "faults",
        &["--config", &config],
        &[("GPUWATCH_SIM_START", "40"), ("GPUWATCH_SIM_SPEED", "2")],
    );
    let url = agent.url.clone();
    let (code, out, err) = run_cli(
        &[
            "silence",
            "add",
            "--url",
            &url,
            "--match",
            "alertname=GpuLost",
            "--match",
            "gpu=~[0-9]+",
            "--duration",
            "1h",
            "--comment",
            "replacing the riser of GPU 1",
            "--author",
            "test",
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    let id = out.trim().to_string();
    assert!(id.parse::<i64>().is_ok(), "the id alone: {out}");
    let (code, out, err) = run_cli(&["silence", "list", "--url", &url], &[]);
    assert_eq!(code, 0, "{err}");
    for part in [
        id.as_str(),
        "active",
        "alertname=GpuLost, gpu=~[0-9]+",
        "test",
        "replacing the riser",
    ] {
        assert!(out.contains(part), "{part} in:\n{out}");
    }

    // The Xid 94 on GPU 2 is neither silenced nor inhibited: it goes out.
    hook.wait_for("GpuXidContained sent", LONG, |g| {
        g.iter().any(|g| g.is("/all", "GpuXidContained", "firing"))
    });
    let list = wait_alert(&agent, "GPU 1 lost, silenced", |l| {
        firing(l, "GpuLost", "1") && firing(l, "GpuXidFatal", "1")
    });
    let lost = find(&list, "GpuLost", "1").expect("GpuLost");
    assert_eq!(lost["silenced"], true, "{lost}");
    assert_eq!(lost["silenced_by"], json!([id.parse::<i64>().unwrap()]));
    assert_eq!(lost["inhibited"], false, "{lost}");
    let xid = find(&list, "GpuXidFatal", "1").expect("GpuXidFatal");
    assert_eq!(xid["inhibited"], true, "{xid}");
    let inhibitor = format!("GpuLost/{}", lost["labels"]["uuid"].as_str().unwrap());
    assert_eq!(xid["inhibited_by"], json!([inhibitor]));
    assert_eq!(xid["silenced"], false);
    let contained = find(&list, "GpuXidContained", "2").expect("GpuXidContained");
    assert_eq!(contained["silenced"], false);
    assert_eq!(contained["inhibited"], false);
    // Still in the metrics: muted alerts are evaluated and shown.
    let m = agent.metrics();
    assert_eq!(
        m.value(
            "gpuwatch_alerts",
            &[("alertname", "GpuLost"), ("gpu", "1"), ("state", "firing")]
        ),
        Some(1.0)
    );

    // A few evaluations later: still nothing for GPU 1.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(hook.count("/all", "GpuLost", "firing"), 0, "silenced");
    assert_eq!(hook.count("/all", "GpuXidFatal", "firing"), 0, "inhibited");

    let (code, out, err) = run_cli(&["silence", "expire", "--url", &url, &id], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("Silence {id} expired")), "{out}");
    hook.wait_for("GpuLost sent once the silence expired", LONG, |g| {
        g.iter().any(|g| g.is("/all", "GpuLost", "firing"))
    });
    let list = alerts(&agent);
    assert_eq!(
        find(&list, "GpuLost", "1").expect("GpuLost")["silenced"],
        false
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(hook.count("/all", "GpuLost", "firing"), 1, "once");
    assert_eq!(
        hook.count("/all", "GpuXidFatal", "firing"),
        0,
        "still inhibited while GPU 1 is lost"
    );

    let (code, out, _) = run_cli(&["silence", "list", "--url", &url], &[]);
    assert_eq!(code, 0);
    assert!(out.contains("no active or pending silences"), "{out}");
    let (code, out, _) = run_cli(
        &[
            "silence", "list", "--url", &url, "--all", "--format", "json",
        ],
        &[],
    );
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(listed["silences"][0]["status"]["state"], "expired", "{out}");
    assert_eq!(
        listed["silences"][0]["comment"],
        "replacing the riser of GPU 1"
    );
    let log = agent.log();
    assert!(log.contains("Silence added."), "{log}");
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

#[test]
fn the_silences_api_checks_what_it_is_given_and_sits_behind_basic_auth() {
    let dir = tempfile::tempdir().expect("temp dir");
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        format!(
            "basic_auth_users:\n  ops: {}\n",
            bcrypt::hash("s3cret", 4).expect("bcrypt")
        ),
    )
    .expect("web config");
    let agent = Agent::start(
        "faults",
        &["--web-config", web.to_str().expect("utf-8")],
        &[],
    );
    let http: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("{}/api/v1/silences", agent.url);
    let auth = basic("ops", "s3cret");
    let post = |body: &str, authorization: Option<&str>| -> (u16, Value) {
        let mut request = http.post(&url).header("Content-Type", "application/json");
        if let Some(a) = authorization {
            request = request.header("Authorization", a);
        }
        let mut response = request.send(body.to_string()).expect("POST");
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    };
    let good = json!({
        "matchers": [{"name": "alertname", "value": "GpuHot"}, "gpu=0"],
        "duration": "2h",
        "createdBy": "api-test",
        "comment": "maintenance",
    });
    // No credentials: 401, nothing stored.
    let (status, _) = post(&good.to_string(), None);
    assert_eq!(status, 401);

    let cases = [
        (
            json!({"duration": "2h", "createdBy": "a", "comment": "c"}),
            "matchers",
        ),
        (
            json!({"matchers": ["gpu=0", "gpu=~("], "duration": "2h", "createdBy": "a", "comment": "c"}),
            "matchers[1]",
        ),
        (
            json!({"matchers": ["gpu=0"], "duration": "soon", "createdBy": "a", "comment": "c"}),
            "duration",
        ),
        (
            json!({"matchers": ["gpu=0"], "endsAt": "2001-01-01T00:00:00Z", "createdBy": "a", "comment": "c"}),
            "endsAt",
        ),
        (
            json!({"matchers": ["gpu=0"], "duration": "2h", "comment": "c"}),
            "createdBy",
        ),
        (
            json!({"matchers": ["gpu=0"], "duration": "2h", "createdBy": "a", "coment": "c"}),
            "coment",
        ),
    ];
    for (body, field) in cases {
        let (status, answer) = post(&body.to_string(), Some(&auth));
        assert_eq!(status, 400, "{body} → {answer}");
        assert_eq!(answer["field"], field, "{body} → {answer}");
        assert!(
            answer["error"]
                .as_str()
                .is_some_and(|e| e.starts_with(&format!("{field}: "))),
            "{answer}"
        );
    }
    let (status, answer) = post("{not json", Some(&auth));
    assert_eq!((status, answer["field"].as_str()), (400, Some("body")));

    let (status, answer) = post(&good.to_string(), Some(&auth));
    assert_eq!(status, 200, "{answer}");
    let id = answer["silenceID"].as_i64().expect("id");
    let get = |path: &str| -> (u16, Value) {
        let mut response = http
            .get(&format!("{}{path}", agent.url))
            .header("Authorization", &auth)
            .call()
            .expect("GET");
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    };
    let (status, one) = get(&format!("/api/v1/silences/{id}"));
    assert_eq!(status, 200);
    assert_eq!(one["status"]["state"], "active");
    assert_eq!(one["createdBy"], "api-test");
    assert_eq!(
        one["matchers"],
        json!([
            {"name": "alertname", "value": "GpuHot", "isRegex": false, "isEqual": true},
            {"name": "gpu", "value": "0", "isRegex": false, "isEqual": true},
        ])
    );
    let (status, all) = get("/api/v1/silences");
    assert_eq!(status, 200);
    assert_eq!(all["silences"].as_array().map(Vec::len), Some(1));

    // The CLI, with the password from the environment.
    let (code, out, err) = run_cli(
        &["silence", "list", "--url", &agent.url, "--user", "ops"],
        &[("GPUWATCH_PASSWORD", "s3cret")],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("alertname=GpuHot, gpu=0"), "{out}");
    let (code, _, err) = run_cli(&["silence", "list", "--url", &agent.url], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("asks for basic auth"), "{err}");
    let (code, _, err) = run_cli(
        &[
            "silence",
            "add",
            "--url",
            &agent.url,
            "--user",
            "ops",
            "--match",
            "gpu=~(",
            "--duration",
            "1h",
            "--comment",
            "x",
        ],
        &[("GPUWATCH_PASSWORD", "s3cret")],
    );
    assert_eq!(code, 1);
    assert!(err.contains("--match"), "{err}");

    // Expire: 200 with the silence, now expired; unknown ids are 404.
    let delete = |path: &str| -> u16 {
        http.delete(&format!("{}{path}", agent.url))
            .header("Authorization", &auth)
            .call()
            .expect("DELETE")
            .status()
            .as_u16()
    };
    assert_eq!(delete(&format!("/api/v1/silences/{id}")), 200);
    assert_eq!(
        get(&format!("/api/v1/silences/{id}")).1["status"]["state"],
        "expired"
    );
    assert_eq!(delete("/api/v1/silences/999"), 404);
    assert_eq!(delete("/api/v1/silences/abc"), 400);
    assert_eq!(delete("/api/v1/silences"), 405);
}

#[test]
fn routes_pick_receivers_repeats_survive_a_restart_and_history_is_listed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let hook = Hook::start();
    let config = write_config(
        dir.path(),
        &format!(
            "{}{}",
            hook.receiver(
                "pager",
                "severities = [\"critical\"]\nmatch = { alertname = \"GpuLost\" }"
            ),
            hook.receiver(
                "all",
                "repeat_interval = \"3s\"\nmatch_re = { gpu = \"[12]\" }"
            ),
        ),
    );
    let (code, out, _) = run_cli(&["validate", "--config", &config], &[]);
    assert_eq!(code, 0, "{out}");
    let db = dir.path().join("history.db");
    let db_arg = db.to_str().expect("utf-8");
    let start = |from: &'static str| {
        Agent::start(
            "faults",
            &["--config", &config, "--history-db", db_arg],
            &[("GPUWATCH_SIM_START", from), ("GPUWATCH_SIM_SPEED", "5")],
        )
    };
    let agent = start("55");
    hook.wait_for("GpuLost to both receivers", LONG, |g| {
        g.iter().any(|g| g.is("/pager", "GpuLost", "firing"))
            && g.iter().any(|g| g.is("/all", "GpuLost", "firing"))
    });
    // "all" repeats GpuXidContained (GPU 2) every 3 s.
    hook.wait_for("a repeat", LONG, |g| {
        g.iter()
            .filter(|g| g.is("/all", "GpuXidContained", "firing"))
            .count()
            >= 2
    });
    let repeats: Vec<Instant> = hook
        .got()
        .iter()
        .filter(|g| g.is("/all", "GpuXidContained", "firing"))
        .map(|g| g.at)
        .collect();
    let gap = repeats[1] - repeats[0];
    assert!(
        gap >= Duration::from_millis(2500) && gap < Duration::from_secs(20),
        "repeated after {gap:?}"
    );
    // Routing: the pager got GpuLost only; "all" only GPUs 1 and 2.
    for g in hook.got() {
        if g.path == "/pager" {
            assert_eq!(g.alertnames(), vec!["GpuLost"], "{:#?}", g.body);
        } else {
            let gpu = g.body["alerts"][0]["labels"]["gpu"].as_str().unwrap_or("");
            assert!(gpu == "1" || gpu == "2", "{:#?}", g.body);
        }
    }

    // kill -9, restart on the same database: the pager (repeat every 4h)
    // is not told again; "all" keeps repeating.
    drop(agent);
    let before = hook.count("/all", "GpuXidContained", "firing");
    let agent = start("70");
    hook.wait_for("repeats after the restart", LONG, |g| {
        g.iter()
            .filter(|g| g.is("/all", "GpuXidContained", "firing"))
            .count()
            > before
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        hook.count("/pager", "GpuLost", "firing"),
        1,
        "{:#?}",
        hook.got()
    );

    // History: the endpoint and `gpuwatch alerts`.
    let (status, body) = agent.get("/api/v1/alerts/history?from=-1h&alertname=GpuLost");
    assert_eq!(status, 200, "{body}");
    let history: Value = serde_json::from_str(&body).expect("JSON");
    let changes: Vec<(String, String)> = history["transitions"]
        .as_array()
        .expect("transitions")
        .iter()
        .map(|t| {
            assert_eq!(t["alertname"], "GpuLost");
            assert_eq!(t["gpu"], "1");
            (
                t["from"].as_str().unwrap_or("").to_string(),
                t["to"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(changes, vec![("inactive".into(), "firing".into())]);
    let (status, body) = agent.get("/api/v1/alerts/history?from=yesterday");
    assert_eq!(status, 400);
    assert!(body.contains("\"parameter\":\"from\""), "{body}");

    let (code, out, err) = run_cli(&["alerts", "--db", db_arg, "--format", "json"], &[]);
    assert_eq!(code, 0, "{err}");
    let listed: Value = serde_json::from_str(&out).expect("JSON");
    let active = listed["alerts"].as_array().expect("alerts");
    assert!(
        active
            .iter()
            .any(|a| a["alertname"] == "GpuLost" && a["state"] == "firing"),
        "{out}"
    );
    assert!(
        listed["transitions"]
            .as_array()
            .expect("transitions")
            .iter()
            .any(|t| t["alertname"] == "GpuXidContained" && t["to"] == "firing"),
        "{out}"
    );
    let (code, out, err) = run_cli(&["alerts", "--db", db_arg, "--gpu", "1"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("GpuLost") && out.contains("inactive → firing"),
        "{out}"
    );
    assert!(out.contains("inhibited by GpuLost/"), "{out}");
    assert!(!out.contains("GpuXidContained"), "only GPU 1: {out}");
    drop(agent);
}

#[test]
fn a_group_wait_sends_the_alerts_that_fire_together_in_one_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let hook = Hook::start();
    // Only the alerts: acting on health (dry-run by default) would add its
    // own GpuNodeDrained message for the lost GPU, which is not grouped.
    let config = write_config(
        dir.path(),
        &format!(
            "{}{}[remediation]\nmode = \"off\"\n",
            hook.receiver("grouped", "group_wait = \"4s\""),
            hook.receiver("direct", "")
        ),
    );
    // From 55 s at 5x: GPU 2's Xid 94 and GPU 3's pending row remap fire at the
    // first evaluation, GPU 1 is lost about a second later.
    let agent = Agent::start(
        "faults",
        &["--config", &config],
        &[("GPUWATCH_SIM_START", "55"), ("GPUWATCH_SIM_SPEED", "5")],
    );
    hook.wait_for("the direct receiver's GpuLost", LONG, |g| {
        g.iter().any(|g| g.is("/direct", "GpuLost", "firing"))
    });
    hook.wait_for("the grouped message", LONG, |g| {
        g.iter().any(|g| g.path == "/grouped")
    });
    std::thread::sleep(Duration::from_secs(2));
    let grouped: Vec<Got> = hook
        .got()
        .into_iter()
        .filter(|g| g.path == "/grouped")
        .collect();
    assert_eq!(grouped.len(), 1, "one message: {grouped:#?}");
    let names = grouped[0].alertnames();
    for name in ["GpuLost", "GpuXidContained", "GpuRowRemapPending"] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    let body = &grouped[0].body;
    assert_eq!(body["status"], "firing");
    assert_eq!(body["groupLabels"].as_object().map(|o| o.len()), Some(1));
    assert!(body["commonLabels"]["host"].is_string(), "{body}");
    // The direct receiver got each alert in a message of its own, earlier.
    let direct: Vec<Got> = hook
        .got()
        .into_iter()
        .filter(|g| g.path == "/direct")
        .collect();
    assert!(direct.iter().all(|g| g.alertnames().len() == 1));
    assert_eq!(direct.len(), names.len(), "the same alerts: {direct:#?}");
    let first_direct = direct.iter().map(|g| g.at).min().expect("direct");
    assert!(
        grouped[0].at - first_direct >= Duration::from_secs(3),
        "held for the group wait"
    );
    drop(agent);
}
