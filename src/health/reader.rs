//! Follows the kernel log: `/dev/kmsg` (a character device: one record per
//! `read`, the records since boot first) or a regular file, followed like
//! `tail -F` ([`super::tail`]).
//!
//! Never blocks: every open is `O_NONBLOCK` and the type is checked on the
//! open file (a FIFO put in the log's place is refused, not waited on), and
//! each poll checks that the path still names the file being read (a device
//! replaced by a regular file is opened again).
//!
//! Memory is bounded: a line longer than [`MAX_LINE`] is cut, and one poll
//! reads at most [`MAX_POLL_BYTES`] and [`MAX_POLL_RECORDS`].

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::parse::MAX_LINE;
pub use super::tail::ReadLine;
use super::tail::{describe, open_nonblocking, Follow};
pub use super::tail::{MAX_BEHIND, MAX_POLL_BYTES, MAX_POLL_LINES};

/// Most records one poll reads from `/dev/kmsg`.
pub const MAX_POLL_RECORDS: usize = 4096;

/// Why the kernel log cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// No permission: dmesg_restrict and no CAP_SYSLOG, or file modes.
    #[error("cannot read the kernel log {path}: permission denied. Grant the agent CAP_SYSLOG (systemd: AmbientCapabilities=CAP_SYSLOG) or set the sysctl kernel.dmesg_restrict=0; or set [health] kernel_log = \"\" to stop reading it")]
    Denied {
        /// The log.
        path: PathBuf,
    },
    /// Any other failure (missing file, not a file).
    #[error("cannot read the kernel log {path}: {source}. Check [health] kernel_log, or set it to \"\" to stop reading it")]
    Other {
        /// The log.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
}

impl OpenError {
    fn new(path: &Path, source: io::Error) -> Self {
        let path = path.to_path_buf();
        if source.kind() == io::ErrorKind::PermissionDenied {
            OpenError::Denied { path }
        } else {
            OpenError::Other { path, source }
        }
    }
}

/// What one poll had to leave out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// kmsg records the kernel overwrote before they were read (the gap in
    /// sequence numbers after `EPIPE`).
    pub kmsg_overwritten: u64,
    /// Bytes of a regular file skipped to catch up with a flood.
    pub skipped_bytes: u64,
}

enum Source {
    /// `/dev/kmsg`: each read returns one record.
    Device {
        file: File,
        /// (device, inode) of the open device, to see it replaced.
        id: (u64, u64),
        /// Still reading the records that were there at open.
        in_backlog: bool,
        /// The last record's sequence number.
        last_seq: Option<u64>,
    },
    /// A regular file followed like `tail -F`.
    Regular(Follow),
}

/// An open kernel log.
pub struct Follower {
    path: PathBuf,
    source: Source,
}

impl Follower {
    /// Opens `path` without blocking; a character device is read as
    /// `/dev/kmsg`, a regular file followed; anything else is refused.
    pub fn open(path: &Path) -> Result<Follower, OpenError> {
        let (file, metadata) = open_nonblocking(path).map_err(|e| OpenError::new(path, e))?;
        let source = if metadata.file_type().is_char_device() {
            Source::Device {
                file,
                id: (metadata.dev(), metadata.ino()),
                in_backlog: true,
                last_seq: None,
            }
        } else if metadata.is_file() {
            Source::Regular(Follow::new(file, &metadata))
        } else {
            let what = describe(&metadata);
            return Err(OpenError::new(
                path,
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "it is {what}, neither a character device (/dev/kmsg) nor a regular file"
                    ),
                ),
            ));
        };
        Ok(Follower {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Reads what is new into `out` and says what had to be left out. An
    /// error means the log has to be opened again.
    pub fn poll(&mut self, out: &mut Vec<ReadLine>) -> io::Result<Dropped> {
        match &mut self.source {
            Source::Device {
                file,
                id,
                in_backlog,
                last_seq,
            } => {
                // A device replaced by anything else is opened again.
                let now = std::fs::metadata(&self.path)?;
                if (now.dev(), now.ino()) != *id {
                    return Err(io::Error::other(format!(
                        "the path now names another file ({})",
                        describe(&now)
                    )));
                }
                let overwritten = poll_device(file, in_backlog, last_seq, out)?;
                Ok(Dropped {
                    kmsg_overwritten: overwritten,
                    skipped_bytes: 0,
                })
            }
            Source::Regular(follow) => Ok(Dropped {
                kmsg_overwritten: 0,
                skipped_bytes: follow.poll(&self.path, out)?,
            }),
        }
    }
}

/// Reads kmsg records; returns how many the kernel overwrote unread.
fn poll_device(
    file: &mut impl Read,
    in_backlog: &mut bool,
    last_seq: &mut Option<u64>,
    out: &mut Vec<ReadLine>,
) -> io::Result<u64> {
    // A kmsg record is at most about 1 KiB; a smaller buffer fails with EINVAL.
    let mut buffer = vec![0u8; 8192];
    let mut overwritten = 0;
    for _ in 0..MAX_POLL_RECORDS {
        match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                let record = &buffer[..n.min(MAX_LINE)];
                let text = String::from_utf8_lossy(record);
                // Continuation lines follow the record after a newline.
                let first = text.split('\n').next().unwrap_or_default();
                if let Some(seq) = record_seq(first) {
                    if let Some(last) = *last_seq {
                        overwritten += seq.saturating_sub(last.saturating_add(1));
                    }
                    *last_seq = Some(seq);
                }
                out.push(ReadLine {
                    text: first.to_string(),
                    backlog: *in_backlog,
                    read_at: SystemTime::now(),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                *in_backlog = false;
                break;
            }
            // EPIPE: records were overwritten before they were read; the
            // next read continues with the oldest one still there (the gap
            // in sequence numbers counts them).
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(overwritten)
}

/// A kmsg record's sequence number (`PRI,SEQ,...`).
fn record_seq(record: &str) -> Option<u64> {
    record.split(',').nth(1)?.parse().ok()
}

#[cfg(test)]
#[path = "reader_tests.rs"]
mod tests;
