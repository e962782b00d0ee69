"""Every attention step at small shapes, for compute-sanitizer (memcheck, racecheck, synccheck):
each step present (A1 and the family's fused ones) x head dim 64/128/256 x causal or not x
dtype, on ragged and grouped-query shapes (S = 17 and 200, GQA and MQA), the first shape also
with return_lse; outputs NaN-poisoned (attention_ref.call_poisoned), then checked after a
synchronize: finite, and within attention_ref.tolerance of a float64 reference computed on the
CPU (so torch's own GPU kernels stay out of the sanitizer's log). Prints one line per case and
exits 1 if any output is wrong. Usage (on the GPU machine):
  compute-sanitizer --tool memcheck --report-api-errors no python scripts/attention_sanitize_cases.py
  compute-sanitizer --tool racecheck ... scripts/attention_sanitize_cases.py --shapes 1 --dtypes float16"""
from __future__ import annotations

import argparse
import sys

import torch

from gemm_ladder.measure import attention_ref as ar
from gemm_ladder.measure.attention_report import family_problem, fused_steps, head_dims, library_builds

# (B, Hq, Hkv, Sq, Sk): ragged and grouped first (racecheck takes the first only), then a
# tile multiple with Sq != Sk, then one query row against a ragged MQA cache and S = 17
SHAPES = [(1, 4, 2, 200, 200), (2, 2, 2, 128, 256), (1, 4, 1, 17, 200), (1, 2, 1, 1, 17),
          (2, 40, 8, 256, 300)]  # the last: more tiles than SMs, so persistent CTAs walk several
DTYPES = ("float16", "bfloat16")


def cases(steps, shapes=SHAPES, dtypes=DTYPES, dims=None):
    """(step, dtype, D, causal, shape, return_lse) of every call, the first shape also with lse."""
    for step in steps:
        for dtype in dtypes:
            for D in dims or head_dims():
                for causal in (False, True):
                    for i, shape in enumerate(shapes):
                        yield step, dtype, D, causal, shape, False
                        if i == 0:
                            yield step, dtype, D, causal, shape, True


def run_one(step, dtype, D, causal, shape, return_lse, g) -> str:
    import gemm_ladder as gl
    B, Hq, Hkv, Sq, Sk = shape
    dt = getattr(torch, dtype)
    q = torch.randn((B, Hq, Sq, D), device="cuda", generator=g).to(dt)
    k = torch.randn((B, Hkv, Sk, D), device="cuda", generator=g).to(dt)
    v = torch.randn((B, Hkv, Sk, D), device="cuda", generator=g).to(dt)
    o, lse = ar.call_poisoned(gl.attention, q, k, v, causal=causal, return_lse=return_lse, step=step)
    torch.cuda.synchronize()
    if not bool(torch.isfinite(o).all()) or (lse is not None and not bool(torch.isfinite(lse).all())):
        return "NON-FINITE OUTPUT"
    qc, kc, vc = q.cpu(), k.cpu(), v.cpu()
    ref, ref_lse, logit_max = ar.reference(qc, kc, vc, causal=causal)
    tol = ar.tolerance(dt, float(ref.abs().max()), None, materializes_s=step == "A1",
                       logit_max=float(logit_max.max()), v_max=float(vc.abs().max()))
    err = ar.max_abs_err(o.cpu(), ref)
    if err > tol:
        return f"WRONG: max abs error {err:.2e} > {tol:.2e}"
    if lse is not None:
        excess = float(((lse.cpu().double() - ref_lse).abs()
                        - ar.lse_tolerance(dt, logit_max, materializes_s=step == "A1")).max())
        if excess > 0:
            return f"WRONG LSE: past its tolerance by {excess:.2e}"
    return f"ok (err {err:.1e})"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", type=int, default=len(SHAPES), help="the first N shapes only (racecheck: 1)")
    p.add_argument("--dtypes", default=",".join(DTYPES), help="comma separated, e.g. float16")
    p.add_argument("--steps", help="comma separated, e.g. A1,A3 or the library's builds, e.g. A5:d (default: A1 "
                   "and every fused step present)")
    args = p.parse_args(argv)
    present = ["A1", *fused_steps()]
    library = library_builds()
    if why := family_problem():
        print(f"the attention family does not import ({why})", flush=True)
    steps = args.steps.split(",") if args.steps else present
    for s in [s for s in steps if s not in [*present, *library]]:
        print(f"{s}: not in gemm_ladder.families.attention.STEPS or LIBRARY; skipped", flush=True)
    steps = [s for s in steps if s in [*present, *library]]
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    g = torch.Generator(device="cuda").manual_seed(3)
    bad = n = 0
    for step, dtype, D, causal, shape, lse in cases(steps, SHAPES[:args.shapes], dtypes):
        if step in library and D not in library[step]:
            continue  # a library build for one head dim (A5:c3*: 64)
        try:
            verdict = run_one(step, dtype, D, causal, shape, lse, g)
        except Exception as e:  # a refused call is a wrong case here: every shape is a valid one
            verdict = f"ERROR {type(e).__name__}: {e}"
        n += 1
        bad += not verdict.startswith("ok")
        B, Hq, Hkv, Sq, Sk = shape
        print(f"{step} {dtype} D{D} {'causal' if causal else 'full'} B{B} Hq{Hq} Hkv{Hkv} Sq{Sq} Sk{Sk}"
              f"{' lse' if lse else ''}: {verdict}", flush=True)
    print(f"attention sanitizer cases: {n} run, {bad} wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
