//! Reading files named from outside (the configuration, the web
//! configuration, secrets, certificates, scenarios) with a size limit.
//!
//! A path in a configuration file may point anywhere: at `/dev/zero` (a
//! plain read never ends and allocates until it fails), at a FIFO (a plain
//! open blocks until a writer comes, forever), at a 1 GiB log file (read
//! whole, it costs 1 GiB of memory). [`read_bounded`] opens without
//! blocking, takes only regular files (after following symlinks: Kubernetes
//! Secret volumes and certbot's `live/` are symlinks) and reads at most the
//! limit given, so a wrong path is an error that names it, never a hang or
//! an allocation failure. [`read_prefix`] reads the first bytes of a file
//! of any size the same way (sysfs attributes of the PCI scan). Other procfs
//! and sysfs reads (the sampler's) are of another kind and do not come here.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The most a configuration file (TOML, the web configuration) may hold.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// The most a secret file (`bearer_token_file`, `password_file`) may hold.
pub const MAX_SECRET_BYTES: u64 = 64 << 10;
/// The most a PEM file (certificate chain, key, CA bundle) may hold.
pub const MAX_PEM_BYTES: u64 = 1 << 20;
/// The most a simulator scenario file may hold.
pub const MAX_SCENARIO_BYTES: u64 = 4 << 20;

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Opening or reading failed (missing, no permission, an I/O error).
    #[error("cannot read {}: {source}; check the path and that the agent may read it", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The path names a directory, a device, a FIFO or a socket.
    #[error("{} is {what}, not a regular file; give the path of a file", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead, e.g. "a FIFO (named pipe)".
        what: &'static str,
    },
    /// The file is larger than the limit for its kind.
    #[error("{} is larger than {limit} bytes, the most this file may hold; is it the right file?", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The file is not UTF-8 text.
    #[error("{} is not UTF-8 text; give a text file", path.display())]
    NotText {
        /// The file.
        path: PathBuf,
    },
}

impl FileError {
    /// The closest [`std::io::ErrorKind`], for callers that compare kinds
    /// (the TLS reloader tells one bad state from another by it).
    pub fn kind(&self) -> std::io::ErrorKind {
        match self {
            FileError::Io { source, .. } => source.kind(),
            FileError::NotRegular { .. } => std::io::ErrorKind::InvalidInput,
            FileError::TooLarge { .. } => std::io::ErrorKind::FileTooLarge,
            FileError::NotText { .. } => std::io::ErrorKind::InvalidData,
        }
    }
}

/// Reads all of `path`, a regular file (symlinks followed) of at most
/// `max_bytes`. Opening never blocks (`O_NONBLOCK`, so a FIFO cannot hang
/// it) and at most `max_bytes + 1` bytes are ever read, even from a file
/// that grows while it is read.
pub fn read_bounded(path: &Path, max_bytes: u64) -> Result<Vec<u8>, FileError> {
    let (file, metadata) = open_regular(path)?;
    let too_large = || FileError::TooLarge {
        path: path.to_path_buf(),
        limit: max_bytes,
    };
    if metadata.len() > max_bytes {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    read_at_most(file, max_bytes.saturating_add(1), &mut bytes).map_err(|source| {
        FileError::Io {
            path: path.to_path_buf(),
            source,
        }
    })?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large());
    }
    Ok(bytes)
}

/// The first `max_bytes` of `path`, a regular file (symlinks followed),
/// whatever its size: for sysfs attributes (`vendor`, `class`), whose size
/// the kernel reports as a page whatever they hold, and whose value is in
/// their first bytes. Opening never blocks and no more than `max_bytes` is
/// ever read, so a FIFO, `/dev/zero` or a 500 MB file in their place costs
/// nothing.
pub fn read_prefix(path: &Path, max_bytes: u64) -> Result<Vec<u8>, FileError> {
    let (file, _) = open_regular(path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(max_bytes.min(4096)).unwrap_or(0));
    read_at_most(file, max_bytes, &mut bytes).map_err(|source| FileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(bytes)
}

/// Opens `path` for reading without blocking (`O_NONBLOCK`: a FIFO without
/// a writer does not hang the open) and checks, on the open file, that it
/// is a regular file.
fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata), FileError> {
    let io = |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io)?;
    let metadata = file.metadata().map_err(io)?;
    let file_type = metadata.file_type();
    if !file_type.is_file() {
        let what = if file_type.is_dir() {
            "a directory"
        } else if file_type.is_fifo() {
            "a FIFO (named pipe)"
        } else if file_type.is_char_device() {
            "a character device"
        } else if file_type.is_block_device() {
            "a block device"
        } else if file_type.is_socket() {
            "a socket"
        } else {
            "not a file"
        };
        return Err(FileError::NotRegular {
            path: path.to_path_buf(),
            what,
        });
    }
    Ok((file, metadata))
}

/// [`read_bounded`], as UTF-8 text.
pub fn read_bounded_string(path: &Path, max_bytes: u64) -> Result<String, FileError> {
    String::from_utf8(read_bounded(path, max_bytes)?).map_err(|_| FileError::NotText {
        path: path.to_path_buf(),
    })
}

/// Reads at most `limit` bytes (callers that must tell "fills the limit"
/// from "grew past it" ask for one more).
fn read_at_most(file: File, limit: u64, into: &mut Vec<u8>) -> std::io::Result<()> {
    file.take(limit).read_to_end(into).map(|_| ())
}

#[cfg(test)]
mod tests;
