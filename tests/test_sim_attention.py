"""The simulator's model of the attention steps A2-A5 (choreography/sim/attention.py): it runs
for every step and head dim, its events respect the barriers, its schedules are the kernels'
(ping-pong turns, A5's softmax under P V), the what-ifs deadlock with the barrier named, the
predictions take nothing from a record, and `gemm-ladder simulate --attention` works.
CPU only."""
from __future__ import annotations

import argparse
import json

import pytest

from gemm_ladder.choreography.sim import attention as attn
from gemm_ladder.choreography.sim.attn_params import (ATTN_STEPS, ATTN_WHAT_IFS, CLOCK_GHZ, AttnParams,
                                                      params_for_attention)
from gemm_ladder.choreography.sim.attn_roles import AttnEngine
from gemm_ladder.choreography.sim.engine import Stop
from gemm_ladder.choreography.viz import page_data
from gemm_ladder.cli import simulate as cli_simulate
from gemm_ladder.cuda.device import H200
from gemm_ladder.families import attention as family

HEAD_DIMS = (64, 128, 256)


def spans(r, kind, lane=None):
    return [s for s in r.timeline.spans if s.kind == kind and (lane is None or s.lane == lane)]


def consumer_lanes(r):
    p = r.params
    if p.lockstep:
        return [f"cta{c}/team" for c in range(p.ctas_per_sm)]
    return [f"cta0/consumer{i}" for i in range(p.consumers)]


# ---------------------------------------------------------------------------
# the model follows the step
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("step", ATTN_STEPS)
def test_the_model_runs_for_every_step_and_head_dim(step, d):
    r = attn.simulate_attention(step, head_dim=d)
    st = family.get(step, d)
    p = r.params
    assert r.verdict == "ok", r.explanation
    assert (p.bn, p.consumers, p.depth, p.head_dim) == (st.bn, st.consumers, st.depth, d)
    assert p.blocks == 16384 // st.bn
    for lane in consumer_lanes(r):  # every block's two MMAs and its softmax, once each
        mma = spans(r, "mma", lane)
        assert sorted(s.k for s in mma if s.label.startswith("Q K^T")) == list(range(p.blocks))
        assert sorted(s.k for s in mma if s.label.startswith("P V")) == list(range(p.blocks))
        soft = {s.k for s in spans(r, "softmax", lane) if s.label.startswith("softmax")}
        assert sorted(soft) == list(range(p.blocks))
    k = r.kpis
    assert 0 < k["tensor_core_busy"] <= 1 and 0 < k["softmax_busy"] <= k["cuda_core_busy"] <= 1
    assert k["tflops_steady"] > 0


def test_barrier_counts_are_the_kernels():
    r = attn.simulate_attention("A4", blocks=4)
    counts = {b["name"]: b["count"] for b in r.timeline.meta["barriers"]}
    # one arrive.expect_tx per full barrier; every consumer warp (2 x 4) per empty one; 4 warps pass a turn
    assert counts == {"q_full": 1, "q_empty": 8, "k_full": 1, "k_empty": 8, "v_full": 1, "v_empty": 8, "turn": 4}
    r2 = attn.simulate_attention("A2", blocks=4)
    assert {b["name"]: b["count"] for b in r2.timeline.meta["barriers"]} == {"q_full": 1, "kv_full": 1}
    assert r2.params.ctas_per_sm == 2 and params_for_attention("A2", 256).ctas_per_sm == 1


def test_defaults_come_from_the_h200_peak_and_the_stated_rates():
    p = AttnParams()
    assert p.tc_flop_per_ns == pytest.approx(H200.peak_tflops * 1e3 / H200.sms)
    assert CLOCK_GHZ == pytest.approx(1.83, abs=0.01)
    assert p.softmax_ns_per_elem == pytest.approx((1 / 16 + 2 / 128) / CLOCK_GHZ)  # MUFU 16 ex2/clk + 2 fp32 ops
    assert p.mma_time == pytest.approx(2 * 64 * 128 * 128 / p.tc_flop_per_ns)     # 280 ns at D 128, BN 128


# ---------------------------------------------------------------------------
# the events respect the barriers
# ---------------------------------------------------------------------------

STRESS = [dict(), dict(load_latency_ns=3000.0), dict(l2_bytes_per_ns=20.0), dict(depth=1), dict(depth=3)]


