"""Fuzz the fp8 door: random shapes (M 1-700, N a multiple of 8 up to 1100, K a multiple of 16 up
to 3000), scale modes, output types, bias, fast accumulation and e5m2 operands through
gemm_ladder.scaled_mm, each against a float64 reference of the dequantized inputs, outputs
checked finite (where the reference passes fp16's largest value, inf is expected, as torch
gives). Writes a JSON record; exits 1 on any failure.
Usage (on the GPU machine): PYTHONPATH=src python scripts/fuzz_fp8.py --cases 500 --json out.json"""
import argparse
import json
import random
import sys

import torch

import gemm_ladder as gl
from gemm_ladder.measure.bench import git_commit

TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 1e-3}


def one(rng: random.Random, g: torch.Generator) -> dict:
    M, N, K = rng.randint(1, 700), 8 * rng.randint(1, 137), 16 * rng.randint(1, 187)
    mode = rng.choice(["tensor", "row", "block"])
    out_dtype = rng.choice([torch.bfloat16, torch.float16, torch.float32])
    fast, with_bias = rng.random() < 0.3, rng.random() < 0.4
    act = torch.float8_e5m2 if rng.random() < 0.15 else torch.float8_e4m3fn
    x = torch.randn((M, K), device="cuda", generator=g) * rng.choice([1e-3, 1.0, 300.0])
    w = torch.randn((N, K), device="cuda", generator=g)
    a, sa = gl.quantize_fp8(x, mode, operand="a", dtype=act)
    wq, sb = gl.quantize_fp8(w, mode, operand="b")
    bias = torch.randn(N, device="cuda", generator=g).to(out_dtype) if with_bias else None
    case = {"M": M, "N": N, "K": K, "mode": mode, "out": str(out_dtype), "fast": fast, "bias": with_bias,
            "a": str(act)}
    try:
        got = gl.scaled_mm(a, wq.t(), sa, sb, out_dtype=out_dtype, bias=bias, use_fast_accum=fast)
        ref = (gl.dequantize_fp8(a, sa, mode, "a").double() @ gl.dequantize_fp8(wq, sb, mode, "b").double().t())
        if bias is not None:
            ref = ref + bias.double()
        # an fp16 result past its largest finite value is inf, as torch's is: expected there
        big = torch.finfo(out_dtype).max
        over = ref.abs() > big
        in_range = ~over
        err = float((got.double() - ref)[in_range].abs().max() / ref[in_range].abs().max().clamp_min(1e-30)) \
            if in_range.any() else 0.0
        tol = max(TOL[out_dtype], 2e-2 if fast else 0)
        ok = bool(torch.isfinite(got[in_range]).all()) and bool(torch.isinf(got[over]).all()) and err <= tol
        case.update(rel_err=err, overflowed=int(over.sum()), ok=ok)
    except Exception as e:
        case.update(ok=False, error=f"{type(e).__name__}: {e}")
    return case


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json")
    args = p.parse_args()
    rng, g = random.Random(args.seed), torch.Generator(device="cuda").manual_seed(args.seed)
    cases = [one(rng, g) for _ in range(args.cases)]
    bad = [c for c in cases if not c["ok"]]
    worst = max((c.get("rel_err", 0) for c in cases), default=0)
    print(f"fuzz fp8: {len(cases)} cases, {len(bad)} failures, worst relative error {worst:.2e}")
    for c in bad[:20]:
        print("  FAIL", c)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"kind": "fuzz fp8", "commit": git_commit(), "seed": args.seed, "cases": cases,
                       "failures": len(bad)}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
