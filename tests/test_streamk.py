"""Step 9's stream-K variant (gemm:128x256sk) without a GPU: the host's rule for how many tiles to
split, the kernel's walk of segments (mirrored in fake_gpu.stream_k_segments) and the
library's launch of it, emulated on the CPU."""
import itertools

import pytest
import torch

import gemm_ladder
from fake_gpu import rnd, slice_of, stream_k_segments
from gemm_ladder.cuda import device as cuda_device
from gemm_ladder.families import gemm, ladder
from gemm_ladder.families.keys import get_step
from gemm_ladder.library import fastconfig

SK = get_step("gemm:128x256sk")


def test_stream_k_is_a_define_of_step_9_only():
    assert SK.kernel_defines()["GL_STREAM_K"] == 1 and SK.cluster == (1, 1, 1)
    assert get_step("gemm:128x256c2").kernel_defines()["GL_STREAM_K"] == 0
    assert get_step("gemm:128x256").kernel_defines()["GL_STREAM_K"] == 0
    assert "GL_STREAM_K" not in get_step("8").kernel_defines()
    with pytest.raises(ValueError, match="stream-K needs"):
        ladder.variant(gemm.ENTRIES["gemm:128x256c2"], "bad", stream_k=True)  # a cluster of 2


def test_kernel_args_carry_the_workspace_and_split_tiles():
    from gemm_ladder.cuda.driver import MapSlot
    args = SK.kernel_args(0, 0, 0, 512, 11008, 4096, bf16=False, make_map=MapSlot, ws_ptr=1 << 20, sk_tiles=40,
                          sk_ctas=120)
    assert len(args) == 9 and args[6].value == 1 << 20 and args[7:] == [40, 120]
    assert len(get_step("gemm:128x256").kernel_args(0, 0, 0, 64, 64, 64, bf16=False, make_map=MapSlot)) == 6


@pytest.mark.parametrize("M,N,K,expect", [
    (512, 11008, 4096, (40, 120)),   # 172 tiles: 1 round + 40 in 3 pieces (22 k-tiles + fixup < 64)
    (3072, 3072, 3072, (24, 96)),    # 288 tiles: 2 rounds + 24 in 4 pieces
    (2048, 11008, 4096, (28, 112)),  # 688 tiles: 5 rounds + 28 in 4 pieces
    (4224, 8448, 512, (0, 1)),       # 1089 tiles: 8 rounds + 33, but 8 k-tiles: the fixup costs more
    (4096, 4096, 4096, (0, 1)),      # 512 tiles: 116 left, no room for 2 pieces each
    (8192, 8192, 8192, (0, 1)),      # 2048 tiles: 68 left, the same
    (2048, 2048, 2048, (0, 1)),      # 128 tiles: one wave, nothing to fill
    (128 * 132, 256, 64, (0, 1)),    # a multiple of the CTAs
])
def test_split_rule(M, N, K, expect):
    assert SK.stream_k_deal(M, N, K, 132) == expect
    assert get_step("gemm:128x256").stream_k_deal(M, N, K, 132) == (0, 1)


def test_split_wave_model():
    # 3 pieces of 64 k-tiles: 22 + the piece writing 2 of the 4 chunks: publish half a slot,
    # read 2 others' halves
    assert SK.stream_k_last_wave(64, 3) == pytest.approx(22 + 5.4 / 2 + 3.4 * 2 / 2)
    assert SK.stream_k_last_wave(64, 4) == pytest.approx(16 + 5.4 * 3 / 4 + 3.4 * 3 / 4)


def test_slices_cover_the_chunks():
    for p in (2, 3, 4):
        spans = [slice_of(j, p, 4) for j in range(p)]
        assert [c for lo, hi in spans for c in range(lo, hi)] == [0, 1, 2, 3] and all(hi > lo for lo, hi in spans)


def test_stream_k_problems():
    assert SK.stream_k_problem(512, 11008, 4096, 132, 40, 120) == ""
    assert SK.stream_k_problem(512, 11008, 4096, 132, 0, 1) == ""
    assert "outside 0..172" in SK.stream_k_problem(512, 11008, 4096, 132, 173, 132)
    assert "outside 1..132" in SK.stream_k_problem(512, 11008, 4096, 132, 40, 160)
    assert "not P x sk_tiles" in SK.stream_k_problem(512, 11008, 4096, 132, 40, 132)  # not a multiple
    assert "not P x sk_tiles" in SK.stream_k_problem(512, 11008, 4096, 132, 40, 40)  # one piece
    assert "not P x sk_tiles" in SK.stream_k_problem(128 * 132, 1280, 4096, 132, 20, 100)  # 5 pieces > 4 chunks
    assert "not P x sk_tiles" in SK.stream_k_problem(512, 11008, 64, 132, 40, 80)  # 2 pieces of 1 k-tile


