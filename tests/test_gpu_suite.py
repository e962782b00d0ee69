"""The suite runner and the copy-bandwidth measurement on the GPU (correctness and record
format only: nothing here asserts a speed)."""
import math

import pytest

from gpu_util import needs_gpu

pytestmark = [needs_gpu, pytest.mark.gpu]


def test_suite_rows_on_selected_kernels():
    from gemm_ladder.measure import suite
    from gemm_ladder.measure.suites import Shape
    shapes = [Shape(256, 384, 192, "test", "aligned"), Shape(127, 8191, 255, "test", "padded"),
              Shape(1, 4096, 4096, "test", "one row")]
    res = suite.run_suite("test", ["float16", "bfloat16"], shapes=shapes)
    rows = res["rows"]
    assert len(rows) == 6
    for r in rows:
        assert r["ok"], r["error"]
        assert r["kernel"] and r["reps"] == suite.reps_for(2.0 * r["M"] * r["N"] * r["K"])
        assert math.isfinite(r["ratio_to_cublas"]) and r["ratio_to_cublas"] > 0
    assert [r["padded"] for r in rows if r["label"] == "padded"] == [True, True]
    assert set(res["summary"]) == {"float16", "bfloat16"}
    assert res["memory"]["hbm_copy_gbs"] > 0, res["memory"]
    assert res["memory"].get("l2_copy_gbs", 0) > 0, res["memory"]


def test_ladder_bench_records_copy_bandwidth():
    from gemm_ladder.families.keys import get_step
    from gemm_ladder.measure import bench
    res = bench.run([get_step("4")], [(256, 256, 256)], reps=3)
    assert res["rows"][0]["ok"]
    assert res["memory"]["hbm_copy_gbs"] > 0, res["memory"]


@pytest.mark.parametrize("call", ["matmul", "matmul_nt"])
def test_suite_through_the_library_call(call):
    """The library's call against torch.matmul on the same operands: correct rows, the kernel
    the library ran, the operands it copied."""
    from gemm_ladder.measure import suite
    from gemm_ladder.measure.suites import Shape
    shapes = [Shape(256, 384, 192, "test", "aligned"), Shape(127, 8191, 255, "test", "padded"),
              Shape(16, 4096, 4096, "test", "small M")]
    res = suite.run_suite("test", ["float16"], shapes=shapes, call=call)
    assert res["suite"] == f"test-{call}" and res["call"] == call
    for r in res["rows"]:
        assert r["ok"], r["error"]
        assert r["call"] == call and r["kernel"] and math.isfinite(r["ratio_to_cublas"]) and r["ratio_to_cublas"] > 0
    assert [r["staged"] for r in res["rows"]] == ["", "a,b", ""]  # K = 255: copies; a row-major b: in place
