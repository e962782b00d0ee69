#!/usr/bin/env bash
# A-sharing pairs (pairs along N multicasting half of A each) at M <= 128 against the family's
# entries and cuBLAS: debug builds checked first, then probe_midm.py. Usage: OUT=dir bash mc_a_probe.sh
# Runs only on tree 5f22661: the `shares_a` field it asks for was reverted in 215a057 (perf-notes
# item 52); export that tree first (git archive 5f22661 src benchmarks/results/experiments/midm).
# The paths in this script are those of that tree, where the probes lived under
# benchmarks/results/experiments/ (they are in benchmarks/probes/ now).
set -u -o pipefail
D=benchmarks/results/experiments/midm
A2="n32a2:bn=32:depth=16:multicast=2:shares_a=1:b_mn_major=0,n64a2:bn=64:depth=12:multicast=2:shares_a=1,n128a2:bn=128:depth=8:multicast=2:shares_a=1"
mkdir -p "$OUT/mca"
timeout 120 python3 $D/check_adhoc.py --adhoc "$A2" 2>&1 | tail -20 || exit 1
P="python3 $D/probe_midm.py --reps 60 --splits 1 --ladder 8:c1"
timeout 200 $P --ms 16,64 --nk 4096x4096,8192x8192,4096x14336,11008x4096 --fams n32,n64,n128 --adhoc "$A2" \
  --json "$OUT/mca/m16_64.json"
timeout 120 $P --ms 32,128 --nk 4096x4096,8192x8192 --fams n32,n64,n128,c2n64 --adhoc "$A2" --json "$OUT/mca/m32_128.json"
