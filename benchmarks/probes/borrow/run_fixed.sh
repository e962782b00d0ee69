#!/usr/bin/env bash
# After the borrowed stage's consumer sync: the race probe (as built and ablated), then each
# step-9 suite pick with and without the borrowed stage, then the suite (kernel path and
# through `matmul`). Usage: COMMIT=<hash> OUT=dir bash $0
set -u -o pipefail
export PYTHONPATH=$PWD/src:$PWD/tests GEMM_LADDER_CACHE_DIR=/tmp/glc GEMM_LADDER_COMMIT=${COMMIT:?} PYTHONUNBUFFERED=1 COLUMNS=220
E=benchmarks/probes
O=${OUT:-out}/f; mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit --format=csv | tee "$O/gpu.txt"
timeout 120 python3 $E/borrow/race_borrow.py --runs 30 2>&1 | tee "$O/race_borrow.log"
echo "race rc=$?"
timeout 200 python3 $E/borrow/probe_suite_borrow.py --record benchmarks/results/2026-11-30_h200_suite_all_2f25461.json \
  --dtypes float16,bfloat16 --json "$O/probe_suite_borrow.json" 2>&1 | tee "$O/probe_suite_borrow.log" | tail -3
echo "probe rc=$?"
timeout 150 python3 -m gemm_ladder bench --suite all --dtype both --out "$O/k" 2>&1 | tail -12 | tee "$O/suite.log"
echo "suite rc=$?"
timeout 150 python3 -m gemm_ladder bench --suite all --dtype both --call matmul --out "$O/m" 2>&1 | tail -12 | tee "$O/suite_mm.log"
echo "suite matmul rc=$?"
