"""Every kernel compiles for sm_90a through our JIT (NVRTC on the CPU): no spills, no
C75xx warning, and its SASS holds the instructions the step claims. No GPU needed."""
import re
import pytest

from gemm_ladder.choreography.whatifs import WHAT_IFS
from gemm_ladder.cuda import jit
from gemm_ladder.families import keys, ladder_step
from gemm_ladder.families import gemm, ladder
from gemm_ladder.families.smallm import FAMILIES
from gemm_ladder.measure import sass
from sass_util import sass_or_skip

ALL = ladder.all_steps() + gemm.all_entries()  # the ladder and the production kernels
IDS = [st.key for st in ALL]
TMA = [st for st in ALL if st.uses_tma]
RINGS = [st for st in ALL if st.has_ring]
WARP_SPECIALIZED = [st for st in ladder.all_steps(include_variants=False) if st.style == "warp-specialized"]


def _sass_or_skip(cubin):
    return sass.opcodes(sass_or_skip(cubin))


@pytest.mark.parametrize("st", ALL, ids=IDS)
@pytest.mark.parametrize("bf16", [False, True], ids=["fp16", "bf16"])
def test_compiles_clean(st, bf16):
    k = st.compile(bf16=bf16)  # strict: raises on spills or C75xx warnings
    assert k.report.spill_bytes == 0
    assert k.report.stack_frame_bytes == 0
    assert not [w for w in k.report.warnings if "C75" in w], k.report.warnings
    assert 0 < k.report.registers <= 255
    assert len(k.cubin) > 1000


@pytest.mark.parametrize("st", ALL, ids=IDS)
def test_sass_holds_claims(st):
    ops = _sass_or_skip(st.compile().cubin)
    missing = [c for c in st.claims if sass.count_class(ops, c) == 0]
    assert not missing, f"step {st.key}: SASS lacks {missing}"
    present = [c for c in st.sass_absent if sass.count_class(ops, c) > 0]
    assert not present, f"step {st.key}: SASS holds {present}"
    if st.has_tile:
        assert "HGMMA" in st.sass_claims and "FFMA" in st.sass_absent, "tensor-core steps never fall back to FFMA"
    if st.uses_tma:
        assert sass.count_class(ops, "UTMALDG") > 0 and sass.count_class(ops, "UTMASTG") > 0
    if st.style == "warp-specialized":
        assert sass.count_class(ops, "USETMAXREG") >= 2, "producer dec + consumer inc"


@pytest.mark.parametrize("key", [st.key for st in TMA])
@pytest.mark.parametrize("extra", [{"GL_TRACE": 1}, {"GL_DEBUG_WAITS": 1},
                                   {"GL_DEBUG_WAITS": 1, "GL_ABLATE_SAME_PHASE": 1},
                                   {"GL_DEBUG_WAITS": 1, "GL_ABLATE_EXPECT_TX_DELTA": -1024}],
                         ids=["trace", "debug", "debug-same-phase", "debug-tx-small"])
def test_instrumented_builds_compile_clean(key, extra):
    k = keys.get_step(key).compile(extra_defines=extra)
    assert k.report.spill_bytes == 0


@pytest.mark.parametrize("st", WARP_SPECIALIZED, ids=[st.key for st in WARP_SPECIALIZED])
def test_warp_specialized_barriers_are_role_local(st):
    """A warp-specialized step meets CTA-wide only after barrier init (and, in a cluster
    kernel, at exit: ptxas follows each cluster-barrier wait with a CTA barrier); a consumer
    warpgroup's own meeting is a named barrier for its 128 threads."""
    text = sass.disassemble(st.compile().cubin) if sass.find_tool("cuobjdump") else pytest.skip("no cuobjdump")
    ins = [t for _, t in sass.instructions(text)]
    bars = [t for t in ins if t.startswith("BAR.")]
    cluster_waits = sum(t.startswith("UCGABAR_WAIT") for t in ins)
    assert bars.count("BAR.SYNC.DEFER_BLOCKING 0x0") == max(1, cluster_waits), bars
    assert any(re.fullmatch(r"BAR\.SYNC\.DEFER_BLOCKING (0x1|R\d+), 0x80", t) for t in bars), bars


