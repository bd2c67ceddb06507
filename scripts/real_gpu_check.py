#!/usr/bin/env python3
"""Runs the release gpuwatch against the real NVIDIA driver for about a
minute while a small PyTorch load runs, and keeps what it saw.

For a machine with a GPU (a developer's, or the project's borrowed one): it
is how the simulator is checked against reality. It starts the agent with
history and debug logging, scrapes /metrics and the JSON API idle, under load
and after, dumps the raw NVML answers with scripts/nvml_probe.py, and packs
everything into OUT/check.tar.gz.

Usage: real_gpu_check.py --bin target/release/gpuwatch --out DIR [--seconds 70]
Needs python3 with torch (for the load) and nvidia-ml-py (for the probe).
"""
import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
import urllib.request

LOAD = r"""
import os, sys, time, torch
seconds = float(sys.argv[1])
dev = torch.device("cuda")
hold = torch.empty(int(os.environ.get("HOLD_GIB", "16")) * 2**30, dtype=torch.uint8, device=dev)
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
b = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
end = time.time() + seconds
n = 0
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
print(f"load: {n} matmuls of 8192^3 in {seconds} s, {n * 2 * 8192**3 / seconds / 1e12:.0f} TFLOP/s", flush=True)
"""

IDLE_HOLDER = r"""
import sys, time, torch
x = torch.empty(2 * 2**30, dtype=torch.uint8, device="cuda")
time.sleep(float(sys.argv[1]))
"""


def fetch(url, timeout=5):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except Exception as e:  # keep going: what failed is part of the report
        return None, str(e).encode()


def save(out, name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def scrape(base, out, label):
    for path, name in [("/metrics", f"metrics-{label}.prom"),
                       ("/api/v1/snapshot", f"snapshot-{label}.json"),
                       ("/api/v1/alerts", f"alerts-{label}.json")]:
        status, body = fetch(base + path)
        save(out, name, body)
        print(f"{label}: GET {path} -> {status}, {len(body)} bytes", flush=True)


def run_to_file(cmd, out, name, env=None):
    with open(os.path.join(out, name), "wb") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=60)
    print(f"{' '.join(cmd[:3])}... -> rc {r.returncode} ({name})", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default="target/release/gpuwatch")
    p.add_argument("--out", required=True)
    p.add_argument("--seconds", type=float, default=70)
    p.add_argument("--port", type=int, default=19842)
    args = p.parse_args()
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))

    run_to_file(["nvidia-smi", "-q"], work, "nvidia-smi-q.txt")
    run_to_file([sys.executable, os.path.join(here, "nvml_probe.py"), "--label", "idle"],
                work, "probe-idle.json")
    config = os.path.join(work, "gpuwatch.toml")
    save(work, "gpuwatch.toml", f'[server]\nlisten = "127.0.0.1:{args.port}"\n'
                                f'[log]\nlevel = "info,gpuwatch=debug"\n'
                                f'[sampler]\nprocess_interval = "2s"\n'
                                f'[[profiles]]\nname = "resnet50-inference"\nmemory = "1.8GB"\n'
                                f'[[profiles]]\nname = "bert-base-training"\nmemory = "12GB"\n')
    run_to_file([args.bin, "status", "--config", config], work, "status.txt")
    run_to_file([args.bin, "status", "--json", "--config", config], work, "status.json")

    db = os.path.join(work, "history.db")
    log = open(os.path.join(work, "agent.log"), "wb")
    started = time.time()
    agent = subprocess.Popen([args.bin, "run", "--config", config, "--history-db", db],
                             stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{args.port}"
    for _ in range(100):
        if fetch(base + "/-/ready", 1)[0] == 200:
            break
        time.sleep(0.2)
    print(f"agent ready after {time.time() - started:.1f} s", flush=True)
    time.sleep(8)
    scrape(base, work, "idle")

    load_s = max(20.0, args.seconds - 35)
    load = subprocess.Popen([sys.executable, "-c", LOAD, str(load_s)],
                            stdout=open(os.path.join(work, "load.log"), "wb"),
                            stderr=subprocess.STDOUT)
    holder = subprocess.Popen([sys.executable, "-c", IDLE_HOLDER, str(load_s)])
    time.sleep(load_s / 2)
    scrape(base, work, "load")
    run_to_file(["nvidia-smi"], work, "nvidia-smi-load.txt")
    run_to_file([sys.executable, os.path.join(here, "nvml_probe.py"), "--label", "load"],
                work, "probe-load.json")
    load.wait()
    holder.wait()
    time.sleep(12)
    scrape(base, work, "after")
    status, body = fetch(base + "/api/v1/history?gpu=0&metric=utilization&from=-5m")
    save(work, "history-api.json", body)
    print(f"history api -> {status}", flush=True)

    agent.terminate()
    try:
        print(f"agent exit: {agent.wait(timeout=20)}", flush=True)
    except subprocess.TimeoutExpired:
        agent.kill()
        print("agent did not stop within 20 s of SIGTERM; killed", flush=True)
    log.close()
    for metric in ["utilization", "power", "memory_used", "temperature", "sm_clock"]:
        run_to_file([args.bin, "history", "--db", db, "--gpu", "0", "--metric", metric,
                     "--since", "10m", "--format", "csv"], work, f"history-{metric}.csv")
    run_to_file([args.bin, "events", "--db", db], work, "events.txt")
    run_to_file([args.bin, "capacity", "--config", config], work, "capacity.txt")

    with tarfile.open(os.path.join(args.out, "check.tar.gz"), "w:gz") as tar:
        tar.add(work, arcname="gpuwatch-check")
    print("packed", os.path.join(args.out, "check.tar.gz"), flush=True)


if __name__ == "__main__":
    main()
