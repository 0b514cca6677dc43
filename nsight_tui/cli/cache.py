"""`nsight-tui cache [list|clear]`: what the per-user cache holds, and removing it.

A load keeps what it read and computed (the trace's columns, the range model) in the user's
cache folder, so the next open of the same, unchanged file reads memory-mapped columns instead
of parsing SQLite (parsers/read/cache.py says where, how it is keyed and bounded).
"""
from __future__ import annotations

import argparse
import sys
import time

HELP = "list (or clear) the per-user cache that makes a second open of a file fast"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", default="list", choices=("list", "clear"),
                        help="list (default): one line per cached file, newest first; clear: remove them all")


def _size(n: int) -> str:
    return f"{n / 1e9:,.2f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"


def run(args: argparse.Namespace) -> int:
    from nsight_tui.parsers.read import cache
    from nsight_tui.render.safe import visible

    root = cache.cache_root()
    if args.action == "clear":
        n, size = cache.clear(root)
        print(f"removed {n:,} cached file{'s' if n != 1 else ''} ({_size(size)}) from {visible(str(root))}")
        return 0
    entries = cache.slots(root)
    state = "" if cache.enabled() else f" (off: {cache.ENV_OFF} is set)"
    print(f"cache: {visible(str(root))}{state}; at most {_size(cache.max_bytes(root))} "
          f"(${cache.ENV_MAX} sets it), least recently used removed first")
    copies = cache.plain_copies(root)
    if copies:
        print(f"{_size(sum(p.stat().st_size for p in copies)):>10}  in {len(copies):,} decompressed "
              f"cop{'ies' if len(copies) != 1 else 'y'} of exports compressed whole (.xz, .gz, .bz2; the {cache.PLAIN_KEEP} "
              f"last used kept): {visible(str(root / cache.PLAIN))}")
    if not entries:
        print("empty" if not copies else "no cached file")
        return 0
    for s in entries:
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.last_used))
        print(f"{_size(s.bytes):>10}  last used {used}  {visible(s.profile)}  [{', '.join(s.bundles)}]")
    print(f"{_size(sum(s.bytes for s in entries)):>10}  in {len(entries):,} file{'s' if len(entries) != 1 else ''}")
    sys.stdout.flush()
    return 0
