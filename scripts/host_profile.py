"""Where the host time of one gemm_ladder call goes (issue 9), on the GPU machine:

    PYTHONPATH=src python scripts/host_profile.py --json out.json

At 128³ fp16 it times, as `gemm-ladder bench --api` times the host (back-to-back calls, no
synchronization in between, wall clock / calls; median of the rounds), each component of a
call — the result's allocation, the configuration key, its lookup, the prepared launch alone
— then the full calls of each form and torch.matmul of the same form. The components are
not additive to the full call (the loop and call frames around them are not counted twice),
but they say which part to shrink.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def _per_call_us(torch, fn, calls: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def profile(size: int = 128, calls: int = 2000, rounds: int = 5, device: str = "cuda") -> dict:
    """The result dict (device="cpu": the tests' emulated driver, tests/fake_gpu.py)."""
    import torch
    import gemm_ladder as gl
    from gemm_ladder.library import fastconfig, fastpath

    dt = torch.float16
    a = torch.randn(size, size, device=device).to(dt)
    b_nk = torch.randn(size, size, device=device).to(dt)
    b_kn = b_nk.T.contiguous()
    b_view = b_nk.T
    c, c_torch = (torch.empty(size, size, device=device, dtype=dt) for _ in range(2))
    forms = {
        "matmul_nt(a, b_nk, out=c)": (lambda: gl.matmul_nt(a, b_nk, out=c),
                                      lambda: torch.matmul(a, b_view, out=c_torch), ("nt", b_nk, c)),
        "matmul(a, b_nk.T)": (lambda: gl.matmul(a, b_view), lambda: torch.matmul(a, b_view), ("mm", b_view, None)),
        "matmul(a, b_kn)": (lambda: gl.matmul(a, b_kn), lambda: torch.matmul(a, b_kn), ("mm", b_kn, None)),
    }
    rows: dict[str, float] = {}
    steps = {}
    components = {}
    for form, (ours, theirs, (kind, b, out)) in forms.items():
        ours(), theirs()  # warm: compile, configuration, cuBLAS handle
        cfg = fastpath.config_for(kind, a, b, out)
        steps[form] = getattr(cfg.step, "key", None)
        pa, pb = a.data_ptr(), b.data_ptr()
        key = fastpath._key(kind, a, b, out, None, pa, pb)
        d = fastpath.CONFIGS.entries
        components[f"{form}: fastpath._key"] = lambda kind=kind, b=b, out=out, pa=pa, pb=pb: \
            fastpath._key(kind, a, b, out, None, pa, pb)
        components[f"{form}: config lookup (dict get + move_to_end)"] = lambda key=key, d=d: \
            (d.get(key), d.move_to_end(key))
        # the prepared launch alone, writing into c (maps encoded for these pointers); only
        # when nothing is staged (else pa/pb are not what the kernel reads)
        launch_args = None
        if cfg.a.direct and cfg.b.direct and isinstance(cfg, fastconfig.LadderConfig):
            launch_args = (cfg._map_addresses(pa, pb, c.data_ptr()), ())
        elif cfg.a.direct and cfg.b.direct and isinstance(cfg, fastconfig.SmallMConfig) and cfg.reduce is None:
            launch_args = (cfg._map_addresses(pa, pb, c.data_ptr()), (0, c.data_ptr()))
        if launch_args is not None:
            components[f"{form}: ReusableLaunch call ({steps[form]})"] = \
                lambda L=cfg.launch, s=fastconfig._raw_stream(cfg.dev), m=launch_args[0], p=launch_args[1]: L(s, m, p)
    shape, strides = (size, size), (size, 1)
    components["torch.empty_strided (result)"] = lambda: torch.empty_strided(shape, strides, dtype=dt, device=a.device)
    components["a.new_empty_strided (result, as the fast path)"] = lambda: a.new_empty_strided(shape, strides)
    components["_current_device + _raw_stream"] = lambda: (fastconfig._current_device(), fastconfig._raw_stream(0))
    for form, (ours, theirs, _) in forms.items():
        components[f"full: {form}"] = ours
        components[f"torch.matmul: {form}"] = theirs

    samples = {name: [] for name in components}
    for r in range(rounds):
        names = list(components) if r % 2 == 0 else list(reversed(components))
        for name in names:
            samples[name].append(_per_call_us(torch, components[name], calls))
    for name, xs in samples.items():
        rows[name] = statistics.median(xs)
    return {"size": size, "dtype": "float16", "calls": calls, "rounds": rounds, "steps": steps,
            "us_per_call": rows, "rounds_us": {k: [round(x, 3) for x in v] for k, v in samples.items()},
            "gpu": torch.cuda.get_device_name() if device != "cpu" else "cpu (emulated)", "torch": torch.__version__}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=128)
    args = ap.parse_args(argv)
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA GPU is available here")
        from gemm_ladder.library import runner
        runner.check_device(torch.device("cuda:0"))
    except Exception as e:
        print(f"host_profile: needs an sm_90a CUDA GPU: {e}", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    res = profile(args.size, args.calls, args.rounds)
    print(f"host µs per call, {args.size}³ fp16, {args.calls} back-to-back calls, median of {args.rounds} rounds "
          f"({res['gpu']}, launch: cuda-bindings cuLaunchKernelEx); steps: "
          + ", ".join(f"{k} -> {v}" for k, v in res["steps"].items()))
    width = max(map(len, res["us_per_call"]))
    for name, us in res["us_per_call"].items():
        print(f"  {name:<{width}}  {us:8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
        print(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
