"""Probe: host time per call (back-to-back, one sync at the end) and device time (CUDA events,
L2 flushed, interleaved with torch.matmul) of `matmul` on shapes whose operands are staged
(rows TMA cannot take) or whose N is not a multiple of 8.

    PYTHONPATH=src python benchmarks/probes/host/probe_staged.py [--json F]
"""
import argparse, json, statistics, time
import torch
import gemm_ladder
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import fastpath

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="127x8191x255,1009x1013x1019,920x63x336,16x4099x4096,128x128x128")
ap.add_argument("--calls", type=int, default=500)
ap.add_argument("--json", default=None)
ap.add_argument("--breakdown", action="store_true", help="also time the staged call's pieces")
args = ap.parse_args()


def per_call_us(fn, n=1000):
    fn()
    torch.cuda.synchronize()
    best = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best.append((time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(best)
bench, rows = Bench(0), []
for spec in args.shapes.split(","):
    M, N, K = map(int, spec.split("x"))
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()  # row-major (K, N): the usual a @ b
    ours, ref = lambda: gemm_ladder.matmul(a, b), lambda: torch.matmul(a, b)
    err = (ours().float() - ref().float()).abs().max().item()
    cfg = fastpath.config_for("mm", a, b)
    host = {}
    for name, fn in (("ours", ours), ("torch", ref)):
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        per = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                fn()
            per.append((time.perf_counter() - t0) / args.calls * 1e6)
            torch.cuda.synchronize()
        host[name] = statistics.median(per)
    t = bench.time_interleaved([ours, ref], 60)
    dev = [statistics.median(x) * 1e3 for x in t]
    row = dict(M=M, N=N, K=K, kernel=cfg.step.key, staged=[n for n, op in (("a", cfg.a), ("b", cfg.b)) if not op.direct],
               host_us=host["ours"], torch_host_us=host["torch"], us=dev[0], cublas_us=dev[1],
               ratio_to_cublas=dev[1] / dev[0], max_abs_err=err)
    if args.breakdown and cfg.scratch.shapes:
        from gemm_ladder.runtime import fastconfig
        stream = fastconfig._raw_stream(0)
        sc = cfg.scratch.get(stream, False)
        pa, pb = a.data_ptr(), b.data_ptr()
        c = ours()
        parts = {"key": lambda: fastpath._key("mm", a, b, None, None, pa, pb),
                 "capturing": fastconfig._capturing, "scratch.get": lambda: cfg.scratch.get(stream, False),
                 "result alloc": lambda: torch.empty(cfg.M * cfg.c.ld, dtype=a.dtype, device=a.device).as_strided(
                     cfg.shape, cfg.strides),
                 "launch (maps memo)": lambda: cfg._launch(pa if cfg.a.direct else sc["a"].data_ptr(),
                                                          pb if cfg.b.direct else sc["b"].data_ptr(),
                                                          c.data_ptr(), stream, sc),
                 "whole call": ours}
        if getattr(cfg, "_copy", None) is not None:  # one launch of the staging kernel
            ptrs = []
            for name in cfg._copy_ops:
                ptrs += [{"a": pa, "b": pb}[name], sc[name].data_ptr()]
            ptrs = tuple(ptrs) + tuple(ptrs[:2]) * (2 - len(cfg._copy_ops))
            parts["stage copy (one launch)"] = lambda: cfg._copy(stream, (), ptrs)
        if "a" in sc:
            parts["stage a (torch)"] = lambda: cfg._stage_a(a, sc["a"])
        if "b" in sc:
            parts["stage b (torch)"] = lambda: cfg._stage_b(b, sc["b"])
        row["breakdown_us"] = {k: per_call_us(f) for k, f in parts.items()}
        print("   ", ", ".join(f"{k} {v:.1f}" for k, v in row["breakdown_us"].items()), flush=True)
    rows.append(row)
    print(f"{spec}: {cfg.step.key} staged={row['staged']} host {host['ours']:.1f} us (torch {host['torch']:.1f}); "
          f"timed {dev[0]:.1f} us vs {dev[1]:.1f} ({row['ratio_to_cublas']:.2f}); err {err:.3g}", flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
