"""Debug builds of the attention steps: bounded mbarrier waits (GL_DEBUG_WAITS) that name who was
stuck where, and the what-ifs' ablations (choreography/whatifs.py). A trapped kernel leaves the
CUDA context unusable: run these in a child process (choreography/gpu_whatifs.py does)."""
from __future__ import annotations

import math

from ..cuda import device as cuda_device
from ..cuda import driver
from ..families.attention import get, make_maps
from .attention_runner import check
from .runner import PipelineDeadlock, decode_stuck_record


def run_debug(q, k, v, *, step: str, causal: bool, extra_defines: dict | None = None, out=None):
    """O for q, k, v (as run_attention takes them) from the debug build of `step` with
    `extra_defines`, synchronized; a timed-out wait raises PipelineDeadlock naming the role,
    barrier, stage and phase."""
    import torch
    B, Hq, Hkv, Sq, Sk, D = check(q, k, v, step)
    st = get(step, D)
    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()
    element = "bf16" if q.dtype == torch.bfloat16 else "f16"
    driver.ensure_context(dev)
    compiled = st.compile(bf16=element == "bf16", causal=causal,
                          extra_defines={"GL_DEBUG_WAITS": 1, **(extra_defines or {})})
    kernel = driver.load(compiled, dev, st.dynamic_smem)
    stuck = driver.HostMappedBuffer(64)
    kernel.set_global_u64("gl_stuck_record", stuck.device_ptr)
    if out is None:
        out = torch.full((B, Hq, Sq, D), float("nan"), dtype=q.dtype, device=q.device)
    specs = st.map_specs(q.shape, q.stride(), k.shape, k.stride(), v.stride())
    maps = make_maps(specs, (q.data_ptr(), k.data_ptr(), v.data_ptr()), element)
    args = st.kernel_args(maps, out.data_ptr(), 0, Sq, Sk, Hq, Hq // Hkv, st.tiles(Sq, Hq, B), 1 / math.sqrt(D))
    driver.PreparedLaunch(kernel, st.grid(Sq, Hq, B, cuda_device.num_sms(dev)), (st.threads, 1, 1), args,
                          stream=torch.cuda.current_stream(q.device).cuda_stream, dynamic_smem=st.dynamic_smem)()
    try:
        torch.cuda.synchronize(dev)
    except Exception as e:  # a trapped debug kernel surfaces here as a launch failure
        msg = decode_stuck_record(stuck.read(), st)
        if msg:
            raise PipelineDeadlock(msg + f" (CUDA: {str(e).splitlines()[0]})") from e
        raise
    return out
