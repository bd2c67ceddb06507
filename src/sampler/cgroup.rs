//! Container attribution from `/proc/PID/cgroup`: which container (and which
//! Kubernetes pod) a GPU process runs in.
//!
//! Pure text parsing, no I/O. Both cgroup layouts are understood:
//!
//! ```text
//! v2, systemd driver:  0::/system.slice/docker-<id>.scope
//!                      0::/kubepods.slice/kubepods-burstable.slice/
//!                         kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope
//! v2, cgroupfs driver: 0::/kubepods/besteffort/pod<uid>/<id>
//! v1:                  12:memory:/docker/<id>
//!                      4:devices:/kubepods/burstable/pod<uid>/<id>
//! ```
//!
//! Runtime prefixes: `docker-`, `cri-containerd-`, `crio-`, `libpod-`
//! (`*-conmon-*` scopes are the runtime's monitor, not the container).

use crate::gpu::{Container, ContainerRuntime};

/// The container a process runs in, from the text of its `/proc/PID/cgroup`;
/// `None` for processes outside containers.
pub fn parse(text: &str) -> Option<Container> {
    // Lines of v1 controllers all name the same container; the first line
    // that names one wins (the v2 line `0::` comes last on hybrid hosts).
    text.lines().find_map(|line| {
        let path = line.splitn(3, ':').nth(2)?;
        parse_path(path)
    })
}

/// The container named by one cgroup path.
pub fn parse_path(path: &str) -> Option<Container> {
    let mut pod_uid = None;
    let mut found: Option<(String, Option<ContainerRuntime>)> = None;
    let mut previous = "";
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        if let Some(uid) = pod_segment(segment) {
            pod_uid = Some(uid);
        } else if let Some(hit) = container_segment(segment, previous) {
            found = Some(hit);
        }
        previous = segment;
    }
    let (id, runtime) = found?;
    Some(Container {
        id,
        runtime,
        pod_uid,
    })
}

/// A runtime-prefixed scope (`docker-<id>.scope`) or a bare id (`<id>`, whose
/// runtime the parent directory may tell: `/docker/<id>`).
fn container_segment(segment: &str, parent: &str) -> Option<(String, Option<ContainerRuntime>)> {
    let name = segment.strip_suffix(".scope").unwrap_or(segment);
    const PREFIXES: [(&str, ContainerRuntime); 5] = [
        ("docker-", ContainerRuntime::Docker),
        ("cri-containerd-", ContainerRuntime::Containerd),
        ("crio-", ContainerRuntime::CriO),
        ("libpod-", ContainerRuntime::Podman),
        ("cri-o-", ContainerRuntime::CriO),
    ];
    for (prefix, runtime) in PREFIXES {
        if let Some(id) = name.strip_prefix(prefix) {
            return is_container_id(id).then(|| (id.to_string(), Some(runtime)));
        }
    }
    if !is_container_id(name) {
        return None;
    }
    let runtime = match parent {
        "docker" => Some(ContainerRuntime::Docker),
        "libpod_parent" => Some(ContainerRuntime::Podman),
        _ => None,
    };
    Some((name.to_string(), runtime))
}

/// Longest container id taken: docker, containerd, CRI-O and podman ids
/// are 64 hex digits (a SHA-256); a longer one is not an id, and would make
/// an unbounded label.
pub const CONTAINER_ID_MAX: usize = 64;

/// Container ids are long hex strings (64 digits for docker, containerd,
/// CRI-O and podman).
fn is_container_id(text: &str) -> bool {
    (32..=CONTAINER_ID_MAX).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `pod<uid>` (cgroupfs driver) or `kubepods-<qos>-pod<uid_>.slice`
/// (systemd driver, dashes written as underscores): the UID with dashes.
fn pod_segment(segment: &str) -> Option<String> {
    let name = segment.strip_suffix(".slice").unwrap_or(segment);
    let uid = if let Some(rest) = name.strip_prefix("pod") {
        rest
    } else if name.starts_with("kubepods") {
        name.rsplit_once("-pod")?.1
    } else {
        return None;
    };
    let uid = uid.replace('_', "-");
    let shape_ok = uid.len() == 36
        && uid.bytes().enumerate().all(|(i, b)| {
            matches!(i, 8 | 13 | 18 | 23) == (b == b'-') && (b == b'-' || b.is_ascii_hexdigit())
        });
    shape_ok.then_some(uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f1c2b7a9e8d4c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b";
    const UID: &str = "1c6f1a2e-7b3d-4e5f-9a8b-0c1d2e3f4a5b";

    fn container(runtime: Option<ContainerRuntime>, pod: bool) -> Option<Container> {
        Some(Container {
            id: ID.into(),
            runtime,
            pod_uid: pod.then(|| UID.to_string()),
        })
    }

    #[test]
    fn docker_v1_and_v2() {
        let v1 = format!(
            "12:memory:/docker/{ID}\n11:devices:/docker/{ID}\n1:name=systemd:/docker/{ID}\n"
        );
        assert_eq!(parse(&v1), container(Some(ContainerRuntime::Docker), false));
        let v2 = format!("0::/system.slice/docker-{ID}.scope\n");
        assert_eq!(parse(&v2), container(Some(ContainerRuntime::Docker), false));
    }

    #[test]
    fn podman_cri_o_and_containerd_scopes() {
        let podman = format!("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container\n");
        assert_eq!(
            parse(&podman),
            container(Some(ContainerRuntime::Podman), false)
        );
        let podman_v1 = format!("3:cpu:/libpod_parent/{ID}\n");
        assert_eq!(
            parse(&podman_v1),
            container(Some(ContainerRuntime::Podman), false)
        );
        let conmon = format!("0::/machine.slice/libpod-conmon-{ID}.scope\n");
        assert_eq!(parse(&conmon), None, "conmon is not the container");
        let crio = format!("0::/machine.slice/crio-{ID}.scope\n");
        assert_eq!(parse(&crio), container(Some(ContainerRuntime::CriO), false));
    }

    #[test]
    fn kubernetes_systemd_driver_v2_with_underscored_uid() {
        let uid_ = UID.replace('-', "_");
        let text = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice/cri-containerd-{ID}.scope\n"
        );
        assert_eq!(
            parse(&text),
            container(Some(ContainerRuntime::Containerd), true)
        );
        let guaranteed = format!("0::/kubepods.slice/kubepods-pod{uid_}.slice/crio-{ID}.scope\n");
        assert_eq!(
            parse(&guaranteed),
            container(Some(ContainerRuntime::CriO), true)
        );
    }

    #[test]
    fn kubernetes_cgroupfs_driver_v1_and_v2() {
        let v1 = format!("11:devices:/kubepods/besteffort/pod{UID}/{ID}\n4:memory:/kubepods/besteffort/pod{UID}/{ID}\n");
        assert_eq!(parse(&v1), container(None, true));
        let v2 = format!("0::/kubepods/burstable/pod{UID}/{ID}\n");
        assert_eq!(parse(&v2), container(None, true));
    }

    #[test]
    fn host_processes_and_garbage_have_no_container() {
        for text in [
            "0::/user.slice/user-1000.slice/session-3.scope\n",
            "0::/\n",
            "12:memory:/system.slice/sshd.service\n",
            "",
            "nonsense",
            "0::/kubepods/burstable/podnot-a-uid/abc\n",
            "0::/docker/abc\n",
            &format!("0::/docker/{ID}0\n"),
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }
}
