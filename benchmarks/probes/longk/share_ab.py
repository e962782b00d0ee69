"""Whole calls of shared-load builds that fit one wave, beside each shape's pick and cuBLAS (perf-notes
item 121). Clusters of 4 and 8 CTAs sit inside a GPC: 30 of 4 and 15 of 8 are resident at once
(cuOccupancyMaxActiveClusters, smallm_deal.CLUSTER_SLOTS), 120 CTAs, so at 256 x 2048 (128 tiles)
n64a2b2 and n64a4b2 ran two waves in item 120; pairs (66 resident) hold 128 CTAs in one. The
builds are the rule's deals of entries or of entries with fields changed (`smallm.parse_build`:
n64 and n64alt with A shared by pairs along N, B by pairs along M). Each build is left out where its deal
needs more CTAs than fit at once. The shared probe loop (measure/probe.sweep): outputs poisoned,
checked against fp32 and repeated bit for bit, then timed interleaved with cuBLAS after each L2
flush, medians.
Usage: PYTHONPATH=src python benchmarks/probes/longk/share_ab.py [--shapes 256x2048x4096,...]
       [--dtypes float16,bfloat16] [--builds n64+share_a=2+cluster_reduce=0,...] [--reps 40]
       [--passes 1] [--json F]"""
import argparse
import json

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.library.select import pick
from gemm_ladder.measure import bench, probe

# n64 and n64alt (two MMA warpgroups alternating k-tiles) with A shared by pairs along N, B by pairs
# along M, or both; the 4 x 2 and 2 x 2 entries; two consumers with A shared by pairs
BUILDS = ("n64+share_a=2+cluster_reduce=0,n64+share_b=2+cluster_reduce=0+b_mn_major=0,n64alt+share_a=2,"
          "n64alt+share_b=2+b_mn_major=0,n64alt+share_a=2+share_b=2+b_mn_major=0,n64a2b2,n64a4b2,c2n64a2")
# the long-K rows at M = 128 and 256 (the suite's group), and 256 x 1792, where 112 tiles fit one wave
# in clusters of 4 and of 8
SHAPES = ",".join(f"{m}x{n}x{k}" for m in (128, 256) for n in (512, 1024, 2048) for k in (4096, 8192, 16384))
SHAPES += ",256x1792x4096"


def main() -> None:
    ap = argparse.ArgumentParser()
    probe.add_sweep_args(ap, shapes=SHAPES, reps=40, passes=1)
    ap.add_argument("--builds", default=BUILDS, help="entries, or entries with fields changed (n64+share_a=2+...)")
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    builds = [(token, smallm.parse_build(token)) for token in args.builds.split(",")]

    def candidates(M: int, N: int, K: int, dtype: str) -> dict:
        key = pick(M, N, K, dtype)
        cands = {f"pick={key}": smallm.FAMILIES.get(key, key)}
        for token, fam in builds:
            if fam.shape_problems(M, N, K):
                continue
            d = fam.deal(M, N, K, sms)
            slots = fam.resident_cluster_ctas(d.cluster[0], sms) if d.cluster[0] > 1 else sms
            if d.ctas > slots:
                print(f"{M}x{N}x{K}: {token} left out ({d.ctas} CTAs in clusters of {d.cluster[0]}, "
                      f"{slots} resident)", flush=True)
                continue
            cands[token] = fam
        return cands

    def make_plan(what, a, b, out):
        if isinstance(what, str):  # a pick outside the small-M family
            return runner.plan(what, a, b, out)
        return runner.plan_smallm(what, a, b, out)

    rows = probe.sweep(bench.Bench(), args.shapes, args.dtypes, args.passes, candidates, make_plan, args.reps)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"probe": "longk share_ab", "commit": bench.git_commit(), "reps": args.reps,
                       "builds": args.builds, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
