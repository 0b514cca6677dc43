"""`nsight-tui PATH...`: check the input, then run the app.

A single unreadable file gets one line on stderr and a non-zero exit before any screen
is drawn; a directory opens every .sqlite export in it side by side.
"""
from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path

from nsight_tui.parsers.errors import TraceError


def resolve_paths(raw: list[str]) -> list[Path]:
    """Files as given; a directory contributes its *.sqlite files (sorted), unless it is
    itself one export (nsys's parquetdir / arrowdir)."""
    from nsight_tui.parsers.columns import columnar_kind

    paths: list[Path] = []
    for item in raw:
        p = Path(item)
        if p.is_dir() and columnar_kind(p) is None:
            found = sorted(q for q in p.glob("*.sqlite") if q.is_file())
            if not found:
                raise TraceError(f"{p}: no .sqlite exports in this directory")
            paths += found
        else:
            paths.append(p)
    return paths


def check_readable(path: Path) -> None:
    """Open read-only and touch every big table: a missing, foreign, empty or truncated
    file fails here with the loader's own one-line message."""
    from nsight_tui.parsers.columns import open_tables

    open_tables(path, native=False).close()


def roofline_options(args) -> dict:
    """--flops/--peak-* for the roofline view; a bad value is one line before any screen."""
    from nsight_tui.parsers.flop_counts import from_file

    flops, tflops, gbps = (getattr(args, k, None) for k in ("flops", "peak_tflops", "peak_gbps"))
    for value, flag in ((tflops, "--peak-tflops"), (gbps, "--peak-gbps")):
        if value is not None and not value > 0:
            raise TraceError(f"{flag} must be a positive number, not {value}")
    if flops:
        from_file(flops)  # read once now: a bad file fails here, not in the view
    return {"flops_file": flops, "peak_tflops": tflops, "peak_gbps": gbps}


def launch(args) -> int:
    paths = resolve_paths(args.paths)
    diff = getattr(args, "diff", False)
    if diff and len(paths) != 2:
        raise TraceError(f"--diff compares two files (A B), got {len(paths)}")
    if len(paths) == 1 or diff:
        for path in paths:
            check_readable(path)
    else:
        from nsight_tui.parsers.columns import columnar_kind

        missing = [p for p in paths if not (p.is_file() or columnar_kind(p))]
        if missing:
            raise TraceError(f"{missing[0]}: no such file")
    from nsight_tui.tui.app import NsightApp

    app = NsightApp(paths, attribution=args.attribution, diff=diff, main_thread=getattr(args, "main_thread", None))
    app.roofline_options = roofline_options(args)
    # Our own loop, not asyncio.run(): asyncio.run would wait at exit for a worker thread
    # still loading a big file, so `q` during a load would hang until the load finished.
    loop = asyncio.new_event_loop()
    try:
        app.run(loop=loop)
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    if app.error_message:
        print(f"nsight-tui: {app.error_message}", file=sys.stderr)
    code = app.return_code or 0
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        # `q` during a long load: a worker thread is still reading the (read-only) file and
        # cannot be interrupted; nothing is left to write, so leave now instead of waiting.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
