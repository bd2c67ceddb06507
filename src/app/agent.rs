//! The running agent, in one entry point: [`run`] takes the configuration
//! (with everything derived from it settled), a bound listener, the opened
//! NVML driver and a shutdown signal, starts each part through its own
//! `start`, serves until the signal, then stops the parts in order.
//! [`Running`] runs it on a thread of its own, for tests and embedding.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::config::Config;
use crate::gpu::nvml::Driver;
use crate::http::webconfig::WebSecurity;
use crate::sampler::{Sampler, SamplerSettings};

use super::storage;

mod derived;
mod serve;

use derived::{alerts_sink, Derived};

use serve::{serve, Serving};

/// What the agent runs with: the configuration with the command line's
/// overrides applied, and what was resolved from both.
pub struct Plan {
    /// The configuration.
    pub config: Config,
    /// TLS and basic auth.
    pub security: WebSecurity,
    /// The NVML library the sampler (re)opens.
    pub library: Option<PathBuf>,
    /// Where process names are read (`None`: not at all).
    pub proc_root: Option<PathBuf>,
    /// The host name put into every snapshot and the external URL.
    pub hostname: String,
    /// The history database, when history is on.
    pub history: Option<HistoryPlan>,
}

/// Where history is recorded.
#[derive(Debug, Clone)]
pub struct HistoryPlan {
    /// The database file.
    pub path: PathBuf,
    /// Move an existing database aside first (`--reset-history`).
    pub reset: bool,
}

/// Binds the agent's listener, with what to do when the port is taken.
pub fn bind(address: SocketAddr) -> anyhow::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(address).with_context(|| {
        format!("cannot listen on {address}: is another gpuwatch (or another exporter) using that port? Choose another with --listen or server.listen")
    })?;
    listener
        .set_nonblocking(true)
        .with_context(|| format!("cannot make the listener on {address} non-blocking"))?;
    Ok(listener)
}

/// Runs the agent until `shutdown` completes: samples `driver`, records
/// history, evaluates the rules, notifies, and serves HTTP on `listener`.
pub async fn run(
    plan: Plan,
    listener: TcpListener,
    driver: Driver,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let derived = Derived::of(&plan.config, &plan.security, &plan.hostname, &listener)?;
    let Plan {
        config,
        security,
        library,
        proc_root,
        hostname,
        history,
    } = plan;
    let config = &config;
    let pods = match config.kubernetes.clone() {
        Some(kubelet) => Some(crate::kubernetes::watcher::start(kubelet).await),
        None => None,
    };
    let mut sinks = Vec::new();
    let history = match &history {
        Some(h) => Some(storage::open_at_start(config, h.path.clone(), h.reset, &mut sinks).await?),
        None => None,
    };
    let alerts = alerts_sink(config, &mut sinks);
    let settings = SamplerSettings {
        library,
        interval: config.sampler.interval,
        slow_interval: config.sampler.slow_interval,
        process_interval: config.sampler.process_interval,
        proc_root,
        command_lines: config.sampler.process_command_line,
        hpc_job_mapping_dir: config.workloads.hpc_job_mapping_dir.clone(),
        hostname,
        pods,
        gpm: config.sampler.gpm,
    };
    let sampler =
        Sampler::start(settings, driver, sinks).context("cannot start the sampler thread")?;
    // Codes NVIDIA's catalog knows are always counted on their own; only
    // unknown ones are bounded per GPU.
    sampler
        .xid_table()
        .set_known_codes(|code| crate::health::catalog::lookup(code).is_some());
    let _health = crate::health::start(&config.health, &sampler);
    let serving = Serving {
        config,
        security,
        derived: &derived,
        sampler: &sampler,
        history,
        alerts,
    };
    let result = serve(serving, listener, shutdown).await;
    // The sampler may sit in a hung NVML call: wait for it off the runtime.
    let _ = tokio::task::spawn_blocking(move || sampler.stop(Duration::from_secs(2))).await;
    result
}

/// An agent running on a thread of its own (with its own single-threaded
/// runtime, as `gpuwatch run` has): tests start agents in-process with it
/// and read the bound address here instead of from the log.
pub struct Running {
    address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl Running {
    /// Binds `listen` (port 0 picks a free port) and starts the agent.
    pub fn start(plan: Plan, listen: SocketAddr, driver: Driver) -> anyhow::Result<Running> {
        let listener = bind(listen)?;
        let address = listener.local_addr().context("the bound address")?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("gpuwatch-agent".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the async runtime")?;
                runtime.block_on(async move {
                    let listener = TcpListener::from_std(listener)
                        .context("cannot register the listener with the runtime")?;
                    run(plan, listener, driver, async {
                        let _ = stopped.await;
                    })
                    .await
                })
            })
            .context("cannot start the agent's thread")?;
        Ok(Running {
            address,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Where it serves.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Shuts it down as SIGTERM does and waits; its result.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the agent's thread panicked"))),
            None => Ok(()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