def test_workspace_size():
    # 132 x 2 flags in 1,056 bytes -> 1,280 (256-byte padding), then 132 slots of 128 x 256
    assert SK.workspace_floats(132) == 320 + 132 * 128 * 256


@pytest.mark.parametrize("tiles,ctas,k_tiles", [(t, g, k) for t, g, k in itertools.product(
    (5, 9, 17, 64, 133, 300), (4, 7, 8, 132), (1, 2, 3, 16, 64)) if t >= g])
def test_segments_cover_every_unit_once_one_piece_per_cta(tiles, ctas, k_tiles):
    rest = tiles % ctas
    for sk, p in [(0, 2)] + [(n, p) for n in (rest, min(tiles, rest + ctas), tiles) for p in (2, 3, 4)]:
        if SK.stream_k_problem(128 * tiles, 256, 64 * k_tiles, ctas, sk, sk * p if sk else 1):
            continue
        seen = []
        for cta in range(ctas):
            segs = stream_k_segments(tiles, sk, k_tiles, ctas, cta, sk * p if sk else None)
            for i, (t, k0, k1) in enumerate(segs):
                assert 0 <= k0 < k1 <= k_tiles
                seen += [(t, k) for k in range(k0, k1)]
                if t >= tiles - sk:  # a piece: the CTA's last segment, piece cta % p of its tile
                    assert i == len(segs) - 1 and cta // p == t - (tiles - sk)
                    assert (k0, k1) == (k_tiles * (cta % p) // p, k_tiles * (cta % p + 1) // p)
                else:
                    assert (k0, k1) == (0, k_tiles)
        assert sorted(seen) == [(t, k) for t in range(tiles) for k in range(k_tiles)]


@pytest.mark.parametrize("M,N,K,sms", [
    (17 * 128, 256, 1024, 8),   # 17 tiles on 8 CTAs: 1 split in 4 pieces
    (19 * 128, 256, 2048, 8),   # 3 split in 2 pieces
    (2400, 520, 1000, 24),      # ragged tiles in M, N and K (K's last k-tile zero-filled): 57 = 2 x 24 + 9
    (1000, 1000, 4000, 16),     # 32 tiles on 16: a multiple, nothing split
])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_library_launch_of_stream_k(gpu, monkeypatch, M, N, K, sms, dtype):
    monkeypatch.setattr(cuda_device, "num_sms", lambda dev: sms)
    monkeypatch.setattr(fastconfig, "_WORKSPACES", {})
    a, b = rnd(M, K, dtype=dtype), rnd(K, N, dtype=dtype, seed=1)
    expect = SK.stream_k_deal(M, N, K, sms)
    for _ in range(2):  # the second call reuses the stream's workspace
        c = gemm_ladder.matmul(a, b, step="gemm:128x256sk")
        ref = a.float() @ b.float()
        torch.testing.assert_close(c.float(), ref, atol=2e-2 * ref.abs().max().item(), rtol=1e-2)
        rec = gpu.launches[-1]
        assert (rec.sk_tiles, rec.sk_ctas) == expect
        assert rec.grid == (min(sms, SK.tiles(M, N)), 1, 1)
    if expect[0]:
        assert len(fastconfig._WORKSPACES) == 1 and rec.ws == fastconfig._WORKSPACES[(0, gpu.stream)].data_ptr()
        assert rec.sk_ctas == 2 * rec.sk_tiles or rec.sk_ctas >= 3 * rec.sk_tiles  # pieces per tile
    else:
        assert not fastconfig._WORKSPACES


def test_a_workspace_per_stream(gpu, monkeypatch):
    monkeypatch.setattr(cuda_device, "num_sms", lambda dev: 8)
    monkeypatch.setattr(fastconfig, "_WORKSPACES", {})
    a, b = rnd(19 * 128, 2048), rnd(2048, 256, seed=1)
    gemm_ladder.matmul(a, b, step="gemm:128x256sk")
    gpu.stream = 9
    gemm_ladder.matmul(a, b, step="gemm:128x256sk")
    ws = fastconfig._WORKSPACES
    assert set(ws) == {(0, 7), (0, 9)} and ws[(0, 7)].data_ptr() != ws[(0, 9)].data_ptr()
    assert gpu.launches[-1].ws == ws[(0, 9)].data_ptr()
