#!/usr/bin/env bash
# compute-sanitizer on every ladder step (run_step), on the small-M family (matmul_nt with
# step=smallm / smallm:n128, its split-K and reduction kernels) and on matmul, at a small and a
# tile-edge shape, both dtypes: memcheck, racecheck, synccheck, initcheck (pre-initialized
# output), plus a run without the sanitizer whose outputs start as NaN (every element must be
# written: initcheck cannot see TMA bulk stores). Logs keep compute-sanitizer's own output.
#
# Usage (GPU machine, repo root):  scripts/sanitize.sh
#   OUT           where logs go (default out/device): sanitizer_<tool>.log, sanitizer_poison.log,
#                 sanitizer_summary.txt, sanitizer_summary.json
#   SAN_TOOLS     default "memcheck racecheck synccheck initcheck"
#   SAN_STEPS     default all (e.g. "4,6,7:d4")      SAN_SHAPES  default 256x384x320,129x264x72,129x257x72
#   SAN_FAMILY_SHAPES  default sanitize_run.py's DEFAULT_FAMILY_SHAPES (the small-M family's shapes)
#   SAN_DTYPES    default float16,bfloat16          SAN_PARALLEL  1 (tools side by side) or 0
#   SAN_TIMEOUT   seconds per tool (default 480)    SANITIZER  default /usr/local/cuda/bin/compute-sanitizer
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/device}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export GEMM_LADDER_CACHE_DIR=${GEMM_LADDER_CACHE_DIR:-/tmp/gemm-ladder-cache}
PY=${PYTHON:-python3}
SAN=${SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
TOOLS=${SAN_TOOLS:-memcheck racecheck synccheck initcheck}
ARGS=(--steps "${SAN_STEPS:-all}" --shapes "${SAN_SHAPES:-256x384x320,129x264x72,129x257x72}"
      --dtypes "${SAN_DTYPES:-float16,bfloat16}")
[ -n "${SAN_FAMILY_SHAPES:-}" ] && ARGS+=(--family-shapes "$SAN_FAMILY_SHAPES")
T=${SAN_TIMEOUT:-480}

# 1. no sanitizer: compiles every kernel into the cache once, and checks every element is written
timeout "$T" $PY scripts/sanitize_run.py "${ARGS[@]}" --output poison --tool poison > "$OUT/sanitizer_poison.log" 2>&1
echo "rc=$?" >> "$OUT/sanitizer_poison.log"
grep -E "END .*result=FAIL|DONE" "$OUT/sanitizer_poison.log"

# 2. the tools, each in its own process (side by side unless SAN_PARALLEL=0)
if [ ! -x "$SAN" ]; then
  echo "sanitize: $SAN not found" | tee "$OUT/sanitizer_missing.log"
  exit 2
fi
"$SAN" --version 2>&1 | head -3 | tee "$OUT/sanitizer_version.txt"
logs=("$OUT/sanitizer_poison.log")
for tool in $TOOLS; do
  log="$OUT/sanitizer_$tool.log"
  logs+=("$log")
  (
    timeout "$T" "$SAN" --tool "$tool" --report-api-errors no --error-exitcode 86 \
      $PY scripts/sanitize_run.py "${ARGS[@]}" --output preinit --tool "$tool" > "$log" 2>&1
    echo "rc=$?" >> "$log"
  ) &
  [ "${SAN_PARALLEL:-1}" = 1 ] || wait
done
wait

# 3. one line per tool x target, then per tool (compute-sanitizer's ERROR SUMMARY verbatim)
$PY scripts/sanitize_run.py --summarize "${logs[@]}" --json "$OUT/sanitizer_summary.json" | tee "$OUT/sanitizer_summary.txt"
