//! History end to end: the real agent records into SQLite, the HTTP API and
//! the CLI read it back (while the agent runs and after it stopped), a kill -9
//! loses at most the last batch; a file that is not gpuwatch's is refused
//! byte for byte untouched (and never reset), a damaged or newer history can
//! be moved aside; storage that fails at start leaves /metrics up and
//! history attaches when it returns.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{run_cli, Agent};
use gpuwatch::history::{Durability, Store};

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
    // Debian's sqlite3 (installed by scripts/test.sh) checks the file
    // independently of gpuwatch's own SQLite.
    let integrity = std::process::Command::new("sqlite3")
        .arg(&db_arg)
        .arg("PRAGMA integrity_check;")
        .output()
        .expect("sqlite3 runs (apt-get install sqlite3; scripts/test.sh installs it)");
    assert_eq!(String::from_utf8_lossy(&integrity.stdout).trim(), "ok");
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

/// `gpuwatch run --simulate --history-db DB EXTRA...` to completion:
/// (exit code, stderr).
fn run_on(db: &Path, extra: &[&str]) -> (i32, String) {
    let db = db.to_str().expect("utf-8");
    let mut args = vec![
        "run",
        "--simulate",
        "--listen",
        "127.0.0.1:0",
        "--history-db",
        db,
    ];
    args.extend_from_slice(extra);
    let (code, _, stderr) = run_cli(&args, &[]);
    (code, stderr)
}

/// Names in `dir` that start with `prefix`.
fn names_starting(dir: &Path, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    names
}

#[test]
fn a_text_file_at_the_database_path_is_refused_and_never_moved_or_replaced() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("passwd");
    let text = b"root:x:0:0:root:/root:/bin/bash\n".repeat(20);
    std::fs::write(&db, &text).expect("write");
    for extra in [&[][..], &["--reset-history"][..]] {
        let (code, stderr) = run_on(&db, extra);
        assert_eq!(code, 1, "{extra:?}: {stderr}");
        assert!(
            stderr.contains(db.to_str().expect("utf-8"))
                && stderr.contains("not a gpuwatch history database")
                && stderr.contains("left untouched")
                && stderr.contains("another file"),
            "{stderr}"
        );
        assert!(
            !stderr.contains("--reset-history"),
            "no reset offered for a file that is not gpuwatch's: {stderr}"
        );
        assert_eq!(std::fs::read(&db).expect("kept"), text, "never changed");
        assert_eq!(names_starting(dir.path(), ""), ["passwd"], "never moved");
    }
}

#[test]
fn another_programs_sqlite_database_is_refused_byte_for_byte_untouched() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("app.db");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(
                sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(&db)
                    .create_if_missing(true),
            )
            .await
            .expect("the other program's database");
        sqlx::raw_sql("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices (total) VALUES (12.5);")
            .execute(&pool)
            .await
            .expect("its table");
        pool.close().await;
    });
    let bytes = std::fs::read(&db).expect("read");
    for extra in [&[][..], &["--reset-history"][..]] {
        let (code, stderr) = run_on(&db, extra);
        assert_eq!(code, 1, "{extra:?}: {stderr}");
        assert!(
            stderr.contains("another application's SQLite database")
                && stderr.contains("invoices")
                && stderr.contains("left untouched"),
            "{stderr}"
        );
        assert!(!stderr.contains("--reset-history"), "{stderr}");
        assert_eq!(
            std::fs::read(&db).expect("kept"),
            bytes,
            "every byte the same (the journal-mode bytes 18-19 too)"
        );
        assert_eq!(
            names_starting(dir.path(), ""),
            ["app.db"],
            "no -wal, -shm or move"
        );
    }
}

