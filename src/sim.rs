//! `--simulate`: find the NVML simulator library and choose its scenario.
//!
//! The simulator (the `nvml-sim` crate) is a drop-in `libnvidia-ml.so`; the
//! agent loads it through the same NVML adapter it uses on a real GPU node,
//! so the demo and the tests exercise the production path. The scenario is
//! checked here first, so a mistake in it is reported with file and line.

use std::ffi::{c_char, c_int, CStr, CString};
use std::path::{Path, PathBuf};

/// Environment variable naming the simulator library, overriding the search.
pub const ENV_LIBRARY: &str = "GPUWATCH_SIM_LIBRARY";
/// Environment variable the simulator reads its scenario from at `nvmlInit`
/// (the simulator crate's `ENV_SCENARIO`; a test keeps them equal).
pub const ENV_SCENARIO: &str = "GPUWATCH_SIM_SCENARIO";
/// Environment variable naming the file the simulator writes its kernel-log
/// records to (the simulator crate's `ENV_KMSG`).
pub const ENV_KMSG: &str = "GPUWATCH_SIM_KMSG";
/// File name of the simulator library.
pub const LIBRARY_FILE_NAME: &str = "libnvml_sim.so";

/// The scenario a simulated run uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScenarioChoice {
    /// A scenario shipped inside the simulator.
    Builtin(String),
    /// A scenario file.
    File(PathBuf),
}

impl ScenarioChoice {
    /// The value the simulator reads from `GPUWATCH_SIM_SCENARIO`.
    pub fn env_value(&self) -> String {
        match self {
            ScenarioChoice::Builtin(name) => format!("builtin:{name}"),
            ScenarioChoice::File(path) => path.display().to_string(),
        }
    }
}

/// Why a simulated run cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The simulator library is not where gpuwatch looks.
    #[error(
        "cannot find the NVML simulator library {LIBRARY_FILE_NAME}; looked in: {}. \
         Build it with `cargo build --workspace` (it lands next to the gpuwatch binary), \
         or set {ENV_LIBRARY} to its path",
        .searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    LibraryNotFound {
        /// Every place looked in.
        searched: Vec<PathBuf>,
    },
    /// The simulator library is there but cannot be used (not a shared
    /// library, or one built before scenario checks existed).
    #[error(
        "cannot use the NVML simulator library {path}: {source}. Rebuild it with \
         `cargo build --workspace`, or set {ENV_LIBRARY} to a current build"
    )]
    Library {
        /// The library file.
        path: PathBuf,
        /// What the dynamic loader said.
        source: libloading::Error,
    },
    /// The scenario file could not be read (missing, not a regular file,
    /// larger than 4 MiB).
    #[error("cannot read the scenario file: {source}. Built-in scenarios: {builtins}")]
    ReadScenario {
        /// Why it could not be read.
        source: crate::files::FileError,
        /// The simulator's built-in scenarios, comma-separated.
        builtins: String,
    },
    /// The scenario is not valid (the message names file, line and field).
    #[error("invalid scenario: {0}")]
    InvalidScenario(String),
}

/// The simulator library, loaded to check scenarios before the agent starts
/// (the agent's NVML adapter loads the same file again for the samples).
pub struct Simulator {
    path: PathBuf,
    library: libloading::Library,
}

/// `nvmlSimCheckScenario(source, origin, message, message_len)`.
type CheckScenario =
    unsafe extern "C" fn(*const c_char, *const c_char, *mut c_char, usize) -> c_int;
/// `nvmlSimBuiltinScenarios(names, names_len)`.
type BuiltinScenarios = unsafe extern "C" fn(*mut c_char, usize) -> c_int;

/// What `nvmlSimCheckScenario` returns for a scenario that parses.
const CHECK_VALID: c_int = 0;
/// What it returns for one that does not (the message is written).
const CHECK_INVALID: c_int = 1;

