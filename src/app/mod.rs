//! The commands, as the binary runs them: `run` (the running agent itself
//! is [`agent::run`]), `validate` and `status` here, `history` and `events`
//! in [`history`], `alerts` in [`alerts`], `silence` in [`silence`],
//! `health` (node-problem-detector's plugin) in [`npd`], `copy-binary` in
//! [`copy_binary`]. Errors here are `anyhow`: this is the edge where they
//! meet a person.

pub mod agent;
pub mod alerts;
pub mod copy_binary;
pub mod history;
pub mod jobs;
pub mod npd;
mod remediation;
pub mod silence;
mod storage;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use tokio::net::TcpListener;
use tracing::info;
use tracing_subscriber::EnvFilter;

use crate::config::{parse_listen, Config, ConfigError, LogFormat};
use crate::exporter::compat::MetricsCompat;
use crate::gpu::nvml::Driver;
use crate::http::webconfig::{self, WebSecurity};
use crate::sampler::procnames::ProcessNames;
use crate::sampler::reader::NodeReader;
use crate::sim;

use agent::{HistoryPlan, Plan};

/// Where GPU data comes from: the flags shared by `run` and `status`.
#[derive(Debug, Clone, Default)]
pub struct SourceOptions {
    /// Configuration file.
    pub config: Option<PathBuf>,
    /// `--nvml-library`.
    pub nvml_library: Option<PathBuf>,
    /// `--simulate [SCENARIO]`: `Some(None)` is the built-in demo.
    pub simulate: Option<Option<String>>,
}

/// `gpuwatch run`.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// GPU source and configuration.
    pub source: SourceOptions,
    /// `--listen`.
    pub listen: Option<String>,
    /// `--metrics-compat` values as given (each may be a comma-separated
    /// list); when any is given they replace `server.metrics_compat`.
    pub metrics_compat: Vec<String>,
    /// `--metrics-detail` values as given (each may be a comma-separated
    /// list); when any is given they replace `exporter.detail`.
    pub metrics_detail: Vec<String>,
    /// `--web-config`: TLS and basic auth (overrides `server.web_config`).
    pub web_config: Option<PathBuf>,
    /// `--history-db`: overrides history.path.
    pub history_db: Option<PathBuf>,
    /// `--reset-history`: move the existing database aside first.
    pub reset_history: bool,
    /// `--no-history`: record no history this run.
    pub no_history: bool,
}

/// The NVML library to load and how to name processes, after flags, config
/// and `--simulate` are weighed.
struct Source {
    library: Option<PathBuf>,
    proc_root: Option<PathBuf>,
    simulated: Option<sim::ScenarioChoice>,
}

fn load_config(path: Option<&Path>) -> anyhow::Result<Config> {
    Config::load(path).map_err(|error| match error {
        ConfigError::Invalid(_) => {
            anyhow::anyhow!("{error}\nRun `gpuwatch validate --config FILE` after fixing it.")
        }
        other => anyhow::Error::new(other),
    })
}

/// Resolves the source. With `--simulate` it also points the simulator at
/// its scenario, which sets an environment variable: call before any thread
/// starts.
fn resolve_source(options: &SourceOptions, config: &Config) -> anyhow::Result<Source> {
    if let Some(scenario) = &options.simulate {
        if options.nvml_library.is_some() {
            bail!("--simulate and --nvml-library exclude each other: the simulator is an NVML library of its own");
        }
        let library = sim::locate_library()?;
        let choice = sim::Simulator::load(&library)?.choose_scenario(scenario.as_deref())?;
        sim::select_scenario(&choice);
        return Ok(Source {
            library: Some(library),
            // The simulator's pids are not this machine's: read /proc only
            // when the configuration names one (fixture trees in tests).
            proc_root: config.sampler.proc_root_configured.clone(),
            simulated: Some(choice),
        });
    }
    Ok(Source {
        library: options
            .nvml_library
            .clone()
            .or_else(|| config.sampler.nvml_library.clone()),
        proc_root: Some(config.sampler.proc_root()),
        simulated: None,
    })
}

fn hostname(config: &Config) -> String {
    config.sampler.hostname.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".to_string())
    })
}

fn init_logging(config: &Config) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.log.level));
    // A log line that cannot be written (stderr closed: `gpuwatch run 2>&1 |
    // head`, a log collector gone) is dropped. By default tracing reports
    // that with `eprintln!`, which panics on the same closed stderr and
    // would take the agent down.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .log_internal_errors(false);
    let _ = match config.log.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// `gpuwatch run`: samples, serves /metrics, and stops on SIGTERM or Ctrl-C.
