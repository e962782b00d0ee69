"""Measured in-kernel traces: run a GL_TRACE build of a step, decode its event buffer into
the same Timeline model the simulator produces, and compute the same KPIs.

Clock handling: each recording thread stamps clock64 (its SM's cycle counter) on every
event, and %globaltimer + clock64 at its start and end. Per slot, the two anchors give a
linear map clock64 -> ns, which puts all SMs on one axis (globaltimer is global but coarse;
clock64 is fine but per-SM).
"""
from __future__ import annotations

from collections import defaultdict

from ..runtime.kernel_enums import barrier_names, event_ids, role_names
from .timeline import Handoff, Span, Timeline

HEADER_WORDS = 8
SLOTS_PER_CTA = 4
SLOT_LANE = {0: None, 1: "consumer0", 2: "consumer1", 3: "writeback"}  # slot 0: team or producer

EVENTS = event_ids()  # name -> id
EVENT_NAMES = {v: k for k, v in EVENTS.items()}
ROLES = role_names()
BARRIERS = barrier_names()


def events_needed(step, M: int, N: int, K: int, num_sms: int) -> int:
    """Capacity per slot that holds every event of the busiest role."""
    k_tiles = -(-K // step.bk)
    return step.tiles_per_cta(M, N, num_sms) * (k_tiles * 6 + 16) + 16


def decode(words, num_blocks: int, events: int) -> list[dict]:
    """Raw int64 words -> one record per recording slot: {block, slot, role, smid, t0, t1,
    events: [(t_ns, kind, barrier, stage, phase, k, tile)]}; t0/t1 are the slot's
    globaltimer anchors (int ns) and event times are ns after t0."""
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
            evs = []
            for i in range(count):
                clk = int(words[base + HEADER_WORDS + 2 * i]) & 0xFFFFFFFFFFFFFFFF
                d = int(words[base + HEADER_WORDS + 2 * i + 1]) & 0xFFFFFFFFFFFFFFFF
                # ns after this slot's own start: small, so float keeps sub-ns precision
                # (globaltimer itself is ~1.8e18 ns, where a float64 only resolves 256 ns)
                t = (clk - clk0) * scale
                evs.append((t, d & 0xFF, (d >> 8) & 0xFF, (d >> 16) & 0xFF, (d >> 24) & 1,
                            (d >> 32) & 0xFFFF, (d >> 48) & 0xFFFF))
            out.append({"block": block, "slot": slot, "role": role, "smid": sm_count & 0xFFFFFFFF,
                        "events": evs, "ns_per_clock": scale, "t0": gt0, "t1": gt1})
    return out


def _signed16(k: int) -> int:
    return k - 0x10000 if k >= 0x8000 else k


def to_timeline(records: list[dict], step, *, title: str = "", ctas: list[int] | None = None,
                meta: dict | None = None) -> Timeline:
    """Decoded records -> Timeline (source="measured"). ctas: which blocks to include
    (default all). Span times are ns from the earliest recorded start."""
    if not records:
        return Timeline("measured", step.number, title or f"step {step.key} (measured)", meta=dict(meta or {}))
    t_zero = min(r["t0"] for r in records)
    spans: list[Span] = []
    handoffs: list[Handoff] = []
    lanes: list[str] = []
    keep = set(ctas) if ctas is not None else None
    by_block = defaultdict(list)
    for r in records:
        if keep is None or r["block"] in keep:
            by_block[r["block"]].append(r)
    for block in sorted(by_block):
        arrivals = defaultdict(list)  # (barrier, stage) -> [(t, lane)]
        waits = []  # (barrier, stage, phase, t_release, lane)
        loads = defaultdict(list)  # stage -> [t_issue, tile, k]
        ready_waits = defaultdict(list)  # stage -> [t_release] on the "data landed" barrier
        cap_ns: dict[str, float] = {}
        for r in sorted(by_block[block], key=lambda r: r["slot"]):
            role = SLOT_LANE[r["slot"]] or r["role"]
            lane = f"cta{block}/{role}"
            lanes.append(lane)
            if r.get("ns_per_clock"):
                cap_ns[lane] = nominal_mma_ns(step, r["ns_per_clock"])
            open_wait = None
            mma_open: dict[int, float] = {}
            epi_open = store_open = None
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
                    waits.append((b0, s0, p0, t, lane))
                    if b0 in ("tma2mma", "full"):
                        ready_waits[s0].append(t)
                    open_wait = None
                elif name == "EV_LOAD_ISSUE":
                    spans.append(Span(lane, "issue", t, t, stage=stage, phase=phase, barrier=bname, k=k, tile=tile,
                                      cta=block, label=f"TMA load k={k} -> stage {stage}"))
                    loads[stage].append((t, tile, k))
                    arrivals[(bname, stage)].append((t, lane))
                elif name == "EV_MMA_ISSUE":
                    mma_open[k] = t
                elif name == "EV_MMA_DONE" and k in mma_open:
                    spans.append(Span(lane, "mma", mma_open.pop(k), t, stage=stage, k=k, tile=tile, cta=block,
                                      label=f"wgmma k={k}"))
                elif name == "EV_EPI_BEGIN":
                    epi_open = t
                elif name == "EV_EPI_END" and epi_open is not None:
                    spans.append(Span(lane, "epilogue", epi_open, t, tile=tile, cta=block, label="acc -> SMEM staging"))
                    epi_open = None
                elif name == "EV_STORE_ISSUE":
                    store_open = t
                elif name == "EV_STORE_DONE" and store_open is not None:
                    spans.append(Span(lane, "store", store_open, t, tile=tile, cta=block, label="TMA store (SMEM read)"))
                    store_open = None
                elif name == "EV_ARRIVE":
                    arrivals[(bname, stage)].append((t, lane))
                    spans.append(Span(lane, "issue", t, t, stage=stage, phase=phase, barrier=bname, k=k, tile=tile,
                                      cta=block, label=f"arrive {bname}[{stage}]"))
        _settle_mma_spans(spans, block, cap_ns)
        # Loads in flight: from issue until the waiter saw the stage complete (an upper bound
        # on the landing time; exact when the consumer was already waiting).
        tma_lane = f"cta{block}/tma"
        for stage, issued in loads.items():
            releases = sorted(ready_waits.get(stage, []))
            j = 0
            for (t_issue, tile, k) in issued:
                while j < len(releases) and releases[j] < t_issue:
                    j += 1
                if j < len(releases):
                    spans.append(Span(tma_lane, "load", t_issue, releases[j], stage=stage, k=k, tile=tile, cta=block,
                                      label=f"load k={k} stage {stage}"))
                    j += 1
        if loads:
            lanes.append(tma_lane)
        # Hand-offs: each completed wait is released by the latest earlier arrival on that
        # barrier/stage from another lane.
        for (b, s, p, t_rel, lane) in waits:
            cands = [(ta, la) for (ta, la) in arrivals.get((b, s), []) if ta <= t_rel and la != lane]
            if cands:
                ta, la = max(cands)
                handoffs.append(Handoff(b, s, p, la, lane, ta, t_rel, cta=block))
    m = {"key": step.key, "style": step.style, "depth": step.depth,
         "tile": [step.bm, step.bn, step.bk],
         "mma_spans": "in order from issue, capped at the k-tile's duration at peak tensor-core rate "
                      "(busy = lower bound; see trace._settle_mma_spans)"}
    m.update(meta or {})
    return Timeline("measured", step.number, title or f"step {step.key} {step.name} (measured)",
                    lanes=lanes, spans=spans, handoffs=handoffs, meta=m)


DENSE_FLOP_PER_CLOCK_PER_SM = 4096  # Hopper fp16/bf16 wgmma, dense (989 TFLOP/s at 1.83 GHz, 132 SMs)


def nominal_mma_ns(step, ns_per_clock: float) -> float:
    """Time one k-tile's wgmma group takes at the tensor core's peak rate."""
    return 2.0 * step.bm * step.bn * step.bk / DENSE_FLOP_PER_CLOCK_PER_SM * ns_per_clock


def _settle_mma_spans(spans: list[Span], block: int, cap_ns: dict[str, float]) -> None:
    """Turn a lane's raw wgmma spans (issue -> retirement seen by wgmma.wait_group) into an
    estimate of when the tensor core worked on them. The tensor core runs a lane's groups in
    order, so group k starts at max(issue_k, end_{k-1}). Its retirement is only observed
    when the consumer gets round to wgmma.wait_group (after issuing k+1), which may be long
    after the tensor core finished. So each span is capped at the group's duration at the
    tensor core's peak rate (cap_ns[lane], from the recorder's own clock): the busy fraction
    is then the share of time the tensor core would need at peak for the work it was given
    — a lower bound, where the uncapped spans give an upper bound."""
    by_lane = defaultdict(list)
    for s in spans:
        if s.kind == "mma" and s.cta == block:
            by_lane[s.lane].append(s)
    for lane, lane_spans in by_lane.items():
        lane_spans.sort(key=lambda s: s.start)
        prev_end = float("-inf")
        cap = cap_ns.get(lane, float("inf"))
        for s in lane_spans:
            s.start = max(s.start, prev_end)
            s.end = max(min(s.end, s.start + cap), s.start)
            prev_end = s.end


def measure(step, M: int, N: int, K: int, *, events: int | None = None, reps: int = 10) -> dict:
    """Run `step` with tracing on the GPU. Returns {records, overhead, timeline kwargs}."""
    import statistics

    import torch
    from ..measure.accuracy import check_product
    from ..measure.bench import Bench
    from ..runtime import launch
    launch.check_device(torch.device("cuda"))
    sms = launch.num_sms(torch.cuda.current_device())
    cap = events or events_needed(step, M, N, K, sms)
    gx, gy, gz = step.grid(M, N, sms)
    blocks = gx * gy * gz
    words = blocks * SLOTS_PER_CTA * (HEADER_WORDS + 2 * cap)
    bench = Bench(torch.cuda.current_device())
    a, b = bench.inputs(M, N, K, torch.float16)
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    buf = torch.zeros(words, dtype=torch.int64, device="cuda")
    traced = launch.plan(step, a, b, out, trace_buffer=buf, trace_events=cap)
    traced()
    traced.synchronize()
    ok, _, rel, msg = check_product(out, a, b)
    plain = launch.plan(step, a, b, torch.empty_like(out))
    t_plain, t_traced = bench.time_interleaved([plain, traced], reps)
    buf.zero_()
    bench.flush_l2()
    traced()
    traced.synchronize()
    records = decode(buf.cpu().tolist(), blocks, cap)
    return {"records": records, "correct": ok, "rel_err": rel, "check": msg,
            "ms_plain": statistics.median(t_plain), "ms_traced": statistics.median(t_traced),
            "overhead": statistics.median(t_traced) / statistics.median(t_plain) - 1.0,
            "blocks": blocks, "events_per_slot": cap, "num_sms": sms}
