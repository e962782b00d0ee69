#!/usr/bin/env bash
# The 168-wide step-9 tile: debug builds, its GPU tests, then the probe against the widths the
# model would have it replace. Usage: COMMIT=<hash> OUT=dir bash $0
set -u -o pipefail
export PYTHONPATH=$PWD/src:$PWD/tests GEMM_LADDER_CACHE_DIR=/tmp/glc GEMM_LADDER_COMMIT=${COMMIT:?} PYTHONUNBUFFERED=1
O=${OUT:-out}/w168; mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit --format=csv | tee "$O/gpu.txt"
timeout 100 python3 -m gemm_ladder check --steps 9:n168 --debug 2>&1 | tail -6 | tee "$O/check.log"
timeout 120 python3 -m pytest tests -m gpu -q -p no:cacheprovider -k "n168" 2>&1 | tail -4 | tee "$O/tests.log"
timeout 240 python3 benchmarks/probes/widths/probe_widths.py --layouts nt \
  --shapes 512x11008x4096,2048x11008x4096,512x28672x8192,2048x14336x4096,2048x28672x8192 \
  --keys 9:n168,9:n176,9:n232,9:n192,9:c1 --reps 40 --repeats 3 --json "$O/probe_n168.json" 2>&1 | tail -20 | tee "$O/probe_n168.log"
