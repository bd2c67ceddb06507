//! The web view's Workloads table in the real browser (part of the webui
//! suite): its figures against the agent's own /api/v1/workloads, the link
//! from a GPU row, and hostile names shown as text.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::common::Agent;
use super::{config, numbers, visit};

/// The Slurm job pid 5001 (GPU 0 of the `workloads` scenario) runs in.
const JOB: &str = "7300001";
/// A job user that is valid to the agent's environ reader (printable ASCII
/// without spaces) and would run script if put into the page as HTML.
const HOSTILE_USER: &str = "<img/src=x/onerror=window.__pwned='user'>";
/// A process name (comm) that would do the same.
const HOSTILE_COMMAND: &str = "<img src=x onerror=\"window.__pwned='comm'\">";

/// A /proc tree for two of the scenario's pids: 5001 in Slurm job [`JOB`]
/// (found through its environment, as under `proctrack/linuxproc`) with a
/// hostile job user, and 5201 a plain process with a hostile name. The
/// other pids have no entry and are plain processes named by NVML.
fn proc_tree(root: &Path) -> PathBuf {
    let proc = root.join("proc");
    std::fs::create_dir_all(root.join("etc")).expect("mkdir etc");
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\nalice:x:1001:1001::/home/alice:/bin/sh\n",
    )
    .expect("passwd");
    let status = "Name:\tx\nUid:\t1001\t1001\t1001\t1001\n";
    let job = proc.join("5001");
    std::fs::create_dir_all(&job).expect("mkdir 5001");
    std::fs::write(job.join("comm"), "torchrun\n").expect("comm");
    std::fs::write(job.join("status"), status).expect("status");
    let environ = [
        format!("SLURM_JOB_ID={JOB}"),
        "SLURM_JOB_UID=1001".into(),
        format!("SLURM_JOB_USER={HOSTILE_USER}"),
        "SLURM_JOB_ACCOUNT=physics".into(),
        "SLURM_JOB_PARTITION=gpu".into(),
    ]
    .join("\0");
    std::fs::write(job.join("environ"), environ).expect("environ");
    let plain = proc.join("5201");
    std::fs::create_dir_all(&plain).expect("mkdir 5201");
    std::fs::write(plain.join("comm"), format!("{HOSTILE_COMMAND}\n")).expect("comm");
    std::fs::write(plain.join("status"), status).expect("status");
    proc
}

fn workloads(agent: &Agent) -> Vec<Value> {
    let (status, body) = agent.get("/api/v1/workloads");
    assert_eq!(status, 200, "{body}");
    let doc: Value = serde_json::from_str(&body).expect("JSON");
    doc["workloads"].as_array().expect("workloads").clone()
}

fn find<'a>(list: &'a [Value], kind: &str, id: &str) -> Option<&'a Value> {
    list.iter().find(|w| w["kind"] == kind && w["id"] == id)
}

/// Seconds from a Held cell ("40 s", "2.5 min", "1.25 h") and the
/// precision it was rounded to.
fn held_seconds(text: &str) -> (f64, f64) {
    let n = numbers(text)[0];
    if text.ends_with(" min") {
        (n * 60.0, 6.0)
    } else if text.ends_with(" h") {
        (n * 3600.0, 36.0)
    } else {
        (n, 1.0)
    }
}

/// Joules from an Energy cell ("12.3 kJ", "1.25 kWh") and its precision.
fn joules(text: &str) -> (f64, f64) {
    let n = numbers(text)[0];
    if text.ends_with(" kWh") {
        (n * 3.6e6, 36_000.0)
    } else {
        (n * 1000.0, 100.0)
    }
}

/// `shown` (rounded to `precision`) lies between the API's figure before
/// the page was read and after.
fn between(shown: (f64, f64), before: f64, after: f64) -> bool {
    let (value, precision) = shown;
    value + precision / 2.0 + 1e-9 >= before && value - precision / 2.0 - 1e-9 <= after
}

