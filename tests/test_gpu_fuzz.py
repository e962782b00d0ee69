"""A short fuzz on the GPU (the full run: scripts/fuzz.py --cases 2000): random shapes,
layouts and values through matmul, matmul(step=...) and every step's run_step, against an
fp64 reference and cuBLAS. A failure lists one-line reproducers for scripts/fuzz.py --replay."""
import pytest

import fuzz_check as fc
import fuzz_support as fs
from gpu_util import needs_gpu

pytestmark = [needs_gpu, pytest.mark.gpu]

SEED = 11  # fixed: the same cases every run (the full fuzz varies the seed)


def _run(cases):
    lines = []
    rec = fc.run(cases, "cuda", log=lines.append)
    assert rec["n_failures"] == 0 and not rec["aborted"], "\n".join(lines[:20])
    return rec


@pytest.mark.parametrize("dtype", fs.DTYPES)
def test_fuzz_mixed(dtype):
    rec = _run(fs.cases(SEED, 150, (dtype,), max_dim=4096))
    assert rec["cases_per_dtype"] == {dtype: 150}
    assert set(rec["families"]["target"]) == {"matmul", "matmul@step", "run_step"}


@pytest.mark.parametrize("key", fs.step_keys())
def test_fuzz_each_step(key):
    """Every step's strict path (and matmul with that step) on shapes it accepts."""
    base = list(fs.cases(SEED + 1, 6, max_dim=2048))
    cases = [fs.for_step(c, key, kind) for c in base for kind in ("run_step", "matmul@step")]
    assert all(fs.get_step(key).accepts(c.M, c.N, c.K) for c in cases)
    rec = _run(cases)
    assert rec["families"]["step"] == {key: len(cases)}
