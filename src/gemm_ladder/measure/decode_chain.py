"""`gemm-ladder bench --decode-chain`: one transformer layer's decode-step GEMMs captured in one
CUDA graph, ours against cuBLAS's in the same graph form, interleaved in one process.

The chain (Llama-3-8B widths: hidden 4096, 32 query and 8 key/value heads of 128, MLP 14336)
at M tokens, each GEMM reading the output of the one before, as a decode step does:
  qkv  = x @ W_qkv^T                 (M x 4096) @ (4096 x 6144)
  o    = qkv[:, :4096] @ W_o^T       the query slice stands in for attention's output
  gu   = o @ W_gate_up^T             (4096 x 28672)
  down = gu[:, :14336] @ W_down^T    the gate half stands in for silu(gate) * up
Attention and the activation are left out: the chain times the GEMMs and their launches. The
weights are nn.Linear's (N, K) tensors, multiplied as `x @ w.T`; their entries are scaled by
1/sqrt(K), so every output stays near unit size in fp16 too.

Forms, each one graph of the four GEMMs (FORMS):
  cublas       torch.matmul(a, w.T, out=...)
  ours         gemm_ladder.matmul(a, w.T, out=..., static_b=True), as a decode step calls it (the
               weights are written by no kernel of the chain): a small-M kernel launched
               programmatically, issuing the weights of its first ring stages before it waits
               for the one before, the activations after
  b_waits      the same without static_b: every load after that wait
  prefetch     as b_waits, the kernels bringing their first PREFETCH_KT k-tiles of the weights
               into L2 before the wait (an experiment: prefetch_kt > 0)
  no_pdl       as b_waits, launched in stream order (chain_pdl=False): each starts when the one
               before has ended
Method: every form's outputs poisoned (NaN), one replay, each GEMM checked against an fp32
product of the inputs it read; then replays interleaved, L2 flushed before each, CUDA events,
medians; NVML sampled during the timed loop. Bytes: every GEMM's A, B and C once; frac_copy_bw
is the chain's bytes per second over the device-to-device copy rate measured in the same process.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import platform
import statistics
from pathlib import Path

from . import bench
from .bandwidth import measure_copy
from .gpuinfo import Sampler, record_path

HIDDEN, HEAD_DIM, Q_HEADS, KV_HEADS, MLP = 4096, 128, 32, 8, 14336
QKV = (Q_HEADS + 2 * KV_HEADS) * HEAD_DIM  # 6144
# (name, N, K, input: (source GEMM or None for x, columns read))
GEMMS = (("qkv", QKV, HIDDEN, (None, HIDDEN)), ("o", HIDDEN, HIDDEN, ("qkv", HIDDEN)),
         ("gate_up", 2 * MLP, HIDDEN, ("o", HIDDEN)), ("down", HIDDEN, MLP, ("gate_up", MLP)))
ROWS = (1, 8, 16)
FORMS = ("cublas", "ours", "b_waits", "prefetch", "no_pdl")
PREFETCH_KT = 8
REPS = 60


def chain_bytes(M: int, elem: int = 2) -> int:
    """A, B and C of every GEMM once."""
    return sum(elem * (M * K + N * K + M * N) for _, N, K, _ in GEMMS)


def chain_flop(M: int) -> float:
    return sum(2.0 * M * N * K for _, N, K, _ in GEMMS)


def _variant(st, form: str):
    """The library's pick for one GEMM in an experiment form: a small-M entry with the form's
    change (other families have no chain moves, and run as they are)."""
    if form in ("ours", "b_waits", "cublas") or not hasattr(st, "chain_pdl"):
        return None
    changes = {"prefetch_kt": PREFETCH_KT} if form == "prefetch" else {"chain_pdl": False}
    return dataclasses.replace(st, key=f"{st.key}~{form}", **changes)


class Chain:
    """The chain's tensors on one device and dtype, and one captured graph per form."""

    def __init__(self, b: bench.Bench, M: int, dtype):
        import gemm_ladder
        from ..library import fastpath
        torch = b.torch
        self.torch, self.M = torch, M
        dev = f"cuda:{b.dev}"
        self.x = torch.randn((M, HIDDEN), device=dev, generator=b.gen).to(dtype)
        self.w = {name: (torch.randn((N, K), device=dev, generator=b.gen) / math.sqrt(K)).to(dtype)
                  for name, N, K, _ in GEMMS}
        self.out = {f: {name: torch.empty((M, N), device=dev, dtype=dtype) for name, N, _, _ in GEMMS}
                    for f in FORMS}
        self.kernels: dict[str, list[str]] = {}
        self.graphs = {}
        for form in FORMS:
            steps = []
            for name, *_ in GEMMS:  # warm-up: compile, choose, build each call's configuration
                a, w, out = self.operands(form, name)
                if form == "cublas":
                    torch.matmul(a, w.T, out=out)
                    continue
                st = fastpath.config_for("mm", a, w.T, out, static_b=form == "ours").step
                steps.append(_variant(st, form) or None)
                gemm_ladder.matmul(a, w.T, out, step=steps[-1], static_b=form == "ours")
                self.kernels.setdefault(form, []).append(steps[-1].key if steps[-1] else st.key)
            torch.cuda.synchronize(b.dev)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i, (name, *_) in enumerate(GEMMS):
                    a, w, out = self.operands(form, name)
                    if form == "cublas":
                        torch.matmul(a, w.T, out=out)
                    else:
                        gemm_ladder.matmul(a, w.T, out, step=steps[i], static_b=form == "ours")
            self.graphs[form] = g
        self.kernels["cublas"] = ["cuBLAS"] * len(GEMMS)

    def operands(self, form: str, name: str):
        src, cols = next(g[3] for g in GEMMS if g[0] == name)
        a = self.x if src is None else self.out[form][src][:, :cols]
        return a, self.w[name], self.out[form][name]

    def check(self, form: str, dtype: str) -> tuple[bool, float, str]:
        """Outputs poisoned, one replay, each GEMM against fp32 on the inputs it read."""
        torch = self.torch
        for t in self.out[form].values():
            t.fill_(float("nan"))
        self.graphs[form].replay()
        torch.cuda.synchronize()
        worst, errors = 0.0, []
        for name, *_ in GEMMS:
            a, w, out = self.operands(form, name)
            ok, _, rel, err = bench.check_output(out, a.float() @ w.float().T, dtype)
            worst = max(worst, rel)
            if not ok:
                errors.append(f"{name}: {err}")
        return not errors, worst, "; ".join(errors)


