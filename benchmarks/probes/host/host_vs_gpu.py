"""Probe: host time per call against the GPU time per call (events around 2,000 back-to-back
calls) at 128^3 fp16, for the call forms `bench --api` times: is a form host-bound or GPU-bound?

    PYTHONPATH=src python benchmarks/probes/host/host_vs_gpu.py
"""
import time, torch, gemm_ladder as gl
from gemm_ladder.runtime import fastpath
a = torch.randn(128, 128, device="cuda").half(); b_nk = torch.randn(128, 128, device="cuda").half(); b_kn = b_nk.T.contiguous()
c = torch.empty(128, 128, device="cuda").half()
forms = {"nt out": lambda: gl.matmul_nt(a, b_nk, out=c), "mm b_kn": lambda: gl.matmul(a, b_kn), "mm b_nk.T": lambda: gl.matmul(a, b_nk.T),
         "torch b_kn": lambda: torch.matmul(a, b_kn), "torch b_nk.T": lambda: torch.matmul(a, b_nk.T)}
for name, f in forms.items():
    for _ in range(50): f()
    torch.cuda.synchronize()
    # GPU time per call: events around 200 calls, the host far ahead (queue never empty)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    line = []
    for n in (2000, 300):  # 300 calls fit the launch queue: a GPU-bound form would return early
        res = []
        for r in range(5):
            torch.cuda.synchronize(); t0 = time.perf_counter(); e0.record()
            for _ in range(n): f()
            e1.record(); t1 = time.perf_counter(); torch.cuda.synchronize()
            res.append(((t1 - t0) / n * 1e6, e0.elapsed_time(e1) / n * 1e3))
        res.sort()
        line.append(f"{n} calls: host {res[2][0]:6.2f} gpu {res[2][1]:6.2f} us/call")
    # the kernel alone: one call between two syncs, events on the stream
    ks = []
    for _ in range(20):
        torch.cuda.synchronize(); e0.record(); f(); e1.record(); torch.cuda.synchronize(); ks.append(e0.elapsed_time(e1) * 1e3)
    ks.sort()
    cfg = fastpath.config_for("mm" if "mm" in name else "nt", a, b_kn if "b_kn" in name else (b_nk.T if "nk.T" in name else b_nk), c if "out" in name else None) if not name.startswith("torch") else None
    print(f"{name:14s} {' | '.join(line)} | one call alone {ks[10]:6.2f} us  {cfg.step.key if cfg else ''}", flush=True)
