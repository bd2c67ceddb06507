//! Panics are counted, never silent.
//!
//! A panic in a request handler or in one of the agent's long-lived tasks
//! (alerting, history writer, notification dispatchers, watchdog) would
//! otherwise end that task quietly: tokio keeps the process alive and
//! prints a line to stderr that no log pipeline parses. [`CatchUnwind`]
//! turns a panic into a value; [`supervise`] logs it at ERROR with the
//! subsystem and counts it in [`Panics`], which the exporter publishes as
//! `gpuwatch_panics_total{subsystem}` ([`PanicsCollector`]).

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::families::Family;

/// The subsystems whose panics are counted; each is exported from the
/// start (at 0), so a rate over the counter works before the first panic.
pub const SUBSYSTEMS: [&str; 5] = ["http", "alerting", "history", "notify", "watchdog"];

/// Panics caught so far, per subsystem.
#[derive(Debug)]
pub struct Panics {
    counts: Mutex<BTreeMap<&'static str, u64>>,
}

impl Default for Panics {
    fn default() -> Self {
        Panics::new(&SUBSYSTEMS)
    }
}

impl Panics {
    /// Counters for `subsystems`, all at 0.
    pub fn new(subsystems: &[&'static str]) -> Panics {
        Panics {
            counts: Mutex::new(subsystems.iter().map(|s| (*s, 0)).collect()),
        }
    }

    /// Counts one panic of `subsystem`.
    pub fn record(&self, subsystem: &'static str) {
        // A poisoned lock still holds valid counts: a panic elsewhere while
        // holding it cannot have left a half-written integer.
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry(subsystem).or_insert(0) += 1;
    }

    /// Panics of `subsystem` so far.
    pub fn count(&self, subsystem: &str) -> u64 {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.get(subsystem).copied().unwrap_or(0)
    }

    fn all(&self) -> Vec<(&'static str, u64)> {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.iter().map(|(k, v)| (*k, *v)).collect()
    }
}

/// A future that yields `Err(payload)` instead of unwinding when the inner
/// future panics. Built by [`catch_unwind`].
pub struct CatchUnwind<F> {
    inner: Pin<Box<F>>,
}

/// Wraps `future` so that a panic while polling it becomes an `Err`.
pub fn catch_unwind<F: Future>(future: F) -> CatchUnwind<F> {
    CatchUnwind {
        inner: Box::pin(future),
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.inner.as_mut();
        // AssertUnwindSafe: after a panic the inner future is never polled
        // again (we return Ready), so no broken state is observed.
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}

/// The text of a panic payload (`panic!("...")` carries a `&str` or a
/// `String`); anything else reads as "(no message)".
pub fn message(payload: &(dyn Any + Send)) -> &str {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text
    } else {
        "(no message)"
    }
}

/// Runs a long-lived task; if it panics, logs that at ERROR and counts it
/// under `subsystem`, and returns `None` (the task has stopped: the log line
/// and the counter say so instead of silence).
pub async fn supervise<F: Future>(
    subsystem: &'static str,
    panics: Arc<Panics>,
    task: F,
) -> Option<F::Output> {
    match catch_unwind(task).await {
        Ok(value) => Some(value),
        Err(payload) => {
            panics.record(subsystem);
            tracing::error!(
                subsystem,
                panic = message(&*payload),
                "A task panicked and has stopped; this is a bug, please report it. Restart the agent to start the task again."
            );
            None
        }
    }
}

/// Spawns `task` under [`supervise`]: a panic in it is logged and counted
/// for `subsystem`, and the handle still ends (with `()`) for whoever
/// awaits it at shutdown.
pub fn spawn_supervised<F>(
    subsystem: &'static str,
    panics: &Arc<Panics>,
    task: F,
) -> tokio::task::JoinHandle<()>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let panics = panics.clone();
    tokio::spawn(async move {
        supervise(subsystem, panics, task).await;
    })
}

/// Encodes [`Panics`] as `gpuwatch_panics_total{subsystem}`.
#[derive(Debug)]
pub struct PanicsCollector(pub Arc<Panics>);

impl Collector for PanicsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let mut family = Family::counter(
            "panics",
            "Panics caught in request handlers and long-lived tasks, by subsystem (each is also logged at ERROR).",
            None,
        );
        for (subsystem, count) in self.0.all() {
            family.push(vec![("subsystem", subsystem.into())], count as f64);
        }
        family.encode(&mut encoder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_task_is_counted_and_the_rest_goes_on() {
        let panics = Arc::new(Panics::default());
        let value = supervise("history", panics.clone(), async { 7 }).await;
        assert_eq!(value, Some(7));
        assert_eq!(panics.count("history"), 0);
        let stopped: Option<()> = supervise("history", panics.clone(), async {
            tokio::task::yield_now().await;
            panic!("the writer lost its way");
        })
        .await;
        assert_eq!(stopped, None);
        assert_eq!(panics.count("history"), 1);
        assert_eq!(panics.count("alerting"), 0);
    }

    #[tokio::test]
    async fn catch_unwind_hands_over_the_message() {
        let caught = catch_unwind(async { panic!("index {} out of range", 3) }).await;
        let Err(payload) = caught else {
            panic!("the panic was not caught");
        };
        assert_eq!(message(&*payload), "index 3 out of range");
        let caught = catch_unwind(async { std::panic::panic_any(42u8) }).await;
        let Err(payload) = caught else {
            panic!("the panic was not caught");
        };
        assert_eq!(message(&*payload), "(no message)");
    }

    #[test]
    fn every_subsystem_is_exported_from_zero() {
        let panics = Arc::new(Panics::default());
        panics.record("http");
        let mut registry = prometheus_client::registry::Registry::default();
        registry
            .sub_registry_with_prefix("gpuwatch")
            .register_collector(Box::new(PanicsCollector(panics)));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(
            text.contains("gpuwatch_panics_total{subsystem=\"http\"} 1"),
            "{text}"
        );
        for subsystem in SUBSYSTEMS {
            assert!(
                text.contains(&format!(
                    "gpuwatch_panics_total{{subsystem=\"{subsystem}\"}}"
                )),
                "{subsystem} missing: {text}"
            );
        }
    }
}
