#!/usr/bin/env bash
# Step 9's kernels with the borrowed stage on by default: debug builds and edge shapes on
# poisoned outputs, then each suite pick on a step-9 kernel with and without it (interleaved
# with cuBLAS), then the ladder. Usage: COMMIT=<hash> OUT=dir bash $0
set -u -o pipefail
export PYTHONPATH=$PWD/src:$PWD/tests GEMM_LADDER_CACHE_DIR=/tmp/glc GEMM_LADDER_COMMIT=${COMMIT:?} PYTHONUNBUFFERED=1
E=benchmarks/probes
O=${OUT:-out}/d; mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit --format=csv | tee "$O/gpu.txt"
timeout 150 python3 -m gemm_ladder check --steps 9,9:c1,9:n192,9:n176,9:n224,9:n232,9:n240 --sizes 1000,520x264x256,4096 \
  --debug 2>&1 | tail -22 | tee "$O/check.log"
echo "check rc=$?"
timeout 150 python3 $E/borrow/check_borrow.py --keys 9,9:c1,9:n224,9:n240,9:n176 --repeats 10 2>&1 | tail -4 | tee "$O/check_borrow.log"
echo "check_borrow rc=$?"
timeout 200 python3 $E/borrow/probe_suite_borrow.py --record benchmarks/results/2026-11-30_h200_suite_all_2f25461.json \
  --dtypes float16,bfloat16 --json "$O/probe_suite_borrow.json" 2>&1 | tee "$O/probe_suite_borrow.log" | tail -70
echo "probe rc=$?"
