"""The fp8 promotion's build variants for block scales (families/fp8.py PROMOTION_VARIANTS)
against the block kernel as it is, per-tensor promotion on the same entry and
torch._scaled_mm per tensor. Per shape: every build's output checked first (NaN-poisoned,
against an fp32 reference of the dequantized inputs and against the as-is block kernel on the
same tile), then all timed as fp8_graphs.py does: graph replays, interleaved, L2 flushed,
medians. The SASS behind the variants: experiments/fp8/2026-12-04_fp8_block_sass_*.txt and
2026-12-04_fp8_pieces_sass_*.txt.

Usage: PYTHONPATH=src python benchmarks/probes/fp8_block_variants.py [--json PATH] [--reps N] [MxNxK ...]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 7168, 2048), (2048, 28672, 4096)]
TOLERANCE = 1e-2  # max |C - ref| / max |ref| for a bf16 C (rounding alone is ~4e-3)


def builds(M: int, N: int, K: int):
    """(label, entry, mode, label of the same tile's as-is build) per build: the library's
    block entry for the shape and 128 x 128 (the overlap's tile), each per tensor and block-wise
    as is, then block-wise with each variant the tile takes (and per tensor with the overlaps:
    okt on 128 x 128, op4's pieces on 128 x 256)."""
    from gemm_ladder.families import fp8
    lib = fp8.choose(M, N, K, "block", False)
    tiles = [lib] + ([fp8.get("fp8:128x128p")] if lib.key != "fp8:128x128p" else [])
    out = []
    for e in tiles:
        out += [(f"{mode} {e.name}", e, mode, None) for mode in ("tensor", "block")]
        for name, fields in fp8.PROMOTION_VARIANTS.items():
            v = fp8.with_fields(e, name, **fields)
            if v.variant_problem(fp8.Variant("block")):
                continue
            modes = ("block", "tensor") if v.overlap_kt or v.overlap_pieces else ("block",)
            out += [(f"{mode} {v.name}", v, mode, f"{mode} {e.name}") for mode in modes]
    return out


def quantized(x, w, mode):
    """(A, its scales, B, its scales, the fp32 product of the dequantized operands) for one
    scale mode; per-tensor scales as the one-element tensors the kernel reads."""
    from gemm_ladder.library import fp8_api
    qa, sa = fp8_api.quantize_fp8(x, mode, operand="a")
    qb, sb = fp8_api.quantize_fp8(w, mode, operand="b")
    ref = fp8_api.dequantize_fp8(qa, sa, mode, "a") @ fp8_api.dequantize_fp8(qb, sb, mode, "b").t()
    if mode == "tensor":
        sa, sb = sa.reshape(1), sb.reshape(1)
    return qa, sa, qb, sb, ref


def check(c, ref, base):
    """Relative max error against the fp32 reference; against the as-is build: the largest
    difference relative to max |ref| (0 when bit-identical)."""
    import torch
    scale = ref.abs().max()
    err = float((c.float() - ref).abs().max() / scale)
    diff = None if base is None else float((c.float() - base.float()).abs().max() / scale)
    ok = bool(torch.isfinite(c.float()).all()) and err < TOLERANCE
    return ok, err, diff


def run_shape(b, M, N, K, reps):
    import torch
    from gemm_ladder.library.fp8_runner import run_fp8
    from gemm_ladder.measure.bench import graphed
    from gemm_ladder.measure.gpuinfo import Sampler
    x = torch.randn(M, K, device="cuda", generator=b.gen)
    w = torch.randn(N, K, device="cuda", generator=b.gen)
    q = {mode: quantized(x, w, mode) for mode in ("tensor", "block")}
    del x, w
    rows, graphs, outs = [], [], {}
    for label, e, mode, base in builds(M, N, K):
        qa, sa, qb, sb, ref = q[mode]
        fn = lambda e=e, mode=mode, qa=qa, sa=sa, qb=qb, sb=sb: run_fp8(  # noqa: E731
            qa, qb, sa, sb, mode=mode, out_dtype=torch.bfloat16, entry=e)
        c = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
        run_fp8(qa, qb, sa, sb, mode=mode, out_dtype=torch.bfloat16, entry=e, out=c)
        torch.cuda.synchronize()
        ok, err, diff = check(c, ref, outs.get(base))
        outs[label] = c
        rows.append({"shape": [M, N, K], "build": label, "entry": e.key, "mode": mode, "ok": ok, "err": err,
                     "diff_vs_as_is": diff})
        graphs.append(graphed(fn))
    qa, sa, qb, sb, _ = q["tensor"]
    graphs.append(graphed(lambda: torch._scaled_mm(qa, qb.t(), sa, sb, out_dtype=torch.bfloat16)))
    replays = [g.replay for g in graphs]
    b.time_interleaved(replays, 3)
    with Sampler(b.nvml) as s:
        t = b.time_interleaved(replays, reps)
    med = [statistics.median(v) * 1e3 for v in t]
    theirs = med[-1]
    for row, us in zip(rows, med):
        row.update(us=us, scaled_mm_us=theirs, ratio=theirs / us, tflops=2 * M * N * K / us / 1e6, gpu=s.summary())
        same = "" if row["diff_vs_as_is"] is None else f"  vs as is {row['diff_vs_as_is']:.1e}"
        print(f"{M}x{N}x{K} {row['build']:>26}: {us:8.1f} us vs _scaled_mm {theirs:8.1f}  x{row['ratio']:.3f}  "
              f"err {row['err']:.1e}{same}{'' if row['ok'] else '  FAIL'}", flush=True)
    del q, outs, graphs
    torch.cuda.empty_cache()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "fp8_block_variants.json"))
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("shapes", nargs="*", help="MxNxK (default: 4096^3, 8192^3, 4096x7168x2048, 2048x28672x4096)")
    args = ap.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes] or SHAPES
    import torch
    if not torch.cuda.is_available():
        print("fp8_block_variants: no CUDA device here; run it on the H200", file=sys.stderr)
        return 2
    from gemm_ladder.families import fp8
    from gemm_ladder.measure import bench
    t0 = time.time()
    for M, N, K in shapes:  # every build first: a failed build stops the probe before any timing
        for _, e, mode, _ in builds(M, N, K):
            e.compile(variant=fp8.Variant(mode, "bfloat16"))
    print(f"built every variant in {time.time() - t0:.0f} s", flush=True)
    b = bench.Bench()
    rows = [r for M, N, K in shapes for r in run_shape(b, M, N, K, args.reps)]
    with open(args.json, "w") as f:
        json.dump({"shapes": shapes, "reps": args.reps, "rows": rows}, f, indent=1)
    failed = [r["build"] for r in rows if not r["ok"]]
    print(f"{len(rows)} rows, {len(failed)} failed checks{': ' + ', '.join(failed) if failed else ''}; "
          f"{time.time() - t0:.0f} s; {args.json}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
