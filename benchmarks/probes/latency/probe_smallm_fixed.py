"""Probe: the small-M kernel's fixed cost at small squares. Ad-hoc entries of smallm:n128 (ring
depth, probe switches GL_EXP_*) timed with their kernels' device time (CUPTI) beside step 5 and
cuBLAS, at K = 64 (one k-tile: the fixed cost) and at the squares. Entries with GL_EXP_NO_STORE
leave C unwritten (an ablation: timed, not checked).

    PYTHONPATH=src python benchmarks/probes/latency/probe_smallm_fixed.py [--json out.json]
"""
import argparse, dataclasses, json, statistics
import torch
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import launch, smallm
import probe_latency_lib as lat  # beside this script

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="256x256x64,256x256x256,512x512x512,1024x1024x64,1024x1024x1024")
ap.add_argument("--reps", type=int, default=60)
ap.add_argument("--json", default=None)
args = ap.parse_args()


@dataclasses.dataclass(frozen=True)
class Exp(smallm.SmallM):
    extra: tuple = ()

    def kernel_defines(self):
        return {**super().kernel_defines(), **dict(self.extra)}


def entry(name, extra=(), **fields):
    base = smallm.FAMILIES["smallm:n128"]
    vals = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    vals.update(fields, key=f"smallm:n128:{name}", variant=f"n128{name}")
    return Exp(**vals, extra=tuple(extra))


ENTRIES = {
    "n128": entry("base"),
    "n128:d4": entry("d4", depth=4),
    "n128:d2": entry("d2", depth=2),
    "n128:early": entry("early", [("GL_EXP_EARLY_PREFETCH", 1)]),
    "n128:nostore": entry("nostore", [("GL_EXP_NO_STORE", 1)]),
}
bench = Bench(0)
rows = []
for spec in args.shapes.split(","):
    M, N, K = map(int, spec.split("x"))
    a, b = bench.inputs(M, N, K, torch.float16)
    names, fns = [], []
    for name, fam in ENTRIES.items():
        out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
        p = fam.plan(a, b, out)
        p(); torch.cuda.synchronize()
        ok = None if "nostore" in name else bool(check_product(out, a, b)[0])
        names.append((name, ok)); fns.append(p)
    out5 = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    p5 = launch.plan("5", a, b, out5); p5(); torch.cuda.synchronize()
    names.append(("5", bool(check_product(out5, a, b)[0]))); fns.append(p5)
    c = torch.empty((M, N), dtype=torch.float16, device="cuda")
    cub = lambda: torch.matmul(a, b.T, out=c)  # noqa: E731
    cub(); names.append(("cublas", True)); fns.append(cub)
    times = bench.time_interleaved(fns, args.reps)
    for (name, ok), t, fn in zip(names, times, fns):
        pr = lat.profiled(bench, fn, 20)
        ev = statistics.median(t) * 1e3
        rows.append(dict(M=M, N=N, K=K, kernel=name, ok=ok, event_us=ev, **pr))
        print(f"{spec:16} {name:14} ok={ok!s:5} event {ev:6.2f}  dur {pr['dur_us']:6.2f}  gap {pr['gap_us']:5.2f}", flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
