#!/usr/bin/env bash
# The short-ring entry against its neighbours (probe_depth.py), then the suite (kernel path and
# through matmul) and the GPU tests at the same tree. Usage: COMMIT=<hash> OUT=dir bash $0
set -u -o pipefail
export PYTHONPATH=$PWD/src:$PWD/tests GEMM_LADDER_CACHE_DIR=/tmp/glc GEMM_LADDER_COMMIT=${COMMIT:?} PYTHONUNBUFFERED=1 COLUMNS=220
O=${OUT:-out}/f; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee "$O/gpu.txt"
timeout 90 python3 benchmarks/probes/smallsq/probe_depth.py --dtypes float16,bfloat16 --shapes 256x256x256,512x512x512 \
  --json "$O/probe_depth.json" 2>&1 | tee "$O/probe_depth.log"
echo "probe rc=$?"
timeout 200 python3 -m gemm_ladder bench --suite all --dtype both --out "$O" > "$O/suite.log" 2>&1
echo "suite rc=$?"; grep -E "geomean|copy bandwidth" "$O/suite.log"
timeout 200 python3 -m gemm_ladder bench --suite all --dtype both --call matmul --out "$O/m" > "$O/suite_matmul.log" 2>&1
echo "suite matmul rc=$?"; grep -E "geomean" "$O/suite_matmul.log"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv | tee -a "$O/gpu.txt"
timeout 300 python3 -m pytest tests -m gpu -q -p no:cacheprovider > "$O/gpu-tests.log" 2>&1
echo "tests: $(tail -1 "$O/gpu-tests.log")"
tar czf "${OUT:-out}/f.tgz" -C "${OUT:-out}" f && rm -rf "$O"
