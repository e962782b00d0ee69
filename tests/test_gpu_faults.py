"""What an error leaves behind (docs/faults.md): an error raised before a launch (bad
shape, bad dtype, a kernel configuration the driver refuses) and torch's out-of-memory
error on the output leave the process fully usable; a kernel that faults kills its CUDA
context, so such runs belong in a child process, and the parent is unaffected."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fuzz_check as fc
from gpu_util import needs_gpu

pytestmark = [needs_gpu, pytest.mark.gpu]


def _works_afterwards():
    import torch

    import gemm_ladder
    gen = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(333, 200, device="cuda", generator=gen).half()
    b = torch.randn(200, 136, device="cuda", generator=gen).half()
    for step in (None, "4", "7:d4"):
        c = gemm_ladder.matmul(a, b, step=step)
        v = fc.check_product(a, b, c)
        assert v["ok"], (step, v["problems"])
    torch.cuda.synchronize()


def test_errors_caught_before_launch_do_not_poison_later_calls():
    import torch

    import gemm_ladder
    from gemm_ladder.library.runner import run_step
    a = torch.randn(100, 64, device="cuda").half()
    with pytest.raises(gemm_ladder.ShapeError, match="multiple of 128"):
        run_step(gemm_ladder.get_step("2"), a, torch.randn(128, 64, device="cuda").half())
    with pytest.raises(ValueError, match="inner dimensions"):
        gemm_ladder.matmul(a, torch.randn(65, 8, device="cuda").half())
    with pytest.raises(TypeError, match="same dtype"):
        gemm_ladder.matmul(a, torch.randn(64, 8, device="cuda").bfloat16())
    with pytest.raises(ValueError, match="contiguous"):
        run_step(gemm_ladder.get_step("4"), a[:, :32], torch.randn(128, 32, device="cuda").half())
    _works_afterwards()


def test_a_configuration_the_driver_refuses_is_a_clear_error_and_not_sticky():
    """Step 5 with a 12-deep ring asks for ~420 KB of shared memory (the H200 has 227 KB
    per block): the driver refuses it before anything is launched."""
    import torch

    import gemm_ladder
    st = gemm_ladder.get_step("5:d12")
    assert st.dynamic_smem > 232448
    a = torch.randn(256, 256, device="cuda").half()
    with pytest.raises(Exception) as info:
        gemm_ladder.matmul(a, a, step=st)
        torch.cuda.synchronize()
    assert str(info.value).strip(), "the error must say what went wrong"
    _works_afterwards()


def test_out_of_memory_on_the_output_is_torchs_error():
    """M x N = 2^16 x 2^24 fp16 is 2 TiB: allocating the output fails with torch's own
    OutOfMemoryError (b is a transposed view, so no operand copy is needed first)."""
    import torch

    import gemm_ladder
    a = torch.randn(1 << 16, 64, device="cuda").half()
    bt = torch.randn(1 << 24, 64, device="cuda").half()
    with pytest.raises(torch.OutOfMemoryError):
        gemm_ladder.matmul(a, bt.T)
    del a, bt
    torch.cuda.empty_cache()
    _works_afterwards()


_FAULT = r"""
import ctypes, json, torch
import gemm_ladder
from gemm_ladder.cuda import driver
from gemm_ladder.families.keys import get_step
out = {}
st = get_step("1")
torch.zeros(1, device="cuda")  # the primary context exists
lk = driver.load(st.compile(), 0, st.dynamic_smem)
bad = ctypes.c_uint64(16)  # not a device address
driver.PreparedLaunch(lk, (1, 1, 1), (st.threads, 1, 1), [bad, bad, bad, 16, 16, 16], stream=0)()
try:
    torch.cuda.synchronize()
    out["fault"] = None
except Exception as e:
    out["fault"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
try:
    a = torch.randn(64, 64, device="cuda").half()
    gemm_ladder.matmul(a, a)
    torch.cuda.synchronize()
    out["later_call"] = "ok"
except Exception as e:
    out["later_call"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
print(json.dumps(out))
"""


def test_kernel_fault_kills_only_the_child_context():
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="0")
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), env.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, "-c", _FAULT], capture_output=True, text=True, timeout=300, env=env)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    assert lines, (p.returncode, p.stderr[-3000:])
    res = json.loads(lines[-1])
    assert res["fault"] and "illegal" in res["fault"].lower(), res  # a clear message
    assert res["later_call"] != "ok", res  # the context is gone for good: hence child processes
    _works_afterwards()  # and this process never noticed
