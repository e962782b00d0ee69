"""Saved traces, read back on any machine (no GPU): the decoded records `gemm-ladder trace`
writes (``*_records.json.gz``), its timeline JSON, a page it drew (the timelines are
embedded in the HTML) or its Perfetto JSON (``*_perfetto.json``). The calibration check of
the simulator runs on any of them:

    gemm-ladder calibrate out/trace_step9_records.json.gz docs/samples/trace_step7_d4_perfetto.json
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from .timeline import Handoff, Span, Timeline, lane_cta

RECORDS_FORMAT = "gemm-ladder trace records"
ATTENTION_RECORDS_FORMAT = "gemm-ladder attention trace records"


def write_records(path: str | Path, step_key: str, size: tuple[int, ...], records: list[dict], *,
                  fmt: str = RECORDS_FORMAT, **info) -> Path:
    """The decoded records of a traced run, gzip-compressed JSON (they decode again with
    :func:`gemm_ladder.choreography.trace.to_timeline`, an attention step's (``fmt``
    ATTENTION_RECORDS_FORMAT, size (B, H, S)) with :func:`.attention_trace.attention_timeline`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # event times to 0.1 ns (they are ns after the slot's start): a third of the bytes
    records = [dict(r, events=[[round(e[0], 1), *e[1:]] for e in r["events"]]) for r in records]
    doc = dict(format=fmt, version=1, step=step_key, size=list(size), records=records, **info)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
    return path


def read_records(path: str | Path) -> dict:
    """A records file :func:`write_records` wrote, as its JSON document."""
    doc = json.loads(_read_text(Path(path)))
    if not isinstance(doc, dict) or doc.get("format") not in (RECORDS_FORMAT, ATTENTION_RECORDS_FORMAT):
        raise ValueError(f"{path}: not a trace records file")
    return doc


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


def _from_chrome_trace(doc: dict) -> list[Timeline]:
    """The timelines a Chrome/Perfetto trace (viz.chrome_trace) holds, rebuilt from its
    events: a process per (timeline, CTA) named "<title> [<source>] <cta>", a thread per
    lane sub-track, spans as complete ("X") events in microseconds, hand-offs as flows
    (their parity is not in the trace). The step key comes from the title ("step 7:d4 ...")."""
    procs: dict[int, tuple[str, str, str]] = {}
    threads: dict[tuple[int, int], str] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            m = re.fullmatch(r"(.*) \[(\w+)\] (\S+)", e["args"]["name"])
            if m:
                procs[e["pid"]] = m.groups()
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])] = re.sub(r" #\d+$", "", e["args"]["name"])
    by_title: dict[tuple[str, str], Timeline] = {}
    flows: dict[int, dict] = {}

    def where(e: dict) -> tuple[Timeline, str] | None:
        if e["pid"] not in procs or (e["pid"], e["tid"]) not in threads:
            return None
        title, source, head = procs[e["pid"]]
        m = re.match(r"step (\d+)(\S*)", title)
        if m is None:  # only a measured timeline must say its step (calibrate reads those)
            if source == "measured":
                raise ValueError(f"no step in the trace's title {title!r}")
            return None
        tl = by_title.setdefault((title, source), Timeline(source, int(m.group(1)), title,
                                                           meta={"key": m.group(1) + m.group(2)}))
        lane = f"{head}/{threads[(e['pid'], e['tid'])]}"
        if lane not in tl.lanes:
            tl.lanes.append(lane)
        return tl, lane

    for e in doc["traceEvents"]:
        if e.get("ph") not in ("X", "s", "f") or (found := where(e)) is None:
            continue
        tl, lane = found
        if e["ph"] == "X":
            a, start = e.get("args") or {}, e["ts"] * 1000.0
            tl.spans.append(Span(lane, e.get("cat", e["name"]), start, start + e.get("dur", 0.0) * 1000.0,
                                 stage=a.get("stage"), phase=a.get("phase"), barrier=a.get("barrier"),
                                 tile=a.get("tile"), k=a.get("k"), cta=lane_cta(lane),
                                 label="" if e["name"] == e.get("cat") else e["name"]))
        else:
            flows.setdefault(e["id"], {})[e["ph"]] = (tl, lane, e)
    for f in flows.values():
        if "s" in f and "f" in f and f["s"][0] is f["f"][0]:
            (tl, src, s), (_, dst, t) = f["s"], f["f"]
            m = re.fullmatch(r"(.*)\[(\d+|None)\]", s["name"])
            barrier, stage = (m.group(1), None if m.group(2) == "None" else int(m.group(2))) if m else (s["name"], None)
            tl.handoffs.append(Handoff(barrier, stage, None, src, dst, s["ts"] * 1000.0, t["ts"] * 1000.0,
                                       cta=lane_cta(src)))
    return list(by_title.values())


def measured_timelines(path: str | Path, ctas: list[int] | None = None) -> list[Timeline]:
    """The measured timelines a saved file holds: a records file (all CTAs, or ``ctas``), a
    trace JSON (``{"summary", "timeline"}``, the CTAs it shows), a page or a Perfetto JSON
    (their measured timelines)."""
    path = Path(path)
    text = _read_text(path)
    if text.lstrip().startswith("<"):
        return [t for t in _from_page(text) if t.source == "measured"]
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a trace records file, trace JSON, trace page or Perfetto trace")
    if doc.get("format") == ATTENTION_RECORDS_FORMAT:
        raise ValueError(f"{path}: an attention step's trace (the calibration fits the GEMM model; "
                         "attention_trace.attention_timeline decodes it)")
    if doc.get("format") == RECORDS_FORMAT:
        from ..families.keys import get_step
        from .trace import to_timeline
        st = get_step(doc["step"])
        M, N, K = doc["size"]
        return [to_timeline(doc["records"], st, ctas=ctas, meta={"M": M, "N": N, "K": K})]
    if "timeline" in doc:
        return [Timeline.from_dict(doc["timeline"])]
    if isinstance(doc.get("traceEvents"), list):
        tls = [t for t in _from_chrome_trace(doc) if t.source == "measured"]
        if not tls:
            raise ValueError(f"{path}: a Perfetto trace with no measured timeline (a simulated one cannot be checked)")
        return tls
    raise ValueError(f"{path}: not a trace records file, trace JSON, trace page or Perfetto trace")
