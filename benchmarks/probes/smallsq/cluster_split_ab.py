"""The small squares with K split and the pieces summed in a cluster (DSMEM) instead of whole tiles
on a third to a half of the SMs (perf-notes item 119). At 512³ the pick (`smallm:n64s`) runs 64
whole 64 x 64 tiles of 8 k-tiles, its consumer ~185 ns a k-tile; `smallm:n64` split two ways
runs 128 CTAs of 4 k-tiles, its pairs summed through distributed shared memory (the split deals
measured before went through the workspace and a second pass: 0.52-0.84 x cuBLAS, experiments/
smallsq/…_narrow_tiles_daf5880.txt). A build runs where its deal sums in a cluster on one wave.
The shared probe loop (measure/probe.sweep): outputs poisoned, checked against fp32 and repeated
bit for bit, then timed interleaved with cuBLAS after each L2 flush, medians.
Usage: PYTHONPATH=src python benchmarks/probes/smallsq/cluster_split_ab.py [--shapes 256x256x256,...]
       [--dtypes float16,bfloat16] [--builds n64/s2,...] [--reps 60] [--passes 1] [--json F]"""
import argparse
import json

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.library.select import pick
from gemm_ladder.measure import bench, probe

BUILDS = "n64/s2,n64/s4,c2n64d/s2,c2n64d/s4"


def main() -> None:
    ap = argparse.ArgumentParser()
    probe.add_sweep_args(ap, shapes="256x256x256,384x384x384,512x512x512", passes=1)
    ap.add_argument("--builds", default=BUILDS, help="entry/sSPLITS, each tried where its deal sums in a cluster")
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count

    def candidates(M: int, N: int, K: int, dtype: str) -> dict:
        key = pick(M, N, K, dtype)
        cands = {f"pick={key}": (smallm.FAMILIES[key], None)}
        for token in args.builds.split(","):
            entry, _, s = token.partition("/")
            fam = smallm.FAMILIES["smallm" if entry == "smallm" else f"smallm:{entry}"]
            deal = fam.plan_deal(M, N, K, sms, splits=int(s[1:]))
            if deal.dsmem and deal.ctas <= sms:
                cands[token] = (fam, int(s[1:]))
            else:
                print(f"{M}x{N}x{K}: {token} left out ({deal.ctas} CTAs, summed in a cluster: {deal.dsmem})")
        return cands

    def make_plan(what, a, b, out):
        fam, splits = what
        return runner.plan_smallm(fam, a, b, out, splits=splits)

    rows = probe.sweep(bench.Bench(), args.shapes, args.dtypes, args.passes, candidates, make_plan, args.reps)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"probe": "smallsq cluster_split_ab", "commit": bench.git_commit(), "reps": args.reps,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
