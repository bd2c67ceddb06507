//! History end to end: the real agent records into SQLite, the HTTP API and
//! the CLI read it back (while the agent runs and after it stopped), a kill -9
//! loses at most the last batch, and a bad file at the database path is
//! refused, kept, and can be moved aside.

mod common;

use std::time::Duration;

use common::{run_cli, Agent};

const LONG: Duration = Duration::from_secs(30);

fn config(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("gpuwatch.toml");
    std::fs::write(
        &path,
        "[sampler]\ninterval = \"250ms\"\n[history]\nbatch_interval = \"1s\"\n",
    )
    .expect("config");
    path.display().to_string()
}

fn json(agent: &Agent, path: &str) -> (u16, serde_json::Value) {
    let (status, body) = agent.get(path);
    (
        status,
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}")),
    )
}

fn wait_points(agent: &Agent, at_least: usize) -> serde_json::Value {
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let (status, body) = json(
            agent,
            "/api/v1/history?gpu=0&metric=temperature&from=-10m&step=1s",
        );
        if status == 200 && body["points"].as_array().map_or(0, Vec::len) >= at_least {
            return body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "history never had {at_least} points: {body}\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn history_is_recorded_queried_and_survives_kill_9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = config(&dir);
    let db = dir.path().join("history.db");
    let db_arg = db.to_str().expect("utf-8").to_string();
    let frozen = [("GPUWATCH_SIM_TIME", "10")];
    let agent = Agent::start(
        "golden",
        &["--config", &cfg, "--history-db", &db_arg],
        &frozen,
    );

    let body = wait_points(&agent, 3);
    assert_eq!(body["tier"], "raw");
    assert_eq!(body["unit"], "celsius");
    assert_eq!(body["gpu"]["name"], "NVIDIA A100-SXM4-40GB");
    assert!(
        body["points"]
            .as_array()
            .expect("points")
            .iter()
            .all(|p| p["avg"] == 60.0),
        "{body}"
    );

    for (query, parameter) in [
        ("metric=nope&gpu=0", "metric"),
        ("gpu=0", "metric"),
        ("metric=temperature", "gpu"),
        ("metric=temperature&gpu=9", "gpu"),
        ("metric=temperature&gpu=0&from=yesterday-ish", "from"),
        ("metric=temperature&gpu=0&to=soon", "to"),
        ("metric=temperature&gpu=0&step=10ms", "step"),
        ("metric=temperature&gpu=0&from=-1d&step=1s", "step"),
        ("metric=temperature&gpu=0&from=now&to=-1h", "from"),
        (
            "metric=temperature%27%3B%20DROP%20TABLE%20sample%3B--&gpu=0",
            "metric",
        ),
    ] {
        let (status, body) = json(&agent, &format!("/api/v1/history?{query}"));
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["parameter"], parameter, "{query}: {body}");
        assert!(
            body["error"].as_str().is_some_and(|e| e.len() > 10),
            "{body}"
        );
    }

    let deadline = std::time::Instant::now() + LONG;
    let events = loop {
        let (status, body) = json(&agent, "/api/v1/events?from=-1h");
        assert_eq!(status, 200, "{body}");
        let kinds: Vec<String> = body["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| e["kind"].as_str().unwrap_or("").to_string())
            .collect();
        if kinds.iter().any(|k| k == "xid") {
            break body;
        }
        assert!(std::time::Instant::now() < deadline, "no xid event: {body}");
        std::thread::sleep(Duration::from_millis(250));
    };
    let list = events["events"].as_array().expect("events");
    assert_eq!(list[0]["kind"], "agent_start");
    assert!(
        list.iter()
            .any(|e| e["kind"] == "process_start" && e["code"] == 4242 && e["value"] == 10240),
        "{events}"
    );
    assert!(
        list.iter()
            .any(|e| e["kind"] == "xid" && e["code"] == 13 && e["gpu"] == 0),
        "{events}"
    );
    assert_eq!(json(&agent, "/api/v1/events?limit=0").0, 400);

    // The CLI reads the same file while the agent writes it.
    let (code, csv, stderr) = run_cli(
        &[
            "history",
            "--db",
            &db_arg,
            "--gpu",
            "0",
            "--metric",
            "temperature",
            "--since",
            "10m",
            "--step",
            "1s",
            "--format",
            "csv",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(csv.starts_with("time,avg,min,max,last\n"), "{csv}");
    assert!(
        csv.lines().skip(1).all(|l| l.ends_with(",60,60,60,60")),
        "{csv}"
    );
    let (code, table, stderr) = run_cli(
        &[
            "history",
            "--db",
            &db_arg,
            "--gpu",
            "GPU-00000000-0000-4000-8000-000000000000",
            "--metric",
            "power",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        table.contains("power [watts]") && table.contains('▄'),
        "a flat sparkline: {table}"
    );

    // kill -9, then a restart on the same file.
    let samples_before = count_samples(&db_arg);
    drop(agent);
    let agent = Agent::start(
        "golden",
        &["--config", &cfg, "--history-db", &db_arg],
        &frozen,
    );
    agent.wait_ready(200, LONG);
    let deadline = std::time::Instant::now() + LONG;
    while count_samples(&db_arg) <= samples_before {
        assert!(
            std::time::Instant::now() < deadline,
            "no new samples after the restart\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let status = agent.terminate();
    assert!(status.success(), "{status:?}");
    // Stopped: the CLI still reads everything, and the file is sound.
    let (code, out, stderr) = run_cli(
        &[
            "events",
            "--db",
            &db_arg,
            "--since",
            "1h",
            "--kind",
            "agent_start",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(out.matches("agent_start").count(), 2, "two runs: {out}");
    // Events are rows, not a series: CSV is refused rather than ignored.
    let (code, _, stderr) = run_cli(&["events", "--db", &db_arg, "--format", "csv"], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("possible values: table, json"), "{stderr}");
    let integrity = std::process::Command::new("sqlite3")
        .arg(&db_arg)
        .arg("PRAGMA integrity_check;")
        .output();
    if let Ok(integrity) = integrity {
        assert_eq!(String::from_utf8_lossy(&integrity.stdout).trim(), "ok");
    }
}

fn count_samples(db: &str) -> i64 {
    let (code, out, stderr) = run_cli(
        &[
            "history",
            "--db",
            db,
            "--gpu",
            "1",
            "--metric",
            "utilization",
            "--since",
            "1h",
            "--step",
            "1s",
            "--format",
            "json",
        ],
        &[],
    );
    if code != 0 {
        assert!(stderr.contains("no such GPU"), "{stderr}");
        return 0;
    }
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    v["points"].as_array().map_or(0, |p| p.len() as i64)
}

#[test]
fn a_bad_file_at_the_database_path_is_refused_kept_and_can_be_moved_aside() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let notes = b"meeting notes, not a database\n".repeat(100);
    std::fs::write(&db, &notes).expect("write");
    let db_arg = db.to_str().expect("utf-8");
    let (code, _, stderr) = run_cli(
        &[
            "run",
            "--simulate",
            "--listen",
            "127.0.0.1:0",
            "--history-db",
            db_arg,
        ],
        &[],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(db_arg) && stderr.contains("not a gpuwatch history database"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--reset-history"),
        "says what to do: {stderr}"
    );
    assert_eq!(
        std::fs::read(&db).expect("kept"),
        notes,
        "never deleted or changed"
    );

    let agent = Agent::start(
        "golden",
        &["--history-db", db_arg, "--reset-history"],
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    agent.wait_ready(200, LONG);
    let moved: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("history.db.moved-")
        })
        .collect();
    assert_eq!(moved.len(), 1, "moved aside");
    assert_eq!(std::fs::read(moved[0].path()).expect("moved file"), notes);
    assert!(
        agent.log().contains("Moved the history database aside"),
        "{}",
        agent.log()
    );
}

#[test]
fn history_can_be_disabled() {
    let agent = Agent::start("golden", &["--no-history"], &[("GPUWATCH_SIM_TIME", "10")]);
    agent.wait_ready(200, LONG);
    let (status, body) = agent.get("/api/v1/history?gpu=0&metric=temperature");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("history is disabled"), "{body}");
    assert!(!agent.metrics().has("gpuwatch_history_rows_written_total"));
    assert!(!agent.history.exists());
}
