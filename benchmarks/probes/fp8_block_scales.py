"""Where block scales cost time: the library's block-scaled entry per shape against
torch._scaled_mm per-tensor, built three ways: as is, reading no A scales
(GL_ABLATE_FP8_UNIT_SA) and reading no scales at all (with GL_ABLATE_FP8_UNIT_SB) — measurements,
not results: their outputs are checked against references without those scales; beside them
the same entry with per-tensor scales, each kernel on the other mode's bytes, and _scaled_mm on
the block-quantized bytes. Then the row-wise entry with and without its column scales' L2
prefetch (GL_ABLATE_FP8_NO_SCALE_PREFETCH) against _scaled_mm row-wise. Graph replays,
interleaved, L2 flushed, medians (fp8_graphs.py's method). Records:
benchmarks/results/experiments/fp8/*_fp8_block_scales_*.

Usage: PYTHONPATH=src python benchmarks/probes/fp8_block_scales.py [--json PATH] [MxNxK ...]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics

import torch

from gemm_ladder.families import fp8
from gemm_ladder.library import fp8_api
from gemm_ladder.library.fp8_runner import run_fp8
from gemm_ladder.measure import bench
from gemm_ladder.measure.bench import graphed
from gemm_ladder.measure.gpuinfo import Sampler

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 4096, 7168), (512, 28672, 4096), (2048, 7168, 2048),
          (128, 7168, 2048), (64, 4096, 7168)]
FORMS = {"as is": {}, "no A scales": {"GL_ABLATE_FP8_UNIT_SA": 1},
         "no scales": {"GL_ABLATE_FP8_UNIT_SA": 1, "GL_ABLATE_FP8_UNIT_SB": 1}}
ROW_FORMS = {"as is": {}, "no prefetch": {"GL_ABLATE_FP8_NO_SCALE_PREFETCH": 1}}


@dataclasses.dataclass(frozen=True)
class ProbeEntry(fp8.Fp8Entry):
    extra: tuple = ()

    def kernel_defines(self):
        return {**super().kernel_defines(), **dict(self.extra)}


def row_mode(b, M, N, K, x, w, reps):
    base = fp8.choose(M, N, K, "row", False)
    qa, sa = fp8_api.quantize_fp8(x, "row", operand="a")
    qb, sb = fp8_api.quantize_fp8(w, "row", operand="b")
    ref = fp8_api.dequantize_fp8(qa, sa, "row", "a") @ fp8_api.dequantize_fp8(qb, sb, "row", "b").t()
    theirs = graphed(lambda: torch._scaled_mm(qa, qb.t(), sa, sb, out_dtype=torch.bfloat16))
    graphs, names, out = [], [], []
    for name, extra in ROW_FORMS.items():
        e = ProbeEntry(**{f.name: getattr(base, f.name) for f in dataclasses.fields(fp8.Fp8Entry)},
                       extra=tuple(extra.items()))
        e = dataclasses.replace(e, name=f"{base.name}-row-{'-'.join(extra) or 'base'}")
        fn = lambda e=e: run_fp8(qa, qb, sa.reshape(M), sb.reshape(N), mode="row", out_dtype=torch.bfloat16,  # noqa
                                 entry=e)
        err = float((fn().float() - ref).abs().max() / ref.abs().max())
        graphs.append(graphed(fn))
        names.append((name, err))
    replays = [g.replay for g in graphs] + [theirs.replay]
    b.time_interleaved(replays, 3)
    with Sampler(b.nvml) as s:
        t = b.time_interleaved(replays, reps)
    med = [statistics.median(v) * 1e3 for v in t]
    for (name, err), us in zip(names, med[:-1]):
        out.append({"shape": [M, N, K], "entry": base.key, "mode": "row", "form": name, "us": us,
                    "scaled_mm_us": med[-1], "ratio": med[-1] / us, "err": err, "gpu": s.summary()})
        print(f"{M}x{N}x{K} {base.key:>15} {'row ' + name:>18}: {us:8.1f} us vs {med[-1]:8.1f}  x{med[-1] / us:.3f}"
              f"  err {err:.1e}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "fp8_block_scales.json"))
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("shapes", nargs="*")
    args = ap.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes] or SHAPES
    b = bench.Bench()
    rows = []
    for M, N, K in shapes:
        base = fp8.choose(M, N, K, "block", False)
        x = torch.randn(M, K, device="cuda", generator=b.gen)
        w = torch.randn(N, K, device="cuda", generator=b.gen)
        qa, sa = fp8_api.quantize_fp8(x, "block", operand="a")
        qb, sb = fp8_api.quantize_fp8(w, "block", operand="b")
        deq_b = fp8_api.dequantize_fp8(qb, sb, "block", "b")
        ref = fp8_api.dequantize_fp8(qa, sa, "block", "a") @ deq_b.t()
        ref_unit = qa.float() @ deq_b.t()
        ref_raw = qa.float() @ qb.float().t()
        ta, tsa = fp8_api.quantize_fp8(x, "tensor", operand="a")
        tb, tsb = fp8_api.quantize_fp8(w, "tensor", operand="b")
        theirs = graphed(lambda: torch._scaled_mm(ta, tb.t(), tsa, tsb, out_dtype=torch.bfloat16))
        graphs, names = [], []
        for name, extra in FORMS.items():
            e = ProbeEntry(**{f.name: getattr(base, f.name) for f in dataclasses.fields(fp8.Fp8Entry)},
                           extra=tuple(extra.items()))
            e = dataclasses.replace(e, name=f"{base.name}-{'-'.join(extra) or 'base'}")
            fn = lambda e=e: run_fp8(qa, qb, sa, sb, mode="block", out_dtype=torch.bfloat16,  # noqa: E731
                                              entry=e)
            want = ref_unit if extra.get("GL_ABLATE_FP8_UNIT_SA") else ref
            if extra.get("GL_ABLATE_FP8_UNIT_SB"):
                want = ref_raw
            err = float((fn().float() - want).abs().max() / want.abs().max())
            graphs.append(graphed(fn))
            names.append((name, err))
        tfn = lambda: run_fp8(ta, tb, tsa.reshape(1), tsb.reshape(1), mode="tensor",  # noqa: E731
                              out_dtype=torch.bfloat16, entry=base)
        graphs.append(graphed(tfn))
        names.append(("per-tensor, same entry", float((tfn().float() - ta.float() @ tb.float().t() * tsa * tsb)
                                                      .abs().max() / (ta.float() @ tb.float().t() * tsa * tsb)
                                                      .abs().max())))
        # the same kernels on the other mode's bytes: does the data (its power) set the pace?
        ones_a, ones_b = torch.ones_like(sa), torch.ones_like(sb)
        bfn = lambda: run_fp8(ta, tb, ones_a, ones_b, mode="block", out_dtype=torch.bfloat16, entry=base)  # noqa
        graphs.append(graphed(bfn))
        names.append(("block, per-tensor bytes", float((bfn().float() - ta.float() @ tb.float().t()).abs().max()
                                                      / (ta.float() @ tb.float().t()).abs().max())))
        one = torch.ones((), device="cuda")
        t2fn = lambda: run_fp8(qa, qb, one.reshape(1), one.reshape(1), mode="tensor", out_dtype=torch.bfloat16,  # noqa
                               entry=base)
        graphs.append(graphed(t2fn))
        names.append(("per-tensor, block bytes", float((t2fn().float() - ref_raw).abs().max() / ref_raw.abs().max())))
        graphs.append(graphed(lambda: torch._scaled_mm(qa, qb.t(), one, one, out_dtype=torch.bfloat16)))
        names.append(("_scaled_mm, block bytes", 0.0))
        replays = [g.replay for g in graphs] + [theirs.replay]
        b.time_interleaved(replays, 3)
        with Sampler(b.nvml) as s:
            t = b.time_interleaved(replays, args.reps)
        med = [statistics.median(x) * 1e3 for x in t]
        for (name, err), us in zip(names, med[:-1]):
            rows.append({"shape": [M, N, K], "entry": base.key, "form": name, "us": us, "scaled_mm_us": med[-1],
                         "ratio": med[-1] / us, "err": err, "gpu": s.summary()})
            print(f"{M}x{N}x{K} {base.key:>15} {name:>18}: {us:8.1f} us vs {med[-1]:8.1f}  x{med[-1] / us:.3f}"
                  f"  err {err:.1e}", flush=True)
        rows += row_mode(b, M, N, K, x, w, args.reps)
        del qa, qb, ta, tb, ref, ref_unit, ref_raw, graphs, theirs
        torch.cuda.empty_cache()
    with open(args.json, "w") as f:
        json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
