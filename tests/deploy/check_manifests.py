#!/usr/bin/env python3
"""Structural checks of deploy/ that need a YAML parser; run by tests/deploy.rs
with the test-tools venv's Python (PyYAML and jsonschema come with
kubernetes-validate). Exits 1 with every problem listed.

  check_manifests.py ROOT kubernetes CONFIG_OUT  the Kubernetes manifests;
                                                 writes the ConfigMap's
                                                 gpuwatch.toml to CONFIG_OUT
  check_manifests.py ROOT rule-tests             every alert has a firing and a
                                                 not-firing unit test, every
                                                 recording rule a test of its
                                                 recorded samples
  check_manifests.py ROOT dashboards DIR         the dashboards ConfigMap
                                                 generated under DIR holds
                                                 DIR/grafana/dashboards/*.json
  check_manifests.py ROOT gpu-operator BASE OVERLAY ARGS_OUT
                                                 OVERLAY (kustomize's output
                                                 for deploy/kubernetes-gpu-operator)
                                                 is BASE (the base and
                                                 prometheus-operator's) under
                                                 the GPU Operator's contracts
                                                 for dcgm-exporter, nothing
                                                 else; writes the container's
                                                 args to ARGS_OUT (JSON)
"""

import copy
import glob
import json
import os
import sys
import tomllib

import jsonschema
import yaml

problems = []


def check(condition, message):
    if not condition:
        problems.append(message)
    return condition


def load_all(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def strings(*names):
    return {n: {"type": "string"} for n in names}


# The parts of the Prometheus Operator's CRD schemas (monitoring.coreos.com/v1)
# that these manifests use; additionalProperties: false catches a misspelt
# field, which the API server would drop silently (unknown fields of custom
# resources are pruned).
LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
METADATA = {
    "type": "object",
    "required": ["name", "namespace"],
    "properties": {**strings("name", "namespace"), "labels": LABELS, "annotations": LABELS},
    "additionalProperties": False,
}
SERVICE_MONITOR = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": METADATA,
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "jobLabel": {"type": "string"},
                "selector": {
                    "type": "object",
                    "properties": {"matchLabels": LABELS},
                    "additionalProperties": False,
                },
                "namespaceSelector": {
                    "type": "object",
                    "properties": {"matchNames": {"type": "array", "items": {"type": "string"}}, "any": {"type": "boolean"}},
                    "additionalProperties": False,
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            **strings("port", "path", "scheme", "interval", "scrapeTimeout"),
                            "honorLabels": {"type": "boolean"},
                            "relabelings": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "properties": {
                                        "sourceLabels": {"type": "array", "items": {"type": "string"}},
                                        **strings("separator", "targetLabel", "regex", "replacement"),
                                        "action": {"enum": ["replace", "keep", "drop", "labelmap", "labeldrop", "labelkeep"]},
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}
DURATION = {"type": "string", "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"}
PROMETHEUS_RULE = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": METADATA,
        "spec": {
            "type": "object",
            "required": ["groups"],
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string"},
                            "interval": DURATION,
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["expr"],
                                    "additionalProperties": False,
                                    "properties": {
                                        **strings("alert", "record", "expr"),
                                        "for": DURATION,
                                        "keep_firing_for": DURATION,
                                        "labels": LABELS,
                                        "annotations": LABELS,
                                    },
                                },
                            },
                        },
                    },
                }
            },
        },
    },
}


