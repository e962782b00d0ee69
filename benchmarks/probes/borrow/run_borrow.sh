#!/usr/bin/env bash
# The borrowed-stage epilogue (b1) against step 9's two-slot ring: debug builds, edge shapes
# on poisoned outputs, then the probe interleaved with cuBLAS. Usage: COMMIT=<hash> OUT=dir bash $0
set -u -o pipefail
export PYTHONPATH=$PWD/src:$PWD/tests GEMM_LADDER_CACHE_DIR=/tmp/glc GEMM_LADDER_COMMIT=${COMMIT:?} PYTHONUNBUFFERED=1
E=benchmarks/probes
O=${OUT:-out}/b; mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit --format=csv | tee "$O/gpu.txt"
timeout 120 python3 -m gemm_ladder check --steps 9:b1,9:c1b1,9:n232b1 --sizes 1000,520x264x256,4096 --debug 2>&1 | tail -12 | tee "$O/check.log"
echo "check rc=$?"
timeout 150 python3 $E/borrow/check_borrow.py --repeats 10 2>&1 | tail -8 | tee "$O/check_borrow.log"
echo "check_borrow rc=$?"
timeout 240 python3 $E/widths/probe_widths.py --layouts nt --dtypes float16,bfloat16 \
  --shapes 4096x4096x4096,8192x8192x8192,2048x2048x2048 \
  --keys 9,9:b1,9:c1,9:c1b1 --reps 30 --repeats 3 --json "$O/probe_sq.json" 2>&1 | tail -20 | tee "$O/probe_sq.log"
echo "probe rc=$?"
timeout 120 python3 $E/widths/probe_widths.py --layouts nt,mm --dtypes float16 \
  --shapes 3000x5000x4000,512x14336x4096,8192x14336x4096 \
  --keys 9:n232,9:n232b1,9:n224,9:n224b1,9:n192,9:n192b1 --reps 30 --repeats 3 --json "$O/probe_w.json" 2>&1 | tail -20 | tee "$O/probe_w.log"
echo "probe rc=$?"
