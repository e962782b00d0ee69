"""The cluster reduction's push form against its pull form (perf-notes item 121). Traced at
256 x 1024 x 4096 (n64, pairs), the pull form spends ~2.7 us after a CTA's last k-tile: its
first cluster barrier (~0.77 us, the wait for the peer among it), the sum through remote loads
(~1.2 us) and a second barrier (~0.75 us) before the CTA may exit. The push form
(`reduce_inbox`): each CTA writes the others' column slices into their inboxes as soon as its
k-loop ends, one barrier, its own slice summed from registers and local memory in the same rank
order. Each entry runs beside its push twin on the same deal (the rule's, or K split S ways), the
twins' outputs compared bit for bit (the same sums in the same order), both checked against fp32
on poisoned outputs and repeated; then timed interleaved with cuBLAS after each L2 flush, medians.
Usage: PYTHONPATH=src python benchmarks/probes/longk/inbox_ab.py [--shapes MxNxK,...]
       [--dtypes float16,bfloat16] [--builds n64/s0,c2n64d/s0,n64/s4] [--reps 60] [--passes 1] [--json F]"""
import argparse
import json

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.library.select import pick
from gemm_ladder.measure import bench, probe

# the suite's rows whose picks sum pieces in clusters (pairs, fours, eights), and decode-like rows
SHAPES = ("256x1024x4096,128x2048x4096,128x512x4096,128x512x8192,128x1024x4096,256x512x4096,"
          "16x4096x11008,16x4096x14336,64x4096x4096")
BUILDS = "n64/s0,c2n64d/s0,n64/s4,n64/s8"


def main() -> None:
    ap = argparse.ArgumentParser()
    probe.add_sweep_args(ap, shapes=SHAPES, passes=1)
    ap.add_argument("--builds", default=BUILDS, help="entry/sSPLITS (s0: the rule's deal), each beside its push twin")
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
                    cands[f"{token} push"] = (smallm.with_fields(fam, "inbox", reduce_inbox=True), splits)
                checked = probe.checked_plans(cands, a, bb, lambda w, x, y, out: runner.plan_smallm(
                    w[0], x, y, out, splits=w[1]), f"{shape} {dt}", repeats=2)
                outs = {name: p.out.clone() for name, p, *_ in checked}
                for name in outs:
                    if name.endswith(" push") and name[:-5] in outs and not torch.equal(outs[name], outs[name[:-5]]):
                        mismatches += 1
                        print(f"{shape} {dt}: {name} differs from {name[:-5]}", flush=True)
                rows += probe.time_against_cublas(b, checked, a, bb, args.reps, f"pass {pas} {shape} {dt}",
                                                  dict(M=M, N=N, K=K, dtype=dt, pass_=pas))
    print(f"push twins bit-identical to their pull forms: {'yes' if not mismatches else f'no ({mismatches})'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"probe": "longk inbox_ab", "commit": bench.git_commit(), "reps": args.reps,
                       "builds": args.builds, "twins_identical": not mismatches, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
