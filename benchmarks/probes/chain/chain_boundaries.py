"""The decode chain's boundaries, kernel by kernel (perf-notes items 118-119): the two-card fit put
our stream 10-20 % ahead of cuBLAS's and our fixed cost at 7-8.5 us a GEMM against its ~1-6.5.
Here one card says it directly. Each form's graph (measure/decode_chain.py: `ours`, `cublas`) is
replayed after an L2 flush under the torch profiler (CUPTI's kernel records: start and end of
every kernel); each GEMM's kernels (a second pass, ours or cuBLAS's split-K reduction, goes with
the GEMM before it) give its marginal time: its last kernel's end after the GEMM before's (the
first GEMM's after the flush's end), against its bytes at the copy rate measured in the same
process. A programmatically launched kernel starts while the one before runs, so a GEMM's span
(its first start to its last end) overlaps the one before; the marginal times add up to the
chain. Medians over the replays. The outputs are checked against fp32 first (Chain.check).
Usage: PYTHONPATH=src python benchmarks/probes/chain/chain_boundaries.py [--rows 1,8,16]
       [--dtype bfloat16] [--reps 30] [--flush zero|read] [--json F]"""
import argparse
import json
import statistics

import torch
from torch.profiler import ProfilerActivity, profile

from gemm_ladder.measure import bench, decode_chain, probe
from gemm_ladder.measure.bandwidth import measure_copy

FORMS = ("ours", "cublas")
# a second pass: ours (gemm_smallm_reduce), cuBLAS's (cublasLt::splitKreduce_kernel); cuBLAS's split-K
# GEMM kernels' names hold "splitK" too, so that alone marks none
SECOND_PASS = ("reduce",)


def flush_kernels(b: bench.Bench) -> set[str]:
    """The names of the L2 flush's kernels: the markers between replays."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        b.flush_l2()
        torch.cuda.synchronize()
    return {e.name for e in prof.events() if e.device_type.name == "CUDA"}


def replays(b: bench.Bench, graph, reps: int, flush: set[str]) -> list[list[tuple[float, float, str]]]:
    """Each replay's kernels (start, end in us, name), in start order, after its flush's last
    kernel (the first entry: that kernel, whose end is the replay's origin)."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            b.flush_l2()
            graph.replay()
        torch.cuda.synchronize()
    ev = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                if e.device_type.name == "CUDA" and not e.name.startswith(("Memset", "Memcpy")))
    out, cur = [], None
    for s, e, name in ev:
        if name in flush:
            if cur and len(cur) > 1:  # a replay's kernels after a flush (not a flush's first kernel)
                out.append(cur)
            cur = [(s, e, name)]
        elif cur is not None:
            cur.append((s, e, name))
    if cur and len(cur) > 1:
        out.append(cur)
    return out


def gemms_of(kernels: list[tuple[float, float, str]]) -> list[list[tuple[float, float, str]]]:
    """A replay's kernels grouped per GEMM: a second pass joins the GEMM it sums."""
    groups = []
    for k in kernels:
        if groups and any(tag in k[2] for tag in SECOND_PASS):
            groups[-1].append(k)
        else:
            groups.append([k])
    return groups


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="1,8,16")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json")
    probe.add_flush_arg(ap)
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    b = bench.Bench()
    copy_tbs = measure_copy(b)["hbm_copy_gbs"] / 1e3  # after the suite's flush, as every record's
    b.flush_l2 = probe.flushes(b)[args.flush]
    flush = flush_kernels(b)
    out = {"probe": "chain boundaries", "commit": bench.git_commit(), "dtype": args.dtype, "flush": args.flush,
           "copy_tbs": copy_tbs, "rows": []}
    print(f"copy rate {copy_tbs:.2f} TB/s (read + written)", flush=True)
    for M in map(int, args.rows.split(",")):
        chain = decode_chain.Chain(b, M, dtype)
        for form in FORMS:
            ok, rel, err = chain.check(form, args.dtype)
            seen = replays(b, chain.graphs[form], args.reps, flush)
            origin = [r[0][1] for r in seen]  # each replay's flush's end
            runs = [(t0, gemms_of(r[1:])) for t0, r in zip(origin, seen)]
            runs = [(t0, r) for t0, r in runs if len(r) == len(decode_chain.GEMMS)]
            if not runs:
                print(f"M={M} {form}: no replay split into {len(decode_chain.GEMMS)} GEMMs; kernels seen: "
                      f"{sorted({k[2][:60] for r in seen for k in r[1:]})}", flush=True)
                continue
            per = []
            for i, (name, N, K, _) in enumerate(decode_chain.GEMMS):
                gbytes = 2 * (M * K + N * K + M * N)
                before = [r[i - 1][-1][1] if i else t0 for t0, r in runs]  # the GEMM before's end, or the flush's
                marginal = statistics.median(r[i][-1][1] - t for t, (_, r) in zip(before, runs))
                start = statistics.median(r[i][0][0] - t for t, (_, r) in zip(before, runs))
                stream = gbytes / copy_tbs / 1e6
                per.append({"gemm": name, "kernels": sorted({k[2][:80] for _, r in runs for k in r[i]}),
                            "marginal_us": marginal, "start_after_previous_end_us": start,
                            "at_copy_rate_us": stream, "beyond_copy_rate_us": marginal - stream})
            total = statistics.median(r[-1][-1][1] - t0 for t0, r in runs)
            row = {"M": M, "form": form, "correct": ok, "rel_err": rel, "error": err, "replays": len(runs),
                   "chain_after_flush_us": total, "gemms": per}
            out["rows"].append(row)
            print(f"M={M} {form:6} correct {ok} ({rel:.1e}); {len(runs)} replays; chain {total:.1f} us after the "
                  f"flush", flush=True)
            for g in per:
                print(f"    {g['gemm']:8} marginal {g['marginal_us']:6.1f} us  starts after the previous end "
                      f"{g['start_after_previous_end_us']:+6.2f}  at the copy rate {g['at_copy_rate_us']:6.1f}  "
                      f"beyond it {g['beyond_copy_rate_us']:+6.1f}  {', '.join(g['kernels'])[:100]}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
