"""Small-M entries, or entries with fields changed, case by case, for compute-sanitizer to watch (perf-notes
item 121 ran `n64+pair_send=1`, a field since removed): K split 2, 4 and 8 ways (where the entry's
deal allows, summed in a cluster), at tile edges in M and N, both dtypes. Inputs made on
the host, the output poisoned (NaN), each case synchronized and checked against an fp32 host
product; one line per case, then a count. Exit status 1 if any case is wrong.
Usage: compute-sanitizer --tool racecheck python benchmarks/probes/longk/twin_cases.py [n64 c2n64d+depth=6 ...]"""
import sys

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.measure.accuracy import check_output

SHAPES = [(128, 256, 1024), (72, 200, 2048), (200, 136, 2048), (16, 512, 4096)]


def main() -> None:
    bad, cases = 0, 0
    for spec, (M, N, K) in ((spec, shape) for spec in (sys.argv[1:] or ["n64"]) for shape in SHAPES):
        fam = smallm.parse_build(spec)
        if fam.shape_problems(M, N, K):
            continue
        for dtype in ("float16", "bfloat16"):
            g = torch.Generator().manual_seed(M * N + K)
            a = torch.randn(M, K, generator=g).to(getattr(torch, dtype))
            b = torch.randn(N, K, generator=g).to(getattr(torch, dtype))
            ref = a.float() @ b.float().T
            for splits in (2, 4, 8):
                out = torch.full((M, N), float("nan"), dtype=a.dtype, device="cuda")
                p = runner.plan_smallm(fam, a.cuda(), b.cuda(), out, splits=splits)
                p()
                torch.cuda.synchronize()
                ok = bool(check_output(out.cpu(), ref, dtype)[0])
                bad += not ok
                cases += 1
                print(f"{fam.key} {M}x{N}x{K} {dtype} split {splits} ({p.deal.ctas} CTAs, cluster sum "
                      f"{p.deal.dsmem}): {'ok' if ok else 'WRONG'}", flush=True)
    print(f"{cases - bad} of {cases} cases correct")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
