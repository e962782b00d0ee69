"""The step registry is the one source of a step's facts: the kernel's defines, its shared
memory and barriers, its TMA boxes, and the simulator's parameters all derive from one
`Step`. CPU only."""
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gemm_ladder.choreography.sim import params_for_step, simulate_step, simulated_steps
from gemm_ladder.cuda import jit
from gemm_ladder.families import common, gemm, keys, ladder

KERNEL_STEPS = ladder.all_steps() + gemm.all_entries()  # every Step-shaped kernel
TMA_STEPS = [st for st in KERNEL_STEPS if st.uses_tma]
SRC = Path(__file__).resolve().parents[1] / "src" / "gemm_ladder"
# switches that are not a step's configuration: debug, tracing, ablations, element type
EXTRA_DEFINES = re.compile(r"GL_(DEBUG_WAITS|WAIT_TIMEOUT_NS|TRACE|ABLATE_\w+|BF16|A_MN|B_MN)$")


def _ids(sts):
    return [st.key for st in sts]


@pytest.mark.parametrize("st", KERNEL_STEPS, ids=_ids(KERNEL_STEPS))
def test_kernel_defines_follow_the_fields(st):
    d = st.kernel_defines()
    assert ({"GL_BM", "GL_BN", "GL_BK"} <= d.keys()) == st.has_tile
    if st.has_tile:
        assert (d["GL_BM"], d["GL_BN"], d["GL_BK"]) == (st.bm, st.bn, st.bk)
    assert d.get("GL_DEPTH", 0) == st.depth
    assert d.get("GL_GROUP_M") == (st.group_m if st.persistent else None)
    assert d.get("GL_DYNAMIC_SMEM") == (st.dynamic_smem if st.uses_tma else None)
    ws = st.style == "warp-specialized"
    assert ({"GL_CLUSTER_M", "GL_CONSUMERS", "GL_EPI_STAGES"} <= d.keys()) == ws
    if ws:
        assert (d["GL_CLUSTER_M"], d["GL_CONSUMERS"], d["GL_EPI_STAGES"]) == (st.cluster_m, st.consumers,
                                                                            st.epi_stages)
    assert not [k for k in d if EXTRA_DEFINES.match(k)]


@pytest.mark.parametrize("st", KERNEL_STEPS, ids=_ids(KERNEL_STEPS))
def test_kernel_source_is_configured_only_by_the_step(st):
    """Every configuration macro the step's .cu tests for is one the Step passes, and none
    has a default in the kernel (a missing one is an #error); only debug/ablation switches
    default (to off)."""
    text = (jit.KERNEL_DIR / st.source).read_text()
    d = st.kernel_defines()
    for name in re.findall(r"#\s*(?:ifndef|ifdef|if\s+!?\s*defined\s*\(?)\s*(GL_\w+)", text):
        assert name in d or EXTRA_DEFINES.match(name), f"{st.source} reads {name}, which step {st.key} never passes"
    for name, default in re.findall(r"#\s*ifndef\s+(GL_\w+)\s*\n\s*#\s*define\s+\1\s+(\d+)", text):
        assert EXTRA_DEFINES.match(name) and int(default) == 0, f"{st.source}: {name} has a default ({default})"
    if st.uses_tma:
        assert "#error" in text and "GL_DYNAMIC_SMEM" in text


def test_early_loads_only_without_a_cluster():
    """The production kernels start their first stages before the set-up only where no cluster
    couples the CTAs (measured slower with one: docs/perf-notes.md, item 74); the ladder's
    kernels have no switch (a lesson's step carries only its own move)."""
    for key, early in (("gemm:128x256c2", 0), ("gemm:128x128", 1), ("gemm:128x256", 1), ("gemm:128x192", 1),
                       ("gemm:128x256sk", 0)):
        st = keys.get_step(key)
        assert st.kernel_defines()["GL_EARLY_LOADS"] == early == int(st.cluster_m == 1 and not st.stream_k), key
    for key in ("4", "6", "7", "7:d4", "8", "8:c1", "9", "9:c1", "10"):
        assert "GL_EARLY_LOADS" not in keys.get_step(key).kernel_defines(), key


