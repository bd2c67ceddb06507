//! A regular-file kernel log followed like `tail -F`: the lines appended
//! since the last poll; a rotated file (its path now names another inode)
//! drained to its end, then kept a while for writers still on it, while the
//! new file is read from its start as live lines; a truncated file (shorter
//! than the offset, or whose first bytes changed: copytruncate followed by
//! writes before the next poll) read again from its start.
//!
//! Bounded: one poll reads at most [`MAX_POLL_BYTES`] and [`MAX_POLL_LINES`];
//! a file more than [`MAX_BEHIND`] bytes ahead of the reader (a flood) is
//! skipped to its last [`MAX_POLL_BYTES`], since the newest lines matter
//! most for health; the skipped bytes are counted.
#![allow(
    clippy::disallowed_types,
    reason = "runs on the kernel-log reader's blocking thread: std time is its clock"
)]

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use super::parse::MAX_LINE;

/// Most bytes one poll reads (the rest waits for the next poll).
pub const MAX_POLL_BYTES: usize = 1 << 20;
/// Most lines one poll returns (the rest waits for the next poll).
pub const MAX_POLL_LINES: usize = 16_384;
/// How far behind the end of the file the reader may fall before it skips
/// ahead to the newest [`MAX_POLL_BYTES`].
pub const MAX_BEHIND: u64 = 4 * MAX_POLL_BYTES as u64;
/// How many first bytes of the file are compared at each poll to see a
/// truncation that was written past the old offset before the poll.
const HEAD: usize = 64;
/// How long a rotated-away file is still read for writers that have not
/// reopened the log yet.
pub const ROTATED_GRACE: Duration = Duration::from_secs(30);

/// Opens `path` for reading without ever blocking (a FIFO put in the log's
/// place opens at once) and returns its type as the open file has it
/// (`fstat`, not a `stat` of the path that could change in between).
pub fn open_nonblocking(path: &Path) -> io::Result<(File, std::fs::Metadata)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let metadata = file.metadata()?;
    Ok((file, metadata))
}

/// The error for a log path that now names something other than a regular
/// file.
pub fn not_a_file(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is now {what}, not a regular file; a FIFO or device in its place is not read"),
    )
}

/// One line read, and whether it was already in the log when the reader
/// opened it (the backlog).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadLine {
    /// The line, without its newline, at most [`MAX_LINE`] bytes.
    pub text: String,
    /// Logged before the reader opened the log.
    pub backlog: bool,
    /// When it was read: a line without a time of its own gets this one,
    /// and no line's time is later.
    pub read_at: SystemTime,
}

/// One open file and how far it was read.
struct Tail {
    file: File,
    /// (device, inode): what the path named when opened.
    id: (u64, u64),
    offset: u64,
    /// Lines ending before here were in the file when the reader opened it.
    backlog_end: u64,
    /// An unfinished last line (at most [`MAX_LINE`] bytes kept).
    partial: Vec<u8>,
    /// Bytes up to the next newline are dropped (after a skip-ahead).
    resync: bool,
    /// The file's first bytes as last seen.
    head: Vec<u8>,
}

impl Tail {
    fn new(file: File, metadata: &std::fs::Metadata, backlog: bool) -> Tail {
        Tail {
            file,
            id: (metadata.dev(), metadata.ino()),
            offset: 0,
            backlog_end: if backlog { metadata.len() } else { 0 },
            partial: Vec::new(),
            resync: false,
            head: Vec::new(),
        }
    }

    /// Starts over at the file's start, every line live (a truncation).
    fn restart(&mut self) {
        (self.offset, self.backlog_end) = (0, 0);
        self.partial.clear();
        self.resync = false;
        self.head.clear();
    }

    /// Whether the file was truncated (and maybe rewritten) since the last
    /// poll; keeps its first bytes for the next check.
    fn truncated(&mut self, len: u64) -> io::Result<bool> {
        let mut head = vec![0u8; HEAD];
        let n = self.file.read_at(&mut head, 0)?;
        head.truncate(n);
        let changed = len < self.offset || !head.starts_with(&self.head);
        self.head = head;
        Ok(changed)
    }

