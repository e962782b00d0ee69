"""Step keys as people write them — '7', 7, '7:d4', '1-7,7:d4' or a Step — turned into
Steps, with one error that says what is wrong and lists the keys that exist."""
from __future__ import annotations

import re

from .steps import STEPS, VARIANTS, Step, all_steps, get_step

# Variant tokens after "N:" and what each step must have for them to apply.
_TOKENS = {"d": ("d<depth>", lambda st: "GL_DEPTH" in st.defines),
           "g": ("g<group rows>", lambda st: "GL_GROUP_M" in st.defines),
           "w": ("w<CTAs per SM>", lambda st: st.persistent)}


class UnknownStep(KeyError, ValueError):
    """A step key that names no step. A KeyError (a registry lookup failed) and a
    ValueError (a bad argument); str() is the plain message, without KeyError's quotes."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown step"


def known_keys() -> str:
    return ", ".join([str(n) for n in STEPS] + list(VARIANTS))


def _why_unknown(key: str) -> str:
    m = re.fullmatch(r"(\d+)(?::(\w*))?", key)
    if not m:
        why = f"{key!r} is not a step key (a step number, or N:<variant> such as 7:d4)"
    elif int(m.group(1)) not in STEPS:
        why = f"there is no step {m.group(1)} (steps {min(STEPS)}-{max(STEPS)} exist)"
    else:
        st = STEPS[int(m.group(1))]
        takes = [form for form, applies in _TOKENS.values() if applies(st)]
        bad = sorted(set(re.findall(r"([a-z])", m.group(2) or "")) - {t for t, (_, a) in _TOKENS.items() if a(st)})
        if not takes:
            why = f"step {st.number} has no variants"
        elif bad:
            why = f"step {st.number} has no {'/'.join(bad)} variant: its variants take {', '.join(takes)}"
        else:
            why = f"{key!r} is not a variant of step {st.number}: its variants take {', '.join(takes)}"
    return f"unknown step: {why}; known steps: {known_keys()}"


def as_step(key: Step | str | int) -> Step:
    """A Step for a key ('7', 7, '7:d4', or a Step, returned as is)."""
    if isinstance(key, Step):
        return key
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise UnknownStep(f"a step is a key such as '7' or '7:d4', or a Step; got {type(key).__name__}")
    try:
        st = get_step(key)
    except KeyError:
        raise UnknownStep(_why_unknown(str(key).strip())) from None
    zero = [_TOKENS[t][0] for t, v in re.findall(r"([dgw])(\d+)", st.variant) if int(v) < 1]
    if zero:
        raise UnknownStep(f"step {st.key}: {', '.join(zero)} must be at least 1")
    return st


def parse_step_spec(spec: str | int | Step) -> list[Step]:
    """'1-7,7:d4', 'all', '5' (or one key) -> Steps, in order."""
    if not isinstance(spec, str):
        return [as_step(spec)]
    steps: list[Step] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        if part == "all":
            steps += all_steps()
        elif "-" in part and ":" not in part:
            lo, _, hi = (x.strip() for x in part.partition("-"))
            if not (lo.isdigit() and hi.isdigit()) or int(lo) > int(hi):
                raise UnknownStep(f"bad step range {part!r}: write LOW-HIGH, e.g. 1-7")
            steps += [as_step(n) for n in range(int(lo), int(hi) + 1)]
        else:
            steps.append(as_step(part))
    if not steps:
        raise UnknownStep(f"no steps in {spec!r}; known steps: {known_keys()}")
    return steps
