//! The Alertmanager push receiver end to end, against a real Alertmanager
//! (Debian's `prometheus-alertmanager`): the agent on the thermal-incident
//! scenario with a user rule on GPU 3's temperature pushes the alert, which
//! shows in Alertmanager's API with its labels and annotations and resolves;
//! an Alertmanager that is killed (its alerts live in memory) gets the
//! firing alert again from the periodic re-send, also from an agent that was
//! itself killed and restarted; a refusal (400) fails for good with
//! Alertmanager's reason, an outage retries.

mod common;

use std::time::{Duration, SystemTime};

use common::alertmanager::Alertmanager;
use common::Agent;

const LONG: Duration = Duration::from_secs(40);
const HOST: &str = "gpu-node-7";
const EXTERNAL: &str = "http://gpu-node-7.example:9842/";
const PASSWORD: &str = "am-pa55-never-logged";

/// Writes the agent's config: an Alertmanager receiver and the `GpuHot`
/// rule (GPU 3 of thermal-incident passes 85 °C at 70 s and drops below it
/// at 5 min of scenario time).
fn config(dir: &std::path::Path, am: &Alertmanager, resend: &str) -> String {
    let path = dir.join("gpuwatch.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nexternal_url = \"{EXTERNAL}\"\n\n[sampler]\nhostname = \"{HOST}\"\n\n\
             [[rules]]\nname = \"GpuHot\"\ncondition = \"temperature > 85\"\nfor = \"2s\"\nseverity = \"warning\"\n\
             labels = {{ team = \"ml-infra\" }}\n\
             annotations = {{ summary = \"GPU {{{{ .gpu }}}} on {{{{ .host }}}} is hot\" }}\n\n\
             [[receivers]]\nname = \"am\"\ntype = \"alertmanager\"\nurl = \"{}\"\n\
             username = \"gpuwatch\"\npassword = \"{PASSWORD}\"\n\
             resend_interval = \"{resend}\"\ntimeout = \"2s\"\nretry_min = \"200ms\"\nretry_max = \"1s\"\n",
            am.url
        ),
    )
    .expect("config");
    path.to_str().expect("utf-8").to_string()
}

/// The agent on thermal-incident from `start` s of scenario time at 5x.
fn thermal(config: &str, db: &std::path::Path, start: &'static str) -> Agent {
    Agent::start(
        "thermal-incident",
        &[
            "--config",
            config,
            "--history-db",
            db.to_str().expect("utf-8"),
        ],
        &[("GPUWATCH_SIM_START", start), ("GPUWATCH_SIM_SPEED", "5")],
    )
}

fn time(value: &serde_json::Value) -> SystemTime {
    humantime::parse_rfc3339_weak(value.as_str().expect("a time")).expect("RFC 3339")
}

