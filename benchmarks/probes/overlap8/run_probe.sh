#!/usr/bin/env bash
# Step 8's overlapped epilogue (8:o1: the lone consumer issues the next tile's k-tile 0 before
# it stages the finished tile from packed registers): debug builds, repeated runs on poisoned
# outputs, then the side-by-side probe interleaved with cuBLAS. Usage: COMMIT=<hash> OUT=dir bash $0
set -u -o pipefail
export PYTHONPATH=$PWD/src:$PWD/tests GEMM_LADDER_CACHE_DIR=/tmp/glc GEMM_LADDER_COMMIT=${COMMIT:?} PYTHONUNBUFFERED=1
E=benchmarks/probes
O=${OUT:-out}/o8; mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee "$O/gpu.txt"
timeout 120 python3 -m gemm_ladder check --steps 8,8:o1,8:c1o1 --sizes 1000,520x264x256,4096 --debug 2>&1 \
  | tail -10 | tee "$O/check.log"
echo "check rc=$?"
# race_borrow.py's ablation define means nothing to step 8: both of its rows are the build as is
timeout 90 python3 $E/borrow/race_borrow.py --keys 8:o1 --shapes 6144x6144x1024 --runs 30 2>&1 | tee "$O/race.log"
echo "race rc=$?"
timeout 240 python3 $E/widths/probe_widths.py --layouts nt --dtypes float16,bfloat16 \
  --shapes 4096x4096x4096,8192x8192x8192,2048x2048x2048,4096x4096x256 \
  --keys 8,8:o1,8:c1,8:c1o1 --reps 30 --repeats 3 --json "$O/probe_overlap8.json" 2>&1 | tee "$O/probe_overlap8.log"
echo "probe rc=$?"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv | tee -a "$O/gpu.txt"
