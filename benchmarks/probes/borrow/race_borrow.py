"""The borrowed stage's one ordering rule, tested both ways: step 9's kernels as built (both
consumers meet before the stage's B part is overwritten) and with GL_ABLATE_BORROW_NO_SYNC=1
(a consumer that finishes early stages into the B part its partner's last wgmma may still
read). Many tiles per CTA, outputs poisoned before each of `runs` launches; counts runs whose
result is wrong (fp32 reference) and runs whose bits differ from run 0.

    PYTHONPATH=src python benchmarks/probes/borrow/race_borrow.py [--runs 30]
"""
import argparse
import torch
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import steps
from gemm_ladder.runtime.launch import plan

ap = argparse.ArgumentParser()
ap.add_argument("--keys", default="9,9:c1")
ap.add_argument("--shapes", default="6144x6144x1024,6144x6144x6144")
ap.add_argument("--runs", type=int, default=30)
args = ap.parse_args()
for spec in args.shapes.split(","):
    M, N, K = map(int, spec.split("x"))
    g = torch.Generator(device="cuda").manual_seed(M + N + K)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16, generator=g)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16, generator=g)
    for key in args.keys.split(","):
        for name, defines in (("as built", {}), ("no sync (ablation)", {"GL_ABLATE_BORROW_NO_SYNC": 1})):
            out = torch.empty((M, N), dtype=torch.float16, device="cuda")
            p = plan(steps.get_step(key), a, b, out, extra_defines=defines)
            wrong = moving = 0
            first = None
            for i in range(args.runs):
                out.fill_(float("nan"))
                p()
                torch.cuda.synchronize()
                wrong += not check_product(out, a, b)[0]
                if first is None:
                    first = out.clone()
                else:
                    moving += not torch.equal(first, out)
            print(f"{spec} step {key} {name}: {wrong}/{args.runs} runs wrong, {moving}/{args.runs - 1} differ from run 0",
                  flush=True)
