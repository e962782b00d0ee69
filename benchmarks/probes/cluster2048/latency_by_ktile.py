"""Per k-tile load latency in traces of step 9 at one tile per CTA: for each k-tile, the median
over CTAs of (consumer's full barrier completes) - (producer issues the load), the k-tiles whose
median exceeds 1.6 us, and how many CTAs' consumers waited more than 0.8 us for a stage.

    python benchmarks/probes/cluster2048/latency_by_ktile.py RECORDS.json.gz [...]
"""
import collections, gzip, json, statistics, sys

EV_WAIT_BEGIN, EV_WAIT_END, EV_LOAD_ISSUE, BAR_TMA2MMA = 1, 2, 3, 2
for path in sys.argv[1:]:
    d = json.load(gzip.open(path))
    issue, land, waits = {}, {}, []
    for r in d["records"]:
        b = r["block"]
        if r["role"] == "producer":
            for e in r["events"]:
                if e[1] == EV_LOAD_ISSUE:
                    issue[(b, e[5])] = e[0]
        if r["role"] == "consumer" and r["slot"] == 1:
            begin = None
            for e in r["events"]:
                if e[1] == EV_WAIT_BEGIN and e[2] == BAR_TMA2MMA:
                    begin = e[0]
                if e[1] == EV_WAIT_END and e[2] == BAR_TMA2MMA:
                    land[(b, e[5])] = e[0]
                    if begin is not None and e[5] > 0:
                        waits.append(e[0] - begin)
                    begin = None
    per_k = collections.defaultdict(list)
    for key, t in land.items():
        if key in issue:
            per_k[key[1]].append(t - issue[key])
    lat = {k: statistics.median(v) for k, v in sorted(per_k.items())}
    steady = statistics.median([v for k, v in lat.items() if k >= 4])
    print(f"{path}: step {d['step']}, {d['ctas']} CTAs, kernel {d['ms_plain'] * 1e3:.2f} us untraced; "
          f"steady latency {steady:.0f} ns; k-tiles over 1.6 us: {[k for k, v in lat.items() if k >= 4 and v > 1600]}; "
          f"consumer waits over 0.8 us: {sum(w > 800 for w in waits)} of {len(waits)}")
    print("  " + " ".join(f"{k}:{v:.0f}" for k, v in lat.items()))
