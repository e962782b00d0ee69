"""What the attention probes share: our builds and SDPA's cuDNN timed in one loop
(interleaved, L2 flushed, medians), the SM clock and power sampled during that loop.
Imported by attention_walk.py and attention_ab.py (run from benchmarks/probes or with it on
the path)."""
import statistics

import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from gemm_ladder.measure.gpuinfo import Sampler


def time_against_cudnn(b, fns, names, q, k, v, causal, flops, reps):
    """TFLOP/s of each fn (by name) and of cuDNN ("cudnn") on the same q, k, v, and the GPU's
    samples during the timed loop."""
    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    fns, names = [*fns, cudnn], [*names, "cudnn"]
    b.time_interleaved(fns, 2)
    with Sampler(b.nvml) as smp:
        t = b.time_interleaved(fns, reps)
    return {n: flops / statistics.median(x) / 1e9 for n, x in zip(names, t)}, smp.summary()