@pytest.mark.parametrize("over", STRESS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "defaults")
@pytest.mark.parametrize("step", ATTN_STEPS)
def test_no_stage_is_read_before_it_lands_nor_refilled_before_it_is_released(step, over):
    r = attn.simulate_attention(step, blocks=9, **over)
    assert r.verdict == "ok", r.explanation
    p = r.params
    loads = {(s.cta, s.stage, s.k): s for s in spans(r, "load") if s.k is not None}
    reads: dict = {}
    for m in spans(r, "mma"):
        ld = loads[(m.cta, m.stage, m.k)]          # the same slot (K: 0..D-1, V: D..2D-1) and block
        assert ld.end <= m.start + 1e-9, (m.label, ld.label)
        reads.setdefault((m.cta, m.stage, m.k), []).append(m)
    releases = [s for s in spans(r, "issue") if s.barrier in ("k_empty", "v_empty")]
    for (cta, slot, b), ld in loads.items():
        if b < p.depth:
            continue
        prev = reads[(cta, slot, b - p.depth)]      # every read of the stage's previous contents is done
        assert len(prev) == (1 if p.lockstep else p.consumers)
        assert all(m.end <= ld.start for m in prev)
        if not p.lockstep:                          # ... and every consumer released it before the refill
            ring = "k_empty" if slot < p.depth else "v_empty"
            rel = [s for s in releases if s.barrier == ring and s.stage == slot % p.depth and s.k == b - p.depth]
            assert len(rel) == p.consumers and all(s.start <= ld.start for s in rel)


@pytest.mark.parametrize("step", ATTN_STEPS)
def test_softmax_sits_between_its_two_mmas(step):
    r = attn.simulate_attention(step, blocks=6)
    for lane in consumer_lanes(r):
        qk = {s.k: s for s in spans(r, "mma", lane) if s.label.startswith("Q K^T")}
        pv = {s.k: s for s in spans(r, "mma", lane) if s.label.startswith("P V")}
        for sm in (s for s in spans(r, "softmax", lane) if s.label.startswith("softmax")):
            assert qk[sm.k].end <= sm.start             # the scores are in registers
            assert sm.end <= pv[sm.k].start             # P is the second MMA's register operand


def test_pingpong_consumers_take_turns_and_a5_overlaps_softmax_with_pv():
    for step in ("A4", "A5"):
        r = attn.simulate_attention(step, blocks=8)
        order = [s.lane[-1] for s in sorted(spans(r, "mma"), key=lambda s: s.start)]
        # the first Q K^T in a turn of its own, then two groups per turn, the consumers alternating
        assert order[:2] == ["0", "1"]
        rest = order[2:-2]
        assert all(rest[i] == rest[i + 1] != rest[i + 2] for i in range(0, len(rest) - 2, 2))
    a5 = attn.simulate_attention("A5", blocks=8)
    a4 = attn.simulate_attention("A4", blocks=8)

    def own_overlap(r):
        tot = 0.0
        for lane in consumer_lanes(r):
            for sm in spans(r, "softmax", lane):
                for m in spans(r, "mma", lane):
                    tot += max(0.0, min(sm.end, m.end) - max(sm.start, m.start))
        return tot
    assert own_overlap(a4) == 0.0            # A4 waits for both MMAs before its softmax
    assert own_overlap(a5) > 0.0             # A5's softmax of block j+1 runs under its own P V of block j


@pytest.mark.parametrize("d", HEAD_DIMS)
def test_the_model_predicts_the_ladder_order_of_tensor_core_busy(d):
    """The model's prediction with its default parameters (not a measurement): ping-pong and
    intra-warpgroup overlap keep the tensor core busier than warp specialization alone, which
    beats the lockstep A2."""
    busy = {st: attn.simulate_attention(st, head_dim=d).kpis["tensor_core_busy"] for st in ATTN_STEPS}
    assert min(busy["A4"], busy["A5"]) > busy["A3"] > busy["A2"]


def test_softmax_spans_are_their_own_kind_on_the_page():
    r = attn.simulate_attention("A5", blocks=4)
    assert {s.lane for s in spans(r, "softmax")} == {"cta0/consumer0", "cta0/consumer1"}
    data = page_data([r.timeline])
    assert "softmax" in data["kinds"]
    tl = data["timelines"][0]
    assert any(data["kinds"][s[1]] == "softmax" for s in tl["spans"])
    assert 0 < tl["kpis"]["softmax_busy"] < 1