pub fn run(options: RunOptions) -> anyhow::Result<()> {
    let prepared = prepare(&options)?;
    init_logging(&prepared.plan.config);
    let driver = Driver::open(prepared.plan.library.as_deref())?;
    if let Some(choice) = &prepared.simulated {
        info!(scenario = %choice.env_value(), "Running on simulated GPUs (the NVML simulator).");
    }
    let listener = agent::bind(prepared.plan.config.server.listen)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("gpuwatch-http")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let listener = TcpListener::from_std(listener)
            .context("cannot register the listener with the runtime")?;
        agent::run(prepared.plan, listener, driver, wait_for_signal()).await
    })
}

/// What `run` starts the agent with, before the driver is opened.
pub struct Prepared {
    /// The configuration and everything resolved from it and the flags.
    pub plan: Plan,
    /// The simulator's scenario, under `--simulate`.
    pub simulated: Option<sim::ScenarioChoice>,
}

/// Reads the configuration, applies the flags and resolves the source, as
/// `gpuwatch run` does (in-process test agents start the same way). With
/// `--simulate` it points the simulator at its scenario, which sets an
/// environment variable: call before other threads start, or hold them off.
pub fn prepare(options: &RunOptions) -> anyhow::Result<Prepared> {
    let mut config = load_config(options.source.config.as_deref())?;
    if let Some(listen) = &options.listen {
        config.server.listen =
            parse_listen(listen).map_err(|m| anyhow::anyhow!("--listen: {m}"))?;
    }
    let security = load_security(
        options.web_config.as_deref(),
        options.source.config.as_deref(),
        &config,
    )?;
    if !options.metrics_compat.is_empty() {
        config.server.metrics_compat =
            MetricsCompat::parse_list(options.metrics_compat.iter().map(String::as_str))
                .map_err(|m| anyhow::anyhow!("--metrics-compat: {m}"))?;
    }
    if !options.metrics_detail.is_empty() {
        config.exporter.detail = crate::exporter::detail::Detail::parse_list(
            options.metrics_detail.iter().map(String::as_str),
        )
        .map_err(|m| anyhow::anyhow!("--metrics-detail: {m}"))?;
    }
    let source = resolve_source(&options.source, &config)?;
    config.health.simulated = sim::health_inputs();
    let history = (config.history.enabled && !options.no_history).then(|| HistoryPlan {
        path: options
            .history_db
            .clone()
            .or_else(|| config.history.path.clone())
            .unwrap_or_else(|| crate::history::default_path(source.simulated.is_some())),
        reset: options.reset_history,
    });
    Ok(Prepared {
        plan: Plan {
            hostname: hostname(&config),
            config,
            security,
            library: source.library,
            proc_root: source.proc_root,
            history,
        },
        simulated: source.simulated,
    })
}

/// The web configuration, when one is given: TLS and basic auth.
fn load_security(
    flag: Option<&Path>,
    config_file: Option<&Path>,
    config: &Config,
) -> anyhow::Result<WebSecurity> {
    let Some((file, loaded)) = webconfig::load_chosen(flag, config_file, &config.server) else {
        return Ok(WebSecurity::none());
    };
    loaded.map_err(|problems| {
        let lines: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        anyhow::anyhow!(
            "the web configuration {} has {} problem{}:\n  {}\nRun `gpuwatch validate --web-config {}` after fixing it.",
            file.display(),
            problems.len(),
            if problems.len() == 1 { "" } else { "s" },
            lines.join("\n  "),
            file.display()
        )
    })
}

async fn wait_for_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}

/// `gpuwatch validate`: prints every problem; `Ok(false)` when invalid.
/// Also checks the web configuration, from `web_config` or the
/// configuration's `server.web_config`.
pub fn validate(config: Option<&Path>, web_config: Option<&Path>) -> anyhow::Result<bool> {
    let server = match config {
        Some(path) => Config::load(Some(path)).ok().map(|c| c.server),
        None => None,
    };
    // `validate --web-config FILE` alone checks just that file.
    let config_ok = if config.is_none() && web_config.is_some() {
        true
    } else {
        validate_config(config)?
    };
    let server = server.unwrap_or_else(|| Config::default().server);
    let Some((file, loaded)) = webconfig::load_chosen(web_config, config, &server) else {
        return Ok(config_ok);
    };
    match loaded {
        Ok(_) => {
            println!("{}: valid", file.display());
            Ok(config_ok)
        }
        Err(problems) => {
            for problem in &problems {
                println!("{problem}");
            }
            println!(
                "{}: {} problem{}",
                file.display(),
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            );
            Ok(false)
        }
    }
}

fn validate_config(config: Option<&Path>) -> anyhow::Result<bool> {
    let Some(path) = config else {
        println!("No configuration file given (--config FILE): the defaults are used, and they are valid.");
        return Ok(true);
    };
    match Config::load(Some(path)) {
        Ok(_) => {
            println!("{}: valid", path.display());
            Ok(true)
        }
        Err(ConfigError::Invalid(problems)) => {
            for problem in &problems {
                println!("{problem}");
            }
            println!(
                "{}: {} problem{}",
                path.display(),
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            );
            Ok(false)
        }
        Err(other) => Err(other.into()),
    }
}