def kubernetes(root, config_out):
    kdir = os.path.join(root, "deploy/kubernetes")
    docs = {}
    for path in sorted(glob.glob(os.path.join(kdir, "**/*.yaml"), recursive=True)):
        relative = os.path.relpath(path, root)
        if os.path.relpath(path, kdir).startswith("node-problem-detector" + os.sep):
            # node-problem-detector's overlay (patches, kube-system): checked
            # by tests/npd.rs.
            continue
        if os.path.basename(path) == "kustomization.yaml":
            # The kustomization lists exactly the manifests of its directory.
            k = load_all(path)[0]
            here = sorted(
                os.path.basename(p)
                for p in glob.glob(os.path.join(os.path.dirname(path), "*.yaml"))
                if os.path.basename(p) != "kustomization.yaml"
            )
            check(sorted(k.get("resources", [])) == here, f"{relative}: resources {k.get('resources')} != files {here}")
            continue
        for doc in load_all(path):
            key = (doc.get("kind"), doc.get("metadata", {}).get("name"))
            check(key not in docs, f"{relative}: {key} defined twice")
            docs[key] = doc
            if doc.get("kind") != "Namespace":
                check(doc["metadata"].get("namespace") == "gpuwatch", f"{relative}: {key} not in namespace gpuwatch")
            schema = {"ServiceMonitor": SERVICE_MONITOR, "PrometheusRule": PROMETHEUS_RULE}.get(doc.get("kind"))
            if schema is not None:
                for error in jsonschema.Draft202012Validator(schema).iter_errors(doc):
                    problems.append(f"{relative}: {'.'.join(map(str, error.absolute_path))}: {error.message}")

    expected = {
        ("Namespace", "gpuwatch"),
        ("ServiceAccount", "gpuwatch"),
        ("ConfigMap", "gpuwatch-config"),
        ("ConfigMap", "gpuwatch-dashboards"),
        ("DaemonSet", "gpuwatch"),
        ("Service", "gpuwatch"),
        ("ServiceMonitor", "gpuwatch"),
        ("PrometheusRule", "gpuwatch"),
    }
    if not check(set(docs) == expected, f"manifests {sorted(docs)} != {sorted(expected)}"):
        return

    # PrometheusRule: exactly the rules file's groups.
    with open(os.path.join(root, "deploy/prometheus/gpuwatch-rules.yml"), encoding="utf-8") as f:
        groups = yaml.safe_load(f)["groups"]
    check(docs[("PrometheusRule", "gpuwatch")]["spec"]["groups"] == groups,
          "PrometheusRule groups differ from deploy/prometheus/gpuwatch-rules.yml")

    # Dashboards ConfigMap: every grafana/dashboards/*.json, byte for byte.
    dash = docs[("ConfigMap", "gpuwatch-dashboards")]
    check(dash["metadata"]["labels"].get("grafana_dashboard") == "1", "gpuwatch-dashboards lacks grafana_dashboard: \"1\"")
    check_dashboards(root, dash)

    # The DaemonSet.
    ds = docs[("DaemonSet", "gpuwatch")]
    pod = ds["spec"]["template"]["spec"]
    check(ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items(),
          "DaemonSet selector does not match its pod labels")
    check(pod.get("hostPID") is True, "hostPID: true is needed for NVML to report the GPU's processes")
    check(pod.get("nodeSelector", {}).get("nvidia.com/gpu.present") == "true", "no nodeSelector nvidia.com/gpu.present")
    check(any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])), "no toleration for nvidia.com/gpu")
    # Root only for the pod-resources socket, and then without capabilities
    # (checked below) and with that socket mounted.
    pod_sc = pod.get("securityContext", {})
    runs_as_root = pod_sc.get("runAsUser") == 0
    check(pod_sc.get("runAsNonRoot") is (not runs_as_root), "pod runAsNonRoot agrees with runAsUser")
    check(len(pod["containers"]) == 1, "one container")
    c = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    check(env.get("NVIDIA_VISIBLE_DEVICES") == "all", "env NVIDIA_VISIBLE_DEVICES=all")
    check(env.get("NVIDIA_DRIVER_CAPABILITIES") == "utility", "env NVIDIA_DRIVER_CAPABILITIES=utility")
    for kind in ("requests", "limits"):
        check(not any(k.startswith("nvidia.com/") for k in c.get("resources", {}).get(kind, {})),
              f"the DaemonSet must not {kind[:-1]} a GPU: {c['resources'][kind]}")
    check(c["resources"]["requests"] == {"cpu": "10m", "memory": "32Mi"}, f"requests {c['resources']['requests']}")
    check("memory" in c["resources"].get("limits", {}), "a memory limit")
    sc = c.get("securityContext", {})
    check(sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem")
    check(sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation: false")
    check(sc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities drop ALL")
    check(not sc.get("privileged", False), "not privileged")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check(ports == {"metrics": 9842}, f"container ports {ports}")
    check(c["readinessProbe"]["httpGet"]["path"] == "/-/ready", "readiness probe /-/ready")
    check(c["livenessProbe"]["httpGet"]["path"] == "/-/healthy", "liveness probe /-/healthy")
    for probe in ("readinessProbe", "livenessProbe"):
        check(c[probe]["httpGet"]["port"] in ports, f"{probe} port names a container port")

    # The config: mounted where the args say, proc_root = the host /proc mount.
    cm = docs[("ConfigMap", "gpuwatch-config")]
    toml_text = cm["data"]["gpuwatch.toml"]
    config = tomllib.loads(toml_text)
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    # The history: the one writable mount, the node's /var/lib/gpuwatch
    # (it outlives the pod), where the agent's default path points
    # ($XDG_STATE_HOME/gpuwatch) unless the config names another file there.
    state_dir = os.path.join(env.get("XDG_STATE_HOME") or "/nonexistent", "gpuwatch")
    history_path = config.get("history", {}).get("path")
    if history_path is not None:
        check(os.path.dirname(history_path) == state_dir, f"history.path {history_path} is not in {state_dir}")
    state = mounts.get(state_dir)
    if check(state is not None, f"the history directory {state_dir} ($XDG_STATE_HOME/gpuwatch) is not a mount"):
        check(not state.get("readOnly"), f"{state_dir} is mounted read-only")
        host = volumes[state["name"]].get("hostPath", {})
        check(host.get("path") == "/var/lib/gpuwatch" and host.get("type") == "DirectoryOrCreate",
              f"{state_dir} is not the node's /var/lib/gpuwatch (DirectoryOrCreate): {host}")
    check(all(m.get("readOnly") for p, m in mounts.items() if p != state_dir), "every other mount read-only")
    config_path = c["args"][c["args"].index("--config") + 1]
    mount = mounts.get(os.path.dirname(config_path))
    if check(mount is not None, f"nothing mounted at {os.path.dirname(config_path)}"):
        check(volumes[mount["name"]].get("configMap", {}).get("name") == "gpuwatch-config", "config mount is gpuwatch-config")
    proc_root = config.get("sampler", {}).get("proc_root")
    mount = mounts.get(proc_root)
    if check(mount is not None, f"sampler.proc_root {proc_root!r} is not a mount of the DaemonSet"):
        check(volumes[mount["name"]].get("hostPath", {}).get("path") == "/proc", f"{proc_root} is not the host's /proc")
    socket = config.get("kubernetes", {}).get("pod_resources_socket")
    if check(socket is not None, "kubernetes.pod_resources_socket is not set in the ConfigMap"):
        mount = mounts.get(os.path.dirname(socket))
        if check(mount is not None, f"the directory of {socket} is not a mount of the DaemonSet"):
            check(volumes[mount["name"]].get("hostPath", {}).get("path") == "/var/lib/kubelet/pod-resources",
                  f"{os.path.dirname(socket)} is not the host's /var/lib/kubelet/pod-resources")
        check(runs_as_root, "the pod-resources socket accepts root only: the pod must run as uid 0")
    check(sm_honors_labels(docs), "the ServiceMonitor must honor labels (the workload's namespace/pod/container)")
    check(config.get("server", {}).get("listen", "0.0.0.0:9842").endswith(":9842"), "listen port 9842")
    with open(config_out, "w", encoding="utf-8") as f:
        f.write(toml_text)

    # Service -> pods, ServiceMonitor -> Service.
    svc = docs[("Service", "gpuwatch")]
    check(svc["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items(), "Service selects the pods")
    sports = {p["name"]: p for p in svc["spec"]["ports"]}
    check(sports.get("metrics", {}).get("port") == 9842, "Service port metrics = 9842")
    check(sports.get("metrics", {}).get("targetPort") in ("metrics", 9842), "Service targetPort")
    sm = docs[("ServiceMonitor", "gpuwatch")]
    check(sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items(), "ServiceMonitor selects the Service")
    check(all(e["port"] in sports for e in sm["spec"]["endpoints"]), "ServiceMonitor endpoints name a Service port")
    check(sm["spec"].get("jobLabel") is None and svc["metadata"]["name"] == "gpuwatch",
          "the job label (the Service's name) must be gpuwatch, as the collection alerts expect")


def sm_honors_labels(docs):
    endpoints = docs[("ServiceMonitor", "gpuwatch")]["spec"]["endpoints"]
    return all(e.get("honorLabels") is True for e in endpoints)


def check_dashboards(root, configmap):
    files = sorted(glob.glob(os.path.join(root, "grafana/dashboards/*.json")))
    expected = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            expected[os.path.basename(path)] = f.read()
    check((configmap.get("data") or {}) == expected,
          f"gpuwatch-dashboards data != grafana/dashboards/*.json ({sorted(configmap.get('data') or {})} vs {sorted(expected)})")


def rule_tests(root):
    with open(os.path.join(root, "deploy/prometheus/gpuwatch-rules.yml"), encoding="utf-8") as f:
        rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
    alerts = [r["alert"] for r in rules if "alert" in r]
    records = [r["record"] for r in rules if "record" in r]
    with open(os.path.join(root, "deploy/prometheus/gpuwatch-rules.test.yml"), encoding="utf-8") as f:
        tests = yaml.safe_load(f)["tests"]
    firing, quiet, recorded = set(), set(), set()
    for t in tests:
        for e in t.get("promql_expr_test", []):
            if e.get("exp_samples"):
                recorded.add(e["expr"].strip())
        for a in t.get("alert_rule_test", []):
            (firing if a.get("exp_alerts") else quiet).add(a["alertname"])
            for e in a.get("exp_alerts") or []:
                check(e.get("exp_annotations"), f"{a['alertname']} at {a['eval_time']}: no exp_annotations")
    check(len(alerts) == len(set(alerts)), "duplicate alert names")
    for alert in alerts:
        check(alert in firing, f"{alert}: no unit test where it fires")
        check(alert in quiet, f"{alert}: no unit test where it does not fire")
    unknown = (firing | quiet) - set(alerts)
    check(not unknown, f"tests of alerts that do not exist: {sorted(unknown)}")
    check(len(records) == len(set(records)), "duplicate recording rule names")
    for record in records:
        check(record in recorded, f"{record}: no promql_expr_test of the recorded series with expected samples")
    print(f"{len(alerts)} alerts, each tested firing and not firing; "
          f"{len(records)} recording rules, each tested with expected samples")


OVERLAY_DIR = "deploy/kubernetes-gpu-operator"
DRIVER_ROOT = "/run/nvidia/driver"


def rendered(path):
    """kustomize's output: {(kind, name): document}."""
    docs = {}
    for doc in load_all(path):
        key = (doc.get("kind"), doc.get("metadata", {}).get("name"))
        check(key not in docs, f"{path}: {key} twice")
        docs[key] = doc
    return docs


def gpu_operator(root, base_path, overlay_path, args_out):
    """The overlay that puts gpuwatch in the place of the GPU Operator's
    dcgm-exporter: the Operator's contracts for its exporter, and otherwise
    exactly the base manifests."""
    # Every file of the overlay is used by its kustomization.
    directory = os.path.join(root, OVERLAY_DIR)
    kustomization = load_all(os.path.join(directory, "kustomization.yaml"))[0]
    used = {p["path"] for p in kustomization.get("patches", [])}
    present = {os.path.basename(p) for p in glob.glob(os.path.join(directory, "*.yaml"))} - {"kustomization.yaml"}
    check(used == present, f"{OVERLAY_DIR}: patches {sorted(used)} != files {sorted(present)}")
    check(kustomization.get("resources") == ["../kubernetes/", "../kubernetes/prometheus-operator/"],
          f"{OVERLAY_DIR}: resources {kustomization.get('resources')}")

    base, overlay = rendered(base_path), rendered(overlay_path)
    if not check(set(base) == set(overlay), f"overlay objects {sorted(overlay)} != base {sorted(base)}"):
        return
    for key in overlay:
        schema = {"ServiceMonitor": SERVICE_MONITOR, "PrometheusRule": PROMETHEUS_RULE}.get(key[0])
        if schema is not None:
            for error in jsonschema.Draft202012Validator(schema).iter_errors(overlay[key]):
                problems.append(f"overlay {key}: {'.'.join(map(str, error.absolute_path))}: {error.message}")

    # The DaemonSet: the Operator's placement and NVML from its driver root.
    ds = copy.deepcopy(overlay[("DaemonSet", "gpuwatch")])
    pod = ds["spec"]["template"]["spec"]
    check(pod.pop("nodeSelector", None) == {"nvidia.com/gpu.deploy.dcgm-exporter": "true"},
          "nodeSelector is not exactly nvidia.com/gpu.deploy.dcgm-exporter=true")
    check({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod.get("tolerations", []),
          "no toleration for nvidia.com/gpu:NoSchedule")
    check(pod.pop("priorityClassName", None) == "system-node-critical", "priorityClassName is not system-node-critical")
    check(pod.pop("runtimeClassName", None) == "nvidia", "runtimeClassName is not nvidia")
    c = pod["containers"][0]
    check(any(p.get("name") == "metrics" for p in c.get("ports", [])), "no container port named metrics")
    args = c["args"]
    with open(args_out, "w", encoding="utf-8") as f:
        json.dump(args, f)
    base_args = base[("DaemonSet", "gpuwatch")]["spec"]["template"]["spec"]["containers"][0]["args"]
    check(args[: len(base_args)] == base_args, f"args {args} do not start with the base's {base_args}")
    extra = args[len(base_args):]
    check(extra[:2] == ["--metrics-compat", "dcgm"], f"no --metrics-compat dcgm after the base's args: {extra}")
    library = extra[3] if len(extra) == 4 and extra[2] == "--nvml-library" else None
    if check(library is not None, f"no --nvml-library PATH after --metrics-compat dcgm: {extra}"):
        check(library.startswith(DRIVER_ROOT + "/") and library.endswith("/libnvidia-ml.so.1"),
              f"--nvml-library {library} is not libnvidia-ml.so.1 under {DRIVER_ROOT}")
    c["args"] = base_args
    mounts = [m for m in c["volumeMounts"] if m["mountPath"] == DRIVER_ROOT]
    volumes = [v for v in pod["volumes"] if v.get("hostPath", {}).get("path") == DRIVER_ROOT]
    if check(len(mounts) == 1 and len(volumes) == 1 and mounts[0]["name"] == volumes[0]["name"],
             f"{DRIVER_ROOT} is not the host's {DRIVER_ROOT} mounted once"):
        check(mounts[0].get("readOnly") is True, f"{DRIVER_ROOT} mounted writable")
        check(mounts[0].get("mountPropagation") == "HostToContainer",
              f"{DRIVER_ROOT} without mountPropagation: HostToContainer (a driver container started later stays hidden)")
        c["volumeMounts"].remove(mounts[0])
        pod["volumes"].remove(volumes[0])
    base_pod = copy.deepcopy(base[("DaemonSet", "gpuwatch")])
    base_pod["spec"]["template"]["spec"].pop("nodeSelector", None)
    check(ds == base_pod, "the overlay changes the DaemonSet beyond the Operator's contracts")

    # The ServiceMonitor: the Operator's label for its exporter's.
    sm = copy.deepcopy(overlay[("ServiceMonitor", "gpuwatch")])
    labels = sm["metadata"]["labels"]
    check(labels.pop("app", None) == "nvidia-dcgm-exporter", "ServiceMonitor lacks app: nvidia-dcgm-exporter")
    check(sm == base[("ServiceMonitor", "gpuwatch")], "the overlay changes the ServiceMonitor beyond its labels")

    # Everything else as in the base.
    for key in sorted(set(base) - {("DaemonSet", "gpuwatch"), ("ServiceMonitor", "gpuwatch")}):
        check(overlay[key] == base[key], f"the overlay changes {key}")
    print(f"{len(overlay)} objects: the base under the GPU Operator's contracts")


def main(argv):
    root, what = argv[0], argv[1]
    if what == "kubernetes":
        kubernetes(root, argv[2])
    elif what == "rule-tests":
        rule_tests(root)
    elif what == "dashboards":
        docs = load_all(os.path.join(argv[2], "deploy/kubernetes/dashboards-configmap.yaml"))
        check(len(docs) == 1, "one ConfigMap")
        check_dashboards(argv[2], docs[0])
        print(f"{len((docs[0].get('data') or {}))} dashboards")
    elif what == "gpu-operator":
        gpu_operator(root, argv[2], argv[3], argv[4])
    else:
        sys.exit(f"unknown check {what}")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