# ---------------------------------------------------------------------------
# hazards and what-ifs
# ---------------------------------------------------------------------------

def test_the_engine_catches_a_read_before_landing_and_a_refill_before_release():
    p = params_for_attention("A3", blocks=4)
    e = AttnEngine(p, None)
    attn._make_barriers(e)
    e.kv_load(0, "K", 0, 0, "cta0/producer", "k_full")
    with pytest.raises(Stop):
        e.mma(0, "cta0/consumer0", "K", 0, 0, "Q K^T block 0")
    assert e.verdict == "early_release" and "before block 0's K had landed" in e.explanation
    e = AttnEngine(p, None)
    attn._make_barriers(e)
    e.kv_load(0, "V", 1, 1, "cta0/producer", "v_full")
    with pytest.raises(Stop):
        e.kv_load(0, "V", 1, 3, "cta0/producer", "v_full")
    assert e.verdict == "early_release" and "had not released its previous contents (block 1)" in e.explanation


@pytest.mark.parametrize("step", ["A4", "A5"])
def test_pingpong_order_swapped_deadlocks_on_the_turn_barriers(step):
    r = attn.run_attention_what_if("pingpong-order-swapped", step)
    assert r.verdict == "deadlock"
    x = r.explanation
    assert x.startswith("deadlock: consumer 0 waits on turn[0] for parity 0")
    assert "still in phase 0" in x and "consumer 1, is itself waiting on turn[1] for parity 0" in x
    assert "both consumers' turn states started at phase 0" in x
    assert not spans(r, "mma")
    forever = [s for s in r.timeline.spans if s.kind == "wait" and "blocked forever" in s.label]
    assert {s.lane for s in forever} >= {"cta0/consumer0", "cta0/consumer1"}


@pytest.mark.parametrize("step", ["A3", "A4", "A5"])
def test_v_ring_phase_0_deadlocks_on_the_v_ring(step):
    r = attn.run_attention_what_if("v-ring-phase-0", step)
    assert r.verdict == "deadlock"
    assert r.explanation.startswith("deadlock: the producer waits on v_empty[0] for parity 0")
    assert "still in phase 0" in r.explanation and "the V ring's producer state started at phase 0" in r.explanation
    assert not [s for s in spans(r, "mma") if s.label.startswith("P V")]   # no V block ever lands


def test_what_ifs_need_what_they_break():
    with pytest.raises(ValueError, match="A4, A5"):
        attn.run_attention_what_if("pingpong-order-swapped", "A3")
    with pytest.raises(ValueError, match="A3, A4, A5"):
        attn.run_attention_what_if("v-ring-phase-0", "A2")
    with pytest.raises(ValueError):
        attn.run_attention_what_if("both-phase-0")
    with pytest.raises(ValueError):
        attn.simulate_attention("A4", head_dim=96)
    assert {k for k, w in ATTN_WHAT_IFS.items() if w.modelled} == {"pingpong-order-swapped", "v-ring-phase-0"}
    assert {k for k, w in ATTN_WHAT_IFS.items() if not w.modelled} == {"no-rescale"}  # the GPU run shows it


# ---------------------------------------------------------------------------
# predictions and the record
# ---------------------------------------------------------------------------

def _record(path, scale):
    rows = [dict(step=st, D=128, S=16384, causal=False, dtype="float16", tflops=scale * (400 + 50 * i),
                 gpu=dict(sm_clock_mhz=1800)) for i, st in enumerate(ATTN_STEPS)]
    rows.append(dict(step="A4", D=128, S=16384, causal=True, dtype="float16", tflops=1.0))
    path.write_text(json.dumps(dict(rows=rows)))
    return path


def test_the_comparison_reads_the_record_but_the_prediction_ignores_it(tmp_path):
    a = attn.compare_with_record(_record(tmp_path / "a.json", 1.0))
    b = attn.compare_with_record(_record(tmp_path / "b.json", 2.0))
    assert [r["tflops"] for r in a["rows"]] == [r["tflops"] for r in b["rows"]]
    assert [r["measured"] for r in a["rows"]] == [400, 450, 500, 550]
    r4 = a["rows"][2]
    assert r4["error"] == pytest.approx(r4["tflops"] / 500 - 1)
    assert [g["ratio"] for g in a["ratios"]] == ["A3/A2", "A4/A3", "A5/A4"]
    assert a["ratios"][0]["measured"] == pytest.approx(450 / 400)
    text = attn.format_comparison(a)
    assert "| A4 | 128 | 128 |" in text and "not fitted" in text
    with pytest.raises(ValueError, match="cannot read"):
        attn.compare_with_record(tmp_path / "missing.json")


