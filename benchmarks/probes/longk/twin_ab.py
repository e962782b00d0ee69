"""Each small-M entry beside its twin with fields changed (`--change NAME=V+...`; perf-notes item
121 ran `pair_send=1`, a cluster pair's sum sent one way, against the pull form: the field is gone,
its code is in 62dcb61), on the same deal (the rule's, or K
split S ways), at the shapes where the entry's deal sums its pieces in a cluster. The twins' outputs
are compared bit for bit (the same sums in the same order), both checked against fp32 on poisoned
outputs and repeated; then timed interleaved with cuBLAS after each L2 flush, medians.
Usage: PYTHONPATH=src python benchmarks/probes/longk/twin_ab.py --change NAME=V[+NAME=V] [--shapes MxNxK,...]
       [--dtypes float16,bfloat16] [--builds n64/s0,n64/s4] [--reps 60] [--passes 1] [--json F]"""
import argparse
import json

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.library.select import pick
from gemm_ladder.measure import bench, probe

# the suite's rows whose picks sum pieces in pairs (and one in eights, where the twins should tie)
BUILDS = "n64/s0"
SHAPES = ("256x1024x4096,128x2048x4096,64x4096x4096,64x2048x8192,16x2048x4096,16x4096x11008,16x4096x14336,"
          "1x4096x14336,64x4096x11008,64x512x4096")


def main() -> None:
    ap = argparse.ArgumentParser()
    probe.add_sweep_args(ap, shapes=SHAPES, passes=1)
    ap.add_argument("--builds", default=BUILDS, help="entry/sSPLITS (s0: the rule's deal), each beside its twin")
    ap.add_argument("--change", required=True, help="the twin's fields: NAME=V[+NAME=V...] (smallm.parse_build)")
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    b = bench.Bench()
    rows, mismatches = [], 0
    for pas in range(args.passes):
        for dt in args.dtypes.split(","):
            for shape in args.shapes.split(","):
                M, N, K = map(int, shape.split("x"))
                a, bb = b.inputs(M, N, K, getattr(torch, dt))
                key = pick(M, N, K, dt)
                cands = {f"pick={key}": (smallm.FAMILIES[key], None)} if key in smallm.FAMILIES else {}
                for token in args.builds.split(","):
                    entry, _, s = token.partition("/")
                    fam, splits = smallm.parse_build(entry), int(s[1:]) or None
                    if fam.shape_problems(M, N, K) or not fam.plan_deal(M, N, K, sms, splits=splits).dsmem:
                        continue  # the twins differ only where the pieces are summed in a cluster
                    cands[token] = (fam, splits)
                    cands[f"{token} twin"] = (smallm.parse_build(f"{entry}+{args.change}"), splits)
                checked = probe.checked_plans(cands, a, bb, lambda w, x, y, out: runner.plan_smallm(
                    w[0], x, y, out, splits=w[1]), f"{shape} {dt}", repeats=2)
                outs = {name: p.out.clone() for name, p, *_ in checked}
                for name in outs:
                    if name.endswith(" twin") and name[:-5] in outs and not torch.equal(outs[name], outs[name[:-5]]):
                        mismatches += 1
                        print(f"{shape} {dt}: {name} differs from {name[:-5]}", flush=True)
                rows += probe.time_against_cublas(b, checked, a, bb, args.reps, f"pass {pas} {shape} {dt}",
                                                  dict(M=M, N=N, K=K, dtype=dt, pass_=pas))
    print(f"twins ({args.change}) bit-identical to their entries: {'yes' if not mismatches else f'no ({mismatches})'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"probe": "longk twin_ab", "commit": bench.git_commit(), "reps": args.reps,
                       "builds": args.builds, "change": args.change, "twins_identical": not mismatches,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
