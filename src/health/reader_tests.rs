//! Tests of the kernel-log follower.

use super::*;
use std::io::Write;

fn texts(lines: &[ReadLine]) -> Vec<(&str, bool)> {
    lines.iter().map(|l| (l.text.as_str(), l.backlog)).collect()
}

#[test]
fn follows_a_file_like_tail_f() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kmsg");
    std::fs::write(&path, "old one\nold two\n").unwrap();
    let mut follower = Follower::open(&path).unwrap();
    let mut out = Vec::new();
    follower.poll(&mut out).unwrap();
    assert_eq!(texts(&out), [("old one", true), ("old two", true)]);
    out.clear();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(b"new ha").unwrap();
    follower.poll(&mut out).unwrap();
    assert!(out.is_empty(), "half a line waits for its end");
    file.write_all(b"lf\n").unwrap();
    follower.poll(&mut out).unwrap();
    assert_eq!(texts(&out), [("new half", false)]);
    out.clear();
    // Truncated and rewritten: read from the start, as new lines.
    std::fs::write(&path, "after truncate\n").unwrap();
    follower.poll(&mut out).unwrap();
    assert_eq!(texts(&out), [("after truncate", false)]);
    out.clear();
    // Replaced (rotation): the new file from its start.
    let moved = dir.path().join("kmsg.1");
    std::fs::rename(&path, &moved).unwrap();
    std::fs::write(&path, "rotated in\n").unwrap();
    follower.poll(&mut out).unwrap();
    assert_eq!(texts(&out), [("rotated in", false)]);
}

fn poll(follower: &mut Follower) -> Vec<ReadLine> {
    let mut out = Vec::new();
    follower.poll(&mut out).unwrap();
    out
}

fn append(path: &Path, text: &str) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

/// Runs `f` on another thread: a hang fails the test instead of
/// stopping it.
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(5))
        .expect("the reader blocked")
}

#[test]
fn a_fifo_in_place_of_the_file_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kmsg");
    std::fs::write(&path, "one\n").unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(texts(&poll(&mut follower)), [("one", true)]);
    std::fs::remove_file(&path).unwrap();
    let fifo = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let (result, follower) = within(move || {
        let mut out = Vec::new();
        let result = follower.poll(&mut out).map(|_| out.len());
        (result, follower)
    });
    let error = result.expect_err("a FIFO is not followed");
    assert!(error.to_string().contains("FIFO"), "{error}");
    let reopen = within(move || Follower::open(&path).err());
    let error = reopen.expect("a FIFO is not opened as the log");
    assert!(error.to_string().contains("FIFO"), "{error}");
    assert_eq!(follower.path, dir.path().join("kmsg"));
}

#[test]
fn a_device_replaced_by_a_file_is_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kmsg");
    std::os::unix::fs::symlink("/dev/null", &path).unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert!(matches!(follower.source, Source::Device { .. }));
    assert!(poll(&mut follower).is_empty());
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, "4,1,1,-;a line\n").unwrap();
    let mut out = Vec::new();
    assert!(follower.poll(&mut out).is_err(), "the device was replaced");
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(texts(&poll(&mut follower)), [("4,1,1,-;a line", true)]);
}

#[test]
fn rename_and_create_reads_the_old_file_to_its_end_then_the_new_one_as_live() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kern.log");
    std::fs::write(&path, "before\n").unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(texts(&poll(&mut follower)), [("before", true)]);
    let rotated = dir.path().join("kern.log.1");
    // The writer still holds the old file after the rename.
    let mut writer = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::fs::rename(&path, &rotated).unwrap();
    writer.write_all(b"late on the old file\n").unwrap();
    std::fs::write(&path, "first in the new file\n").unwrap();
    assert_eq!(
        texts(&poll(&mut follower)),
        [
            ("late on the old file", false),
            ("first in the new file", false)
        ]
    );
    // Still on the old file a poll later: read within the grace.
    writer.write_all(b"later still\n").unwrap();
    append(&path, "second in the new file\n");
    assert_eq!(
        texts(&poll(&mut follower)),
        [("later still", false), ("second in the new file", false)]
    );
}

#[test]
fn a_missing_file_during_rotation_keeps_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kern.log");
    std::fs::write(&path, "").unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert!(poll(&mut follower).is_empty());
    let mut writer = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::fs::rename(&path, dir.path().join("kern.log.1")).unwrap();
    writer.write_all(b"while no file is at the path\n").unwrap();
    assert_eq!(
        texts(&poll(&mut follower)),
        [("while no file is at the path", false)]
    );
    std::fs::write(&path, "created later\n").unwrap();
    assert_eq!(texts(&poll(&mut follower)), [("created later", false)]);
}

