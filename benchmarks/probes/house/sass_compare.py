"""The production kernels' SASS against the tree before the kernel split (73a14fa), build by build.

The library's kernels moved from ladder steps 8 and 9 into kernels/gemm/ (and the small-M kernel
into kernels/smallm/), onto the pipeline object of kernels/common/gl_pipeline.cuh. This compiles
each library build twice with the same defines — the old sources (extracted from git) and the new
ones — and compares the instruction streams with addresses and immediates masked: how many
instructions differ, and the change in each opcode's count.

    PYTHONPATH=src python benchmarks/probes/house/sass_compare.py [REV] > record.txt
"""
from __future__ import annotations

import collections
import difflib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from gemm_ladder.cuda import jit
from gemm_ladder.families.keys import get_step
from gemm_ladder.measure.sass import disassemble

REV = sys.argv[1] if len(sys.argv) > 1 else "73a14fa"
# new key -> (old source file, old entry): the kernels as they were
OLD = {"gemm:128x256c2": "9", "gemm:128x256": "9:c1", "gemm:128x240": "9:n240", "gemm:128x232": "9:n232",
       "gemm:128x224": "9:n224", "gemm:128x192": "9:n192", "gemm:128x176": "9:n176", "gemm:128x168": "9:n168",
       "gemm:128x256sk": "9:sk", "gemm:128x128": "8:c1"}
OLD_SOURCE = {"gemm_two_consumers": ("step9_multi_consumer.cu", "gemm_step9_multi_consumer"),
              "gemm_one_consumer": ("step8_cluster.cu", "gemm_step8_cluster"),
              "gemm_smallm_splitk": ("smallm_splitk.cu", "gemm_smallm_splitk")}


def instructions(cubin: bytes) -> list[str]:
    out = []
    for line in disassemble(cubin, use_cache=False).splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s*(.*)", line)
        if m:
            out.append(re.sub(r"0x[0-9a-f]+", "X", m.group(2).split(";")[0]).strip())
    return out


def opcode(ins: str) -> str:
    parts = ins.split()
    return parts[1] if parts[0].startswith("@") else parts[0]


def main() -> int:
    old_dir = Path(tempfile.mkdtemp())
    names = subprocess.run(["git", "ls-tree", "--name-only", REV, "src/gemm_ladder/kernels/"], check=True,
                           capture_output=True, text=True).stdout.split()
    for name in names:
        text = subprocess.run(["git", "show", f"{REV}:{name}"], check=True, capture_output=True, text=True).stdout
        (old_dir / Path(name).name).write_text(text)
    keys = list(OLD) + ["smallm", "smallm:n128", "smallm:n128m2", "smallm:c2", "smallm:c2n128", "smallm:n64",
                        "smallm:n32"]
    print(f"# production builds, SASS at the working tree against {REV} (addresses and immediates masked)")
    for key in keys:
        st = get_step(key)
        a_ok, b_ok = st.reads_mn()
        builds = [({}, False), ({}, True), ({"GL_TRACE": 1}, False), ({"GL_DEBUG_WAITS": 1}, False)]
        builds += [(st.layout_defines(False, True), False)] if b_ok else []
        builds += [(st.layout_defines(True, False), False)] if a_ok else []
        for extra, bf16 in builds:
            d = {**st.kernel_defines(), **extra, **({"GL_BF16": 1} if bf16 else {})}
            src, entry = OLD_SOURCE[st.entry]
            old = jit.compile_kernel(src, entry, d, use_cache=False, strict=False, kernel_dir=old_dir)
            new = jit.compile_kernel(st.source, st.entry, d, use_cache=False, strict=False)
            o, n = instructions(old.cubin), instructions(new.cubin)
            differ = sum(1 for x in difflib.unified_diff(o, n, lineterm="", n=0)
                         if x[:1] in "+-" and x[:3] not in ("+++", "---"))
            co, cn = collections.Counter(map(opcode, o)), collections.Counter(map(opcode, n))
            delta = {k: cn[k] - co[k] for k in sorted(set(co) | set(cn)) if cn[k] != co[k]}
            print(f"{key:16s} {OLD.get(key, key):8s} bf16={int(bf16)} {extra or ''!s:24s} instructions {len(o)} -> "
                  f"{len(n)}, lines differing {differ}, registers {old.report.registers} -> "
                  f"{new.report.registers}, spills {new.report.spill_bytes}, opcode counts {delta or 'same'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