def test_shared_memory_and_barriers_are_derived():
    s7 = keys.get_step("7")
    assert s7.barriers == 2 * 2 + 2                           # tma2mma/mma2tma per stage + mma2ld/ld2mma
    assert s7.dynamic_smem == 1024 + 2 * (128 + 128) * 64 * 2 + 128 * 128 * 2 + 8 * 6
    assert keys.get_step("7:d4").barriers == 2 * 4 + 2
    assert keys.get_step("5").barriers == 4 and keys.get_step("4").barriers == 1
    assert keys.get_step("3").barriers == 0 and keys.get_step("3").dynamic_smem == 0
    ring = dataclasses.replace(s7, epi_stages=3)             # a 3-chunk epilogue ring
    assert ring.barriers == 2 * 2 + 2 * 3
    assert ring.dynamic_smem == 1024 + 2 * 32768 + 3 * 128 * 64 * 2 + 8 * ring.barriers


def test_operand_boxes_come_from_the_tile_and_cluster():
    s7 = keys.get_step("7")
    assert (s7.a_box, s7.b_box, s7.c_box) == ((128, 64), (128, 64), (128, 64))
    s8 = keys.get_step("8", modelled=True)                  # 2-CTA cluster: each loads half of B
    assert s8.cluster_m == 2 and s8.b_box == (64, 64) and s8.a_box == (128, 64)
    s4 = dataclasses.replace(keys.get_step("4"), cluster=(2, 1, 1))
    assert s4.cluster_m == 1 and s4.b_box == (128, 64)       # a lockstep kernel never multicasts


def test_variants_replace_fields():
    assert ladder.VARIANTS["7:d4"] == dataclasses.replace(ladder.STEPS[7], depth=4, variant="d4")
    st = keys.get_step("6:d6g1")
    assert (st.depth, st.group_m, st.key) == (6, 1, "6:d6g1")
    assert st.kernel_defines()["GL_DEPTH"] == 6 and st.kernel_defines()["GL_GROUP_M"] == 1
    with pytest.raises(KeyError, match="unknown step"):
        keys.get_step("4:d2")                               # step 4 has one stage, no ring
    with pytest.raises(KeyError, match="unknown step"):
        keys.get_step("5:g2")                               # step 5 is not persistent
    with pytest.raises(KeyError, match="unknown step"):
        keys.get_step("11")


@pytest.mark.parametrize("st", TMA_STEPS, ids=_ids(TMA_STEPS))
def test_simulator_and_kernel_agree(st):
    """The simulator's model and the kernel's defines come from the same Step."""
    p, d = params_for_step(st.key), st.kernel_defines()
    assert p.depth == d["GL_DEPTH"]
    assert (p.cta_m, p.tile_n, p.tile_k) == (d["GL_BM"], d["GL_BN"], d["GL_BK"])
    assert p.num_consumers == d.get("GL_CONSUMERS", 1) and p.pingpong == st.pingpong
    assert p.cluster == d.get("GL_CLUSTER_M", 1)
    assert p.lockstep == (st.style == "lockstep") and not p.model_only
    assert p.staging_stages == max(1, d.get("GL_EPI_STAGES", 0)) * (st.consumers if st.pingpong else 1)


def test_simulator_sizes_the_persistent_grid_from_the_sm_count():
    p = params_for_step("7", size=(4096, 4096, 2048), num_sms=132)
    assert (p.k_tiles, p.tiles_per_cta) == (32, 8)          # 1024 tiles over 132 SMs
    assert params_for_step("7", size=(4096, 4096, 2048), num_sms=114).tiles_per_cta == 9
    assert params_for_step("5", size=(4096, 4096, 2048)).tiles_per_cta == 1


@pytest.fixture
def modelled_step_11(monkeypatch):
    """A step the simulator models before any kernel implements it (none today: steps 8-10
    have kernels), registered the way such a step would be."""
    st = dataclasses.replace(ladder.STEPS[9], number=11, name="next idea", source="", entry="")
    monkeypatch.setitem(ladder.MODELLED_STEPS, 11, st)
    return st


def test_model_only_steps_say_so(modelled_step_11):
    modelled = [st for st in simulated_steps() if st.model_only]
    assert [st.key for st in modelled] == ["11"] and "11" not in _ids(KERNEL_STEPS)
    tl = simulate_step("11", k_tiles=4).timeline
    assert "model only" in tl.title and tl.meta["model_only"] is True
    assert "model only" not in simulate_step("9", k_tiles=4).timeline.title
    with pytest.raises(common.ConfigError, match="model only"):
        modelled_step_11.compile()


