#!/usr/bin/env python3
"""Whole-agent benchmark: runs the release gpuwatch on a simulated scenario
for a while at the default 1 s interval, scraped every 15 s like Prometheus
does, and prints its steady RSS and CPU share.

Usage: scripts/bench_agent.py [--seconds 600] [--scenario h100x8]
                              [--agent PATH --agent PATH ...] [--no-build]

The simulator runs inside the agent's process (it is the NVML library), so
the CPU figure includes the simulator's work. For a baseline measured in the
same run, `examples/nvml_poller.rs` makes the same fast-tier NVML calls once a
second and nothing else; it runs beside the agent and its CPU share is
reported too.

`--gpm-compare` runs the (first) agent twice side by side, with GPM on and
off (`sampler.gpm`), and prints CPU per GPU per fast tick for each and their
ratio (issue 12: GPM on at most 20 % above off). NVML calls per GPU per tick
with GPM on and off come from `cargo bench --bench gpm`.

An agent may carry its own environment: `--agent PATH@NAME=VALUE,NAME=VALUE`
runs PATH with those variables set, e.g. `--agent OLD --agent
OLD@MALLOC_ARENA_MAX=1` measures a glibc setting without a rebuild, and
`--agent NEW@GPUWATCH_SIM_LIBRARY=NEW.so` gives a build its own simulator
library (one that answers the NVML fields it asks).

Each agent records history into a fresh database in a temporary directory
(the same work on every run, whatever earlier runs left). `--agent PATH`
(repeatable) measures other gpuwatch binaries instead, side by side in the
same run (e.g. a copy built before a change against the current build): each
gets its own port and database, and the same poller is the baseline for all.

CPU is read two ways: /proc/PID/stat (10 ms ticks, as earlier figures were)
and the exact per-thread time in /proc/PID/task/TID/schedstat, which also
counts how often each thread was put on a CPU ("runs": on this VM every
wake-up of a thread costs far more than the little work done once a second).
RSS is split into anonymous and file-backed pages (/proc/PID/status), the
latter by file (/proc/PID/smaps): code pages of the binary touched once, at
start-up, stay resident until the kernel needs the memory.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def thread_ns(pid):
    """(nanoseconds on CPU, times run) per thread (name, tid), from
    schedstat: exact, where /proc/PID/stat counts 10 ms ticks."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                fields = f.read().split()
            out[(name, tid)] = (int(fields[0]), int(fields[2]))
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return out


