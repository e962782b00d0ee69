"""Checking fuzz cases (fuzz_support.py): reference, tolerance, and the run loop's record.

Reference: the product of the very fp16/bf16 inputs in fp64. cuBLAS (torch.matmul, with
reduced-precision reductions off) is measured against the same reference in every case.

Tolerance on max |out - ref| (`tolerance`), S = max_i |a_i| * max_j |b_j| >= sum_k |a_ik b_kj|:
  exact-int values   0: fp32 sums of small integers are exact, so the output must equal the
                     correctly rounded fp64 result bit for bit
  otherwise          min(bound, max(2 x cuBLAS's max error, floor)), where
                     bound = h + 2^-23 K S   worst case of any fp32 accumulation (products of
                             16-bit numbers are exact; 2^-23 allows truncating adders),
                             rounded once to the output format (h = 1/2 ulp there)
                     floor = h + 2^-24 sqrt(K) S   a correctly rounded result after a typical
                             fp32 sum: only binds where cuBLAS is luckily closer (tiny outputs)
  So the tolerance grows with K and is never looser than the worst-case bound, and never
  looser than 2x cuBLAS except on outputs so small that cuBLAS beat the typical error; the
  record counts which term set it (`tolerance_basis`) and the worst ratio to cuBLAS.
Every failing case prints its one-line reproducer (Case.repro()).
"""
from __future__ import annotations

import contextlib
import math
import time
from collections import Counter

from fuzz_support import Case, build, invoke

MANTISSA = {"float16": 10, "bfloat16": 7}
MIN_EXP = {"float16": -14, "bfloat16": -126}
U32 = 2.0 ** -24  # fp32 unit roundoff


def ulp(dtype: str, x: float) -> float:
    """Spacing of `dtype` numbers at magnitude x (subnormal spacing below the normal range)."""
    e = MIN_EXP[dtype] if x == 0 or not math.isfinite(x) else max(math.frexp(abs(x))[1] - 1, MIN_EXP[dtype])
    return 2.0 ** (e - MANTISSA[dtype])


def tolerance(dtype: str, K: int, ref_absmax: float, accum_scale: float, cublas_err: float,
              exact: bool = False) -> tuple[float, str]:
    """(allowed max |out - ref|, which term set it: exact / bound / 2x-cublas / floor)."""
    if exact:
        return 0.0, "exact"
    worst_sum = 2 * U32 * K * accum_scale
    half = 0.5 * ulp(dtype, ref_absmax + worst_sum)  # the sum may round up into the next binade
    bound = half + worst_sum
    floor = half + U32 * math.sqrt(K) * accum_scale
    if 2 * cublas_err >= bound:
        return bound, "bound"
    if 2 * cublas_err >= floor:
        return 2 * cublas_err, "2x-cublas"
    return floor, "floor"


@contextlib.contextmanager
def strict_cublas():
    """cuBLAS as the yardstick: fp32 reductions, no TF32."""
    import torch
    m = torch.backends.cuda.matmul
    names = [n for n in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                         "allow_bf16_reduced_precision_reduction") if hasattr(m, n)]
    old = {n: getattr(m, n) for n in names}
    for n in names:
        setattr(m, n, False)
    try:
        yield
    finally:
        for n, v in old.items():
            setattr(m, n, v)


def check_product(a, b, result, *, exact: bool = False, extra=()) -> dict:
    """result against a @ b (a: (..., K), b: (K, N), both 16-bit): the error figures, the
    tolerance, and whether it holds. `extra`: more scalar tensors to fetch in the same
    device sync (returned as "extra")."""
    import torch
    N, K = b.shape[1], b.shape[0]
    dtype = str(a.dtype).replace("torch.", "")
    a2, b2 = a.reshape(-1, K).double(), b.double()
    ref = a2 @ b2
    if exact:
        ref = ref.to(a.dtype).double()  # the correctly rounded result
    cub = torch.matmul(a, b).reshape(-1, N).double()
    res = result.reshape(-1, N).double()
    # A product past the 16-bit range is ±inf in ours and in cuBLAS's alike: the same infinity
    # is a match, left out of the error figures (ours non-finite anywhere else still fails).
    same_inf = torch.isinf(res) & (res == cub)
    res, cub, ref = (torch.where(same_inf, 0.0, x) for x in (res, cub, ref))
    inf = torch.tensor(math.inf, dtype=torch.float64, device=ref.device)
    err = torch.where(torch.isfinite(res), (res - ref).abs(), inf)
    cerr = torch.where(torch.isfinite(cub), (cub - ref).abs(), inf)
    figures = torch.stack([
        err.max(), cerr.max(), err.square().mean().sqrt(), cerr.square().mean().sqrt(), ref.abs().max(),
        (~torch.isfinite(res)).sum().double(), a2.norm(dim=1).max() * b2.norm(dim=0).max(),
        *[torch.as_tensor(x, device=ref.device).double() for x in extra]]).tolist()
    err_max, cub_max, rms, cub_rms, ref_absmax, nonfinite, accum_scale = figures[:7]
    tol, basis = tolerance(dtype, K, ref_absmax, accum_scale, cub_max, exact)
    problems = []
    if nonfinite:
        problems.append(f"{int(nonfinite)} non-finite output elements (unwritten or overflowed)")
    elif err_max > tol:
        problems.append(f"max|err|={err_max:.3g} > tol={tol:.3g} ({basis}; cuBLAS max|err|={cub_max:.3g})")
    return {"ok": not problems, "problems": problems, "err_max": err_max, "cublas_err_max": cub_max,
            "tol": tol, "basis": basis, "rms": rms, "cublas_rms": cub_rms,
            "ratio": err_max / cub_max if cub_max > 0 else (0.0 if err_max == 0 else math.inf),
            "extra": figures[7:]}