def test_simulate_cli_marks_model_only_steps(tmp_path, modelled_step_11):
    from gemm_ladder.cli import simulate as cli_simulate
    text = cli_simulate.simulate_report(tmp_path, k_tiles=4)
    assert "step 11 (model only)" in text and "step 9 (model only)" not in text


def test_report_flags_a_step_over_the_shared_memory_limit(tmp_path):
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "gemm_ladder", "report", "--steps", "7:d9", "--json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    row = json.loads(out.read_text())[0]
    assert row["ok"] is False and "232,448-byte limit" in row["error"]


def test_run_step_refuses_a_step_over_the_shared_memory_limit():
    torch = pytest.importorskip("torch")
    from gemm_ladder.library import runner
    a = torch.zeros((256, 64), dtype=torch.float16)
    with pytest.raises(common.ConfigError) as e:
        runner.run_step(keys.get_step("7:d9"), a, a)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("step 7:d9 cannot run: needs 328,864 bytes of shared memory")


def test_no_step_number_branching_outside_the_registry():
    hits = []
    for path in SRC.rglob("*.py"):
        if path.name == "ladder.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"number\s*(==|<|>=|>|<=|!=)", line):
                hits.append(f"{path.relative_to(SRC)}:{i}: {line.strip()}")
    assert not hits, hits


def test_wgmma_groups_in_flight_token():
    """`l<n>`: wgmma groups a consumer keeps in flight (an ablation, perf-notes item 59); it must
    leave the producer a stage to fill."""
    st = keys.get_step("8:d6l2")
    assert st.mma_lag == 2 and st.depth == 6 and st.kernel_defines()["GL_MMA_LAG"] == 2
    assert keys.get_step("9").kernel_defines()["GL_MMA_LAG"] == 1
    assert keys.get_step("gemm:128x256l2b0").kernel_defines()["GL_MMA_LAG"] == 2
    with pytest.raises(ValueError, match="below the ring depth"):
        keys.get_step("7:l2")  # step 7 runs a 2-deep ring
    with pytest.raises(ValueError, match="no l"):
        keys.get_step("6:l2")  # lockstep: no consumer warpgroup


def test_borrowed_stage_switch():
    """`b<0|1>`: the production kernel's epilogue borrows the drained operand stage (perf-notes
    item 62); on by default, a switch rather than a count, every entry takes it, and what cannot
    combine with it says how to leave it out. The ladder's step 9 has no switch."""
    st = keys.get_step("gemm:128x256c2")
    assert st.borrow_stage and st.kernel_defines()["GL_EPI_BORROW"] == 1
    assert st.borrowed_chunks == 3  # the stage's A part holds one 128 x 64 chunk, its B part two
    assert st.kernel_defines()["GL_EPI_LENT"] == 3  # the kernel takes the count, and checks it fits
    assert keys.get_step("gemm:128x192").borrowed_chunks == 2 and keys.get_step("gemm:128x176").borrowed_chunks == 2
    off = keys.get_step("gemm:128x256c2b0")
    assert not off.borrow_stage and off.borrowed_chunks == 0 and off.kernel_defines()["GL_EPI_BORROW"] == 0
    assert off.kernel_defines()["GL_EPI_LENT"] == 0
    n232 = keys.get_step("gemm:128x232b0")
    assert n232.bn == 232 and not n232.borrow_stage and n232.key == "gemm:128x232b0"
    assert "GL_EPI_BORROW" not in keys.get_step("8").kernel_defines()
    assert "GL_EPI_BORROW" not in keys.get_step("9").kernel_defines()
    assert not keys.get_step("gemm:128x256sk").borrow_stage  # stream-K pieces use the drained ring themselves
    # the lent-chunk barriers are counted in the shared memory the kernel asks for
    assert st.barriers == keys.get_step("gemm:128x256c2b0").barriers + 2 and st.smem_problem() == ""
    with pytest.raises(ValueError, match="0 or 1"):
        keys.get_step("gemm:128x256b2")
    with pytest.raises(ValueError, match="no b variant"):
        keys.get_step("9:b1")
    with pytest.raises(ValueError, match="add b0"):
        keys.get_step("gemm:128x256l2")
    assert keys.get_step("gemm:128x256l2b0").mma_lag == 2 and keys.get_step("9:l2").mma_lag == 2
    with pytest.raises(ValueError, match="at least 1"):
        keys.get_step("gemm:128x256w0")  # the gemm family's tokens follow the ladder's rules
