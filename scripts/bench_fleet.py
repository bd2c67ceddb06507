#!/usr/bin/env python3
"""Fleet benchmark: many gpuwatch agents on one real Prometheus and one real
Alertmanager, as a small cluster would run them.

Usage: scripts/bench_fleet.py [--agents 50] [--seconds 420] [--metrics-detail none]
                              [--metrics-compat none]
                              [--agent target/release/gpuwatch]

Starts N agents on loopback (simulated scenarios in turn: h100x8, h200,
workloads, demo, faults, thermal-incident, memory-pressure, health,
desktop-rtx3090; history off except on every tenth agent), one Prometheus
(Debian's `prometheus`) scraping them every 15 s with the bundled rules
(deploy/prometheus/gpuwatch-rules.yml), and one Alertmanager (Debian's
`prometheus-alertmanager`) that sends its notifications to a small webhook
sink in this script. After the run it prints:

  * series per 8-GPU node (h100x8), from one agent's /metrics, for gpuwatch
    alone and with each --metrics-compat set;
  * series per node as Prometheus stored them (median and max over nodes);
  * Prometheus: head series, samples appended per second, resident memory,
    rule group evaluation time;
  * the fleet dashboard's queries (grafana/dashboards/gpuwatch-fleet.json,
    every target, template variables set to "all"): latency of an instant
    query and of a 1 h range query, median of 5 runs each;
  * alerts: firing in Prometheus (over all nodes), held by Alertmanager,
    its groups, and the notifications the webhook sink received;
  * the agents' summed CPU (share of one core) and RSS.

Nothing here is a pass/fail test: it prints figures. The machine is shared;
the load average at start and end is printed beside them.
"""
import argparse
import http.server
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
SCENARIOS = [
    "h100x8",
    "h200",
    "workloads",
    "demo",
    "faults",
    "thermal-incident",
    "memory-pressure",
    "health",
    "desktop-rtx3090",
]
COMPAT_SETS = ["none", "dcgm", "nvidia_smi", "dcgm,nvidia_smi"]


_TAKEN = set()


def free_port():
    """A loopback port free now and not handed out before in this run: with
    hundreds of agents the kernel may offer a port again once its probe
    socket is closed, before the agent given it has bound it."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _TAKEN:
            _TAKEN.add(port)
            return port


def need(tool):
    path = shutil.which(tool)
    if path is None:
        sys.exit(
            f"bench_fleet: {tool} is not installed; install Debian's "
            f"{'prometheus-alertmanager' if 'alert' in tool else 'prometheus'} package"
        )
    return path


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def wait_ready(url, what, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            get(url, timeout=2)
            return
        except OSError:
            time.sleep(0.3)
    sys.exit(f"bench_fleet: {what} did not answer {url} within {seconds} s")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def process_cpu_ns(pid):
    """Exact CPU time of every thread of `pid` (schedstat, ns): /proc/PID/stat
    counts 10 ms ticks, too coarse for an agent that works ~1 ms a second."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return total


def own_metric(base, name):
    """A family's samples summed over their labels, from a server's own
    /metrics (e.g. samples appended, which Prometheus splits by type)."""
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in get(f"{base}/metrics").decode().splitlines()
        if line.startswith(name + " ") or line.startswith(name + "{")
    ]
    return sum(values) if values else float("nan")


def rss_bytes(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def samples_in(text):
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


class Sink(http.server.BaseHTTPRequestHandler):
    """Alertmanager's webhook receiver: counts notifications and alerts."""

    notifications = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            payload = json.loads(body)
            Sink.notifications.append(
                (payload.get("groupLabels", {}), len(payload.get("alerts", [])))
            )
        except ValueError:
            Sink.notifications.append(({"unparsed": True}, 0))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def start_agent(agent, port, scenario, work, index, compat="none", history=False, detail="none"):
    """Starts one agent; its log goes to a file in `work` (the parent's copy
    of the descriptor is closed at once, so 200 agents hold no 200 files
    open here)."""
    cmd = [
        agent,
        "run",
        "--simulate",
        scenario,
        "--listen",
        f"127.0.0.1:{port}",
        "--metrics-compat",
        compat,
        "--metrics-detail",
        detail,
    ]
    if history:
        cmd += ["--history-db", os.path.join(work, f"agent-{index}.db")]
    else:
        cmd += ["--no-history"]
    env = dict(os.environ, XDG_STATE_HOME=work, GPUWATCH_LOG="warn")
    with open(os.path.join(work, f"agent-{index}.log"), "wb") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)


