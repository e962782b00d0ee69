"""Check: ad-hoc small-M family entries (probe_midm.py's --adhoc syntax) as debug builds
(bounded mbarrier waits: a deadlock raises, naming role, barrier, stage and phase) on poisoned
outputs against fp32, before any timing.

    PYTHONPATH=src python benchmarks/probes/midm/check_adhoc.py --adhoc n32a2:bn=32:... --shapes 64x4096x4096,...
"""
import argparse, sys
import torch
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import smallm

ap = argparse.ArgumentParser()
ap.add_argument("--adhoc", required=True)
ap.add_argument("--shapes", default="64x4096x4096,16x264x72,100x1000x1000,7x520x4096")
args = ap.parse_args()
bad = 0
for spec in filter(None, args.adhoc.split(",")):
    name, *kv = spec.split(":")
    fam = smallm.with_fields(smallm.FAMILIES["smallm"], name, max_m=1 << 30, min_m=1,
                             **{k: int(v) for k, v in (x.split("=") for x in kv)})
    for shape in args.shapes.split(","):
        M, N, K = map(int, shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(M + N + K)
        a = torch.randn((M, K), device="cuda", generator=g).half()
        b = torch.randn((N, K), device="cuda", generator=g).half()
        out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
        smallm.run_smallm(a, b, out, family=fam, debug=True)
        ok, mx, rel, msg = check_product(out, a, b)
        bad += not ok
        print(f"{name} {shape}: {'ok' if ok else 'WRONG ' + msg}", flush=True)
sys.exit(1 if bad else 0)
