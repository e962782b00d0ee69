"""Probe: where a small-M kernel's time goes across its CTAs (fill, stream, tail), from traces
of the selection's pick. For each shape: the pick traced once after bench.py's zeroing flush
(output poisoned and checked), then per CTA, from its first consumer's slot: the start, the
first stage landed, the last k-tile's MMAs retired, the end; all relative to the earliest CTA
start (globaltimer). Also plain and traced timed interleaved with cuBLAS.

    PYTHONPATH=src python benchmarks/probes/tail/probe_tail.py [--json F]
        [--shapes 16x8192x8192,...] [--dtype float16]
"""
import argparse, json, statistics as S
import torch
from gemm_ladder.choreography import trace
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch, select

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="16x8192x8192,1x8192x8192,1x8192x28672,16x14336x4096,16x4096x14336,1000x1000x1000")
ap.add_argument("--dtype", default="float16")
ap.add_argument("--keys", default="", help="kernels to trace instead of the pick (comma list)")
ap.add_argument("--reps", type=int, default=50)
ap.add_argument("--json", default=None)
args = ap.parse_args()
bench = Bench(0)
dtype = getattr(torch, args.dtype)
EV = trace.EVENTS
out = []


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))]


for shape in args.shapes.split(","):
    M, N, K = map(int, shape.split("x"))
    a, b = bench.inputs(M, N, K, dtype)
    keys = args.keys.split(",") if args.keys else [select.pick(M, N, K, args.dtype)]
    for key in keys:
        c = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
        plain = launch.plan(key, a, b, c)
        deal = getattr(plain, "deal", None)
        blocks = deal.grid[0] * deal.grid[1] * deal.grid[2] if deal is not None else None
        if blocks is None:
            print(f"{shape} {key}: no deal (not a family entry); skipped", flush=True)
            continue
        cap = 6 * (-(-K // 64)) + 64
        buf = torch.zeros(blocks * trace.SLOTS_PER_CTA * (trace.HEADER_WORDS + 2 * cap), dtype=torch.int64, device="cuda")
        ct = torch.full_like(c, float("nan"))
        traced = launch.plan(key, a, b, ct, trace_buffer=buf, trace_events=cap)
        plain(); traced(); torch.cuda.synchronize()
        ok = bool(check_product(c, a, b)[0]) and bool(check_product(ct, a, b)[0])
        t = bench.time_interleaved([plain, traced, lambda: torch.matmul(a, b.T)], args.reps)
        us = [S.median(x) * 1e3 for x in t]
        buf.zero_(); bench.flush_l2(); traced(); torch.cuda.synchronize()
        recs = [r for r in trace.decode(buf.cpu().tolist(), blocks, cap) if r["role"] == "consumer" and r["slot"] == 1]
        t_zero = min(r["t0"] for r in recs)
        per = []
        for r in recs:
            base = (r["t0"] - t_zero) / 1e3
            ev = r["events"]
            land = next((e[0] for e in ev if e[1] == EV["EV_WAIT_END"]), None)
            done = [e[0] for e in ev if e[1] in (EV["EV_MMA_DONE"], EV["EV_EPI_BEGIN"])]
            per.append(dict(block=r["block"], smid=r["smid"], start=base, land=base + (land or 0) / 1e3,
                            mma_end=base + (max(done) if done else 0) / 1e3, end=(r["t1"] - t_zero) / 1e3))
        summ = {f: {p: round(q([x[f] for x in per], p), 3) for p in (0.0, 0.1, 0.5, 0.9, 1.0)} for f in ("start", "land", "mma_end", "end")}
        stream = [x["mma_end"] - x["land"] for x in per]
        row = dict(shape=shape, dtype=args.dtype, kernel=key, deal=f"c{deal.ctas} u{deal.units} p{deal.planes}", ok=ok,
                   us_plain=us[0], us_traced=us[1], cublas_us=us[2], ratio_plain=us[2] / us[0], ctas=len(per),
                   quantiles_us=summ, stream_us={p: round(q(stream, p), 3) for p in (0.0, 0.5, 1.0)})
        out.append(dict(row, per_cta=per))
        print(json.dumps(row), flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), rows=out), open(args.json, "w"), indent=1)
