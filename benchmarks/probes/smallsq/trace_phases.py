"""Where a small square's kernel time goes, CTA by CTA (perf-notes items 111 and 118): the small-M
entry's GL_TRACE build on whole tiles, its producer's and consumer's records put on one clock
(the two slots of a CTA share its SM's clock64, so the headers' clk0 align them exactly), and the
median over CTAs of each phase: the producer's start to its first load, the load's flight to the
consumer finding the stage full, the k-loop, the last group's retirement (the epilogue's wait for
every group: the k-tiles' records retire earlier groups), the staging and the TMA
store's read, and the consumer's end. The traced and the plain build are timed in turns (the
tracer's cost), and both outputs are checked against fp32.
Usage: PYTHONPATH=src python benchmarks/probes/smallsq/trace_phases.py [--key smallm:n64s]
       [--dtype float16] [--splits S] [--flush read] [--json F] [N or MxNxK ...]
A split deal's phases run to its pieces' staging ("epilogue end"), the cluster's sum in "epilogue
end to exit"; the span line gives the kernel on the global timer (first start to last exit).
The first run (the H100 at bd3f556) took the first retirement for the last one, so its "last issue
to retired" and "retired to staging" are off; their sum with "data to last issue" stands."""
import argparse
import json
import statistics

import torch

from gemm_ladder.choreography import trace
from gemm_ladder.cuda import device as cuda_device
from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.measure import bench, probe
from gemm_ladder.measure.gpuinfo import Sampler

EV = trace.EVENTS
BAR_CLUSTER = {name: i for i, name in trace.BARRIERS.items()}["cluster"]
# the marks of a CTA's timeline, in order; a mark its kernel path does not record (a split piece
# summed in a cluster stores nothing through TMA) is left out and its neighbours' phase joins them
# (a cluster's sum: "peers met" after its first barrier, "sum stored" at its second)
MARKS = ("start", "first load", "data", "last issue", "retired", "staging", "store read", "epilogue end",
         "peers met", "sum stored", "exit")


def cta_phases(slots: dict[int, dict], clk0: dict[int, int]) -> dict[str, float] | None:
    """One CTA's phases in ns, from its producer's (slot 0) and first consumer's (slot 1) records:
    {"first load to data": ns, ...} over the marks it recorded (a cluster's reduction falls in
    "epilogue end to exit")."""
    p, c = slots.get(0), slots.get(1)
    if p is None or c is None:
        return None
    shift = (clk0[1] - clk0[0]) * c["ns_per_clock"]  # the consumer's times on the producer's axis
    pe = [(t, k) for t, k, *_ in p["events"]]
    ce = [(t + shift, k) for t, k, *_ in c["events"]]
    cluster = [(t + shift, k, stage) for t, k, bar, stage, *_ in c["events"] if bar == BAR_CLUSTER]

    def first(evs, kind):
        return min((t for t, k in evs if k == kind), default=None)

    def last(evs, kind):
        return max((t for t, k in evs if k == kind), default=None)
    values = [0.0, first(pe, EV["EV_LOAD_ISSUE"]), first(ce, EV["EV_WAIT_END"]), last(ce, EV["EV_MMA_ISSUE"]),
              last(ce, EV["EV_MMA_DONE"]), first(ce, EV["EV_EPI_BEGIN"]), first(ce, EV["EV_STORE_DONE"]),
              first(ce, EV["EV_EPI_END"]),
              min((t for t, k, st in cluster if k == EV["EV_WAIT_END"] and st == 0), default=None),
              min((t for t, k, st in cluster if k == EV["EV_WAIT_BEGIN"] and st == 1), default=None),
              (c["t1"] - c["t0"]) + shift]
    marks = [(name, v) for name, v in zip(MARKS, values) if v is not None]
    if len(marks) < 2 or marks[0][0] != "start" or marks[-1][0] != "exit":
        return None
    return {f"{a} to {b}": vb - va for (a, va), (b, vb) in zip(marks, marks[1:])}


