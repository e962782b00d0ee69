"""driver.TensorMap's choices, with the driver call replaced (no GPU needed)."""
import pytest

from gemm_ladder.cuda import driver


@pytest.fixture
def encoded(monkeypatch):
    """The arguments of every cuTensorMapEncodeTiled call, through the real enums."""
    real = driver._cu()
    calls = []

    class Cu:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def cuTensorMapEncodeTiled(*args):
            calls.append(args)
            return (real.CUresult.CUDA_SUCCESS, object())

    monkeypatch.setattr(driver, "_cu", lambda: Cu())
    return calls


@pytest.mark.parametrize("ld,promotion", [(4096, "L2_256B"), (1008, "L2_256B"), (1024, "L2_256B"),
                                          (1000, "L2_128B"), (4104, "L2_128B"), (5000, "L2_128B")])
def test_l2_promotion_follows_the_row_alignment(encoded, ld, promotion):
    """Rows of whole 32-byte sectors promote L2 fills to 256 bytes; other rows (a 128-byte box
    row then straddles two lines) to 128 bytes (docs/perf-notes.md, item 30)."""
    driver.TensorMap(1 << 20, 64, ld, ld, 64, 64)
    promo = encoded[-1][9]  # dtype, rank, ptr, dims, strides, box, element strides, interleave, swizzle, promotion
    assert promo == getattr(driver._cu().CUtensorMapL2promotion, f"CU_TENSOR_MAP_L2_PROMOTION_{promotion}")
    assert list(encoded[-1][4]) and int(encoded[-1][4][0]) == 2 * ld  # the byte stride of the rows


def test_misaligned_tensor_is_refused(encoded):
    with pytest.raises(ValueError, match="16-byte"):
        driver.TensorMap(8, 64, 100, 100, 64, 64)
    with pytest.raises(ValueError, match="16-byte"):
        driver.TensorMap(1 << 20, 64, 100, 100, 64, 64)  # 200-byte rows
    assert not encoded
