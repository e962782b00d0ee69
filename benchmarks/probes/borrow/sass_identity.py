"""Hashes of step 9's SASS (every borrow-related build) to compare two trees without a GPU."""
import sys, hashlib, re
from gemm_ladder.runtime.steps import get_step
from gemm_ladder.measure.sass import disassemble
out = {}
for k in ["9", "9:c1", "9:n232", "9:n176", "9:n192", "9:sk", "9:b0"]:
    for ex in ({}, {"GL_TRACE": 1}, {"GL_B_MN": 1}, {"GL_DEBUG_WAITS": 1}):
        for bf in (False, True):
            if bf and ex: continue
            ck = get_step(k).compile(bf16=bf, extra_defines=ex, use_cache=False)
            sass = disassemble(ck.cubin, use_cache=False)
            body = "\n".join(l.split(";")[0] for l in sass.splitlines() if "/*0" in l)
            out[f"{k} {bf} {ex}"] = hashlib.sha256(body.encode()).hexdigest()[:12]
for kk, v in out.items(): print(kk, v)