/// The agent's own view of its `GpuHot` alert (from /api/v1/alerts).
fn agent_alert(agent: &Agent) -> serde_json::Value {
    let (status, body) = agent.get("/api/v1/alerts");
    assert_eq!(status, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    list["alerts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["alertname"] == "GpuHot").cloned())
        .unwrap_or_else(|| panic!("no GpuHot alert in {list:#}"))
}

fn delivered(agent: &Agent) -> f64 {
    agent
        .metrics()
        .value(
            "gpuwatch_notifications_total",
            &[("receiver", "am"), ("outcome", "delivered")],
        )
        .unwrap_or(0.0)
}

#[test]
fn a_pushed_alert_shows_in_alertmanager_with_its_labels_and_resolves() {
    let am = Alertmanager::start();
    let dir = tempfile::tempdir().expect("temp dir");
    // A long re-send: the alert could only expire in Alertmanager 4 min
    // after it fired, so its going away sooner is the resolved message.
    let config = config(dir.path(), &am, "1m");
    let agent = thermal(&config, &dir.path().join("history.db"), "60");

    let alerts = am.wait_for("GpuHot in Alertmanager", "GpuHot", LONG, |a| !a.is_empty());
    let pushed_at = SystemTime::now();
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    let alert = &alerts[0];
    let ours = agent_alert(&agent);
    let labels = &alert["labels"];
    assert_eq!(labels["alertname"], "GpuHot");
    assert_eq!(labels["gpu"], "3");
    assert_eq!(labels["severity"], "warning");
    assert_eq!(labels["host"], HOST);
    assert_eq!(labels["team"], "ml-infra");
    assert!(labels["uuid"]
        .as_str()
        .is_some_and(|u| u.starts_with("GPU-")));
    assert_eq!(labels, &ours["labels"], "the agent's labels, all of them");
    assert_eq!(
        alert["annotations"]["summary"],
        "GPU 3 on gpu-node-7 is hot"
    );
    assert_eq!(alert["annotations"], ours["annotations"]);
    assert_eq!(
        alert["generatorURL"],
        "http://gpu-node-7.example:9842/api/v1/alerts"
    );
    assert_eq!(alert["status"]["state"], "active");
    // Valid for 4 re-send intervals from the push.
    let ends = time(&alert["endsAt"]);
    let valid = ends
        .duration_since(pushed_at)
        .expect("endsAt is in the future");
    assert!(
        valid > Duration::from_secs(180) && valid <= Duration::from_secs(240),
        "endsAt {} is {valid:?} ahead",
        alert["endsAt"]
    );
    let starts = time(&alert["startsAt"]);
    let active_since =
        SystemTime::UNIX_EPOCH + Duration::from_secs_f64(ours["active_since"].as_f64().expect("s"));
    let skew = starts
        .duration_since(active_since)
        .unwrap_or_else(|e| e.duration());
    assert!(
        skew < Duration::from_millis(2),
        "startsAt is when it became active"
    );

    // Scenario time 300 s (48 s from 60 s at 5x): GPU 3 cools down.
    am.wait_for("GpuHot resolved", "GpuHot", Duration::from_secs(90), |a| {
        a.is_empty()
    });
    assert_eq!(agent_alert(&agent)["state"], "resolved");
    assert!(
        SystemTime::now()
            .duration_since(pushed_at)
            .unwrap_or_default()
            < Duration::from_secs(180),
        "gone well before it would have expired"
    );
    assert!(delivered(&agent) >= 2.0, "the firing and the resolved one");
    let log = agent.log();
    assert!(
        !log.contains(PASSWORD),
        "the password is never logged:\n{log}"
    );
}

#[test]
fn a_restarted_alertmanager_gets_the_firing_alert_again_from_the_resend() {
    let mut am = Alertmanager::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config(dir.path(), &am, "2s");
    let db = dir.path().join("history.db");
    let agent = thermal(&config, &db, "60");
    let first = am.wait_for("GpuHot in Alertmanager", "GpuHot", LONG, |a| !a.is_empty());
    let labels = first[0]["labels"].clone();
    // Re-sent every 2 s, each valid for 8 s: endsAt moves on.
    let ends = time(&first[0]["endsAt"]);
    am.wait_for("a re-send", "GpuHot", Duration::from_secs(20), |a| {
        a.first().is_some_and(|a| time(&a["endsAt"]) > ends)
    });

    // Alertmanager dies and comes back empty: the re-send brings it back
    // (the outbox message was delivered long ago).
    am.kill();
    std::thread::sleep(Duration::from_secs(3));
    am.restart();
    assert!(am.named("GpuHot").is_empty(), "a fresh Alertmanager");
    let again = am.wait_for("GpuHot after the restart", "GpuHot", LONG, |a| {
        !a.is_empty()
    });
    assert_eq!(again[0]["labels"], labels);
    assert_eq!(again[0]["startsAt"], first[0]["startsAt"], "the same alert");
    let log = agent.log();
    assert!(
        log.contains("Cannot re-send the firing alerts to Alertmanager"),
        "the failed re-send is logged:\n{log}"
    );
    assert!(log.contains("re-sent to Alertmanager again"), "{log}");

    // The agent is killed (-9) and Alertmanager comes back empty again; the
    // restarted agent, later in the incident, does not fire the alert anew
    // (its state says firing) but re-sends it from the saved state.
    drop(agent);
    am.restart();
    let agent = thermal(&config, &db, "120");
    let back = am.wait_for("GpuHot after both restarts", "GpuHot", LONG, |a| {
        !a.is_empty()
    });
    assert_eq!(back[0]["labels"], labels);
    assert_eq!(
        back[0]["startsAt"], first[0]["startsAt"],
        "still the same alert"
    );
    let log = agent.log();
    assert!(
        !log.lines()
            .any(|l| l.contains("Alert firing.") && l.contains("GpuHot")),
        "no new firing transition:\n{log}"
    );
}

#[test]
fn a_refusal_fails_for_good_with_alertmanagers_reason_and_an_outage_retries() {
    use gpuwatch::notify::{alertmanager, AlertmanagerConfig, Auth, Outcome, Secret};
    let mut am = Alertmanager::start();
    let config = AlertmanagerConfig {
        url: am.url.clone(),
        headers: Default::default(),
        auth: Some(Auth::Basic {
            username: "gpuwatch".into(),
            password: Secret::new(PASSWORD.into()),
        }),
        timeout: Duration::from_secs(2),
        resend_interval: Duration::from_secs(60),
        external_url: EXTERNAL.into(),
    };
    let ok = r#"[{"labels":{"alertname":"Direct","gpu":"0"},"startsAt":"2026-01-01T00:00:00Z","endsAt":"2099-01-01T00:00:00Z"}]"#;
    assert_eq!(alertmanager::post(&config, ok), Outcome::Delivered);
    assert_eq!(am.named("Direct").len(), 1);

    let backwards = r#"[{"labels":{"alertname":"Direct"},"startsAt":"2026-01-02T00:00:00Z","endsAt":"2026-01-01T00:00:00Z"}]"#;
    match alertmanager::post(&config, backwards) {
        Outcome::Permanent(why) => {
            assert!(
                why.starts_with("HTTP 400") && why.contains("start time must be before end time"),
                "{why}"
            );
            assert!(!why.contains(PASSWORD));
        }
        other => panic!("a 400 is permanent: {other:?}"),
    }

    am.kill();
    match alertmanager::post(&config, ok) {
        Outcome::Retry(why) => assert!(!why.contains(PASSWORD), "{why}"),
        other => panic!("an outage retries: {other:?}"),
    }
}
