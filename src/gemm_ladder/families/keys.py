"""Kernel keys as people write them — '7', 7, '7:d4', '8:c1', '6:d6g1', '1-7,7:d4' or a Step —
turned into Steps, and the keys of the kernel families beside the ladder ('gemm:128x256',
'gemm:128x256b0': families/gemm.py; 'smallm', 'smallm:n128': families/smallm.py) into their
entries. This is the one parser of keys
(`get_step`, `parse_steps`): a bad key gets one error that says what is wrong and lists the
keys that exist."""
from __future__ import annotations

import re

from .ladder import MODELLED_STEPS, STEPS, VARIANTS, all_steps, variant
from .ladder_step import Step
from .gemm import ENTRIES as GEMM_ENTRIES
from .gemm import FAMILY as GEMM
from .smallm import FAMILIES as SMALLM_ENTRIES
from .smallm import SmallM

# Every family entry beside the ladder's steps, by key.
FAMILIES = {**GEMM_ENTRIES, **SMALLM_ENTRIES}

# Ad-hoc variant tokens after "N:": the Step field each sets, how messages name it, and
# the steps it applies to.
TOKENS = {"d": ("depth", "d<depth>", lambda st: st.has_ring),
          "g": ("group_m", "g<group rows>", lambda st: st.persistent),
          "w": ("ctas_per_sm", "w<CTAs per SM>", lambda st: st.persistent),
          "l": ("mma_lag", "l<wgmma groups in flight>", lambda st: st.style == "warp-specialized"),
          "b": ("borrow_stage", "b<1|0: the epilogue borrows the drained stage>",
                lambda st: st.borrow_stage is not None)}
# Tokens that are switches (0 or 1) rather than counts (at least 1).
SWITCHES = {"b"}


class UnknownStep(KeyError, ValueError):
    """A step key that names no step. A KeyError (a registry lookup failed) and a
    ValueError (a bad argument); str() is the plain message, without KeyError's quotes."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown step"


def _bases(modelled: bool) -> dict[int, Step]:
    return {**STEPS, **MODELLED_STEPS} if modelled else STEPS


def known_keys(modelled: bool = False) -> str:
    return ", ".join([str(n) for n in _bases(modelled)] + list(VARIANTS) + list(FAMILIES))


def _variants_of(st: Step) -> str:
    """What may follow 'N:' for this step: its ad-hoc tokens, and its named variants; "" if
    nothing may."""
    takes = [form for _, form, applies in TOKENS.values() if applies(st)]
    named = [k for k in VARIANTS if k.startswith(f"{st.number}:")]
    if not (takes or named):
        return ""
    text = f"its variants take {', '.join(takes)}" if takes else "it takes no ad-hoc variants"
    return text + (f" (named: {', '.join(named)})" if named else "")


def _named_prefix(number: str, tail: str) -> tuple[Step | None, str]:
    """The longest named variant of step `number` whose name starts `tail`, and what follows it."""
    best = None
    for k, st in VARIANTS.items():
        n, _, name = k.partition(":")
        if n == number and tail.startswith(name) and (best is None or len(name) > len(best.variant)):
            best = st
    return (best, tail[len(best.variant):]) if best is not None else (None, tail)


def _with_tokens(st: Step, key: str, name: str, tokens: list[tuple[str, str]]) -> Step:
    """`st` with the fields its tokens set, named `name`; counts at least 1, switches 0 or 1,
    and a combination the Step refuses (e.g. l2 on a 2-deep ring) is a bad key too."""
    zero = [TOKENS[t][1] for t, v in tokens if t not in SWITCHES and int(v) < 1]
    if zero:
        raise UnknownStep(f"step {key}: {', '.join(zero)} must be at least 1")
    flag = [TOKENS[t][1] for t, v in tokens if t in SWITCHES and int(v) > 1]
    if flag:
        raise UnknownStep(f"step {key}: {', '.join(flag)} is 0 or 1")
    try:
        return variant(st, name, **{TOKENS[t][0]: (bool(int(v)) if t in SWITCHES else int(v)) for t, v in tokens})
    except ValueError as e:
        raise UnknownStep(str(e)) from None


def _gemm_with_tokens(key: str) -> Step:
    """'gemm:<entry><tokens>', e.g. 'gemm:128x256b0': the entry with the tokens' fields."""
    tail = key[len(GEMM) + 1:]
    names = [e.variant for e in GEMM_ENTRIES.values() if tail.startswith(e.variant)]
    if names:
        st = GEMM_ENTRIES[f"{GEMM}:{max(names, key=len)}"]
        rest = tail[len(st.variant):]
        tokens = re.findall(r"([a-z])(\d+)", rest)
        if rest and "".join(t + v for t, v in tokens) == rest and all(t in TOKENS and TOKENS[t][2](st)
                                                                       for t, _ in tokens):
            return _with_tokens(st, key, tail, tokens)
    takes = ", ".join(form for _, form, applies in TOKENS.values() if applies(next(iter(GEMM_ENTRIES.values()))))
    raise UnknownStep(f"unknown kernel {key!r}: the {GEMM} family's entries are {', '.join(GEMM_ENTRIES)}, "
                      f"each of which may be followed by {takes}")


