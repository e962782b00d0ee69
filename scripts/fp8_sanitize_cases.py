"""Every fp8 kernel build at small shapes, for compute-sanitizer (memcheck, racecheck, synccheck):
each entry and checked variant (the GPU tests' too) x scale mode x output type, with bias where
the entry takes it, on one short tile row (A's box of M rows; split-K's splits), a tile-multiple
and a ragged shape; outputs NaN-poisoned, checked finite after a synchronize. Prints one line
per case and exits 1 if any output is wrong. Usage (on the GPU machine):
  compute-sanitizer --tool memcheck python scripts/fp8_sanitize_cases.py [SHAPES [ENTRY ...]]
SHAPES: how many of the shapes (racecheck: 1, it is slow); ENTRY: only these entries' keys."""
import sys

import torch

from gemm_ladder.families import fp8
from gemm_ladder.library.fp8_runner import run_fp8, scale_shapes

SHAPES = [(72, 264, 1040), (256, 512, 256), (200, 264, 272)]


def main() -> int:
    shapes = SHAPES[:int(sys.argv[1])] if len(sys.argv) > 1 else SHAPES  # racecheck: the first only (slow)
    only = set(sys.argv[2:])
    bad = 0
    g = torch.Generator(device="cuda").manual_seed(3)
    for e in fp8.all_entries() + fp8.checked_variants():
        if only and e.key not in only:
            continue
        for mode in e.modes:
            for out in e.outs:
                if e.variant_problem(fp8.Variant(mode, out, bias=e.step != 11)):
                    continue  # a variant the entry refuses (choose() never sends it there)
                for M, N, K in shapes:
                    qa = torch.randn((M, K), device="cuda", generator=g).to(torch.float8_e4m3fn)
                    qb = torch.randn((N, K), device="cuda", generator=g).to(torch.float8_e4m3fn)
                    sa_shape, sb_shape = scale_shapes(mode, M, N, K)
                    sa = torch.rand(sa_shape, device="cuda", generator=g) + 0.5
                    sb = torch.rand(sb_shape, device="cuda", generator=g) + 0.5
                    dt = getattr(torch, out)
                    bias = torch.randn(N, device="cuda", generator=g).to(dt) if e.step != 11 else None
                    c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
                    run_fp8(qa, qb, sa, sb, mode=mode, out_dtype=dt, bias=bias, entry=e, out=c)
                    torch.cuda.synchronize()
                    ok = bool(torch.isfinite(c).all())
                    bad += not ok
                    print(f"{e.key} {mode} {out} {M}x{N}x{K}: {'ok' if ok else 'NON-FINITE OUTPUT'}", flush=True)
    print(f"fp8 sanitizer cases: {bad} wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
