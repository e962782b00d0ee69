"""Compile every kernel strictly (no spills, no wgmma serialization warnings, no compiler warnings), with the
NVRTC this Python finds: every ladder step and variant, every gemm family entry (the library's
kernels) and every small-M family entry, fp16 and bf16, plus the debug (bounded waits) and
trace builds and the builds for MN-major operands (an M-major A, an N-major B) of the kernels
that read them. Needs no GPU and no torch:

    PYTHONPATH=src python scripts/compile_all.py

CI runs it a second time under the oldest NVRTC the package allows (13.0, the version
beside the H200): ptxas changes between releases, and a kernel clean under one may spill
under another.
"""
from __future__ import annotations

import re
import sys

FRONT_END_WARNING = re.compile(r"warning #\d+")


def main() -> int:
    from cuda.bindings import nvrtc
    from gemm_ladder.families import common, gemm, ladder
    from gemm_ladder.families.smallm import FAMILIES, FIXUP_ENTRIES, with_fields

    _, major, minor = nvrtc.nvrtcVersion()
    # the family's in-kernel fixup builds the GPU tests run too (a debug build of one once
    # spilled under 13.0 alone)
    fixups = [with_fields(FAMILIES[k], "fixup", fixup=True) for k in FIXUP_ENTRIES]
    targets = list(ladder.all_steps()) + gemm.all_entries() + list(FAMILIES.values()) + fixups
    failures = []
    for st in targets:
        a_ok, b_ok = common.reads_mn(st)
        layouts = [st.layout_defines(a_mn, b_mn) for a_mn, b_mn in ((True, False), (False, True), (True, True))
                   if (a_ok or not a_mn) and (b_ok or not b_mn)]
        for extra in [{}, {"GL_DEBUG_WAITS": 1}, {"GL_TRACE": 1}] + layouts:
            if extra and not getattr(st, "barriers", 0):
                continue  # nothing to bound or trace in the lockstep steps
            for bf16 in (False, True):
                try:
                    k = st.compile(bf16=bf16, extra_defines=extra, use_cache=False, strict=True)
                except Exception as e:  # report every failure, not only the first
                    failures.append(f"{st.key} bf16={bf16} {extra}: {str(e).splitlines()[0]}")
                    continue
                # the front end's warnings too (e.g. a division by zero in a branch a build leaves dead)
                failures += [f"{st.key} bf16={bf16} {extra}: {w}" for w in dict.fromkeys(k.report.warnings)
                             if FRONT_END_WARNING.search(w)]
    from gemm_ladder.families import fp8  # every call variant of the fp8 family, and its instrumented builds
    for e in fp8.all_entries() + fp8.checked_variants():  # (and the variant builds the GPU tests run)
        variants = [fp8.Variant(mode, out, bias=(out == "float32" and e.step != 11)) for mode in e.modes
                    for out in e.outs]
        for v, extra in [(v, {}) for v in variants] + [(variants[0], {"GL_DEBUG_WAITS": 1}),
                                                        (variants[0], {"GL_TRACE": 1})]:
            try:
                k = e.compile(variant=v, extra_defines=extra, use_cache=False, strict=True)
            except Exception as ex:
                failures.append(f"{e.key} {v} {extra}: {str(ex).splitlines()[0]}")
                continue
            failures += [f"{e.key} {v} {extra}: {w}" for w in dict.fromkeys(k.report.warnings)
                         if FRONT_END_WARNING.search(w)]
        targets.append(e)
    from gemm_ladder.families import attention  # every attention build: causal or not, and instrumented
    for st in attention.all_builds():
        for causal, extra in ((False, {}), (True, {}), (True, {"GL_DEBUG_WAITS": 1}), (True, {"GL_TRACE": 1})):
            for bf16 in ((False, True) if not extra else (False,)):
                try:
                    k = st.compile(bf16=bf16, causal=causal, extra_defines=extra, use_cache=False, strict=True)
                except Exception as ex:
                    failures.append(f"{st.key} D{st.head_dim} causal={causal} {extra}: {str(ex).splitlines()[0]}")
                    continue
                failures += [f"{st.key} D{st.head_dim} {extra}: {w}" for w in dict.fromkeys(k.report.warnings)
                             if FRONT_END_WARNING.search(w)]
        targets.append(st)
    print(f"NVRTC {major}.{minor}: {len(targets)} kernels, {len(failures)} failed builds")
    for f in failures:
        print("  " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