#[test]
fn workloads_table_shows_the_apis_figures_links_from_gpu_rows_and_escapes_names() {
    let dir = tempfile::tempdir().expect("temp dir");
    let proc = proc_tree(dir.path());
    let config = config(
        dir.path(),
        &format!(
            "[sampler]\nproc_root = {:?}\n",
            proc.to_str().expect("utf-8 path")
        ),
    );
    let agent = Agent::start("workloads", &["--config", &config], &[]);
    agent.wait_ready(200, Duration::from_secs(20));
    // Six processes, six workloads; wait until each held its GPU a while.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let before = loop {
        let list = workloads(&agent);
        if list.len() == 6 && list.iter().all(|w| w["gpu_seconds"].as_f64() > Some(3.0)) {
            break list;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "six workloads with some GPU time: {list:#?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let job = find(&before, "slurm_job", JOB).unwrap_or_else(|| panic!("job {JOB}: {before:#?}"));
    assert_eq!(
        job["user"], HOSTILE_USER,
        "the agent keeps the user as given"
    );
    let link = format!("a.workload-link[data-workload=\"slurm_job:{JOB}\"]");
    let page = visit(
        &format!("{}/", agent.url),
        "webui-workloads",
        &["--workloads", "6", "--click", &link, "--timeout", "60"],
    );
    let after = workloads(&agent);
    page.complete();

    // Escaping: the hostile names show as text, and nothing ran.
    page.check(
        page.json["pwned"].is_null() && page.json["injected_elements"] == 0,
        "a workload's user or command was inserted as HTML",
    );
    let rows = page.json["workloads"].as_array().expect("workload rows");
    let row = |kind: &str, id: &str| {
        rows.iter()
            .find(|r| r["kind"] == kind && r["id"] == id)
            .unwrap_or_else(|| page.fail(&format!("no row for {kind} {id}")))
    };
    let job_row = row("slurm_job", JOB);
    let who = job_row["cells"]["user"].as_str().unwrap_or_default();
    page.check(
        who.starts_with(HOSTILE_USER) && who.contains("account physics"),
        &format!("the job's Who cell shows the user as text: {who:?}"),
    );
    let plain = row("process", "5201");
    page.check(
        plain["command"] == HOSTILE_COMMAND,
        &format!("the process's name as text: {plain}"),
    );

    // Figures: each API workload has its row, with what the API said.
    page.check(rows.len() == before.len(), "one row per workload");
    for w in &before {
        let (kind, id) = (
            w["kind"].as_str().expect("kind"),
            w["id"].as_str().expect("id"),
        );
        let later = find(&after, kind, id).unwrap_or_else(|| panic!("{kind} {id} ended"));
        let r = row(kind, id);
        let gpus: Vec<&str> = w["gpus"]
            .as_array()
            .expect("gpus")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        page.check(
            r["cells"]["gpus"] == gpus.join(", ").as_str(),
            &format!("GPUs of {kind} {id}: {r} vs {gpus:?}"),
        );
        page.check(
            r["cells"]["state"] == "running",
            &format!("{kind} {id} runs: {r}"),
        );
        let f = |doc: &Value, field: &str| doc[field].as_f64().expect(field);
        let held = held_seconds(r["cells"]["held"].as_str().expect("held"));
        page.check(
            between(held, f(w, "gpu_seconds"), f(later, "gpu_seconds")),
            &format!(
                "held by {kind} {id}: {held:?} not within {} .. {}",
                w["gpu_seconds"], later["gpu_seconds"]
            ),
        );
        let energy = joules(r["cells"]["energy"].as_str().expect("energy"));
        page.check(
            between(energy, f(w, "energy_joules"), f(later, "energy_joules")),
            &format!(
                "energy of {kind} {id}: {energy:?} not within {} .. {}",
                w["energy_joules"], later["energy_joules"]
            ),
        );
        // Efficiency holds still once GPM answers (constant readings); the
        // first second, before GPM, counts utilization instead.
        let shown = numbers(r["cells"]["efficiency"].as_str().expect("efficiency"))[0];
        let (low, high) = (f(w, "efficiency") * 100.0, f(later, "efficiency") * 100.0);
        page.check(
            shown >= low.min(high) - 0.5 - 1e-9 && shown <= low.max(high) + 0.5 + 1e-9,
            &format!("efficiency of {kind} {id}: {shown} % vs {low:.2} .. {high:.2} %"),
        );
        let width: f64 = r["bar_width"]
            .as_str()
            .and_then(|w| w.strip_suffix('%'))
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| page.fail(&format!("no efficiency bar for {kind} {id}")));
        page.check(
            (width - shown).abs() <= 0.6,
            &format!("bar of {kind} {id}: {width} % for {shown} %"),
        );
    }
    // The training job on GPU 0 (SM active 90 %) and the idle kernel on
    // GPU 3 (0 %), as the scenario has them.
    page.check(
        numbers(job_row["cells"]["efficiency"].as_str().unwrap_or_default())[0] >= 89.0,
        &format!("the job's efficiency: {job_row}"),
    );
    page.check(
        row("process", "5301")["cells"]["efficiency"] == "0 %",
        "the idle kernel's efficiency",
    );

    // The GPU rows name their workloads; the link filters and highlights.
    let links = page.json["workload_links"].as_array().expect("links");
    page.check(
        links.iter().any(|l| {
            l["gpu"] == "0"
                && l["workload"] == format!("slurm_job:{JOB}")
                && l["text"] == format!("slurm job {JOB}")
        }),
        &format!("GPU 0's row links its job: {links:?}"),
    );
    page.check(
        links.iter().filter(|l| l["gpu"] == "4").count() == 2,
        &format!("GPU 4's row links both MIG workloads: {links:?}"),
    );
    let clicked = &page.json["after_click"];
    page.check(
        clicked["workload_filter"]
            .as_str()
            .is_some_and(|f| f.starts_with("GPU 0 only")),
        &format!(
            "the table is filtered to GPU 0: {}",
            clicked["workload_filter"]
        ),
    );
    let shown: Vec<&Value> = clicked["workloads"]
        .as_array()
        .expect("rows")
        .iter()
        .collect();
    page.check(
        shown.len() == 1 && shown[0]["id"] == JOB && shown[0]["chosen"] == true,
        &format!("after the click, only the job, highlighted: {shown:?}"),
    );
}
