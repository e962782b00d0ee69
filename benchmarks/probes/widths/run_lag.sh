#!/usr/bin/env bash
# Two wgmma groups in flight (l2) against one (the default) for the ladder's warp-specialized
# steps: debug builds on poisoned outputs, then the probe (interleaved with cuBLAS) at 2048^3,
# 4096^3 and 8192^3. Usage: COMMIT=<hash> OUT=dir bash $0
set -u -o pipefail
export PYTHONPATH=$PWD/src:$PWD/tests GEMM_LADDER_CACHE_DIR=/tmp/glc GEMM_LADDER_COMMIT=${COMMIT:?} PYTHONUNBUFFERED=1
O=${OUT:-out}/l; mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit --format=csv | tee "$O/gpu.txt"
timeout 150 python3 -m gemm_ladder check --steps 7:d4l2,8:l2,8:d6l2,9:l2b0,10:l2 --debug 2>&1 | tail -20 | tee "$O/check.log"
echo "check rc=$?"
timeout 300 python3 benchmarks/probes/widths/probe_widths.py --layouts nt \
  --shapes 4096x4096x4096,2048x2048x2048,8192x8192x8192 \
  --keys 7:d4,7:d4l2,8,8:l2,8:d6l2,9,9:l2b0,9:c1,10,10:l2 --reps 30 --repeats 3 --json "$O/probe_lag.json" 2>&1 | tail -20 | tee "$O/probe_lag.log"
echo "probe rc=$?"
