"""Probe: why the suite's timing of `matmul` rows whose operands are copied per call (staged)
swings from run to run (perf-notes item 104). Per shape and dtype, ours (`gemm_ladder.matmul(a,
b)`, b row-major (K, N), as `bench --suite ... --call matmul` calls it) and torch.matmul, timed
interleaved in four ways (microseconds; median, p10, p90; the ratio torch / ours of the medians):

  a       the suite's loop: Bench.time_interleaved (zeroing flush, start event, call, end event)
  a_host  the host time of each call inside that loop (perf_counter around it, no sync): a call
          that blocks on the GPU (a sync, an allocation that waits) reads long here
  b       as a, with a GPU spin (torch.cuda._sleep, --spin-us at the highest SM clock) between
          the flush and the start event: the queued GPU work outlasts the call's host enqueue
  c       host enqueue cost: perf_counter around one call after a synchronize (none after)
  d       each side captured once in a CUDA graph, replays timed as in a (skipped, with the
          reason, where capture fails)

a, a_host and b run --rounds times in that order, then c and d. Each row also records the
library's and the allocator's counters before and after the timed loops (configurations
built, tensor maps encoded, pointer triples memoized, cudaMalloc segments, allocation retries):
a per-call build, encode or allocation shows as a difference.

    PYTHONPATH=src python benchmarks/probes/host/probe_staged_timing.py --out $OUT/x.json
"""
import argparse, json, statistics, time
from pathlib import Path
import torch
import gemm_ladder
from gemm_ladder.library import fastconfig, fastpath
from gemm_ladder.measure.bench import Bench, git_commit, graphed, percentile

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="1009x1013x1019,127x8191x255,1000x1000x1000,1024x1024x1024",
                help="MxNxK,...; 1024^3 is the control (read in place)")
ap.add_argument("--dtypes", default="float16,bfloat16")
ap.add_argument("--reps", type=int, default=100, help="per side and loop (the suite's count at these sizes)")
ap.add_argument("--rounds", type=int, default=2, help="repeats of ways a and b")
ap.add_argument("--spin-us", type=float, default=200.0)
ap.add_argument("--out", default=None)
args = ap.parse_args()
bench = Bench(0)
SM_MHZ = bench.nvml.static().get("max_sm_clock_mhz") or 1980
SPIN_CYCLES = int(args.spin_us * SM_MHZ)  # at least spin_us: exactly at the highest clock


def stats(us: list[float]) -> dict:
    return {"median": statistics.median(us), "p10": percentile(us, .1), "p90": percentile(us, .9)}


def order(r: int, n: int):
    return range(n) if r % 2 == 0 else reversed(range(n))


def host_timed(fn, sink: list):
    """fn with the host time of each call (us) appended to sink."""
    def call():
        t0 = time.perf_counter()
        fn()
        sink.append((time.perf_counter() - t0) * 1e6)
    return call


def way_a(fns, reps):
    host = [[] for _ in fns]
    ev = bench.time_interleaved([host_timed(f, h) for f, h in zip(fns, host)], reps)
    return [[x * 1e3 for x in e] for e in ev], host


def way_b(fns, reps, cycles):
    """Bench.time_interleaved with torch.cuda._sleep(cycles) after each flush, in us."""
    return [[x * 1e3 for x in e] for e in bench.time_interleaved(fns, reps, lead_cycles=cycles)]


def way_c(fns, reps):
    out = [[] for _ in fns]
    for r in range(reps):
        for i in order(r, len(fns)):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fns[i]()
            out[i].append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return out


def way_d(fns, reps):
    graphs = [graphed(f) for f in fns]
    return [[x * 1e3 for x in e] for e in bench.time_interleaved([g.replay for g in graphs], reps)]


def counters(cfg) -> dict:
    st = torch.cuda.memory_stats()
    maps = getattr(cfg, "_maps", None)
    return {"configs_built": fastpath.CONFIGS.misses, "tensor_maps_encoded": fastconfig.TENSOR_MAPS.misses,
            "pointer_triples": len(maps) if maps is not None else None,
            "scratch_sets_kept": len(cfg.scratch._sets) if hasattr(cfg, "scratch") else None,
            "cudaMalloc_segments": st.get("segment.all.allocated", 0),
            "alloc_retries": st.get("num_alloc_retries", 0)}