def _parse(key: str, bases: dict[int, Step]) -> Step:
    if key.isdigit() and int(key) in bases:
        return bases[int(key)]
    if key in VARIANTS:
        return VARIANTS[key]
    if key in FAMILIES:
        return FAMILIES[key]
    if key.startswith(GEMM + ":"):
        return _gemm_with_tokens(key)
    m = re.fullmatch(r"(\d+)(?::(\w*))?", key)
    if not m:
        why = (f"{key!r} is not a step key (a step number, N:<variant> such as 7:d4, or a kernel family: "
               f"{', '.join(FAMILIES)})")
    elif int(m.group(1)) not in bases:
        why = f"there is no step {m.group(1)} (steps {min(bases)}-{max(bases)} exist)"
    else:
        st, tail = bases[int(m.group(1))], m.group(2) or ""
        named, rest = _named_prefix(m.group(1), tail)  # tokens on top of a named variant: 9:n232b1
        if named is not None and rest:
            st, tail = named, rest
        tokens = re.findall(r"([a-z])(\d+)", tail)
        bad = sorted(set(re.findall(r"[a-z]", tail)) - {t for t, (_, _, applies) in TOKENS.items() if applies(st)})
        if not _variants_of(st):
            why = f"step {st.number} has no variants"
        elif bad:
            why = f"step {st.number} has no {'/'.join(bad)} variant: {_variants_of(st)}"
        elif not tail or "".join(t + v for t, v in tokens) != tail:
            why = f"{key!r} is not a variant of step {st.number}: {_variants_of(st)}"
        else:
            return _with_tokens(st, key, (st.variant + tail) if named is not None else tail, tokens)
    raise UnknownStep(f"unknown step: {why}; known steps: {known_keys(bases is not STEPS)}")


def as_step(key: Step | str | int, *, modelled: bool = False) -> Step:
    """A Step for a key ('7', 7, '7:d4', '6:d6g1', or a Step, returned as is); a family's
    entry for its key ('smallm', or the entry itself). modelled: also the steps only the
    simulator models (MODELLED_STEPS)."""
    if isinstance(key, (Step, SmallM)):
        return key
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise UnknownStep(f"a step is a key such as '7' or '7:d4', or a Step; got {type(key).__name__}")
    return _parse(str(key).strip(), _bases(modelled))


def parse_step_spec(spec: str | int | Step, *, modelled: bool = False) -> list[Step]:
    """'1-7,7:d4', 'all', '5' (or one key) -> Steps, in order."""
    if not isinstance(spec, str):
        return [as_step(spec, modelled=modelled)]
    steps: list[Step] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        if part == "all":
            steps += all_steps()
        elif "-" in part and ":" not in part:
            lo, _, hi = (x.strip() for x in part.partition("-"))
            if not (lo.isdigit() and hi.isdigit()) or int(lo) > int(hi):
                raise UnknownStep(f"bad step range {part!r}: write LOW-HIGH, e.g. 1-7")
            steps += [as_step(n, modelled=modelled) for n in range(int(lo), int(hi) + 1)]
        else:
            steps.append(as_step(part, modelled=modelled))
    if not steps:
        raise UnknownStep(f"no steps in {spec!r}; known steps: {known_keys(modelled)}")
    return steps


def get_step(key, *, modelled: bool = False) -> Step:
    """'7', 7, '7:d4' -> Step. Ad-hoc variants: 'N:d<depth>g<group>w<ctas per SM>', e.g.
    '6:d6' or '6:g1' (tokens in any order; d for steps with a ring, g and w for persistent
    steps). modelled: also the steps only the simulator models (MODELLED_STEPS).
    'gemm:128x256', ...: the production family's entries (families/gemm.py), Steps keyed by
    their tile; 'smallm', 'smallm:n128': the small-M family's entries (families/smallm.py), not
    Steps but read the same way. An unknown key raises UnknownStep (a KeyError), which says why."""
    return as_step(key, modelled=modelled)


def parse_steps(spec: str) -> list[Step]:
    """'1-7,7:d4' -> steps (parse_step_spec)."""
    return parse_step_spec(spec)
