//! One `List` call to the kubelet's pod-resources socket.

use std::path::Path;
use std::time::Duration;

use http::uri::PathAndQuery;
use tonic::transport::Endpoint;

use super::api::{ListPodResourcesRequest, ListPodResourcesResponse, LIST_PATH};

/// The largest answer accepted: the kubelet's own send limit (16 MiB), well
/// above tonic's 4 MiB default, which a node with hundreds of pods and their
/// CPU and memory assignments can approach.
const MAX_ANSWER_BYTES: usize = 16 << 20;

/// Why asking the kubelet failed.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    /// The socket could not be reached (absent, refused, not permitted).
    #[error("cannot connect to the kubelet's pod-resources socket {path}: {reason}. On Kubernetes, mount the host's /var/lib/kubelet/pod-resources into the agent and run it as root (the socket is root's); elsewhere set kubernetes.pod_resources_socket = \"\"")]
    Connect {
        /// The socket's path.
        path: String,
        /// What the connection attempt said.
        reason: String,
    },
    /// The kubelet answered the call with an error, or not in time.
    #[error("the kubelet's pod-resources List call failed: {0}")]
    Call(String),
}

/// Asks the kubelet behind the unix socket `socket` which devices every
/// container holds. Connects afresh each time: a kubelet restart replaces
/// the socket, and one connection per refresh costs well under a millisecond.
pub async fn list(
    socket: &Path,
    timeout: Duration,
) -> Result<ListPodResourcesResponse, KubeletError> {
    let connect_error = |reason: String| KubeletError::Connect {
        path: socket.display().to_string(),
        reason,
    };
    let endpoint = Endpoint::from_shared(format!("unix://{}", socket.display()))
        .map_err(|e| connect_error(e.to_string()))?
        .connect_timeout(timeout)
        .timeout(timeout);
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| connect_error(error_chain(&e)))?;
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(MAX_ANSWER_BYTES);
    grpc.ready()
        .await
        .map_err(|e| connect_error(error_chain(&e)))?;
    let response = grpc
        .unary(
            tonic::Request::new(ListPodResourcesRequest {}),
            PathAndQuery::from_static(LIST_PATH),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .map_err(|status| KubeletError::Call(format!("{}: {}", status.code(), status.message())))?;
    Ok(response.into_inner())
}

/// An error and its sources on one line ("transport error: No such file...").
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}
