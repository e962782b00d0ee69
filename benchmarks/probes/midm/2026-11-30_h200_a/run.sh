# Run on the H200 from an export of tree 5f22661 (the A-sharing pairs, reverted in 215a057) in exp_old/:
#   git archive 5f22661 src benchmarks/results/experiments/midm tests/fuzz_support.py | tar -x -C exp_old
# The paths in this script are those of that tree, where the probes lived under
# benchmarks/results/experiments/ (they are in benchmarks/probes/ now).
set -u -o pipefail
cd exp_old
export PYTHONPATH=$PWD/src GEMM_LADDER_CACHE_DIR=/tmp/glc_old GEMM_LADDER_COMMIT=5f22661 PYTHONUNBUFFERED=1
D=benchmarks/results/experiments/midm
A2="n128a2:bn=128:depth=8:multicast=2:shares_a=1,n64a2:bn=64:depth=12:multicast=2:shares_a=1"
timeout 100 python3 $D/check_adhoc.py --adhoc "$A2" --shapes 1000x1000x1000,2000x1000x1000,1000x2000x1000 2>&1 | tail -8
for dt in float16 bfloat16; do
timeout 120 python3 $D/probe_midm.py --ms 1000 --nk 1000x1000 --splits 1 --ladder 8:c1 --fams n128,n128m2,n64 --adhoc "$A2" --reps 100 --dtype $dt --json $OUT/p_$dt.json 2>&1 | tail -12
done
timeout 100 python3 $D/probe_midm.py --ms 2000 --nk 1000x1000 --splits 1 --ladder 8:c1 --fams n128,n128m2 --adhoc "$A2" --reps 100 --json $OUT/p2000.json 2>&1 | tail -12
