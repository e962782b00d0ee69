#!/usr/bin/env bash
# A device session's work in few calls. Timing stages run one after another, alone on the
# GPU; correctness stages (PARALLEL=1) run side by side, since none of them times anything.
# Usage (on the GPU machine, from the repo root):  scripts/device_session.sh [stages]
#   timing:      attention (the attention steps vs torch SDPA's cuDNN/flash/efficient backends; ATTN_ARGS
#                narrows, e.g. "--head-dims 128 --seqlens 4k"), fp8 (the fp8 family vs torch._scaled_mm),
#                bench (ladder 4096³ fp16 + bf16, steps 7-10 and the library's gemm kernels at
#                8192³ and 2048³), suite, matmul (the suite through gemm_ladder.matmul), api,
#                smallm, sweep, probe (kernel experiments: PROBE_KEYS, PROBE_SIZES), groups
#                (tile-order group heights), decode (one layer's decode GEMMs in a CUDA graph vs cuBLAS's:
#                DECODE_DTYPE), tune (every candidate kernel timed per suite shape: TUNE_SUITE, TUNE_DTYPE), cublas (cuBLAS's kernel names), trace, attntrace (measured
#                in-kernel traces of A3, A4, A5 at head dim 128, S 4096, non-causal, beside the attention
#                model: gemm-ladder trace --attention), simheldout (the simulator held out: 7:d4, 8, 9, 9:c1, 10
#                traced at 2048, 4096 and 8192 and A3-A5 at D 128, S 4096, each traced build timed beside the
#                kernel; fitted once on 7:d4 at 4096³, every other run predicted: the record
#                <date>_h200_sim_heldout_<commit>.json; SIMHELDOUT_STEPS, _SIZES, _ATTN), energy (each level's
#                traffic beside energy per FLOP at the cap: benchmarks/probes/energy), widths144 (gemm:128x144
#                against its neighbours: benchmarks/probes/widths/probe_widths.py; WIDTHS144_ARGS), shared (the
#                small-M shared-load entries: benchmarks/probes/longk/shared_loads_run.sh; SHARED_STAGES, DTYPES),
#                chainpicks (the decode chain with other entries or forced deals per GEMM: CHAIN_COMBOS), skeleton
#                (a small kernel's fixed cost, piece by piece: benchmarks/probes/skeleton/skeleton.py), longkdeals
#                (every small-M entry x K split at the long-K rows: LONGK_DTYPES), k128 (k-tile widths: the GPU
#                tests, each pick beside its other width and cuBLAS, K128_SHAPES instead of the probe's own;
#                compute-sanitizer: K128_*_TIMEOUT, K128_SAN_TOOLS)
#   correctness: attnfuzz (the attention door on random calls: ATTN_FUZZ_CASES, default 300), attnsan
#                (compute-sanitizer memcheck, racecheck, synccheck over every attention step at small shapes:
#                ATTN_SAN_TOOLS to run fewer, ATTN_SAN_STEPS e.g. A5:d,A5:c3d, ATTN_SAN_TIMEOUT per tool, default 400 s),
#                fp8fuzz (the fp8 door on random calls), fp8san (compute-sanitizer over the fp8 builds; FP8_SAN_ENTRIES: only these keys), check (debug builds), whatif, tests, fuzz, sanitize, soak
#   default: check,bench,whatif,trace,tests
# Knobs: SUITE (default all, fp16 and bf16), FUZZ_CASES (per dtype, default 2000), SOAK_MINUTES
# (default 5), SAN_* (scripts/sanitize.sh), CHECK_STEPS, TRACE_STEPS, ATTN_TRACE_STEPS, TESTS_FILES, SMALLM_KEYS /
# _MS / _NK / _PDL / _TIMEOUT (scripts/bench_smallm.py), PARALLEL (default 0).
# Everything lands in $OUT/session/ and is packed into $OUT/session-<stages>.tgz (one file
# comes back); the last lines printed are a short summary.
set -u -o pipefail
OUT=${OUT:-out/device}
W="$OUT/session"
mkdir -p "$W"
export PYTHONPATH="$PWD/src:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 COLUMNS=220
export GEMM_LADDER_CACHE_DIR=${GEMM_LADDER_CACHE_DIR:-/tmp/gemm-ladder-cache}
STAGES=",${1:-check,bench,whatif,trace,tests},"
PY=${PYTHON:-python3}
has() { [[ "$STAGES" == *",$1,"* ]]; }
SUMMARY="$W/summary.txt"
: > "$SUMMARY"
note() { echo "$*" >> "$SUMMARY"; }
registry() { $PY -c "$1"; }

