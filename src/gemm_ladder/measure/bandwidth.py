"""Memory roofs measured in the benchmark's own run: device-to-device copies.

HBM: one copy of a buffer many times larger than L2, after the L2 flush, as every timed
call in bench.py; bytes = read + written. L2: copies whose source and destination fit in
L2 together, captured in a CUDA graph (one launch, so launch gaps do not dominate a copy
of a few microseconds), not flushed; the graph's first copy warms L2. Both are timed by
`Bench.time_interleaved` (CUDA events, medians), the same timer as the GEMMs.
"""
from __future__ import annotations

import statistics

HBM_COPY_BYTES = 1 << 30  # per buffer; read + written = 2 GiB per copy
L2_COPIES = 64            # copies per graph replay
REPS = 20


def measure_copy(bench, *, hbm_bytes: int = HBM_COPY_BYTES, reps: int = REPS) -> dict:
    """{"hbm_copy_gbs", "l2_copy_gbs", ...} in GB/s (1e9 B/s), bytes read + written.
    A part that fails is reported under "<part>_error" instead of stopping the benchmark."""
    torch = bench.torch
    dev = f"cuda:{bench.dev}"
    out: dict = {"method": "device-to-device copy (Tensor.copy_), bytes read + written, median of "
                           f"{reps} CUDA-event timings; HBM: {hbm_bytes >> 20} MiB buffers after an L2 flush; "
                           f"L2: a CUDA graph of {L2_COPIES} copies of buffers together half the L2, no flush"}
    try:
        src = torch.ones(hbm_bytes // 4, dtype=torch.int32, device=dev)
        dst = torch.empty_like(src)
        dst.copy_(src)  # warm-up
        ms = bench.time_interleaved([lambda: dst.copy_(src)], reps)[0]
        out["hbm_copy_bytes"] = 2 * hbm_bytes
        out["hbm_copy_ms"] = statistics.median(ms)
        out["hbm_copy_gbs"] = 2 * hbm_bytes / out["hbm_copy_ms"] / 1e6
        del src, dst
    except Exception as e:  # report, don't stop the benchmark
        out["hbm_error"] = f"{type(e).__name__}: {e}"
    try:
        l2 = getattr(torch.cuda.get_device_properties(bench.dev), "L2_cache_size", 0) or (50 << 20)
        n = l2 // 4 // 4  # each buffer a quarter of L2, in int32 elements
        src = torch.ones(n, dtype=torch.int32, device=dev)
        dst = torch.empty_like(src)
        dst.copy_(src)
        torch.cuda.synchronize(bench.dev)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(L2_COPIES):
                dst.copy_(src)
        graph.replay()
        ms = bench.time_interleaved([graph.replay], reps, flush=False)[0]
        out["l2_bytes"] = l2
        out["l2_copy_bytes"] = 2 * n * 4 * L2_COPIES
        out["l2_copy_ms"] = statistics.median(ms)
        out["l2_copy_gbs"] = out["l2_copy_bytes"] / out["l2_copy_ms"] / 1e6
        del graph, src, dst
    except Exception as e:
        out["l2_error"] = f"{type(e).__name__}: {e}"
    torch.cuda.empty_cache()
    return out