def spans(records: list[dict]) -> dict[str, float]:
    """The kernel on the global timer, over CTAs (ns): its span (first start to last exit), the
    spread of the starts, and the last exit after the median one (the tail)."""
    slots = [r for r in records if r["slot"] == 0]
    t0 = [r["t0"] for r in slots]
    t1 = [r["t1"] for r in records]
    ends = sorted(max(r["t1"] for r in records if r["block"] == s["block"]) for s in slots)
    return {"span": max(t1) - min(t0), "start_spread": max(t0) - min(t0),
            "tail_after_median_end": ends[-1] - statistics.median(ends)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--key", default="smallm:n64s")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--splits", type=int, default=1, help="K split that many ways (0: the entry's deal)")
    probe.add_flush_arg(ap)
    ap.add_argument("--json")
    ap.add_argument("shapes", nargs="*", default=["64", "256", "512"])
    args = ap.parse_args()
    fam = smallm.parse_build(args.key)
    splits = args.splits or None
    dtype = getattr(torch, args.dtype)
    b = bench.Bench()
    b.flush_l2 = probe.flushes(b)[args.flush]
    sms = cuda_device.num_sms(torch.cuda.current_device())
    rows = []
    for shape in args.shapes:
        M, N, K = (int(shape),) * 3 if "x" not in shape else map(int, shape.split("x"))
        d = fam.plan_deal(M, N, K, sms, splits=splits)
        blocks, cap = d.grid[0], 8 * d.units * max(1, d.rounds) + 64
        a, bb = b.inputs(M, N, K, dtype)
        ref = a.float() @ bb.float().T
        buf = torch.zeros(blocks * trace.SLOTS_PER_CTA * (trace.HEADER_WORDS + 2 * cap), dtype=torch.int64,
                          device="cuda")
        traced = runner.plan_smallm(fam, a, bb, splits=splits, trace_buffer=buf, trace_events=cap)
        plain = runner.plan_smallm(fam, a, bb, splits=splits)
        for p in (traced, plain):
            p.out.fill_(float("nan"))
            p()
        torch.cuda.synchronize()
        errs = [float((p.out.float() - ref).abs().max() / ref.abs().max()) for p in (traced, plain)]
        with Sampler(b.nvml) as smp:
            t_traced, t_plain = b.time_interleaved([traced, plain], args.reps)
        buf.zero_()
        b.flush_l2()
        traced()
        torch.cuda.synchronize()
        words = buf.cpu().tolist()
        stride = trace.HEADER_WORDS + 2 * cap
        per_cta = []
        records = trace.decode(words, blocks, cap)
        for blk in range(blocks):
            slots = {r["slot"]: r for r in records if r["block"] == blk}
            clk0 = {s: words[(blk * trace.SLOTS_PER_CTA + s) * stride + 1] for s in slots}
            ph = cta_phases(slots, clk0)
            if ph is not None:
                per_cta.append(ph)
        names = list(dict.fromkeys(name for ph in per_cta for name in ph))
        med = {name: statistics.median(ph[name] for ph in per_cta if name in ph) for name in names}
        span = spans(records)
        row = {"key": args.key, "shape": [M, N, K], "dtype": args.dtype, "ctas": blocks, "k_tiles": d.units,
               "ctas_decoded": len(per_cta), "rel_err": errs, "us_plain": 1e3 * statistics.median(t_plain),
               "us_traced": 1e3 * statistics.median(t_traced), "phase_ns_median": med, "span_ns": span,
               "flush": args.flush, "gpu": smp.summary()}
        rows.append(row)
        print(f"{args.key} {M}x{N}x{K} {args.dtype}: {blocks} CTAs of {d.units} k-tiles, plain {row['us_plain']:.2f} "
              f"us, traced {row['us_traced']:.2f} us, rel err {max(errs):.1e}; {len(per_cta)} CTAs decoded", flush=True)
        for name in names:
            print(f"    {name:28s} {med[name]:8.0f} ns", flush=True)
        if med:
            print(f"    {'sum':28s} {sum(med.values()):8.0f} ns", flush=True)
        print("    " + "  ".join(f"{k} {v:.0f} ns" for k, v in span.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"probe": "smallsq trace_phases", "commit": bench.git_commit(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
