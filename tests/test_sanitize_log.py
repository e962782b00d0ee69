"""scripts/sanitize_run.py on the CPU: the case plan covers every step at two shapes, and
the log reader attributes compute-sanitizer's reports to the case that caused them."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def san():
    spec = importlib.util.spec_from_file_location("sanitize_run", ROOT / "scripts" / "sanitize_run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_plan_covers_every_step_at_two_shapes_and_matmul(san):
    import gemm_ladder
    from gemm_ladder.families.smallm import FAMILIES
    cases = san.plan("all", san.parse_shapes(san.DEFAULT_SHAPES), True, "memcheck",
                     san.parse_shapes(san.DEFAULT_FAMILY_SHAPES))
    per = {}
    for target, st, shape in cases:
        per.setdefault(target, []).append(shape)
        if st is not None:
            assert st.accepts(*shape)
    from gemm_ladder.families.gemm import ENTRIES
    keys = [str(k) for k in gemm_ladder.STEPS] + list(gemm_ladder.VARIANTS) + list(ENTRIES)
    assert set(per) == {f"step:{k}" for k in keys} | {f"family:{k}" for k in FAMILIES} | {"matmul"}
    assert all(len(v) >= 2 for v in per.values()), per
    # the family's cases include one whose pieces go through the workspace (so the reduction
    # kernel runs too) and one summed in a cluster (DSMEM)
    fam = FAMILIES["smallm"]
    assert any(fam.deal(*s, 132).planes for s in per["family:smallm"])
    assert any(FAMILIES["smallm:dsmem"].deal(*s, 132).dsmem for s in per["family:smallm:dsmem"])
    assert (129, 264, 72) in per["step:7:d4"] and (128, 128, 64) in per["step:2"]
    assert len(per["matmul"]) == 3
    # under initcheck matmul skips the shape whose output goes through an internal buffer
    ic = san.plan("4", san.parse_shapes(san.DEFAULT_SHAPES), True, "initcheck")
    assert [s for t, _, s in ic if t == "matmul"] == [(256, 384, 320), (129, 264, 72)]


def test_plan_takes_the_b_early_builds(san):
    fam = san.parse_shapes(san.DEFAULT_FAMILY_SHAPES)
    cases = san.plan("smallm:n64~b_early,smallm~b_early", [], False, "racecheck", fam)
    assert {t for t, _, _ in cases} == {"family:smallm:n64~b_early", "family:smallm~b_early"}
    assert all(st.b_early and st.accepts(*s) for _, st, s in cases)
    for bad in ("smallm:n128m2~b_early", "smallm:n64~early", "9~b_early"):
        with pytest.raises(SystemExit, match="only move"):
            san.plan(bad, [], False, "racecheck", fam)


LOG = """\
========= COMPUTE-SANITIZER
[sanitize] BEGIN tool=racecheck target=step:4 shape=256x384x320 dtype=float16 output=preinit
[sanitize] END tool=racecheck target=step:4 shape=256x384x320 dtype=float16 output=preinit result=ok written=1/1
[sanitize] BEGIN tool=racecheck target=step:7 shape=256x384x320 dtype=float16 output=preinit
========= Error: Race reported between Write access at gemm_step7_warp_specialized+0x1a0
=========     and Read access at gemm_step7_warp_specialized+0x2b0 [4 hazards]
=========
[sanitize] END tool=racecheck target=step:7 shape=256x384x320 dtype=float16 output=preinit result=ok written=1/1
[sanitize] DONE tool=racecheck cases=2 failed=0
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
========= ERROR SUMMARY: 1 error
rc=86
"""

CLEAN = """\
========= COMPUTE-SANITIZER
[sanitize] BEGIN tool=memcheck target=matmul shape=129x257x72 dtype=bfloat16 output=preinit
[sanitize] END tool=memcheck target=matmul shape=129x257x72 dtype=bfloat16 output=preinit result=ok written=1/1
[sanitize] DONE tool=memcheck cases=1 failed=0
========= ERROR SUMMARY: 0 errors
rc=0
"""


def test_reports_are_attributed_to_their_case(san, tmp_path, capsys):
    bad, good = tmp_path / "sanitizer_racecheck.log", tmp_path / "sanitizer_memcheck.log"
    bad.write_text(LOG)
    good.write_text(CLEAN)
    r = san.read_log(bad)
    assert r["tool"] == "racecheck" and r["rc"] == 86 and r["done"]
    assert r["targets"]["step:4"]["reports"] == 0 and r["targets"]["step:7"]["reports"] == 1
    assert r["error_summary"] == "========= ERROR SUMMARY: 1 error"
    assert r["reports_outside_cases"] == 0
    assert san.summarize([good], str(tmp_path / "s.json")) == 0
    assert "memcheck  ERROR SUMMARY: 0 errors" in capsys.readouterr().out
    assert san.summarize([good, bad], None) == 1
    out = capsys.readouterr().out
    assert "step:7" in out and "NOT CLEAN" in out and "PROBLEMS FOUND" in out


def test_a_run_that_died_is_not_clean(san, tmp_path):
    log = tmp_path / "sanitizer_initcheck.log"
    log.write_text(CLEAN.split("[sanitize] DONE")[0].replace("result=ok", "result=FAIL") + "rc=124\n")
    assert san.summarize([log], None) == 1
    r = san.read_log(log)
    assert not r["done"] and r["targets"]["matmul"]["ok"] == 0
