"""Probe: where a small-M family kernel's k-tile period goes (perf-notes item 48's question).
Runs the GL_TRACE build of each entry once (L2 flushed first) and reports, over the CTAs, the
medians per k-tile of: the period (a role's first to last event / its k-tiles), the producer's
wait on `mma2tma` (ring full: the consumers set the pace), the consumer's wait on `tma2mma`
(data not there: the loads set it), the wgmma group's issue -> retirement; and the ring's
refill round trip (round_trip: load issue -> landed, release -> producer wake -> issue).

    PYTHONPATH=src python benchmarks/probes/midm/trace_family.py \
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
def round_trip(recs, depth: int) -> dict:
    """The ring's refill round trip, per CTA on one time axis (each slot's events are ns after
    its own globaltimer anchor t0), medians over k-tiles k >= depth and CTAs: the load's
    issue -> the consumer's wait on it ending (exact where it waited: the landing), the
    consumer's release of k-tile k -> the producer's wait for k + depth ending, and that
    wake -> the load's issue. (The consumer's release is its leader warp's; the stage frees
    when all four warps have arrived.)"""
    by_block = {}
    for r in recs:
        by_block.setdefault(r["block"], {})[r["slot"]] = r
    lat, rel_wake, wake_issue = [], [], []
    for slots in by_block.values():
        if 0 not in slots or 1 not in slots:
            continue
        base = min(slots[0]["t0"], slots[1]["t0"])
        def events(r):
            off = r["t0"] - base
            return [(t + off, trace.EVENT_NAMES.get(kind, "?"), trace.BARRIERS.get(bar), k)
                    for t, kind, bar, _, _, k, _ in sorted(r["events"])]
        issue, wake, ready, waited, release = {}, {}, {}, set(), {}
        for t, n, b, k in events(slots[0]):
            if n == "EV_LOAD_ISSUE":
                issue[k] = t
            elif n == "EV_WAIT_END" and b == "mma2tma":
                wake[k] = t
        begin = {}
        for t, n, b, k in events(slots[1]):
            if n == "EV_WAIT_BEGIN" and b == "tma2mma":
                begin[k] = t
            elif n == "EV_WAIT_END" and b == "tma2mma":
                ready[k] = t
                if t - begin.get(k, t) > 20.0:
                    waited.add(k)
            elif n == "EV_ARRIVE" and b == "mma2tma":
                release[k] = t
        lat += [ready[k] - issue[k] for k in waited if k in issue and k >= depth]
        rel_wake += [wake[k + depth] - release[k] for k in release if k + depth in wake]
        wake_issue += [issue[k] - wake[k] for k in wake if k in issue and k >= depth]
    med = lambda v: statistics.median(v) if v else None
    return {"load_latency": med(lat), "release_to_wake": med(rel_wake), "wake_to_issue": med(wake_issue),
            "waited_k_tiles": len(lat)}


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
    rt = round_trip(recs, fam.depth)
    med["ring"] = rt
    row = dict(case=case, ok=ok, ctas=deal.ctas, units=deal.units, planes=deal.planes,
               us_plain=statistics.median(t_plain) * 1e3, us_traced=statistics.median(t_traced) * 1e3, **{
                   f"{role}_{k}_ns": v for role, d in med.items() for k, v in d.items()})
    out_rows.append(row)
    print(f"{case} [c{deal.ctas} u{deal.units} p{deal.planes}] {'ok' if ok else 'WRONG'} plain {row['us_plain']:.1f} us"
          f" traced {row['us_traced']:.1f}: per k-tile (ns, median over CTAs) producer period "
          f"{med['producer']['period']:.0f} wait-empty {med['producer']['wait_empty']:.0f}; consumer period "
          f"{med['consumer']['period']:.0f} wait-full {med['consumer']['wait_full']:.0f} "
          f"mma issue->done {med['consumer']['mma'] or 0:.0f}; ring: load issue->landed (where the consumer "
          f"waited) {rt['load_latency'] or 0:.0f}, release->producer wake {rt['release_to_wake'] or 0:.0f}, "
          f"wake->issue {rt['wake_to_issue'] or 0:.0f}", flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), rows=out_rows), open(args.json, "w"), indent=1)
