"""matmul under concurrency on the GPU: several Python threads at once, each on its own
non-default stream; stream ordering (work queued before matmul on its stream is seen, work
after it sees the result, and a call runs on the stream current at the call, not the one
an earlier call used); a thread that never made a CUDA call; a fresh process whose threads
all compile and load their kernels at the same moment."""
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import fuzz_check as fc
from gpu_util import needs_gpu

pytestmark = [needs_gpu, pytest.mark.gpu]

SHAPES = [(256, 384, 320), (129, 257, 72), (1000, 136, 520), (64, 4096, 256), (777, 999, 1031)]
STEPS = [None, "4", "5", "6", "7", "7:d4"]
SLEEP_CYCLES = 50_000_000  # ~25 ms of torch.cuda._sleep: holds a stream while later work queues


def _check(a, b, c, what):
    v = fc.check_product(a, b, c)
    assert v["ok"], f"{what}: {v['problems']}"


def _worker(i, barrier, iters, failures):
    import torch

    import gemm_ladder
    try:
        stream = torch.cuda.Stream()
        gen = torch.Generator(device="cuda").manual_seed(1000 + i)
        dtype = (torch.float16, torch.bfloat16)[i % 2]
        step = STEPS[i % len(STEPS)]
        barrier.wait(timeout=60)
        with torch.cuda.stream(stream):
            for it in range(iters):
                M, N, K = SHAPES[(i + it) % len(SHAPES)]
                a = torch.randn(M, K, device="cuda", generator=gen).to(dtype)  # produced on `stream`
                b = torch.randn(K, N, device="cuda", generator=gen).to(dtype)
                c = gemm_ladder.matmul(a, b, step=step)
                v = fc.check_product(a, b, c)  # reads c on `stream`, after matmul
                if not v["ok"]:
                    failures.append(f"thread {i} iter {it} step {step} {M}x{N}x{K} {dtype}: {v['problems']}")
    except Exception as e:  # reported by the test
        failures.append(f"thread {i}: {type(e).__name__}: {e}")


@pytest.mark.parametrize("threads", [4, 8])
def test_threads_on_their_own_streams(threads):
    barrier, failures = threading.Barrier(threads), []
    workers = [threading.Thread(target=_worker, args=(i, barrier, 12, failures)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=600)
    assert not any(w.is_alive() for w in workers), "a thread did not finish"
    assert not failures, "\n".join(failures[:10])


@pytest.mark.parametrize("step", [None, "1", "4", "6", "7:d4"])
@pytest.mark.parametrize("use_out", [False, True])
def test_stream_order_producer_and_consumer(step, use_out):
    """a is rewritten on stream s after a ~25 ms sleep, then matmul runs on s: a launch on
    any other stream would read the old a (zeros) and the check would fail."""
    import torch

    import gemm_ladder
    M, N, K = (256, 384, 320) if step != "1" else (130, 70, 90)
    gen = torch.Generator(device="cuda").manual_seed(5)
    a = torch.zeros(M, K, device="cuda", dtype=torch.float16)
    a_new = torch.randn(M, K, device="cuda", generator=gen).half()
    b = torch.randn(K, N, device="cuda", generator=gen).half()
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16) if use_out else None
    seen = torch.empty(M, N, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP_CYCLES)
        a.copy_(a_new)  # the producer
        c = gemm_ladder.matmul(a, b, out=out, step=step)
        seen.copy_(c)  # the consumer
        a.zero_()  # the next writer of a: queued after matmul's read
    s.synchronize()
    _check(a_new, b, seen, f"step {step} out={use_out}")


def test_call_runs_on_the_stream_current_at_the_call():
    """The same shape and step on stream s1, then on s2: the second call must not reuse
    the first call's stream."""
    import torch

    import gemm_ladder
    gen = torch.Generator(device="cuda").manual_seed(6)
    a = torch.randn(512, 256, device="cuda", generator=gen).half()
    a_new = torch.randn(512, 256, device="cuda", generator=gen).half()
    b = torch.randn(256, 384, device="cuda", generator=gen).half()
    seen = torch.empty(512, 384, device="cuda", dtype=torch.float16)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    for _ in range(3):  # warm every cache a call may fill, on s1
        with torch.cuda.stream(s1):
            gemm_ladder.matmul(a, b)
    s1.synchronize()
    with torch.cuda.stream(s2):
        torch.cuda._sleep(SLEEP_CYCLES)
        a.copy_(a_new)
        seen.copy_(gemm_ladder.matmul(a, b))
    s2.synchronize()
    _check(a_new, b, seen, "second stream")


