"""The decode chain (measure/decode_chain.py) with other small-M entries per GEMM: which pick
streams a layer's weights fastest when the kernels follow each other in one graph.

Every combination is the library's call with static_b=True and `step` set per GEMM (qkv, o,
gate_up, down); each graph is checked against fp32 (outputs poisoned first), then all graphs
and cuBLAS's are replayed interleaved, the L2 flushed before each, medians of CUDA events.

    PYTHONPATH=src python benchmarks/probes/chain/chain_picks.py --out x.json [--rows 1,8,16] \
        [--combos "n64alt,n64,smallm,n64;n64alt,n64,n128,n64;n64/u24,n64,smallm,n64"]

An entry may carry a forced deal: "n64/u24" runs of 24 of its k-tiles (QKV at 6144 x 4096: 96 tiles
of 32 128-wide k-tiles on 128 CTAs, where the rule deals 96 whole tiles), "n128/s2" K split two
ways. Units count the entry's k-tiles: n64's are 128 wide since item 123 (its records before that
ran "n64/u47", 47 64-wide k-tiles on 131 CTAs).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics

from gemm_ladder.families import smallm
from gemm_ladder.measure import bench, decode_chain
from gemm_ladder.measure.accuracy import check_output
from gemm_ladder.measure.gpuinfo import Sampler

# the library's picks; gate-up on n128 (item 105); QKV (96 whole tiles today) and gate-up (112)
# on 131 CTAs, their tiles in pieces summed by the second pass
DEFAULT = ("lib;n64,n64,smallm,n64;n64,n64,n128,n64;n64/u24,n64,smallm,n64;n64,n64,smallm/u55,n64;"
           "n64/u24,n64,smallm/u55,n64;n128/u24,n64,n128,n64")


@dataclasses.dataclass(frozen=True)
class _Forced(smallm.SmallM):
    """An entry whose deal is fixed: runs of `units` k-tiles, or K split `splits` ways."""
    units: int = 0
    splits: int = 0

    def deal(self, M: int, N: int, K: int, num_sms: int = 132):
        if self.splits:
            return self.fixed_deal(M, N, K, self.splits, num_sms)
        return self.make_deal(M, N, K, self.units, num_sms)


@functools.lru_cache(maxsize=None)  # one object per token: the library keys its configurations by it
def _key(k: str):
    """A combo's token: 'lib' (the library's pick), an entry ('n64', 'smallm'), or an entry
    with a forced deal ('n64/u24', 'n128/s2')."""
    if k == "lib":
        return None
    name, _, forced = k.partition("/")
    key = "smallm" if name == "smallm" else f"smallm:{name}"
    if not forced:
        return key
    fam = smallm.FAMILIES[key]
    fields = {f.name: getattr(fam, f.name) for f in dataclasses.fields(fam)}
    fields.update(key=f"{key}~{forced}", **{{"u": "units", "s": "splits"}[forced[0]]: int(forced[1:])})
    return _Forced(**fields)


def graph_for(torch, gemm_ladder, chain, keys, outs):
    def run():
        a = chain.x
        for (name, N, K, _), key in zip(decode_chain.GEMMS, keys):
            gemm_ladder.matmul(a[:, :K], chain.w[name].T, outs[name], step=key, static_b=True)
            a = outs[name]
    run()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        run()
    return g


def check(torch, chain, g, outs, dtype) -> tuple[bool, str]:
    for t in outs.values():
        t.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    a = chain.x
    for name, N, K, _ in decode_chain.GEMMS:
        ok, _, _, err = check_output(outs[name], a[:, :K].float() @ chain.w[name].float().T, dtype)
        if not ok:
            return False, f"{name}: {err}"
        a = outs[name]
    return True, ""


def main() -> None:
    import torch
    import gemm_ladder
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--rows", default="1,8,16")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--combos", default=DEFAULT)
    p.add_argument("--reps", type=int, default=60)
    args = p.parse_args()
    b = bench.Bench(0)
    dt = getattr(torch, args.dtype)
    combos = [c.split(",") if c != "lib" else ["lib"] * 4 for c in args.combos.split(";")]
    result = {"commit": bench.git_commit(), "dtype": args.dtype, "reps": args.reps, "rows": []}
    for M in (int(m) for m in args.rows.split(",")):
        chain = decode_chain.Chain(b, M, dt)  # x, weights, cuBLAS's graph
        graphs, names, keep = [chain.graphs["cublas"]], ["cublas"], []
        for combo in combos:
            outs = {name: torch.empty((M, N), device="cuda", dtype=dt) for name, N, _, _ in decode_chain.GEMMS}
            name = ",".join(combo)
            try:
                g = graph_for(torch, gemm_ladder, chain, [_key(k) for k in combo], outs)
                ok, err = check(torch, chain, g, outs, args.dtype)
            except Exception as e:  # a pick that does not take a shape: say so, go on
                ok, err = False, f"{type(e).__name__}: {str(e).splitlines()[0]}"
            if not ok:
                print(f"M={M} {name}: not timed: {err}")
                continue
            graphs.append(g)
            names.append(name)
            keep.append(outs)  # the graph writes them
        with Sampler(b.nvml) as s:
            times = b.time_interleaved([g.replay for g in graphs], args.reps)
        med = [statistics.median(t) * 1e3 for t in times]
        for name, us, t in zip(names, med, times):
            row = {"M": M, "combo": name, "us": us, "p10": bench.percentile(t, .1) * 1e3,
                   "p90": bench.percentile(t, .9) * 1e3, "ratio_to_cublas": med[0] / us}
            result["rows"].append(row)
            print(f"M={M:>2} {name:>28}: {us:7.1f} us  x{med[0] / us:.3f}  (p10 {row['p10']:.1f} p90 {row['p90']:.1f})")
        result.setdefault("gpu", []).append(s.summary())
        del chain
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
