"""Measured-trace decoding on the CPU: records written the way the kernels' tracer writes
them (here from simulated runs, so the truth is known) decode into the same timeline, for
clusters (both CTAs, ranks in the lane names, hand-offs across CTAs), two consumers (one
tensor core) and ping-pong; the trace buffer holds every event; saved traces read back and
the calibrated simulator is checked against them."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from gemm_ladder.choreography import saved, trace
from gemm_ladder.choreography.sim import simulate_step
from gemm_ladder.choreography.sim.calibrate import MAKESPAN_TOLERANCE, check_calibration
from gemm_ladder.choreography.timeline import WGMMA_ISSUED, kpis, lane_cta, lane_role
from gemm_ladder.families.keys import get_step

SAMPLES = Path(__file__).resolve().parents[1] / "docs" / "samples"
SLOT = {"producer": 0, "consumer0": 1, "consumer1": 2, "writeback": 3}
ROLE_ID = {v: k for k, v in trace.ROLES.items()}
BAR_ID = {v: k for k, v in trace.BARRIERS.items()}
EV = trace.EVENTS
T0 = 1_800_000_000_000_000_000  # a globaltimer value of today's order


def records_from(tl, step, ns_per_clock: float) -> list[dict]:
    """The records the kernels' tracer would write for a (simulated) run: per role, its waits,
    load issues, wgmma issues and retirements, releases, staging and stores."""
    per_lane: dict[str, list] = {}
    for s in tl.spans:
        role = lane_role(s.lane)
        if role not in SLOT:
            continue
        ev = per_lane.setdefault(s.lane, [])
        st, ph, k, tile = s.stage or 0, s.phase or 0, s.k or 0, s.tile or 0
        if s.kind == "wait" and s.barrier in BAR_ID:
            ev += [(s.start, EV["EV_WAIT_BEGIN"], BAR_ID[s.barrier], st, ph, k, tile),
                   (s.end, EV["EV_WAIT_END"], BAR_ID[s.barrier], st, ph, k, tile)]
        elif s.kind == "issue" and role == "producer":
            ev.append((s.end, EV["EV_LOAD_ISSUE"], BAR_ID["tma2mma"], st, ph, k, tile))
        elif s.kind == "issue" and s.label.startswith(WGMMA_ISSUED):
            ev.append((s.start, EV["EV_MMA_ISSUE"], 0, st, ph, k, tile))
        elif s.kind == "mma":
            ev.append((s.end, EV["EV_MMA_DONE"], 0, st, ph, k, tile))
        elif s.kind == "issue" and s.barrier in BAR_ID:
            ev.append((s.start, EV["EV_ARRIVE"], BAR_ID[s.barrier], st, ph, k, tile))
        elif s.kind == "epilogue":  # the borrowed stage's chunks name their barrier (lent_full), as the kernel's do
            b = BAR_ID.get(s.barrier, 0)
            ev += [(s.start, EV["EV_EPI_BEGIN"], b, st, 0, k, tile), (s.end, EV["EV_EPI_END"], b, st, 0, k, tile)]
        elif s.kind == "store":
            b = BAR_ID.get(s.barrier, 0)
            ev += [(s.start, EV["EV_STORE_ISSUE"], b, st, 0, k, tile), (s.end, EV["EV_STORE_DONE"], b, st, 0, k, tile)]
    out = []
    for lane, ev in per_lane.items():
        ev.sort(key=lambda e: e[0])  # stable: events at one instant stay in the order the role made them
        role = lane_role(lane)
        out.append({"block": lane_cta(lane), "slot": SLOT[role], "smid": 0, "ns_per_clock": ns_per_clock,
                    "role": "consumer" if role.startswith("consumer") else role,
                    "t0": T0, "t1": T0 + int(ev[-1][0]) + 1, "events": ev})
    return out


def decoded(key: str, **kw):
    res = simulate_step(key, **kw)
    st = get_step(key)
    ns_per_clock = res.params.mma_time / (2 * res.params.tile_m * st.bn * st.bk / trace.DENSE_FLOP_PER_CLOCK_PER_SM)
    return res, trace.to_timeline(records_from(res.timeline, st, ns_per_clock), st)


@pytest.mark.parametrize("key", ["7:d4", "8", "9", "10", "10:c1"])
def test_decoded_trace_matches_the_run_it_records(key):
    res, tl = decoded(key, k_tiles=8, tiles_per_cta=3)
    p = res.params
    assert set(tl.lanes) == set(res.timeline.lanes)      # same lanes, ranks named the same way
    assert tl.meta["cluster"] == p.cluster and tl.meta["num_consumers"] == p.num_consumers
    mk, ms = kpis(tl), res.kpis
    # the decoder settles the consumers' wgmma groups on the CTA's one tensor core, each
    # counted for its duration at peak rate: the busy fraction is the simulated one
    assert mk["tensor_core_busy"] == pytest.approx(ms["tensor_core_busy"], abs=0.01)
    assert mk["makespan_ns"] == pytest.approx(ms["makespan_ns"], rel=0.01)
    for c in range(p.cluster):
        mm = sorted((s for s in tl.spans if s.kind == "mma" and s.cta == c), key=lambda s: s.start)
        assert len(mm) == p.tiles_per_cta * p.k_tiles * p.consumers_per_stage
        assert all(b.start >= a.end - 1e-6 for a, b in zip(mm, mm[1:]))
    # staging slots: the epilogue and store spans carry their slot and chunk
    assert kpis(tl)["ring_occupancy"]["staging"]["stages"] == p.staging_stages


def test_cluster_trace_has_both_ctas_and_crosses_between_them():
    res, tl = decoded("8", k_tiles=8, tiles_per_cta=2)
    assert {"cta0.rank0/producer", "cta1.rank1/producer", "cta0.rank0/tma", "cta1.rank1/tma"} <= set(tl.lanes)
    # the empty barrier hears both CTAs' consumers: some producer is released by the peer's
    cross = [h for h in tl.handoffs if h.barrier == "mma2tma" and lane_cta(h.src_lane) != lane_cta(h.dst_lane)]
    assert cross
    # each CTA's tma lane shows the peer's multicast half landing in it
    for c, peer in ((0, 1), (1, 0)):
        assert any(s.kind == "load" and s.cta == c and f"multicast from cta{peer}" in s.label for s in tl.spans)
    only0 = trace.to_timeline(records_from(res.timeline, get_step("8"), 0.5), get_step("8"), ctas=[0])
    assert {lane_cta(ln) for ln in only0.lanes} == {0}


def test_two_consumers_are_not_counted_twice_on_one_tensor_core():
    st = get_step("9:c1")
    cap_clocks = 2 * 64 * st.bn * st.bk / trace.DENSE_FLOP_PER_CLOCK_PER_SM   # one consumer's k-tile
    # both consumers issue k-tile 0 at t=0 and see it retire 1000 ns later: raw spans overlap
    recs = []
    for slot in (1, 2):
        ev = [(0.0, EV["EV_MMA_ISSUE"], 0, 0, 0, 0, 0), (1000.0, EV["EV_MMA_DONE"], 0, 0, 0, 0, 0)]
        recs.append({"block": 0, "slot": slot, "role": "consumer", "smid": 0, "ns_per_clock": 1.0,
                     "t0": T0, "t1": T0 + 2000, "events": ev})
    tl = trace.to_timeline(recs, st)
    mm = sorted((s for s in tl.spans if s.kind == "mma"), key=lambda s: s.start)
    assert [(s.start, s.end) for s in mm] == [(0.0, cap_clocks), (cap_clocks, 2 * cap_clocks)]
    assert kpis(tl)["tensor_core_busy"] == pytest.approx(1.0)   # serial at peak: busy, once


@pytest.mark.parametrize("key", ["7:d4", "8", "9", "10", "10:c1"])
@pytest.mark.parametrize("size", [(4096, 4096, 4096), (1000, 1000, 64), (129, 264, 72), (8192, 8192, 8192)])
def test_trace_capacity_holds_every_role(key, size):
    st = get_step(key)
    M, N, K = size
    k_tiles = -(-K // st.bk)
    chunks = st.bn // 64 if st.epi_stages else 1
    for ctas in (None, 2 * 60):          # the SM count's grid, and fewer clusters than SMs / 2
        cap = trace.events_needed(st, M, N, K, 132, ctas)
        cm = st.cluster[0]
        grid = ctas or st.grid(M, N, 132)[0]
        tiles = -(-(-(-(-(-M // st.bm)) // cm) * -(-N // st.bn)) // (grid // cm))
        # what each role of the busiest CTA records (see the kernels' tr.event calls)
        producer = tiles * 3 * k_tiles
        consumer = tiles * (5 * k_tiles + 5 * chunks + (3 if st.pingpong else 0))
        writeback = tiles * 5 * chunks
        assert cap >= max(producer, consumer, writeback), (cap, producer, consumer, writeback)


def test_saved_records_read_back(tmp_path):
    res = simulate_step("9", k_tiles=8, tiles_per_cta=2)
    st = get_step("9")
    recs = records_from(res.timeline, st, 0.5)
    path = saved.write_records(tmp_path / "trace_step9_records.json.gz", "9", (512, 512, 512),
                               json.loads(json.dumps(recs)), num_sms=132)
    [tl] = saved.measured_timelines(path)
    assert tl.meta["key"] == "9" and tl.meta["M"] == 512
    assert kpis(tl)["tensor_core_busy"] == pytest.approx(kpis(trace.to_timeline(recs, st))["tensor_core_busy"])


def test_calibrated_model_predicts_the_measured_7d4_makespan():
    """The acceptance check on measured data: the 7:d4 trace recorded on the H200 (the page
    in docs/samples, CTAs 0 and 1 of a 4096^3 run), fitted and re-simulated."""
    [measured] = saved.measured_timelines(SAMPLES / "trace_step7_d4_measured_vs_sim.html")
    c = check_calibration(measured)
    assert c["depth"] == 4 and c["tiles_per_cta"] == 8 and c["k_tiles"] == 64
    assert abs(c["error"]) <= MAKESPAN_TOLERANCE, c
    # without the consumer's issue gap (wgmma back to back) the same fit misses by far more
    from gemm_ladder.choreography.sim import simulate_like
    free = simulate_like(measured, fit=False, mma_ns=c["fitted"]["mma_ns"], consumer_gap_ns=0.0,
                         mma_issue_ns=0.0, mma_wait_ns=0.0)
    assert free.kpis["makespan_ns"] < (1 - MAKESPAN_TOLERANCE) * c["measured_makespan_ns"]


def test_calibrate_command_on_saved_traces(tmp_path, capsys):
    from gemm_ladder.cli.commands import main
    rc = main(["calibrate", str(SAMPLES / "trace_step7_d4_measured_vs_sim.html"),
               str(SAMPLES / "trace_step5_measured_vs_sim.html"), "--json", str(tmp_path / "c.json")])
    out = capsys.readouterr().out
    assert rc == 0, out
    rows = json.loads((tmp_path / "c.json").read_text())
    assert [r["step"] for r in rows] == ["7:d4", "5"] and all(r["within"] for r in rows)
    assert "within 15%" in out
    assert main(["calibrate", str(tmp_path / "c.json")]) == 2      # not a trace: one line, exit 2
    assert "c.json: not a measured trace" in capsys.readouterr().err


def test_trace_command_writes_records_page_and_check(tmp_path, monkeypatch):
    """`gemm-ladder trace --step 9` with the GPU run replaced by the records of a simulated one:
    it saves the records, draws both CTAs and both consumers, and checks the model on them."""
    import argparse

    from rich.console import Console

    from gemm_ladder.cli.trace import trace_command
    res, _ = decoded("9", k_tiles=8, tiles_per_cta=2)
    recs = records_from(res.timeline, get_step("9"), res.params.mma_time / 512)
    fake = {"records": recs, "correct": True, "rel_err": 1e-4, "check": "", "ms_plain": 0.2, "ms_traced": 0.25,
            "overhead": 0.25, "blocks": 2, "events_per_slot": 4096, "num_sms": 132, "overflow": []}
    monkeypatch.setattr(trace, "measure", lambda *a, **k: fake)
    args = argparse.Namespace(step="9", size=[(256, 512, 512)], events=None, out=str(tmp_path))
    assert trace_command(args, Console(file=open(tmp_path / "log.txt", "w"), width=200)) == 0
    stem = tmp_path / "trace_step9_256x512x512"  # a size other than 4096³ is in the names
    summary = json.loads(stem.with_suffix(".json").read_text())["summary"]
    assert summary["calibration"]["within"] and summary["sim_calibrated"]
    # the traced build 25 % slower than the kernel: the summary and the page say so
    assert summary["timeline_is_the_kernels"] is False
    [tl] = saved.measured_timelines(tmp_path / "trace_step9_256x512x512_records.json.gz")
    assert {"cta0.rank0/consumer1", "cta1.rank1/consumer0"} <= set(tl.lanes)
    assert "within 15%" in (tmp_path / "log.txt").read_text()
    assert stem.with_suffix(".html").exists() and (tmp_path / "trace_step9_256x512x512_perfetto.json").exists()
    assert html.escape("not the kernel's") in stem.with_suffix(".html").read_text()