def series_per_compat(agent, work, detail="none"):
    """Samples one h100x8 agent exposes with each compat set (at `detail`)."""
    out = {}
    for i, compat in enumerate(COMPAT_SETS):
        port = free_port()
        proc = start_agent(agent, port, "h100x8", work, f"compat-{i}", compat, detail=detail)
        try:
            url = f"http://127.0.0.1:{port}/metrics"
            wait_ready(url, f"agent ({compat})")
            time.sleep(3)  # the first slow tick and process scan are in
            out[compat] = samples_in(get(url).decode())
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return out


def prometheus_config(targets, am_port, work):
    rules = os.path.join(work, "gpuwatch-rules.yml")
    shutil.copy(os.path.join(ROOT, "deploy/prometheus/gpuwatch-rules.yml"), rules)
    static = "\n".join(
        f"      - targets: ['127.0.0.1:{port}']\n"
        f"        labels: {{__node_name: 'node-{i:02d}'}}"
        for i, port in enumerate(targets)
    )
    config = f"""
global:
  scrape_interval: 15s
  evaluation_interval: 15s
rule_files:
  - {rules}
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:{am_port}']
scrape_configs:
  - job_name: gpuwatch
    scrape_interval: 15s
    scrape_timeout: 10s
    static_configs:
{static}
    relabel_configs:
      - source_labels: [__node_name]
        target_label: instance
"""
    path = os.path.join(work, "prometheus.yml")
    with open(path, "w") as f:
        f.write(config)
    return path


def alertmanager_config(sink_port, work):
    config = f"""
route:
  receiver: sink
  group_by: [alertname, severity]
  group_wait: 10s
  group_interval: 30s
  repeat_interval: 4h
receivers:
  - name: sink
    webhook_configs:
      - url: http://127.0.0.1:{sink_port}/
"""
    path = os.path.join(work, "alertmanager.yml")
    with open(path, "w") as f:
        f.write(config)
    return path


class Prom:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}/api/v1"

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        body = get(f"{self.base}/query?{urllib.parse.urlencode(params)}", timeout=60)
        return json.loads(body)["data"]["result"]

    def scalar(self, expr):
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else float("nan")

    def range(self, expr, start, end, step):
        params = {"query": expr, "start": start, "end": end, "step": step}
        get(f"{self.base}/query_range?{urllib.parse.urlencode(params)}", timeout=60)


def dashboard_queries():
    with open(os.path.join(ROOT, "grafana/dashboards/gpuwatch-fleet.json")) as f:
        dashboard = json.load(f)
    panels = []
    for panel in dashboard.get("panels", []):
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    exprs = []
    for panel in panels:
        for target in panel.get("targets", []):
            expr = target.get("expr")
            if expr:
                exprs.append((panel.get("title", "?"), expr))
    substitutions = [
        (r"\$\{?__rate_interval\}?", "1m"),
        (r"\$\{?__interval\}?", "15s"),
        (r"\$\{?__range\}?", "1h"),
        (r'=~"\$\{?instance\}?"', '=~".*"'),
        (r'=~"\$\{?gpu\}?"', '=~".*"'),
    ]
    out = []
    for title, expr in exprs:
        for pattern, value in substitutions:
            expr = re.sub(pattern, value, expr)
        out.append((title, expr))
    return out


