"""The decode-chain benchmark without a GPU: the chain's shapes, bytes and ablation forms, the
command's refusals, and the small-M family's programmatic-launch build switches."""
import pytest

from gemm_ladder.families import smallm
from gemm_ladder.families.keys import get_step
from gemm_ladder.measure import decode_chain


def test_chain_shapes_feed_each_other():
    outs = {name: N for name, N, _, _ in decode_chain.GEMMS}
    for name, N, K, (src, cols) in decode_chain.GEMMS:
        assert cols == K
        assert src is None and K == decode_chain.HIDDEN or outs[src] >= cols
    assert outs["qkv"] == 6144 and outs["gate_up"] == 2 * 14336


def test_chain_bytes_are_every_gemm_once():
    M = 8
    want = 2 * sum(M * K + N * K + M * N for _, N, K, _ in decode_chain.GEMMS)
    assert decode_chain.chain_bytes(M) == want
    # the weights dominate: (6144 + 4096 + 28672) x 4096 + 4096 x 14336 elements
    assert decode_chain.chain_bytes(1) > 2 * ((6144 + 4096 + 28672) * 4096 + 4096 * 14336)


@pytest.mark.parametrize("form,prefetch,pdl", [("prefetch", decode_chain.PREFETCH_KT, True), ("no_pdl", 0, False)])
def test_experiment_forms_change_only_their_moves(form, prefetch, pdl):
    st = get_step("smallm:n64")
    v = decode_chain._variant(st, form)
    assert (v.prefetch_kt, v.chain_pdl, v.key) == (prefetch, pdl, f"smallm:n64~{form}")
    assert v.kernel_defines()["GL_PREFETCH_KT"] == prefetch and st.kernel_defines()["GL_PREFETCH_KT"] == 0
    assert {k: x for k, x in v.kernel_defines().items() if k != "GL_PREFETCH_KT"} == \
        {k: x for k, x in st.kernel_defines().items() if k != "GL_PREFETCH_KT"}
    assert decode_chain._variant(st, "ours") is None
    assert decode_chain._variant(get_step("gemm:128x256"), form) is None  # no chain moves there


def test_static_b_takes_the_b_early_build_of_small_m_entries_only():
    from gemm_ladder.library import fastpath
    st = get_step("smallm:n64")
    v = fastpath.b_early(st)
    assert v.b_early and not st.b_early and v.key == "smallm:n64~b_early" and fastpath.b_early(st) is v
    assert v.kernel_defines()["GL_B_EARLY"] == 1 and st.kernel_defines()["GL_B_EARLY"] == 0
    assert {k: x for k, x in v.kernel_defines().items() if k != "GL_B_EARLY"} == \
        {k: x for k, x in st.kernel_defines().items() if k != "GL_B_EARLY"}
    for key in ("smallm:n128m2", "gemm:128x256", "9"):  # pairs (a peer's ring), other families: unchanged
        assert fastpath.b_early(get_step(key)) is get_step(key)
    assert fastpath.b_early(decode_chain._variant(st, "no_pdl")).b_early is False  # stream order: nothing to overlap
    assert not any(fam.b_early for fam in smallm.FAMILIES.values())  # the caller's promise, never the default
    assert decode_chain._variant(st, "b_waits") is None and "b_waits" in decode_chain.FORMS


def test_the_b_early_builds_compile_clean():
    from gemm_ladder.library import fastpath
    for key in ("smallm:n64", "smallm:n64alt", "smallm", "smallm:n32"):
        v = fastpath.b_early(get_step(key))
        for extra in ({}, v.layout_defines(b_mn=True)) if v.b_mn_major else ({},):  # n32: B K-major only
            k = v.compile(strict=True, extra_defines=extra)
            assert k.report.spill_store_bytes == 0


def test_the_prefetch_build_compiles_clean_and_claims_it():
    v = decode_chain._variant(get_step("smallm:n64"), "prefetch")
    k = v.compile(strict=True)
    assert k.report.spill_store_bytes == 0 and "UTMAPF" in v.claims


def test_every_small_m_entry_launches_programmatically_and_claims_the_prefetch():
    for fam in smallm.FAMILIES.values():
        assert fam.chain_pdl and fam.prefetch_kt == 0  # the prefetch measured slower (an experiment)
        assert "UTMAPF" not in fam.claims and "ACQBULK" in fam.claims


def test_summary_per_form_and_m():
    rows = [{"M": 1, "dtype": "bfloat16", "form": "ours", "ok": True, "chain_us": 100.0, "ratio_to_cublas": 1.1,
             "frac_copy_bw": 0.8},
            {"M": 1, "dtype": "bfloat16", "form": "cublas", "ok": True, "chain_us": 110.0, "ratio_to_cublas": 1.0,
             "frac_copy_bw": 0.73}]
    s = decode_chain.summary(rows)
    assert s["all_ok"] and s["ours"]["M=1 bfloat16"] == {"ratio_to_cublas": 1.1, "frac_copy_bw": 0.8}
    assert not decode_chain.summary(rows + [{"M": 8, "form": "ours", "ok": False}])["all_ok"]


@pytest.mark.parametrize("extra", [["--sizes", "4096"], ["--fp8"], ["--suite", "squares"], ["--attention"]])
def test_the_command_is_given_alone(extra, capsys):
    from gemm_ladder.cli.commands import main
    assert main(["bench", "--decode-chain", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("alone" in err[0] or "without --decode-chain" in err[0])


def test_chain_picks_forced_deals(monkeypatch):
    """benchmarks/probes/chain/chain_picks.py's tokens: 'n64/u24' deals QKV's 96 tiles in runs of
    24 128-wide k-tiles over 128 CTAs (the rule: 96 whole tiles), 'smallm/u55' gate-up's 112 on 131;
    the static_b build keeps the forced deal; a plain token is the entry's key."""
    import sys
    from pathlib import Path
    from gemm_ladder.library import fastpath
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks" / "probes" / "chain"))
    sys.modules.pop("chain_picks", None)
    import chain_picks
    assert chain_picks._key("lib") is None and chain_picks._key("n64") == "smallm:n64"
    qkv, gu = chain_picks._key("n64/u24"), chain_picks._key("smallm/u55")
    assert qkv is chain_picks._key("n64/u24")  # one object per token
    assert smallm.FAMILIES["smallm:n64"].deal(16, 6144, 4096, 132).ctas == 96
    assert qkv.deal(16, 6144, 4096).ctas == 128 and gu.deal(16, 28672, 4096).ctas == 131
    early = fastpath.b_early(qkv)
    assert early.b_early and early.deal(16, 6144, 4096) == qkv.deal(16, 6144, 4096)
    assert chain_picks._key("n128/s2").deal(16, 6144, 4096).ctas == 96