impl Simulator {
    /// Loads the simulator library at `path`.
    pub fn load(path: &Path) -> Result<Simulator, SimError> {
        // SAFETY: the simulator library has no initialisers with side
        // effects; it reads its scenario only at nvmlInit.
        let library =
            unsafe { libloading::Library::new(path) }.map_err(|source| SimError::Library {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Simulator {
            path: path.to_path_buf(),
            library,
        })
    }

    /// The library file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn symbol<T>(&self, name: &[u8]) -> Result<libloading::Symbol<'_, T>, SimError> {
        // SAFETY: the types above are the exported functions' signatures.
        unsafe { self.library.get::<T>(name) }.map_err(|source| SimError::Library {
            path: self.path.clone(),
            source,
        })
    }

    /// The simulator's built-in scenario names.
    pub fn builtin_names(&self) -> Result<Vec<String>, SimError> {
        let list = self.symbol::<BuiltinScenarios>(b"nvmlSimBuiltinScenarios")?;
        let mut buf = vec![0 as c_char; 4096];
        // SAFETY: buf is valid for its length; the function NUL-terminates.
        let rc = unsafe { list(buf.as_mut_ptr(), buf.len()) };
        if rc != CHECK_VALID {
            return Ok(Vec::new());
        }
        // SAFETY: NUL-terminated inside buf (checked by the library).
        let text = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy();
        Ok(text
            .split(',')
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect())
    }

    /// Parses `source` as the simulator will; the error names `origin`, the
    /// line and the field.
    pub fn check(&self, source: &str, origin: &str) -> Result<(), SimError> {
        let check = self.symbol::<CheckScenario>(b"nvmlSimCheckScenario")?;
        let nul = |text: &str| {
            CString::new(text).map_err(|_| {
                SimError::InvalidScenario(format!(
                    "{origin}: contains a NUL byte: not a TOML scenario"
                ))
            })
        };
        let (source, origin_c) = (nul(source)?, nul(origin)?);
        let mut message = vec![0 as c_char; 2048];
        // SAFETY: both strings are NUL-terminated; message is valid for its length.
        let rc = unsafe {
            check(
                source.as_ptr(),
                origin_c.as_ptr(),
                message.as_mut_ptr(),
                message.len(),
            )
        };
        match rc {
            CHECK_VALID => Ok(()),
            CHECK_INVALID => {
                // SAFETY: the library NUL-terminates inside the buffer.
                let text = unsafe { CStr::from_ptr(message.as_ptr()) };
                Err(SimError::InvalidScenario(
                    text.to_string_lossy().into_owned(),
                ))
            }
            other => Err(SimError::InvalidScenario(format!(
                "{origin}: the simulator could not check it (code {other})"
            ))),
        }
    }

    /// Resolves `--simulate [SCENARIO]`: no value means the built-in demo; a
    /// built-in name (or `builtin:NAME`) picks a shipped scenario; anything
    /// else is a file, parsed now so its errors carry file and line.
    pub fn choose_scenario(&self, value: Option<&str>) -> Result<ScenarioChoice, SimError> {
        let value = value.unwrap_or("demo");
        let name = value.strip_prefix("builtin:").unwrap_or(value);
        let builtins = self.builtin_names()?;
        if builtins.iter().any(|b| b == name) && !Path::new(value).exists() {
            return Ok(ScenarioChoice::Builtin(name.to_string()));
        }
        let path = PathBuf::from(value);
        let source = crate::files::read_bounded_string(&path, crate::files::MAX_SCENARIO_BYTES)
            .map_err(|source| SimError::ReadScenario {
                source,
                builtins: builtins.join(", "),
            })?;
        self.check(&source, &path.display().to_string())?;
        let absolute = std::fs::canonicalize(&path).unwrap_or(path);
        Ok(ScenarioChoice::File(absolute))
    }
}

