"""``gemm-ladder calibrate`` (no GPU): the simulator against saved traces. For each trace, the
same account its page gives (choreography.story): what was measured, the model fitted to
this trace, and the model predicting it from timings it was not fitted to. With
``--held-out``: fit once, on one trace, and predict every other traced step and size
(choreography.heldout), writing the record."""
from __future__ import annotations

import argparse
import datetime as _dt
import json

from ..choreography import heldout, saved, story
from ..choreography.sim.calibrate import MAKESPAN_TOLERANCE
from . import doors


def _read(path: str, ctas: int | None):
    doors.input_file(path)
    try:
        return saved.measured_timelines(path, ctas=list(range(ctas)) if ctas else None)
    except OSError as e:
        raise doors.CliError(f"cannot read {path}: {e.strerror or e}") from None
    except (ValueError, KeyError) as e:  # the reader's messages start with the path
        why = str(e).removeprefix(f"{path}: ")
        raise doors.CliError(f"{path}: not a measured trace `gemm-ladder trace` wrote ({why})") from None


def _fit_on(path: str | None) -> heldout.Fit | None:
    """The timings fitted on one saved trace (--fit-on), for the predictions."""
    if path is None:
        return None
    doors.input_file(path)
    try:
        run = heldout.read_run(path)
        if run is None:
            raise ValueError("not a GEMM trace")
        return heldout.fit(run)
    except (OSError, ValueError, KeyError) as e:
        raise doors.CliError(f"--fit-on {path}: cannot fit on it ({e})") from None


def calibrate_command(args) -> int:
    """Each saved trace: the model fitted to it and the model predicting it; exit 1 if a fit
    is outside the tolerance, 2 if a file cannot be read (before any is checked)."""
    if args.held_out:
        return held_out_command(args)
    json_path = doors.out_file(args.json) if args.json is not None else None
    fit = _fit_on(args.fit_on)
    traces = [(path, _read(path, args.ctas)) for path in args.files]
    if args.page and (len(traces) != 1 or len(traces[0][1]) != 1):
        raise doors.CliError("--page draws one measured trace: give one file that holds one")
    ok, rows = True, []
    for path, tls in traces:
        for tl in tls:
            tl.meta.setdefault("key", heldout.key_of(tl))  # pages drawn before the key was kept: 7 at depth 4 is 7:d4
            told = story.tell(tl, fit, tolerance=args.tolerance)
            c = told["calibration"]
            rows.append(dict(c, file=str(path), prediction=told["prediction"], story=told["lines"]))
            print(f"{path}:")
            for line in told["lines"]:
                print("  " + line)
            ok = ok and c["within"]
            if args.page:
                story.write_page(tl, told, doors.out_file(args.page))
                print(f"wrote {args.page}")
    if json_path:
        doors.write_text(json_path, json.dumps(rows, indent=1, default=float))
    return 0 if ok and rows else 1


def held_out_command(args) -> int:
    """Fit on the run --fit-on names (default 7:d4 at 4096³), predict every run in the given
    files and folders; the table, and the record (--json). Exit 0 when every prediction is
    within the targets, 1 when one misses, 2 when the inputs hold no such run."""
    if args.page:
        raise doors.CliError("--page draws one trace: give it without --held-out")
    runs = heldout.read_runs(args.files)
    if not runs:
        raise doors.CliError(f"no traces `gemm-ladder trace` wrote in {', '.join(args.files)}")
    try:
        record = heldout.held_out(runs, args.fit_on or heldout.DEFAULT_FIT_ON)
    except ValueError as e:
        raise doors.CliError(str(e)) from None
    from ..measure.bench import git_commit
    record.update(commit=git_commit(), date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    for line in heldout.format_rows(record):
        print(line)
    if args.json:
        doors.write_text(doors.out_file(args.json), json.dumps(record, indent=1, default=float))
        print(f"wrote {args.json}")
    s = record["summary"]
    return 0 if s["within"] == s["predicted"] else 1


def add_calibrate_parser(sub) -> argparse.ArgumentParser:
    c = sub.add_parser("calibrate", help="the simulator fitted to, and predicting, saved traces (no GPU)",
                       description="For each saved measured trace (the *_records.json.gz, trace JSON or page "
                                   "that `gemm-ladder trace` wrote): the model fitted to it (its makespan "
                                   "checked against the busiest CTA's), and the model predicting it from timings "
                                   "it was not fitted to (the defaults, or --fit-on). With --held-out: fit once "
                                   "and predict every other traced step and size.")
    c.add_argument("files", nargs="+", help="saved traces: *_records.json.gz, trace JSON, page or *_perfetto.json "
                                            "(with --held-out: also folders of `gemm-ladder trace` outputs)")
    c.add_argument("--tolerance", type=doors.number(float, 0, 100, low_open=True), default=MAKESPAN_TOLERANCE,
                   help=f"largest relative makespan error accepted (default {MAKESPAN_TOLERANCE})")
    c.add_argument("--ctas", type=doors.number(int, 1, 1 << 20), help="records files: decode only the first N CTAs "
                                                                    "(default all; the first CTAs compute the most tiles)")
    c.add_argument("--fit-on", metavar="TRACE", help="predict from the timings fitted on this trace (a file; with "
                   f"--held-out also KEY@N among the inputs, default {heldout.DEFAULT_FIT_ON})")
    c.add_argument("--held-out", action="store_true", help="fit once (--fit-on) and predict every other run, "
                   "without refitting: makespan, tensor-core busy, the traced build against the kernel")
    c.add_argument("--page", metavar="FILE", help="draw the account of one trace: the fitted model beside the "
                   "measured timeline, the prediction, the lines printed here as its subtitle")
    c.add_argument("--json", metavar="FILE", help="also write the results here (with --held-out: the record)")
    c.set_defaults(fn=calibrate_command)
    return c