# Pack what there is into one archive — also when stopped by a signal (an outer timeout), so
# a slow stage never costs the results of the others.
pids=()
pack() {
  trap - TERM INT
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  name=$(echo "$STAGES" | tr -d ',' | cut -c1-40)
  tar czf "$OUT/session-$name.tgz" -C "$W" . && rm -rf "$W"
  echo "================ summary ================"
  tar xzf "$OUT/session-$name.tgz" -O ./summary.txt
  for f in bench.log bench_bf16.log bench_sizes.log; do
    tar xzf "$OUT/session-$name.tgz" -O "./$f" 2>/dev/null | grep -E "^ +[0-9]|^│|failed|FAIL|Error" | head -24
  done
  exit 0
}
trap 'note "stopped by a signal: packed what had finished"; pack' TERM INT

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
  --format=csv | tee -a "$W/gpu.txt"
$PY -c "import torch, cuda.bindings, sys; print('torch', torch.__version__, 'cuda-bindings', cuda.bindings.__version__, sys.version)" | tee -a "$W/gpu.txt"

# ---- timing stages: alone on the GPU, one after another ----------------------------------
if has bench; then
  timeout 300 $PY -m gemm_ladder bench --json "$W/bench.json" 2>&1 | tee "$W/bench.log"
  note "bench fp16: rc=$?"
  timeout 240 $PY -m gemm_ladder bench --steps 4-10,7:d4,8:c1,9:c1,gemm:128x128 --library --dtype bf16 \
    --json "$W/bench_bf16.json" 2>&1 | tee "$W/bench_bf16.log"
  note "bench bf16: rc=$?"
  timeout 240 $PY -m gemm_ladder bench --steps 7:d4,8,9,10,gemm:128x128 --library --sizes 8192,2048 \
    --json "$W/bench_sizes.json" 2>&1 | tee "$W/bench_sizes.log"
  note "bench 8192/2048: rc=$?"
fi
if has suite; then
  timeout 420 $PY -m gemm_ladder bench --suite "${SUITE:-all}" --dtype both --out "$W" \
    --with-results "$W/bench.json" 2>&1 | tee "$W/suite.log"
  note "suite: rc=$?"
fi
if has matmul; then  # the same suite through gemm_ladder.matmul (the library's whole call)
  mkdir -p "$W/matmul"
  timeout 420 $PY -m gemm_ladder bench --suite "${SUITE:-all}" --dtype both --call matmul --out "$W/matmul" \
    2>&1 | tee "$W/suite_matmul.log"
  note "suite through matmul: rc=$?"
fi
if has api; then
  timeout 240 $PY -m gemm_ladder bench --api --out "$W" 2>&1 | tee "$W/api.log"
  note "api: rc=$?"
  timeout 120 $PY scripts/host_profile.py --json "$W/host_profile.json" 2>&1 | tee "$W/host_profile.log"
  note "host_profile: rc=$?"  # where a call's host time goes
fi
if has decode; then  # one layer's decode GEMMs in a CUDA graph, ours (and its ablations) against cuBLAS's
  timeout "${DECODE_TIMEOUT:-240}" $PY -m gemm_ladder bench --decode-chain --dtype "${DECODE_DTYPE:-both}" \
    --json "$W/decode_chain.json" 2>&1 | tee "$W/decode_chain.log"
  note "decode chain: rc=$?"
fi
if has tune; then  # every accepted candidate timed per suite shape (the model's pick beside the best measured)
  mkdir -p "$W/tune"
  timeout "${TUNE_TIMEOUT:-420}" $PY -m gemm_ladder bench --suite "${TUNE_SUITE:-all}" --dtype "${TUNE_DTYPE:-float16}" \
    --autotune --out "$W/tune" 2>&1 | tail -n 60 > "$W/tune.log"
  note "tune: rc=$? $(grep -m1 -i 'geomean' "$W/tune.log")"
fi
if has smallm; then
  timeout "${SMALLM_TIMEOUT:-240}" $PY scripts/bench_smallm.py --keys "${SMALLM_KEYS:-smallm,smallm:n128}" \
    --ms "${SMALLM_MS:-1,16,64,128}" --nk "${SMALLM_NK:-4096x4096,14336x4096,4096x14336}" --pdl "${SMALLM_PDL:-both}" \
    --json "$W/smallm_bench.json" 2>&1 | tee "$W/smallm_bench.log"
  note "smallm bench: rc=$?"
