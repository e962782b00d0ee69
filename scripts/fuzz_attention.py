"""Fuzz the attention door: random calls of gemm_ladder.attention, each against a float64
reference (gemm_ladder/measure/attention_ref.py: SDPA's semantics, causal top-left) and against
torch's own SDPA on the same inputs.

What is drawn (case i of a seed depends on (seed, i) alone, so `--seed S --index I` replays it):
  shapes   B 1-3; Sq and Sk from 1, 17, tile edges (63..257), other non-multiples of 64/128
           and up to 1100, Sk equal to Sq half the time; D 64/128/256; B·Hq·Sq·Sk capped
  heads    GQA groups Hq / Hkv of 1, 2, 4, 8 over Hkv of 1-8, and MQA (Hkv = 1, Hq up to 16)
  layouts  per operand: contiguous, (B, S, H, D).transpose(1, 2), every other element of a
           head dim twice as wide, a head dim of D + 1 sliced from its second element (the last
           two force the door's copy); padding around a view holds NaN
  calls    causal or not; scale the default, log-uniform in [0.02, 1], tiny (1e-4) or large
           (1, 2); return_lse or not; step None or one of those present (A1 and the family's)
A case passes when the output is finite and max |o - ref| <= 2·(SDPA's) + one unit (A1, which
rounds S to the input dtype, gets that rounding's effect on top: attention_ref.tolerance), and
the lse, when asked for, is within attention_ref.lse_tolerance. Outputs are NaN-poisoned (the
allocator's pool; an out= if the door takes one). Writes a JSON record; exits 1 on any failure.
Usage (on the GPU machine): PYTHONPATH=src python scripts/fuzz_attention.py --cases 300 --json out.json
On a CPU, --device cpu --impl torch runs the same cases with torch standing in for the library
(the script's own check, not the kernels')."""
from __future__ import annotations

import argparse
import json
import math
import random
import sys

import torch

from gemm_ladder.measure import attention_ref as ar
from gemm_ladder.measure.attention_report import family_problem, fused_steps, head_dims
from gemm_ladder.measure.bench import git_commit

LAYOUTS = {"contiguous": 4, "bshd": 2, "strided-d": 1, "offset-d": 1}
SPECIAL_S = (1, 17, 63, 64, 65, 127, 128, 129, 200, 255, 256, 257, 1000)
SCALES = {"default": 4, "uniform": 3, "tiny": 1, "large": 1}
SCORE_CAP = 1 << 24  # B·Hq·Sq·Sk of one case: the float64 reference's scores stay under 128 MB
DTYPES = ("float16", "bfloat16")


def steps_present() -> list:
    """None (the library's choice), A1 and every fused step of the family now."""
    return [None, "A1", *fused_steps()]


