"""Several files side by side (one row per run), and the sweep's question tables."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from nsight_tui.parsers import Options
from nsight_tui.parsers.analyses import sweep
from nsight_tui.render.sweep import COMPARE_HEADERS, SweepTable, compare_rows
from nsight_tui.render import numbers
from nsight_tui.render.safe import visible
from nsight_tui.tui.table_model import Column


@dataclass(frozen=True)
class FilesView:
    runs: list[sweep.Run]  # analysed once, for the rows here and the question tables
    headers: list[str]
    frame: pd.DataFrame  # numeric columns stay numeric (None -> NaN): sorting compares numbers


def _value_fmt(v) -> str:
    if numbers.missing(v):
        return numbers.MISSING
    if isinstance(v, float):
        return f"{v:,.2f}"
    return visible(v)


def file_columns(headers: list[str]) -> list[Column]:
    cols = []
    for i, h in enumerate(headers):
        key = f"c{i}"
        if i == 0:
            cols.append(Column(key, h, None, "left", text=True, min_width=20))
        elif h == "top kernel":
            cols.append(Column(key, h, 28, "left", fmt=visible, text=True, priority=2))
        elif h == "status":
            cols.append(Column(key, h, 8, "left", text=True, priority=1))
        else:
            cols.append(Column(key, h, max(len(h), 9), fmt=_value_fmt, priority=6))
    return cols


def listed(paths: list[Path]) -> list[sweep.Run]:
    """The runs to read (the files given, the OOM records beside them), none read yet: quick."""
    return sweep.runs_for(paths)


def oom_export(run: sweep.Run) -> Path | None:
    """An OOM run's export beside its record (its one row in the table is the record's), else None."""
    return sweep.oom_export(run.path) if run.status == "oom" else None


def waiting_row(run: sweep.Run, reading: bool) -> list:
    """A run's row before its answers are in: its name, and whether it is being read or waits."""
    return [run.path.name, None, None, None, "", None, "reading…" if reading else "queued"]


def files_frame(rows: list[list]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=[f"c{i}" for i in range(len(COMPARE_HEADERS))])


def compare(runs: list[sweep.Run], attribution: str, progress=None, row=None) -> FilesView:
    """Every run read and answered, in order; `row(index, cells)` as each one's row is ready."""
    rows: list[list] = []

    def done(index: int, run: sweep.Run) -> None:
        cells = compare_rows([run])[0]
        rows.append(cells)
        if row is not None:
            row(index, cells)

    sweep.analyse(runs, Options(attribution=attribution), progress=progress, done=done)
    return FilesView(runs, COMPARE_HEADERS, files_frame(rows))


# A cell made of numbers (`12.34 / 13.00`, `82.1%`, `2.31x`, `0.12 vs 0.031`), or a status.
_NUMBERS = re.compile(r"^(OOM|error|[-\d,.\s/x%–]*|[-\d.]+ vs [-\d.]+)$")


def question_frame(table: SweepTable) -> tuple[pd.DataFrame, list[Column]]:
    """A question table as a frame and its columns: the row label left; a column of numbers
    right-aligned (never cut), a column of names left-aligned (shortened when narrow)."""
    frame = pd.DataFrame(table.rows, columns=[f"c{i}" for i in range(len(table.headers))], dtype=object)

    def width(i: int, header: str) -> int:
        return min(44, max([len(header), *(len(str(r[i])) for r in table.rows)]))

    def numeric(i: int) -> bool:
        return i > 0 and all(_NUMBERS.match(str(r[i])) for r in table.rows)

    cols = [Column(f"c{i}", h, width(i, h), "right" if numeric(i) else "left", text=True,
                   priority=10 if i == 0 else 5) for i, h in enumerate(table.headers)]
    return frame, cols


def one_runs_ranks(paths: list[Path]) -> tuple[Path, list[Path]] | None:
    """`a` in the files view: (the name the merged trace goes by, the files in rank order) where the
    files are one run's per-rank exports (read.rank_merge.one_run), else None."""
    from nsight_tui.parsers.read.rank_merge import one_run

    files = one_run(list(paths))
    if files is None:
        return None
    folders = {p.parent for p in files}
    return (folders.pop() if len(folders) == 1 else Path(f"{files[0].parent}/{len(files)} ranks")), files
