"""Tensors the kernels cannot read as memory, named in one line: the kernels take data pointers,
so a tensor whose value is not its own memory — a forward-mode dual (its tangent would be
dropped), a torch.func transform's wrapper, a subclass wrapping another tensor (DTensor,
torchao's) — would give a wrong result or a launch on address 0. `torch.matmul` takes them all.
"""
from __future__ import annotations

import torch
import torch.autograd.forward_ad as _fwad

_functorch = torch._C._functorch


def forward_ad_active() -> bool:
    """A forward-mode AD level is open (fwAD.dual_level): duals may reach the call (12 ns)."""
    return _fwad._current_level >= 0


def in_vmap(*tensors) -> bool:
    """Some tensor is torch.func.vmap's batched wrapper (the custom op runs it per slice)."""
    return any(isinstance(t, torch.Tensor) and _functorch.is_batchedtensor(t) for t in tensors)


def check_plain(what: str, **tensors) -> None:
    """Raise one line for the first tensor (name=tensor; None skipped) the kernels cannot read."""
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            continue
        if _functorch.is_functorch_wrapped_tensor(t):
            raise NotImplementedError(f"{what}: {name} is a torch.func transform's tensor (grad, jvp, vjp, jacrev, "
                                      "jacfwd): not supported; differentiate with torch.autograd (backward) instead")
        if forward_ad_active() and _fwad.unpack_dual(t).tangent is not None:
            raise NotImplementedError(f"{what}: {name} is a forward-mode AD dual tensor: forward AD is not supported "
                                      "(no jvp rule); use reverse mode (backward)")
        try:
            ptr = t.data_ptr()
        except RuntimeError:  # no storage at all
            ptr = 0
        if t.numel() and not ptr:
            raise TypeError(f"{what}: {name} ({type(t).__name__}) has no memory of its own (a subclass wrapping "
                            "another tensor): pass a plain tensor, e.g. its local or dequantized value")