def _pick(rng: random.Random, weights: dict):
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _seqlen(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.5:
        return rng.choice(SPECIAL_S)
    if r < 0.8:
        return rng.randint(1, 1100)
    return 64 * rng.randint(1, 16)


def gen_case(seed: int, index: int, steps: list, score_cap: int = SCORE_CAP) -> dict:
    """Case `index` of `seed`: every argument of one call (data from data_seed)."""
    rng = random.Random(f"attention-fuzz-{seed}-{index}")
    D = rng.choice(head_dims())
    if rng.random() < 0.15:  # MQA: one kv head for every query head
        hkv, group = 1, rng.choice((2, 4, 8, 16))
    else:
        hkv, group = rng.choice((1, 2, 4, 8)), rng.choice((1, 2, 4, 8))
    B, Sq = rng.randint(1, 3), _seqlen(rng)
    Sk = Sq if rng.random() < 0.5 else _seqlen(rng)
    while B * hkv * group * Sq * Sk > score_cap:  # fewer sequences, then kv heads, then shorter ones
        if B > 1:
            B -= 1
        elif hkv > 1:
            hkv //= 2
        else:
            Sq, Sk = max(1, Sq // 2), max(1, Sk // 2)
    scale_kind = _pick(rng, SCALES)
    scale = {"default": None, "uniform": math.exp(rng.uniform(math.log(0.02), 0.0)), "tiny": 1e-4,
             "large": rng.choice((1.0, 2.0))}[scale_kind]
    return {"index": index, "dtype": rng.choice(DTYPES), "B": B, "Hq": hkv * group, "Hkv": hkv, "Sq": Sq, "Sk": Sk,
            "D": D, "causal": rng.random() < 0.5, "scale_kind": scale_kind, "scale": scale,
            "return_lse": rng.random() < 0.5, "step": rng.choice(steps),
            "layouts": {n: _pick(rng, LAYOUTS) for n in "qkv"}, "data_seed": rng.getrandbits(31)}


def make(shape, layout: str, dtype, g: torch.Generator, device):
    """A (B, H, S, D) tensor of randn in `layout`; the padding of a view holds NaN."""
    B, H, S, D = shape
    data = torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype)
    if layout == "contiguous":
        return data
    if layout == "bshd":
        t = torch.empty((B, S, H, D), dtype=dtype, device=device).transpose(1, 2)
    elif layout == "strided-d":
        t = torch.full((B, H, S, 2 * D), math.nan, dtype=dtype, device=device)[..., ::2]
    elif layout == "offset-d":
        t = torch.full((B, H, S, D + 1), math.nan, dtype=dtype, device=device)[..., 1:]
    else:
        raise ValueError(f"unknown layout {layout!r}")
    t.copy_(data)
    return t


def build(case: dict, device):
    g = torch.Generator(device=device).manual_seed(case["data_seed"])
    dt = getattr(torch, case["dtype"])
    B, Hq, Hkv, Sq, Sk, D = (case[k] for k in ("B", "Hq", "Hkv", "Sq", "Sk", "D"))
    L = case["layouts"]
    return (make((B, Hq, Sq, D), L["q"], dt, g, device), make((B, Hkv, Sk, D), L["k"], dt, g, device),
            make((B, Hkv, Sk, D), L["v"], dt, g, device))


def torch_stand_in(q, k, v, *, causal=False, scale=None, return_lse=False, step=None):
    """torch in the library's place (--impl torch): SDPA, and the lse from fp32 scores."""
    o = ar.sdpa(q, k, v, causal=causal, scale=scale)
    if not return_lse:
        return o
    return o, ar.reference(q, k, v, causal=causal, scale=scale, acc=torch.float32)[1]


def run_case(case: dict, device, impl) -> dict:
    case = dict(case)
    try:
        q, k, v = build(case, device)
        dt = q.dtype
        o, lse = ar.call_poisoned(impl, q, k, v, causal=case["causal"], scale=case["scale"],
                                  return_lse=case["return_lse"], step=case["step"])
        ref, ref_lse, logit_max = ar.reference(q, k, v, causal=case["causal"], scale=case["scale"])
        # torch's SDPA as the yardstick, on aligned copies: on the views 2 bytes off 16-byte alignment
        # ("offset-d") it returned NaN, and once failed with a misaligned address, on the H200
        theirs = ar.sdpa(q.contiguous(), k.contiguous(), v.contiguous(), causal=case["causal"], scale=case["scale"])
        sdpa_err = ar.max_abs_err(theirs, ref)
        a1 = case["step"] == "A1"
        tol = ar.tolerance(dt, float(ref.abs().max()), sdpa_err, materializes_s=a1,
                           logit_max=float(logit_max.max()), v_max=float(v.abs().max()))
        finite = bool(torch.isfinite(o).all()) and tuple(o.shape) == tuple(ref.shape)
        err = ar.max_abs_err(o, ref) if finite else None  # None: JSON has no inf
        case.update(max_abs_err=err, sdpa_max_abs_err=sdpa_err, tolerance=tol, finite=finite)
        ok = finite and err <= tol
        if case["return_lse"]:
            lse_ok = tuple(lse.shape) == tuple(ref_lse.shape) and lse.dtype == torch.float32 \
                and bool(torch.isfinite(lse).all())
            excess = float(((lse.double() - ref_lse).abs() - ar.lse_tolerance(dt, logit_max, materializes_s=a1))
                           .max()) if lse_ok else None  # > 0: past the tolerance by that much
            case.update(lse_ok=lse_ok and excess <= 0, lse_excess=excess)
            ok = ok and case["lse_ok"]
        case["ok"] = ok
    except Exception as e:  # the door refusing a valid call is a failure too
        case.update(ok=False, error=f"{type(e).__name__}: {e}"[:500])
    return case


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--index", type=int, help="run this one case of the seed (a failure's replay)")
    p.add_argument("--json")
    p.add_argument("--device", default="cuda")
    p.add_argument("--impl", choices=("library", "torch"), default="library")
    p.add_argument("--score-cap", type=int, default=SCORE_CAP, help="B*Hq*Sq*Sk of a case at most")
    args = p.parse_args(argv)
    present = steps_present()
    missing = [s for s in ("A2", "A3", "A4", "A5") if s not in present]
    if why := family_problem():
        print(f"fuzz attention: the attention family does not import ({why})")
    if missing:
        print(f"fuzz attention: steps not in gemm_ladder.families.attention.STEPS, skipped: {', '.join(missing)}")
    if args.impl == "library":
        import gemm_ladder
        impl = gemm_ladder.attention
    else:
        impl = torch_stand_in
    indices = [args.index] if args.index is not None else range(args.cases)
    cases = [run_case(gen_case(args.seed, i, present, args.score_cap), args.device, impl) for i in indices]
    bad = [c for c in cases if not c["ok"]]
    ratio = max((c["max_abs_err"] / c["tolerance"] for c in cases
                 if c.get("tolerance") and c.get("max_abs_err") is not None), default=0.0)
    print(f"fuzz attention: {len(cases)} cases, {len(bad)} failures, worst error / tolerance {ratio:.2f}")
    for c in bad[:20]:
        cap = f" --score-cap {args.score_cap}" if args.score_cap != SCORE_CAP else ""
        print(f"  FAIL (replay: --seed {args.seed} --index {c['index']}{cap})", json.dumps(c))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"kind": "fuzz attention", "commit": git_commit(), "seed": args.seed, "impl": args.impl,
                       "device": args.device, "torch": torch.__version__, "steps": present, "steps_missing": missing,
                       "command": " ".join(["python", "scripts/fuzz_attention.py", *(argv or sys.argv[1:])]),
                       "failures": len(bad), "failed": bad, "cases": cases}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
