"""The fp8 entries and candidate tiles against torch._scaled_mm, each call captured once in a
CUDA graph and replayed (host cost out of the figure), interleaved, L2 flushed before each
replay, medians; every case checked against an fp32 reference of the dequantized inputs
before it is timed. Also the door's host cost per call, back to back, at small shapes.

Usage: PYTHONPATH=src python benchmarks/probes/fp8_graphs.py [--json PATH] [MxNxK ...]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import torch

from gemm_ladder.families import fp8
from gemm_ladder.library import fp8_api
from gemm_ladder.library.fp8_runner import run_fp8
from gemm_ladder.measure import bench
from gemm_ladder.measure.bench import graphed
from gemm_ladder.measure.bench_fp8 import PROJECTIONS, SQUARES
from gemm_ladder.measure.gpuinfo import Sampler

E = fp8.ENTRIES
CANDIDATES = {
    # one tile row (M <= 128)
    "128x128pc1": E["fp8:128x128pc1"],
    "128x128sk": E["fp8:128x128sk"],
    "128x64pc1": dataclasses.replace(E["fp8:128x128pc1"], name="128x64pc1", bn=64, modes=("tensor", "row")),
    "128x64sk": dataclasses.replace(E["fp8:128x128sk"], name="128x64sk", bn=64, modes=("tensor", "row")),
    "128x128skc": fp8.with_fields(E["fp8:128x128sk"], "chip", **fp8.SPLIT_VARIANTS["chip"]),
    "128x64skc": dataclasses.replace(E["fp8:128x128sk"], name="128x64skc", bn=64, modes=("tensor", "row"),
                                     split_cluster=True),
    "128x256c1": E["fp8:128x256c1"],
    "128x128c1f": dataclasses.replace(E["fp8:128x256c1"], name="128x128c1f", bn=128, depth=6),
    "128x64c1f": dataclasses.replace(E["fp8:128x256c1"], name="128x64c1f", bn=64, depth=6),
    # 64-row tiles, one consumer
    "64x64pc1": E["fp8:64x64pc1"],
    "64x64sk": E["fp8:64x64sk"],
    "64x128sk": E["fp8:64x128sk"],
    "64x128pc1": E["fp8:64x128pc1"],
    "64x64c1": E["fp8:64x64c1"],
    # several tile rows
    "128x128p": E["fp8:128x128p"],
    "128x256p": E["fp8:128x256p"],
    "128x256": E["fp8:128x256"],
    "128x128f": dataclasses.replace(E["fp8:128x256"], name="128x128f", bn=128, depth=6),
    "128x64p": dataclasses.replace(E["fp8:128x128p"], name="128x64p", bn=64, modes=("tensor", "row")),
    "128x64f": dataclasses.replace(E["fp8:128x256"], name="128x64f", bn=64, depth=6),
}
SMALL = ("128x128pc1", "128x128sk", "128x128skc", "128x64pc1", "128x64sk", "128x64skc", "128x256c1", "128x128c1f",
         "128x64c1f", "64x64pc1", "64x64sk", "64x128sk", "64x128pc1", "64x64c1")
LARGE = ("128x128p", "128x256p", "128x256", "128x128f", "128x64pc1", "128x64p", "128x64c1f", "128x64f", "64x128pc1",
         "64x64pc1")


def cases(M: int):
    for name in SMALL if M <= 128 else LARGE:
        e = CANDIDATES[name]
        for mode in e.modes:
            if mode == "block" and e.fast_accum:
                continue
            yield name, e, mode, e.fast_accum


def _compile(args):
    name, mode = args
    try:
        CANDIDATES[name].compile(variant=fp8.Variant(mode, "bfloat16"))
        return name, mode, ""
    except Exception as e:  # noqa: BLE001 - reported, the case is skipped
        return name, mode, f"{type(e).__name__}: {e}"


def kernel_scales(mode, sa, sb, M, N):
    if mode == "tensor":
        return sa.reshape(1), sb.reshape(1)
    return (sa.reshape(M), sb.reshape(N)) if mode == "row" else (sa, sb)


def host_us(b, size: int, calls: int = 2000, rounds: int = 5):
    torch_ = b.torch
    x = torch_.randn(size, size, device="cuda")
    qa, sa = fp8_api.quantize_fp8(x, "tensor", operand="a")
    qb, sb = fp8_api.quantize_fp8(x, "tensor", operand="b")
    fns = (lambda: fp8_api.scaled_mm(qa, qb.t(), sa, sb, out_dtype=torch_.bfloat16),  # noqa: E731
           lambda: torch_._scaled_mm(qa, qb.t(), sa, sb, out_dtype=torch_.bfloat16))  # noqa: E731
    got = ([], [])
    for f in fns:
        f()
    for r in range(rounds):
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            torch_.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                fns[i]()
            got[i].append((time.perf_counter() - t0) / calls * 1e6)
            torch_.cuda.synchronize()
    return {"size": size, "us": statistics.median(got[0]), "scaled_mm_us": statistics.median(got[1])}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "fp8_graphs.json"))
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("shapes", nargs="*")
    args = ap.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes] or SQUARES + PROJECTIONS
    todo = sorted({(n, m) for M, _, _ in shapes for n, _, m, _ in cases(M)})
    t0 = time.time()
    with ProcessPoolExecutor(min(16, os.cpu_count() or 4)) as pool:
        broken = {(n, m): err for n, m, err in pool.map(_compile, todo) if err}
    print(f"compiled {len(todo)} builds in {time.time() - t0:.0f} s; failed: {broken or 'none'}", flush=True)
    b = bench.Bench()
    out = {"host": [host_us(b, 256), host_us(b, 1024)], "rows": []}
    for h in out["host"]:
        print(f"host us per call at {h['size']}^3: ours {h['us']:.1f}, _scaled_mm {h['scaled_mm_us']:.1f}", flush=True)
    for M, N, K in shapes:
        x = torch.randn(M, K, device="cuda", generator=b.gen)
        w = torch.randn(N, K, device="cuda", generator=b.gen)
        q = {}
        for mode in ("tensor", "row", "block"):
            qa, sa = fp8_api.quantize_fp8(x, mode, operand="a")
            qb, sb = fp8_api.quantize_fp8(w, mode, operand="b")
            ref = fp8_api.dequantize_fp8(qa, sa, mode, "a") @ fp8_api.dequantize_fp8(qb, sb, mode, "b").t()
            q[mode] = (qa, sa, qb, sb, ref)
        theirs_g = {}
        for name, e, mode, fast in cases(M):
            row = {"shape": [M, N, K], "cand": name, "mode": mode, "fast": fast}
            if (name, mode) in broken:
                row["error"] = broken[(name, mode)]
                out["rows"].append(row)
                continue
            qa, sa, qb, sb, ref = q[mode]
            ksa, ksb = kernel_scales(mode, sa, sb, M, N)
            ref_mode = "tensor" if mode == "block" else mode
            ta, tsa, tb, tsb, _ = q[ref_mode]
            try:
                ours = lambda: run_fp8(qa, qb, ksa, ksb, mode=mode, out_dtype=torch.bfloat16, entry=e,  # noqa: E731
                                       fast_accum=fast)
                c = ours()
                err = float((c.float() - ref).abs().max() / ref.abs().max())
                g = graphed(ours)
                tk = (ref_mode, fast)
                if tk not in theirs_g:
                    theirs_g[tk] = graphed(lambda: torch._scaled_mm(ta, tb.t(), tsa, tsb, out_dtype=torch.bfloat16,
                                                                    use_fast_accum=fast))
                b.time_interleaved([g.replay, theirs_g[tk].replay], 3)
                with Sampler(b.nvml) as s:
                    t = b.time_interleaved([g.replay, theirs_g[tk].replay], args.reps)
                ms, tms = statistics.median(t[0]), statistics.median(t[1])
                row.update(err=err, us=ms * 1e3, scaled_mm_us=tms * 1e3, ratio=tms / ms,
                           tflops=2 * M * N * K / ms / 1e9, gpu=s.summary())
            except Exception as ex:  # noqa: BLE001
                row["error"] = f"{type(ex).__name__}: {ex}"
            out["rows"].append(row)
            print(f"{M}x{N}x{K} {name:>11} {mode:>6}{' fast' if fast else '     '} "
                  + (f"{row['us']:8.1f} us vs {row['scaled_mm_us']:8.1f}  x{row['ratio']:.3f}  err {row['err']:.1e}"
                     if "ratio" in row else row["error"][:160]), flush=True)
        del q, theirs_g
        torch.cuda.empty_cache()
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
