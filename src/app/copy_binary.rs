//! `gpuwatch copy-binary PATH`: copies the running gpuwatch executable to
//! PATH. The container image has no shell and no `cp` (distroless), so an
//! initContainer that puts gpuwatch into another pod (node-problem-
//! detector's, for `gpuwatch health --npd`) runs this instead.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Copies the running executable to `to` (mode 0755), through a temporary
/// file next to it renamed into place, so a reader never sees half a
/// binary.
pub fn copy_binary(to: &Path) -> anyhow::Result<()> {
    let me = std::env::current_exe().context("cannot find the running gpuwatch executable")?;
    let bytes = std::fs::read(&me).with_context(|| format!("cannot read {}", me.display()))?;
    let mut temp_name = to.as_os_str().to_owned();
    temp_name.push(format!(".tmp-{}", std::process::id()));
    let temp = PathBuf::from(temp_name);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(&temp)
        .and_then(|mut file| {
            file.write_all(&bytes)?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temp, to));
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(error).with_context(|| {
            format!(
                "cannot copy gpuwatch to {} (is its directory mounted and writable?)",
                to.display()
            )
        });
    }
    println!("copied {} to {}", me.display(), to.display());
    Ok(())
}
