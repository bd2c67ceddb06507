//! Who uses each GPU, how it is shared, and how many more jobs fit: the
//! process, sharing (MPS, MIG) and capacity families.
//!
//! Cardinality is bounded: per GPU only the `process_top_n` processes using
//! the most memory get series of their own (`pid`, `process_name`); the
//! rest are summed into one series with `pid="other"`. A process that exits
//! leaves the snapshot, and so its series leave /metrics.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::families::Sink;

use crate::capacity::{self, CapacityConfig};
use crate::gpu::{GpuProcess, GpuSnapshot, Snapshot};

use super::detail::{Detail, DetailSet};
use crate::families::{families, flag, gauge, ids, unit, with, Labels};

/// What the process and capacity families need besides the snapshot.
#[derive(Debug, Clone)]
pub struct ProcessExport {
    /// Processes per GPU with series of their own.
    pub process_top_n: usize,
    /// Profiles and margin for the capacity families.
    pub capacity: Arc<CapacityConfig>,
}

impl Default for ProcessExport {
    fn default() -> Self {
        ProcessExport {
            process_top_n: 10,
            capacity: Arc::default(),
        }
    }
}

families! {
    processes: gauge("gpu_processes", "Processes with a context on the GPU (all of them, also those summed into pid=\"other\").", None),
    process_info: gauge("process_info", "A process on a GPU (value 1): its command, user, context type, container, Kubernetes pod UID, namespace, pod and container name, MIG GPU instance and whether it is an MPS client. Top processes by memory only.", None),
    process_memory: gauge("process_memory_used", "GPU memory used by a process; pid=\"other\" sums the processes beyond the top N by memory.", unit("bytes")),
    process_sm: gauge("process_sm_utilization", "Share of the last process interval in which a process ran kernels on the SMs (nvmlDeviceGetProcessUtilization); pid=\"other\" sums the rest.", unit("ratio")),
    process_mem_util: gauge("process_memory_utilization", "Share of the last process interval in which a process read or wrote device memory; pid=\"other\" sums the rest.", unit("ratio")),
    gpu_pod: gauge("gpu_pod_info", "A Kubernetes container the kubelet allocated the GPU, or one of its MIG instances (gpu_instance), to (value 1).", None),
    mps_server: gauge("mps_server_running", "Whether an MPS server (nvidia-cuda-mps-server) has a context on the GPU (1) or not (0).", None),
    mps_clients: gauge("mps_clients", "Processes on the GPU that are clients of an MPS server.", None),
    mig_instances: gauge("mig_instances", "MIG GPU instances on the GPU (while MIG is on).", None),
    mig_memory_total: gauge("mig_instance_memory_total", "Memory of a MIG GPU instance.", unit("bytes")),
    mig_memory_used: gauge("mig_instance_memory_used", "Memory in use in a MIG GPU instance.", unit("bytes")),
    mig_info: gauge("mig_instance_info", "A MIG GPU instance (value 1): its profile (\"1g.10gb\", empty when NVML cannot tell) and MIG device UUID; join on gpu_instance.", None),
    capacity_fits: gauge("gpu_capacity_fits", "How many more instances of a workload profile fit on the GPU now (free memory minus the margin, compute mode, MIG instances, SM share).", None),
    node_capacity_fits: gauge("node_capacity_fits", "How many more instances of a workload profile fit on the node now (sum over its GPUs).", None),
}

/// Encodes the process, sharing and capacity families of `snapshot`.
pub fn encode(
    snapshot: &Snapshot,
    options: &ProcessExport,
    detail: Detail,
    encoder: &mut impl Sink,
) -> fmt::Result {
    let mut f = Families::new();
    let per_process = detail.has(DetailSet::Processes);
    for gpu in snapshot.gpus.iter() {
        f.add_processes(gpu, options.process_top_n, per_process);
        f.add_sharing(gpu);
        f.add_pods(gpu);
    }
    f.add_capacity(snapshot, &options.capacity);
    f.encode(encoder)
}

/// The indices of `processes` ordered by memory used, largest first (ties:
/// lower pid first).
pub fn by_memory(processes: &[GpuProcess]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..processes.len()).collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&processes[a], &processes[b]);
        pb.used_memory_bytes
            .unwrap_or(0)
            .cmp(&pa.used_memory_bytes.unwrap_or(0))
            .then(pa.pid.cmp(&pb.pid))
    });
    order
}

