"""`gemm-ladder bench --attention`: its flags, the checks that it is given alone, and the call
into measure/bench_attention.py."""
from __future__ import annotations

import argparse

from ..measure.attention_report import STEP_KEYS, head_dims
from . import doors
from .doors import CliError

MAX_SEQLEN = 1 << 20


def head_dim_list(spec: str) -> list[int]:
    """--head-dims: '64,128' -> [64, 128]; each one of the family's head dims."""
    out, known = [], head_dims()
    for part in filter(None, (p.strip() for p in spec.split(","))):
        if not part.isdigit() or int(part) not in known:
            raise argparse.ArgumentTypeError(f"bad head dim {part!r}: use {', '.join(map(str, known))}")
        out.append(int(part))
    if not out:
        raise argparse.ArgumentTypeError("no head dims given: e.g. 64,128,256")
    return list(dict.fromkeys(out))


def seqlen_list(spec: str) -> list[int]:
    """--seqlens: '1k,4096,16k' -> [1024, 4096, 16384]."""
    out = []
    for part in filter(None, (p.strip().lower() for p in spec.split(","))):
        num, mult = (part[:-1], 1024) if part.endswith("k") else (part, 1)
        if not num.isdigit() or not 1 <= int(num) * mult <= MAX_SEQLEN:
            raise argparse.ArgumentTypeError(f"bad sequence length {part!r}: a count of tokens (1..{MAX_SEQLEN}) "
                                             "or Nk, e.g. 1k,4k,16k")
        out.append(int(num) * mult)
    if not out:
        raise argparse.ArgumentTypeError("no sequence lengths given: e.g. 1k,4k,16k")
    return list(dict.fromkeys(out))


def attn_step_list(spec: str) -> list[str]:
    """--attn-steps: 'a1,A3' -> ['A1', 'A3']; a step the family lacks at run time is skipped
    with a printed line."""
    out = []
    for part in filter(None, (p.strip().upper() for p in spec.split(","))):
        if part == "ALL":
            out += STEP_KEYS
        elif part in STEP_KEYS:
            out.append(part)
        else:
            raise argparse.ArgumentTypeError(f"unknown attention step {part!r}: use {', '.join(STEP_KEYS)} or all")
    if not out:
        raise argparse.ArgumentTypeError("no attention steps given: e.g. A1,A3")
    return list(dict.fromkeys(out))


def add_flags(b) -> None:
    b.add_argument("--attention", action="store_true",
                   help="the attention steps (A1..A5) against torch SDPA's cuDNN, flash and efficient backends: "
                        "fp16/bf16, head dims 64/128/256, S 1k/4k/16k, causal and not; 16k tokens per call "
                        "(JSON <date>_h200_attention_<commit>.json); with --reps and --budget at most 20 calls "
                        "and 0.3 s per kernel and case")
    b.add_argument("--head-dims", type=head_dim_list, help="with --attention: head dims, e.g. 128 (default 64,128,256)")
    b.add_argument("--seqlens", type=seqlen_list, help="with --attention: sequence lengths, e.g. 4k,16k "
                   "(default 1k,4k,16k)")
    b.add_argument("--attn-steps", type=attn_step_list, help="with --attention: steps, e.g. A1,A4 (default every "
                   "fused step present, and A1 at S <= 4k)")


_NARROWING = (("head_dims", "--head-dims"), ("seqlens", "--seqlens"), ("attn_steps", "--attn-steps"))
_OTHERS = (("api", "--api"), ("fp8", "--fp8"), ("decode_chain", "--decode-chain"), ("suite", "--suite"), ("library", "--library"), ("steps", "--steps"),
           ("sizes", "--sizes"), ("dry_run", "--dry-run"), ("autotune", "--autotune"), ("with_results", "--with-results"))


def check_flags(args) -> bool:
    """True when the command is bench --attention (given alone: one CliError line otherwise);
    the narrowing flags without --attention are an error too."""
    if not getattr(args, "attention", False):
        given = [flag for name, flag in _NARROWING if getattr(args, name, None) is not None]
        if given:
            raise CliError(f"{', '.join(given)} narrow{'s' if len(given) == 1 else ''} the attention benchmark: "
                           "add --attention")
        return False
    clash = [flag for name, flag in _OTHERS if getattr(args, name, None) not in (None, False)]
    if getattr(args, "call", "kernel") != "kernel":
        clash.append("--call")
    if clash:
        raise CliError(f"--attention is its own benchmark (the attention steps against torch SDPA): give it without "
                       f"{', '.join(clash)} (it takes --dtype, --head-dims, --seqlens, --attn-steps, --reps, --budget, "
                       "--json, --out-dir)")
    return True


def cmd(args, console) -> int:
    doors.require_hopper("`gemm-ladder report` and `gemm-ladder simulate` need none")
    json_path = doors.out_file(args.json) if args.json else None
    from ..measure.bench_attention import cli_main
    return cli_main(args, console, doors.out_dir(args.out_dir), json_path)
