"""A DataFrame seen through a sort, a text filter and a set of columns: what a table view
shows, what `e` exports, and what a search walks. No Textual here.

The frame is never copied or re-sorted; the view is an array of row positions (`order`).
Text columns are factorised once (codes in sorted order), so sorting 600k rows by name is an
integer argsort and filtering tests each distinct string once, not each row.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nsight_tui.render.numbers import exact
from nsight_tui.render.safe import visible


@dataclass
class Column:
    key: str  # column of the frame
    header: str  # on screen
    width: int | None = None  # None: takes the remaining width
    align: str = "right"  # "left" | "right"
    fmt: Callable = visible  # value -> screen text
    md_header: str | None = None  # in the export (defaults to header)
    md_fmt: Callable = exact  # value -> exported value (exact)
    priority: int = 5  # narrow screens drop the lowest first
    min_width: int = 12  # for the flexible column
    text: bool = False  # searched and filtered by text
    show: bool = True  # False: exported and searched, not drawn

    @property
    def export_header(self) -> str:
        return self.md_header or self.header


@dataclass(frozen=True)
class SortState:
    key: str | None = None
    descending: bool = False


class TableModel:
    """Rows of `frame` after filter and sort, as positions into the frame."""

    def __init__(self, frame: pd.DataFrame, columns: list[Column], sort: SortState | None = None):
        self.frame = frame.reset_index(drop=True)
        self.columns = columns
        self.sort = sort or SortState()
        self.filter_text = ""
        self._values = {c.key: self.frame[c.key].to_numpy() for c in columns if c.key in self.frame}
        self._factors: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.order = np.arange(len(self.frame), dtype=np.int64)
        self._apply()

    # -- shape ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.order)

    @property
    def total_rows(self) -> int:
        return len(self.frame)

    def position(self, row: int) -> int:
        """Frame position of view row `row`."""
        return int(self.order[row])

    def record(self, row: int) -> pd.Series:
        return self.frame.iloc[self.position(row)]

    def value(self, row: int, key: str):
        return self._values[key][self.order[row]] if key in self._values else self.frame[key].iat[self.position(row)]

    def cell(self, row: int, column: Column) -> str:
        return column.fmt(self.value(row, column.key))

    def row_of_position(self, position: int) -> int | None:
        hits = np.flatnonzero(self.order == position)
        return int(hits[0]) if len(hits) else None

    # -- text columns -----------------------------------------------------------------------
    def _factor(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(codes, lower-cased uniques) with codes in sorted order of the uniques."""
        if key not in self._factors:
            values = self.frame[key].astype(object).where(self.frame[key].notna(), "")
            codes, uniques = pd.factorize(values.astype(str), sort=True)
            self._factors[key] = (codes.astype(np.int64), np.array([u.lower() for u in uniques], dtype=object))
        return self._factors[key]

    def _text_match(self, query: str, positions: np.ndarray | None = None) -> np.ndarray:
        """Boolean mask over frame positions: any text column contains `query` (any case)."""
        q = query.lower()
        mask = np.zeros(len(self.frame), dtype=bool)
        for c in self.columns:
            if not c.text or c.key not in self.frame:
                continue
            codes, uniques = self._factor(c.key)
            hit = np.fromiter((q in u for u in uniques), dtype=bool, count=len(uniques))
            mask |= hit[codes]
        return mask

    # -- filter and sort ----------------------------------------------------------------------
    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip()
        self._apply()

    def set_sort(self, key: str | None, descending: bool = False) -> None:
        self.sort = SortState(key, descending)
        self._apply()

    def sortable(self) -> list[Column]:
        return [c for c in self.columns if c.key in self.frame]

    def next_sort(self) -> SortState:
        """The next column's sort: numbers start largest-first, text A-Z."""
        cols = self.sortable()
        keys = [c.key for c in cols]
        nxt = keys[(keys.index(self.sort.key) + 1) % len(keys)] if self.sort.key in keys else keys[0]
        return SortState(nxt, descending=not cols[keys.index(nxt)].text)

    def reversed_sort(self) -> SortState:
        return SortState(self.sort.key, not self.sort.descending)

    def apply_sort(self, sort: SortState) -> None:
        self.sort = sort
        self._apply()

    def cycle_sort(self) -> None:
        self.apply_sort(self.next_sort())

    def reverse_sort(self) -> None:
        self.apply_sort(self.reversed_sort())

    def _sort_keys(self, key: str) -> np.ndarray:
        col = next((c for c in self.columns if c.key == key), None)
        values = self._values.get(key, self.frame[key].to_numpy())
        if (col is not None and col.text) or values.dtype == object:
            return self._factor(key)[0]
        values = values.astype(np.float64)
        return np.where(np.isnan(values), np.inf, values)  # blanks last

    def _apply(self) -> None:
        idx = np.arange(len(self.frame), dtype=np.int64)
        if self.filter_text:
            idx = idx[self._text_match(self.filter_text)]
        if self.sort.key is not None and self.sort.key in self.frame:
            keys = self._sort_keys(self.sort.key)[idx]
            if self.sort.descending:
                finite = np.isfinite(keys) if keys.dtype.kind == "f" else np.ones(len(keys), bool)
                keys = np.where(finite, -keys, np.inf) if keys.dtype.kind == "f" else -keys
            idx = idx[np.argsort(keys, kind="stable")]
        elif self.sort.descending:
            idx = idx[::-1]
        self.order = idx

    # -- search ---------------------------------------------------------------------------
    def find(self, query: str, start: int, backwards: bool = False) -> int | None:
        """The next view row after `start` (wrapping) whose text contains `query`."""
        if not query or len(self.order) == 0:
            return None
        rows = np.flatnonzero(self._text_match(query)[self.order])
        if len(rows) == 0:
            return None
        if backwards:
            before = rows[rows < start]
            return int(before[-1] if len(before) else rows[-1])
        after = rows[rows > start]
        return int(after[0] if len(after) else rows[0])

    # -- description and export -------------------------------------------------------------
    def describe(self) -> str:
        parts = []
        if self.sort.key is not None:
            header = next((c.header for c in self.columns if c.key == self.sort.key), self.sort.key)
            parts.append(f"sorted by {header} {'desc' if self.sort.descending else 'asc'}")
        if self.filter_text:
            parts.append(f"filter '{self.filter_text}': {len(self):,} of {self.total_rows:,} rows")
        else:
            parts.append(f"{len(self):,} row{'' if len(self) == 1 else 's'}")
        return " · ".join(parts)

    def export_rows(self) -> tuple[list[str], list[list]]:
        """Every column, every row of the view, exact values, in view order."""
        cols = [c for c in self.columns if c.key in self.frame]
        headers = [c.export_header for c in cols]
        data = [self._values.get(c.key, self.frame[c.key].to_numpy())[self.order] for c in cols]
        rows = [[c.md_fmt(v) for c, v in zip(cols, values)] for values in zip(*data)] if len(self.order) else []
        return headers, rows


@dataclass
class ViewText:
    """What `e` writes: a file stem, header lines, then one or more tables (as Markdown)."""

    stem: str
    header: list[str] = field(default_factory=list)
    body: str = ""
