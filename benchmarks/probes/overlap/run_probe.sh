#!/usr/bin/env bash
# The overlapped epilogue (9:o1: the next tile's first k-tile issued before the finished tile is
# staged) and the descriptors prefetched at entry: debug builds, the race probe, then both
# side-by-side probes interleaved with cuBLAS. Usage: COMMIT=<hash> OUT=dir bash $0
set -u -o pipefail
export PYTHONPATH=$PWD/src:$PWD/tests GEMM_LADDER_CACHE_DIR=/tmp/glc GEMM_LADDER_COMMIT=${COMMIT:?} PYTHONUNBUFFERED=1
E=benchmarks/probes
O=${OUT:-out}/o; mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee "$O/gpu.txt"
timeout 150 python3 -m gemm_ladder check --steps 6,7,8,10,9,9:o1,9:c1o1,9:b0o1,9:n192o1,9:n232 \
  --sizes 1000,520x264x256,4096 --debug 2>&1 | tail -14 | tee "$O/check.log"
echo "check rc=$?"
timeout 100 python3 $E/borrow/race_borrow.py --keys 9:o1,9:c1o1 --shapes 6144x6144x1024 --runs 30 2>&1 | tee "$O/race.log"
echo "race rc=$?"
timeout 200 python3 $E/widths/probe_widths.py --layouts nt --dtypes float16,bfloat16 \
  --shapes 4096x4096x4096,8192x8192x8192,2048x2048x2048,4096x4096x256 \
  --keys 9,9:o1,9:c1,9:c1o1 --reps 30 --repeats 3 --json "$O/probe_overlap.json" 2>&1 | tee "$O/probe_overlap.log"
echo "probe overlap rc=$?"
timeout 60 python3 $E/widths/probe_widths.py --layouts mm --dtypes float16 --shapes 4096x4096x4096,8192x14336x4096 \
  --keys 9,9:o1 --reps 30 --repeats 3 --json "$O/probe_overlap_mm.json" 2>&1 | tee "$O/probe_overlap_mm.log"
echo "probe overlap mm rc=$?"
timeout 150 python3 $E/prefetch/probe_prefetch.py --json "$O/probe_prefetch.json" 2>&1 | tee "$O/probe_prefetch.log"
echo "probe prefetch rc=$?"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv | tee -a "$O/gpu.txt"
tar czf "${OUT:-out}/o.tgz" -C "${OUT:-out}" o
