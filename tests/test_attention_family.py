"""The attention family on the CPU: every build compiles strictly (no spills, no stack), its SASS
holds what it claims and keeps its wgmma groups in flight (traced too, its key block one record
written without a branch), each step file opens with its forced move and refuses to build
without its configuration, and the launch geometry follows from the step's fields."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from gemm_ladder.cuda import jit
from gemm_ladder.families import attention as A
from gemm_ladder.families.common import ConfigError
from gemm_ladder.families.protocol import KernelFamily
from gemm_ladder.measure import sass

BUILDS = A.all_builds()
IDS = [f"{b.key}-d{b.head_dim}" for b in BUILDS]
KERNELS = Path(jit.KERNEL_DIR)


def test_steps_implement_the_protocol_and_name_their_order():
    assert list(A.STEPS) == ["A2", "A3", "A4", "A5"]
    for st in A.STEPS.values():
        assert isinstance(st, KernelFamily)
        assert st.label.startswith(st.key + ":")
    assert {d for st in A.STEPS.values() for d, _ in st.blocks} == set(A.HEAD_DIMS)


@pytest.mark.parametrize("st", BUILDS, ids=IDS)
@pytest.mark.parametrize("causal", [False, True])
def test_every_build_compiles_clean(st, causal):
    for bf16 in (False, True):
        k = st.compile(bf16=bf16, causal=causal)
        assert k.report.spill_bytes == 0 and k.report.stack_frame_bytes == 0, k.report
        assert st.dynamic_smem <= 232_448


@pytest.mark.parametrize("st", BUILDS, ids=IDS)
def test_sass_claims_and_wgmma_in_flight(st):
    if not sass.find_tool("cuobjdump"):
        pytest.skip("no cuobjdump")
    text = sass.disassemble(st.compile(causal=True).cubin)
    ops = sass.opcodes(text)
    for claim in st.claims:
        assert sass.count_class(ops, claim) > 0, claim
    mma = sass.count_class(ops, "HGMMA")
    waits = sass.count_class(ops, "WARPGROUP.DEPBAR")
    # ptxas serializes silently by following every wgmma with a wait: far fewer waits than MMAs here
    assert waits <= 4 < mma, (waits, mma)
    # the second MMA reads P from registers and V MN-major (the transpose bit)
    assert any("HGMMA" in t and ".tnspB" in t and "gdesc" in t for _, t in sass.instructions(text))
    if st.key.startswith("A5"):  # the next block's Q K^T retires alone, P V still running
        assert any(t.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x1") for _, t in sass.instructions(text))


def block_loop(text: str) -> list[str]:
    """The instructions of the innermost loop that issues both MMAs (a consumer's key blocks),
    in the module's function that issues them (addresses restart in each function)."""
    ins = sass.instructions(next(f for f in re.split(r"\n\s*Function\s*:", text) if "HGMMA" in f))
    loops = [(int(m.group(1), 16), a) for a, t in ins
             if (m := re.match(r"(?:@!?U?P\w+ )?BRA (?:`\(\.L_x_\d+\) )?(0x[0-9a-f]+)", t)) and int(m.group(1), 16) < a]
    bodies = [[t for a, t in ins if lo <= a <= hi] for lo, hi in loops]
    # not a wait's out-of-line retry branching back across the kernel's end (an EXIT inside)
    return min((b for b in bodies if {"tnspB" in t for t in b if t.startswith("HGMMA")} == {True, False}
                and not any(t.split()[-1] == "EXIT" or t == "EXIT" for t in b)), key=len)


WS_BUILDS = [b for b in BUILDS if b.producer]


@pytest.mark.parametrize("st", WS_BUILDS, ids=[f"{b.key}-d{b.head_dim}" for b in WS_BUILDS])
def test_traced_block_is_one_record_without_a_branch(st):
    """A traced consumer's key block (attn_warpspec.cuh's BlockRecord): no spill, the wgmma
    groups still in flight, and the record four predicated 16-byte stores in the loop, which
    has no branch the untraced loop lacks (the recorder's warp never diverges)."""
    if not sass.find_tool("cuobjdump"):
        pytest.skip("no cuobjdump")
    traced = st.compile(causal=True, extra_defines={"GL_TRACE": 1})
    assert traced.report.spill_bytes == 0 and traced.report.stack_frame_bytes == 0, traced.report
    text = sass.disassemble(traced.cubin)
    ops = sass.opcodes(text)
    assert sass.count_class(ops, "WARPGROUP.DEPBAR") <= 4 < sass.count_class(ops, "HGMMA")
    loop, plain = block_loop(text), block_loop(sass.disassemble(st.compile(causal=True).cubin))
    stores = [t for t in loop if "STG" in t]
    assert len(stores) == 4 and all(t.startswith("@P") and "STG.E.128" in t for t in stores), stores
    branches = lambda body: sorted(t.split()[0] for t in body if re.match(r"(@!?U?P\w+ )?BRA", t))  # noqa: E731
    assert len(branches(loop)) == len(branches(plain))
    # a convergence scope (BSSY) only around a barrier's wait: ptxas brackets some traced waits,
    # whose clock stamps it keeps after the wait; never around the recorder's stores
    for i, t in enumerate(loop):
        if t.startswith("BSSY"):
            assert any("SYNCS.PHASECHK" in u for u in loop[i + 1:i + 4]), loop[i:i + 4]


@pytest.mark.parametrize("key", list(A.STEPS))
def test_step_file_opens_with_its_forced_move(key):
    src = (KERNELS / A.STEPS[key].source).read_text()
    first = src.splitlines()[0]
    assert re.match(rf"// Step {key} — .+\. Forced move: .+", first), first


def test_a_step_refuses_to_build_without_its_configuration():
    st = A.get("A3", 128)
    with pytest.raises(jit.KernelBuildError, match="GL_ATTN_D"):
        jit.compile_kernel(st.source, st.entry, {"GL_ATTN_BN": 128}, use_cache=False)
    with pytest.raises(jit.KernelBuildError, match="GL_ATTN_CONSUMERS"):
        d = {k: v for k, v in st.kernel_defines().items() if k != "GL_ATTN_CONSUMERS"}
        jit.compile_kernel(st.source, st.entry, {**d, "GL_ATTN_CAUSAL": 0}, use_cache=False)


def test_geometry_follows_from_the_fields():
    a2, a3, c3 = A.get("A2", 128), A.get("A3", 256), A.get("A5:c3", 64)
    assert (a2.bm, a2.bn, a2.threads) == (64, 64, 128)
    assert (a3.bm, a3.bn, a3.threads) == (128, 64, 384)
    assert (c3.bm, c3.bn, c3.threads) == (192, 128, 512)
    assert a3.grid(1000, 16, 3) == (8 * 16 * 3, 1, 1)
    assert A.get("A5:p", 128).grid(1000, 16, 3, num_sms=132) == (132, 1, 1)
    assert A.get("A5:p", 128).grid(100, 1, 1, num_sms=132) == (1, 1, 1)
    assert a3.kernel_defines()["GL_ATTN_CONSUMERS"] == 2 and "GL_ATTN_CONSUMERS" not in a2.kernel_defines()
    # Q's map covers one consumer's rows per box, K's and V's one block; 64 columns (128 bytes) each
    q_spec, k_spec, v_spec = a3.map_specs((2, 8, 100, 256), (204800, 256, 2048, 1), (2, 2, 300, 256),
                                          (153600, 76800, 256, 1), (153600, 76800, 256, 1))
    assert q_spec[2] == (1, 1, 64, 64) and k_spec[2] == v_spec[2] == (1, 1, 64, 64)
    assert q_spec[1] == (204800, 256, 2048, 1)


def test_shape_problems_and_unsupported_head_dims():
    st = A.get("A4")
    assert st.shape_problems(17, 1, 128) == []
    assert any("head dim 96" in p for p in st.shape_problems(17, 1, 96))
    assert any(">= 1" in p for p in st.shape_problems(0, 5, 64))
    with pytest.raises(ConfigError, match="head dim 96"):
        st.for_head_dim(96)
    with pytest.raises(KeyError, match="A1"):
        A.get("A9")
    with pytest.raises(ConfigError):
        A.get("A5:c3", 128)  # three consumers' registers hold head dim 64 only


def test_choice_is_a_step_that_takes_the_head_dim():
    for d in A.HEAD_DIMS:
        for causal in (False, True):
            st = A.choose(4096, 4096, d, causal)
            assert st.head_dim == d and not st.shape_problems(4096, 4096, d)


def test_causal_calls_walk_on_a_counter_where_it_measured_ahead():
    """choose(): the fixed persistent walk without a mask; with one, the counter's walk at every
    head dim (docs/attention.md)."""
    assert A.choose(1024, 1024, 128, False).key == "A5:p" and A.choose(1024, 1024, 64, False).key == "A5:c3p"
    assert A.choose(16384, 16384, 64, True).key == "A5:c3d" and A.choose(1024, 1024, 64, True).key == "A5:d"
    assert [A.choose(s, s, d, True).key for d in (128, 256) for s in (1024, 16384)] == ["A5:d"] * 4
    st = A.choose(1024, 1024, 128, True)
    assert st.dynamic and st.persistent and st.kernel_defines()["GL_ATTN_DYNAMIC"] == 1
    assert A.get("A5:p", 128).kernel_defines()["GL_ATTN_DYNAMIC"] == 0


def test_a_section_keeps_its_heads_k_and_v_in_half_the_l2_and_divides_the_heads():
    d = A.get("A5:d", 128)
    kv = 2 * 4096 * 128 * 2  # K and V of one head at 4k keys: 2 MiB; 12 of them in 25 MiB
    assert 25 * 2**20 // kv == 12
    assert d.section(4096, 1, 1200, l2_bytes=50 * 2**20) == 12
    assert d.section(4096, 1, 1000, l2_bytes=50 * 2**20) == 10  # 1000 pairs: the largest divisor under 12
    assert d.section(4096, 4, 1200, l2_bytes=50 * 2**20) == 50  # GQA: 4 query heads share one K/V head
    assert d.section(4096, 1, 3, l2_bytes=50 * 2**20) == 3  # no more than the pairs there are
    assert d.section(4096, 1, 13, l2_bytes=50 * 2**20) == 1  # 13 heads: one per section, never 12 and 1
    assert d.section(16384, 1, 16, l2_bytes=60 * 2**20) == 2  # 3 fit, but 3 x 5 + 1: sections of 2
    assert d.section(10**6, 1, 8, l2_bytes=50 * 2**20) == 1  # at least one
    assert A.get("A5:p", 128).section(4096, 1, 1000) == 1  # the fixed walk: a head's blocks in turn


def test_the_compile_report_lists_every_attention_build():
    """The CPU main job's report (cmd_default) includes each build under its key and head dim."""
    from gemm_ladder.measure.report import compile_report
    rows = compile_report(A.all_builds())
    assert [r["step"] for r in rows] == [f"{b.key}/d{b.head_dim}" for b in A.all_builds()]
    assert all(r["ok"] and r["spill_bytes"] == 0 for r in rows)
    if sass.find_tool("cuobjdump"):
        assert all(r["claims_missing"] == [] for r in rows)


def test_the_attention_what_ifs_build_and_name_their_ablation():
    """Each attention what-if with a GPU run has its kernel switch, and its debug build compiles
    clean on every step it applies to (gemm-ladder deadlock runs them in a child process)."""
    from gemm_ladder.choreography.gpu_whatifs import attention_gpu_what_ifs, what_if_entry
    from gemm_ladder.families.switches import SWITCHES
    names = attention_gpu_what_ifs()
    assert {"pingpong-order-swapped", "v-ring-phase-0", "no-rescale"} <= set(names)
    for name in names:
        w = what_if_entry(name)
        assert set(w.ablation) <= set(SWITCHES), w.ablation
        for key in w.steps:
            k = A.get(key, 128).compile(extra_defines={"GL_DEBUG_WAITS": 1, **w.ablation})
            assert k.report.spill_bytes == 0


def test_the_simulator_refuses_a_what_if_that_changes_numbers_only():
    from gemm_ladder.choreography.sim.attention import simulate_attention
    with pytest.raises(ValueError, match="changes numbers, not the schedule"):
        simulate_attention("A2", what_if="no-rescale")


def test_deadlock_offers_the_attention_what_ifs():
    from gemm_ladder.cli.commands import build_parser
    args = build_parser().parse_args(["deadlock", "--what-if", "v-ring-phase-0"])
    assert args.what_if == "v-ring-phase-0"