def test_the_prediction_counts_waves_of_the_grid():
    p = params_for_attention("A3", 128)
    g = attn.grid_tflops(p, 100_000.0)              # S 16k: B 1, H 16, 128 query tiles per head
    assert g["tiles"] == 2048 and g["waves"] == 16
    assert g["tflops"] == pytest.approx(4 * 16 * 16384 ** 2 * 128 / (16 * 100_000.0) / 1e3)
    pr = attn.predict("A5", 128)
    assert pr["blocks"] == 128 and pr["tflops"] < pr["tflops_steady"] <= H200.peak_tflops


# ---------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------

def _parse(argv):
    p = argparse.ArgumentParser(prog="gemm-ladder")
    sub = p.add_subparsers(dest="command")
    cli_simulate.add_parser(sub)
    return p.parse_args(["simulate"] + argv)


def test_cli_attention_writes_the_page_and_prints_the_kpis(tmp_path, capsys):
    assert cli_simulate.run(_parse(["--attention", "A4", "--seq-len", "2048", "--out", str(tmp_path)])) == 0
    out = capsys.readouterr().out
    assert "attention A4 (D 128, BN 128, 16 blocks" in out and "tensor-core busy" in out
    assert "softmax busy" in out and "predicted" in out and "TFLOP/s" in out
    assert (tmp_path / "simulate_attention_A4.html").stat().st_size > 1000
    trace = json.loads((tmp_path / "simulate_attention_A4_trace.json").read_text())
    assert any(ev.get("cat") == "softmax" for ev in trace["traceEvents"])


def test_cli_attention_json_and_what_if(tmp_path, capsys):
    args = _parse(["--attention", "all", "--head-dim", "64", "--seq-len", "1024", "--out", str(tmp_path), "--json"])
    assert cli_simulate.run(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["step"] for r in rows] == list(ATTN_STEPS) and all(r["verdict"] == "ok" for r in rows)
    assert (tmp_path / "simulate_attention_d64.html").exists()
    assert cli_simulate.run(_parse(["--what-if", "pingpong-order-swapped", "--out", str(tmp_path)])) == 0
    out = capsys.readouterr().out
    assert "verdict: deadlock" in out and "turn[0]" in out
    assert (tmp_path / "simulate_pingpong-order-swapped.html").exists()


@pytest.mark.parametrize("argv, words", [
    (["--attention", "A4", "--k-tiles", "4"], "--k-tiles"),
    (["--attention", "A2", "--what-if", "v-ring-phase-0"], "A3, A4, A5"),
    (["--attention", "A4", "--what-if", "both-phase-0"], "GEMM"),
    (["--head-dim", "64"], "--attention"),
    (["--attention", "A4", "--record", "no-such-record.json"], "cannot read"),
])
def test_cli_attention_refuses_bad_input_in_one_line(tmp_path, capsys, argv, words):
    assert cli_simulate.run(_parse(argv + ["--out", str(tmp_path)])) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err


def test_cli_attention_bad_step_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as ex:
        cli_simulate.main(["--attention", "A9"])
    assert ex.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_measured_block_cuda_time_is_not_shared_between_warpgroups():
    """With ``block_cuda_ns`` (the held-out model: cycles measured on A3's trace) a softmax and
    rescale take that time whether or not the other consumer computes at once (A3's two do)."""
    r = attn.simulate_attention("A3", seq_len=2048, block_cuda_ns=900.0)
    assert r.verdict == "ok"
    soft = [s.end - s.start for s in spans(r, "softmax")]
    assert soft and all(d == pytest.approx(900.0) for d in soft)
    p = params_for_attention("A5", block_cuda_ns=900.0)
    assert p.cuda_time() == pytest.approx(900.0)
    assert p.cuda_time(rescale=False) + p.cuda_time(softmax=False) == pytest.approx(900.0)
