"""128-wide k-tiles against 64-wide (perf-notes items 122-123): each small-M pick beside its twin at
the other k-tile width in the same ring bytes (`smallm.k128_twin` of a 64-wide entry: half the
stages, each two 64-wide k-tiles under one full barrier and one release; `smallm.k64_twin` of a
128-wide one) and cuBLAS, interleaved in one process, each call after an L2 flush, medians; clock
and power sampled during the timed loop. The twin runs the pick's deal where one exists in its
k-tiles (the same CTAs and pieces: `same_deal`), and, where its own rule deals otherwise, that
deal too (`twin_rule`); a 128-wide twin also on the deepest ring that fits (`twin_deep`, on the
same deal): with one group in flight a consumer holds ~1.5 stages, so stages of twice the bytes
leave fewer bytes in flight in the same ring. Outputs are poisoned, checked against fp32 and
repeated bit for bit (measure/probe.py's checked_plans); the twin's bits are compared with the
pick's (equal where both run whole tiles in one warpgroup and K ends in the second half of a
128-wide k-tile: the same MMAs in the same order). --also NAME=FIELDS adds the pick with fields
changed (`smallm.parse_build`, e.g. d8=depth=8), --also NAME=@SPEC any build (e.g.
old=@n64s+bk=64+depth=6+max_kt=8), each on its own rule's deal. With --check each build runs
twice, untimed (the run for compute-sanitizer).
Usage: PYTHONPATH=src python benchmarks/probes/smallsq/k128_ab.py [--dtypes float16,bfloat16] [--reps 60]
       [--passes 2] [--also NAME=FIELD=V[+FIELD=V]] [--check] [--json F] [N or MxNxK ...]
       PYTHONPATH=src python benchmarks/probes/smallsq/k128_ab.py --report F   (no GPU needed)"""
import argparse
import json
import statistics

from gemm_ladder.families import smallm

# the small squares (and the odd 1000^3), the long-K rows, decode and prefill rows of the suite
SHAPES = ["256", "320", "384", "512", "640", "768", "896", "1000", "1024", "256x1024x4096", "128x512x16384",
          "128x1024x8192", "256x512x8192", "64x2048x8192", "16x2048x16384", "1x4096x4096", "16x4096x4096",
          "64x4096x4096", "128x4096x4096"]


