//! The kernel-log reader against a hostile local user (issue 22), end to
//! end on the simulator's `health` scenario (GPU 0 at PCI 0000:18:00): forged
//! Xid lines do not count, a burst of lines is counted whole, a flood does
//! not delay the Xid right after it, a time from the future is clamped,
//! every rotation style keeps live errors live, and a FIFO in the log's
//! place neither hangs the reader nor keeps `gpuwatch_kernel_log_up` at 1.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use common::Agent;

const LONG: Duration = Duration::from_secs(60);
/// A couple of polls (500 ms each) and a scrape, with room for a busy
/// machine: what "seen right away" means below.
const SOON: Duration = Duration::from_secs(10);

/// Starts the agent following `kmsg` (created empty: nothing is backlog).
fn agent_on(dir: &Path) -> (Agent, PathBuf) {
    common::agent_following_kmsg(dir, "health", LONG)
}

fn append(path: &Path, text: &str) {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open the log");
    file.write_all(text.as_bytes()).expect("append");
}

fn xid(m: &common::Metrics, code: &str) -> Option<f64> {
    m.value("gpuwatch_xid_errors_total", &[("gpu", "0"), ("xid", code)])
}

fn done(agent: Agent) {
    let status = agent.terminate();
    assert!(status.success(), "{status:?}");
}

#[test]
fn forged_xid_lines_do_not_count() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (agent, kmsg) = agent_on(dir.path());
    // The kernel's own segfault line quoting a library named like an Xid,
    // a user's write to /dev/kmsg (facility 1), a `logger` line; then a
    // real one, after which the forgeries have been read.
    append(
        &kmsg,
        "6,1,5000000,-;a.out[4242]: segfault at 0 ip 00007f1e2a001000 sp 00007ffd8 error 4 in NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, y.so[7f1e2a001000+1000]\n\
         12,2,5000001,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, GPU has fallen off the bus.\n\
         Dec  1 10:00:00 node1 alice: NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, GPU has fallen off the bus.\n\
         4,3,5000002,-;NVRM: Xid (PCI:0000:18:00): 13, pid=1, name=x, Graphics Exception\n",
    );
    let m = agent.wait_for("the real Xid 13", LONG, |m| xid(m, "13") == Some(1.0));
    assert_eq!(xid(&m, "79"), None, "a forged Xid 79 counted:\n{}", m.text);
    assert_eq!(
        m.value(
            "gpuwatch_kernel_log_dropped_total",
            &[("reason", "not_from_kernel")]
        ),
        Some(2.0),
        "{}",
        m.text
    );
    assert_eq!(
        m.value(
            "gpuwatch_gpu_health",
            &[("gpu", "0"), ("state", "unhealthy")]
        ),
        Some(0.0),
        "{}",
        m.text
    );
    done(agent);
}

#[test]
fn a_burst_of_3000_xid_lines_is_counted_whole() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (agent, kmsg) = agent_on(dir.path());
    // 3000 Xid lines at once, 10 s apart in kernel time: all counted.
    let burst: String = (0..3000u64)
        .map(|i| {
            format!(
                "4,{},{},-;NVRM: Xid (PCI:0000:18:00): 31, pid=1, name=x, MMU Fault\n",
                100 + i,
                10_000_000 + i * 10_000_000
            )
        })
        .collect();
    append(&kmsg, &burst);
    agent.wait_for("3000 Xid 31", LONG, |m| xid(m, "31") == Some(3000.0));
    // Counted whole, logged once (the log says how many it held back).
    let warnings = agent.log().matches("Xid error in the kernel log").count();
    assert_eq!(warnings, 1, "{}", agent.log());
    done(agent);
}

