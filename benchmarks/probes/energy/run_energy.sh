#!/usr/bin/env bash
# Where the energy goes at the power cap (docs/perf-notes.md item 71). On the GPU machine, from
# the repo root:  COMMIT=<hash> OUT=dir bash benchmarks/probes/energy/run_energy.sh
# 1. ncu (the GPU's own clocks, caches flushed between passes) counts, per kernel, the bytes
#    each level moves: DRAM reads and writes, L2 sectors requested by the SMs (loads and TMA),
#    shared-memory bank reads and writes. Metric names ncu does not know on this GPU are left
#    out (listed in metrics_missing.txt) rather than failing the run.
# 2. probe_power.py: the same kernels launched back to back at the cap, clock and energy.
# Then ledger.py joins the two: per kernel, each level's traffic per FLOP beside pJ per FLOP.
# EXTRA: more metrics (e.g. the L2 request coalescer's lrc__* counts, which ledger.py prints too).
set -u -o pipefail
export PYTHONPATH=$PWD/src:$PWD/tests GEMM_LADDER_CACHE_DIR=/tmp/glc GEMM_LADDER_COMMIT=${COMMIT:?} PYTHONUNBUFFERED=1
D=$(dirname "$0")
O=${OUT:-out}/energy; mkdir -p "$O"
KEYS=${KEYS:-cublas,9,9:c1,8,10}
SIZES=${SIZES:-4096,2048,8192}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit --format=csv | tee "$O/gpu.txt"
WANT="dram__bytes_read.sum dram__bytes_write.sum lts__t_sectors_srcunit_tex_op_read.sum
lts__t_sectors_srcunit_tex_op_write.sum lts__t_sectors.sum lts__t_requests_srcunit_tex.sum
l1tex__data_bank_reads.sum l1tex__data_bank_writes.sum l1tex__m_xbar2l1tex_read_bytes.sum
smsp__inst_executed_pipe_tensor.sum sm__cycles_elapsed.avg.per_second gpu__time_duration.sum ${EXTRA:-}"
ncu --query-metrics > "$O/metrics_known.txt" 2>&1
have=(); : > "$O/metrics_missing.txt"
for m in $WANT; do
  base=${m%%.*}
  if grep -q "^$base\b" "$O/metrics_known.txt"; then have+=("$m"); else echo "$m" >> "$O/metrics_missing.txt"; fi
done
[ ${#have[@]} -gt 0 ] || { echo "no metric recognised in the query's output; asking for all of them"; have=($WANT); }
echo "metrics: ${have[*]}"; echo "missing: $(tr '\n' ' ' < "$O/metrics_missing.txt")"
cases=""
for s in ${SIZES//,/ }; do for k in ${KEYS//,/ }; do cases+="${s}x${s}x${s}:$k,"; done; done
timeout 300 ncu --clock-control none --profile-from-start off --metrics "$(IFS=,; echo "${have[*]}")" \
  --csv --page raw python3 benchmarks/probes/midm/ncu_l2.py --reps 5 --cases "${cases%,}" \
  > "$O/ncu_raw.csv" 2> "$O/ncu_raw.err"
echo "ncu rc=$?"; tail -3 "$O/ncu_raw.err"
timeout 200 python3 benchmarks/probes/power/probe_power.py --keys "$KEYS" --sizes "$SIZES" \
  --json "$O/power.json" 2>&1 | tee "$O/power.log"
echo "power rc=$?"
python3 "$D/ledger.py" --ncu "$O/ncu_raw.csv" --power "$O/power.json" --keys "$KEYS" --sizes "$SIZES" | tee "$O/ledger.txt"
