"""The course's what-ifs on the GPU: bounded waits turn a deadlock into an error naming the
role, barrier, stage and phase within seconds; the measured trace decodes."""
import pytest

from gemm_ladder.choreography.whatifs import WHAT_IFS
from gemm_ladder.families.gemm import all_entries
from gemm_ladder.families.ladder import all_steps
from gpu_util import needs_gpu
from gemm_ladder.families import keys

pytestmark = [needs_gpu, pytest.mark.gpu]


def test_both_phase_zero_reports_deadlock():
    from gemm_ladder.choreography.gpu_whatifs import run_whatif_subprocess
    res = run_whatif_subprocess(WHAT_IFS["both-phase-0"].default_step, "both-phase-0", timeout_s=120)
    assert res["outcome"] == "deadlock", res
    msg = res["message"]
    assert ("producer" in msg and "mma2tma" in msg) or ("consumer" in msg and "tma2mma" in msg), msg
    assert "stage 0" in msg and "parity 0" in msg, msg
    assert res["wall_seconds"] < 60, res


def test_expect_tx_too_large_reports_deadlock():
    from gemm_ladder.choreography.gpu_whatifs import run_whatif_subprocess
    res = run_whatif_subprocess(WHAT_IFS["expect-tx-large"].default_step, "expect-tx-large", timeout_s=120)
    assert res["outcome"] == "deadlock", res
    assert "consumer" in res["message"] and "tma2mma" in res["message"], res


def test_expect_tx_too_small_is_detected_or_reported():
    """Under-counted bytes release the consumer early. Whether the read races ahead of the
    data is timing-dependent; the run must end (no hang) and report what happened."""
    from gemm_ladder.choreography.gpu_whatifs import run_whatif_subprocess
    res = run_whatif_subprocess(WHAT_IFS["expect-tx-small"].default_step, "expect-tx-small", timeout_s=120)
    assert res["outcome"] in ("deadlock", "finished-wrong", "finished-correct"), res


def test_debug_build_is_correct_when_nothing_is_wrong():
    import torch
    from gemm_ladder.library.runner import run_step
    from gpu_util import assert_matches, fresh
    a, b = fresh(1024, 1024, 1024, torch.float16, 11)
    out = torch.full((1024, 1024), float("nan"), dtype=torch.float16, device="cuda")
    run_step(keys.get_step("7"), a, b, out, debug=True)
    assert_matches(out, a, b)


@pytest.mark.parametrize("name", ["local-empty", "local-tx", "no-exit-sync"])
def test_cluster_what_ifs_end_within_seconds(name):
    """The course's step-8 exercises on the 2-CTA cluster: each run ends (no hang) and says
    what happened; which outcome is timing-dependent (the summary names it)."""
    from gemm_ladder.choreography.gpu_whatifs import run_whatif_subprocess
    res = run_whatif_subprocess(WHAT_IFS[name].default_step, name, timeout_s=120, repeats=5)
    assert res["outcome"] in ("deadlock", "error", "finished-wrong", "finished-correct"), res
    assert res["wall_seconds"] < 60, res


@pytest.mark.parametrize("key", [st.key for st in all_steps() + all_entries() if st.uses_tma])
def test_trace_decodes(key):
    from gemm_ladder.choreography import trace
    from gemm_ladder.choreography.timeline import kpis, lane_role
    st = keys.get_step(key)
    res = trace.measure(st, 2048, 2048, 2048, reps=3)
    assert res["correct"], res["check"]
    assert not res["overflow"], res["overflow"]               # the buffer held every event
    tl = trace.to_timeline(res["records"], st, ctas=list(range(max(2, st.cluster_m))))
    kinds = {s.kind for s in tl.spans}
    assert {"mma", "wait"} <= kinds, kinds
    k = kpis(tl)
    assert 0.0 < k["tensor_core_busy"] <= 1.0
    roles = {lane_role(ln) for ln in tl.lanes}
    if st.style == "warp-specialized":
        assert {f"consumer{i}" for i in range(st.consumers)} <= roles, roles
    if st.cluster_m > 1:                                      # both CTAs of the cluster, ranked
        assert {"cta0.rank0/producer", "cta1.rank1/producer"} <= set(tl.lanes), tl.lanes