def spin_us() -> float:
    """The spin's own length (events after a flush), median of 10."""
    return statistics.median(way_b([lambda: torch.cuda._sleep(SPIN_CYCLES)], 10, 1)[0])


def show(name: str, way: str, pair) -> dict:
    o, t = stats(pair[0]), stats(pair[1])
    ratio = t["median"] / o["median"]
    print(f"{name:26s} {way:8s} ours {o['median']:7.1f} [{o['p10']:6.1f}, {o['p90']:7.1f}]  torch "
          f"{t['median']:7.1f} [{t['p10']:6.1f}, {t['p90']:7.1f}] us  torch/ours {ratio:5.2f}", flush=True)
    return {"ours": o, "torch": t, "ratio": ratio, "ours_us": pair[0], "torch_us": pair[1]}


def measure(M: int, N: int, K: int, dtype) -> dict:
    a, b = bench.inputs(M, N, K, dtype)
    b = b.T.contiguous()  # (K, N) row-major: the suite's matmul call
    fns = [lambda: gemm_ladder.matmul(a, b), lambda: torch.matmul(a, b)]
    ref = torch.matmul(a.float(), b.float())
    err = ((fns[0]().float() - ref).abs().max() / ref.abs().max()).item()
    del ref
    cfg = fastpath.config_for("mm", a, b)
    staged = ",".join(x for x, lay in (("a", cfg.a), ("b", cfg.b)) if not lay.direct)
    name = f"{M}x{N}x{K} {'bf16' if dtype == torch.bfloat16 else 'fp16'} [{staged or '-'}]"
    row = {"M": M, "N": N, "K": K, "dtype": str(dtype).split(".")[-1], "kernel": cfg.step.key, "staged": staged,
           "copy_launch": getattr(cfg, "_copy", None) is not None, "rel_err": err, "ways": {}}
    print(f"{name}: {cfg.step.key}, rel err {err:.2e}", flush=True)
    fns[1]()  # warm-up, as the suite
    row["counters_before"] = counters(cfg)
    for rnd in range(args.rounds):
        ev, host = way_a(fns, args.reps)
        row["ways"][f"a{rnd}"] = show(name, f"a{rnd}", ev)
        row["ways"][f"a_host{rnd}"] = show(name, f"a_host{rnd}", host)
        row["ways"][f"b{rnd}"] = show(name, f"b{rnd}", way_b(fns, args.reps, SPIN_CYCLES))
    row["ways"]["c"] = show(name, "c", way_c(fns, args.reps))
    row["counters_after"] = counters(cfg)
    try:
        row["ways"]["d"] = show(name, "d", way_d(fns, args.reps))
    except Exception as e:  # capture refused: say why, go on
        torch.cuda.synchronize()
        row["graph_error"] = f"{type(e).__name__}: {e}"
        print(f"{name:26s} d        skipped: {row['graph_error']}", flush=True)
    row["gpu"] = bench.nvml.sample()
    return row


t_start = time.perf_counter()
spin = {"us_asked": args.spin_us, "cycles": SPIN_CYCLES, "sm_mhz": SM_MHZ, "us_measured": spin_us()}
print(f"spin: {SPIN_CYCLES} cycles, {spin['us_measured']:.1f} us measured; flush "
      f"{bench.flush_buf.numel() * 4 >> 20} MiB", flush=True)
rows = []
for dt in args.dtypes.split(","):
    for spec in args.shapes.split(","):
        rows.append(measure(*map(int, spec.split("x")), getattr(torch, dt)))
        torch.cuda.empty_cache()
print(f"{time.perf_counter() - t_start:.1f} s", flush=True)
if args.out:
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(dict(commit=git_commit(), torch=torch.__version__, cuda=torch.version.cuda,
                                              gpu=bench.nvml.static(), reps=args.reps, spin=spin, rows=rows), indent=1))