fn sum(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    values.fold(None, |acc, v| match (acc, v) {
        (None, v) => v,
        (Some(a), Some(v)) => Some(a + v),
        (a, None) => a,
    })
}

impl<'a> Families<'a> {
    /// `gpu_processes`, and the per-process families when `per_process`
    /// (detail set `processes`).
    fn add_processes(&mut self, gpu: &'a GpuSnapshot, top_n: usize, per_process: bool) {
        if !gpu.is_up() {
            return;
        }
        let id = || ids(gpu);
        self.processes.push(id(), gpu.processes.len() as f64);
        if !per_process {
            return;
        }
        let order = by_memory(&gpu.processes);
        let (top, rest) = order.split_at(top_n.min(order.len()));
        for &i in top {
            let p = &gpu.processes[i];
            let mut labels = with(id(), "pid", p.pid.to_string());
            labels.push((
                "process_name",
                Cow::Borrowed(p.name.as_deref().unwrap_or("")),
            ));
            self.process_sm
                .push_some(labels.clone(), p.sm_utilization_ratio);
            self.process_mem_util
                .push_some(labels.clone(), p.memory_utilization_ratio);
            labels.push(("type", Cow::Borrowed(p.kind.as_str())));
            self.process_memory
                .push_some(labels.clone(), p.used_memory_bytes.map(|b| b as f64));
            self.process_info.push(info_labels(labels, p), 1.0);
        }
        if rest.is_empty() {
            return;
        }
        let others = || rest.iter().map(|&i| &gpu.processes[i]);
        let mut labels = with(id(), "pid", "other");
        labels.push(("process_name", Cow::Borrowed("other")));
        self.process_sm.push_some(
            labels.clone(),
            sum(others().map(|p| p.sm_utilization_ratio)).map(|v| v.min(1.0)),
        );
        self.process_mem_util.push_some(
            labels.clone(),
            sum(others().map(|p| p.memory_utilization_ratio)).map(|v| v.min(1.0)),
        );
        labels.push(("type", Cow::Borrowed("other")));
        self.process_memory.push_some(
            labels,
            sum(others().map(|p| p.used_memory_bytes.map(|b| b as f64))),
        );
    }

    fn add_sharing(&mut self, gpu: &'a GpuSnapshot) {
        if !gpu.is_up() {
            return;
        }
        let id = || ids(gpu);
        let server = gpu.processes.iter().any(GpuProcess::is_mps_server);
        self.mps_server.push(id(), flag(server));
        let clients = gpu.processes.iter().filter(|p| p.mps_client).count();
        self.mps_clients.push(id(), clients as f64);
        if gpu.health.mig_enabled == Some(true) {
            self.mig_instances
                .push(id(), gpu.mig_instances.len() as f64);
            for m in gpu.mig_instances.iter() {
                let labels = with(id(), "gpu_instance", m.gpu_instance_id.to_string());
                self.mig_memory_total
                    .push(labels.clone(), m.memory_total_bytes as f64);
                self.mig_memory_used
                    .push(labels.clone(), m.memory_used_bytes as f64);
                let mut info = labels;
                info.push(("profile", Cow::Borrowed(m.profile.as_deref().unwrap_or(""))));
                info.push(("mig_uuid", Cow::Borrowed(m.uuid.as_str())));
                self.mig_info.push(info, 1.0);
            }
        }
    }

    fn add_pods(&mut self, gpu: &'a GpuSnapshot) {
        for allocation in gpu.pods.iter() {
            let owner = &allocation.owner;
            let mut labels = ids(gpu);
            labels.push(("namespace", Cow::Borrowed(owner.namespace.as_str())));
            labels.push(("pod", Cow::Borrowed(owner.pod.as_str())));
            labels.push(("container", Cow::Borrowed(owner.container.as_str())));
            labels.push(("resource", Cow::Borrowed(allocation.resource.as_str())));
            labels.push((
                "gpu_instance",
                allocation
                    .gpu_instance_id
                    .map_or(Cow::Borrowed(""), |id| Cow::Owned(id.to_string())),
            ));
            self.gpu_pod.push(labels, 1.0);
        }
    }