#[test]
fn a_damaged_or_newer_history_is_refused_with_the_reset_hint_and_reset_moves_it_aside() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let damaged = dir.path().join("damaged.db");
    let newer = dir.path().join("newer.db");
    runtime.block_on(async {
        for path in [&damaged, &newer] {
            let store = Store::open_for_writing(path, Durability::Normal)
                .await
                .expect("a history");
            if path == &newer {
                sqlx::query("INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) VALUES (99999999999999, 'from the future', 1, x'00', 0)")
                    .execute(&store.pool)
                    .await
                    .expect("a migration from the future");
            }
            store.pool.close().await;
        }
    });
    let mut bytes = std::fs::read(&damaged).expect("read");
    bytes[100..1024].fill(0xA5); // the schema page, after SQLite's header
    std::fs::write(&damaged, &bytes).expect("damage");

    for (db, says) in [(&damaged, "damaged"), (&newer, "newer gpuwatch")] {
        let before = std::fs::read(db).expect("read");
        let (code, stderr) = run_on(db, &[]);
        assert_eq!(code, 1, "{stderr}");
        assert!(
            stderr.contains(says) && stderr.contains("--reset-history"),
            "{stderr}"
        );
        assert_eq!(std::fs::read(db).expect("kept"), before, "left untouched");

        let db_arg = db.to_str().expect("utf-8");
        let agent = Agent::start(
            "golden",
            &["--history-db", db_arg, "--reset-history"],
            &[("GPUWATCH_SIM_TIME", "10")],
        );
        agent.wait_ready(200, LONG);
        assert!(
            agent.log().contains("Moved the history database aside"),
            "{}",
            agent.log()
        );
        let name = db.file_name().expect("name").to_string_lossy().into_owned();
        let moved = names_starting(dir.path(), &format!("{name}.moved-"));
        assert_eq!(moved.len(), 1, "{moved:?}");
        assert_eq!(
            std::fs::read(dir.path().join(&moved[0])).expect("moved"),
            before,
            "kept as it was"
        );
        agent.wait_for("the new history", LONG, |m| {
            m.value("gpuwatch_history_up", &[]) == Some(1.0)
        });
    }
}

#[test]
fn when_the_storage_fails_at_start_metrics_stay_up_and_history_attaches_when_it_returns() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = config(&dir);
    // Where a directory should be there is a file: the database cannot be
    // created (ENOTDIR, root or not), as on a missing or read-only mount.
    let blocker = dir.path().join("state");
    std::fs::write(&blocker, b"not a directory").expect("blocker");
    let db = blocker.join("history.db");
    let agent = Agent::start(
        "golden",
        &[
            "--config",
            &cfg,
            "--history-db",
            db.to_str().expect("utf-8"),
        ],
        &[("GPUWATCH_SIM_TIME", "10")],
    );
    agent.wait_ready(200, LONG);
    let m = agent.metrics();
    assert_eq!(m.value("gpuwatch_up", &[]), Some(1.0));
    assert_eq!(m.value("gpuwatch_history_up", &[]), Some(0.0));
    for path in [
        "/api/v1/history?gpu=0&metric=temperature",
        "/api/v1/events",
        "/api/v1/silences",
        "/api/v1/alerts/history",
    ] {
        let (status, body) = json(&agent, path);
        assert_eq!(status, 503, "{path}: {body}");
        let error = body["error"].as_str().unwrap_or("");
        assert!(
            error.starts_with("history database unavailable: ") && error.contains("history.db"),
            "{path}: {body}"
        );
    }
    let log = agent.log();
    assert_eq!(
        log.matches("History is off for now").count(),
        1,
        "said once:\n{log}"
    );
    let warning = log
        .lines()
        .find(|l| l.contains("History is off for now"))
        .expect("the warning");
    assert!(
        warning.contains("WARN") && warning.contains(db.to_str().expect("utf-8")),
        "what failed, where and what to do, on one line: {warning}"
    );
    assert!(!log.contains("ERROR"), "{log}");

    std::fs::remove_file(&blocker).expect("unblock");
    std::fs::create_dir(&blocker).expect("the directory");
    agent.wait_for("history to attach", Duration::from_secs(90), |m| {
        m.value("gpuwatch_history_up", &[]) == Some(1.0)
    });
    wait_points(&agent, 2);
    let (status, body) = json(&agent, "/api/v1/silences");
    assert_eq!(status, 200, "{body}");
    let log = agent.log();
    assert_eq!(
        log.matches("The history database is open now").count(),
        1,
        "{log}"
    );
    assert!(db.is_file());
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