fi
if has sweep; then
  timeout 300 $PY -m gemm_ladder bench --steps gemm:128x256,7:d4 --sizes 1024,3000x5000x4000,16x4096x4096 \
    --json "$W/sweep.json" 2>&1 | tee "$W/sweep.log"
  note "sweep: rc=$?"
fi
if has probe; then  # kernel experiments straight from their defines (scripts/probe_kernels.py)
  timeout 480 $PY scripts/probe_kernels.py \
    --keys "${PROBE_KEYS:-gemm:128x256c2,gemm:128x256,gemm:128x256c2g8,gemm:128x256g8,8:d5,8:d5g8}" \
    --debug-keys "${PROBE_DEBUG_KEYS:-gemm:128x256c2g8}" --sizes "${PROBE_SIZES:-4096,2048,8192}" \
    --json "$W/probe.json" 2>&1 | tee "$W/probe.log"
  note "probe: rc=$?"
fi
if has widths144; then  # gemm:128x144 beside the widths and picks it would compete with (perf-notes item 107)
  timeout "${WIDTHS144_TIMEOUT:-300}" $PY benchmarks/probes/widths/probe_widths.py ${WIDTHS144_ARGS:-} \
    --json "$W/probe_widths_n144.json" 2>&1 | tee "$W/probe_widths_n144.log"
  note "probe_widths (n144): rc=$?"
fi
if has skeleton; then  # where a small kernel's fixed cost goes: skeleton.cu's levels and launch shapes (item 111)
  timeout "${SKELETON_TIMEOUT:-300}" $PY benchmarks/probes/skeleton/skeleton.py --json "$W/skeleton.json" 2>&1 | tee "$W/skeleton.log"
  note "skeleton: rc=$?"
fi
if has shared; then  # the small-M shared-load entries: tests, then the long-K probe (item 106; SHARED_STAGES, DTYPES)
  OUT="$W/shared_loads" PYTHON="$PY" benchmarks/probes/longk/shared_loads_run.sh ${SHARED_STAGES:-tests probe} \
    > "$W/shared_loads.log" 2>&1
  note "shared loads: $(grep -E 'passed|failed' "$W/shared_loads/shared_loads_tests.txt" 2>/dev/null | tail -2 | tr '\n' ' ')"
fi
if has k128; then  # k-tile widths: GPU tests, each pick beside its other width and cuBLAS, sanitizer (122-123)
  timeout "${K128_TESTS_TIMEOUT:-240}" $PY -m pytest -q -p no:cacheprovider tests/test_gpu_smallm_ktile128.py \
    > "$W/k128_tests.txt" 2>&1
  note "k128 tests: $(tail -1 "$W/k128_tests.txt")"
  # each pick beside its other k-tile width, and n64s's 64-wide entry before item 123 (6 stages)
  timeout "${K128_AB_TIMEOUT:-300}" $PY benchmarks/probes/smallsq/k128_ab.py --json "$W/k128_ab.json" \
    --also old=@n64s+bk=64+depth=6+max_kt=8 ${K128_SHAPES:-} 2>&1 | tee "$W/k128_ab.log"
  note "k128 ab: rc=$? $(grep geomean "$W/k128_ab.log" | tr '\n' ' ')"
  for tool in ${K128_SAN_TOOLS:-memcheck racecheck synccheck}; do
    timeout "${K128_SAN_TIMEOUT:-120}" "${SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}" --tool "$tool" \
      --report-api-errors no --error-exitcode 86 $PY benchmarks/probes/smallsq/k128_ab.py --check --dtypes float16 \
      256 1000 256x1024x4096 16x4096x4096 128x512x16384 > "$W/k128_san_$tool.log" 2>&1
    rc=$?
    note "k128 sanitizer $tool: rc=$rc $(grep -m1 'ERROR SUMMARY' "$W/k128_san_$tool.log")"
  done
fi
if has chainpicks; then  # the decode chain with other entries and forced deals per GEMM (CHAIN_COMBOS, DECODE_DTYPE)
  timeout "${CHAINPICKS_TIMEOUT:-300}" $PY benchmarks/probes/chain/chain_picks.py --dtype "${DECODE_DTYPE:-bfloat16}" \
    ${CHAIN_COMBOS:+--combos "$CHAIN_COMBOS"} --out "$W/chain_picks.json" 2>&1 | tee "$W/chain_picks.log"
  note "chain picks: rc=$?"
