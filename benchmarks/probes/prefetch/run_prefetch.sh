#!/usr/bin/env bash
# Descriptors prefetched at kernel entry: debug builds, the side-by-side probe, then the GPU
# tests. Usage: COMMIT=<hash> OUT=dir bash $0
set -u -o pipefail
export PYTHONPATH=$PWD/src:$PWD/tests GEMM_LADDER_CACHE_DIR=/tmp/glc GEMM_LADDER_COMMIT=${COMMIT:?} PYTHONUNBUFFERED=1
E=benchmarks/probes
O=${OUT:-out}/p; mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee "$O/gpu.txt"
timeout 120 python3 -m gemm_ladder check --steps 6,7,8,9,10,9:n232 --sizes 1000,520x264x256 --debug 2>&1 | tail -10 | tee "$O/check.log"
echo "check rc=$?"
timeout 240 python3 $E/prefetch/probe_prefetch.py --json "$O/probe_prefetch.json" 2>&1 | tee "$O/probe_prefetch.log"
echo "probe rc=$?"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv | tee -a "$O/gpu.txt"
if [ "${TESTS:-1}" = 1 ]; then
  timeout 420 python3 -m pytest tests -m gpu -q -p no:cacheprovider -x 2>&1 | tail -15 | tee "$O/gpu_tests.txt"
  echo "tests rc=$?"
fi
tar czf "${OUT:-out}/p.tgz" -C "${OUT:-out}" p