def quantile(sorted_values, q):
    """The q-quantile of an ascending list (nearest rank); NaN when empty."""
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def timed(fn, runs=5):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=420)
    parser.add_argument("--agent", default=os.path.join(ROOT, "target/release/gpuwatch"))
    parser.add_argument("--metrics-detail", default="none",
                        help="detail sets of every agent (gpuwatch run --metrics-detail): none (the default /metrics) or full, ...")
    parser.add_argument("--metrics-compat", default="none",
                        help="compat sets of every agent in the fleet (gpuwatch run --metrics-compat), e.g. dcgm")
    args = parser.parse_args()
    if not os.access(args.agent, os.X_OK):
        sys.exit(f"bench_fleet: no agent at {args.agent}; run `cargo build --release` first")
    prometheus = need("prometheus")
    alertmanager = need("prometheus-alertmanager")
    load_start = os.getloadavg()

    work = tempfile.mkdtemp(prefix="gpuwatch-fleet-")
    procs = []
    try:
        per_compat = series_per_compat(args.agent, work, args.metrics_detail)

        sink_port = free_port()
        sink = http.server.ThreadingHTTPServer(("127.0.0.1", sink_port), Sink)
        threading.Thread(target=sink.serve_forever, daemon=True).start()

        am_port = free_port()
        am = subprocess.Popen(
            [
                alertmanager,
                f"--config.file={alertmanager_config(sink_port, work)}",
                f"--storage.path={work}/am",
                f"--web.listen-address=127.0.0.1:{am_port}",
                "--cluster.listen-address=",
            ],
            stdout=open(os.path.join(work, "alertmanager.log"), "wb"),
            stderr=subprocess.STDOUT,
        )
        procs.append(am)
        wait_ready(f"http://127.0.0.1:{am_port}/-/ready", "Alertmanager")

        ports = [free_port() for _ in range(args.agents)]
        agents = []
        for i, port in enumerate(ports):
            scenario = SCENARIOS[i % len(SCENARIOS)]
            agent = start_agent(args.agent, port, scenario, work, i, compat=args.metrics_compat,
                                history=(i % 10 == 0), detail=args.metrics_detail)
            agents.append((agent, port, scenario))
            procs.append(agent)
        for _, port, _ in agents:
            # Hundreds of agents start at once on two cores: allow time.
            wait_ready(f"http://127.0.0.1:{port}/-/ready", "agent", seconds=300)

        prom_port = free_port()
        prom = subprocess.Popen(
            [
                prometheus,
                f"--config.file={prometheus_config(ports, am_port, work)}",
                f"--storage.tsdb.path={work}/prometheus",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            stdout=open(os.path.join(work, "prometheus.log"), "wb"),
            stderr=subprocess.STDOUT,
        )
        procs.append(prom)
        wait_ready(f"http://127.0.0.1:{prom_port}/-/ready", "Prometheus")
        p = Prom(prom_port)

        # Warm-up: agents' first slow tick, Prometheus's first scrapes.
        time.sleep(30)
        prom_base = f"http://127.0.0.1:{prom_port}"
        appended = "prometheus_tsdb_head_samples_appended_total"
        cpu0 = {a.pid: process_cpu_ns(a.pid) for a, _, _ in agents}
        prom_cpu0 = cpu_seconds(prom.pid)
        appended0 = own_metric(prom_base, appended)
        t0 = time.time()
        # Every 15 s (one evaluation interval): each rule group's last
        # evaluation time, Prometheus's RSS and the load average, so that
        # p50/max are over the whole run rather than one reading.
        group_evals, prom_rss_seen, loads = [], [], []
        while time.time() - t0 < max(args.seconds - 30, 60):
            time.sleep(15)
            for g in json.loads(get(f"{p.base}/rules"))["data"]["groups"]:
                group_evals.append(g.get("evaluationTime", 0.0))
            prom_rss_seen.append(rss_bytes(prom.pid))
            loads.append(os.getloadavg()[0])
        elapsed = time.time() - t0
        agent_cpu = (
            sum(process_cpu_ns(a.pid) - cpu0[a.pid] for a, _, _ in agents) / 1e9 / elapsed
        )
        prom_cpu = (cpu_seconds(prom.pid) - prom_cpu0) / elapsed
        samples_rate = (own_metric(prom_base, appended) - appended0) / elapsed
        agent_rss = [rss_bytes(a.pid) for a, _, _ in agents]

        by_node = p.query('count by (instance) ({job="gpuwatch"})')
        node_series = sorted(int(r["value"][1]) for r in by_node)
        scenario_of = {f"node-{i:02d}": s for i, (_, _, s) in enumerate(agents)}
        h100_series = [
            int(r["value"][1])
            for r in by_node
            if scenario_of.get(r["metric"].get("instance")) == "h100x8"
        ]
        head_series = own_metric(prom_base, "prometheus_tsdb_head_series")
        prom_rss = rss_bytes(prom.pid)
        rule_groups = json.loads(get(f"{p.base}/rules"))["data"]["groups"]
        rule_eval = sorted(group_evals or [g.get("evaluationTime", 0.0) for g in rule_groups])
        # Every scrape's duration over the measured window, all targets.
        window = max(int(time.time() - t0), 60)
        durations = sorted(
            float(v)
            for r in p.query(f'scrape_duration_seconds{{job="gpuwatch"}}[{window}s]')
            for _, v in r["values"]
        )
        firing = p.query('ALERTS{alertstate="firing"}')
        pending = p.query('ALERTS{alertstate="pending"}')
        am_alerts = json.loads(get(f"http://127.0.0.1:{am_port}/api/v2/alerts"))
        am_groups = json.loads(get(f"http://127.0.0.1:{am_port}/api/v2/alerts/groups"))

        queries = dashboard_queries()
        now = time.time()
        instant, ranged, slowest = [], [], ("", 0.0)
        for title, expr in queries:
            t_instant = timed(lambda: p.query(expr, at=now))
            t_range = timed(lambda: p.range(expr, t0, now, 15))
            instant.append(t_instant)
            ranged.append(t_range)
            if t_range > slowest[1]:
                slowest = (title, t_range)

        load_end = os.getloadavg()
        mib = 1024 * 1024
        print(
            f"# gpuwatch fleet benchmark: {args.agents} agents (--metrics-detail {args.metrics_detail}, "
            f"--metrics-compat {args.metrics_compat}), {args.seconds} s, one Prometheus, one Alertmanager"
        )
        print(f"load average at start {load_start[0]:.2f}, at end {load_end[0]:.2f} (cores: {os.cpu_count()})")
        print()
        print(f"series (samples) per 8-GPU node (h100x8), from /metrics, --metrics-detail {args.metrics_detail}:")
        for compat in COMPAT_SETS:
            print(f"  --metrics-compat {compat:<16} {per_compat[compat]:>6}")
        print(
            f"series per node in Prometheus: median {statistics.median(node_series):.0f}, "
            f"min {node_series[0]}, max {node_series[-1]} over {len(node_series)} nodes; "
            f"h100x8 nodes: {statistics.median(h100_series) if h100_series else float('nan'):.0f}"
        )
        print(f"Prometheus head series {head_series:.0f}, samples appended {samples_rate:.0f}/s")
        print(
            f"Prometheus RSS {prom_rss / mib:.0f} MiB at the end (max seen {max(prom_rss_seen + [prom_rss]) / mib:.0f} MiB), "
            f"CPU {prom_cpu * 100:.1f} % of a core"
        )
        print(
            f"scrape duration over {len(durations)} scrapes: p50 {quantile(durations, 0.5) * 1000:.1f} ms, "
            f"p99 {quantile(durations, 0.99) * 1000:.1f} ms, max {durations[-1] * 1000:.1f} ms"
        )
        print(
            f"rule groups: {len(rule_groups)}, {len(rule_eval)} evaluation times read every 15 s: median "
            f"{statistics.median(rule_eval) * 1000:.2f} ms, max {rule_eval[-1] * 1000:.2f} ms"
        )
        print(
            f"load average during the run (every 15 s): median {statistics.median(loads):.1f}, "
            f"min {min(loads):.1f}, max {max(loads):.1f}"
        )
        print(
            f"fleet dashboard: {len(queries)} queries; instant median "
            f"{statistics.median(instant) * 1000:.1f} ms (max {max(instant) * 1000:.1f}); "
            f"range over the run ({int(now - t0)} s, 15 s steps) median {statistics.median(ranged) * 1000:.1f} ms "
            f"(max {max(ranged) * 1000:.1f}, '{slowest[0]}')"
        )
        notified = sum(n for _, n in Sink.notifications)
        print(
            f"alerts: {len(firing)} firing and {len(pending)} pending in Prometheus over "
            f"{len({r['metric'].get('instance') for r in firing})} nodes; Alertmanager holds "
            f"{len(am_alerts)} in {len(am_groups)} groups; the webhook got "
            f"{len(Sink.notifications)} notifications carrying {notified} alerts"
        )
        print(
            f"agents: summed CPU {agent_cpu * 100:.1f} % of a core "
            f"({agent_cpu * 100 / args.agents:.2f} % each), RSS median "
            f"{statistics.median(agent_rss) / mib:.1f} MiB, summed {sum(agent_rss) / mib:.0f} MiB"
        )
        sink.shutdown()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        if os.environ.get("GPUWATCH_BENCH_KEEP"):
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