/// Finds the simulator library: `$GPUWATCH_SIM_LIBRARY`, next to the
/// executable (and its `deps/`, where cargo builds it), then the install
/// locations.
pub fn locate_library() -> Result<PathBuf, SimError> {
    if let Some(path) = std::env::var_os(ENV_LIBRARY) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(SimError::LibraryNotFound {
                searched: vec![path],
            })
        };
    }
    let mut searched = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        // cargo rebuilds deps/ whenever it builds gpuwatch; the copy next to
        // the binary is refreshed only by workspace builds, so deps/ first.
        searched.push(dir.join("deps").join(LIBRARY_FILE_NAME));
        searched.push(dir.join(LIBRARY_FILE_NAME));
        if let Some(parent) = dir.parent() {
            // A test binary lives in target/<profile>/deps/.
            searched.push(parent.join(LIBRARY_FILE_NAME));
            searched.push(parent.join("lib/gpuwatch").join(LIBRARY_FILE_NAME));
        }
    }
    searched.push(PathBuf::from("/usr/local/lib/gpuwatch").join(LIBRARY_FILE_NAME));
    searched.push(PathBuf::from("/usr/lib/gpuwatch").join(LIBRARY_FILE_NAME));
    match searched.iter().find(|p| p.is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(SimError::LibraryNotFound { searched }),
    }
}

/// Points the simulator at `choice`. Must run before any thread starts: it
/// sets a process environment variable that the simulator reads at `nvmlInit`.
pub fn select_scenario(choice: &ScenarioChoice) {
    std::env::set_var(ENV_SCENARIO, choice.env_value());
}

/// The health readers' inputs when the GPUs are simulated — by `--simulate`
/// or by the simulator library with its scenario in the environment —:
/// the simulator's kernel log (`GPUWATCH_SIM_KMSG`) if it writes one;
/// `None` on real GPUs.
pub fn health_inputs() -> Option<crate::health::settings::SimulatedInputs> {
    std::env::var_os(ENV_SCENARIO)?;
    Some(crate::health::settings::SimulatedInputs {
        kernel_log: std::env::var_os(ENV_KMSG)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simulator() -> Simulator {
        let path = locate_library().expect("the simulator library is built beside the tests");
        Simulator::load(&path).expect("loads")
    }

    #[test]
    fn no_value_means_the_demo() {
        let sim = simulator();
        assert_eq!(
            sim.choose_scenario(None).expect("demo"),
            ScenarioChoice::Builtin("demo".into())
        );
        assert_eq!(
            sim.choose_scenario(Some("builtin:h100x8"))
                .expect("builtin"),
            ScenarioChoice::Builtin("h100x8".into())
        );
    }

    #[test]
    fn the_builtin_names_are_the_simulators() {
        assert_eq!(
            simulator().builtin_names().expect("listed"),
            nvml_sim::builtin::NAMES
        );
    }

    #[test]
    fn the_environment_names_are_the_simulators() {
        assert_eq!(ENV_SCENARIO, nvml_sim::ENV_SCENARIO);
        assert_eq!(ENV_KMSG, nvml_sim::ENV_KMSG);
        assert_eq!(LIBRARY_FILE_NAME, nvml_sim::LIBRARY_FILE_NAME);
    }

    #[test]
    fn a_bad_scenario_file_names_file_and_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("broken.toml");
        std::fs::write(
            &path,
            "name = \"x\"\n[[gpu]]\nname = \"A\"\nbogus_key = 1\n",
        )
        .expect("write");
        let error = simulator()
            .choose_scenario(path.to_str())
            .expect_err("invalid");
        let text = error.to_string();
        assert!(text.contains("broken.toml:4"), "{text}");
        assert!(text.contains("bogus_key"), "{text}");
    }

    #[test]
    fn a_missing_scenario_lists_the_builtins() {
        let error = simulator()
            .choose_scenario(Some("/nonexistent/x.toml"))
            .expect_err("missing");
        assert!(error.to_string().contains("thermal-incident"), "{error}");
    }

    #[test]
    fn a_file_that_is_no_library_says_what_to_do() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(LIBRARY_FILE_NAME);
        std::fs::write(&path, "not ELF").expect("write");
        let error = Simulator::load(&path).err().expect("refused");
        let text = error.to_string();
        assert!(text.contains("cargo build --workspace"), "{text}");
    }
}
