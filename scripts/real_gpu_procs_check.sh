#!/bin/bash
# Real-driver check of the process tier (issue 6): gpuwatch status / capacity / metrics
# while two small torch loads run; keeps what it saw in OUT-DIR. Needs python3 with torch.
# Compare: per-process SM utilization (pmon.txt vs load.json), memory (smi-apps.txt),
# the cgroup of each load (cgroups.txt) vs the container gpuwatch reports.
B=${1:?usage: real_gpu_procs_check.sh PATH-TO-RELEASE-GPUWATCH OUT-DIR}
OUT=${2:?usage: real_gpu_procs_check.sh PATH-TO-RELEASE-GPUWATCH OUT-DIR}; mkdir -p "$OUT"
nvidia-smi -L > $OUT/smi-L.txt 2>&1
python3 -c "import torch; print(torch.__version__, torch.cuda.is_available())" > $OUT/torch.txt 2>&1
printf '[capacity]\nmemory_margin = "1GiB"\n[[profiles]]\nname = "resnet50"\nmemory = "1.8GB"\nsm_share = 0.1\n[[profiles]]\nname = "bert"\nmemory = "12GB"\nmodel = "H200"\n' > /tmp/cap.toml
printf '[sampler]\nprocess_interval = "1s"\nprocess_top_n = 1\n[capacity]\nmemory_margin = "1GiB"\n[[profiles]]\nname = "resnet50"\nmemory = "1.8GB"\nsm_share = 0.1\n' > /tmp/run.toml
timeout 20 $B status --json > $OUT/idle.json 2> $OUT/idle.err
cat > /tmp/load.py <<'PY'
import sys, time, torch
hold = torch.empty(int(sys.argv[2]) * 2**30, dtype=torch.uint8, device="cuda")
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda"); b = torch.randn_like(a)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(10): c = a @ b
    torch.cuda.synchronize()
    time.sleep(float(sys.argv[3]))
PY
python3 /tmp/load.py 45 8 0 > $OUT/load1.txt 2>&1 &
python3 /tmp/load.py 45 3 0.05 > $OUT/load2.txt 2>&1 &
sleep 12
nvidia-smi > $OUT/smi.txt 2>&1
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > $OUT/smi-apps.txt 2>&1
nvidia-smi pmon -c 1 > $OUT/pmon.txt 2>&1
timeout 20 $B status > $OUT/status.txt 2> $OUT/status.err
timeout 20 $B status --json > $OUT/load.json 2> $OUT/load.err
timeout 20 $B capacity --config /tmp/cap.toml > $OUT/capacity.txt 2> $OUT/capacity.err
for p in $(pgrep -f /tmp/load.py); do echo "== $p"; cat /proc/$p/cgroup; grep Uid /proc/$p/status; done > $OUT/cgroups.txt 2>&1
timeout 25 $B run --config /tmp/run.toml --listen 127.0.0.1:9842 --no-history > $OUT/run.log 2>&1 &
sleep 12
python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9842/metrics').read().decode())" > $OUT/metrics1.txt 2>&1
sleep 6
python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9842/metrics').read().decode())" > $OUT/metrics2.txt 2>&1
wait
ls -la $OUT