#[test]
fn copytruncate_with_writes_past_the_old_offset_before_the_poll() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kern.log");
    std::fs::write(&path, "[ 1.0] old a\n[ 2.0] old b\n").unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(poll(&mut follower).len(), 2);
    // copytruncate: copied away, truncated in place, then the driver
    // writes more than the old length before the next poll.
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(0).unwrap();
    drop(file);
    append(
        &path,
        "[ 3.0] NVRM: Xid (PCI:0000:18:00): 79, fatal one\n[ 4.0] more\n",
    );
    assert_eq!(
        texts(&poll(&mut follower)),
        [
            ("[ 3.0] NVRM: Xid (PCI:0000:18:00): 79, fatal one", false),
            ("[ 4.0] more", false)
        ]
    );
}

#[test]
fn a_flood_is_skipped_to_its_newest_lines_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kern.log");
    std::fs::write(&path, "").unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert!(poll(&mut follower).is_empty());
    let junk = "[ 5.0] junk junk junk junk junk junk junk junk junk\n".repeat(400_000);
    append(&path, &junk);
    append(
        &path,
        "[ 6.0] NVRM: Xid (PCI:0000:18:00): 79, after the flood\n",
    );
    let mut seen = false;
    let mut skipped = 0;
    for _ in 0..2 {
        let mut out = Vec::new();
        skipped += follower.poll(&mut out).unwrap().skipped_bytes;
        seen |= out.iter().any(|l| l.text.contains("after the flood"));
    }
    assert!(
        seen,
        "the Xid right after the flood is read within two polls"
    );
    assert!(
        skipped >= junk.len() as u64 - 2 * MAX_POLL_BYTES as u64,
        "{skipped}"
    );
    // A line without end far longer than a poll: skipped, not waited on.
    append(&path, &"y".repeat(20 << 20));
    append(&path, "\n[ 7.0] after the long line\n");
    let out = poll(&mut follower);
    assert!(
        out.iter().any(|l| l.text == "[ 7.0] after the long line"),
        "{:?}",
        out.len()
    );
}

#[test]
fn lines_carry_when_they_were_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kern.log");
    std::fs::write(&path, "x\n").unwrap();
    let before = std::time::SystemTime::now();
    let mut follower = Follower::open(&path).unwrap();
    let out = poll(&mut follower);
    assert!(out[0].read_at >= before && out[0].read_at <= std::time::SystemTime::now());
}

/// Answers like `/dev/kmsg`: one record per read, `EPIPE` where the
/// kernel overwrote records, then `EAGAIN`.
struct FakeKmsg(std::collections::VecDeque<Result<&'static str, i32>>);

impl Read for FakeKmsg {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self.0.pop_front() {
            Some(Ok(record)) => {
                buffer[..record.len()].copy_from_slice(record.as_bytes());
                Ok(record.len())
            }
            Some(Err(errno)) => Err(io::Error::from_raw_os_error(errno)),
            None => Err(io::Error::from_raw_os_error(libc::EAGAIN)),
        }
    }
}

#[test]
fn kmsg_records_overwritten_before_they_were_read_are_counted() {
    let mut kmsg = FakeKmsg(
        [
            Ok("4,10,1,-;one\n SUBSYSTEM=pci\n"),
            Ok("4,11,2,-;two\n"),
            Err(libc::EPIPE),
            Ok("4,50,3,-;after the gap\n"),
        ]
        .into(),
    );
    let (mut in_backlog, mut last_seq, mut out) = (true, None, Vec::new());
    let overwritten = poll_device(&mut kmsg, &mut in_backlog, &mut last_seq, &mut out).unwrap();
    assert_eq!(overwritten, 38, "records 12 to 49");
    assert_eq!(
        texts(&out),
        [
            ("4,10,1,-;one", true),
            ("4,11,2,-;two", true),
            ("4,50,3,-;after the gap", true)
        ]
    );
    assert!(!in_backlog, "EAGAIN ends the backlog");
    assert_eq!(last_seq, Some(50));
}

#[test]
fn a_line_without_end_is_capped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kmsg");
    let long = "x".repeat(MAX_LINE * 3);
    std::fs::write(&path, format!("{long}\nshort\n")).unwrap();
    let mut follower = Follower::open(&path).unwrap();
    let mut out = Vec::new();
    follower.poll(&mut out).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].text.len(), MAX_LINE);
    assert_eq!(out[1].text, "short");
}

#[test]
fn missing_and_unreadable_logs_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let missing = Follower::open(&dir.path().join("none")).err().unwrap();
    assert!(matches!(missing, OpenError::Other { .. }));
    let denied = OpenError::new(
        Path::new("/dev/kmsg"),
        io::Error::from(io::ErrorKind::PermissionDenied),
    );
    let message = denied.to_string();
    assert!(
        message.contains("/dev/kmsg") && message.contains("CAP_SYSLOG"),
        "{message}"
    );
    assert!(
        Follower::open(dir.path()).is_err(),
        "a directory is not a log"
    );
}
