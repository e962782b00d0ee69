"""The HTML page writer, the Chrome/Perfetto trace export and the simulate CLI (CPU only)."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from gemm_ladder.cli import simulate as cli_simulate
from gemm_ladder.choreography.sim import WHAT_IFS, run_what_if, simulate_step, simulated_steps
from gemm_ladder.choreography.timeline import Span, Timeline
from gemm_ladder.choreography.viz import (chrome_trace, default_pair, page_data, render_page, split_tracks,
                             write_chrome_trace, write_page)


@pytest.fixture(scope="module")
def tls():
    return [simulate_step(s, k_tiles=8).timeline for s in (4, 5, 6, 7, 8, 9)]


def _embedded(html_text: str) -> dict:
    m = re.search(r'<script type="application/json" id="gl-data">(.*?)</script>', html_text, re.S)
    assert m, "embedded data block missing"
    return json.loads(m.group(1))


def _measured_copy(tl: Timeline, scale: float = 1.1) -> Timeline:
    d = tl.to_dict()
    d["source"] = "measured"
    d["title"] = tl.title + " (measured)"
    for s in d["spans"]:
        s["start"] *= scale
        s["end"] *= scale
    d["meta"] = {"depth": tl.meta["depth"], "style": tl.meta["style"]}
    return Timeline.from_dict(d)


# ---------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------

def test_page_is_self_contained(tmp_path, tls):
    path = write_page(tls, tmp_path / "p.html", title="ladder")
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>")
    # no external resources: no script/link/img sources, no CSS imports, no fetches
    assert not re.search(r"<script[^>]+src=", text)
    assert not re.search(r"<link[^>]+stylesheet", text)
    assert not re.search(r"<img[^>]+src=\"?https?:", text)
    assert "@import" not in text and "fetch(" not in text and "XMLHttpRequest" not in text
    # the only URLs are SVG namespace identifiers
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", text))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    for marker in ("/*__CSS__*/", "/*__JS__*/", "__DATA__", "__TITLE__"):
        assert marker not in text


def test_page_has_the_controls_tests_and_users_rely_on(tmp_path, tls):
    text = render_page(tls)
    for el_id in ("next-event", "prev-event", "event-index", "event-slider", "event-desc",
                  "kpi-cards", "select-a", "select-b", "svg-a", "svg-b", "summary-table",
                  "zoom-in", "zoom-out", "fit", "win-slider", "play", "step-target"):
        assert f'id="{el_id}"' in text, el_id


def test_page_embeds_every_timeline_with_kpis_and_events(tls):
    data = _embedded(render_page(tls))
    assert [t["title"] for t in data["timelines"]] == [t.title for t in tls]
    for t, tl in zip(data["timelines"], tls):
        assert len(t["spans"]) == len(tl.spans)
        assert len(t["handoffs"]) == len(tl.handoffs)
        assert t["kpis"]["tensor_core_busy"] > 0
        assert len(t["events"]) >= len(tl.spans)
        ts = [e[0] for e in t["events"]]
        assert ts == sorted(ts)
    # lockstep (6) beside warp-specialized (7) by default
    a, b = data["defaults"]
    assert tls[a].step == 6 and tls[b].step == 7


def test_page_data_escapes_script_breaking_labels():
    tl = Timeline("sim", 7, "evil </script><script>alert(1)</script>", lanes=["cta0/x"],
                  spans=[Span("cta0/x", "mma", 0, 10, label="</script><b>x</b>")])
    text = render_page([tl], title="<t>")
    assert text.count("</script>") == 2                    # the data block's and the code's
    data = _embedded(text)
    assert data["timelines"][0]["spans"][0][-1] == "</script><b>x</b>"
    assert "<title>&lt;t&gt;</title>" in text


def test_simulated_and_measured_timelines_are_paired(tls):
    sim7 = tls[3]
    meas = _measured_copy(sim7)
    all_tls = list(tls) + [meas]
    assert default_pair(all_tls) == (3, len(all_tls) - 1)
    data = page_data(all_tls)
    m = data["timelines"][-1]
    assert m["source"] == "measured" and m["blog"] == []
    assert m["kpis"]["makespan_ns"] == pytest.approx(1.1 * sim7_makespan(sim7))


def sim7_makespan(tl):
    return max(s.end for s in tl.spans) - min(s.start for s in tl.spans)


def test_what_if_page_shows_the_verdict(tmp_path):
    r = run_what_if("both-phase-0")
    data = _embedded(render_page([r.timeline]))
    meta = data["timelines"][0]["meta"]
    assert meta["verdict"] == "deadlock" and "both PipelineStates" in meta["explanation"]


# ---------------------------------------------------------------------------
# Chrome / Perfetto trace
# ---------------------------------------------------------------------------

def test_split_tracks_uses_the_fewest_tracks_without_overlap():
    iv = [(0, 10), (2, 5), (5, 8), (9, 12), (10, 11), (11, 11), (3, 4)]
    tr = split_tracks(iv)
    depth = max(sum(1 for a, b in iv if a <= t < b) for t in range(0, 13))
    assert max(tr) + 1 == depth
    for i, (a0, a1) in enumerate(iv):
        for j, (b0, b1) in enumerate(iv):
            if i < j and tr[i] == tr[j]:
                assert a1 <= b0 or b1 <= a0, (iv[i], iv[j])


def _check_no_overlap(trace: dict) -> dict:
    tracks: dict[tuple, list] = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for key, evs in tracks.items():
        evs.sort()
        for (a0, a1), (b0, b1) in zip(evs, evs[1:]):
            assert b0 >= a1 - 1e-6, (key, (a0, a1), (b0, b1))
    return tracks


def test_chrome_trace_has_no_overlapping_events_on_a_track(tmp_path, tls):
    path = write_chrome_trace(tls, tmp_path / "t.json")
    trace = json.loads(path.read_text())
    tracks = _check_no_overlap(trace)
    n_x = sum(len(v) for v in tracks.values())
    assert n_x == sum(len(t.spans) for t in tls)            # every span exported once
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    # the consumer's waits overlap its queued wgmma, and several loads are in flight at once:
    # those lanes were split onto sub-tracks
    assert any(n.startswith("tma #") for n in names.values())
    assert any(n.startswith("consumer0 #") for n in names.values())
    procs = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert any("cta1" in p for p in procs)                   # one process per CTA of the cluster
    flows = [e for e in trace["traceEvents"] if e["ph"] in ("s", "f")]
    assert len(flows) == 2 * sum(len(t.handoffs) for t in tls)


def test_chrome_trace_of_a_measured_timeline_with_overlapping_mma_spans():
    spans = [Span("cta0/consumer0", "mma", 0, 100, k=0), Span("cta0/consumer0", "mma", 50, 150, k=1),
             Span("cta0/consumer0", "mma", 60, 70, k=2), Span("cta0/consumer0", "wait", 20, 20)]
    tr = chrome_trace(Timeline("measured", 7, "m", spans=spans))
    tracks = _check_no_overlap(tr)
    assert len(tracks) == 3


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

def _parse(argv):
    p = argparse.ArgumentParser(prog="gemm-ladder")
    sub = p.add_subparsers(dest="command")
    cli_simulate.add_parser(sub)
    return p.parse_args(["simulate"] + argv)


def test_cli_what_if_explains_and_exits_zero(tmp_path, capsys):
    args = _parse(["--what-if", "both-phase-0", "--out", str(tmp_path), "--k-tiles", "8"])
    assert args.fn is cli_simulate.run
    assert cli_simulate.run(args) == 0
    out = capsys.readouterr().out
    assert "verdict: deadlock" in out
    assert "both PipelineStates started at phase 0" in out
    assert (tmp_path / "simulate_both-phase-0.html").stat().st_size > 1000
    trace = json.loads((tmp_path / "simulate_both-phase-0_trace.json").read_text())
    _check_no_overlap(trace)


def test_cli_single_step_with_overrides(tmp_path, capsys):
    args = _parse(["--step", "7", "--depth", "2", "--k-tiles", "8", "--tiles-per-cta", "3",
                   "--out", str(tmp_path), "--json"])
    assert cli_simulate.run(args) == 0
    out = capsys.readouterr().out
    rows = json.loads(next(line for line in out.splitlines() if line.startswith("[")))
    assert rows[0]["depth"] == 2 and rows[0]["step"] == 7 and rows[0]["verdict"] == "ok"
    data = _embedded((tmp_path / "simulate_step7.html").read_text())
    assert data["timelines"][0]["meta"]["tiles_per_cta"] == 3


def test_cli_rejects_an_inapplicable_what_if(tmp_path, capsys):
    args = _parse(["--what-if", "init-count-low", "--step", "7", "--out", str(tmp_path)])
    assert cli_simulate.run(args) == 2
    assert "init-count-low" in capsys.readouterr().err


def test_simulate_report_covers_every_step_and_what_if(tmp_path):
    text = cli_simulate.simulate_report(tmp_path, k_tiles=8)
    steps = simulated_steps()
    for st in steps:
        assert f"step {st.key} " in text
    for name in WHAT_IFS:
        assert name in text
    assert "deadlock" in text and "early_release" in text and "early_exit" in text
    data = _embedded((tmp_path / "choreography.html").read_text())
    assert len(data["timelines"]) == len(steps) + len(WHAT_IFS)
    one = cli_simulate.simulate_report(tmp_path / "one", step=9, k_tiles=4)
    assert "step 9" in one and "what-if" not in one


def test_repeated_and_unlisted_lanes_are_drawn_once():
    spans = [Span("cta0/consumer0", "mma", 0, 10), Span("cta0/producer", "wait", 0, 5, barrier="mma2tma"),
             Span("cta0/extra", "issue", 1, 1)]
    tl = Timeline("measured", 7, "m", lanes=["cta0/producer", "cta0/consumer0", "cta0/producer"], spans=spans)
    data = page_data([tl])
    assert data["timelines"][0]["lanes"] == ["cta0/producer", "cta0/consumer0", "cta0/extra"]
    names = [e["args"]["name"] for e in chrome_trace(tl)["traceEvents"] if e.get("name") == "thread_name"]
    assert sorted(names) == ["consumer0", "extra", "producer"]