    fn add_capacity(&mut self, snapshot: &'a Snapshot, config: &CapacityConfig) {
        let margin = config.memory_margin_bytes;
        for profile in &config.profiles {
            let mut total = 0;
            for gpu in &snapshot.gpus {
                if let Some(fit) = capacity::gpu_fit(gpu, profile, margin) {
                    total += fit.fits;
                    self.capacity_fits.push(
                        with(ids(gpu), "profile", profile.name.clone()),
                        fit.fits as f64,
                    );
                }
            }
            self.node_capacity_fits.push(
                vec![("profile", Cow::Owned(profile.name.clone()))],
                total as f64,
            );
        }
    }
}

/// The `process_info` labels: `base` (gpu, uuid, pid, process_name, type)
/// and what /proc and NVML tell about the process (empty when unknown).
fn info_labels<'a>(mut labels: Labels<'a>, p: &'a GpuProcess) -> Labels<'a> {
    let host = p.host.as_deref();
    let text = |v: Option<&'a str>| Cow::Borrowed(v.unwrap_or(""));
    let container = host.and_then(|h| h.container.as_ref());
    labels.push(("user", text(host.and_then(|h| h.user.as_deref()))));
    labels.push(("command", text(host.and_then(|h| h.command.as_deref()))));
    labels.push(("container_id", text(container.map(|c| c.id.as_str()))));
    labels.push((
        "container_runtime",
        text(container.and_then(|c| c.runtime.map(|r| r.as_str()))),
    ));
    labels.push((
        "pod_uid",
        text(container.and_then(|c| c.pod_uid.as_deref())),
    ));
    let pod = p.pod.as_deref();
    labels.push(("namespace", text(pod.map(|k| k.namespace.as_str()))));
    labels.push(("pod", text(pod.map(|k| k.pod.as_str()))));
    labels.push(("container", text(pod.map(|k| k.container.as_str()))));
    labels.push((
        "gpu_instance",
        p.gpu_instance_id
            .map_or(Cow::Borrowed(""), |id| Cow::Owned(id.to_string())),
    ));
    labels.push((
        "mps_client",
        Cow::Borrowed(if p.mps_client { "true" } else { "false" }),
    ));
    labels
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::SystemTime;

    use prometheus_client::collector::Collector;
    use prometheus_client::encoding::DescriptorEncoder;
    use prometheus_client::registry::Registry;

    use super::*;
    use crate::gpu::{testing, MigInstance, SlowReadings};

    #[derive(Debug)]
    struct Body(Snapshot);

    impl Collector for Body {
        fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
            encode(
                &self.0,
                &ProcessExport::default(),
                Detail::full(),
                &mut encoder,
            )
        }
    }

    fn exposition(gpus: Vec<GpuSnapshot>) -> String {
        let mut registry = Registry::with_prefix("gpuwatch");
        registry.register_collector(Box::new(Body(testing::snapshot(SystemTime::now(), gpus))));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        text
    }

    #[test]
    fn mig_info_names_the_profile_and_leaves_it_empty_when_unknown() {
        let instance = |id: u32, profile: Option<&str>| MigInstance {
            gpu_instance_id: id,
            uuid: format!("MIG-{id}"),
            profile: profile.map(str::to_string),
            memory_total_bytes: 10 << 30,
            memory_used_bytes: 0,
        };
        let mig = GpuSnapshot {
            health: Arc::new(SlowReadings {
                mig_enabled: Some(true),
                ..SlowReadings::default()
            }),
            mig_instances: Arc::new(vec![instance(1, Some("1g.10gb")), instance(2, None)]),
            ..testing::gpu(0)
        };
        let text = exposition(vec![mig, testing::gpu(1)]);
        let info: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("gpuwatch_mig_instance_info{"))
            .collect();
        assert_eq!(
            info,
            [
                "gpuwatch_mig_instance_info{gpu=\"0\",uuid=\"GPU-0\",gpu_instance=\"1\",profile=\"1g.10gb\",mig_uuid=\"MIG-1\"} 1.0",
                "gpuwatch_mig_instance_info{gpu=\"0\",uuid=\"GPU-0\",gpu_instance=\"2\",profile=\"\",mig_uuid=\"MIG-2\"} 1.0",
            ]
        );
    }
}
