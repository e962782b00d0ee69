"""Measured in-kernel traces of the attention steps (A2-A5): run a GL_TRACE build on about one
wave of tiles, decode its event buffer (:func:`trace.decode`, the GEMM's tracer and layout) into
the Timeline the attention simulator draws (:mod:`.sim.attention`), and compute its KPIs the way
the simulator computes them, per SM.

What the kernels record (kernels/attention/, GL_TRACE=1), one slot per role and CTA: slot 0 the
producer (A2: the team's leader), slots 1, 2 (3) the consumer warpgroups. The rings' waits and
arrivals (k_full, k_empty, v_full, v_empty, q_full, q_empty, turn; A2's lockstep ring ``full``,
drawn as the simulator's ``kv_full``), the producer's TMA issues (barrier and block), and per
consumer its tile, each MMA's issue and retirement (named by the operand's full barrier: Q K^T
of block k on k_full, P V on v_full) and each block's softmax. At head dim 256 the consumers
record the rings only (the spans' stores would spill): such a trace has no MMA or softmax spans.
A3-A5 write a consumer's key block as one record of four slots (EV_ATTN_BLOCK) and each of the
producer's K and V stages as one of two (EV_STAGE_LOAD); :func:`trace.decode` expands them into
those events, so traces recorded one event at a time decode the same way.

Spans follow the simulator's conventions: lanes ``cta<i>/producer``, ``consumer<c>``, ``tma``
(A2: ``team``, ``tma``); ``mma`` spans on the consumer's lane with the SMEM slot (K stage s is
slot s, V stage s slot DEPTH + s), ``k`` = block, barrier k_full / v_full; ``softmax`` spans;
``load`` spans on the tma lane from the TMA issue to the first consumer that saw the block land
(an upper bound on the landing, exact when a consumer was already waiting).

MMA spans: a wgmma group's retirement is seen only at the consumer's ``wgmma.wait_group``: A4
issues P V_j and Q K^T_{j+1} in one turn and waits for both at once (its trace records P V_j's
retirement only: the Q K^T retires with it); A5 waits for Q K^T_{j+1} alone (wait_group 1), then
for P V_j. The raw spans (issue -> seen retired) are then settled on the SM's one tensor core as
the GEMM decoder does (:func:`trace._settle_mma_spans`): in issue order, each for at most its
duration at the peak rate, so tensor-core busy is a lower bound and no group counts twice.
"""
from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict

from ..families import attention as attn_family
from . import trace
from .sim.attn_params import params_for_attention
from .timeline import WGMMA_ISSUED, Handoff, Span, Timeline, kpis, lane_name

TRACE_SEQ_LEN = 4096  # the traced shape's default: 32 key blocks of 128 at head dim 128
FULL = ("k_full", "v_full", "kv_full")
RING = {"k_full": "K", "v_full": "V", "kv_full": "K"}
MMA_NAME = {"k_full": "Q K^T", "v_full": "P V"}
# the KPIs the summary averages over SMs (the simulator's, for one SM)
KPI_KEYS = ("tensor_core_busy", "tensor_core_busy_steady", "fill_ns", "drain_ns", "softmax_busy", "cuda_core_busy",
            "per_block_ns", "tflops_steady")


def step_of(step, head_dim: int | None = None) -> attn_family.AttnStep:
    """An AttnStep, or a key ('A4') at ``head_dim`` (default 128)."""
    if isinstance(step, attn_family.AttnStep):
        return step if head_dim is None else step.for_head_dim(head_dim)
    return attn_family.get(step, head_dim or 128)


def spans_recorded(step) -> bool:
    """Whether the traced build records MMA and softmax spans (kernels' TRACE_SPANS: D < 256)."""
    return step.head_dim < 256


