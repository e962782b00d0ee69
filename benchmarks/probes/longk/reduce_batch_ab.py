"""Probe (perf-notes item 113): the small-M second pass with its planes read in batches of
eight (`reduce_batch`) against the serial pass, on the same deal, at every long-K suite shape
whose pick sums pieces through the workspace (15 of the 36 under the rule of 8748eb1, 4 to 14
planes); beside cuBLAS. First the two passes' outputs compared bit for bit, then the project's
probe loop (measure/probe.py: each output poisoned and checked against fp32, repeated bit for
bit, all timed interleaved with cuBLAS after each L2 flush, medians); SM clock and power
sampled over the timed sweep.

    PYTHONPATH=src python benchmarks/probes/longk/reduce_batch_ab.py [--json out.json]
"""
import argparse

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner, select
from gemm_ladder.measure import probe, suites
from gemm_ladder.measure.bench import Bench

ap = argparse.ArgumentParser()
probe.add_sweep_args(ap, shapes="", reps=50, passes=1)
args = ap.parse_args()
bench = Bench(0)
sms = torch.cuda.get_device_properties(0).multi_processor_count


def passes(M, N, K, dt) -> dict:
    """{name: entry}: the pick with its serial and its batched second pass ({} where the pick
    is not the family or sums no piece through the workspace)."""
    fam = smallm.FAMILIES.get(select.pick(M, N, K, dt, sms))
    if fam is None or not fam.deal(M, N, K, sms).planes:
        return {}
    return {f"serial {fam.key}": fam,
            f"batched {fam.key}": smallm.with_fields(fam, "rb", reduce_batch=smallm.REDUCE_BATCH)}


args.shapes = args.shapes or ",".join(f"{s.M}x{s.N}x{s.K}" for s in suites.longk()
                                      if any(passes(s.M, s.N, s.K, dt) for dt in args.dtypes.split(",")))
plan = lambda fam, a, b, out: runner.plan_smallm(fam, a, b, out)  # noqa: E731
bits = probe.same_bits(bench, args.shapes, args.dtypes, lambda M, N, K, dt: list(passes(M, N, K, dt).values()), plan,
                       "the batched and the serial pass:")
probe.sampled_sweep(bench, args, passes, plan, "reduce_batch_ab",
                    batched_same_bits_as_serial=bits)