/// Takes one sample of every tier (for `status` and `capacity`).
fn one_sample(options: &SourceOptions, config: &Config) -> anyhow::Result<crate::gpu::Snapshot> {
    let source = resolve_source(options, config)?;
    let driver = Driver::open(source.library.as_deref())?;
    let mut reader = one_off_reader(&driver, source.proc_root, config);
    Ok(reader.sample_once(std::time::Duration::from_millis(500)))
}

/// A reader for one-off samples: /proc names and the kubelet's pods as the
/// agent would have them.
fn one_off_reader<'d>(
    driver: &'d Driver,
    proc_root: Option<PathBuf>,
    config: &Config,
) -> NodeReader<'d> {
    let names =
        ProcessNames::new(proc_root).with_command_lines(config.sampler.process_command_line);
    let mut reader = NodeReader::with_gpm(driver, hostname(config), names, config.sampler.gpm);
    if let Some(pods) = ask_kubelet_once(config) {
        reader.set_pod_allocations(Arc::new(pods));
    }
    reader
}

/// Two samples `window` apart, the running workloads accounted over the
/// interval as the agent does (so each has a measured SM share), for
/// `gpuwatch capacity` with no profiles.
fn sample_with_workloads(
    options: &SourceOptions,
    config: &Config,
    window: std::time::Duration,
) -> anyhow::Result<crate::gpu::Snapshot> {
    use crate::sampler::reader::Tiers;
    let source = resolve_source(options, config)?;
    let driver = Driver::open(source.library.as_deref())?;
    let mut reader = one_off_reader(&driver, source.proc_root, config);
    let mut accounts = crate::workload::accounting::Accounts::default();
    accounts.step(&reader.tick(Tiers::ALL, None));
    #[allow(
        clippy::disallowed_methods,
        reason = "a one-off command on the main thread, no executor"
    )]
    std::thread::sleep(window);
    let mut snapshot = reader.tick(Tiers::ALL, None);
    accounts.step(&snapshot);
    snapshot.workloads = Arc::new(accounts.table());
    Ok(snapshot)
}

/// The kubelet's device allocations for a one-off sample; `None` (with a
/// warning where the socket is there but does not answer) when there are
/// none to be had.
fn ask_kubelet_once(config: &Config) -> Option<crate::kubernetes::PodAllocations> {
    let settings = config.kubernetes.as_ref()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime
        .block_on(crate::kubernetes::ask_once(settings))
        .unwrap_or_else(|error| {
            eprintln!("warning: {error}; pods are shown by UID only");
            None
        })
}

/// `gpuwatch capacity`: takes one sample and prints how many more instances
/// of each profile fit (or only of `profile`).
pub fn capacity(options: SourceOptions, profile: Option<&str>) -> anyhow::Result<()> {
    let config = load_config(options.config.as_deref())?;
    if config.capacity.profiles.is_empty() {
        if let Some(name) = profile {
            bail!("no profile named \"{name}\": the configuration has no [[profiles]]; add one, e.g.\n\n[[profiles]]\nname = \"{name}\"\nmemory = \"1.8GB\"\n\nand pass it with --config (without --profile, the running workloads are the profiles)");
        }
        // With no profiles, the running workloads are the profiles.
        let snapshot = sample_with_workloads(&options, &config, std::time::Duration::from_secs(1))?;
        print!(
            "{}",
            crate::capacity::table::render_running(&snapshot, config.capacity.memory_margin_bytes)
        );
        return Ok(());
    }
    if let Some(name) = profile {
        if !config.capacity.profiles.iter().any(|p| p.name == name) {
            let known: Vec<&str> = config
                .capacity
                .profiles
                .iter()
                .map(|p| p.name.as_str())
                .collect();
            bail!(
                "no profile named \"{name}\"; the configuration has: {}",
                known.join(", ")
            );
        }
    }
    let snapshot = one_sample(&options, &config)?;
    print!(
        "{}",
        crate::capacity::table::render(&snapshot, &config.capacity, profile)
    );
    Ok(())
}

/// `gpuwatch status`: takes one sample and prints it.
pub fn status(options: SourceOptions, json: bool) -> anyhow::Result<()> {
    let config = load_config(options.config.as_deref())?;
    let mut snapshot = one_sample(&options, &config)?;
    let mut health = config.health.clone();
    health.simulated = sim::health_inputs();
    crate::health::count_pci_into(&health, &mut snapshot);
    if json {
        println!("{}", serde_json::to_string_pretty(&snapshot)?);
    } else {
        let database = config
            .history
            .path
            .clone()
            .unwrap_or_else(|| crate::history::default_path(options.simulate.is_some()));
        let escalated = alerts::saved_escalations(&database);
        print!("{}", crate::status::render(&snapshot, &escalated));
    }
    Ok(())
}
