"""Where a small square's kernel time goes, CTA by CTA (perf-notes items 111 and 118): the small-M
entry's GL_TRACE build on whole tiles, its producer's and consumer's records put on one clock
(the two slots of a CTA share its SM's clock64, so the headers' clk0 align them exactly), and the
median over CTAs of each phase: the producer's start to its first load, the load's flight to the
consumer finding the stage full, the k-loop, the last group's retirement (the epilogue's wait for
every group: the k-tiles' records retire earlier groups), the staging and the TMA
store's read, and the consumer's end. The traced and the plain build are timed in turns (the
tracer's cost), and both outputs are checked against fp32.
Usage: PYTHONPATH=src python benchmarks/probes/smallsq/trace_phases.py [--key smallm:n64s]
       [--dtype float16] [--json F] [N or MxNxK ...]
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
from gemm_ladder.measure import bench
from gemm_ladder.measure.gpuinfo import Sampler

EV = trace.EVENTS
PHASES = ("start to first load", "first load to data", "data to last issue", "last issue to retired",
          "retired to staging", "staging to store read", "store read to epilogue end", "epilogue end to exit")


def cta_phases(slots: dict[int, dict], clk0: dict[int, int]) -> dict[str, float] | None:
    """One CTA's phases in ns, from its producer's (slot 0) and first consumer's (slot 1) records."""
    p, c = slots.get(0), slots.get(1)
    if p is None or c is None:
        return None
    shift = (clk0[1] - clk0[0]) * c["ns_per_clock"]  # the consumer's times on the producer's axis
    pe = [(t, k) for t, k, *_ in p["events"]]
    ce = [(t + shift, k) for t, k, *_ in c["events"]]

    def first(evs, kind):
        return min((t for t, k in evs if k == kind), default=None)

    def last(evs, kind):
        return max((t for t, k in evs if k == kind), default=None)
    marks = [0.0, first(pe, EV["EV_LOAD_ISSUE"]), first(ce, EV["EV_WAIT_END"]), last(ce, EV["EV_MMA_ISSUE"]),
             last(ce, EV["EV_MMA_DONE"]), first(ce, EV["EV_EPI_BEGIN"]), first(ce, EV["EV_STORE_DONE"]),
             first(ce, EV["EV_EPI_END"]), (c["t1"] - c["t0"]) + shift]
    if any(m is None for m in marks):
        return None
    return {name: marks[i + 1] - marks[i] for i, name in enumerate(PHASES)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--key", default="smallm:n64s")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json")
    ap.add_argument("shapes", nargs="*", default=["64", "256", "512"])
    args = ap.parse_args()
    fam = smallm.FAMILIES[args.key]
    dtype = getattr(torch, args.dtype)
    b = bench.Bench()
    sms = cuda_device.num_sms(torch.cuda.current_device())
    rows = []
    for shape in args.shapes:
        M, N, K = (int(shape),) * 3 if "x" not in shape else map(int, shape.split("x"))
        d = fam.plan_deal(M, N, K, sms, splits=1)
        blocks, cap = d.grid[0], 8 * d.units + 64
        a, bb = b.inputs(M, N, K, dtype)
        ref = a.float() @ bb.float().T
        buf = torch.zeros(blocks * trace.SLOTS_PER_CTA * (trace.HEADER_WORDS + 2 * cap), dtype=torch.int64,
                          device="cuda")
        traced = runner.plan_smallm(fam, a, bb, splits=1, trace_buffer=buf, trace_events=cap)
        plain = runner.plan_smallm(fam, a, bb, splits=1)
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
        med = {name: statistics.median(ph[name] for ph in per_cta) for name in PHASES} if per_cta else {}
        row = {"key": args.key, "shape": [M, N, K], "dtype": args.dtype, "ctas": blocks, "k_tiles": d.units,
               "ctas_decoded": len(per_cta), "rel_err": errs, "us_plain": 1e3 * statistics.median(t_plain),
               "us_traced": 1e3 * statistics.median(t_traced), "phase_ns_median": med, "gpu": smp.summary()}
        rows.append(row)
        print(f"{args.key} {M}x{N}x{K} {args.dtype}: {blocks} CTAs of {d.units} k-tiles, plain {row['us_plain']:.2f} "
              f"us, traced {row['us_traced']:.2f} us, rel err {max(errs):.1e}; {len(per_cta)} CTAs decoded", flush=True)
        for name in PHASES:
            if name in med:
                print(f"    {name:28s} {med[name]:8.0f} ns", flush=True)
        if med:
            print(f"    {'sum':28s} {sum(med.values()):8.0f} ns", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"probe": "smallsq trace_phases", "commit": bench.git_commit(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
