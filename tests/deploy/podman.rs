//! Podman for the tests that run the deploy artefacts (tests/container.rs,
//! tests/debian_package.rs): Debian's podman with runc, its storage and
//! configuration under `target/tmp/podman/`, and base images made by
//! mmdebstrap from Debian's archive (no container registry is reachable:
//! every command runs with `--pull=never`, and containers use the host's
//! network or none, talking to 127.0.0.1 only).
//!
//! The settings, found by trying on the CI machine (cgroup v1 hybrid layout,
//! no systemd as PID 1, a hard `nofile` limit of 20000):
//! - runtime `runc` and cgroup manager `cgroupfs`;
//! - default ulimits below the hard limits (podman's default `nofile`
//!   1048576 makes runc fail with "error setting rlimits ... operation not
//!   permitted");
//! - events to a file (no journald), and every path under the test directory
//!   (`CONTAINERS_CONF`, `CONTAINERS_STORAGE_CONF`), so the tests never touch
//!   the host's own containers or /etc/cni.

#![allow(dead_code)] // Each test binary uses its own subset.

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// Longest a podman or mmdebstrap command may take before the test fails
/// (an image build from the debug binary takes about 20 s on 2 cores).
const COMMAND_TIMEOUT_S: u32 = 300;

/// Debian packages the harness needs, with the binary each one provides.
const TOOLS: [(&str, &str); 4] = [
    ("podman", "podman"),
    ("runc", "runc"),
    ("mmdebstrap", "mmdebstrap"),
    // podman builds its pod infra ("pause") image from catatonit.
    ("catatonit", "catatonit"),
];

/// Podman with the tests' configuration and storage.
pub struct Podman {
    dir: PathBuf,
}

/// What a base image is made of: mmdebstrap's variant, its packages and
/// the hooks that finish the root; the image tag carries a hash of all of it.
pub struct BaseRecipe {
    /// Image name (without tag), e.g. `localhost/gpuwatch-test-runtime`.
    pub name: &'static str,
    /// mmdebstrap's `--variant`.
    pub variant: &'static str,
    /// Packages (`--include`).
    pub packages: &'static [&'static str],
    /// Extra mmdebstrap options (hooks, dpkg options).
    pub options: &'static [&'static str],
    /// `podman import --change` instructions (USER, ENV, ...).
    pub changes: &'static [&'static str],
}

