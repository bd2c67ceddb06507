//! The parts of the running agent behind the sampler — history writer,
//! alerting with its notifiers, remediation, watchdog — and the HTTP server:
//! started in order, stopped together, every one waited for before the
//! agent reports how it ended.

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

use crate::config::Config;
use crate::exporter::Exporter;
use crate::history::stats::HistoryCollector;
use crate::http::webconfig::WebSecurity;
use crate::http::{serve_secured, HistoryApi, HttpState};
use crate::panics::{spawn_supervised, Panics, PanicsCollector};
use crate::sampler::{watchdog, Sampler};

use super::super::storage;
use super::derived::{announce, AlertsRun, Derived};

/// The running alerting task and what the HTTP API reads of it.
struct Alerting {
    receiver: crate::alerting::AlertsReceiver,
    task: JoinHandle<()>,
    /// The receivers' routes and the outbox's doorbell (remediation writes
    /// its notifications there too).
    outbox: (Vec<crate::routing::Destination>, crate::outbox::Doorbell),
}

/// What every part behind the sampler is started with.
struct Common<'a> {
    config: &'a Config,
    derived: &'a Derived,
    sampler: &'a Sampler,
    /// Where the parts' panics are logged and counted.
    panics: &'a Arc<Panics>,
    /// Turns true at shutdown.
    stopped: &'a watch::Receiver<bool>,
}

/// Starts alerting: its state restored from the database when it is open,
/// the notifiers (dispatchers and cleanup, into `tasks`), and the rules'
/// evaluation of each snapshot.
async fn start_alerting(
    run: AlertsRun,
    common: &Common<'_>,
    attached: Option<&storage::Attached>,
    exporter: &mut Exporter,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Alerting {
    let Common {
        config,
        derived,
        sampler,
        panics,
        stopped,
    } = *common;
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
        stopped,
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
            stopped.clone(),
        ),
    );
    Alerting {
        receiver,
        task,
        outbox,
    }
}

/// What the agent serves with, besides the listener.
pub(super) struct Serving<'a> {
    pub(super) config: &'a Config,
    pub(super) security: WebSecurity,
    pub(super) derived: &'a Derived,
    pub(super) sampler: &'a Sampler,
    pub(super) history: Option<storage::HistoryRun>,
    pub(super) alerts: Option<AlertsRun>,
}

/// The /metrics exporter of the snapshots, with the configured compat and
/// detail sets, the TLS certificate's figures and the panics counted.
fn exporter(serving: &Serving<'_>, panics: &Arc<Panics>) -> Exporter {
    let (config, derived) = (serving.config, serving.derived);
    let mut exporter = Exporter::with_processes(
        serving.sampler.snapshots(),
        derived.stale_after,
        derived.processes.clone(),
    )
    .with_compat(config.server.metrics_compat.clone())
    .with_compat_hpc_job(config.exporter.compat_hpc_job)
    .with_detail(config.exporter.detail);
    if let Some(reloader) = &serving.security.tls {
        // Certificate expiry and reloads (the files are watched by the server).
        exporter.add(reloader.collector());
    }
    exporter.add(Box::new(PanicsCollector(panics.clone())));
    exporter
}