def evaluate(case: Case, built, result) -> dict:
    """The verdict on one result: ok, the error figures, and what went wrong."""
    import torch
    want = (case.M, case.N) if case.kind == "run_step" else (*case.batch, case.rows, case.N)
    if not isinstance(result, torch.Tensor) or tuple(result.shape) != want or result.dtype != built.a_logical.dtype:
        got = (tuple(result.shape), result.dtype) if isinstance(result, torch.Tensor) else type(result).__name__
        return {"ok": False, "problems": [f"returned {got}, expected shape {want} {built.a_logical.dtype}"]}
    zero = torch.zeros((), dtype=torch.float64, device=result.device)
    guards = sum(((~torch.isnan(g)).sum().double() for g in built.guards), zero)
    b_given = built.b.transpose(0, 1) if case.kind == "run_step" else built.b
    changed = (built.a != built.a_logical).sum().double() + (b_given != built.b_logical).sum().double()
    v = check_product(built.a_logical, built.b_logical, result, exact=case.exact, extra=(guards, changed))
    guards, changed = v.pop("extra")
    if built.out is not None and (result.data_ptr() != built.out.data_ptr() or result.stride() != built.out.stride()):
        v["problems"].append("did not return the out= tensor")
    if guards:
        v["problems"].append(f"{int(guards)} guard/padding elements were written")
    if changed:
        v["problems"].append(f"{int(changed)} input elements changed")
    v["ok"] = not v["problems"]
    return v


def coverage(c: Case) -> dict[str, str]:
    """The families one case belongs to (the record counts them)."""
    def edge(v):
        return any(v % t in (0, 1, t - 1) for t in (64, 128, 256)) and v > 2
    step = c.step
    if not step and c.kind == "matmul":  # the kernel matmul picks for this shape
        from gemm_ladder.library import select
        step = "picked:" + select.pick(c.M, c.N, c.K, "float16" if c.dtype in ("fp16", "float16") else "bfloat16")
    return {"target": c.kind, "step": step or "-", "dtype": c.dtype, "a": c.a, "b": c.b, "out": c.out,
            "values": c.values, "batch": "batched" if c.batch else "2-D",
            "M-family": c.fam.split(",")[0], "N-family": c.fam.split(",")[1] if "," in c.fam else "-",
            "K-family": c.fam.split(",")[-1], "tile-edge-dims": str(sum(map(edge, (c.M, c.N, c.K))))}


def run(case_iter, device="cuda", *, call=invoke, log=print, max_consecutive_errors: int = 8) -> dict:
    """Run cases, print a reproducer for every failure, return the record (JSON-ready)."""
    cases_per_dtype: Counter = Counter()
    families: dict[str, Counter] = {}
    basis: Counter = Counter()
    failures, worst = [], {}
    consecutive, aborted = 0, None
    t0 = time.perf_counter()
    with strict_cublas():
        for case in case_iter:
            built = result = None
            try:
                built = build(case, device)
                result = call(case, built)
                v = evaluate(case, built, result)
                consecutive = 0
            except Exception as e:  # an exception is a failure of the case, with its reproducer
                v = {"ok": False, "problems": [f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"]}
                consecutive += 1
            cases_per_dtype[case.dtype] += 1
            for k, val in coverage(case).items():
                families.setdefault(k, Counter())[val] += 1
            basis[v.get("basis", "error")] += 1
            r = v.get("ratio")
            if r is not None and math.isfinite(r) and r > worst.get(case.dtype, {}).get("ratio", -1.0):
                worst[case.dtype] = {"ratio": r, "err_max": v["err_max"], "cublas_err_max": v["cublas_err_max"],
                                     "case": case.line()}
            if not v["ok"]:
                failures.append({"repro": case.repro(), "problems": v["problems"],
                                 **{k: v[k] for k in ("err_max", "cublas_err_max", "tol", "basis") if k in v}})
                log(f"{case.repro()}  # {'; '.join(v['problems'])}")
            del built, result
            if consecutive >= max_consecutive_errors:
                aborted = f"stopped after {consecutive} consecutive exceptions (the CUDA context may be lost)"
                log(aborted)
                break
    return {"cases_per_dtype": dict(cases_per_dtype), "cases": sum(cases_per_dtype.values()),
            "failures": failures, "n_failures": len(failures), "aborted": aborted,
            "families": {k: dict(sorted(c.items())) for k, c in families.items()},
            "tolerance_basis": dict(basis), "worst_ratio_to_cublas": worst,
            "seconds": round(time.perf_counter() - t0, 2)}
