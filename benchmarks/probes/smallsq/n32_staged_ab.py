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

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner, select
from gemm_ladder.measure import probe
from gemm_ladder.measure.bench import Bench

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


bits = probe.same_bits(bench, args.shapes, args.dtypes, lambda M, N, K, dt: [entry(k, M, N, K) for k in ENTRIES[:2]],
                       runner.plan, "n32t and n32 (the staged store changes only how C leaves):")
probe.sampled_sweep(bench, args, candidates, runner.plan, "n32_staged_ab", n32t_same_bits_as_n32=bits)