fi
if has longkdeals; then  # every small-M entry x K split at the long-K rows (items 112-113)
  for dt in ${LONGK_DTYPES:-float16}; do
    timeout "${LONGKDEALS_TIMEOUT:-300}" $PY benchmarks/probes/longk/probe_longk.py --dtype "$dt" \
      --json "$W/probe_longk_$dt.json" 2>&1 | tee "$W/probe_longk_$dt.log"
    note "long-K deals ($dt): rc=$?"
  done
fi
if has groups; then  # the tile order's group height (ad-hoc variants g<rows>)
  timeout 240 $PY -m gemm_ladder bench \
    --steps "${GROUP_STEPS:-8,8:g8,gemm:128x256c2,gemm:128x256c2g8,gemm:128x128,gemm:128x128g8}" \
    --sizes 4096 --json "$W/groups.json" 2>&1 | tee "$W/groups.log"
  note "groups: rc=$?"
fi
if has cublas; then  # which kernels cuBLAS runs (tile, cluster, split/stream-K from the names)
  timeout 120 $PY scripts/cublas_kernels.py --json "$W/cublas_kernels.json" 2>&1 | tee "$W/cublas_kernels.log"
  note "cublas kernels: rc=$?"
fi
if has energy; then  # ncu's traffic per level beside the power probe (docs/perf-notes.md item 71)
  COMMIT=${GEMM_LADDER_COMMIT:-unknown} OUT="$W" timeout 540 bash benchmarks/probes/energy/run_energy.sh 2>&1 \
    | tee "$W/energy.log"
  note "energy: rc=$?"
fi
if has fp8; then  # the fp8 family against torch._scaled_mm (FP8_SIZES: a subset, e.g. 4096,2048x28672x4096)
  timeout "${FP8_TIMEOUT:-420}" $PY -m gemm_ladder bench --fp8 ${FP8_SIZES:+--sizes "$FP8_SIZES"} \
    --json "$W/fp8.json" 2>&1 | tee "$W/fp8.log"
  note "fp8 bench: rc=$?"
fi
if has attention; then  # the attention steps against torch SDPA's backends (ATTN_ARGS narrows: --head-dims, --seqlens, ...)
  timeout "${ATTN_TIMEOUT:-300}" $PY -m gemm_ladder bench --attention ${ATTN_ARGS:-} --json "$W/attention.json" 2>&1 \
    | tee "$W/attention.log"
  rc=$?
  note "attention bench: rc=$rc $(grep -m1 '^targets met' "$W/attention.log")"
fi
if has attnfuzz; then  # the attention door against a float64 reference and torch's SDPA on random calls
  timeout "${ATTN_FUZZ_TIMEOUT:-300}" $PY scripts/fuzz_attention.py --cases "${ATTN_FUZZ_CASES:-300}" \
    --json "$W/fuzz_attention.json" > "$W/fuzz_attention.log" 2>&1
  rc=$?
  note "$(grep -m1 '^fuzz attention: [0-9]' "$W/fuzz_attention.log" || echo "fuzz attention: no summary line") rc=$rc"
fi
if has attnsan; then  # compute-sanitizer over every attention step at small shapes (racecheck: one shape, fp16)
  for tool in ${ATTN_SAN_TOOLS:-memcheck racecheck synccheck}; do
    timeout "${ATTN_SAN_TIMEOUT:-400}" "${SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}" --tool "$tool" \
      --report-api-errors no --error-exitcode 86 \
      $PY scripts/attention_sanitize_cases.py $([ "$tool" = racecheck ] && echo "--shapes 1 --dtypes float16") \
      ${ATTN_SAN_STEPS:+--steps "$ATTN_SAN_STEPS"} \
      > "$W/attention_sanitizer_$tool.log" 2>&1
    rc=$?
    note "attention sanitizer $tool: rc=$rc $(grep -m1 'ERROR SUMMARY' "$W/attention_sanitizer_$tool.log") $(grep -m1 '^attention sanitizer cases' "$W/attention_sanitizer_$tool.log")"
  done
fi
if has fp8fuzz; then  # the fp8 door against a float64 reference on random calls
  timeout 300 $PY scripts/fuzz_fp8.py --cases "${FP8_FUZZ_CASES:-500}" --json "$W/fuzz_fp8.json" > "$W/fuzz_fp8.log" 2>&1
  note "$(grep -m1 '^fuzz fp8' "$W/fuzz_fp8.log" || echo "fuzz fp8: rc=$?")"
