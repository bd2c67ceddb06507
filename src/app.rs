//! The commands, as the binary runs them: `run`, `validate` and `status`.
//! Errors here are `anyhow`: this is the edge where they meet a person.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::net::TcpListener;
use tracing::info;
use tracing_subscriber::EnvFilter;

use crate::config::{parse_listen, Config, ConfigError, LogFormat};
use crate::exporter::compat::MetricsCompat;
use crate::exporter::Exporter;
use crate::gpu::nvml::Driver;
use crate::http::{serve, HttpState, ServerLimits};
use crate::sampler::procnames::ProcessNames;
use crate::sampler::reader::{NodeReader, Tiers};
use crate::sampler::{watchdog, Sampler, SamplerSettings};
use crate::sim;

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
        let choice = sim::choose_scenario(scenario.as_deref())?;
        let library = sim::locate_library()?;
        sim::select_scenario(&choice);
        return Ok(Source {
            library: Some(library),
            proc_root: None,
            simulated: Some(choice),
        });
    }
    Ok(Source {
        library: options
            .nvml_library
            .clone()
            .or_else(|| config.sampler.nvml_library.clone()),
        proc_root: Some(config.sampler.proc_root.clone()),
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
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match config.log.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// `gpuwatch run`: samples, serves /metrics, and stops on SIGTERM or Ctrl-C.
pub fn run(options: RunOptions) -> anyhow::Result<()> {
    let mut config = load_config(options.source.config.as_deref())?;
    if let Some(listen) = &options.listen {
        config.server.listen =
            parse_listen(listen).map_err(|m| anyhow::anyhow!("--listen: {m}"))?;
    }
    if !options.metrics_compat.is_empty() {
        config.server.metrics_compat =
            MetricsCompat::parse_list(options.metrics_compat.iter().map(String::as_str))
                .map_err(|m| anyhow::anyhow!("--metrics-compat: {m}"))?;
    }
    let source = resolve_source(&options.source, &config)?;
    init_logging(&config);
    let driver = Driver::open(source.library.as_deref())?;
    if let Some(choice) = &source.simulated {
        info!(scenario = %choice.env_value(), "Running on simulated GPUs (the NVML simulator).");
    }
    let settings = SamplerSettings {
        library: source.library.clone(),
        interval: config.sampler.interval,
        slow_interval: config.sampler.slow_interval,
        process_interval: config.sampler.process_interval,
        proc_root: source.proc_root.clone(),
        hostname: hostname(&config),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("gpuwatch-http")
        .build()
        .context("cannot start the async runtime")?;
    let sampler = Sampler::start(settings, driver).context("cannot start the sampler thread")?;
    let result = runtime.block_on(serve_until_signal(&config, &sampler));
    sampler.stop(Duration::from_secs(2));
    result
}

async fn serve_until_signal(config: &Config, sampler: &Sampler) -> anyhow::Result<()> {
    let address = config.server.listen;
    let listener = TcpListener::bind(address).await.with_context(|| {
        format!("cannot listen on {address}: is another gpuwatch (or another exporter) using that port? Choose another with --listen or server.listen")
    })?;
    let bound = listener.local_addr().unwrap_or(address);
    let shown = if bound.ip().is_unspecified() {
        format!("http://localhost:{}", bound.port())
    } else {
        format!("http://{bound}")
    };
    info!(address = %bound, "Serving {shown}/metrics (landing page at {shown}/).");
    let stale_after = config.sampler.stale_after();
    let state = Arc::new(HttpState {
        exporter: Exporter::new(sampler.snapshots(), stale_after)
            .with_compat(sampler.snapshots(), config.server.metrics_compat.clone()),
        snapshots: sampler.snapshots(),
        stale_after,
        progress: sampler.progress(),
    });
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let dog = tokio::spawn(watchdog(
        sampler.progress(),
        config.sampler.timeout,
        shutdown_rx.clone(),
    ));
    let limits = ServerLimits {
        max_connections: config.server.max_connections,
        request_timeout: config.server.request_timeout,
    };
    let server = tokio::spawn(serve(listener, state, limits, shutdown_rx));
    wait_for_signal().await;
    info!("Shutting down.");
    let _ = shutdown_tx.send(true);
    let served = server.await.context("the HTTP server task failed")?;
    let _ = dog.await;
    served.context("the HTTP server failed")
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
pub fn validate(config: Option<&Path>) -> anyhow::Result<bool> {
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

/// `gpuwatch status`: takes one sample and prints it.
pub fn status(options: SourceOptions, json: bool) -> anyhow::Result<()> {
    let config = load_config(options.config.as_deref())?;
    let source = resolve_source(&options, &config)?;
    let driver = Driver::open(source.library.as_deref())?;
    let names = ProcessNames::new(source.proc_root);
    let mut reader = NodeReader::new(&driver, hostname(&config), names);
    let snapshot = reader.tick(Tiers::ALL, None);
    if json {
        println!("{}", serde_json::to_string_pretty(&snapshot)?);
    } else {
        print!("{}", crate::status::render(&snapshot));
    }
    Ok(())
}
