"""Measured in-kernel traces: run a GL_TRACE build of a step, decode its event buffer into
the same Timeline model the simulator produces, and compute the same KPIs.

Clock handling: each recording thread stamps clock64 (its SM's cycle counter) on every
event, and %globaltimer + clock64 at its start and end. Per slot, the two anchors give a
linear map clock64 -> ns, which puts all SMs on one axis (globaltimer is global but coarse;
clock64 is fine but per-SM).
"""
from __future__ import annotations

from collections import defaultdict

from ..cuda.kernel_enums import barrier_names, block_flags, event_ids, role_names
from ..families.common import EPI_CHUNK_COLS
from .timeline import WGMMA_ISSUED, Handoff, Span, Timeline, lane_name

HEADER_WORDS = 8
SLOTS_PER_CTA = 4
SLOT_LANE = {0: None, 1: "consumer0", 2: "consumer1", 3: "writeback"}  # slot 0: team or producer

EVENTS = event_ids()  # name -> id
EVENT_NAMES = {v: k for k, v in EVENTS.items()}
ROLES = role_names()
BARRIERS = barrier_names()


def events_needed(step, M: int, N: int, K: int, num_sms: int, ctas: int | None = None) -> int:
    """Capacity per slot that holds every event of the busiest role of the busiest CTA.
    Per k-tile: the producer records a wait (2) and a load issue, a consumer a wait (2), the
    wgmma issue and retirement and a release (5). Per epilogue chunk: a consumer's acquire
    wait (2), staging begin/end (2) and commit (1); the writeback's wait (2), store issue/done
    (2) and release (1). Ping-pong adds a turn wait (2) and arrive (1) per tile. The k-loops
    write those as records of two slots (EV_STAGE_LOAD, EV_KTILE), so this is a bound. ``ctas``:
    the launched grid (a cluster launch may hold fewer CTAs than SMs)."""
    from .sim.params import busiest_cta_tiles
    k_tiles = -(-K // step.bk)
    chunks = max(1, -(-step.bn // EPI_CHUNK_COLS)) if step.epi_stages else 1  # a narrow last chunk counts
    per_tile = 5 * k_tiles + 5 * chunks + (3 if step.pingpong else 0)
    return busiest_cta_tiles(step, M, N, num_sms, ctas) * per_tile + 16


def decode(words, num_blocks: int, events: int) -> list[dict]:
    """Raw int64 words -> one record per recording slot: {block, slot, role, smid, t0, t1,
    events: [(t_ns, kind, barrier, stage, phase, k, tile)], slots_used}; t0/t1 are the slot's
    globaltimer anchors (int ns) and event times are ns after t0. A consumer's k-tile record
    (EV_KTILE, two slots) comes out as the five events it stands for (:func:`expand_ktile`), a
    producer's stage record (EV_STAGE_LOAD) as its three (:func:`expand_stage_load`), an
    attention consumer's key block (EV_ATTN_BLOCK, four slots) as up to fifteen
    (:func:`expand_attn_block`); ``slots_used`` counts the slots written (the capacity check)."""
    stride = HEADER_WORDS + 2 * events
    out = []
    for block in range(num_blocks):
        for slot in range(SLOTS_PER_CTA):
            base = (block * SLOTS_PER_CTA + slot) * stride
            gt0, clk0, gt1, clk1, sm_count = (int(words[base + i]) & 0xFFFFFFFFFFFFFFFF for i in range(5))
            if gt0 == 0 or gt1 == 0:
                continue
            count = min(sm_count >> 32, events)
            role = ROLES.get(int(words[base + 6]), "?")
            scale = (gt1 - gt0) / (clk1 - clk0) if clk1 > clk0 else 0.0
            word = lambda i: int(words[base + HEADER_WORDS + i]) & 0xFFFFFFFFFFFFFFFF  # noqa: E731
            evs = []
            last = clk0  # the latest clock seen: records carry 32-bit stamps, unwrapped against it
            i = 0
            while i < count:
                clk, d = word(2 * i), word(2 * i + 1)
                slots, expand = RECORDS.get(d & 0xFF, (0, None))
                if expand is not None and i + slots <= count:
                    got, last = expand(last, clk0, scale, tuple(word(2 * i + w) for w in range(2 * slots)))
                    evs += got
                    i += slots
                    continue
                # ns after this slot's own start: small, so float keeps sub-ns precision
                # (globaltimer itself is ~1.8e18 ns, where a float64 only resolves 256 ns)
                evs.append(((clk - clk0) * scale, *_fields(d)))
                last = clk
                i += 1
            out.append({"block": block, "slot": slot, "role": role, "smid": sm_count & 0xFFFFFFFF,
                        "events": evs, "ns_per_clock": scale, "t0": gt0, "t1": gt1, "slots_used": count})
    return out


EV_KTILE, EV_STAGE_LOAD, EV_ATTN_BLOCK = EVENTS["EV_KTILE"], EVENTS["EV_STAGE_LOAD"], EVENTS["EV_ATTN_BLOCK"]
BAR_IDS = {v: k for k, v in BARRIERS.items()}
BLOCK = block_flags()


def _fields(d: int) -> tuple[int, int, int, int, int, int]:
    """An event's info word -> (kind, barrier, stage, phase, k, tile)."""
    return d & 0xFF, (d >> 8) & 0xFF, (d >> 16) & 0xFF, (d >> 24) & 1, (d >> 32) & 0xFFFF, (d >> 48) & 0xFFFF


def _unwrap(last: int, lo: int) -> int:
    """A 32-bit clock stamp -> the clock64 it was, the first such after ``last``."""
    return last + ((lo - last) & 0xFFFFFFFF)


def expand_ktile(last: int, clk0: int, scale: float, words: tuple[int, ...]) -> tuple[list[tuple], int]:
    """A consumer's k-tile record (gl_trace.cuh: Tracer::ktile_head, ktile_tail) -> the events
    its loop used to write one by one: the wait on the full barrier (begin, end), the wgmma
    issue, and, once `lag` groups are in flight, the retirement of k-tile k - lag and the
    release of its stage; and the record's start (the wait's, clock64) to unwrap the next
    against. ``last``: the latest clock before it; ``clk0``: the slot's first clock; times come
    out in ns after it."""
    waited, info, stamps, done = words
    start = _unwrap(last, waited & 0xFFFFFFFF)
    _, full, stage, phase, k, tile = _fields(info)
    old_stage, old_phase = (info >> 25) & 0x3F, (info >> 31) & 1
    at = lambda c: (start + c - clk0) * scale  # noqa: E731  (c: cycles after the start)
    after = lambda lo: (lo - start) & 0xFFFFFFFF  # noqa: E731  (a 32-bit stamp, unwrapped)
    evs = [(at(0), EVENTS["EV_WAIT_BEGIN"], full, stage, phase, k, 0),
           (at(waited >> 32), EVENTS["EV_WAIT_END"], full, stage, phase, k, 0),
           (at(after(stamps & 0xFFFFFFFF)), EVENTS["EV_MMA_ISSUE"], 0, stage, phase, k, tile)]
    if (done >> 32) & 1:  # a group retired (k >= lag): the one lag k-tiles older
        retired, empty, k_old = after(stamps >> 32), (done >> 24) & 0xFF, (k - ((done >> 16) & 0xFF)) & 0xFFFF
        evs += [(at(retired), EVENTS["EV_MMA_DONE"], 0, old_stage, old_phase, k_old, tile),
                (at(retired + (done & 0xFFFF)), EVENTS["EV_ARRIVE"], empty, old_stage, old_phase, k_old, 0)]
    return evs, start


def expand_stage_load(last: int, clk0: int, scale: float, words: tuple[int, ...]) -> tuple[list[tuple], int]:
    """A producer's stage record (Tracer::stage_load) -> its wait on the empty barrier (begin,
    end) and the issue of the stage's loads; and the record's start."""
    waited, info, issued, _ = words
    start = _unwrap(last, waited & 0xFFFFFFFF)
    _, full, stage, phase, k, tile = _fields(info)
    empty = (issued >> 32) & 0xFF
    at = lambda c: (start + c - clk0) * scale  # noqa: E731
    return [(at(0), EVENTS["EV_WAIT_BEGIN"], empty, stage, phase, k, 0),
            (at(waited >> 32), EVENTS["EV_WAIT_END"], empty, stage, phase, k, 0),
            (at(issued & 0xFFFFFFFF), EVENTS["EV_LOAD_ISSUE"], full, stage, phase, k, tile)], start


def expand_attn_block(last: int, clk0: int, scale: float, words: tuple[int, ...]) -> tuple[list[tuple], int]:
    """An attention consumer's key block (kernels/attention/attn_warpspec.cuh: BlockRecord, whose
    comment lays out its sixteen 32-bit words) -> the events its loop used to write one by one,
    those its flags name, in time order (two stamps of one clock in A5's order): the turn's
    wait and pass, K's wait and release, Q K^T's issue and retirement, the softmax, V's wait and
    release, P V's issue and retirement; and the latest of its clocks. K, Q K^T, the softmax
    and the turn are block k; V and P V block k - 1 with BLOCK_V_LAG."""
    u = [(w >> shift) & 0xFFFFFFFF for w in words for shift in (0, 32)]
    info, where = u[2], u[3]
    k, flags = (info >> 8) & 0xFFFF, info >> 24
    kv = (k - (1 if flags & BLOCK["V_LAG"] else 0)) & 0xFFFF
    k_stage, k_phase, v_stage, v_phase = where & 0xF, (where >> 4) & 1, (where >> 5) & 0xF, (where >> 9) & 1
    group, wait_phase, to, pass_phase = (where >> 10) & 3, (where >> 12) & 1, (where >> 13) & 3, (where >> 15) & 1
    clock = lambda i: _unwrap(last, u[i])  # noqa: E731
    E, B = EVENTS, BAR_IDS
    has = {name: bool(flags & bit) for name, bit in BLOCK.items()}
    evs = []  # (clock, kind, barrier, stage, phase, k), in the order A5 meets them
    if has["TURN"]:
        evs += [(clock(12), E["EV_WAIT_BEGIN"], B["turn"], group, wait_phase, k),
                (clock(13), E["EV_WAIT_END"], B["turn"], group, wait_phase, k)]
    if has["K"]:
        evs += [(clock(0), E["EV_WAIT_BEGIN"], B["k_full"], k_stage, k_phase, k),
                (clock(1), E["EV_WAIT_END"], B["k_full"], k_stage, k_phase, k)]
    if has["QK_ISSUE"]:
        evs.append((clock(1) + (u[3] >> 16), E["EV_MMA_ISSUE"], B["k_full"], 0, 0, k))
    if has["V"]:
        evs += [(clock(8), E["EV_WAIT_BEGIN"], B["v_full"], v_stage, v_phase, kv),
                (clock(9), E["EV_WAIT_END"], B["v_full"], v_stage, v_phase, kv)]
    if has["PV"]:
        evs.append((clock(9) + (u[15] & 0xFFFF), E["EV_MMA_ISSUE"], B["v_full"], 0, 0, kv))
    if has["TURN"]:
        evs.append((clock(14), E["EV_ARRIVE"], B["turn"], to, pass_phase, k))
    if has["QK_DONE"]:
        evs.append((clock(4), E["EV_MMA_DONE"], B["k_full"], 0, 0, k))
    if has["K"]:
        evs.append((clock(5), E["EV_ARRIVE"], B["k_empty"], k_stage, k_phase, k))
    if has["SOFTMAX"]:
        evs += [(clock(6), E["EV_SOFTMAX_BEGIN"], 0, 0, 0, k), (clock(7), E["EV_SOFTMAX_END"], 0, 0, 0, k)]
    if has["PV"]:
        evs.append((clock(10), E["EV_MMA_DONE"], B["v_full"], 0, 0, kv))
    if has["V"]:
        evs.append((clock(11), E["EV_ARRIVE"], B["v_empty"], v_stage, v_phase, kv))
    evs.sort(key=lambda e: e[0])  # stable: a tie keeps the order above
    return [((c - clk0) * scale, *rest, 0) for c, *rest in evs], max((e[0] for e in evs), default=last)


RECORDS = {EV_KTILE: (2, expand_ktile), EV_STAGE_LOAD: (2, expand_stage_load), EV_ATTN_BLOCK: (4, expand_attn_block)}


def _signed16(k: int) -> int:
    return k - 0x10000 if k >= 0x8000 else k


def _decode_block(block: int, recs: list[dict], step, t_zero: int, rank) -> dict:
    """One CTA's records -> its lanes, spans (raw wgmma spans still unsettled) and what the
    hand-offs and load spans need: arrivals, completed waits, load issues."""
    out = dict(lanes=[], spans=[], arrivals=defaultdict(list), waits=[], loads=defaultdict(list),
               ready=defaultdict(list), mma=[], cap={})
    for r in sorted(recs, key=lambda r: r["slot"]):
        lane = lane_name(block, SLOT_LANE[r["slot"]] or r["role"], rank)
        out["lanes"].append(lane)
        if r.get("ns_per_clock"):
            out["cap"][lane] = nominal_mma_ns(step, r["ns_per_clock"])
        spans = out["spans"]
        open_wait = None
        mma_open: dict[int, float] = {}
        epi_open, store_open = None, {}
        offset = r["t0"] - t_zero  # exact integer arithmetic on the big timer values
        for (t, kind, bar, stage, phase, k, tile) in r["events"]:
            t += offset
            name = EVENT_NAMES.get(kind, "?")
            bname = BARRIERS.get(bar)
            k = _signed16(k)
            if name == "EV_WAIT_BEGIN":
                open_wait = (t, bname, stage, phase, k)
            elif name == "EV_WAIT_END" and open_wait is not None:
                t0, b0, s0, p0, k0 = open_wait
                spans.append(Span(lane, "wait", t0, t, stage=s0, phase=p0, barrier=b0, k=k0, tile=tile,
                                  cta=block, label=f"wait {b0}[{s0}] parity {p0}"))
                out["waits"].append((b0, s0, p0, t, lane))
                if b0 in ("tma2mma", "full"):
                    out["ready"][s0].append(t)
                open_wait = None
            elif name == "EV_LOAD_ISSUE":
                spans.append(Span(lane, "issue", t, t, stage=stage, phase=phase, barrier=bname, k=k, tile=tile,
                                  cta=block, label=f"TMA load k={k} -> stage {stage}"))
                out["loads"][stage].append((t, tile, k))
                out["arrivals"][(bname, stage)].append((t, lane))
            elif name == "EV_MMA_ISSUE":
                mma_open[k] = t
                spans.append(Span(lane, "issue", t, t, stage=stage, phase=phase, k=k, tile=tile, cta=block,
                                  label=f"{WGMMA_ISSUED} k={k} (stage {stage})"))
            elif name == "EV_MMA_DONE" and k in mma_open:
                out["mma"].append(Span(lane, "mma", mma_open.pop(k), t, stage=stage, k=k, tile=tile,
                                       cta=block, label=f"wgmma k={k}"))
            elif name == "EV_EPI_BEGIN":
                epi_open = (t, stage, k)
            elif name == "EV_EPI_END" and epi_open is not None:
                lent = bname == "lent_full"  # a chunk staged in the borrowed operand stage (step 9)
                where = "the borrowed stage" if lent else f"SMEM staging[{epi_open[1]}]"
                spans.append(Span(lane, "epilogue", epi_open[0], t, stage=epi_open[1], k=epi_open[2], tile=tile,
                                  cta=block, barrier="lent_full" if lent else None,
                                  label=f"acc -> {where} (chunk {epi_open[2]})"))
                epi_open = None
            elif name == "EV_STORE_ISSUE":
                store_open[k] = (t, stage)  # by chunk: a borrowed stage's chunks are read back together
            elif name == "EV_STORE_DONE" and k in store_open:
                t0, s0 = store_open.pop(k)
                lent = bname == "lent_full"
                spans.append(Span(lane, "store", t0, t, stage=s0, k=k, tile=tile, cta=block,
                                  barrier="lent_full" if lent else None,
                                  label=f"TMA store from {'the borrowed stage' if lent else f'staging[{s0}]'} "
                                        f"(chunk {k})"))
            elif name == "EV_ARRIVE":
                out["arrivals"][(bname, stage)].append((t, lane))
                spans.append(Span(lane, "issue", t, t, stage=stage, phase=phase, barrier=bname, k=k, tile=tile,
                                  cta=block, label=f"arrive {bname}[{stage}]"))
    return out


def to_timeline(records: list[dict], step, *, title: str = "", ctas: list[int] | None = None,
                meta: dict | None = None) -> Timeline:
    """Decoded records -> Timeline (source="measured"). ctas: which blocks to include
    (default all). Span times are ns from the earliest recorded start.

    In a cluster, each CTA's lanes carry its rank (``cta3.rank1/producer``); the empty
    barrier of a stage hears the consumers of every CTA of the cluster and its full barrier
    the loads of every producer (multicast), so hand-offs and load spans cross CTAs. The
    wgmma groups of a CTA's consumers share one tensor core (see _settle_mma_spans)."""
    if not records:
        return Timeline("measured", step.number, title or f"step {step.key} (measured)", meta=dict(meta or {}))
    cm = step.cluster_m
    t_zero = min(r["t0"] for r in records)
    keep = set(ctas) if ctas is not None else None
    by_block = defaultdict(list)
    for r in records:
        if keep is None or r["block"] in keep:
            by_block[r["block"]].append(r)
    blocks = {b: _decode_block(b, recs, step, t_zero, b % cm if cm > 1 else None)
              for b, recs in sorted(by_block.items())}
    spans: list[Span] = []
    handoffs: list[Handoff] = []
    lanes: list[str] = []
    for block, d in blocks.items():
        peers = [p for p in range(block - block % cm, block - block % cm + cm) if p in blocks]
        lanes += d["lanes"]
        spans += d["spans"]
        spans += _settle_mma_spans(d["mma"], d["cap"])
        # Loads in flight into this CTA (its own, and in a cluster its peers' multicast halves):
        # from issue until this CTA's consumer saw the stage complete (an upper bound on the
        # landing time; exact when the consumer was already waiting).
        tma_lane = lane_name(block, "tma", block % cm if cm > 1 else None)
        for src in peers:
            for stage, issued in blocks[src]["loads"].items():
                releases = sorted(d["ready"].get(stage, []))
                j = 0
                for (t_issue, tile, k) in issued:
                    while j < len(releases) and releases[j] < t_issue:
                        j += 1
                    if j < len(releases):
                        what = "" if src == block else f" (multicast from cta{src})"
                        spans.append(Span(tma_lane, "load", t_issue, releases[j], stage=stage, k=k, tile=tile,
                                          cta=block, label=f"load k={k} stage {stage}{what}"))
                        j += 1
        if any(blocks[src]["loads"] for src in peers):
            lanes.append(tma_lane)
        # Hand-offs: each completed wait is released by the latest earlier arrival on that
        # barrier/stage from another lane (of the cluster, for the barriers its peers arrive on).
        for (b, s, p, t_rel, lane) in d["waits"]:
            srcs = peers if (cm > 1 and b in CLUSTER_BARRIERS) else [block]
            cands = [(ta, la) for src in srcs for (ta, la) in blocks[src]["arrivals"].get((b, s), [])
                     if ta <= t_rel and la != lane]
            if cands:
                ta, la = max(cands)
                handoffs.append(Handoff(b, s, p, la, lane, ta, t_rel, cta=block))
    m = {"key": step.key, "style": step.style, "depth": step.depth,
         "tile": [step.bm, step.bn, step.bk], "cluster": cm, "num_consumers": step.consumers,
         "pingpong": step.pingpong,
         "mma_spans": "in order from issue on the CTA's one tensor core, capped at the k-tile's duration "
                      "at peak tensor-core rate (busy = lower bound; see trace._settle_mma_spans)"}
    m.update(meta or {})
    return Timeline("measured", step.number, title or f"step {step.key} {step.name} (measured)",
                    lanes=lanes, spans=spans, handoffs=handoffs, meta=m)


EPILOGUE_BARRIERS = ("mma2ld", "ld2mma")
EPILOGUE_EVENTS = ("EV_EPI_BEGIN", "EV_EPI_END", "EV_STORE_ISSUE", "EV_STORE_DONE")
# Barriers every CTA of a cluster arrives on in each CTA: the empty barrier (remote arrive)
# and the full barrier (multicast bytes).
CLUSTER_BARRIERS = ("mma2tma", "tma2mma")


DENSE_FLOP_PER_CLOCK_PER_SM = 4096  # Hopper fp16/bf16 wgmma, dense (989 TFLOP/s at 1.83 GHz, 132 SMs)


def nominal_mma_ns(step, ns_per_clock: float) -> float:
    """Time one consumer's k-tile wgmma group takes at the tensor core's peak rate (its rows
    of the tile: all of them in ping-pong, bm / consumers when the consumers split a tile)."""
    rows = step.bm if step.pingpong else step.bm // step.consumers
    return 2.0 * rows * step.bn * step.bk / DENSE_FLOP_PER_CLOCK_PER_SM * ns_per_clock


def _settle_mma_spans(raw: list[Span], cap_ns: dict[str, float]) -> list[Span]:
    """Turn a CTA's raw wgmma spans (issue -> retirement seen by wgmma.wait_group) into an
    estimate of when its tensor core worked on them. The SM has one tensor core: the groups
    of all its consumers run one after the other, in issue order, so a group starts at
    max(issue, end of the previous group). Its retirement is only observed when the consumer
    gets round to wgmma.wait_group (after issuing the next group), which may be long after
    the tensor core finished. So each group is counted for at most its duration at the
    tensor core's peak rate (cap_ns[lane], from the recorder's own clock): the busy fraction
    is then the share of time the tensor core would need at peak for the work it was given -
    a lower bound, where the uncapped spans give an upper bound - and two consumers' groups
    are never counted twice."""
    tc_free = float("-inf")
    out = []
    for s in sorted(raw, key=lambda s: (s.start, s.lane)):
        issue = s.start
        s.start = max(issue, tc_free)
        s.end = s.start + max(0.0, min(s.end - issue, cap_ns.get(s.lane, float("inf"))))
        tc_free = s.end
        out.append(s)
    return out


def measure(step, M: int, N: int, K: int, *, events: int | None = None, reps: int = 20,
            extra_defines: dict | None = None, decode_ctas: int | None = None) -> dict:
    """Run `step` with tracing on the GPU. Returns {records, overhead, timeline kwargs}.
    The traced and the untraced build are timed in turns (``reps`` calls each, L2 flushed
    before each, medians), so the tracer's cost is known for this step and size.
    extra_defines: ablation switches of both builds, traced and plain (experiments);
    decode_ctas: decode the first N CTAs only (every CTA records; large sizes decode slowly)."""
    import statistics

    import torch
    from ..cuda import device as cuda_device
    from ..library import runner
    from ..measure.accuracy import check_product
    from ..measure.bench import Bench
    runner.check_device(torch.device("cuda"))
    dev = torch.cuda.current_device()
    sms = cuda_device.num_sms(dev)
    blocks = launched_ctas(step, M, N, sms, dev)
    cap = events or events_needed(step, M, N, K, sms, blocks)
    words = blocks * SLOTS_PER_CTA * (HEADER_WORDS + 2 * cap)
    bench = Bench(torch.cuda.current_device())
    a, b = bench.inputs(M, N, K, torch.float16)
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    buf = torch.zeros(words, dtype=torch.int64, device="cuda")
    traced = runner.plan(step, a, b, out, trace_buffer=buf, trace_events=cap, extra_defines=extra_defines)
    traced()
    traced.synchronize()
    ok, _, rel, msg = check_product(out, a, b)
    plain = runner.plan(step, a, b, torch.empty_like(out), extra_defines=extra_defines)
    plain()  # loaded and run once before the timing, as the traced build was
    t_plain, t_traced = bench.time_interleaved([plain, traced], reps)
    buf.zero_()
    bench.flush_l2()
    traced()
    traced.synchronize()
    n = blocks if decode_ctas is None else min(blocks, decode_ctas)
    records = decode(buf[: n * SLOTS_PER_CTA * (HEADER_WORDS + 2 * cap)].cpu().tolist(), n, cap)
    return {"records": records, "correct": ok, "rel_err": rel, "check": msg,
            "ms_plain": statistics.median(t_plain), "ms_traced": statistics.median(t_traced),
            "overhead": statistics.median(t_traced) / statistics.median(t_plain) - 1.0, "reps": reps,
            "blocks": blocks, "decoded_ctas": n, "events_per_slot": cap, "num_sms": sms,
            "overflow": [(r["block"], r["slot"]) for r in records if r["slots_used"] >= cap - 1]}


def launched_ctas(step, M: int, N: int, num_sms: int, dev: int) -> int:
    """CTAs the traced launch will have: as runner.plan builds its grid, with the number of
    clusters that fit at once for a cluster launch (asked of the traced build itself)."""
    from ..cuda import driver
    from ..library import runner
    max_clusters = None
    if step.cluster != (1, 1, 1):
        kernel = runner.prepare(step, dev, bf16=False, extra_defines={"GL_TRACE": 1}).kernel
        max_clusters = driver.max_active_clusters(kernel, (step.threads, 1, 1), step.dynamic_smem, step.cluster)
    gx, gy, gz = step.grid(M, N, num_sms, max_clusters)
    return gx * gy * gz