fi
if has fp8san; then  # compute-sanitizer over every fp8 build at small shapes
  for tool in memcheck racecheck synccheck; do
    timeout 400 "${SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}" --tool "$tool" --report-api-errors no \
      --error-exitcode 86 \
      $PY scripts/fp8_sanitize_cases.py $([ "$tool" = racecheck ] && echo 1 || echo 3) ${FP8_SAN_ENTRIES:-} \
      > "$W/fp8_sanitizer_$tool.log" 2>&1
    note "fp8 sanitizer $tool: rc=$? $(grep -m1 'ERROR SUMMARY' "$W/fp8_sanitizer_$tool.log")"
  done
fi
if has trace; then  # one archive per step: a step's records alone can be several MB
  for s in ${TRACE_STEPS:-7:d4 8 9 10}; do
    d="$W/trace_${s/:/_}"
    mkdir -p "$d"
    timeout 200 $PY -m gemm_ladder trace --step "$s" --out "$d" 2>&1 | tee -a "$W/trace.log"
    note "trace $s: rc=$?"
    tar czf "$OUT/trace_${s/:/_}.tgz" -C "$d" . && rm -rf "$d"
  done
fi
if has attntrace; then  # each step's page, summary JSON, Perfetto trace and records into the session folder
  for s in ${ATTN_TRACE_STEPS:-A3 A4 A5}; do
    timeout 300 $PY -m gemm_ladder trace --attention "$s" --head-dim 128 --seq-len 4096 --out-dir "$W" 2>&1 \
      | tee "$W/attntrace_$s.log"
    rc=$?
    note "attention trace $s: rc=$rc $(grep -m1 'makespan measured' "$W/attntrace_$s.log")"
  done
fi

