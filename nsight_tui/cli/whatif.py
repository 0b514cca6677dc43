"""`nsight-tui whatif TRACE [EDIT ...]`: replay the captured step, changed by the edits, and say
what the step would take and what would hold it.

EDITs: speed:PATTERN[@RANGE]=K (or =K1..K2, =K1..KC..K2: a range), drop:PATTERN[@RANGE],
fuse:P1+P2+...[@RANGE[,N+][,<DURATION]], kernels-from:TWIN.sqlite,
nosync[:RANGE|CALL], nohost[:RANGE|DURATION], workers:N, graph[:RANGE], attention[:RANGE], pin[:RANGE],
straggler, fix:FINDING_ID (parsers/replay/edits.py).
With none, the unchanged replay against the measured step. TRACE may be a folder of one run's
per-rank exports: replayed as one trace, the ranks coupled through their collectives."""
from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from pathlib import Path

from nsight_tui.cli.formats import add_format
from nsight_tui.cli.say import note, quiet

HELP = "replay the captured step with edits (speed:, drop:, fuse:, kernels-from:, nosync, nohost, graph, pin): the predicted step"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help="the export (.sqlite), or a folder of one run's per-rank exports (NAME_rank0.sqlite, "
                                      "NAME_rank1.sqlite, ...: replayed as one, on one clock)")
    # default=[]: argparse counts a `*` positional without a default as required ("required: trace, EDIT"),
    # while no edit is the unchanged replay
    parser.add_argument("edits", nargs="*", metavar="EDIT", default=[],
                        help="speed:PATTERN[@RANGE]=K (K times faster, below 1 slower; or K1..K2, K1..KC..K2: a "
                             "range, KC its central) | "
                             "drop:PATTERN[@RANGE] | fuse:P1+P2+...[@RANGE[,N+][,<DURATION]] "
                             "(each run of N or more consecutive kernels of one stream matching the patterns, each at most "
                             "DURATION, inside one RANGE, one kernel: its longest's time) | kernels-from:TWIN.sqlite | "
                             "nosync[:RANGE|CALL] | nohost[:RANGE|DURATION] (nohost:2ms the pauses of at least 2 ms, "
                             "nohost:-5ms each 5 ms shorter) | workers:N (what nohost removed, run by N "
                             "loader workers) | graph[:RANGE] | attention[:RANGE] (attention written out, one fused "
                             "kernel) | pin[:RANGE] (pageable copies from "
                             "pinned memory, non_blocking) | straggler (the rank that arrives last at the collectives "
                             "without its own pauses and slower kernels) | fix:FINDING_ID (a finding's id, as `report` lists them). "
                             "PATTERN: a kernel family (gemm, attention, elementwise, ...) or a case-sensitive name "
                             "glob; RANGE: an NVTX range name or glob, `step` (the default) the steady-state steps")
    parser.add_argument("--ncu", metavar="FILE.ncu-rep",
                        help="an Nsight Compute report of the same workload, for fix:occupancy-limited (the kernels ncu "
                             "found limited by occupancy)")
    add_format(parser, ("markdown", "json"), "markdown")
    parser.add_argument("-o", "--output", default="-", help="write to this file ('-' = stdout, default)")
    parser.add_argument("--force", action="store_true", help="overwrite the output file (never an input)")


@contextmanager
def _progress():
    """The per-rank files read so far, on one line of a terminal's stderr (as `ranks` says its files),
    wiped once they are in or the read failed, so an error stays one line."""
    shown = [0]

    def say(fraction: float, text: str) -> None:
        if not quiet() and sys.stderr is not None and sys.stderr.isatty():
            print(f"\r{text}".ljust(shown[0] + 1), end="", file=sys.stderr, flush=True)
            shown[0] = max(shown[0], len(text))

    try:
        yield say
    finally:
        if shown[0]:
            print("\r" + " " * shown[0] + "\r", end="", file=sys.stderr, flush=True)


def _exports(path: Path) -> list[Path]:
    """The exports a folder holds (none for a file; a folder that cannot be listed: its read says why)."""
    from nsight_tui.parsers import exports_in

    try:
        return exports_in(path) if path.is_dir() else []
    except OSError:
        return []


def run(args: argparse.Namespace) -> int:
    from nsight_tui.parsers import Options, OptionsError, Profile, TraceError, parse_edits
    from nsight_tui.render import output
    from nsight_tui.render.safe import visible
    from nsight_tui.render.whatif import whatif_json_text, whatif_markdown

    edits = parse_edits(args.edits)  # an edit that cannot be read: one line, before any file is opened
    path = Path(args.trace)
    # every file read is an input, never written over, --force or not: a folder's exports and a
    # kernels-from: twin (a file or a folder of them) too, not only the paths as given
    read = [path, *(Path(e.twin) for e in edits if e.twin)]
    inputs = [*read, *(f for p in read for f in _exports(p))] + ([Path(args.ncu)] if args.ncu else [])
    if args.ncu and not Path(args.ncu).is_file():  # read only by a fix: that needs it; said either way
        raise TraceError(f"{visible(args.ncu)}: " + ("not a file" if Path(args.ncu).exists() else "no such file")
                         + " (--ncu)")
    if args.output != "-":
        output.check_target(args.output, args.force, inputs=inputs)
    options = Options(ncu_file=args.ncu) if args.ncu else None
    try:
        with _progress() as progress:
            profile = Profile.open_ranks(path, options, progress if path.is_dir() else None)
    except OptionsError as exc:  # named as the flag this command spells it with
        raise TraceError(exc.said_as({"ncu_file": "--ncu"}.get(exc.option, exc.option))) from None
    p = profile.whatif(edits)
    text = whatif_json_text(p) if args.format == "json" else whatif_markdown(p)
    if args.output == "-":
        output.write_stdout(text)
    else:
        written = output.write_atomic(args.output, text, overwrite=args.force, inputs=inputs)
        note(f"wrote {visible(str(written))}")
    return 0
