//! Times, durations, counts and silences from outside, end to end: values
//! outside their range are refused with a 400 (or a CLI error) naming the
//! parameter and the range, never a panic or a wrapped value; silences are
//! held to their limits; and rows an older version stored (a silence ending
//! past 9999, a 60 KB regex) neither break the silence API nor get loaded.

mod common;

use common::{run_cli, Agent};
use serde_json::{json, Value};

fn get_json(agent: &Agent, path: &str) -> (u16, Value) {
    let (status, body) = agent.get(path);
    (
        status,
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}")),
    )
}

fn http() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

fn post(http: &ureq::Agent, agent: &Agent, body: &Value) -> (u16, Value) {
    let mut response = http
        .post(&format!("{}/api/v1/silences", agent.url))
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .expect("POST");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[test]
fn out_of_range_times_steps_and_counts_are_refused_naming_the_parameter() {
    let agent = Agent::start("golden", &[], &[]);
    for (path, parameter, says) in [
        // Used to divide by zero (the step truncated to 0 ms).
        (
            "/api/v1/history?gpu=0&metric=temperature&step=18446744073709551s%20616ms",
            "step",
            "1s to 1year",
        ),
        (
            "/api/v1/history?gpu=0&metric=temperature&step=2y",
            "step",
            "1s to 1year",
        ),
        // Used to wrap to a time before 1970.
        (
            "/api/v1/history?gpu=0&metric=temperature&from=-99999999999y",
            "from",
            "1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z",
        ),
        (
            "/api/v1/history?gpu=0&metric=temperature&to=253402300800",
            "to",
            "9999-12-31T23:59:59Z",
        ),
        (
            "/api/v1/events?from=-99999999999y",
            "from",
            "1970-01-01T00:00:00Z",
        ),
        ("/api/v1/events?limit=abc", "limit", "1 to 100000"),
        ("/api/v1/events?limit=100001", "limit", "1 to 100000"),
        // Used to overflow on `to + 1`.
        (
            "/api/v1/alerts/history?to=9223372036854775807",
            "to",
            "9999-12-31T23:59:59Z",
        ),
        (
            "/api/v1/alerts/history?limit=99999999999999999999",
            "limit",
            "1 to 10000",
        ),
    ] {
        let (status, body) = get_json(&agent, path);
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(body["parameter"], parameter, "{path}: {body}");
        let error = body["error"].as_str().unwrap_or("");
        assert!(
            error.starts_with(&format!("{parameter}: ")),
            "{path}: {body}"
        );
        assert!(error.contains(says), "{path}: {body}");
    }
    // A long hostile value is not echoed whole.
    let long = "9".repeat(2_000);
    let (status, body) = get_json(&agent, &format!("/api/v1/events?from={long}"));
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap_or("").len() < 300, "{body}");
    // Nothing panicked: the agent still answers.
    assert_eq!(agent.get("/-/healthy").0, 200);
    assert!(!agent.log().contains("panicked"), "{}", agent.log());

    // The CLI: an error naming the flag and exit 1, not a panic (101).
    for (args, flag) in [
        (
            vec![
                "history",
                "--gpu",
                "0",
                "--metric",
                "temperature",
                "--step",
                "18446744073709551s 616ms",
            ],
            "--step",
        ),
        (vec!["events", "--since=-99999999999y"], "--since"),
        (vec!["alerts", "--until", "9223372036854775807"], "--until"),
        (
            vec![
                "silence",
                "add",
                "--url",
                "http://127.0.0.1:9",
                "--match",
                "alertname=X",
                "--duration",
                "10000y",
                "--comment",
                "c",
            ],
            "--duration",
        ),
        (
            vec![
                "silence",
                "add",
                "--url",
                "http://127.0.0.1:9",
                "--match",
                "alertname=X",
                "--start",
                "9999-12-31T23:00:00Z",
                "--duration",
                "2h",
                "--comment",
                "c",
            ],
            "--duration",
        ),
    ] {
        let (code, _, stderr) = run_cli(&args, &[]);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        // Checked before anything is read or asked.
        assert!(!stderr.contains("cannot reach"), "{args:?}: {stderr}");
    }
}

/// Writes silence rows as an older gpuwatch could have, into a stopped
/// agent's database.
fn insert_old_rows(db: &std::path::Path) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let options = sqlx::sqlite::SqliteConnectOptions::new().filename(db);
        let pool = sqlx::SqlitePool::connect_with(options)
            .await
            .expect("open the database");
        let plain = r#"[{"name":"alertname","value":"OldFar","isRegex":false,"isEqual":true}]"#;
        let huge = format!(
            r#"[{{"name":"alertname","value":"{}","isRegex":true,"isEqual":true}}]"#,
            "a|".repeat(30_000)
        );
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis() as i64;
        for (matchers, ends_ms) in [
            // `duration: "10000y"`, as the old version stored it.
            (plain.to_string(), 315_537_897_600_000_i64),
            (huge, now_ms + 3_600_000),
        ] {
            sqlx::query(
                "INSERT INTO silence (matchers, starts_ms, ends_ms, created_by, comment, created_ms, updated_ms) \
                 VALUES (?, ?, ?, 'old', 'old version', ?, ?)",
            )
            .bind(matchers)
            .bind(now_ms)
            .bind(ends_ms)
            .bind(now_ms)
            .bind(now_ms)
            .execute(&pool)
            .await
            .expect("insert");
        }
        pool.close().await;
    });
}