if has simheldout; then  # traces in a scratch folder; back come the held-out record, the logs and the records (CTAs 0-1)
  d=/tmp/simheldout
  rm -rf "$d" && mkdir -p "$d"
  for s in ${SIMHELDOUT_STEPS:-7:d4 8 9 9:c1 10}; do
    timeout 240 $PY -m gemm_ladder trace --step "$s" --size "${SIMHELDOUT_SIZES:-2048,4096,8192}" --ctas 2 --no-page \
      --out-dir "$d" > "$W/simheldout_trace_${s/:/_}.log" 2>&1
    note "simheldout trace $s: rc=$? $(grep -o 'overhead [^)]*' "$W/simheldout_trace_${s/:/_}.log" | tr '\n' ' ')"
  done
  for s in ${SIMHELDOUT_ATTN:-A3 A4 A5}; do
    timeout 200 $PY -m gemm_ladder trace --attention "$s" --head-dim 128 --seq-len 4096 --out-dir "$d" \
      > "$W/simheldout_attntrace_$s.log" 2>&1
    note "simheldout attention trace $s: rc=$? $(grep -o 'overhead [^)]*' "$W/simheldout_attntrace_$s.log")"
  done
  rm -f "$d"/*.html "$d"/*_perfetto.json
  commit=$($PY -c "from gemm_ladder.measure.bench import git_commit; print(git_commit()[:7])")  # GEMM_LADDER_COMMIT without .git
  rec="$W/$(date -u +%F)_h200_sim_heldout_${commit}.json"
  timeout 300 $PY -m gemm_ladder calibrate --held-out "$d" --fit-on 7:d4@4096 --json "$rec" > "$W/simheldout.log" 2>&1
  note "simheldout: rc=$? $(tail -1 "$W/simheldout.log")"
  tar czf "$OUT/simheldout_records.tgz" -C "$d" $(cd "$d" && ls *_records*.json.gz) && rm -rf "$d"
fi

# ---- correctness stages: side by side when PARALLEL=1 -------------------------------------
run_check() {
  for s in ${CHECK_STEPS:-8 9 10 8:c1 9:c1 10:c1 gemm:128x128 gemm:128x256 gemm:128x256c2}; do
    timeout 300 $PY -m gemm_ladder check --debug --steps "$s" --sizes 256x384x192,1000x1000x1000,4096 >> "$W/check.log" 2>&1
    note "check $s (debug build): rc=$?"
  done
}
run_whatif() {
  registry "from gemm_ladder.choreography.whatifs import WHAT_IFS, gpu_what_ifs
from gemm_ladder.choreography.gpu_whatifs import attention_gpu_what_ifs
from gemm_ladder.choreography.sim.attn_params import ATTN_WHAT_IFS
for n in gpu_what_ifs(): print(WHAT_IFS[n].default_step, n)
for n in attention_gpu_what_ifs(): print(ATTN_WHAT_IFS[n].default_step, n)" | while read -r step w; do
    # an attention what-if runs on its own step (deadlock's --step takes GEMM steps)
    timeout 150 $PY -m gemm_ladder deadlock $([[ "$step" == A* ]] || echo "--step $step") --what-if "$w" \
      >> "$W/whatif.log" 2>&1
    note "what-if $w on step $step: rc=$?"
  done
}
# Every GPU test file: four groups side by side (each file one pytest, per-file logs), then the
# concurrency and fault files, which want the GPU to themselves; ~4 minutes on the H200's host.
# TESTS_FILES: those files in one pytest instead.
GPU_TEST_GROUPS=("test_gpu_fp8.py test_gpu_fp8_api.py"
                 "test_gpu_smallm.py test_gpu_smallm_shared_loads.py test_gpu_smallm_ktile128.py test_gpu_suite.py"
                 "test_gpu_attention.py test_gpu_pipeline.py test_gpu_api.py"
                 "test_gpu_library.py test_gpu_fuzz.py test_gpu_decode_chain.py test_gpu_streamk.py test_gpu_steps.py")
GPU_TEST_LAST="test_gpu_concurrency.py test_gpu_faults.py"
test_group() {
  for f in $1; do
    timeout "${TESTS_TIMEOUT:-420}" $PY -m pytest "tests/$f" -m gpu -q -p no:cacheprovider > "$W/gpu-tests_$f.log" 2>&1
    echo "tests/$f rc=$? $(tail -1 "$W/gpu-tests_$f.log")" >> "$W/gpu-tests.log"
  done
}
run_tests() {
  if [ -n "${TESTS_FILES:-}" ]; then
    timeout "${TESTS_TIMEOUT:-540}" $PY -m pytest $TESTS_FILES -m gpu -q -p no:cacheprovider > "$W/gpu-tests.log" 2>&1
    note "gpu tests: $(tail -1 "$W/gpu-tests.log")"
    return
  fi
  : > "$W/gpu-tests.log"
  local listed=" ${GPU_TEST_GROUPS[*]} $GPU_TEST_LAST " rest="" g gp=()
  for f in $(grep -l -E "needs_gpu|mark\.gpu" tests/test_*.py); do  # every file with GPU tests
    [[ "$listed" == *" $(basename "$f") "* ]] || rest+=" $(basename "$f")"
  done
  for g in "${GPU_TEST_GROUPS[@]}"; do test_group "$g" & gp+=($!); done
  for g in "${gp[@]}"; do wait "$g"; done
  test_group "$GPU_TEST_LAST$rest"  # a file no group names runs here, alone
  note "gpu tests: $(grep -c ' rc=0 ' "$W/gpu-tests.log") of $(wc -l < "$W/gpu-tests.log") files passed"
  grep -v ' rc=0 ' "$W/gpu-tests.log" >> "$SUMMARY"
}
run_fuzz() {
  timeout "${FUZZ_TIMEOUT:-480}" $PY scripts/fuzz.py --cases "${FUZZ_CASES:-2000}" --json "$W/fuzz.json" > "$W/fuzz.log" 2>&1
  note "$(grep -m1 '^fuzz: .* cases' "$W/fuzz.log" || echo "fuzz: rc=$?")"
}
run_sanitize() {
  OUT="$W" PYTHON="$PY" scripts/sanitize.sh > "$W/sanitize.log" 2>&1
  note "$(tail -1 "$W/sanitize.log")"
}
run_soak() {
  timeout "$(awk "BEGIN{print int(${SOAK_MINUTES:-5} * 60 + 180)}")" $PY scripts/soak.py --minutes "${SOAK_MINUTES:-5}" \
    --json "$W/soak.json" > "$W/soak.log" 2>&1
  note "$(tail -1 "$W/soak.log")"
}

for stage in check whatif tests fuzz sanitize soak; do
  has "$stage" || continue
  if [ "${PARALLEL:-0}" = 1 ]; then "run_$stage" & pids+=($!); else "run_$stage"; fi
done
for p in "${pids[@]}"; do wait "$p"; done
pack
