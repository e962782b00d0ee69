#!/usr/bin/env bash
# Multicast pairs in the small-M family (smallm:n128m2 and ad-hoc variants) against the
# family's other entries, the ladder's 8:c1 / 8 and cuBLAS (probe_midm.py: poisoned outputs
# checked, interleaved, L2 flushed, medians). Usage: OUT=dir bash mc_probe.sh
set -u -o pipefail
D=benchmarks/probes/midm
P="python3 $D/probe_midm.py --reps 80 --splits 1"
MC="n128m2:bn=128:depth=8:multicast=2,n64m2:bn=64:depth=12:multicast=2:b_mn_major=0,c2n128m2:bn=128:consumers=2:depth=6:multicast=2"
SQ="--fams n128,n64,c2n128 --adhoc $MC --ladder 8:c1,8"
mkdir -p "$OUT/mc"
for sq in 1000x1000x1000 1000x1000x1008 1024x1024x1024 768x768x768 512x512x512 256x256x256; do
  IFS=x read -r m n k <<< "$sq"
  timeout 120 $P --ms $m --nk ${n}x$k $SQ --json "$OUT/mc/sq_$sq.json" 2>&1 | tail -n +1
done
timeout 120 $P --ms 1000 --nk 1000x1000 $SQ --dtype bfloat16 --json "$OUT/mc/sq_1000_bf16.json"
timeout 240 $P --ms 128,256 --nk 4096x4096,11008x4096,8192x8192,4096x14336 --fams n64,n128,c2n128,c2n64 \
  --adhoc $MC --ladder 8:c1 --json "$OUT/mc/m128_256.json"