def events_needed(step, seq_len: int, tiles_per_cta: int = 1) -> int:
    """Capacity per slot that holds every event of the busiest role. Per key block A2's team
    records 9 events; A3-A5's consumers one record of 4 slots (up to 15 events: a turn's wait
    and pass, the K and V waits, two MMA issues and a retirement or two, two releases, the
    softmax's begin and end), their producer two of 2; per tile at most 7 slots besides (the
    tile, the Q wait, A4 and A5's first block). 16 and 16, and 16 to spare."""
    blocks = -(-seq_len // step.bn)
    return tiles_per_cta * (16 * blocks + 16) + 16


def one_wave_heads(step, seq_len: int, num_sms: int) -> int:
    """Heads (batch 1) whose tiles fill about one wave: num_sms x CTAs per SM (the attention
    model's: two for A2 below head dim 256, else one) over the query blocks of a head."""
    per_sm = 1 if step.persistent else params_for_attention(step.key[:2], step.head_dim).ctas_per_sm
    return max(1, num_sms * per_sm // -(-seq_len // step.bm))


# ---- records -> timeline --------------------------------------------------------------------

def _bar(bid: int, lockstep: bool) -> str | None:
    name = trace.BARRIERS.get(bid)
    return "kv_full" if lockstep and name == "full" else name


def _slot_lane(r: dict) -> str:
    if r["slot"] == 0:
        return "team" if r["role"] == "team" else "producer"
    return f"consumer{r['slot'] - 1}"


def _mma_label(bar: str, k: int, slot: int, depth: int) -> str:
    ring = "K" if slot < depth else "V"
    return f"{MMA_NAME[bar]} block {k} ({ring} stage {slot % depth})"


def _decode_slot(r: dict, step, cta: int, offset: int, out: dict) -> None:
    """One recording slot's events -> its spans (raw MMA spans into out["mma"]), and what the
    loads and hand-offs need: waits, arrivals, loads, the first wait that saw each block land."""
    lockstep, depth = not step.producer, step.depth
    intra = step.key.startswith("A5")
    role = _slot_lane(r)
    lane = lane_name(cta, role)
    out["lanes"].append(lane)
    out["ns_per_clock"][lane] = r.get("ns_per_clock") or 0.0
    spans = out["spans"]
    tile = 0 if lockstep else -1
    open_wait, soft_open = None, {}
    full_stage: dict[tuple[str, int], int] = {}   # (full barrier, block) -> the stage waited on
    mma_open: list[dict] = []
    for (t, kind, bid, stage, phase, k, tile_id) in r["events"]:
        t += offset
        name = trace.EVENT_NAMES.get(kind, "?")
        bar = _bar(bid, lockstep)
        k = trace._signed16(k)
        here = max(tile, 0)
        if name == "EV_TILE_BEGIN":
            tile += 1
            if role == "consumer0":  # the tiles' global numbers (attn_tile's order), once per CTA
                out["tile_ids"].setdefault(cta, []).append(tile_id)
        elif name == "EV_WAIT_BEGIN":
            if bar == "q_empty" and role == "producer":
                tile += 1
                here = tile
            open_wait = (t, bar, stage, phase, k)
        elif name == "EV_WAIT_END" and open_wait is not None:
            t0, b0, s0, p0, k0 = open_wait
            spans.append(Span(lane, "wait", t0, t, stage=s0, phase=p0, barrier=b0, k=k0, tile=here, cta=cta,
                              label=f"wait {b0}[{s0}] parity {p0}"))
            out["waits"].append((b0, s0, t, lane))
            if b0 in FULL:
                full_stage[(b0, k0)] = s0
                key = (b0, here, k0)
                out["ready"][key] = min(out["ready"].get(key, t), t)
            open_wait = None
        elif name == "EV_LOAD_ISSUE":
            spans.append(Span(lane, "issue", t, t, stage=stage, phase=phase, barrier=bar, k=k, tile=here, cta=cta,
                              label=f"TMA {'K, V' if lockstep else RING.get(bar, bar)} block {k} -> stage {stage}"))
            out["loads"].append((t, bar, stage, here, k))
            out["arrivals"][(bar, stage)].append((t, lane))
        elif name == "EV_ARRIVE":
            what = f"arrive turn[{stage}] (pass the turn)" if bar == "turn" else f"arrive {bar}[{stage}]"
            spans.append(Span(lane, "issue", t, t, stage=stage, phase=phase, barrier=bar, k=k, tile=here, cta=cta,
                              label=what))
            out["arrivals"][(bar, stage)].append((t, lane))
        elif name == "EV_MMA_ISSUE" and bar in MMA_NAME:
            ring_bar = "kv_full" if lockstep else bar
            s = full_stage.get((ring_bar, k), 0)
            slot = s if bar == "k_full" else depth + s
            mma_open.append(dict(t=t, bar=bar, k=k, slot=slot, tile=here))
            spans.append(Span(lane, "issue", t, t, stage=s, k=k, tile=here, cta=cta,
                              label=f"{WGMMA_ISSUED}: {MMA_NAME[bar]} block {k}"))
        elif name == "EV_MMA_DONE" and bar in MMA_NAME:
            # wgmma groups retire in order: the named group and those issued before it; a wait_group 0
            # (every wait but A5's Q K^T_{j+1}, a wait_group 1) retires the groups issued after it too
            named = next((i for i, g in enumerate(mma_open) if g["bar"] == bar and g["k"] == k), None)
            if named is None:
                continue
            upto = named + 1 if intra and bar == "k_full" else len(mma_open)
            for i, g in enumerate(mma_open[:upto]):
                label = _mma_label(g["bar"], g["k"], g["slot"], depth)
                if i != named:
                    label += f", retired with {MMA_NAME[bar]} block {k}'s wait"
                out["mma"].append(Span(lane, "mma", g["t"], t, stage=g["slot"], tile=g["tile"], k=g["k"], cta=cta,
                                       barrier="kv_full" if lockstep else g["bar"], label=label))
            del mma_open[:upto]
        elif name == "EV_SOFTMAX_BEGIN":
            soft_open[k] = t
        elif name == "EV_SOFTMAX_END" and k in soft_open:
            spans.append(Span(lane, "softmax", soft_open.pop(k), t, tile=here, k=k, cta=cta,
                              label=f"softmax block {k} (max, exp2, sum, P -> 16 bit)"))


def _loads(block: int, d: dict, step) -> list[Span]:
    """The loads in flight into the CTA: from the TMA issue until the first consumer saw the
    block land (its wait on the full barrier returned)."""
    lockstep, depth = not step.producer, step.depth
    tma = lane_name(block, "tma")
    out = []
    for (t, bar, stage, tile, k) in d["loads"]:
        landed = d["ready"].get((bar, tile, k))
        if landed is None or landed < t or bar not in RING:
            continue
        for ring in (("K", "V") if lockstep else (RING[bar],)):
            slot = stage if ring == "K" else depth + stage
            out.append(Span(tma, "load", t, landed, stage=slot, tile=tile, k=k, cta=block, barrier=bar,
                            label=f"TMA {ring} block {k} -> {ring} stage {stage} (landed by the first wait "
                                  "that saw it)"))
    return out


def _handoffs(block: int, d: dict) -> list[Handoff]:
    """Each completed wait is released by the latest earlier arrival on its barrier and stage
    from another lane (a full barrier's: the producer's TMA issue)."""
    out = []
    for (bar, stage, t_rel, lane) in d["waits"]:
        cands = [(ta, la) for (ta, la) in d["arrivals"].get((bar, stage), []) if ta <= t_rel and la != lane]
        if cands:
            ta, la = max(cands)
            out.append(Handoff(bar, stage, None, la, lane, ta, t_rel, cta=block))
    return out


def attention_timeline(records: list[dict], step, meta: dict | None = None, *, ctas: list[int] | None = None,
                       title: str = "", settle: bool = True) -> Timeline:
    """Decoded records (:func:`trace.decode`) of attention step ``step`` (an AttnStep, or a key
    with ``meta["D"]`` its head dim) -> Timeline (source "measured"). ``ctas``: the blocks to
    draw, numbered 0, 1, ... in that order as the simulator numbers the CTAs it puts on one SM
    (``meta["blocks_shown"]`` names them; default: every block, under its own number). Times are
    ns from the earliest recorded start. ``meta["cta_sm"]``: [cta, SM] pairs (the KPIs' unit).
    ``settle=False`` keeps the raw MMA spans (issue -> seen retired), for inspection."""
    step = step_of(step, (meta or {}).get("D"))
    keep = list(ctas) if ctas is not None else sorted({r["block"] for r in records})
    number = {b: (i if ctas is not None else b) for i, b in enumerate(keep)}
    recs = [r for r in records if r["block"] in number]
    m = {"family": "attention", "key": step.key, "D": step.head_dim,
         "style": "warp-specialized" if step.producer else "lockstep", "depth": step.depth,
         "tile": [step.bm, step.bn, step.head_dim], "num_consumers": step.consumers,
         "pingpong": step.key.startswith(("A4", "A5")), "spans_recorded": spans_recorded(step),
         "ctas_per_sm": len(keep) if ctas is not None else 1, "blocks_shown": keep if ctas is not None else None,
         "mma_spans": "in issue order on the SM's one tensor core, each capped at its duration at the peak rate "
                      "(busy = lower bound; attention_trace, trace._settle_mma_spans)"}
    m.update(meta or {})
    m["cta_sm"] = sorted({(number[r["block"]], r.get("smid", 0)) for r in recs})
    if not recs:
        return Timeline("measured", int(step.key[1]), title or f"attention {step.key} (measured)", meta=m)
    t_zero = min(r["t0"] for r in recs)
    by_block = defaultdict(list)
    for r in recs:
        by_block[r["block"]].append(r)
    spans: list[Span] = []
    handoffs: list[Handoff] = []
    lanes: list[str] = []
    raw_by_sm: dict[int, list[Span]] = defaultdict(list)
    caps: dict[str, float] = {}
    tile_ids: dict[int, list[int]] = {}
    nominal = 2.0 * attn_family.WG_ROWS * step.bn * step.head_dim / trace.DENSE_FLOP_PER_CLOCK_PER_SM
    for block in keep:
        if block not in by_block:
            continue
        cta = number[block]
        d = dict(lanes=[], spans=[], mma=[], waits=[], loads=[], ready={}, arrivals=defaultdict(list),
                 ns_per_clock={}, tile_ids=tile_ids)
        for r in sorted(by_block[block], key=lambda r: r["slot"]):
            _decode_slot(r, step, cta, r["t0"] - t_zero, d)
        load_spans = _loads(cta, d, step)
        lanes += d["lanes"] + ([lane_name(cta, "tma")] if d["loads"] else [])
        spans += d["spans"] + load_spans
        handoffs += _handoffs(cta, d)
        raw_by_sm[by_block[block][0].get("smid", 0)] += d["mma"]
        caps.update({ln: nominal * npc if npc else float("inf") for ln, npc in d["ns_per_clock"].items()})
    for raw in raw_by_sm.values():  # the CTAs of one SM share its tensor core
        spans += trace._settle_mma_spans(raw, caps) if settle else raw
    m["blocks"] = key_blocks(spans)
    m["tile_ids"] = {str(c): ids for c, ids in tile_ids.items()}
    m["tiles_per_cta"] = max((len(v) for v in tile_ids.values()), default=1)
    spans.sort(key=lambda s: (s.start, s.end, s.lane))
    return Timeline("measured", int(step.key[1]), title or f"attention {step.key} (measured)", lanes=lanes,
                    spans=spans, handoffs=sorted(handoffs, key=lambda h: (h.t_release, h.dst_lane)), meta=m)


# ---- KPIs -------------------------------------------------------------------------------------

def key_blocks(spans) -> int:
    """Key blocks per tile: the largest block a load, an MMA, a softmax or a full barrier's wait
    names, plus one (the turns' waits count turns, one more than blocks)."""
    return max((s.k for s in spans if s.k is not None and (s.kind in ("load", "mma", "softmax")
                                                             or (s.kind == "wait" and s.barrier in FULL))),
               default=-1) + 1


def measured_kpis(tl: Timeline, step=None, seq_len: int | None = None) -> dict:
    """The simulator's KPIs (:func:`timeline.kpis` and :func:`sim.attention.attention_kpis`) per SM
    of a measured timeline (the CTAs ``meta["cta_sm"]`` puts on one SM are one unit, as A2's two
    CTAs are in the model), then: the mean over SMs of each of KPI_KEYS, the median and the
    largest SM makespan, the whole run's makespan. Without MMA and softmax spans (head dim 256)
    the busy figures are None and ``spans_recorded`` says so."""
    from .sim.attention import attention_kpis
    step = step_of(step or tl.meta.get("key", "A4"), tl.meta.get("D"))
    p = params_for_attention(step.key[:2], step.head_dim, seq_len=seq_len, consumers=step.consumers, bn=step.bn)
    recorded = bool(tl.meta.get("spans_recorded", True)) and any(s.kind == "mma" for s in tl.spans)
    sm_of = {int(c): int(sm) for c, sm in tl.meta.get("cta_sm") or []}
    groups: dict[int, list[Span]] = defaultdict(list)
    for s in tl.spans:
        groups[sm_of.get(s.cta, -1 - s.cta)].append(s)
    per_sm = []
    for sm, sp in sorted(groups.items()):
        ctas = sorted({s.cta for s in sp})
        # every CTA of the SM in one unit of kpis(): c // (max + 1) == 0
        sub = Timeline("measured", tl.step, "", spans=sp, meta=dict(ctas_per_sm=ctas[-1] + 1, verdict="ok"))
        k = kpis(sub)
        blocks = key_blocks(sp)
        k.update(attention_kpis(sub, dataclasses.replace(p, blocks=max(1, blocks), ctas_per_sm=len(ctas))))
        row = dict(sm=sm, ctas=ctas, blocks=blocks, makespan_ns=k["makespan_ns"])
        row.update({key: k.get(key) for key in KPI_KEYS})
        if not recorded:
            row.update({key: None for key in KPI_KEYS if "busy" in key or key in ("fill_ns", "drain_ns")})
        per_sm.append(row)
    out: dict = {"spans_recorded": recorded, "sms": len(per_sm)}
    for key in KPI_KEYS:
        vals = [r[key] for r in per_sm if r[key] is not None]
        out[key] = statistics.fmean(vals) if vals else None
    mks = [r["makespan_ns"] for r in per_sm]
    out["makespan_ns"] = statistics.median(mks) if mks else 0.0
    out["makespan_ns_max"] = max(mks, default=0.0)
    out["grid_makespan_ns"] = (max(s.end for s in tl.spans) - min(s.start for s in tl.spans)) if tl.spans else 0.0
    if not recorded:
        out["note"] = ("no MMA or softmax spans were recorded (head dim 256 traces the rings only: the spans' "
                       "stores would spill), so there is no tensor-core or softmax busy figure")
    out["per_sm"] = per_sm
    return out


def block_cuda_clocks(records: list[dict], skip: int = 3) -> list[float]:
    """Per consumer and key block (the first and last ``skip`` of each record left out), the SM
    cycles the consumer spends on its CUDA cores between its MMAs: from the softmax's begin to
    the next block's first wait (A4, A5: the turn; A3: K), less the wait for P V after it (A3:
    from the V wait to P V's retirement; A5: wait_group 0 past the softmax's end). That is the
    softmax, the rescale of O, P to 16 bits and the loop's bookkeeping (the record's stores too)."""
    out: list[float] = []
    for r in records:
        if r["role"] != "consumer" or not r.get("ns_per_clock"):
            continue
        its: list[dict] = []
        for (t, kind, bid, _s, _p, _k, _tile) in r["events"]:
            name, bar = trace.EVENT_NAMES.get(kind), trace.BARRIERS.get(bid)
            if name == "EV_WAIT_BEGIN" and (bar == "turn" or (bar == "k_full" and not (its and "turn" in its[-1]))):
                its.append({})
            if not its:
                continue
            key = {"EV_WAIT_BEGIN": bar, "EV_SOFTMAX_BEGIN": "sm0", "EV_SOFTMAX_END": "sm1",
                   "EV_MMA_DONE": f"{bar}_done"}.get(name)
            if key:
                its[-1].setdefault(key, t)
        its = its[skip:len(its) - skip]
        for a, b in zip(its, its[1:]):
            if "sm0" not in a or "v_full_done" not in a:
                continue
            work = b.get("turn", b.get("k_full", a["sm0"])) - a["sm0"]
            if a.get("v_full", -1.0) > a["sm0"]:      # A3: V waited for and P V run after the softmax
                work -= a["v_full_done"] - a["v_full"]
            elif a["v_full_done"] > a["sm1"]:         # A5: P V still running when the softmax ended
                work -= a["v_full_done"] - a["sm1"]
            out.append(work / r["ns_per_clock"])
    return out


def shown_blocks(records: list[dict], ctas_per_sm: int) -> list[int]:
    """The blocks the page draws: block 0 and the blocks that ran beside it on its SM (A2 in
    the model: two CTAs per SM), earliest first, at most ``ctas_per_sm``."""
    if not records:
        return []
    first = min(records, key=lambda r: r["block"])
    sm = first.get("smid", 0)
    starts: dict[int, int] = {}
    for r in records:
        if r.get("smid", 0) == sm:
            starts[r["block"]] = min(starts.get(r["block"], r["t0"]), r["t0"])
    others = sorted((b for b in starts if b != first["block"]), key=lambda b: (starts[b], b))
    return [first["block"], *others][:max(1, ctas_per_sm)]


# ---- the GPU run ----------------------------------------------------------------------------

def measure_attention(step_key: str, D: int = 128, S: int = TRACE_SEQ_LEN, causal: bool = False, *,
                      events: int | None = None, reps: int = 10, heads: int | None = None) -> dict:
    """Run the GL_TRACE build of attention step ``step_key`` on fp16 (1, H, S, D) inputs, H heads
    filling about one wave (:func:`one_wave_heads`); check its output against an fp32 reference
    (every head, ~1024 query rows; tolerance: attention_ref.tolerance beside torch's SDPA), time
    it against the plain build (interleaved, L2 flushed) and decode the trace of one more call.
    Returns {records, correct, max_abs_err, tolerance, ms_plain, ms_traced, overhead, ...}."""
    import math

    import torch

    from ..cuda import device as cuda_device
    from ..cuda import driver
    from ..library import attention_runner
    from ..library.runner import check_device
    from ..measure import attention_ref as ref_mod
    from ..measure.bench import Bench
    check_device(torch.device("cuda"))
    dev = torch.cuda.current_device()
    st = attn_family.get(step_key, D)
    if problems := st.shape_problems(S, S, D):
        raise ValueError(f"{st.key} cannot take S={S}, D={D}: " + "; ".join(problems))
    sms = cuda_device.num_sms(dev)
    B, H = 1, heads or one_wave_heads(st, S, sms)
    tiles, grid = st.tiles(S, H, B), st.grid(S, H, B, sms)
    per_cta = -(-tiles // grid[0])
    cap = events or events_needed(st, S, per_cta)
    bench = Bench(dev)
    q, k, v = (torch.randn((B, H, S, D), device=f"cuda:{dev}", generator=bench.gen).to(torch.float16)
               for _ in range(3))
    buf = torch.zeros(grid[0] * trace.SLOTS_PER_CTA * (trace.HEADER_WORDS + 2 * cap), dtype=torch.int64,
                      device=f"cuda:{dev}")
    driver.ensure_context(dev)
    plain_kernel = attention_runner.load(st, causal, False, dev)
    traced_kernel = driver.load(st.compile(causal=causal, extra_defines={"GL_TRACE": 1}), dev, st.dynamic_smem)
    torch.cuda.synchronize(dev)  # (runner.attach_trace's order: earlier work may still trace)
    traced_kernel.set_global_u64("gl_trace_buf", buf.data_ptr())
    traced_kernel.set_global_u32("gl_trace_events", cap)
    specs = st.map_specs(q.shape, q.stride(), k.shape, k.stride(), v.stride())
    maps = attn_family.make_maps(specs, (q.data_ptr(), k.data_ptr(), v.data_ptr()), "f16")
    stream = torch.cuda.current_stream().cuda_stream

    def launch(kernel, out):
        args = st.kernel_args(maps, out.data_ptr(), 0, S, S, H, 1, tiles, 1 / math.sqrt(D))
        return driver.PreparedLaunch(kernel, grid, (st.threads, 1, 1), args, stream=stream,
                                     dynamic_smem=st.dynamic_smem)
    out = torch.full((B, H, S, D), float("nan"), dtype=torch.float16, device=q.device)
    traced, plain = launch(traced_kernel, out), launch(plain_kernel, torch.empty_like(out))
    traced()
    torch.cuda.synchronize(dev)
    rows = ref_mod.sample_rows(S)
    ref, _, _ = ref_mod.reference(q, k, v, causal=causal, rows=rows, acc=torch.float32)
    try:
        sdpa_err = ref_mod.max_abs_err(ref_mod.sdpa(q, k, v, causal=causal)[:, :, rows], ref)
    except Exception:  # a backend that does not take the case: the bound without it
        sdpa_err = None
    err = ref_mod.max_abs_err(out[:, :, rows], ref)
    tol = ref_mod.tolerance(torch.float16, float(ref.abs().max()), sdpa_err, v_max=float(v.abs().max()))
    correct = bool(torch.isfinite(out).all()) and err <= tol
    t_plain, t_traced = bench.time_interleaved([plain, traced], reps)
    buf.zero_()
    bench.flush_l2()
    traced()
    torch.cuda.synchronize(dev)
    records = trace.decode(buf.cpu().tolist(), grid[0], cap)
    ms_plain, ms_traced = statistics.median(t_plain), statistics.median(t_traced)
    return {"records": records, "correct": correct, "max_abs_err": err if math.isfinite(err) else None,
            "tolerance": tol, "sdpa_max_abs_err": sdpa_err, "ms_plain": ms_plain, "ms_traced": ms_traced,
            "overhead": ms_traced / ms_plain - 1.0, "B": B, "H": H, "S": S, "D": D, "causal": causal,
            "tiles": tiles, "blocks": grid[0], "tiles_per_cta": per_cta, "events_per_slot": cap, "num_sms": sms,
            "overflow": [(r["block"], r["slot"]) for r in records if r["slots_used"] > cap - 4]}