def run(rows=ROWS, dtypes=("bfloat16",), *, reps: int = REPS, device_index: int = 0, log=print) -> dict:
    import torch
    torch.cuda.set_device(device_index)
    b = bench.Bench(device_index)
    copy = measure_copy(b)
    result = {"kind": "gemm-ladder bench --decode-chain", "commit": bench.git_commit(),
              "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "host": platform.node(),
              "gpu": {"torch_name": torch.cuda.get_device_name(device_index), **b.nvml.static()},
              "torch": torch.__version__, "cuda": torch.version.cuda,
              "method": {"chain": [dict(zip(("gemm", "N", "K", "input"), g)) for g in GEMMS], "forms": FORMS,
                         "graph": "one CUDA graph per form, replayed", "l2_flush_bytes": b.flush_buf.numel() * 4,
                         "interleaved": True, "timer": "CUDA events per replay", "statistic": "median",
                         "bytes": "A, B and C of every GEMM once", "copy_bandwidth": copy},
              "rows": []}
    copy_gbs = copy["hbm_copy_gbs"]
    for dtype in dtypes:
        tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
        for M in rows:
            log(f"decode chain M={M} {dtype} ...")
            try:
                chain = Chain(b, M, tdt)
            except Exception as e:  # report, go on
                result["rows"].append({"M": M, "dtype": dtype, "ok": False, "error": f"{type(e).__name__}: {e}"})
                log(f"  failed: {type(e).__name__}: {e}")
                continue
            checks = {f: chain.check(f, dtype) for f in FORMS}
            timed = [f for f in FORMS if checks[f][0]]
            with Sampler(b.nvml) as s:
                times = b.time_interleaved([chain.graphs[f].replay for f in timed], reps)
            med = {f: statistics.median(t) * 1e3 for f, t in zip(timed, times)}  # us
            p10 = {f: bench.percentile(t, .1) * 1e3 for f, t in zip(timed, times)}
            p90 = {f: bench.percentile(t, .9) * 1e3 for f, t in zip(timed, times)}
            cub = med.get("cublas", math.nan)
            nbytes = chain_bytes(M, tdt.itemsize)
            for f in FORMS:
                ok, rel, err = checks[f]
                row = {"M": M, "dtype": dtype, "form": f, "ok": ok, "rel_err": rel, "error": err,
                       "kernels": chain.kernels.get(f, []), "bytes": nbytes, "flop": chain_flop(M), "reps": reps}
                if f in med:
                    us = med[f]
                    row.update({"chain_us": us, "chain_us_p10": p10[f], "chain_us_p90": p90[f], "cublas_us": cub,
                                "ratio_to_cublas": cub / us, "gbs": nbytes / us / 1e3,
                                "frac_copy_bw": nbytes / us / 1e3 / copy_gbs, "gpu": s.summary()})
                result["rows"].append(row)
                log(f"  {f:>12}: " + (f"{row['chain_us']:8.1f} us  x{row['ratio_to_cublas']:.3f} cuBLAS  "
                                      f"{row['frac_copy_bw']:.0%} of copy BW" if "chain_us" in row
                                      else f"not timed: {err}"))
            del chain
            torch.cuda.empty_cache()
    result["summary"] = summary(result["rows"])
    result["gpu_after"] = b.nvml.sample()
    return result


def summary(rows: list[dict]) -> dict:
    """Per form: the ratio to cuBLAS's chain and the copy-bandwidth fraction at each M."""
    out = {"all_ok": bool(rows) and all(r.get("ok") for r in rows)}
    for f in FORMS:
        rs = [r for r in rows if r.get("form") == f and "chain_us" in r]
        if rs:
            out[f] = {f"M={r['M']} {r['dtype']}": {"ratio_to_cublas": round(r["ratio_to_cublas"], 4),
                                                   "frac_copy_bw": round(r["frac_copy_bw"], 4)} for r in rs}
    return out


def default_json_path(out_dir: Path, result: dict) -> Path:
    return record_path(out_dir, result, "decode_chain")


def cli_main(args, console, out_dir: Path, json_path: Path | None = None) -> int:
    import json
    import sys
    dtypes = {"both": ("float16", "bfloat16"), None: ("bfloat16",)}.get(args.dtype, (args.dtype,))
    say = lambda m: console.print(m, markup=False, highlight=False)  # noqa: E731
    result = run(dtypes=dtypes, reps=min(args.reps, 200), log=say)
    result["command"] = " ".join(["gemm-ladder"] + sys.argv[1:])
    path = json_path or default_json_path(out_dir, result)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    say(f"results: {path}")
    return 0 if result["summary"]["all_ok"] else 1