@pytest.mark.parametrize("st", WARP_SPECIALIZED, ids=[st.key for st in WARP_SPECIALIZED])
def test_setmaxnreg_not_ignored(st):
    k = st.compile()
    assert not any("C7508" in w for w in k.report.warnings)
    assert k.report.registers <= 255


def test_smem_budget_fits_h200():
    for st in ALL:
        assert not st.smem_problem(), (st.key, st.dynamic_smem)
        assert st.dynamic_smem <= ladder_step.MAX_SMEM_PER_BLOCK


def test_compile_error_shows_file_and_line(tmp_path, monkeypatch):
    monkeypatch.setenv(jit.CACHE_ENV, str(tmp_path / "cache"))
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    (kdir / "bad.cu").write_text('extern "C" __global__ void k() {\n  int x = ;\n}\n')
    with pytest.raises(jit.KernelBuildError) as e:
        jit.compile_kernel("bad.cu", "k", kernel_dir=kdir)
    assert "bad.cu(2)" in str(e.value)


def test_spill_fails_loudly(tmp_path, monkeypatch):
    monkeypatch.setenv(jit.CACHE_ENV, str(tmp_path / "cache"))
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    # a big dynamically indexed array forces local memory (stack frame) — and with a tiny
    # register cap, spills
    (kdir / "spill.cu").write_text(
        'extern "C" __global__ void __launch_bounds__(1024, 2) k(float* o, int i) {\n'
        '  float v[64];\n#pragma unroll\n  for (int j = 0; j < 64; ++j) v[j] = o[j * 977 + i];\n'
        '  float s = 0;\n#pragma unroll\n  for (int j = 0; j < 64; ++j) s += v[j] * v[63 - j] * v[(j * 7) % 64];\n'
        '  o[i] = s;\n}\n')
    with pytest.raises(jit.KernelBuildError, match="spill"):
        jit.compile_kernel("spill.cu", "k", extra_options=("--maxrregcount=16",), kernel_dir=kdir)


@pytest.mark.parametrize("st", RINGS, ids=[s.key for s in RINGS])
def test_pipelined_mma_loop_never_waits_for_all(st):
    """Steps with a ring keep a wgmma group in flight across k-tiles. ptxas silently serializes the
    loop (a `wgmma.wait_group 0` inside it) when accumulators are touched on a path through
    it — it did for our first step 6, which then ran at half speed."""
    text = sass.disassemble(st.compile().cubin) if sass.find_tool("cuobjdump") else pytest.skip("no cuobjdump")
    assert sass.mma_loop_full_waits(text) == 0


def test_full_wait_detector_on_synthetic_sass():
    body = """
        /*0100*/                   WARPGROUP.ARRIVE ;
        /*0110*/                   HGMMA.64x128x16.F32 R24, gdesc[UR4], R24, gsb0 ;
        /*0120*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*0130*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0140*/               @!P0 BRA 0x100 ;
        /*0150*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
    """
    assert sass.mma_loop_full_waits(body) == 1
    assert sass.mma_loop_full_waits(body.replace("/*0130*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;", "")) == 0
    assert sass.mma_loop_full_waits("/*0100*/ HGMMA.64x128x16.F32 R24, gdesc[UR4], R24 ;") is None


def test_descriptor_prefetch_is_an_ablation_switch():
    """Steps 6 and up fetch their tensor maps at entry (UTMACCTL.PF, one per map); the ablation
    build leaves the fetches out, so the probe compares like with like."""
    if not sass.find_tool("cuobjdump"):
        pytest.skip("no cuobjdump")
    st = keys.get_step("9")
    built = sass.opcodes(sass.disassemble(st.compile().cubin))
    ablated = sass.opcodes(sass.disassemble(st.compile(extra_defines={"GL_ABLATE_NO_PREFETCH": 1}).cubin))
    assert sass.count_class(built, "UTMACCTL.PF") == 3  # A, B, C
    assert sass.count_class(ablated, "UTMACCTL.PF") == 0