#[test]
fn a_time_from_the_future_is_the_read_time() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (agent, kmsg) = agent_on(dir.path());
    // A time from the future (TS_USEC=900000000000000, year 2055) is the
    // time the line was read.
    let before = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    append(
        &kmsg,
        "4,4000,900000000000000,-;NVRM: Xid (PCI:0000:18:00): 43, pid=1, name=x, Reset Channel Verif Error\n",
    );
    let m = agent.wait_for("the Xid 43", LONG, |m| xid(m, "43") == Some(1.0));
    let seen = m
        .value(
            "gpuwatch_xid_last_seen_timestamp_seconds",
            &[("gpu", "0"), ("xid", "43")],
        )
        .expect("last seen");
    let after = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    assert!(
        seen >= before - 1.0 && seen <= after + 1.0,
        "{seen} not in [{before}, {after}]"
    );
    done(agent);
}

#[test]
fn the_xid_right_after_a_flood_is_seen_at_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (agent, kmsg) = agent_on(dir.path());
    // A 96 MiB flood, then a fatal Xid: seen right away, the skip counted.
    let junk = "[ 5.000000] junk junk junk junk junk junk junk junk junk junk\n";
    let flood = junk.repeat((96 << 20) / junk.len());
    append(&kmsg, &flood);
    append(
        &kmsg,
        "[ 6.000000] NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, GPU has fallen off the bus.\n",
    );
    let written = Instant::now();
    let m = agent.wait_for("the Xid 79 after the flood", LONG, |m| {
        xid(m, "79") == Some(1.0)
    });
    let took = written.elapsed();
    eprintln!("the Xid after a 96 MiB flood was counted {took:?} after it was written");
    assert!(
        took < SOON,
        "the Xid after the flood took {took:?} (a poll reads 1 MiB: without skipping ahead, ~48 s)"
    );
    let skipped = m
        .value("gpuwatch_kernel_log_skipped_bytes_total", &[])
        .unwrap_or(0.0);
    assert!(skipped >= (80 << 20) as f64, "{skipped}\n{}", m.text);
    agent.wait_for_log("The kernel log is flooded", LONG);
    done(agent);
}

#[test]
fn rename_and_create_keeps_live_errors_live() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (agent, kmsg) = agent_on(dir.path());
    append(
        &kmsg,
        "[ 1.000000] NVRM: Xid (PCI:0000:18:00): 13, pid=1, name=x, Graphics Exception\n",
    );
    agent.wait_for("the first Xid 13", LONG, |m| xid(m, "13") == Some(1.0));

    // rename + create, the writer still on the old file for a moment, the
    // new file's first line a fatal Xid: both live, counted, soon.
    let mut writer = std::fs::OpenOptions::new()
        .append(true)
        .open(&kmsg)
        .expect("writer");
    std::fs::rename(&kmsg, dir.path().join("kmsg.1")).expect("rename");
    writer
        .write_all(b"[ 2.000000] NVRM: Xid (PCI:0000:18:00): 48, pid=1, name=x, DBE\n")
        .expect("write the old file");
    std::fs::write(
        &kmsg,
        "[ 3.000000] NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, GPU has fallen off the bus.\n",
    )
    .expect("create the new file");
    let written = Instant::now();
    agent.wait_for("Xid 48 and 79 after the rotation", LONG, |m| {
        xid(m, "48") == Some(1.0) && xid(m, "79") == Some(1.0)
    });
    assert!(written.elapsed() < SOON, "{:?}", written.elapsed());
    drop(writer);
    done(agent);
}

#[test]
fn copytruncate_with_writes_before_the_next_poll_keeps_live_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (agent, kmsg) = agent_on(dir.path());
    append(
        &kmsg,
        "[ 3.000000] NVRM: Xid (PCI:0000:18:00): 13, pid=1, name=x, Graphics Exception\n",
    );
    agent.wait_for("the first Xid 13", LONG, |m| xid(m, "13") == Some(1.0));
    // copytruncate, then the driver writes past the old length before
    // the next poll.
    let copy = std::fs::read(&kmsg).expect("read");
    std::fs::write(dir.path().join("kmsg.2"), copy).expect("copy");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&kmsg)
        .expect("open");
    file.set_len(0).expect("truncate");
    drop(file);
    append(
        &kmsg,
        "[ 4.000000] NVRM: Xid (PCI:0000:18:00): 94, pid=1, name=x, Contained ECC error on the very long line that follows\n\
         [ 4.100000] NVRM: Xid (PCI:0000:18:00): 95, pid=1, name=x, Uncontained ECC error\n",
    );
    agent.wait_for("Xid 94 and 95 after copytruncate", LONG, |m| {
        xid(m, "94") == Some(1.0) && xid(m, "95") == Some(1.0)
    });
    done(agent);
}