def same_deal(fam: smallm.SmallM, twin: smallm.SmallM, M: int, N: int, K: int, sms: int) -> dict | None:
    """plan_smallm's arguments that give `twin` the deal `fam`'s rule gives (the same CTAs, each
    tile cut at the same k positions), or None where the twin's k-tiles cannot cut it so."""
    d = fam.deal(M, N, K, sms)
    if fam.whole_tiles or d.fixup:
        return None  # whole tiles (the twin deals them alike) or a fixup wave: the twin's own rule
    kt = fam.k_tiles(K)
    if d.units == kt:
        args = {"splits": 1}
    elif d.dsmem:
        args = {"splits": kt // d.units}  # the same pieces per tile, summed in a cluster
    elif fam.bk > twin.bk:
        args = {"units": d.units * fam.bk // twin.bk}  # runs of the same k-columns
    elif d.units % 2 == 0 and kt % 2 == 0:
        args = {"units": d.units // 2}
    else:
        return None
    t = twin.plan_deal(M, N, K, sms, **args)
    same = (t.ctas, t.dsmem, t.cluster, t.planes, t.units * twin.bk) == (d.ctas, d.dsmem, d.cluster, d.planes,
                                                                         d.units * fam.bk)
    return args if same else None


def deepest(fam: smallm.SmallM) -> smallm.SmallM | None:
    """`fam` on the deepest ring that fits a block's shared memory, or None if it is that already."""
    depth = fam.depth
    while not smallm.with_fields(fam, "probe", depth=depth + 1).smem_problem():
        depth += 1
    return smallm.with_fields(fam, f"d{depth}", depth=depth) if depth > fam.depth else None


def report(record: dict) -> str:
    """A record's rows as one line per shape and dtype: each build's time as the median over the
    passes, over the pick's (< 1: faster than the pick), then the geomean of each build's ratio
    by group (the small squares, the long-K rows, the rest)."""
    by_row: dict[tuple, dict[str, list[float]]] = {}
    for r in record["rows"]:
        times = by_row.setdefault((tuple(r["shape"]), r["dtype"], r["pick"]), {})
        for name, us in r["us"].items():
            times.setdefault(name, []).append(us)
    widths = {(tuple(r["shape"]), r["dtype"], r["pick"]): r.get("pick_bk", 64) for r in record["rows"]}
    lines, groups = [], {}
    for (shape, dt, key), times in by_row.items():
        twin_name = f"twin k{192 - widths[shape, dt, key]}"  # the other width: 64 or 128
        med = {n: statistics.median(v) for n, v in times.items()}
        M, N, K = shape
        group = "small squares" if M == N == K else "long K" if M <= 256 and N <= 2048 and K >= 4096 else "other"
        parts = [f"{M}x{N}x{K} {dt[:4]} {key}: pick {med['pick']:.2f} us, cuBLAS {med['cublas']:.2f}"]
        for n, us in med.items():
            if n not in ("pick", "cublas"):
                n = twin_name if n == "twin" else n
                parts.append(f"{n} {us / med['pick']:.3f}")
                groups.setdefault((group, dt, n), []).append(us / med["pick"])
        lines.append(", ".join(parts))
    for (group, dt, n), ratios in sorted(groups.items()):
        lines.append(f"{group} {dt}: {n} / pick geomean {statistics.geometric_mean(ratios):.3f} over {len(ratios)}")
    return "\n".join(lines)


def main() -> None:
    import torch

    from gemm_ladder.library import runner
    from gemm_ladder.library.select import pick
    from gemm_ladder.measure import bench, probe
    from gemm_ladder.measure.gpuinfo import Sampler

    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--also", action="append", default=[], metavar="NAME=FIELDS",
                    help="the pick with fields changed too, e.g. d8=depth=8, or NAME=@SPEC any build, e.g. "
                         "old=@n64s+bk=64+depth=6+max_kt=8")
    ap.add_argument("--check", action="store_true", help="run and check each build twice, untimed")
    ap.add_argument("--json")
    ap.add_argument("--report", metavar="RECORD", help="print a record's table (medians over passes) and exit")
    ap.add_argument("shapes", nargs="*", default=SHAPES)
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            print(report(json.load(f)))
        return
    b = bench.Bench()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for pas in range(1 if args.check else args.passes):
        for dt in args.dtypes.split(","):
            dtype = getattr(torch, dt)
            for shape in args.shapes:
                M, N, K = (int(shape),) * 3 if "x" not in shape else map(int, shape.split("x"))
                key = pick(M, N, K, dt)
                if key not in smallm.FAMILIES:
                    print(f"{M}x{N}x{K} {dt}: the pick {key} is not a small-M entry", flush=True)
                    continue
                fam = smallm.FAMILIES[key]
                twin = smallm.k128_twin(fam) if fam.bk == 64 else smallm.k64_twin(fam)
                if twin.shape_problems(M, N, K):
                    print(f"{M}x{N}x{K} {dt}: {twin.key} does not take it: {twin.shape_problems(M, N, K)}", flush=True)
                    continue
                forced = same_deal(fam, twin, M, N, K, sms)
                builds = {"pick": (fam, {}), "twin": (twin, forced or {})}
                if forced is not None and twin.plan_deal(M, N, K, sms, **forced) != twin.deal(M, N, K, sms):
                    builds["twin_rule"] = (twin, {})
                # (a short K's ring stays short)
                if twin.bk == 128 and (deep := deepest(twin)) is not None and not twin.max_kt:
                    builds["twin_deep"] = (deep, forced or {})
                for spec in args.also:
                    name, _, fields = spec.partition("=")
                    other = smallm.parse_build(fields[1:] if fields.startswith("@") else f"{key}+{fields}")
                    if not other.shape_problems(M, N, K) and not other.smem_problem():
                        builds[name] = (other, {})
                a, bb = b.inputs(M, N, K, dtype)
                head = f"{M}x{N}x{K} {dt}: {key}, twin on {'the same deal' if forced else 'its own deal'}"
                # poisoned, checked against fp32, repeated bit for bit (measure/probe.py)
                checked = probe.checked_plans(builds, a, bb, lambda w, x, y, out: runner.plan_smallm(
                    w[0], x, y, out, **w[1]), head, repeats=1 if args.check else 2)
                plans = {name: p for name, p, *_ in checked}
                if "pick" not in plans or "twin" not in plans:
                    continue  # printed by checked_plans
                same = bool(torch.equal(plans["pick"].out, plans["twin"].out))
                checks = {name: (ok, repeat) for name, _, ok, repeat, _ in checked}
                if args.check:
                    print(f"{head}: correct and repeatable {checks}, identical {same}", flush=True)
                    continue
                c = torch.empty(M, N, dtype=dtype, device="cuda")
                calls = list(plans.values()) + [lambda: torch.matmul(a, bb.T, out=c)]
                b.time_interleaved(calls, 3)
                with Sampler(b.nvml) as smp:
                    t = b.time_interleaved(calls, args.reps)
                us = dict(zip(list(plans) + ["cublas"], (1e3 * statistics.median(x) for x in t)))
                row = {"pass": pas, "shape": [M, N, K], "dtype": dt, "pick": key, "pick_bk": fam.bk, "twin": twin.key,
                       "same_deal": forced is not None, "us": us, "pick_over_twin": us["pick"] / us["twin"],
                       "pick_x_cublas": us["cublas"] / us["pick"], "twin_x_cublas": us["cublas"] / us["twin"],
                       "identical": same, "correct_repeatable": checks,
                       "deals": {n: str(f.plan_deal(M, N, K, sms, **kw)) for n, (f, kw) in builds.items()},
                       "gpu": smp.summary()}
                rows.append(row)
                extra = "".join(f"  {n} {us[n]:7.2f}" for n in list(builds)[2:])
                flags = "" if all(ok and rep for ok, rep in checks.values()) else f"CHECKS {checks}  "
                print(f"pass {pas} {head}: pick {us['pick']:7.2f} us  k{twin.bk} {us['twin']:7.2f} "
                      f"({us['pick'] / us['twin']:.3f}x){extra}  cuBLAS {us['cublas']:7.2f} (pick "
                      f"x{us['cublas'] / us['pick']:.3f}, k{twin.bk} x{us['cublas'] / us['twin']:.3f})  "
                      f"identical {same}  "
                      f"{flags}{smp.summary()}", flush=True)
    for dt in args.dtypes.split(","):
        r = [x["pick_over_twin"] for x in rows if x["dtype"] == dt]
        if r:
            print(f"{dt}: pick / twin geomean {statistics.geometric_mean(r):.3f} over {len(r)} rows "
                  f"(> 1: the twin faster)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"probe": "smallsq k128_ab", "commit": bench.git_commit(), "reps": args.reps, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