@pytest.mark.parametrize("name", [n for n, w in WHAT_IFS.items() if w.ablation])
def test_what_if_debug_builds_compile(name):
    """Every GPU what-if's debug build (the ablation on its own step, bounded waits) compiles,
    so `gemm-ladder deadlock --what-if NAME` fails only the way the what-if means to."""
    w = WHAT_IFS[name]
    k = keys.get_step(w.default_step).compile(extra_defines={"GL_DEBUG_WAITS": 1, **w.ablation})
    assert k.report.spill_bytes == 0


@pytest.mark.parametrize("st", TMA + list(FAMILIES.values()), ids=[st.key for st in TMA] + list(FAMILIES))
def test_every_tma_module_carries_a_clean_staging_copy(st):
    """The library launches its staging copy (kernels/gl_stage.cuh) from the module of the
    kernel it runs, so every TMA kernel's module must hold the entry, compiled clean (the
    JIT's strict check reads the main entry's report only)."""
    from gemm_ladder.library import staging
    k = st.compile(bf16=False)
    assert staging.STAGE_COPY_ENTRY in jit.ptxas_sections(k.log), st.key
    r = jit.parse_ptxas_log(k.log, staging.STAGE_COPY_ENTRY)
    assert r.spill_bytes == 0 and r.stack_frame_bytes == 0 and 0 < r.registers <= 64 and not r.warnings


@pytest.mark.parametrize("key", ["8", "9"])
def test_no_multicast_ablation_loads_b_whole(key):
    """GL_ABLATE_NO_MULTICAST (docs/perf-notes.md, item 65): the cluster's CTAs load B whole
    themselves, so the build has no multicast TMA; the default build multicasts."""
    if not sass.find_tool("cuobjdump"):
        pytest.skip("no cuobjdump")
    st = keys.get_step(key)
    built = sass.opcodes(sass.disassemble(st.compile().cubin))
    ablated = sass.opcodes(sass.disassemble(st.compile(extra_defines={"GL_ABLATE_NO_MULTICAST": 1}).cubin))
    assert sass.count_class(built, "UTMALDG.2D.MULTICAST") > 0
    assert sass.count_class(ablated, "UTMALDG.2D.MULTICAST") == 0 and sass.count_class(ablated, "UTMALDG") > 0


def test_a_serialized_wgmma_reported_as_info_is_fatal():
    """ptxas reports a serialized wgmma as an "info" line (C7514, C7512): the strict build
    refuses it as it does a warning."""
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
           "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized "
           "due to the presence of Extern calls in the function 'k'\n"
           "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
    problems = jit._fatal_problems(jit.parse_ptxas_log(log, "k"))
    assert len(problems) == 1 and "C7514" in problems[0]


def test_a_serialization_under_c7519_is_fatal():
    """NVRTC 13.5 reports some serializations under C7519 too ("... are serialized due to program
    dependence on compiler-inserted WG.AR in divergent path"): the word decides, not the number."""
    log = ("ptxas info    : (C7519) Potential Performance Loss: wgmma.mma_async instructions are serialized due "
           "to program dependence on compiler-inserted WG.AR in divergent path in the function 'k' in line 2298\n"
           "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
    problems = jit._fatal_problems(jit.parse_ptxas_log(log, "k"))
    assert len(problems) == 1 and "serialized" in problems[0]


def test_an_injected_arrive_reported_as_info_is_not_fatal():
    """C7519 (ptxas injected a warpgroup.arrive) leaves the MMAs asynchronous: NVRTC 13.0 says it
    of the attention kernels A4 and A5, which run on the H200 as built."""
    log = ("ptxas info    : (C7519) warpgroup.arrive is injected in around line 417 by compiler to allow use "
           "of registers in GMMA in function 'k'\n"
           "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
    assert not jit._fatal_problems(jit.parse_ptxas_log(log, "k"))