#[test]
fn a_fifo_in_place_of_the_log_is_reported_not_waited_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (agent, kmsg) = agent_on(dir.path());
    std::fs::remove_file(&kmsg).expect("rm");
    let status = std::process::Command::new("mkfifo")
        .arg(&kmsg)
        .status()
        .expect("mkfifo (coreutils) must be installed");
    assert!(status.success(), "mkfifo: {status:?}");
    agent.wait_for("gpuwatch_kernel_log_up 0", LONG, |m| {
        m.value("gpuwatch_kernel_log_up", &[]) == Some(0.0)
    });
    let log = agent.wait_for_log("FIFO", LONG);
    assert!(log.contains("kernel log"), "{log}");
    // The reader still works: a regular file back in place is read again.
    std::fs::remove_file(&kmsg).expect("rm fifo");
    std::fs::write(
        &kmsg,
        "[ 9.000000] NVRM: Xid (PCI:0000:18:00): 13, pid=1, name=x, Graphics Exception\n",
    )
    .expect("file again");
    agent.wait_for("the log read again", LONG, |m| {
        m.value("gpuwatch_kernel_log_up", &[]) == Some(1.0)
    });
    done(agent);
}

#[test]
fn a_pci_scan_stuck_on_a_fifo_does_not_stop_the_kernel_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let kmsg = dir.path().join("kmsg");
    std::fs::write(&kmsg, "").expect("kmsg");
    // A PCI device whose `vendor` is a FIFO: a blocking read waits forever.
    let device = dir.path().join("pci").join("0000:18:00.0");
    std::fs::create_dir_all(&device).expect("pci tree");
    let status = std::process::Command::new("mkfifo")
        .arg(device.join("vendor"))
        .status()
        .expect("mkfifo (coreutils) must be installed");
    assert!(status.success(), "mkfifo: {status:?}");
    std::fs::write(device.join("class"), "0x030200\n").expect("class");
    let config = dir.path().join("gpuwatch.toml");
    std::fs::write(
        &config,
        format!(
            "[health]\nkernel_log = \"{}\"\npci_devices = \"{}\"\n",
            kmsg.display(),
            dir.path().join("pci").display()
        ),
    )
    .expect("config");
    let agent = Agent::start(
        "health",
        &["--config", config.to_str().expect("utf-8")],
        &[],
    );
    agent.wait_for("the kernel log read", LONG, |m| {
        m.value("gpuwatch_kernel_log_up", &[]) == Some(1.0)
    });
    append(
        &kmsg,
        "[ 1.000000] NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, GPU has fallen off the bus.\n",
    );
    agent.wait_for("the Xid 79", LONG, |m| xid(m, "79") == Some(1.0));
    done(agent);
}

#[test]
fn terminal_escapes_in_kernel_log_text_are_escaped_in_the_agents_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (agent, kmsg) = agent_on(dir.path());
    // The text after the code is whatever the driver (or a process name it
    // quotes) holds: ESC ] 0 ; ... BEL would retitle the terminal.
    append(
        &kmsg,
        "4,1,1000000,-;NVRM: Xid (PCI:0000:18:00): 13, pid=1, name=x, \u{1b}]0;owned\u{7}\u{1b}[2J text\n",
    );
    agent.wait_for("the Xid 13", LONG, |m| xid(m, "13") == Some(1.0));
    let log = agent.wait_for_log("Xid error in the kernel log", LONG);
    // (The log's own colours are ESC [ ... m; the line's are not.)
    assert!(
        !log.contains("\u{1b}]0;owned") && !log.contains('\u{7}') && !log.contains("\u{1b}[2J"),
        "the line's control characters reached the log raw:\n{log:?}"
    );
    assert!(log.contains("\\u{1b}]0;owned\\u{7}"), "{log}");
    done(agent);
}
