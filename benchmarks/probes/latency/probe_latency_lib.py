"""What the latency probes share: a call's kernels' device time (torch profiler / CUPTI) after
an L2 flush."""
import statistics

import torch
from torch.profiler import ProfilerActivity, profile

_FLUSH = {}


def flush_name(bench) -> str:
    """The name of the flush's kernel (the marker between calls)."""
    if "name" not in _FLUSH:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            bench.flush_l2(); torch.cuda.synchronize()
        _FLUSH["name"] = next(e.name for e in prof.events() if e.device_type.name == "CUDA")
    return _FLUSH["name"]


def profiled(bench, fn, reps: int) -> dict:
    """Per call after a flush: kernels' summed device time, span, gap after the flush (us)."""
    flush = flush_name(bench)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            bench.flush_l2()
            fn()
        torch.cuda.synchronize()
    ev = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                if e.device_type.name == "CUDA")
    calls, cur, flush_end = [], None, None
    for s, e, name in ev:
        if name == flush:
            if cur:
                calls.append(cur)
            cur, flush_end = None, e
            continue
        if cur is None:
            cur = {"first": s, "last": e, "dur": 0.0, "gap": s - flush_end, "names": []}
        cur["last"] = max(cur["last"], e); cur["dur"] += e - s; cur["names"].append(name)
    if cur:
        calls.append(cur)
    med = lambda k: statistics.median(c[k] for c in calls)  # noqa: E731
    return {"dur_us": med("dur"), "span_us": statistics.median(c["last"] - c["first"] for c in calls),
            "gap_us": med("gap"), "kernels": sorted(set(n[:90] for c in calls for n in c["names"])),
            "calls": len(calls)}
