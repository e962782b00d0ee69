# Step 9 on clusters of 4 along M (9:c4) beside 9 and 9:c1: debug-build check, interleaved bench
# (4096^3 fp16/bf16, 8192^3, 2048^3), the energy ledger with the L2 request coalescer counts.
#   bash benchmarks/results/experiments/cluster4/run_c4.sh <commit>   (on the GPU machine; $OUT/c4.tgz)
# Needs tree 7d72753 (9:c4 was reverted after this probe: docs/perf-notes.md, item 73).
# The paths in this script are those of that tree, where the probes lived under
# benchmarks/results/experiments/ (they are in benchmarks/probes/ now).
set -u
export PYTHONPATH=$PWD/src:$PWD/tests GEMM_LADDER_CACHE_DIR=/tmp/glc PYTHONUNBUFFERED=1
C=${1:?commit}
R=/tmp/c4; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv > $R/gpu.txt
python3 -c "
from gemm_ladder.runtime import steps, driver, launch
for k in ['9','9:c4']:
    st=steps.get_step(k); kern=st.compile()
    print(k, 'max active clusters', driver.max_active_clusters(kern,(st.threads,1,1),st.dynamic_smem,st.cluster), 'grid 4096', st.grid(4096,4096,132, driver.max_active_clusters(kern,(st.threads,1,1),st.dynamic_smem,st.cluster)))
" > $R/clusters.txt 2>&1
timeout 200 python3 -m gemm_ladder check --debug --steps 9:c4 --sizes 256x384x192,1000x1000x1000,600x1000x320,4096 > $R/check_debug.log 2>&1; echo "check debug rc=$?" >> $R/summary.txt
timeout 150 python3 -m gemm_ladder bench --steps 9,9:c1,9:c4,9:c4g8,9:c4g32 --sizes 4096 --json $R/bench_4096_fp16.json > $R/bench_4096_fp16.log 2>&1; echo "bench fp16 rc=$?" >> $R/summary.txt
timeout 150 python3 -m gemm_ladder bench --steps 9,9:c1,9:c4 --sizes 4096 --dtype bf16 --json $R/bench_4096_bf16.json > $R/bench_4096_bf16.log 2>&1; echo "bench bf16 rc=$?" >> $R/summary.txt
timeout 150 python3 -m gemm_ladder bench --steps 9,9:c1,9:c4 --sizes 8192,2048 --json $R/bench_sizes.json > $R/bench_sizes.log 2>&1; echo "bench sizes rc=$?" >> $R/summary.txt
X="lrc__request_sectors_op_read_coalescable.sum lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum lrc__request_sectors_op_read_coalescing_achieved_type_programmatic.sum lrc__lrc2xbar_sectors_op_read.sum lrc__xbar2gpc_sectors_op_read.sum lts__t_requests_srcunit_ltcfabric.sum"
COMMIT=$C OUT=$R EXTRA="$X" KEYS="cublas,9,9:c1,9:c4,9:c4g8" SIZES=4096 timeout 200 bash benchmarks/results/experiments/energy/run_energy.sh > $R/energy.log 2>&1; echo "energy rc=$?" >> $R/summary.txt
rm -f $R/energy/metrics_known.txt
tar czf $OUT/c4.tgz -C /tmp c4
cat $R/summary.txt $R/clusters.txt; tail -5 $R/check_debug.log; grep -E "^ +[0-9]|│" $R/bench_4096_fp16.log $R/bench_4096_bf16.log $R/bench_sizes.log | head -30; tail -9 $R/energy.log | cut -c1-330
