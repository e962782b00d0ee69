"""Probe: where a small-M family kernel's k-tile period goes (perf-notes item 48's question).
Runs the GL_TRACE build of each entry once (L2 flushed first) and reports, over the CTAs, the
medians per k-tile of: the period (a role's first to last event / its k-tiles), the producer's
wait on `mma2tma` (ring full: the consumers set the pace), the consumer's wait on `tma2mma`
(data not there: the loads set it), the wgmma group's issue -> retirement.

    PYTHONPATH=src python benchmarks/results/experiments/midm/trace_family.py \
        --cases smallm:n64:64x4096x4096,smallm:n32:16x4096x4096 [--json out.json]
"""
import argparse, json, statistics
import torch
from gemm_ladder.choreography import trace
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch, smallm

ap = argparse.ArgumentParser()
ap.add_argument("--cases", default="smallm:n64:64x4096x4096,smallm:n32:16x4096x4096,smallm:n64:128x4096x4096,"
                "smallm:n128:16x11008x4096,smallm:n128:64x4096x4096")
ap.add_argument("--json", default=None)
args = ap.parse_args()
bench = Bench(0)
sms = launch.num_sms(0)
out_rows = []
for case in args.cases.split(","):
    *key, shape = case.split(":")
    fam = smallm.FAMILIES[":".join(key)]
    M, N, K = map(int, shape.split("x"))
    deal = fam.deal(M, N, K, sms)
    cap = 6 * deal.units + 64
    words = deal.ctas * trace.SLOTS_PER_CTA * (trace.HEADER_WORDS + 2 * cap)
    a, b = bench.inputs(M, N, K, torch.float16)
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    buf = torch.zeros(words, dtype=torch.int64, device="cuda")
    traced = launch.plan(fam, a, b, out, trace_buffer=buf, trace_events=cap)
    traced()
    torch.cuda.synchronize()
    ok = bool(check_product(out, a, b)[0])
    plain = launch.plan(fam, a, b, torch.empty_like(out))
    t_plain, t_traced = bench.time_interleaved([plain, traced], 20)
    buf.zero_()
    bench.flush_l2()
    traced()
    torch.cuda.synchronize()
    recs = trace.decode(buf.cpu().tolist(), deal.ctas, cap)
    stats = {"producer": {"period": [], "wait_empty": []}, "consumer": {"period": [], "wait_full": [], "mma": []}}
    for r in recs:
        evs = sorted(r["events"])
        names = [(t, trace.EVENT_NAMES.get(kind, "?"), trace.BARRIERS.get(bar), k) for t, kind, bar, _, _, k, _ in evs]
        role = "producer" if r["slot"] == 0 else "consumer"
        count = sum(1 for _, n, _, _ in names if n == ("EV_LOAD_ISSUE" if role == "producer" else "EV_MMA_ISSUE"))
        if not count:
            continue
        waits, open_w, issue = {}, None, {}
        mma = []
        for t, n, bname, k in names:
            if n == "EV_WAIT_BEGIN":
                open_w = (t, bname)
            elif n == "EV_WAIT_END" and open_w:
                waits[open_w[1]] = waits.get(open_w[1], 0.0) + t - open_w[0]
                open_w = None
            elif n == "EV_MMA_ISSUE":
                issue[k] = t
            elif n == "EV_MMA_DONE" and k in issue:
                mma.append(t - issue.pop(k))
        s = stats[role]
        s["period"].append((names[-1][0] - names[0][0]) / count)
        if role == "producer":
            s["wait_empty"].append(waits.get("mma2tma", 0.0) / count)
        else:
            s["wait_full"].append(waits.get("tma2mma", 0.0) / count)
            if mma:
                s["mma"].append(statistics.median(mma))
    med = {role: {k: (statistics.median(v) if v else None) for k, v in d.items()} for role, d in stats.items()}
    row = dict(case=case, ok=ok, ctas=deal.ctas, units=deal.units, planes=deal.planes,
               us_plain=statistics.median(t_plain) * 1e3, us_traced=statistics.median(t_traced) * 1e3, **{
                   f"{role}_{k}_ns": v for role, d in med.items() for k, v in d.items()})
    out_rows.append(row)
    print(f"{case} [c{deal.ctas} u{deal.units} p{deal.planes}] {'ok' if ok else 'WRONG'} plain {row['us_plain']:.1f} us"
          f" traced {row['us_traced']:.1f}: per k-tile (ns, median over CTAs) producer period "
          f"{med['producer']['period']:.0f} wait-empty {med['producer']['wait_empty']:.0f}; consumer period "
          f"{med['consumer']['period']:.0f} wait-full {med['consumer']['wait_full']:.0f} "
          f"mma issue->done {med['consumer']['mma'] or 0:.0f}", flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), rows=out_rows), open(args.json, "w"), indent=1)
