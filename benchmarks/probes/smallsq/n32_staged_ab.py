"""Probe (perf-notes item 114): a 64 x 32 tile whose C leaves by one TMA store (smallm:n32t)
against the same tile with 4-byte register stores (smallm:n32), smallm:n64s, the library's pick
and cuBLAS, at the small squares (the 32-wide entries with their M limit lifted: whole tiles in
one wave) and decode shapes (M <= 16, the entries as registered). One process: first n32t's bits
against n32's on the same inputs, then every candidate checked on a poisoned output against fp32
and repeated bit for bit, all timed interleaved with cuBLAS after each L2 flush (bench.py's
zeroing one and a read), medians; SM clock and power sampled over the timed sweep.

    PYTHONPATH=src python benchmarks/probes/smallsq/n32_staged_ab.py [--json F] [--shapes ...] [--reps N]
"""
import argparse
import datetime
import json

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner, select
from gemm_ladder.measure import probe
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.gpuinfo import Sampler

ENTRIES = ("smallm:n32t", "smallm:n32", "smallm:n64s")
ap = argparse.ArgumentParser()
probe.add_sweep_args(ap, shapes="256x256x256,384x384x384,512x512x512,1x4096x4096,16x4096x4096")
args = ap.parse_args()
bench = Bench(0)
sms = torch.cuda.get_device_properties(0).multi_processor_count


def entry(key: str, M: int, N: int, K: int) -> smallm.SmallM:
    """The registered entry, or where it does not take the shape the same build with its M limit
    lifted (key ...:anym; the kernel takes any M, the limit is the selection's)."""
    fam = smallm.FAMILIES[key]
    return fam if fam.accepts(M, N, K) else smallm.with_fields(fam, "anym", max_m=1 << 30)


def candidates(M, N, K, dt):
    """n32t, n32, n64s where they take the shape (n64s: K <= 512), and the library's pick."""
    cands = {f.key: f for f in (entry(key, M, N, K) for key in ENTRIES) if f.accepts(M, N, K)}
    pick = select.pick(M, N, K, dt, sms)
    return dict(cands, **{f"pick={pick}": pick})


def same_bits() -> list[dict]:
    """n32t and n32 on the same inputs, each on a poisoned output: the same MMAs and rounding,
    so the same bits (the staged store changes only how C leaves)."""
    rows = []
    for dt in args.dtypes.split(","):
        for shape in args.shapes.split(","):
            M, N, K = map(int, shape.split("x"))
            a, b = bench.inputs(M, N, K, getattr(torch, dt))
            outs = []
            for key in ENTRIES[:2]:
                out = torch.full((M, N), float("nan"), dtype=a.dtype, device=a.device)
                runner.plan(entry(key, M, N, K), a, b, out)()
                outs.append(out)
            torch.cuda.synchronize()
            rows.append(dict(M=M, N=N, K=K, dtype=dt, same=torch.equal(outs[0].view(torch.int16),
                                                                      outs[1].view(torch.int16))))
            print(f"{shape} {dt}: n32t {'==' if rows[-1]['same'] else 'DIFFERS FROM'} n32, bit for bit", flush=True)
    return rows


bits = same_bits()
with Sampler(bench.nvml) as smp:
    rows = probe.sweep(bench, args.shapes, args.dtypes, args.passes, candidates, runner.plan, args.reps)
gpu = smp.summary()
print(f"{gpu.get('sm_clock_mhz')} MHz {gpu.get('power_w')} W, throttle {gpu.get('throttle')}", flush=True)
if args.json:
    with open(args.json, "w") as f:
        json.dump(dict(probe="n32_staged_ab", commit=git_commit(), date=datetime.datetime.now().isoformat(),
                       device=torch.cuda.get_device_name(0), gpu=bench.nvml.static(), gpu_during_sweep=gpu,
                       reps=args.reps, n32t_same_bits_as_n32=bits, rows=rows), f, indent=1)
