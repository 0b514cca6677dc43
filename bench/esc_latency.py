"""`esc` in a real terminal: `nsight-tui TRACE` in a detached tmux, a view opened by its key, then
`esc`; the time from `tmux send-keys` to the range tree back on the pane (capture-pane polled).

    python bench/esc_latency.py TRACE [--views 2,t,p,F] [-n 10] [--size 120x40] [--baseline]

Pilot (bench/tui_latency.py) injects key events: it never sees the terminal's side of `esc`, the
wait for the rest of an escape sequence (tui/terminal_input.py). `--baseline` runs Textual's own
driver with its 100 ms delay (TEXTUAL_DRIVER, ESCDELAY) for the figures before. `1` goes back the
same way without that wait: `--back 1` times it, the floor `esc` is held against."""
from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TREE_HEADER = "Range "  # the range tree's column header, the start of its third line


class Pane:
    def __init__(self, command: str, size: tuple[int, int]) -> None:
        self.socket = f"nsight-esc-{os.getpid()}"
        self.tmux("new-session", "-d", "-s", "esc", "-x", str(size[0]), "-y", str(size[1]), command)

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20).stdout

    def text(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "esc")

    def until(self, ok, timeout: float = 300) -> float:
        t0 = time.perf_counter()
        while not ok(self.text()):
            if time.perf_counter() - t0 > timeout:
                raise SystemExit(f"esc_latency: timed out; the pane:\n{self.text()}")
        return time.perf_counter()

    def kill(self) -> None:
        self.tmux("kill-server")


def on_tree(text: str) -> bool:
    lines = text.splitlines()
    return any(line.startswith(TREE_HEADER) for line in lines[:4])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="esc back to the range tree, in tmux")
    p.add_argument("trace", type=Path)
    p.add_argument("--views", default="2,t,p,F", help="the keys that open the views to go back from")
    p.add_argument("-n", type=int, default=10, help="times per view")
    p.add_argument("--size", default="120x40")
    p.add_argument("--back", default="Escape", help="the key that goes back (tmux's name): Escape, or 1")
    p.add_argument("--baseline", action="store_true", help="Textual's own driver, ESCDELAY=100 (the figures before)")
    args = p.parse_args(argv)
    w, h = (int(x) for x in args.size.split("x"))
    env = "TEXTUAL_DRIVER=textual.drivers.linux_driver:LinuxDriver ESCDELAY=100 " if args.baseline else ""
    pane = Pane(f"cd {shlex.quote(str(REPO))} && {env}PYTHONPATH={shlex.quote(str(REPO))} "
                f"{shlex.quote(sys.executable)} -m nsight_tui {shlex.quote(str(args.trace))}", (w, h))
    try:
        pane.until(on_tree)
        time.sleep(2)  # the warm-up of the global views
        print(f"{args.trace.name} at {args.size}, back with {args.back}{' (baseline)' if args.baseline else ''}, ms:")
        for key in args.views.split(","):
            times = []
            for _ in range(args.n):
                pane.tmux("send-keys", "-t", "esc", key)
                pane.until(lambda t: not on_tree(t))
                time.sleep(0.8)  # the view built and drawn
                view = pane.text()
                t0 = time.perf_counter()
                pane.tmux("send-keys", "-t", "esc", args.back)
                times.append((pane.until(lambda t, before=view: t != before and on_tree(t), 30) - t0) * 1000)
                time.sleep(0.4)
            print(f"  from {key!r}: median {statistics.median(times):5.0f}  min {min(times):5.0f}  max {max(times):5.0f}"
                  f"   ({', '.join(f'{x:.0f}' for x in times)})")
    finally:
        pane.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
