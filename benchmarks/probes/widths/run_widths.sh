#!/usr/bin/env bash
# Step 9's 224 / 232 / 240-wide tiles on the H200: debug builds, their GPU tests, the probe
# against the picks they replace, then the suite (kernel path). Usage: COMMIT=<hash> bash $0
set -u -o pipefail
export PYTHONPATH=$PWD/src:$PWD/tests GEMM_LADDER_CACHE_DIR=/tmp/glc GEMM_LADDER_COMMIT=${COMMIT:?} PYTHONUNBUFFERED=1
O=${OUT:-out}/w; mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit --format=csv | tee "$O/gpu.txt"
timeout 120 python3 -m gemm_ladder check --steps 9:n224,9:n232,9:n240 --debug 2>&1 | tail -30 | tee "$O/check.log"
echo "check rc=$?"
timeout 150 python3 -m pytest tests -m gpu -q -p no:cacheprovider -k "n224 or n232 or n240" 2>&1 | tail -8 | tee "$O/tests.log"
echo "tests rc=$?"
timeout 200 python3 benchmarks/probes/widths/probe_widths.py --layouts nt \
  --shapes 3000x5000x4000,512x14336x4096,2048x11008x4096,8192x8192x8192 \
  --keys 9:n232,9:n224,9:n240,9:n192,9:n176,9:c1 --reps 30 --repeats 3 --json "$O/probe.json" 2>&1 | tail -60 | tee "$O/probe.log"
echo "probe rc=$?"
timeout ${SUITE_S:-330} python3 -m gemm_ladder bench --suite all --dtype both --out "$O/k" 2>&1 | tail -40 | tee "$O/suite.log"
echo "suite rc=$?"
