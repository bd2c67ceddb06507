#!/usr/bin/env python3
"""Whole-agent benchmark: runs the release gpuwatch on a simulated scenario
for a while at the default 1 s interval, scraped every 15 s like Prometheus
does, and prints its steady RSS and CPU share.

Usage: scripts/bench_agent.py [--seconds 600] [--scenario h100x8]

The simulator runs inside the agent's process (it is the NVML library), so
the CPU figure includes the simulator's work. For a baseline measured in the
same run, `examples/nvml_poller.rs` makes the same fast-tier NVML calls once a
second and nothing else; it runs beside the agent and its CPU share is
reported too.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_bytes(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=600)
    parser.add_argument("--scenario", default="h100x8")
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(["cargo", "build", "--release", "--workspace", "--examples", "-q"],
                   cwd=root, check=True)
    binary = os.path.join(root, "target", "release", "gpuwatch")
    poller_bin = os.path.join(root, "target", "release", "examples", "nvml_poller")
    simlib = os.path.join(root, "target", "release", "deps", "libnvml_sim.so")
    port = free_port()
    log = open("/tmp/gpuwatch-bench-agent.log", "w")
    agent = subprocess.Popen(
        [binary, "run", "--simulate", args.scenario, "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=log)
    poller = subprocess.Popen(
        [poller_bin, simlib], env=dict(os.environ, GPUWATCH_SIM_SCENARIO=f"builtin:{args.scenario}"),
        stdout=subprocess.DEVNULL, stderr=log)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        time.sleep(args.warmup)
        if agent.poll() is not None:
            sys.exit("gpuwatch exited; see /tmp/gpuwatch-bench-agent.log")
        rss_start = rss_bytes(agent.pid)
        cpu0, wall0 = cpu_seconds(agent.pid), time.monotonic()
        base0 = cpu_seconds(poller.pid)
        rss, scrape_ms, size = [], [], 0
        deadline = wall0 + args.seconds
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            body = urllib.request.urlopen(url, timeout=5).read()
            scrape_ms.append((time.monotonic() - t0) * 1000)
            size = len(body)
            rss.append(rss_bytes(agent.pid))
            time.sleep(max(0.0, min(15.0, deadline - time.monotonic())))
        cpu1, wall1 = cpu_seconds(agent.pid), time.monotonic()
        base1 = cpu_seconds(poller.pid)
        rss_end = rss_bytes(agent.pid)
        poller_rss = rss_bytes(poller.pid)
    finally:
        agent.terminate()
        poller.terminate()
        agent.wait(timeout=10)
        poller.wait(timeout=10)
    mib = 1024 * 1024
    share = (cpu1 - cpu0) / (wall1 - wall0) * 100
    print(f"scenario {args.scenario}, {wall1 - wall0:.0f} s after {args.warmup} s warm-up, scraped every 15 s")
    print(f"RSS: {rss_start / mib:.1f} MiB after warm-up, {rss_end / mib:.1f} MiB at the end, "
          f"median {statistics.median(rss) / mib:.1f} MiB (target <= 12 MiB)")
    base = (base1 - base0) / (wall1 - wall0) * 100
    print(f"CPU share at 1 Hz (agent + in-process simulator): {share:.3f} % of one core (target <= 0.3 %)")
    print(f"baseline in the same run (same NVML calls at 1 Hz, nothing else): {base:.3f} % of one core, "
          f"RSS {poller_rss / mib:.1f} MiB; agent/baseline CPU ratio {share / base if base else float('inf'):.2f}")
    print(f"scrape over HTTP: median {statistics.median(scrape_ms):.2f} ms, {size} bytes")


if __name__ == "__main__":
    main()
