//! `--simulate`: find the NVML simulator library and choose its scenario.
//!
//! The simulator (the `nvml-sim` crate) is a drop-in `libnvidia-ml.so`; the
//! agent loads it through the same NVML adapter it uses on a real GPU node,
//! so the demo and the tests exercise the production path. The scenario is
//! checked here first, so a mistake in it is reported with file and line.

use std::path::{Path, PathBuf};

use nvml_sim::{builtin, Scenario, LIBRARY_FILE_NAME};

/// Environment variable naming the simulator library, overriding the search.
pub const ENV_LIBRARY: &str = "GPUWATCH_SIM_LIBRARY";

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
    /// The scenario file could not be read (missing, not a regular file,
    /// larger than [`crate::files::MAX_SCENARIO_BYTES`]).
    #[error("cannot read the scenario file: {0}. Built-in scenarios: {names}", names = builtin::NAMES.join(", "))]
    ReadScenario(#[from] crate::files::FileError),
    /// The scenario is not valid.
    #[error("invalid scenario: {0}")]
    InvalidScenario(String),
}

/// Resolves `--simulate [SCENARIO]`: no value means the built-in demo; a
/// built-in name (or `builtin:NAME`) picks a shipped scenario; anything else
/// is a file, parsed now so its errors carry file and line.
pub fn choose_scenario(value: Option<&str>) -> Result<ScenarioChoice, SimError> {
    let value = value.unwrap_or("demo");
    let name = value.strip_prefix("builtin:").unwrap_or(value);
    if builtin::get(name).is_some() && !Path::new(value).exists() {
        return Ok(ScenarioChoice::Builtin(name.to_string()));
    }
    let path = PathBuf::from(value);
    let source = crate::files::read_bounded_string(&path, crate::files::MAX_SCENARIO_BYTES)?;
    Scenario::parse(&source, &path.display().to_string())
        .map_err(|e| SimError::InvalidScenario(e.to_string()))?;
    let absolute = std::fs::canonicalize(&path).unwrap_or(path);
    Ok(ScenarioChoice::File(absolute))
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
    std::env::set_var(nvml_sim::ENV_SCENARIO, choice.env_value());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_value_means_the_demo() {
        assert_eq!(
            choose_scenario(None).expect("demo"),
            ScenarioChoice::Builtin("demo".into())
        );
        assert_eq!(
            choose_scenario(Some("builtin:h100x8")).expect("builtin"),
            ScenarioChoice::Builtin("h100x8".into())
        );
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
        let error = choose_scenario(path.to_str()).expect_err("invalid");
        let text = error.to_string();
        assert!(text.contains("broken.toml:4"), "{text}");
    }

    #[test]
    fn a_missing_scenario_lists_the_builtins() {
        let error = choose_scenario(Some("/nonexistent/x.toml")).expect_err("missing");
        assert!(error.to_string().contains("thermal-incident"), "{error}");
    }
}
