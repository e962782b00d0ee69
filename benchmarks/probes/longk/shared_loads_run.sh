#!/usr/bin/env bash
# The shared-load entries' first run on the H200 (docs/perf-notes.md item 106), in the order the
# house asks for: correctness (the debug build in a child first, then the general and the
# long-K cases, poisoned outputs, bit-identical repeats), the long-K deal probe with them beside
# today's entries (both dtypes, cuBLAS interleaved), the sanitizer over them.
# Usage (GPU machine, repo root):  OUT=<dir> [DTYPES=float16] benchmarks/probes/longk/shared_loads_run.sh [tests] [probe] [sanitize]
# (default: all three, the probe in both dtypes; not timed yet: keep a call under its limit by
# running the stages, or the probe's dtypes, in separate calls)
set -u -o pipefail
OUT=${OUT:-out/shared_loads}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src:$PWD/tests" PYTHONUNBUFFERED=1 GEMM_LADDER_CACHE_DIR=${GEMM_LADDER_CACHE_DIR:-/tmp/gemm-ladder-cache}
PY=${PYTHON:-python3}
KEYS=smallm:c2n64a2,smallm:c2n64a4,smallm:n64a4,smallm:n64a4b2,smallm:n64a2b2
SHAPES=128x512x16384,128x1024x8192,256x512x8192,256x512x16384,128x1024x16384,256x1024x4096
for stage in ${*:-tests probe sanitize}; do
  case $stage in
    tests)
      timeout 300 $PY -m pytest -q -p no:cacheprovider -x tests/test_gpu_smallm_shared_loads.py 2>&1 | tail -15 \
        | tee "$OUT/shared_loads_tests.txt"
      timeout 300 $PY -m pytest -q -p no:cacheprovider tests/test_gpu_smallm.py -k "n64a2 or n64a4" 2>&1 | tail -8 \
        | tee -a "$OUT/shared_loads_tests.txt" ;;
    probe)
      for dt in ${DTYPES:-float16 bfloat16}; do
        timeout 280 $PY benchmarks/probes/longk/probe_longk.py --dtype "$dt" --shapes "$SHAPES" --splits 0,2,4,8,16 \
          --entries c2n64,c2n64d,n128,n64,c2n64a2,c2n64a4,n64a4,n64a4b2,n64a2b2 --json "$OUT/longk_shared_$dt.json" 2>&1 \
          | grep -v Warn | tee "$OUT/longk_shared_$dt.txt"
        # the small squares, where cuBLAS shares both operands in 2 x 4 clusters too (item 104)
        timeout 120 $PY benchmarks/probes/longk/probe_longk.py --dtype "$dt" --splits 0 \
          --shapes 256x256x256,512x512x512,640x640x640,768x768x768,1024x1024x1024 --entries n64,n128,n64a4,c2n64a2,c2n64a4,n64a4b2,n64a2b2 \
          --json "$OUT/smallsq_shared_$dt.json" 2>&1 | grep -v Warn | tee "$OUT/smallsq_shared_$dt.txt"
      done ;;
    sanitize)
      SAN_STEPS=$KEYS SAN_SHAPES=128x512x4096 SAN_FAMILY_SHAPES=128x512x4096,256x512x2048,256x1024x1024,128x256x64 \
        SAN_TOOLS="memcheck racecheck synccheck" OUT="$OUT" SAN_TIMEOUT=300 scripts/sanitize.sh 2>&1 | tail -20 ;;
    *) echo "shared_loads_run: unknown stage $stage (tests, probe, sanitize)"; exit 2 ;;
  esac
done
