//! The task that asks the kubelet, on a timer, which container holds which
//! device, and publishes the answer for the sampler.

use std::sync::Arc;

use tokio::sync::watch;
use tracing::{info, warn};

use crate::gpu::KubeletStatus;

use super::{KubeletSettings, PodAllocations};

/// The latest allocations, as the sampler reads them.
pub type PodAllocationsReceiver = watch::Receiver<Arc<PodAllocations>>;

/// What an attempt found; the log speaks only when this changes kind.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Nothing,
    NoSocket,
    Answering,
    Failing(String),
}

/// Asks the kubelet once, waiting for the answer (at most the call's
/// timeout), so that the very first sample already names the pods; then
/// keeps asking every `settings.refresh_interval` on the current runtime
/// until every receiver is gone.
pub async fn start(settings: KubeletSettings) -> PodAllocationsReceiver {
    let mut errors = 0u64;
    let (first, mut seen) = ask(&settings, &PodAllocations::default(), &mut errors).await;
    log_transition(&settings, &Seen::Nothing, &seen, &first);
    let mut unmapped = Vec::new();
    log_unmapped(&mut unmapped, &first);
    let (sender, receiver) = watch::channel(Arc::new(first));
    tokio::spawn(async move {
        let start = tokio::time::Instant::now() + settings.refresh_interval;
        let mut ticker = tokio::time::interval_at(start, settings.refresh_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = sender.closed() => return,
            }
            let last = sender.borrow().clone();
            let (next, now_seen) = ask(&settings, &last, &mut errors).await;
            log_transition(&settings, &seen, &now_seen, &next);
            log_unmapped(&mut unmapped, &next);
            seen = now_seen;
            sender.send_if_modified(|current| {
                if **current == next {
                    false
                } else {
                    *current = Arc::new(next);
                    true
                }
            });
        }
    });
    receiver
}

/// One attempt: the new value to publish and what was seen. A failing
/// kubelet keeps the last allocations (pods rarely change while it
/// restarts) but says it is down.
async fn ask(
    settings: &KubeletSettings,
    last: &PodAllocations,
    errors: &mut u64,
) -> (PodAllocations, Seen) {
    match super::ask_once(settings).await {
        Ok(None) => (PodAllocations::default(), Seen::NoSocket),
        Ok(Some(mut allocations)) => {
            allocations.status = Some(KubeletStatus {
                up: true,
                errors: *errors,
            });
            (allocations, Seen::Answering)
        }
        Err(error) => {
            *errors += 1;
            let mut kept = last.clone();
            kept.status = Some(KubeletStatus {
                up: false,
                errors: *errors,
            });
            (kept, Seen::Failing(error.to_string()))
        }
    }
}

/// Warns once about the DRA device names of NVIDIA's GPU driver that name
/// no GPU or MIG device, each time that set changes (`logged`: the set
/// last warned about).
fn log_unmapped(logged: &mut Vec<String>, value: &PodAllocations) {
    if value.unmapped_dra_names == *logged {
        return;
    }
    logged.clone_from(&value.unmapped_dra_names);
    if !logged.is_empty() {
        warn!(
            names = ?logged,
            devices = value.unmapped_dra_devices,
            "DRA devices of gpu.nvidia.com whose names are neither gpu-<minor> nor gpu-<minor>-mig-<profile>-<start>-<size>: their pods are not attributed to a GPU through them. Report the names with your DRA driver's version."
        );
    }
}

fn log_transition(settings: &KubeletSettings, before: &Seen, now: &Seen, value: &PodAllocations) {
    let socket = settings.socket.display();
    match (before, now) {
        (Seen::NoSocket, Seen::NoSocket)
        | (Seen::Answering, Seen::Answering)
        | (Seen::Failing(_), Seen::Failing(_)) => {}
        (_, Seen::NoSocket) => info!(
            socket = %socket,
            "No kubelet pod-resources socket: not a Kubernetes node, or the socket is not mounted into the agent; processes keep their pod UID but get no pod or namespace names."
        ),
        (_, Seen::Answering) => info!(
            socket = %socket,
            devices = value.by_device.len(),
            "The kubelet answers: GPUs and processes get their Kubernetes pod, namespace and container."
        ),
        (_, Seen::Failing(error)) => warn!(
            error = %error,
            "Cannot ask the kubelet which pods hold the GPUs; the last answer is kept and retried every refresh_interval."
        ),
        (_, Seen::Nothing) => {}
    }
}
