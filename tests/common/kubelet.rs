//! A stand-in kubelet: serves the pod-resources `List` call on a unix
//! socket with gRPC (tonic), answering whatever the test sets. There is no
//! real kubelet to run here; the wire format is the real one.

use std::convert::Infallible;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use gpuwatch::kubernetes::api::{
    CdiDevice, ClaimResource, ContainerDevices, ContainerResources, DynamicResource,
    ListPodResourcesRequest, ListPodResourcesResponse, PodResources, LIST_PATH, SERVICE_NAME,
};
use tonic::body::Body;
use tonic::codegen::{http, Service};

/// What `List` answers.
#[derive(Debug, Clone)]
pub enum Answer {
    /// These pods.
    Pods(ListPodResourcesResponse),
    /// A gRPC error.
    Fail(tonic::Code, String),
}

struct Shared {
    answer: Mutex<Answer>,
    calls: AtomicU64,
}

/// A running stand-in kubelet; stops (and removes its socket) on drop.
pub struct FakeKubelet {
    /// The socket it listens on.
    pub socket: PathBuf,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeKubelet {
    /// Serves `answer` on `socket` (created; its directory must exist).
    pub fn start(socket: &Path, answer: Answer) -> FakeKubelet {
        let shared = Arc::new(Shared {
            answer: Mutex::new(answer),
            calls: AtomicU64::new(0),
        });
        let mut kubelet = FakeKubelet {
            socket: socket.to_path_buf(),
            shared,
            stop: None,
            thread: None,
        };
        kubelet.serve();
        kubelet
    }

    fn serve(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let lister = Lister(self.shared.clone());
        let socket = self.socket.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::UnixListener::bind(&socket).expect("bind the socket");
                let _ = ready_tx.send(());
                tonic::transport::Server::builder()
                    .serve_with_incoming_shutdown(
                        lister,
                        tokio_stream::wrappers::UnixListenerStream::new(listener),
                        async {
                            let _ = stopped.await;
                        },
                    )
                    .await
                    .expect("serve");
            });
        });
        ready_rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the stand-in kubelet listens");
        self.stop = Some(stop);
        self.thread = Some(thread);
    }

    /// For `tests/scenarios/golden-full.toml`: GPU 0's MIG instance 2 (where
    /// tritonserver, pid 4343, runs) given to `serving/triton-0`, container
    /// `server`.
    pub fn golden_triton(socket: &Path) -> FakeKubelet {
        FakeKubelet::start(
            socket,
            pods(vec![(
                "serving",
                "triton-0",
                vec![(
                    "server",
                    "nvidia.com/mig-2g.10gb",
                    vec!["MIG-a0000000-0000-4000-8000-000000000000-2".into()],
                )],
            )]),
        )
    }

    /// Changes what `List` answers from now on.
    pub fn set(&self, answer: Answer) {
        *self.shared.answer.lock().expect("answer lock") = answer;
    }

    /// `List` calls answered so far.
    pub fn calls(&self) -> u64 {
        self.shared.calls.load(Ordering::SeqCst)
    }

    /// Stops serving and removes the socket, as a kubelet that exits.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }

    /// Serves again on the same socket, as a restarted kubelet.
    pub fn restart(&mut self) {
        self.stop();
        self.serve();
    }
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A pod for [`pods`]: namespace, name, and per container its name, the
/// resource and the device ids.
pub type Pod<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str, Vec<String>)>);

/// A `List` answer holding `pods`.
pub fn pods(pods: Vec<Pod>) -> Answer {
    Answer::Pods(ListPodResourcesResponse {
        pod_resources: pods
            .into_iter()
            .map(|(namespace, name, containers)| PodResources {
                name: name.into(),
                namespace: namespace.into(),
                containers: containers
                    .into_iter()
                    .map(|(container, resource, ids)| ContainerResources {
                        name: container.into(),
                        devices: vec![ContainerDevices {
                            resource_name: resource.into(),
                            device_ids: ids,
                        }],
                        dynamic_resources: Vec::new(),
                    })
                    .collect(),
            })
            .collect(),
    })
}

/// A pod whose container holds one DRA claim, for [`dra_pods`]: namespace,
/// name, container, claim name, and the claim's devices as (driver, pool,
/// device name).
pub type DraPod<'a> = (
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    Vec<(&'a str, &'a str, &'a str)>,
);

/// A `List` answer holding `pods`, their devices all allocated through DRA
/// (`dynamic_resources`, no device plugin), with the CDI device names
/// NVIDIA's driver writes.
pub fn dra_pods(pods: Vec<DraPod>) -> Answer {
    Answer::Pods(ListPodResourcesResponse {
        pod_resources: pods
            .into_iter()
            .map(
                |(namespace, name, container, claim, devices)| PodResources {
                    name: name.into(),
                    namespace: namespace.into(),
                    containers: vec![ContainerResources {
                        name: container.into(),
                        devices: Vec::new(),
                        dynamic_resources: vec![DynamicResource {
                            claim_name: claim.into(),
                            claim_namespace: namespace.into(),
                            claim_resources: devices
                                .into_iter()
                                .map(|(driver, pool, device)| ClaimResource {
                                    cdi_devices: vec![CdiDevice {
                                        name: format!("k8s.{driver}/claim={device}"),
                                    }],
                                    driver_name: driver.into(),
                                    pool_name: pool.into(),
                                    device_name: device.into(),
                                })
                                .collect(),
                        }],
                    }],
                },
            )
            .collect(),
    })
}

#[derive(Clone)]
struct Lister(Arc<Shared>);

impl tonic::server::NamedService for Lister {
    const NAME: &'static str = SERVICE_NAME;
}

impl Service<http::Request<Body>> for Lister {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let shared = self.0.clone();
        Box::pin(async move {
            if request.uri().path() != LIST_PATH {
                return Ok(
                    tonic::Status::unimplemented("this kubelet serves List only").into_http(),
                );
            }
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
            Ok(grpc.unary(ListOnce(shared), request).await)
        })
    }
}

struct ListOnce(Arc<Shared>);

impl tonic::server::UnaryService<ListPodResourcesRequest> for ListOnce {
    type Response = ListPodResourcesResponse;
    type Future =
        std::future::Ready<Result<tonic::Response<ListPodResourcesResponse>, tonic::Status>>;

    fn call(&mut self, _: tonic::Request<ListPodResourcesRequest>) -> Self::Future {
        self.0.calls.fetch_add(1, Ordering::SeqCst);
        let answer = self.0.answer.lock().expect("answer lock").clone();
        std::future::ready(match answer {
            Answer::Pods(response) => Ok(tonic::Response::new(response)),
            Answer::Fail(code, message) => Err(tonic::Status::new(code, message)),
        })
    }
}
