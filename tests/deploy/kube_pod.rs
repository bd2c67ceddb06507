//! The Pod that tests/container.rs runs with `podman kube play`, made from
//! the DaemonSet of deploy/kubernetes/daemonset.yaml.

use std::path::Path;

use serde_yaml_ng::{Mapping, Value};

/// The Pod that `podman kube play` runs: the DaemonSet's pod template of
/// deploy/kubernetes/daemonset.yaml, with only what this machine needs
/// changed (each change is asserted to apply, so a renamed volume fails
/// here rather than silently running something else):
/// - `hostNetwork: true` and no `ports`: only 127.0.0.1 may be used here,
///   and podman 4.3 publishes every containerPort, which it refuses with
///   the host's network;
/// - `--simulate` and `--listen 127.0.0.1:PORT` after the manifest's args;
/// - the hostPaths of the history (`state`) and of the kubelet's socket
///   (`pod-resources`) moved into a temporary directory.
pub fn pod_from_daemonset(name: &str, port: u16, dir: &Path) -> (String, String) {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/daemonset.yaml"),
    )
    .expect("read daemonset.yaml");
    let daemonset: Value = serde_yaml_ng::from_str(&text).expect("daemonset.yaml is YAML");
    assert_eq!(daemonset["kind"], Value::from("DaemonSet"));
    let template = &daemonset["spec"]["template"];
    let image = template["spec"]["containers"][0]["image"]
        .as_str()
        .expect("the container's image")
        .to_string();
    let mut spec = template["spec"].clone();
    let spec_map = spec.as_mapping_mut().expect("pod spec");
    spec_map.insert("hostNetwork".into(), true.into());

    let containers = spec_map
        .get_mut("containers")
        .and_then(Value::as_sequence_mut)
        .expect("containers");
    assert_eq!(containers.len(), 1, "one container");
    let container = containers[0].as_mapping_mut().expect("container");
    assert!(
        container.remove("ports").is_some(),
        "the container has ports"
    );
    let args = container
        .get_mut("args")
        .and_then(Value::as_sequence_mut)
        .expect("the container has args");
    for arg in ["--simulate", "--listen", &format!("127.0.0.1:{port}")] {
        args.push(arg.into());
    }

    let volumes = spec_map
        .get_mut("volumes")
        .and_then(Value::as_sequence_mut)
        .expect("volumes");
    let mut moved = Vec::new();
    for volume in volumes.iter_mut() {
        let volume_name = volume["name"].as_str().unwrap_or_default().to_string();
        if let Some(path) = volume.get_mut("hostPath").and_then(|h| h.get_mut("path")) {
            let to = match volume_name.as_str() {
                // Not created here: the manifest's DirectoryOrCreate does it.
                "state" => dir.join("var-lib-gpuwatch"),
                "pod-resources" => {
                    let socket_dir = dir.join("pod-resources");
                    std::fs::create_dir_all(&socket_dir).expect("mkdir");
                    socket_dir
                }
                _ => continue,
            };
            *path = to.display().to_string().into();
            moved.push(volume_name);
        }
    }
    moved.sort();
    assert_eq!(moved, ["pod-resources", "state"], "hostPath volumes moved");

    let mut metadata = Mapping::new();
    metadata.insert("name".into(), name.into());
    metadata.insert("labels".into(), template["metadata"]["labels"].clone());
    let mut pod = Mapping::new();
    pod.insert("apiVersion".into(), "v1".into());
    pod.insert("kind".into(), "Pod".into());
    pod.insert("metadata".into(), metadata.into());
    pod.insert("spec".into(), spec);
    let yaml = serde_yaml_ng::to_string(&Value::Mapping(pod)).expect("pod YAML");
    (yaml, image)
}
