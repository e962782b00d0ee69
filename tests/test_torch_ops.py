"""The gemm_ladder::matmul custom op, linear and Linear without a GPU: shape inference on
meta tensors, torch.compile tracing, autograd, with the driver emulated (fake_gpu)."""
import pytest
import torch

import gemm_ladder
from gemm_ladder.library import torch_ops  # noqa: F401  (registers the op)


def rnd(*shape, dtype=torch.float16, seed=0, **kw):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).to(dtype).requires_grad_(kw.get("requires_grad", False))


@pytest.mark.parametrize("a_shape,b_shape", [((5, 16), (16, 8)), ((2, 3, 16), (16, 33)), ((7, 9), (9, 1))])
def test_fake_op_infers_shape_and_strides_on_meta(a_shape, b_shape):
    a = torch.empty(a_shape, dtype=torch.bfloat16, device="meta")
    b = torch.empty(b_shape, dtype=torch.bfloat16, device="meta")
    y = torch.ops.gemm_ladder.matmul(a, b)
    N = b_shape[1]
    assert y.shape == (*a_shape[:-1], N) and y.dtype == torch.bfloat16 and y.device.type == "meta"
    assert y.stride()[-2] == -(-N // 8) * 8 and y.stride()[-1] == 1


def test_fake_op_rejects_what_the_real_one_rejects():
    meta = dict(device="meta", dtype=torch.float16)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        torch.ops.gemm_ladder.matmul(torch.empty(4, 8, **meta), torch.empty(6, 2, **meta))
    with pytest.raises(TypeError, match="same dtype"):
        torch.ops.gemm_ladder.matmul(torch.empty(4, 8, **meta), torch.empty(8, 2, device="meta"))


def test_op_matches_fake_on_the_emulated_driver(gpu):
    """The real op's output has exactly the strides its fake promises (torch.compile relies on it)."""
    for a, b in [(rnd(5, 16), rnd(16, 8)), (rnd(2, 3, 16), rnd(33, 16).T), (rnd(7, 9), rnd(9, 1))]:
        real = torch.ops.gemm_ladder.matmul(a, b)
        fake = torch.ops.gemm_ladder.matmul(a.to("meta"), b.to("meta"))
        assert (real.shape, real.stride(), real.dtype) == (fake.shape, fake.stride(), fake.dtype)


def test_opcheck(gpu):
    a, b = rnd(12, 24, requires_grad=True), rnd(40, 24, seed=1, requires_grad=True)
    torch.library.opcheck(torch.ops.gemm_ladder.matmul.default, (a, b.T, None))
    torch.library.opcheck(torch.ops.gemm_ladder.matmul.default, (rnd(2, 3, 16), rnd(16, 20), "7"))


def test_autograd_through_linear(gpu):
    x = rnd(4, 6, 32, requires_grad=True)
    layer = gemm_ladder.Linear(32, 24, dtype=torch.float16)
    y = layer(x)
    assert y.shape == (4, 6, 24) and y.grad_fn is not None
    y.float().square().sum().backward()
    xr, wr = x.detach().float().requires_grad_(), layer.weight.detach().float().requires_grad_()
    (xr @ wr.T).square().sum().backward()
    torch.testing.assert_close(x.grad.float(), xr.grad, rtol=2e-2, atol=2e-2 * xr.grad.abs().max().item())
    torch.testing.assert_close(layer.weight.grad.float(), wr.grad, rtol=2e-2,
                               atol=2e-2 * wr.grad.abs().max().item())


def test_out_with_autograd_is_refused(gpu):
    with pytest.raises(RuntimeError, match="out= does not support automatic differentiation"):
        gemm_ladder.matmul(rnd(4, 8, requires_grad=True), rnd(8, 8), out=torch.empty(4, 8).half())


def test_linear_module_matches_nn_linear(gpu):
    ref = torch.nn.Linear(32, 24, bias=True).half()
    ours = gemm_ladder.Linear.from_linear(ref)
    x = rnd(3, 32)
    with torch.no_grad():
        torch.testing.assert_close(ours(x).float(), ref.float()(x.float()), rtol=1e-2, atol=1e-2)
    assert ours.weight is ref.weight and "bias=True" in repr(ours)
    fresh = gemm_ladder.Linear(32, 24)
    assert fresh.bias is None and set(fresh.state_dict()) == {"weight"}
    assert set(gemm_ladder.Linear(32, 24, bias=True).state_dict()) == set(ref.state_dict())


class TwoLayer(torch.nn.Module):
    def __init__(self, d=32, h=48):
        super().__init__()
        self.up = gemm_ladder.Linear(d, h, dtype=torch.float16)
        self.down = gemm_ladder.Linear(h, d, dtype=torch.float16)
        self.skip = torch.nn.Parameter(torch.randn(d, d, dtype=torch.float16) / d)

    def forward(self, x):  # the layers' op calls, and gemm_ladder.matmul routed to the op
        return self.down(torch.relu(self.up(x))) + gemm_ladder.matmul(x, self.skip)


def test_compile_fullgraph_traces_the_op(gpu):
    torch.manual_seed(0)
    model = TwoLayer()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        from torch._dynamo.backends.common import aot_autograd
        return aot_autograd(fw_compiler=lambda g, _: g.forward)(gm, example_inputs)

    compiled = torch.compile(model, fullgraph=True, backend=backend)
    x = rnd(2, 5, 32)
    with torch.no_grad():
        eager = model(x)
        got = compiled(x)
    torch.testing.assert_close(got, eager)
    assert len(graphs) == 1
    op = torch.ops.gemm_ladder.matmul
    calls = [n for n in graphs[0].graph.nodes if n.op == "call_function" and n.target in (op, op.default)]
    assert len(calls) == 3
