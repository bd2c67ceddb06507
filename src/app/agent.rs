//! The running agent, in one entry point: [`run`] takes the configuration
//! (with everything derived from it settled), a bound listener, the opened
//! NVML driver and a shutdown signal, starts each part through its own
//! `start`, serves until the signal, then stops the parts in order.
//! [`Running`] runs it on a thread of its own, for tests and embedding.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

use crate::config::Config;
use crate::exporter::process_metrics::ProcessExport;
use crate::exporter::Exporter;
use crate::gpu::nvml::Driver;
use crate::history::stats::HistoryCollector;
use crate::http::webconfig::WebSecurity;
use crate::http::{serve_secured, HistoryApi, HttpState, ServerLimits};
use crate::panics::{spawn_supervised, supervise, Panics, PanicsCollector};
use crate::sampler::{watchdog, Sampler, SamplerSettings, SnapshotSink};

use super::storage;

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

/// Values derived from the plan and the bound address, computed before any
/// part gets its configuration.
struct Derived {
    bound: SocketAddr,
    /// `scheme://host:port` as the logs show it.
    shown: String,
    /// The agent's URL in notifications (Alertmanager's generatorURL).
    external_url: String,
    stale_after: Duration,
    limits: ServerLimits,
    processes: ProcessExport,
    retention: crate::history::Retention,
    /// The host name (the `host` label of remediation's notifications).
    hostname: String,
}

impl Derived {
    fn of(plan: &Plan, listener: &TcpListener) -> anyhow::Result<Derived> {
        let config = &plan.config;
        let bound = listener
            .local_addr()
            .context("cannot read the address the listener is bound to")?;
        let scheme = plan.security.scheme();
        let shown = if bound.ip().is_unspecified() {
            format!("{scheme}://localhost:{}", bound.port())
        } else {
            format!("{scheme}://{bound}")
        };
        Ok(Derived {
            bound,
            shown,
            external_url: config
                .server
                .external_url_or(scheme, &plan.hostname, bound.port()),
            stale_after: config.sampler.stale_after(),
            limits: ServerLimits {
                max_connections: config.server.max_connections,
                request_timeout: config.server.request_timeout,
                idle_timeout: config.server.idle_timeout,
            },
            processes: ProcessExport {
                process_top_n: config.sampler.process_top_n,
                capacity: Arc::new(config.capacity.clone()),
            },
            retention: config.history.retention,
            hostname: plan.hostname.clone(),
        })
    }
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
    let derived = Derived::of(&plan, &listener)?;
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
    let result = serve(
        config, security, &derived, &sampler, history, alerts, listener, shutdown,
    )
    .await;
    // The sampler may sit in a hung NVML call: wait for it off the runtime.
    let _ = tokio::task::spawn_blocking(move || sampler.stop(Duration::from_secs(2))).await;
    result
}

/// Alerting as the running agent uses it.
struct AlertsRun {
    rules: Vec<crate::rules::Rule>,
    queue: crate::alerting::AlertQueue,
}

/// Alerting's queue of snapshots, when there are rules.
fn alerts_sink(config: &Config, sinks: &mut Vec<SnapshotSink>) -> Option<AlertsRun> {
    if config.rules.is_empty() {
        return None;
    }
    let (sink, queue) = crate::alerting::queue();
    sinks.push(sink);
    Some(AlertsRun {
        rules: config.rules.clone(),
        queue,
    })
}

fn announce(security: &WebSecurity, derived: &Derived) {
    info!(address = %derived.bound, "Serving {}/metrics", derived.shown);
    info!(
        "Web view: open {}/ in a browser (live GPUs, history charts, alerts).",
        derived.shown
    );
    if security.tls.is_some() || security.auth.is_some() {
        info!(
            web_config = %security.file.display(),
            tls = security.tls.is_some(),
            basic_auth = security.auth.is_some(),
            "Web security on: every path, /-/healthy and /-/ready included."
        );
    }
    if let Some(reloader) = &security.tls {
        let served = reloader.served();
        info!(
            cert_file = %reloader.settings().cert_file.display(),
            serial = %served.serial,
            subject = %served.subject,
            not_after = %served.expires(),
            "TLS certificate in use; its files are checked every second and reloaded when they change."
        );
    }
}

/// The running alerting task and what the HTTP API reads of it.
struct Alerting {
    receiver: crate::alerting::AlertsReceiver,
    task: JoinHandle<()>,
    /// The receivers' routes and the outbox's doorbell (remediation writes
    /// its notifications there too).
    outbox: (Vec<crate::alerting::Destination>, crate::outbox::Doorbell),
}