    /// Reads new lines into `out` within `budget`; true when the end of the
    /// file was reached.
    fn read(
        &mut self,
        out: &mut Vec<ReadLine>,
        budget: &mut Budget,
        skipped: &mut u64,
    ) -> io::Result<bool> {
        if budget.lines == 0 || budget.bytes == 0 {
            return Ok(false);
        }
        let len = self.file.metadata()?.len();
        if self.truncated(len)? {
            self.restart();
        }
        if len.saturating_sub(self.offset) > MAX_BEHIND {
            let target = len - MAX_POLL_BYTES as u64;
            *skipped += target - self.offset;
            self.offset = target;
            self.partial.clear();
            self.resync = true;
        }
        // Only what is there (an idle log allocates nothing); what the
        // budget leaves waits for the next poll.
        let available = len.saturating_sub(self.offset);
        let want = budget.bytes.min(MAX_POLL_BYTES);
        let limited = available > want as u64;
        let want = want.min(available as usize);
        let mut buffer = vec![0u8; want];
        let mut filled = 0;
        while filled < want {
            match self
                .file
                .read_at(&mut buffer[filled..], self.offset + filled as u64)
            {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        let buffer = &buffer[..filled];
        let read_at = SystemTime::now();
        let mut start = 0;
        let mut consumed = filled;
        for (i, byte) in buffer.iter().enumerate() {
            if *byte != b'\n' {
                continue;
            }
            let line_end = self.offset + i as u64 + 1;
            if self.resync {
                *skipped += (i + 1 - start) as u64;
                self.resync = false;
            } else {
                push_bytes(&mut self.partial, &buffer[start..i]);
                if !self.partial.is_empty() {
                    out.push(ReadLine {
                        text: String::from_utf8_lossy(&self.partial).into_owned(),
                        backlog: line_end <= self.backlog_end,
                        read_at,
                    });
                    budget.lines = budget.lines.saturating_sub(1);
                }
                self.partial.clear();
            }
            start = i + 1;
            if budget.lines == 0 {
                consumed = start;
                break;
            }
        }
        if consumed == filled {
            if self.resync {
                *skipped += (filled - start) as u64;
            } else {
                push_bytes(&mut self.partial, &buffer[start..]);
            }
        }
        self.offset += consumed as u64;
        budget.bytes -= consumed;
        Ok(consumed == filled && !limited)
    }

    /// The unfinished last line of a file that will not grow any more.
    fn flush(&mut self, out: &mut Vec<ReadLine>) {
        if !self.partial.is_empty() && !self.resync {
            out.push(ReadLine {
                text: String::from_utf8_lossy(&self.partial).into_owned(),
                backlog: false,
                read_at: SystemTime::now(),
            });
        }
        self.partial.clear();
    }
}

/// What one poll may still read.
struct Budget {
    bytes: usize,
    lines: usize,
}

/// Appends to an unfinished line, keeping at most [`MAX_LINE`] bytes.
fn push_bytes(partial: &mut Vec<u8>, bytes: &[u8]) {
    let room = MAX_LINE.saturating_sub(partial.len());
    partial.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

/// A regular file followed across rotations.
pub struct Follow {
    current: Tail,
    /// The file rotated away, read until its grace ends.
    rotated: Option<(Tail, Instant)>,
}

impl Follow {
    /// Follows the open regular `file`: what it holds now is the backlog.
    pub fn new(file: File, metadata: &std::fs::Metadata) -> Follow {
        Follow {
            current: Tail::new(file, metadata, true),
            rotated: None,
        }
    }

    /// Reads what is new at `path` into `out`; returns the bytes skipped to
    /// catch up with a flood. An error means the log has to be opened
    /// again (it is no longer a regular file, or reading failed).
    pub fn poll(&mut self, path: &Path, out: &mut Vec<ReadLine>) -> io::Result<u64> {
        let mut budget = Budget {
            bytes: MAX_POLL_BYTES,
            lines: MAX_POLL_LINES,
        };
        let mut skipped = 0;
        if let Some((old, until)) = &mut self.rotated {
            let at_end = old.read(out, &mut budget, &mut skipped)?;
            if at_end && Instant::now() >= *until {
                old.flush(out);
                self.rotated = None;
            }
        }
        let at_end = self.current.read(out, &mut budget, &mut skipped)?;
        if !at_end {
            return Ok(skipped);
        }
        // Drained: does the path name a new file (tail -F)? A missing path
        // is a rotation under way: keep the old file.
        let now = match std::fs::metadata(path) {
            Ok(now) => now,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(skipped),
            Err(e) => return Err(e),
        };
        if (now.dev(), now.ino()) == self.current.id {
            return Ok(skipped);
        }
        let (file, metadata) = open_nonblocking(path)?;
        if !metadata.is_file() {
            return Err(not_a_file(&describe(&metadata)));
        }
        let new = Tail::new(file, &metadata, false);
        let old = std::mem::replace(&mut self.current, new);
        if let Some((mut older, _)) = self.rotated.take() {
            older.flush(out);
        }
        self.rotated = Some((old, Instant::now() + ROTATED_GRACE));
        self.current.read(out, &mut budget, &mut skipped)?;
        Ok(skipped)
    }
}

/// A file type in words, for messages.
pub fn describe(metadata: &std::fs::Metadata) -> String {
    use std::os::unix::fs::FileTypeExt;
    let kind = metadata.file_type();
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "something else"
    };
    what.to_string()
}
