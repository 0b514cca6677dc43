"""Where a first open's time goes: stage by stage, wall and CPU seconds and private memory.

    python bench/stages.py TRACE.sqlite            # `stats`: load, range model, each report, cache write
    python bench/stages.py TRACE.sqlite --tui      # the TUI's load worker: tree stage, GPU read, full model

A first open each time: the per-user cache is pointed at an empty folder of its own (removed at
the end), so the load reads the file and writes the cache meanwhile, as a new file's open does.
One markdown table on stdout. CPU seconds are the process's (user + system, every thread: the
background readers and the cache writer included), steadier than wall time on a shared machine;
private memory is RssAnon + RssShmem after the stage. Not a test: a measurement, for
bench/RESULTS.md's stage table.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

T0, C0 = time.perf_counter(), time.process_time()  # before the imports: a command pays them too


def private_mb() -> int:
    kb = 0
    with open("/proc/self/status") as fh:
        for line in fh:
            key, value = line.split(":", 1)
            if key in ("RssAnon", "RssShmem"):
                kb += int(value.split()[0])
    return kb // 1024


class Stages:
    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float, int]] = []
        self.last = (T0, C0)
        self.current: str | None = None  # the loader's stage under way (its progress text)

    def step(self, text: str) -> None:
        """The loader says a stage begins: the one under way (if any) ends here."""
        if self.current is not None:
            self.mark(f"load: {self.current}")
        self.current = text

    def end(self, what: str) -> None:
        """A stage of ours ends; the loader's last one, under way till now, is part of it."""
        if self.current is not None:
            what = f"load: {self.current} ({what})"
            self.current = None
        self.mark(what)

    def mark(self, what: str) -> None:
        now = (time.perf_counter(), time.process_time())
        self.rows.append((what, now[0] - self.last[0], now[1] - self.last[1], private_mb()))
        self.last = now

    def table(self) -> str:
        lines = ["| stage | wall s | CPU s | private MB after |", "|---|---:|---:|---:|"]
        lines += [f"| {w} | {s:.2f} | {c:.2f} | {m:,} |" for w, s, c, m in self.rows]
        wall, cpu = self.last[0] - T0, self.last[1] - C0
        lines.append(f"| **total** | **{wall:.2f}** | **{cpu:.2f}** | |")
        return "\n".join(lines)


def main(argv: list[str]) -> int:
    tui = "--tui" in argv
    paths = [a for a in argv if not a.startswith("--")]
    if len(paths) != 1:
        print("usage: python bench/stages.py TRACE.sqlite [--tui]", file=sys.stderr)
        return 2
    cache = tempfile.mkdtemp(prefix="nsight-stages-")
    os.environ["NSIGHT_TUI_CACHE_DIR"] = cache
    os.environ.pop("NSIGHT_TUI_NO_CACHE", None)
    try:
        from pathlib import Path

        from nsight_tui.parsers.read import cache as store

        st = Stages()
        path = Path(paths[0])
        if tui:
            from nsight_tui.tui.session import StagedLoad

            st.mark("Python start-up and imports (app's modules)")
            load = StagedLoad(path, "process", progress=lambda f, text: st.step(text))
            st.mark("open the file (schema; GPU tables' read begun in the background)")
            load.tree()
            st.end("NVTX ranges read, tree with CPU times built (stage 1)")
            load.finish()
            st.end("full range model and first rows (first screen)")
        else:
            from nsight_tui.parsers.model.ranges import range_model
            from nsight_tui.parsers.nsys.reports import REPORTS, build_report
            from nsight_tui.parsers.read.load import TraceLoader

            st.mark("Python start-up and imports")
            loader = TraceLoader(path, progress=lambda f, text: st.step(text))
            st.mark("open the file (schema; GPU tables' read begun in the background)")
            trace = loader.finish()
            st.end("load finished (ops linked to their launches)")
            range_model(trace, "process")
            st.mark("range model (attribution, metrics, nesting)")
            for name in REPORTS:
                build_report(trace, name, "process")
                st.mark(f"report {name}")
        store.wait_all()
        st.mark("waiting for the cache writer")
        print(st.table())
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
