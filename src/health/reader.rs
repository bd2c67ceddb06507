//! Follows the kernel log: `/dev/kmsg` (a character device: one record per
//! `read`, the records since boot first) or a regular file, followed like
//! `tail -F` (read from the start, then new lines as they are appended; a
//! truncated or replaced file is read again from its start).
//!
//! Memory is bounded: a line longer than [`MAX_LINE`] is cut, and one poll
//! reads at most [`MAX_POLL_BYTES`].

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::parse::MAX_LINE;

/// Most bytes one poll reads from a regular file (the rest waits for the
/// next poll).
pub const MAX_POLL_BYTES: usize = 1 << 20;
/// Most records one poll reads from `/dev/kmsg`.
const MAX_POLL_RECORDS: usize = 4096;

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

/// One line read, and whether it was already in the log when the reader
/// opened it (the backlog).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadLine {
    /// The line, without its newline, at most [`MAX_LINE`] bytes.
    pub text: String,
    /// Logged before the reader opened the log.
    pub backlog: bool,
}

enum Source {
    /// `/dev/kmsg`: each read returns one record.
    Device {
        file: File,
        /// Still reading the records that were there at open.
        in_backlog: bool,
    },
    /// A regular file followed by offset.
    Regular {
        file: File,
        inode: u64,
        offset: u64,
        /// Bytes up to here were there at open.
        backlog_end: u64,
        /// An unfinished last line.
        partial: Vec<u8>,
    },
}

/// An open kernel log.
pub struct Follower {
    path: PathBuf,
    source: Source,
}

impl Follower {
    /// Opens `path`; a character device is read as `/dev/kmsg`.
    pub fn open(path: &Path) -> Result<Follower, OpenError> {
        let metadata = std::fs::metadata(path).map_err(|e| OpenError::new(path, e))?;
        let source = if metadata.file_type().is_char_device() {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map_err(|e| OpenError::new(path, e))?;
            Source::Device {
                file,
                in_backlog: true,
            }
        } else if metadata.is_file() {
            let file = File::open(path).map_err(|e| OpenError::new(path, e))?;
            let metadata = file.metadata().map_err(|e| OpenError::new(path, e))?;
            Source::Regular {
                file,
                inode: metadata.ino(),
                offset: 0,
                backlog_end: metadata.len(),
                partial: Vec::new(),
            }
        } else {
            return Err(OpenError::new(
                path,
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "neither a character device nor a regular file",
                ),
            ));
        };
        Ok(Follower {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads what is new into `out`. An error means the log has to be
    /// opened again.
    pub fn poll(&mut self, out: &mut Vec<ReadLine>) -> io::Result<()> {
        match &mut self.source {
            Source::Device { file, in_backlog } => poll_device(file, in_backlog, out),
            Source::Regular { .. } => self.poll_regular(out),
        }
    }

    fn poll_regular(&mut self, out: &mut Vec<ReadLine>) -> io::Result<()> {
        let Source::Regular {
            file,
            inode,
            offset,
            backlog_end,
            partial,
        } = &mut self.source
        else {
            return Ok(());
        };
        // tail -F: a replaced file is followed from its start, a truncated
        // one too. Lines in the new content are new, not backlog.
        let now = std::fs::metadata(&self.path)?;
        if now.ino() != *inode {
            *file = File::open(&self.path)?;
            *inode = file.metadata()?.ino();
            (*offset, *backlog_end) = (0, 0);
            partial.clear();
        } else if now.len() < *offset {
            (*offset, *backlog_end) = (0, 0);
            partial.clear();
        }
        file.seek(SeekFrom::Start(*offset))?;
        let mut buffer = Vec::new();
        file.take(MAX_POLL_BYTES as u64).read_to_end(&mut buffer)?;
        let mut start = 0;
        for (i, byte) in buffer.iter().enumerate() {
            if *byte != b'\n' {
                continue;
            }
            let line_end = *offset + i as u64 + 1;
            push_bytes(partial, &buffer[start..i]);
            out.push(ReadLine {
                text: String::from_utf8_lossy(partial).into_owned(),
                backlog: line_end <= *backlog_end,
            });
            partial.clear();
            start = i + 1;
        }
        push_bytes(partial, &buffer[start..]);
        *offset += buffer.len() as u64;
        Ok(())
    }
}

/// Appends to an unfinished line, keeping at most [`MAX_LINE`] bytes.
fn push_bytes(partial: &mut Vec<u8>, bytes: &[u8]) {
    let room = MAX_LINE.saturating_sub(partial.len());
    partial.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

fn poll_device(file: &mut File, in_backlog: &mut bool, out: &mut Vec<ReadLine>) -> io::Result<()> {
    // A kmsg record is at most about 1 KiB; a smaller buffer fails with EINVAL.
    let mut buffer = vec![0u8; 8192];
    for _ in 0..MAX_POLL_RECORDS {
        match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                let record = &buffer[..n.min(MAX_LINE)];
                let text = String::from_utf8_lossy(record);
                // Continuation lines follow the record after a newline.
                let first = text.split('\n').next().unwrap_or_default();
                out.push(ReadLine {
                    text: first.to_string(),
                    backlog: *in_backlog,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                *in_backlog = false;
                break;
            }
            // EPIPE: records were overwritten before they were read; the
            // next read continues with the oldest one still there.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
}
