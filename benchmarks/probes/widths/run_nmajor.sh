#!/usr/bin/env bash
# The 224 / 232 / 240-wide tiles reading an N-major B (a row-major b through `matmul`), against
# the picks `matmul` makes today; then ncu on 4096^3 (step 9 without cluster, cuBLAS) with the
# GPU's own clocks. Usage: COMMIT=<hash> OUT=dir bash $0
set -u -o pipefail
export PYTHONPATH=$PWD/src:$PWD/tests GEMM_LADDER_CACHE_DIR=/tmp/glc GEMM_LADDER_COMMIT=${COMMIT:?} PYTHONUNBUFFERED=1
O=${OUT:-out}/n; mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit --format=csv | tee "$O/gpu.txt"
timeout 240 python3 benchmarks/probes/widths/probe_widths.py --layouts mm \
  --shapes 512x14336x4096,512x11008x4096,2048x11008x4096,512x28672x8192,8192x8192x8192 \
  --keys 9:n224,9:n240,9:n232,9:n192,9:c1,9 --reps 30 --repeats 3 --json "$O/probe_mm.json" 2>&1 | tail -40 | tee "$O/probe_mm.log"
echo "probe rc=$?"
timeout 200 ncu --clock-control none --profile-from-start off --section SpeedOfLight --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --section WarpStateStats --metrics sm__cycles_elapsed.avg.per_second \
  --csv --page details python3 benchmarks/probes/midm/ncu_l2.py --reps 10 \
  --cases 4096x4096x4096:9:c1,4096x4096x4096:cublas,4096x4096x4096:9 > "$O/ncu_4096.csv" 2> "$O/ncu_4096.err"
echo "ncu rc=$?"; tail -3 "$O/ncu_4096.err"; wc -l "$O/ncu_4096.csv"