def rss_bytes(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def rss_parts(pid):
    """(anonymous, file-backed) resident bytes, from /proc/PID/status."""
    parts = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile", "RssShmem"):
                parts[key] = int(value.split()[0]) * 1024
    return parts.get("RssAnon", 0), parts.get("RssFile", 0) + parts.get("RssShmem", 0)


def rss_by_file(pid):
    """Resident bytes per mapped file (and "[anon]" for the rest), from
    /proc/PID/smaps: which file's pages the file-backed part is."""
    out, name = {}, "[anon]"
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            first = line.split()
            if not first:
                continue
            if "-" in first[0] and not first[0].endswith(":"):
                name = os.path.basename(first[5]) if len(first) > 5 else "[anon]"
            elif first[0] == "Rss:":
                out[name] = out.get(name, 0) + int(first[1]) * 1024
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Measured:
    """One process under measurement: CPU at the start and the end."""

    def __init__(self, name, process, port=None):
        self.name, self.process, self.port = name, process, port
        self.rss, self.scrape_ms, self.size = [], [], 0
        self.samples, self.gpus, self.scraped_at = [], 0, []

    def start(self):
        pid = self.process.pid
        self.rss_start = rss_bytes(pid)
        self.cpu0, self.threads0 = cpu_seconds(pid), thread_ns(pid)

    def scrape(self):
        t0 = time.monotonic()
        body = urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5).read()
        self.scrape_ms.append((time.monotonic() - t0) * 1000)
        self.size = len(body)
        for line in body.decode("utf-8", "replace").splitlines():
            if line.startswith("gpuwatch_samples_total "):
                self.samples.append(float(line.split()[1]))
                self.scraped_at.append(t0)
            elif line.startswith("gpuwatch_gpus "):
                self.gpus = float(line.split()[1])
        self.rss.append(rss_bytes(self.process.pid))

    def stop(self):
        pid = self.process.pid
        self.cpu1, self.threads1 = cpu_seconds(pid), thread_ns(pid)
        self.rss_end = rss_bytes(pid)
        self.anon_end, self.file_end = rss_parts(pid)
        self.by_file = rss_by_file(pid)

    def figures(self, wall):
        """(tick-based %, exact %, runs/s, {thread: (%, runs/s)})."""
        per = {}
        # Threads started during the interval count from zero; none should end.
        for key, (ns, runs) in self.threads1.items():
            ns0, runs0 = self.threads0.get(key, (0, 0))
            total = per.setdefault(key[0], [0, 0])
            total[0] += ns - ns0
            total[1] += runs - runs0
        exact = sum(ns for ns, _ in per.values()) / 1e9 / wall * 100
        runs = sum(r for _, r in per.values()) / wall
        threads = {name: (ns / 1e9 / wall * 100, r / wall) for name, (ns, r) in per.items()}
        return (self.cpu1 - self.cpu0) / wall * 100, exact, runs, threads


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=600)
    parser.add_argument("--scenario", default="h100x8")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--agent", action="append", default=[],
                        help="gpuwatch binary to measure, optionally PATH@NAME=VALUE,... to set "
                             "environment variables for it (repeatable; default target/release/gpuwatch)")
    parser.add_argument("--poller", help="the baseline poller binary (default: the release example)")
    parser.add_argument("--sim-library", help="the simulator library (default: the release build's)")
    parser.add_argument("--no-build", action="store_true",
                        help="measure the binaries as they are (e.g. copies built with other profiles)")
    parser.add_argument("--gpm-compare", action="store_true",
                        help="run the agent twice, sampler.gpm = true and false, and compare")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not args.no_build:
        # --examples alone builds no binaries: name --bins too, or a stale
        # gpuwatch would be measured.
        subprocess.run(["cargo", "build", "--release", "--workspace", "--bins", "--examples", "-q"],
                       cwd=root, check=True)
    binaries = args.agent or [os.path.join(root, "target", "release", "gpuwatch")]
    poller_bin = args.poller or os.path.join(root, "target", "release", "examples", "nvml_poller")
    simlib = args.sim_library or os.path.join(root, "target", "release", "deps", "libnvml_sim.so")
    log = open("/tmp/gpuwatch-bench-agent.log", "w")
    scratch = tempfile.TemporaryDirectory(prefix="gpuwatch-bench-")
    env = dict(os.environ, GPUWATCH_SIM_LIBRARY=simlib)
    agents = []
    # (name, binary, extra arguments, extra environment)
    runs = []
    for spec in binaries:
        binary, _, assignments = spec.partition("@")
        extra_env = dict(a.split("=", 1) for a in assignments.split(",") if a)
        runs.append((spec, binary, [], extra_env))
    if args.gpm_compare:
        runs = []
        for gpm in ("true", "false"):
            cfg = os.path.join(scratch.name, f"gpm-{gpm}.toml")
            with open(cfg, "w") as f:
                f.write(f"[sampler]\ngpm = {gpm}\n")
            runs.append((f"{binaries[0]} (sampler.gpm = {gpm})", binaries[0], ["--config", cfg], {}))
    for i, (name, binary, extra, extra_env) in enumerate(runs):
        port = free_port()
        process = subprocess.Popen(
            [binary, "run", "--simulate", args.scenario, "--listen", f"127.0.0.1:{port}",
             "--history-db", os.path.join(scratch.name, f"history-{i}.db")] + extra,
            stdout=subprocess.DEVNULL, stderr=log, env=dict(env, **extra_env))
        measured = Measured(name, process, port)
        measured.binary = binary
        agents.append(measured)
    poller = Measured("poller", subprocess.Popen(
        [poller_bin, simlib], env=dict(os.environ, GPUWATCH_SIM_SCENARIO=f"builtin:{args.scenario}"),
        stdout=subprocess.DEVNULL, stderr=log))
    everyone = agents + [poller]
    try:
        time.sleep(args.warmup)
        for m in everyone:
            if m.process.poll() is not None:
                sys.exit(f"{m.name} exited; see /tmp/gpuwatch-bench-agent.log")
        for m in everyone:
            m.start()
        wall0 = time.monotonic()
        deadline = wall0 + args.seconds
        while time.monotonic() < deadline:
            for a in agents:
                a.scrape()
            time.sleep(max(0.0, min(15.0, deadline - time.monotonic())))
        for m in everyone:
            m.stop()
        wall = time.monotonic() - wall0
    finally:
        for m in everyone:
            m.process.terminate()
        for m in everyone:
            m.process.wait(timeout=10)
        scratch.cleanup()
    mib = 1024 * 1024
    base, base_exact, base_runs, _ = poller.figures(wall)
    print(f"scenario {args.scenario}, {wall:.0f} s after {args.warmup} s warm-up, scraped every 15 s")
    print(f"baseline (same NVML calls at 1 Hz, nothing else): {base:.3f} % of one core "
          f"(exact {base_exact:.3f} %, {base_runs:.1f} runs/s), RSS {poller.rss_end / mib:.1f} MiB "
          f"(anonymous {poller.anon_end / mib:.1f}, file-backed {poller.file_end / mib:.1f})")
    for a in agents:
        share, exact, runs, threads = a.figures(wall)
        if len(agents) > 1:
            print(f"--- {a.name}")
        print(f"RSS: {a.rss_start / mib:.1f} MiB after warm-up, {a.rss_end / mib:.1f} MiB at the end, "
              f"median {statistics.median(a.rss) / mib:.1f} MiB (target <= 12 MiB)")
        print(f"RSS at the end: anonymous {a.anon_end / mib:.1f} MiB, file-backed {a.file_end / mib:.1f} MiB ("
              + ", ".join(f"{name} {size / mib:.1f}" for name, size in
                          sorted(a.by_file.items(), key=lambda kv: -kv[1])[:5]) + f"); binary "
              f"{os.path.getsize(a.binary) / 1e6:.1f} MB")
        print(f"CPU share at 1 Hz (agent + in-process simulator): {share:.3f} % of one core "
              f"(target <= 0.25 %); agent/baseline CPU ratio {share / base if base else float('inf'):.2f}")
        print(f"exact (schedstat): {exact:.3f} %, ratio {exact / base_exact if base_exact else float('inf'):.2f}; "
              f"{runs:.1f} thread runs/s (baseline {base_runs:.1f})")
        print("per thread (% of one core, runs/s): " + ", ".join(
            f"{name} {pct:.3f} {r:.1f}" for name, (pct, r) in sorted(threads.items(), key=lambda kv: -kv[1][0])))
        print(f"scrape over HTTP: median {statistics.median(a.scrape_ms):.2f} ms, {a.size} bytes")
        if len(a.samples) > 1 and a.gpus and a.scraped_at[-1] > a.scraped_at[0]:
            # Ticks per second between the first and the last scrape, and the
            # whole agent's exact CPU (HTTP, history, rules included) per tick.
            rate = (a.samples[-1] - a.samples[0]) / (a.scraped_at[-1] - a.scraped_at[0])
            a.per_gpu_tick_us = exact / 100 / rate / a.gpus * 1e6
            print(f"CPU per GPU per tick (whole agent): {a.per_gpu_tick_us:.1f} us "
                  f"({rate:.2f} ticks/s, {a.gpus:.0f} GPUs)")
    if args.gpm_compare and all(hasattr(a, "per_gpu_tick_us") for a in agents):
        on, off = agents[0], agents[1]
        on_share, off_share = on.figures(wall)[1], off.figures(wall)[1]
        print(f"GPM on vs off: CPU share {on_share:.3f} % vs {off_share:.3f} % (ratio {on_share / off_share if off_share else float('inf'):.2f}), "
              f"CPU per GPU per tick {on.per_gpu_tick_us:.1f} vs {off.per_gpu_tick_us:.1f} us "
              f"(ratio {on.per_gpu_tick_us / off.per_gpu_tick_us:.2f}; target <= 1.20)")


if __name__ == "__main__":
    main()