/// Starts alerting: its state restored from the database when it is open,
/// the notifiers (dispatchers and cleanup, into `tasks`), and the rules'
/// evaluation of each snapshot.
#[allow(clippy::too_many_arguments)]
async fn start_alerting(
    run: AlertsRun,
    config: &Config,
    derived: &Derived,
    attached: Option<&storage::Attached>,
    sampler: &Sampler,
    panics: &Arc<Panics>,
    shutdown: &watch::Receiver<bool>,
    exporter: &mut Exporter,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Alerting {
    let ready = attached.and_then(|a| a.store.get().ok());
    let (state, publish, receiver) = crate::alerting::restore(ready.as_ref()).await;
    exporter.add(Box::new(crate::alerting::AlertsCollector {
        alerts: receiver.clone(),
        dropped_snapshots: run.queue.dropped.clone(),
        rule_values: config
            .exporter
            .detail
            .has(crate::exporter::detail::DetailSet::RuleValues),
    }));
    // The health verdict on /metrics follows GpuXidRecurring's escalations.
    let alerts = receiver.clone();
    exporter.set_escalations(crate::health::escalation::EscalationSource::new(
        move || alerts.borrow().xid_escalations(),
    ));
    let notifiers = storage::Notifiers::new(config, &derived.external_url, panics);
    let outbox = notifiers.outbox();
    if attached.is_some() && !notifiers.stats.is_empty() {
        exporter.add(Box::new(crate::notify::NotifyCollector(
            notifiers.stats.clone(),
        )));
    }
    let persistence = storage::persistence(
        attached,
        notifiers,
        storage::HistoryTerms {
            retention: derived.retention,
            external_url: derived.external_url.clone(),
        },
        shutdown,
        tasks,
    );
    let task = spawn_supervised(
        "alerting",
        panics,
        crate::alerting::run(
            run.rules,
            state,
            persistence,
            run.queue.snapshots,
            sampler.snapshots(),
            publish,
            shutdown.clone(),
        ),
    );
    Alerting {
        receiver,
        task,
        outbox,
    }
}

/// Starts the parts that hang on the sampler (history writer, alerting,
/// notifiers, watchdog) and the HTTP server; on `shutdown` stops them in
/// order and waits for them.
#[allow(clippy::too_many_arguments)]
async fn serve(
    config: &Config,
    security: WebSecurity,
    derived: &Derived,
    sampler: &Sampler,
    history: Option<storage::HistoryRun>,
    alerts: Option<AlertsRun>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    announce(&security, derived);
    let mut exporter = Exporter::with_processes(
        sampler.snapshots(),
        derived.stale_after,
        derived.processes.clone(),
    )
    .with_compat(config.server.metrics_compat.clone())
    .with_compat_hpc_job(config.exporter.compat_hpc_job)
    .with_detail(config.exporter.detail);
    if let Some(reloader) = &security.tls {
        // Certificate expiry and reloads (the files are watched by the server).
        exporter.add(reloader.collector());
    }
    // Panics of the tasks below and of request handlers: logged and counted.
    let panics = Arc::new(Panics::default());
    exporter.add(Box::new(PanicsCollector(panics.clone())));
    let (stop, stopped) = watch::channel(false);
    let mut tasks = Vec::new();
    let history_stats = history.as_ref().map(|h| h.stats.clone());
    let attached = match history {
        Some(run) => Some(storage::Attached::start(run, &panics, &stopped).await),
        None => None,
    };
    let alerting = match alerts {
        Some(run) => Some(
            start_alerting(
                run,
                config,
                derived,
                attached.as_ref(),
                sampler,
                &panics,
                &stopped,
                &mut exporter,
                &mut tasks,
            )
            .await,
        ),
        None => None,
    };
    if let Some(stats) = history_stats {
        exporter.add(Box::new(HistoryCollector(stats)));
    }
    if let Some(task) = super::remediation::start(
        &config.remediation,
        super::remediation::Wiring {
            store: attached.as_ref().map(|a| a.store.clone()),
            outbox: alerting.as_ref().map(|a| a.outbox.clone()),
            alerts: alerting.as_ref().map(|a| a.receiver.clone()),
            external_url: derived.external_url.clone(),
            hostname: derived.hostname.clone(),
        },
        sampler.snapshots(),
        &panics,
        &stopped,
        &mut exporter,
    ) {
        tasks.push(task);
    }
    let (history_api, silences) = match attached {
        Some(attached) => {
            tasks.extend(attached.tasks);
            (
                Some(HistoryApi {
                    store: attached.store,
                    retention: derived.retention,
                }),
                Some(attached.silences),
            )
        }
        None => (None, None),
    };
    let (alerts_rx, alerts_task) = match alerting {
        Some(a) => (Some(a.receiver), Some(a.task)),
        None => (None, None),
    };
    let state = Arc::new(HttpState {
        exporter,
        snapshots: sampler.snapshots(),
        stale_after: derived.stale_after,
        progress: sampler.progress(),
        history: history_api,
        alerts: alerts_rx,
        silences,
        panics: panics.clone(),
    });
    let dog = tokio::spawn(supervise(
        "watchdog",
        panics,
        watchdog(sampler.progress(), config.sampler.timeout, stopped.clone()),
    ));
    let server = tokio::spawn(serve_secured(
        listener,
        state,
        derived.limits,
        Arc::new(security),
        stopped,
    ));
    shutdown.await;
    info!("Shutting down.");
    let _ = stop.send(true);
    let served = server.await.context("the HTTP server task failed")?;
    let _ = dog.await;
    if let Some(task) = alerts_task {
        let _ = task.await;
    }
    // The dispatchers, the retries, and the writer, which commits what it
    // holds, the open minute and hour too.
    for task in tasks {
        let _ = task.await;
    }
    served.context("the HTTP server failed")
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
