"""Write the cost model's record: its predicted time for the kernel it picks on every shape of
a kernel-path suite record, beside the measured time (measure/costmodel.py).

    PYTHONPATH=src python scripts/costmodel_record.py benchmarks/results/<date>_h200_suite_all_<commit>.json

A suite that ran on another card (the H100: cuda/device.CARDS) is predicted with that card's facts
and the copy rate its own record measured; every constant was fitted on the H200, so each of its
rows is held out (`<date>_<card>_costmodel_<commit>.json`).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path

from gemm_ladder.cuda.device import CARDS
from gemm_ladder.families import cost_model
from gemm_ladder.measure import costmodel
from gemm_ladder.measure.bench import git_commit
from gemm_ladder.measure.gpuinfo import gpu_token


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", help="a kernel-path suite record (bench --suite all)")
    ap.add_argument("--out", help="the record's path (default: beside the suite record, costmodel_<its commit>)")
    ap.add_argument("--current", help="a later kernel-path suite record: for the shapes whose pick the first record "
                                      "did not time (the model's pick moved since), its measurement of the pick, "
                                      "listed apart (`moved_picks`)")
    args = ap.parse_args()
    suite_path = Path(args.suite)
    try:
        suite = json.loads(suite_path.read_text())
    except (OSError, ValueError) as e:
        print(f"costmodel_record: cannot read {suite_path}: {e}", file=sys.stderr)
        return 2
    if suite.get("call", "kernel") != "kernel":
        print(f"costmodel_record: {suite_path} times the library's call; give a kernel-path suite record",
              file=sys.stderr)
        return 2
    token = gpu_token(suite)
    card = None
    if token != "h200":  # another card's facts; its copy rate as its own suite run measured it
        if token not in CARDS:
            print(f"costmodel_record: {suite_path} ran on {token!r}, a card with no facts in cuda/device.CARDS",
                  file=sys.stderr)
            return 2
        copy = suite.get("memory", {}).get("hbm_copy_gbs")
        card = costmodel.card_device(token, copy / 1e3 if copy else None)
    rows = costmodel.rows_from_suite(suite, card)
    moved = []
    if args.current:
        current = json.loads(Path(args.current).read_text())
        have = {(r["shape"], r["dtype"]) for r in rows}
        moved = [dict(r, source=Path(args.current).name) for r in costmodel.rows_from_suite(current)
                 if (r["shape"], r["dtype"]) not in have]
    record = {"kind": "gemm-ladder cost model vs suite", "suite": suite_path.name, "suite_commit": suite["commit"],
              "written": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
              "model_commit": git_commit(), "fitted_on": costmodel.FITTED_ON,
              "constants": {"LAUNCH_US": cost_model.LAUNCH_US, "TENSOR_EFFICIENCY": cost_model.TENSOR_EFFICIENCY,
                            "L2_SM_GBS": cost_model.L2_SM_GBS, "copy_tbs": (card or cost_model.Device()).copy_tbs,
                            "L2_STREAM_BYTES": cost_model.L2_STREAM_BYTES,
                            "DSMEM_L2_SHARE": cost_model.DSMEM_L2_SHARE,
                            "CLUSTER_REDUCE_US_PER_KIB": cost_model.CLUSTER_REDUCE_US_PER_KIB,
                            "REDUCE_PASS_US": cost_model.REDUCE_PASS_US},
              "summary": costmodel.summary(rows), "rows": rows}
    if card is not None:  # every constant was fitted on the H200: the card holds all of them out
        record["card"] = {"token": token, "hbm_tbs": card.hbm_tbs, "copy_tbs": round(card.copy_tbs, 4),
                          "peak_tflops": card.peak_tflops, "source": card.source,
                          # rows whose kernel was not the H200 model's pick: nothing to predict with the card's facts
                          "rows_left_out": sum(bool(r.get("ok")) for r in suite["rows"]) - len(rows)}
    if args.current:
        record["moved_picks"] = moved  # not in the summary: their candidates were not all timed
    date = suite_path.name[:10]
    out = Path(args.out) if args.out else suite_path.with_name(f"{date}_{token}_costmodel_{suite['commit'][:7]}.json")
    out.write_text(json.dumps(record, indent=1) + "\n")
    s = record["summary"]
    print(f"{out}: {s['all']['rows']} rows; held out: worst {s['held_out']['worst']:+.1%}, geomean |error| "
          f"{s['held_out']['geomean_abs_error']:.1%}, {s['held_out']['over_25pct']} over 25 %; fitted: worst "
          f"{s['fitted']['worst']:+.1%}; half B (item 85's constants held out): geomean |error| "
          f"{s['half_b']['geomean_abs_error']:.1%}, {s['half_b']['over_25pct']} over 25 %")
    for r in moved:
        print(f"moved pick {r['shape']} {r['dtype']} {r['kernel']}: predicted {r['predicted_us']:.2f} us, measured "
              f"{r['measured_us']:.2f} ({r['error']:+.1%}, {r['source']})")
    if "pick" in s:
        p = s["pick"]["all"]
        print(f"pick within 3 % of the fastest candidate on {p['within_3pct']:.0%} of {p['shapes']} shapes, geomean "
              f"loss {p['geomean_loss'] - 1:.1%}, worst {p['worst']} x{p['worst_loss']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
