set -u -o pipefail
D=benchmarks/probes/midm
for sq in 256 384 512 640 768; do
  timeout 60 python3 $D/probe_midm.py --reps 80 --splits 1,2 --ladder 8:c1 --ms $sq --nk ${sq}x${sq} --fams n64,n128 \
    --adhoc "n32x:bn=32:depth=16:b_mn_major=0,n32d8:bn=32:depth=8:b_mn_major=0" --json $OUT/sq_n32_$sq.json
done
