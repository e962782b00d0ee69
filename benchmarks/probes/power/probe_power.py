"""Sustained load: what clock and power each kernel runs at, and so its work per clock and its
energy per FLOP. Each kernel (ours through launch.plan, cuBLAS through torch.matmul) is
launched back to back for --seconds (no L2 flush: a steady state), while NVML is polled every
20 ms (SM clock, power, clock-event reasons) and its energy counter is read at both ends.
Reports achieved TFLOP/s, the median SM clock, the mean power, FLOP per SM per clock (the
tensor pipe's dense fp16 peak is 4096) and pJ per FLOP.

    PYTHONPATH=src python benchmarks/probes/power/probe_power.py [--keys cublas,9,9:c1,8,10]
        [--sizes 4096,2048,8192] [--seconds 2.5] [--json out.json]
"""
import argparse, json, statistics, threading, time
import pynvml
import torch
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch, steps

REASONS = {0x1: "idle", 0x2: "app_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
           0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks"}
ap = argparse.ArgumentParser()
ap.add_argument("--keys", default="cublas,9,9:c1,8,10")
ap.add_argument("--sizes", default="4096,2048,8192")
ap.add_argument("--dtype", default="float16")
ap.add_argument("--seconds", type=float, default=2.5)
ap.add_argument("--json", default=None)
args = ap.parse_args()
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
bench = Bench(0)
sms = launch.num_sms(0)
dtype = getattr(torch, args.dtype)
rows = []


def sustained(fn, seconds):
    samples, stop = [], threading.Event()

    def poll():
        while not stop.is_set():
            samples.append((pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                            pynvml.nvmlDeviceGetPowerUsage(h) / 1000,
                            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)))
            time.sleep(0.02)

    t_end = time.time() + 0.5  # warm-up: clocks and power settle
    while time.time() < t_end:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
    th = threading.Thread(target=poll)
    e0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    th.start()
    s.record()
    calls, t_end = 0, time.time() + seconds
    while time.time() < t_end:
        for _ in range(20):
            fn()
        calls += 20
        torch.cuda.synchronize()
    e.record()
    torch.cuda.synchronize()
    e1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    stop.set()
    th.join()
    ms = s.elapsed_time(e)
    reasons = 0
    for *_, r in samples:
        reasons |= r
    return dict(calls=calls, ms=ms, joules=(e1 - e0) / 1000, clock_mhz=statistics.median(c for c, _, _ in samples),
                power_w_samples=statistics.median(p for _, p, _ in samples),
                reasons=[name for bit, name in REASONS.items() if reasons & bit])


for size in map(int, args.sizes.split(",")):
    M = N = K = size
    a, b = bench.inputs(M, N, K, dtype)
    flop = 2.0 * M * N * K
    for key in args.keys.split(","):
        out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
        if key == "cublas":
            fn = lambda: torch.matmul(a, b.T, out=out)  # noqa: E731
        else:
            fn = launch.plan(steps.get_step(key), a, b, out)
        fn()
        torch.cuda.synchronize()
        ok = bool(check_product(out, a, b)[0])
        r = sustained(fn, args.seconds)
        tflops = flop * r["calls"] / (r["ms"] * 1e-3) / 1e12
        watts = r["joules"] / (r["ms"] * 1e-3)
        row = dict(size=size, dtype=args.dtype, kernel=key, ok=ok, tflops=tflops, us_per_call=r["ms"] * 1e3 / r["calls"],
                   clock_mhz=r["clock_mhz"], watts=watts, watts_sampled=r["power_w_samples"],
                   flop_per_sm_clock=tflops * 1e12 / (sms * r["clock_mhz"] * 1e6), pj_per_flop=watts / (tflops * 1e12) * 1e12,
                   reasons=r["reasons"])
        rows.append(row)
        print(f"{size}^3 {key:6s} ok={ok} {row['us_per_call']:8.1f} us/call {tflops:6.1f} TFLOP/s  SM {r['clock_mhz']:.0f} MHz  "
              f"{watts:5.1f} W  {row['flop_per_sm_clock']:6.0f} FLOP/SM/clk  {row['pj_per_flop']:.3f} pJ/FLOP  {','.join(r['reasons'])}",
              flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), gpu=torch.cuda.get_device_name(),
                   power_limit_w=pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000, rows=rows), open(args.json, "w"), indent=1)
