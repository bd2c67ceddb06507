//! `[kubernetes]`: where to ask the kubelet which pod holds which GPU.

use std::path::PathBuf;
use std::time::Duration;

use super::limits;
use super::raw::RawKubernetes;
use super::Validator;

impl Validator<'_> {
    /// Checks `[kubernetes]`; `None` when the lookup is turned off
    /// (`pod_resources_socket = ""`).
    pub(super) fn kubernetes(
        &mut self,
        raw: RawKubernetes,
    ) -> Option<crate::kubernetes::KubeletSettings> {
        let refresh_interval = self.duration(
            "kubernetes.refresh_interval",
            raw.refresh_interval.as_ref(),
            Duration::from_secs(5),
            &limits::KUBELET_REFRESH,
        );
        let timeout = self.duration(
            "kubernetes.timeout",
            raw.timeout.as_ref(),
            Duration::from_secs(2),
            &limits::KUBELET_TIMEOUT,
        );
        let (socket, explicit) = match raw.pod_resources_socket {
            Some(path) => (path.into_inner(), true),
            None => (
                PathBuf::from(crate::kubernetes::DEFAULT_POD_RESOURCES_SOCKET),
                false,
            ),
        };
        if socket.as_os_str().is_empty() {
            return None;
        }
        Some(crate::kubernetes::KubeletSettings {
            socket,
            explicit,
            refresh_interval,
            timeout,
        })
    }
}
