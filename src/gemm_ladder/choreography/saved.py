"""Saved traces, read back on any machine (no GPU): the decoded records `gemm-ladder trace`
writes (``*_records.json.gz``), its timeline JSON, or a page it drew (the timelines are
embedded in the HTML). The calibration check of the simulator runs on any of them:

    gemm-ladder calibrate out/trace_step9_records.json.gz docs/samples/trace_step7_d4_measured_vs_sim.html
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from .timeline import Handoff, Span, Timeline

RECORDS_FORMAT = "gemm-ladder trace records"


def write_records(path: str | Path, step_key: str, size: tuple[int, int, int], records: list[dict],
                  **info) -> Path:
    """The decoded records of a traced run, gzip-compressed JSON (they decode again with
    :func:`gemm_ladder.choreography.trace.to_timeline`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # event times to 0.1 ns (they are ns after the slot's start): a third of the bytes
    records = [dict(r, events=[[round(e[0], 1), *e[1:]] for e in r["events"]]) for r in records]
    doc = dict(format=RECORDS_FORMAT, version=1, step=step_key, size=list(size), records=records, **info)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
    return path


def _read_text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    return path.read_text(encoding="utf-8")


def _from_page(text: str) -> list[Timeline]:
    """The timelines a page (viz.write_page) embeds, rebuilt from its compact arrays."""
    m = re.search(r'<script type="application/json" id="gl-data">(.*?)</script>', text, re.S)
    if m is None:
        raise ValueError("no embedded timeline data in this page")
    data = json.loads(m.group(1).replace("<\\/", "</").replace("<\\!--", "<!--"))
    kinds = data["kinds"]
    out = []
    for t in data["timelines"]:
        lanes, bars = t["lanes"], t["bars"]
        spans = [Span(lanes[s[0]], kinds[s[1]], s[2], s[3], stage=s[4], phase=s[5],
                      barrier=bars[s[6]] if s[6] is not None else None, tile=s[7], k=s[8], cta=s[9],
                      label=s[10]) for s in t["spans"]]
        hand = [Handoff(bars[h[0]], h[1], h[2], lanes[h[3]] if h[3] >= 0 else "?",
                        lanes[h[4]] if h[4] >= 0 else "?", h[5], h[6], cta=h[7]) for h in t["handoffs"]]
        out.append(Timeline(t["source"], int(t["step"]), t["title"], lanes=list(lanes), spans=spans,
                            handoffs=hand, meta=dict(t.get("meta") or {})))
    return out


def measured_timelines(path: str | Path, ctas: list[int] | None = None) -> list[Timeline]:
    """The measured timelines a saved file holds: a records file (all CTAs, or ``ctas``), a
    trace JSON (``{"summary", "timeline"}``, the CTAs it shows) or a page (its measured
    timelines)."""
    path = Path(path)
    text = _read_text(path)
    if text.lstrip().startswith("<"):
        return [t for t in _from_page(text) if t.source == "measured"]
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a trace records file, trace JSON or trace page")
    if doc.get("format") == RECORDS_FORMAT:
        from ..families.keys import get_step
        from .trace import to_timeline
        st = get_step(doc["step"])
        M, N, K = doc["size"]
        return [to_timeline(doc["records"], st, ctas=ctas, meta={"M": M, "N": N, "K": K})]
    if "timeline" in doc:
        return [Timeline.from_dict(doc["timeline"])]
    raise ValueError(f"{path}: not a trace records file, trace JSON or trace page")