impl Podman {
    /// The harness, set up once per test binary. Panics, saying what to
    /// install, when a tool is missing (never skips).
    pub fn get() -> &'static Podman {
        static PODMAN: OnceLock<Podman> = OnceLock::new();
        PODMAN.get_or_init(Podman::set_up)
    }

    fn set_up() -> Podman {
        let missing: Vec<&str> = TOOLS
            .iter()
            .filter(|(_, binary)| find_in_path(binary).is_none())
            .map(|(package, _)| *package)
            .collect();
        assert!(
            missing.is_empty(),
            "missing Debian packages: {} (run ./scripts/test.sh, or as root: apt-get install {})",
            missing.join(" "),
            missing.join(" ")
        );
        // /proc/self belongs to the process's effective user.
        let uid = std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(u32::MAX);
        assert_eq!(
            uid, 0,
            "these tests run rootful podman (as CI does): run them as root"
        );
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("podman");
        for sub in ["storage", "run/libpod", "networks"] {
            std::fs::create_dir_all(dir.join(sub))
                .unwrap_or_else(|e| panic!("create {}: {e}", dir.join(sub).display()));
        }
        let d = dir.display();
        let containers = format!(
            "[containers]\n\
             default_ulimits = [\"nofile=16384:16384\", \"nproc=32768:32768\"]\n\
             [engine]\n\
             runtime = \"runc\"\n\
             cgroup_manager = \"cgroupfs\"\n\
             events_logger = \"file\"\n\
             tmp_dir = \"{d}/run/libpod\"\n\
             volume_path = \"{d}/storage/volumes\"\n\
             [network]\n\
             network_config_dir = \"{d}/networks\"\n"
        );
        let storage = format!(
            "[storage]\ndriver = \"overlay\"\nrunroot = \"{d}/run\"\ngraphroot = \"{d}/storage\"\n"
        );
        write(&dir.join("containers.conf"), &containers);
        write(&dir.join("storage.conf"), &storage);
        let podman = Podman { dir };
        podman.remove_leftovers();
        podman
    }

    /// The directory of the configuration, storage and cached images.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `podman ARGS` with the tests' configuration, under a time limit.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new("timeout");
        command
            .args(["--kill-after=10", &COMMAND_TIMEOUT_S.to_string(), "podman"])
            .args(args)
            .env("CONTAINERS_CONF", self.dir.join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", self.dir.join("storage.conf"))
            .stdin(Stdio::null());
        command
    }

    /// Runs `podman ARGS` and returns its output, whatever the exit status.
    pub fn output<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = self.command(args);
        command
            .output()
            .unwrap_or_else(|e| panic!("run {command:?}: {e}"))
    }

    /// Runs `podman ARGS`; panics with its output unless it exits 0.
    /// Returns stdout.
    pub fn ok<I, S>(&self, args: I) -> String
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<std::ffi::OsString> =
            args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let output = self.output(&args);
        assert!(
            output.status.success(),
            "podman {:?} failed ({}):\n{}{}",
            args,
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The base image of `recipe`, made by mmdebstrap and imported into the
    /// tests' storage the first time, then reused (its tag is a hash of the
    /// recipe and the host's Debian release, so a changed recipe makes a new
    /// one). Returns the image reference.
    pub fn base_image(&self, recipe: &BaseRecipe) -> String {
        let suite = host_suite();
        let key = format!(
            "{suite}|{}|{:?}|{:?}|{:?}",
            recipe.variant, recipe.packages, recipe.options, recipe.changes
        );
        let image = format!("{}:{:016x}", recipe.name, fnv1a(key.as_bytes()));
        if self.output(["image", "exists", &image]).status.success() {
            return image;
        }
        let tar = self.dir.join(format!("base-{}.tar", std::process::id()));
        let mut command = Command::new("timeout");
        command
            .args([&COMMAND_TIMEOUT_S.to_string(), "mmdebstrap", "--quiet"])
            .arg(format!("--variant={}", recipe.variant))
            .arg(format!("--include={}", recipe.packages.join(",")))
            .args(recipe.options)
            .args(["--format=tar", &suite])
            .arg(&tar)
            // The host's apt sources, not a mirror name: the same archive
            // (and snapshot, where pinned) as the host's packages.
            .arg(apt_sources())
            .stdin(Stdio::null());
        let output = command
            .output()
            .unwrap_or_else(|e| panic!("run {command:?}: {e}"));
        assert!(
            output.status.success(),
            "{command:?} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let mut import: Vec<String> = vec!["import".into()];
        for change in recipe.changes {
            import.push("--change".into());
            import.push((*change).into());
        }
        import.push(tar.display().to_string());
        import.push(image.clone());
        self.ok(&import);
        let _ = std::fs::remove_file(&tar);
        image
    }

    /// Removes containers and pods that a test binary of an earlier, killed
    /// run left behind: their names end in `-PID` of a process that is gone.
    fn remove_leftovers(&self) {
        for (kind, list) in [
            ("pod", ["pod", "ps", "--format", "{{.Name}}"]),
            ("container", ["ps", "-a", "--format", "{{.Names}}"]),
        ] {
            let names = self.ok(list);
            for name in names.lines() {
                let Some(pid) = name.rsplit('-').next().and_then(|p| p.parse::<u32>().ok()) else {
                    continue;
                };
                if name.starts_with("gpuwatch-test-")
                    && !Path::new(&format!("/proc/{pid}")).exists()
                {
                    let args: &[&str] = if kind == "pod" {
                        &["pod", "rm", "-f", name]
                    } else {
                        &["rm", "-f", "-v", name]
                    };
                    let _ = self.output(args);
                }
            }
        }
        // Images of earlier runs that a new build replaced, and volumes
        // nothing uses any more.
        let _ = self.output(["image", "prune", "-f"]);
        let _ = self.output(["volume", "prune", "-f"]);
    }
}

/// A name for a container or pod of this test process: `gpuwatch-test-WHAT-PID`.
pub fn name(what: &str) -> String {
    format!("gpuwatch-test-{what}-{}", std::process::id())
}

/// Removes a container when dropped (the test may have failed half-way).
pub struct Container(pub String);

impl Drop for Container {
    fn drop(&mut self) {
        // -v: with its anonymous volumes.
        let _ = Podman::get().output(["rm", "--force", "--volumes", "--time", "2", &self.0]);
    }
}

/// The host's Debian release (`VERSION_CODENAME` of /etc/os-release): the
/// base images use the same glibc as the binaries built here.
fn host_suite() -> String {
    let release = std::fs::read_to_string("/etc/os-release")
        .unwrap_or_else(|e| panic!("/etc/os-release: {e} (these tests need a Debian host)"));
    release
        .lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| panic!("no VERSION_CODENAME in /etc/os-release:\n{release}"))
}

/// The host's apt sources file, passed to mmdebstrap.
fn apt_sources() -> PathBuf {
    for candidate in [
        "/etc/apt/sources.list.d/debian.sources",
        "/etc/apt/sources.list",
    ] {
        let path = Path::new(candidate);
        if std::fs::metadata(path).is_ok_and(|m| m.len() > 0) {
            return path.to_path_buf();
        }
    }
    panic!("no apt sources (/etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list) for mmdebstrap");
}

fn find_in_path(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([
            PathBuf::from("/usr/sbin"),
            PathBuf::from("/usr/libexec/podman"),
        ])
        .map(|dir| dir.join(binary))
        .find(|p| p.is_file())
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// FNV-1a: a hash that stays the same across Rust releases (the image tags
/// outlive the test binary).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Hard-links `from` to `to` (copies across file systems).
pub fn link_or_copy(from: &Path, to: &Path) {
    let _ = std::fs::remove_file(to);
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
    }
}

/// The simulator library of the test build, found as the binary finds it
/// (`deps/` first: cargo rebuilds it there with every test build).
pub fn simulator_library(binary: &Path) -> PathBuf {
    let dir = binary.parent().expect("the binary has a directory");
    [dir.join("deps/libnvml_sim.so"), dir.join("libnvml_sim.so")]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no libnvml_sim.so next to {}", binary.display()))
}
