//! The Debian package (`cargo deb`, configured in Cargo.toml's
//! `[package.metadata.deb]`), built and installed: into a Debian root made by
//! mmdebstrap (dpkg, a shell and init-system-helpers), run with podman
//! without a network. There it is installed with `dpkg -i`, its unit is
//! enabled but not started, `gpuwatch validate` (the unit's ExecStartPre)
//! and `gpuwatch status --simulate` run, and `dpkg --purge` leaves the root
//! as it was.
//!
//! The package here is built with `cargo deb --no-build` from this test
//! build's binaries (cargo-deb strips them), not from a release build: the
//! same files, in the same places, with the same maintainer scripts, without
//! a release LTO build in CI. Users build it from a release build (docs/deploy.md).

mod common;
#[path = "deploy/podman.rs"]
mod podman;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::binary;
use podman::{BaseRecipe, Container, Podman};

/// The cargo-deb release scripts/test.sh installs.
const CARGO_DEB_VERSION: &str = "3.8.0";

/// A small Debian root that can install packages: dpkg, a shell, coreutils,
/// and init-system-helpers with Perl (deb-systemd-helper, which the
/// package's maintainer scripts call to enable the unit). Unsafe I/O during the
/// bootstrap: a throw-away root, three times faster.
const DEBIAN_ROOT: BaseRecipe = BaseRecipe {
    name: "localhost/gpuwatch-test-debian",
    variant: "custom",
    packages: &[
        "base-files",
        "base-passwd",
        "bash",
        "coreutils",
        "dash",
        "debianutils",
        "diffutils",
        "dpkg",
        "findutils",
        "grep",
        "init-system-helpers",
        "libc-bin",
        "libgcc-s1",
        // deb-systemd-helper is a Perl script.
        "perl-base",
        "sed",
    ],
    options: &[
        "--dpkgopt=force-unsafe-io",
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
    ],
    changes: &[],
};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Builds the package from the test build into `dir` and returns its path:
/// cargo-deb reads `target/release/...` assets from `$CARGO_TARGET_DIR/release/`,
/// here a directory holding links to the test build's binaries.
fn build_package(dir: &Path) -> PathBuf {
    let version = Command::new("cargo")
        .args(["deb", "--version"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(
        version.contains(CARGO_DEB_VERSION),
        "cargo-deb {CARGO_DEB_VERSION} is missing (found {:?}): run ./scripts/test.sh, or \
         `cargo install cargo-deb --version {CARGO_DEB_VERSION} --locked`",
        version.trim()
    );
    let release = dir.join("release");
    std::fs::create_dir_all(&release).expect("mkdir release");
    let gpuwatch = binary();
    podman::link_or_copy(&gpuwatch, &release.join("gpuwatch"));
    podman::link_or_copy(
        &podman::simulator_library(&gpuwatch),
        &release.join("libnvml_sim.so"),
    );
    let output_dir = dir.join("out");
    std::fs::create_dir_all(&output_dir).expect("mkdir out");
    let output = Command::new("cargo")
        .args(["deb", "--no-build", "--fast", "--quiet", "--output"])
        .arg(&output_dir)
        .env("CARGO_TARGET_DIR", dir)
        .current_dir(root())
        .output()
        .expect("run cargo deb");
    assert!(
        output.status.success(),
        "cargo deb failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let debs: Vec<PathBuf> = std::fs::read_dir(&output_dir)
        .expect("read out")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    assert_eq!(debs.len(), 1, "{debs:?}");
    debs[0].clone()
}

/// Runs `sh -c SCRIPT` in the container; (exit code, stdout + stderr).
fn sh(container: &str, script: &str) -> (i32, String) {
    let output = Podman::get().output(["exec", container, "sh", "-c", script]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

/// Like `sh`, and panics unless it exits 0; returns the output.
fn sh_ok(container: &str, script: &str) -> String {
    let (code, text) = sh(container, script);
    assert_eq!(code, 0, "`{script}` exited {code}:\n{text}");
    text
}

/// Every path of the root file system (but the kernel's and podman's
/// mounts), to compare before the installation and after the purge.
fn files(container: &str) -> BTreeSet<String> {
    sh_ok(
        container,
        "find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp -o -path /pkg \\) -prune -o -print",
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// What dpkg itself keeps about packages it has seen (its log, its
/// database's backups); everything else must be as before.
fn dpkg_bookkeeping(path: &str) -> bool {
    path == "/var/log/dpkg.log"
        || path.starts_with("/var/lib/dpkg/")
        || path.starts_with("/var/cache/debconf")
}

#[test]
fn the_debian_package_installs_runs_and_purges_cleanly() {
    let podman = Podman::get();
    let work = tempfile::tempdir().expect("tempdir");
    let deb = build_package(work.path());
    let image = podman.base_image(&DEBIAN_ROOT);
    let name = podman::name("deb");
    let _container = Container(name.clone());
    podman.ok([
        "run".to_string(),
        "--detach".into(),
        "--name".into(),
        name.clone(),
        "--pull=never".into(),
        "--network=none".into(),
        "--volume".into(),
        format!("{}:/pkg/gpuwatch.deb:ro", deb.display()),
        image,
        "sleep".into(),
        "infinity".into(),
    ]);
    // systemd's directory for the state of DynamicUser= services, which it
    // shares between them (so no package removes it).
    sh_ok(&name, "mkdir -m 0700 /var/lib/private");
    let before = files(&name);

    // dpkg -i: its dependencies are there; the unit is enabled (the
    // multi-user.target.wants link) and nothing starts it (no systemd runs
    // here, and the postinst has no start: only try-restart on upgrade).
    sh_ok(&name, "dpkg -i /pkg/gpuwatch.deb");
    let status = sh_ok(&name, "dpkg-query -W -f '${Status} ${Version}' gpuwatch");
    assert!(status.starts_with("install ok installed "), "{status}");
    let link = sh_ok(
        &name,
        "readlink /etc/systemd/system/multi-user.target.wants/gpuwatch.service",
    );
    assert!(
        link.trim().ends_with("/systemd/system/gpuwatch.service"),
        "{link}"
    );
    let postinst = sh_ok(&name, "cat /var/lib/dpkg/info/gpuwatch.postinst");
    assert!(
        postinst.contains("deb-systemd-helper enable gpuwatch.service"),
        "{postinst}"
    );
    assert!(
        !postinst.contains(" start "),
        "the postinst starts the service:\n{postinst}"
    );

    // What it installs, and which files are the administrator's.
    let listed = sh_ok(&name, "dpkg -L gpuwatch");
    for path in [
        "/usr/bin/gpuwatch",
        "/usr/lib/gpuwatch/libnvml_sim.so",
        "/usr/lib/systemd/system/gpuwatch.service",
        "/etc/gpuwatch/gpuwatch.toml",
        "/etc/default/gpuwatch",
        "/usr/share/gpuwatch/prometheus/gpuwatch-rules.yml",
        "/usr/share/gpuwatch/prometheus/prometheus.yml",
        "/usr/share/doc/gpuwatch/README.md",
        "/usr/share/doc/gpuwatch/docs/metrics-reference.md",
        "/usr/share/doc/gpuwatch/docs/configuration.md",
        "/usr/share/doc/gpuwatch/docs/webview.png",
        "/usr/share/doc/gpuwatch/copyright",
    ] {
        assert!(
            listed.lines().any(|l| l == path),
            "{path} not in:\n{listed}"
        );
    }
    let dashboards = std::fs::read_dir(root().join("grafana/dashboards"))
        .expect("grafana/dashboards")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .count();
    let packaged = listed
        .lines()
        .filter(|l| {
            l.starts_with("/usr/share/gpuwatch/grafana/dashboards/") && l.ends_with(".json")
        })
        .count();
    assert!(
        dashboards > 0 && packaged == dashboards,
        "{packaged} of {dashboards} dashboards"
    );
    let conffiles = sh_ok(&name, "cat /var/lib/dpkg/info/gpuwatch.conffiles");
    for conffile in ["/etc/gpuwatch/gpuwatch.toml", "/etc/default/gpuwatch"] {
        assert!(conffiles.lines().any(|l| l == conffile), "{conffiles}");
    }
    let unit = sh_ok(&name, "cat /usr/lib/systemd/system/gpuwatch.service");
    assert!(unit.contains("\nStateDirectory=gpuwatch\n"), "{unit}");

    // The unit's ExecStartPre, as systemd would run it, on the packaged config.
    let pre = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStartPre="))
        .expect("ExecStartPre");
    let validated = sh_ok(&name, pre);
    assert!(!validated.to_lowercase().contains("error"), "{validated}");
    // The simulator library is found where the package put it.
    let table = sh_ok(&name, "gpuwatch status --simulate");
    assert!(
        table.contains("GPUs") && table.contains("NVIDIA"),
        "{table}"
    );

    // Remove: the binary goes, the administrator's config stays.
    sh_ok(&name, "dpkg -r gpuwatch");
    let (code, _) = sh(&name, "test -e /usr/bin/gpuwatch");
    assert_ne!(code, 0, "/usr/bin/gpuwatch is left after dpkg -r");
    sh_ok(&name, "test -f /etc/gpuwatch/gpuwatch.toml");

    // Purge: the config, the unit's enablement and the history (as systemd
    // keeps it for DynamicUser=yes) go; the root is as before.
    sh_ok(
        &name,
        "mkdir /var/lib/private/gpuwatch && touch /var/lib/private/gpuwatch/history.db \
         && ln -s private/gpuwatch /var/lib/gpuwatch",
    );
    sh_ok(&name, "dpkg --purge gpuwatch");
    let (code, _) = sh(&name, "dpkg-query -W gpuwatch");
    assert_ne!(code, 0, "dpkg still knows gpuwatch after the purge");
    let after = files(&name);
    let added: Vec<&String> = after
        .difference(&before)
        .filter(|p| !dpkg_bookkeeping(p))
        .collect();
    let removed: Vec<&String> = before
        .difference(&after)
        .filter(|p| !dpkg_bookkeeping(p))
        .collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "after dpkg --purge, left behind: {added:?}; gone: {removed:?}"
    );
}
