"""The loads' own pace per k-tile for each way the small-M family shares its operands (perf-notes
item 120). At 256 x 2048 x 4096 cuBLAS runs 64 x 64 tiles in 2 x 1 clusters at ~140 ns a k-tile
(whole call), our n64alt ~169, and our loads alone took 138-146 ns (item 104's patch). Each build
runs whole tiles twice: as it is, and with GL_ABLATE_NO_MMA (the consumers hand each stage back
without its MMAs: what the loads alone allow). The pace is the slope between two K: the time
difference over the k-tiles added, so the launch, fill and epilogue cancel. Plain 64 x 64 tiles
(n64, n64alt), shared loads (n64a2b2, n64a4b2: each CTA fetches 1/2 .. 1/4 of the operands it
uses), multicast pairs (n128m2) and two consumers on 128 x 64 (c2n64), beside cuBLAS; the real
builds' outputs checked against fp32 (poisoned first), the ablated ones' not (they are wrong by
design). Interleaved in one process, each call after the suite's L2 flush, medians.
Usage: PYTHONPATH=src python benchmarks/probes/longk/loads_pace.py [--dtype float16] [--reps 40]
       [--mn 256x2048] [--ks 4096,8192] [--builds n64,n64alt,...] [--switch NAME=V] [--flush read] [--json F]"""
import argparse
import json
import statistics

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.measure import bench, probe
from gemm_ladder.measure.accuracy import check_output
from gemm_ladder.measure.gpuinfo import Sampler

BUILDS = "n64,n64alt,n64a2b2,n64a4b2,n128m2,c2n64"
NO_MMA = {"GL_ABLATE_NO_MMA": 1}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--mn", default="256x2048")
    ap.add_argument("--ks", default="4096,8192")
    ap.add_argument("--builds", default=BUILDS, help="entries, or entries with fields changed (n64+share_a=2+...)")
    ap.add_argument("--switch", action="append", default=[], metavar="NAME=V",
                    help="another build switch for the loads-only builds too (e.g. GL_ABLATE_LOCAL_EMPTY=1)")
    probe.add_flush_arg(ap)
    ap.add_argument("--json")
    args = ap.parse_args()
    no_mma = dict(NO_MMA, **(probe.parse_switches(args.switch) or {}))
    dtype = getattr(torch, args.dtype)
    M, N = map(int, args.mn.split("x"))
    ks = [int(k) for k in args.ks.split(",")]
    b = bench.Bench()
    b.flush_l2 = probe.flushes(b)[args.flush]
    fams = [smallm.parse_build(k) for k in args.builds.split(",")]
    times, deals = {}, {}
    for K in ks:
        a, bb = b.inputs(M, N, K, dtype)
        ref = a.float() @ bb.float().T
        names, calls = [], []
        for fam in fams:
            for ablated in (False, True):
                p = runner.plan_smallm(fam, a, bb, splits=1, extra_defines=no_mma if ablated else None)
                p.out.fill_(float("nan"))
                p()
                torch.cuda.synchronize()
                if not ablated and not check_output(p.out, ref, args.dtype)[0]:
                    raise SystemExit(f"{fam.key} at {M}x{N}x{K}: wrong result")
                names.append(f"{fam.key}{' loads only' if ablated else ''}")
                calls.append(p)
                deals[fam.key] = f"{p.deal.ctas} CTAs" if getattr(p, "deal", None) else ""
        c = torch.empty(M, N, dtype=dtype, device="cuda")
        names.append("cuBLAS")
        calls.append(lambda: torch.matmul(a, bb.T, out=c))
        b.time_interleaved(calls, 3)
        with Sampler(b.nvml) as smp:
            t = b.time_interleaved(calls, args.reps)
        for n, x in zip(names, t):
            times.setdefault(n, {})[K] = 1e3 * statistics.median(x)
        print(f"{M}x{N}x{K} {args.dtype}: {smp.summary()}", flush=True)
    k_tiles = (ks[-1] - ks[0]) // 64
    rows = []
    for n, by_k in times.items():
        pace = 1e3 * (by_k[ks[-1]] - by_k[ks[0]]) / k_tiles  # ns per k-tile
        rows.append({"build": n, "us": by_k, "ns_per_k_tile": pace, "deal": deals.get(n.split(" ")[0], "")})
        print(f"  {n:28} {'  '.join(f'K={k} {u:7.2f} us' for k, u in by_k.items())}  pace {pace:6.1f} ns a k-tile  "
              f"{deals.get(n.split(' ')[0], '')}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"probe": "longk loads_pace", "commit": bench.git_commit(), "shape": [M, N], "ks": ks,
                       "loads_only_switches": no_mma, "flush": args.flush,
                       "dtype": args.dtype, "reps": args.reps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
