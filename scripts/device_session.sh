#!/usr/bin/env bash
# One device session's work in one call: correctness (debug builds first, so a deadlock is
# an error, not a hang), the ladder benchmark, GPU tests, what-ifs and traces.
# Usage (on the GPU machine, from the repo root):  scripts/device_session.sh [stages]
#   stages: comma list of check,bench,tests,whatif,trace,sweep,suite (default: check,bench,tests,whatif,trace)
#   suite: SUITE (default all) in fp16 and bf16; its roofline also shows bench.json's ladder
# Results go under $OUT (default out/device); the last lines printed are a short summary.
set -u -o pipefail
OUT=${OUT:-out/device}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 COLUMNS=220
export GEMM_LADDER_CACHE_DIR=${GEMM_LADDER_CACHE_DIR:-/tmp/gemm-ladder-cache}
STAGES=",${1:-check,bench,whatif,trace,tests},"
PY=${PYTHON:-python3}
has() { [[ "$STAGES" == *",$1,"* ]]; }
summary=()

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
  --format=csv | tee "$OUT/gpu.txt"
$PY -c "import torch, cuda.bindings, sys; print('torch', torch.__version__, 'cuda-bindings', cuda.bindings.__version__, sys.version)" | tee -a "$OUT/gpu.txt"

if has check; then
  : > "$OUT/check.log"
  for s in 1 2 3 4 5 6 7 7:d3 7:d4; do
    timeout 300 $PY -m gemm_ladder check --debug --steps "$s" --sizes 256x384x192,1000x1000x1000,4096 2>&1 | tee -a "$OUT/check.log"
    rc=$?; summary+=("check step $s (debug build): rc=$rc")
  done
fi

if has bench; then
  timeout 480 $PY -m gemm_ladder bench --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log"
  summary+=("bench: rc=$?")
fi

if has whatif; then
  : > "$OUT/whatif.log"
  for w in both-phase-0 expect-tx-large expect-tx-small; do
    timeout 150 $PY -m gemm_ladder deadlock --step 7 --what-if $w 2>&1 | tee -a "$OUT/whatif.log"
  done
  summary+=("what-ifs: see whatif.log")
fi

if has trace; then
  mkdir -p "$OUT/trace"
  : > "$OUT/trace.log"
  for s in ${TRACE_STEPS:-4 5 6 7 7:d4}; do
    timeout 200 $PY -m gemm_ladder trace --step "$s" --out "$OUT/trace" 2>&1 | tee -a "$OUT/trace.log"
  done
  (cd "$OUT" && tar czf trace.tgz trace && rm -rf trace)
  summary+=("traces: trace.tgz")
fi

if has sweep; then
  timeout 540 $PY -m gemm_ladder bench --steps 7:d4 --sizes 1024,2048,8192,3000x5000x4000,16x4096x4096 \
    --json "$OUT/sweep.json" 2>&1 | tee "$OUT/sweep.log"
  summary+=("sweep: rc=$?")
fi

if has suite; then
  timeout 540 $PY -m gemm_ladder bench --suite "${SUITE:-all}" --dtype both --out "$OUT" \
    --with-results "$OUT/bench.json" 2>&1 | tee "$OUT/suite.log"
  summary+=("suite: rc=$?")
fi

if has tests; then
  timeout ${TESTS_TIMEOUT:-540} $PY -m pytest tests -m gpu -q -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log" | tail -40
  summary+=("gpu tests: $(tail -1 "$OUT/gpu-tests.log")")
fi

echo "================ summary ================"
printf '%s\n' "${summary[@]}"
grep -E "^│|FAIL|Error" "$OUT/bench.log" 2>/dev/null | head -30
