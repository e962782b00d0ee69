"""CPU only: would the cost model pick better deals at the long-K rows? Reads a long-K deal
probe record (probe_longk.py's JSON: every entry x forced split timed beside cuBLAS) and ranks
each shape's probed deals by the model's prediction (cost_model.predict_us) and by its score,
among the deals the family's rule could run (no cluster reduction whose clusters are not all
resident at once). Prints, per shape, the measured time of the probe's pick, of the fastest
probed deal, and of each ranking's first, and their geomeans against cuBLAS.

    PYTHONPATH=src python benchmarks/probes/longk/rank_deals.py <probe_longk json>
"""
import collections
import json
import math
import sys

from gemm_ladder.families import cost_model, smallm

SMS = 132


class _Forced:
    """An entry whose deal is the one probed (score() asks the step for its deal)."""

    def __init__(self, fam, deal):
        self.fam, self._deal = fam, deal

    def __getattr__(self, name):
        return getattr(self.fam, name)

    def deal(self, M, N, K, num_sms):
        return self._deal


def main(path: str) -> None:
    rec = json.load(open(path))
    shapes = collections.defaultdict(list)
    for r in rec["rows"]:
        shapes[(r["M"], r["N"], r["K"])].append(r)
    logs = collections.defaultdict(list)
    print(f"probe {path} (commit {rec['commit']}, {rec['dtype']}); us measured, the ranking's own prediction in ()")
    for (M, N, K), rows in shapes.items():
        pick = next(r for r in rows if r["entry"] == "pick")
        ranked = []
        for r in rows:
            if r["entry"] == "pick":
                continue
            fam = smallm.with_fields(smallm.FAMILIES[f"smallm:{r['entry']}"], r["entry"], max_m=1 << 30)
            d = fam.plan_deal(M, N, K, SMS, splits=r["split"] or None)
            if d.dsmem and d.ctas > fam.resident_cluster_ctas(d.cluster[0], SMS):
                continue  # a second round of clusters: the rule never deals it
            s = cost_model.score(_Forced(fam, d), M, N, K)
            ranked.append((s.predicted_us, s.score_us, r))
        best = min(rows, key=lambda r: r["us"])
        by_pred = min(ranked, key=lambda x: x[0])
        by_score = min(ranked, key=lambda x: x[1])
        print(f"{M}x{N}x{K}: cuBLAS {pick['cublas_us']:.2f}  pick {pick['name']} {pick['us']:.2f}  "
              f"fastest {best['name']} {best['us']:.2f}  by prediction {by_pred[2]['name']} {by_pred[2]['us']:.2f} "
              f"({by_pred[0]:.2f})  by score {by_score[2]['name']} {by_score[2]['us']:.2f}")
        for name, us in (("pick", pick["us"]), ("fastest", best["us"]), ("prediction", by_pred[2]["us"]),
                         ("score", by_score[2]["us"])):
            logs[name].append(math.log(pick["cublas_us"] / us))
    print("geomean x cuBLAS over the shapes: " + ", ".join(
        f"{k} {math.exp(sum(v) / len(v)):.3f}" for k, v in logs.items()))


if __name__ == "__main__":
    main(sys.argv[1])