def test_event_ordering_across_streams():
    """Producer on s1, matmul on s2 after s2 waits on s1's event, consumer on s3 after s2's."""
    import torch

    import gemm_ladder
    gen = torch.Generator(device="cuda").manual_seed(7)
    a = torch.zeros(300, 200, device="cuda", dtype=torch.bfloat16)
    a_new = torch.randn(300, 200, device="cuda", generator=gen).bfloat16()
    b = torch.randn(200, 500, device="cuda", generator=gen).bfloat16()
    seen = torch.empty(300, 500, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    s1, s2, s3 = (torch.cuda.Stream() for _ in range(3))
    with torch.cuda.stream(s1):
        torch.cuda._sleep(SLEEP_CYCLES)
        a.copy_(a_new)
        produced = torch.cuda.Event()
        produced.record()
    with torch.cuda.stream(s2):
        s2.wait_event(produced)
        c = gemm_ladder.matmul(a, b)
        done = torch.cuda.Event()
        done.record()
    with torch.cuda.stream(s3):
        s3.wait_event(done)
        seen.copy_(c)
    torch.cuda.synchronize()
    _check(a_new, b, seen, "event-ordered streams")


def test_thread_that_never_touched_cuda():
    """Tensors made on the main thread, the kernel already prepared there; a new thread's
    only CUDA work is the matmul (out= given, so nothing is allocated in the thread)."""
    import torch

    import gemm_ladder
    gen = torch.Generator(device="cuda").manual_seed(8)
    a = torch.randn(256, 320, device="cuda", generator=gen).half()
    bt = torch.randn(384, 320, device="cuda", generator=gen).half()
    out = torch.full((256, 384), float("nan"), device="cuda", dtype=torch.float16)
    gemm_ladder.matmul(a, bt.T, out=out)  # prepares the kernel on this thread
    out.fill_(float("nan"))
    torch.cuda.synchronize()
    errors = []

    def cold():
        try:
            gemm_ladder.matmul(a, bt.T, out=out)
        except Exception as e:  # reported by the test
            errors.append(f"{type(e).__name__}: {e}")

    t = threading.Thread(target=cold)
    t.start()
    t.join(timeout=120)
    assert not errors, errors
    torch.cuda.synchronize()
    _check(a, bt.T, out, "cold thread")


_FRESH = r"""
import json, sys, threading, torch, gemm_ladder
import fuzz_check as fc
keys = ["4", "5", "6", "7", "7:d3", "7:d4"]
barrier, results = threading.Barrier(len(keys)), {}
def go(i, key):
    try:
        gen = torch.Generator(device="cuda").manual_seed(i)
        a = torch.randn(333, 200, device="cuda", generator=gen).half()
        b = torch.randn(200, 136, device="cuda", generator=gen).half()
        barrier.wait(timeout=60)
        c = gemm_ladder.matmul(a, b, step=key)  # every thread prepares its kernel at once
        torch.cuda.current_stream().synchronize()
        v = fc.check_product(a, b, c)
        results[key] = "ok" if v["ok"] else str(v["problems"])
    except Exception as e:
        results[key] = f"{type(e).__name__}: {e}"
ts = [threading.Thread(target=go, args=(i, k)) for i, k in enumerate(keys)]
[t.start() for t in ts]; [t.join(timeout=300) for t in ts]
print(json.dumps(results))
"""


def test_fresh_process_threads_prepare_at_once():
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), str(root / "tests"), env.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    results = json.loads(p.stdout.strip().splitlines()[-1])
    assert results == {k: "ok" for k in ["4", "5", "6", "7", "7:d3", "7:d4"]}, results