#[test]
fn silences_past_9999_or_past_the_limits_are_refused_and_old_rows_still_list() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let db_arg = db.to_str().expect("utf-8");
    let agent = Agent::start("faults", &["--history-db", db_arg], &[]);
    let http = http();
    let base = json!({"matchers": ["alertname=X"], "createdBy": "a", "comment": "b"});
    let with = |pairs: &[(&str, Value)]| {
        let mut body = base.clone();
        for (key, value) in pairs {
            body[*key] = value.clone();
        }
        body
    };
    for (body, field, says) in [
        (
            with(&[("duration", json!("10000y"))]),
            "duration",
            "1s to 1year",
        ),
        (
            with(&[
                ("startsAt", json!("9999-12-31T23:00:00Z")),
                ("duration", json!("2h")),
            ]),
            "duration",
            "9999-12-31T23:59:59Z",
        ),
        (
            with(&[
                (
                    "matchers",
                    json!([format!("alertname=~{}", "a|".repeat(30_000))]),
                ),
                ("duration", json!("1h")),
            ]),
            "matchers[0]",
            "at most 1024 (1 KiB)",
        ),
        (
            with(&[
                ("matchers", json!(["alertname=X", r"gpu=~\w{500}"])),
                ("duration", json!("1h")),
            ]),
            "matchers[1]",
            "64 KiB",
        ),
    ] {
        let (status, answer) = post(&http, &agent, &body);
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["field"], field, "{answer}");
        assert!(
            answer["error"].as_str().unwrap_or("").contains(says),
            "{answer}"
        );
    }
    let (status, list) = get_json(&agent, "/api/v1/silences");
    assert_eq!(
        (status, list["silences"].as_array().map(Vec::len)),
        (200, Some(0))
    );
    assert_eq!(agent.terminate().code(), Some(0));

    // Rows an older version stored: the listing answers, the 60 KB regex is
    // skipped with a warning, the far end is shown clamped.
    insert_old_rows(&db);
    let agent = Agent::start("faults", &["--history-db", db_arg], &[]);
    let (status, list) = get_json(&agent, "/api/v1/silences");
    assert_eq!(status, 200, "{list}");
    let silences = list["silences"].as_array().expect("silences");
    assert_eq!(silences.len(), 1, "{list}");
    assert_eq!(silences[0]["endsAt"], "9999-12-31T23:59:59.999Z");
    let id = silences[0]["id"].as_i64().expect("id");
    let (status, one) = get_json(&agent, &format!("/api/v1/silences/{id}"));
    assert_eq!(
        (status, &one["endsAt"]),
        (200, &json!("9999-12-31T23:59:59.999Z"))
    );
    assert!(
        agent.log().contains("A stored silence is skipped"),
        "{}",
        agent.log()
    );
    let (code, out, err) = run_cli(&["silence", "list", "--url", &agent.url], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("alertname=OldFar") && out.contains("9999-12-31"),
        "{out}"
    );

    // The 1 001st active silence is refused (one is the old row).
    for i in 1..1000 {
        let (status, answer) = post(
            &http,
            &agent,
            &with(&[
                ("matchers", json!([format!("alertname=T{i}")])),
                ("duration", json!("1h")),
            ]),
        );
        assert_eq!(status, 200, "silence {i}: {answer}");
    }
    let (status, answer) = post(&http, &agent, &with(&[("duration", json!("1h"))]));
    assert_eq!(status, 409, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap_or("")
            .contains("1000 active or pending silences, the most allowed (1000)"),
        "{answer}"
    );
    let (code, _, err) = run_cli(
        &[
            "silence",
            "add",
            "--url",
            &agent.url,
            "--match",
            "alertname=Y",
            "--duration",
            "1h",
            "--comment",
            "c",
        ],
        &[],
    );
    assert_eq!(code, 1);
    assert!(err.contains("409") && err.contains("(1000)"), "{err}");
    // Expiring one makes room.
    let deleted = http
        .delete(&format!("{}/api/v1/silences/{id}", agent.url))
        .call()
        .expect("DELETE")
        .status()
        .as_u16();
    assert_eq!(deleted, 200);
    let (status, answer) = post(&http, &agent, &with(&[("duration", json!("1h"))]));
    assert_eq!(status, 200, "{answer}");
}