/// The parts behind the sampler, started, and what the HTTP API reads of
/// them.
struct Parts {
    state: HttpState,
    /// Waited for at shutdown, in this order (alerting before the
    /// dispatchers, retries and history writer it feeds).
    tasks: Vec<(&'static str, JoinHandle<()>)>,
}

/// Starts the history writer, alerting with its notifiers, and
/// remediation, each stopping when `common.stopped` turns true.
async fn start_parts(
    common: &Common<'_>,
    history: Option<storage::HistoryRun>,
    alerts: Option<AlertsRun>,
    mut exporter: Exporter,
) -> Parts {
    let Common {
        config,
        derived,
        sampler,
        panics,
        stopped,
    } = *common;
    let mut tasks = Vec::new();
    let history_stats = history.as_ref().map(|h| h.stats.clone());
    let attached = match history {
        Some(run) => Some(storage::Attached::start(run, panics, stopped).await),
        None => None,
    };
    let alerting = match alerts {
        Some(run) => {
            Some(start_alerting(run, common, attached.as_ref(), &mut exporter, &mut tasks).await)
        }
        None => None,
    };
    if let Some(stats) = history_stats {
        exporter.add(Box::new(HistoryCollector(stats)));
    }
    if let Some(task) = super::super::remediation::start(
        &config.remediation,
        super::super::remediation::Wiring {
            store: attached.as_ref().map(|a| a.store.clone()),
            outbox: alerting.as_ref().map(|a| a.outbox.clone()),
            alerts: alerting.as_ref().map(|a| a.receiver.clone()),
            external_url: derived.external_url.clone(),
            hostname: derived.hostname.clone(),
        },
        sampler.snapshots(),
        panics,
        stopped,
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
    let mut ordered: Vec<(&'static str, JoinHandle<()>)> =
        alerts_task.into_iter().map(|t| ("alerting", t)).collect();
    // The dispatchers, the retries, remediation and the writer, which
    // commits what it holds, the open minute and hour too.
    ordered.extend(tasks.into_iter().map(|t| ("background", t)));
    Parts {
        state: HttpState {
            exporter,
            snapshots: sampler.snapshots(),
            stale_after: derived.stale_after,
            progress: sampler.progress(),
            history: history_api,
            alerts: alerts_rx,
            silences,
            panics: panics.clone(),
        },
        tasks: ordered,
    }
}

/// Starts the parts that hang on the sampler (history writer, alerting,
/// notifiers, remediation, watchdog) and the HTTP server; on `shutdown`
/// stops them and waits for every one before it reports.
pub(super) async fn serve(
    serving: Serving<'_>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    announce(&serving.security, serving.derived);
    // Panics of the tasks below and of request handlers: logged and counted.
    let panics = Arc::new(Panics::default());
    let exporter = exporter(&serving, &panics);
    let (stop, stopped) = watch::channel(false);
    let common = Common {
        config: serving.config,
        derived: serving.derived,
        sampler: serving.sampler,
        panics: &panics,
        stopped: &stopped,
    };
    let parts = start_parts(&common, serving.history, serving.alerts, exporter).await;
    let dog = spawn_supervised(
        "watchdog",
        &panics,
        watchdog(
            serving.sampler.progress(),
            serving.config.sampler.timeout,
            stopped.clone(),
        ),
    );
    let server = tokio::spawn(serve_secured(
        listener,
        Arc::new(parts.state),
        serving.derived.limits,
        Arc::new(serving.security),
        stopped,
    ));
    shutdown.await;
    info!("Shutting down.");
    let _ = stop.send(true);
    let server = async {
        server
            .await
            .context("the HTTP server task failed")?
            .context("the HTTP server failed")
    };
    let mut rest = vec![("watchdog", dog)];
    rest.extend(parts.tasks);
    finish(server, rest).await
}

/// Waits for the server and then for every other part, whatever the
/// server's outcome (a failed server must not drop the history writer's
/// uncommitted batch), and reports the first failure.
async fn finish(
    server: impl Future<Output = anyhow::Result<()>>,
    parts: Vec<(&'static str, JoinHandle<()>)>,
) -> anyhow::Result<()> {
    let mut first = server.await.err();
    for (name, task) in parts {
        if let Err(e) = task.await {
            let e = anyhow::anyhow!("the {name} task failed: {e}");
            match first {
                None => first = Some(e),
                Some(_) => tracing::error!("{e:#}"),
            }
        }
    }
    first.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// A failed server still lets the history writer (any later part)
    /// finish before the agent reports the failure.
    #[tokio::test]
    async fn a_failed_server_waits_for_every_part_then_reports_its_error() {
        let committed = Arc::new(AtomicBool::new(false));
        let writer = {
            let committed = committed.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                committed.store(true, Ordering::SeqCst);
            })
        };
        let server = async { Err(anyhow::anyhow!("the HTTP server failed: bind lost")) };
        let result = super::finish(server, vec![("history writer", writer)]).await;
        let error = result.expect_err("the server's error is reported");
        assert!(error.to_string().contains("bind lost"), "{error:#}");
        assert!(
            committed.load(Ordering::SeqCst),
            "the writer finished before the agent reported"
        );
    }

    /// A part that panicked is reported when nothing failed before it.
    #[tokio::test]
    async fn a_panicked_part_is_reported() {
        let part = tokio::spawn(async { panic!("boom") });
        let result = super::finish(async { Ok(()) }, vec![("alerting", part)]).await;
        let error = result.expect_err("the panic is reported");
        assert!(error.to_string().contains("alerting"), "{error:#}");
    }
}
