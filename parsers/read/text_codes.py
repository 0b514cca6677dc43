"""A text column factorized once: integer codes into its distinct values.

pandas 3 keeps text columns as Arrow strings: every `to_numpy()` builds a new Python string per
row and every `factorize` hashes every row's characters again. A range name repeated over many
ranges (or one 10 MB name) then costs its length on each of the dozens of passes a report makes
over the names. `Coded` does that pass once; its users test each distinct text once and index
the answers by code, and read the column as objects from one shared string per distinct text.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain

import numpy as np
import pandas as pd


@dataclass(frozen=True, eq=False)
class Coded:
    """`values[codes[i]]` is row i's text; code -1: a missing text (None/NaN)."""

    codes: np.ndarray  # intp, one per row, first-appearance order of the distinct texts
    values: np.ndarray  # object array of the distinct texts (Python str)
    _kept: dict = field(default_factory=dict, init=False, repr=False)  # per_value's answers by key

    @classmethod
    def of(cls, column: pd.Series | np.ndarray) -> Coded:
        # the Series as it is: Arrow factorizes its strings in C (an object array first is 10x slower)
        codes, uniques = pd.factorize(column)
        values = uniques.to_numpy() if hasattr(uniques, "to_numpy") else np.asarray(uniques, dtype=object)
        return cls(np.asarray(codes), np.asarray(values, dtype=object))

    @classmethod
    def from_codes(cls, codes: np.ndarray, texts: list) -> Coded:
        """The same as `of` for the column `texts[codes]` (codes >= 0, numbered in any order, texts
        possibly repeated), without building it: each text hashed once."""
        merged, distinct = pd.factorize(np.array(list(texts) + [""], dtype=object)[:-1])
        row_codes, order = pd.factorize(np.asarray(merged)[codes])
        return cls(np.asarray(row_codes), np.asarray(distinct, dtype=object)[np.asarray(order)])

    def __len__(self) -> int:
        return len(self.codes)

    def per_value(self, test: Callable, dtype=bool, key=None) -> np.ndarray:
        """`test(text)` per row, asked once per distinct text (`test(None)` for a missing one,
        asked only when one is). With a `key` (hashable, naming the test), the answers are kept
        here and shared by every caller that asks the same test by the same key."""
        if key is not None and key in self._kept:
            return self._kept[key]
        missing = (test(None),) if self.has_missing else (np.zeros(1, dtype=dtype)[0],)
        table = np.fromiter(chain(map(test, self.values.tolist()), missing), dtype=dtype, count=len(self.values) + 1)
        out = table[self.codes]  # code -1 takes the last entry
        if key is not None:
            out.flags.writeable = False
            self._kept[key] = out
        return out

    def kept(self, key, make: Callable[[], object]):
        """`make()` once per `key`, kept here: what a caller derives from the distinct texts."""
        if key not in self._kept:
            self._kept[key] = make()
        return self._kept[key]

    @cached_property
    def has_missing(self) -> bool:
        return bool(len(self.codes)) and bool((self.codes < 0).any())

    @cached_property
    def sorted_ranks(self) -> tuple[np.ndarray, list]:
        """Per row the rank of its text among the distinct texts in sorted order (int64, as
        `pd.factorize(..., sort=True)` numbers them; -1 missing), and the distinct texts in that
        order: grouping and ordering by integers, each distinct text compared, none copied."""
        order = sorted(range(len(self.values)), key=self.values.__getitem__)
        rank = np.empty(len(order) + 1, dtype=np.int64)
        rank[order] = np.arange(len(order), dtype=np.int64)
        rank[-1] = -1
        return rank[self.codes], [self.values[i] for i in order]

    @cached_property
    def objects(self) -> np.ndarray:
        """The column as `Series.to_numpy()` gives it (an object array, NaN where missing), each
        distinct text one shared string: a gather of pointers, not a copy of every row's text."""
        table = np.empty(len(self.values) + 1, dtype=object)
        table[:-1] = self.values
        table[-1] = np.nan
        out = table[self.codes]
        out.flags.writeable = False  # shared by every caller
        return out


def text_column(codes: np.ndarray, texts: list, dtype) -> pd.Series:
    """A text column from its codes (-1: missing): built in Arrow when the column is
    Arrow-backed (10^6 Python strings through pandas' per-value checks took seconds at 24M
    kernels; a long text repeated over many rows is copied in C, not encoded per row), else
    value by value (pyarrow is optional)."""
    if getattr(dtype, "storage", None) == "pyarrow":
        try:
            import pyarrow as pa
            from pandas.arrays import ArrowStringArray
        except ImportError:
            pass
        else:
            missing = codes < 0
            taken = _long_texts(pa, codes, texts) if len(texts) and not missing.any() else None
            if taken is None:
                taken = pa.array(texts, pa.large_string()).take(
                    pa.array(np.where(missing, 0, codes), mask=missing) if len(texts) else pa.nulls(len(codes),
                                                                                                   pa.int32()))
            return pd.Series(ArrowStringArray(pa.chunked_array([taken]), dtype=dtype), copy=False)
    table = np.array(list(texts) + [None], dtype=object)
    return pd.Series(table[codes], dtype=dtype)


LONG_TEXTS = 1024  # bytes per row on average, from which `_long_texts` builds the column


def _long_texts(pa, codes: np.ndarray, texts: list):
    """The column as one Arrow array, its characters laid out in a buffer of their exact size,
    one copy each: Arrow's take grows its buffer as it goes, which for 60 copies of a 10 MB name
    cost seconds of page faults. None where the texts are short (take is faster there)."""
    chars = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))  # bytes >= characters
    if int(chars[codes].sum()) < LONG_TEXTS * len(codes):
        return None
    encoded = [t.encode() for t in texts]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))[codes]
    offsets = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = b"".join([encoded[c] for c in codes.tolist()])
    return pa.LargeStringArray.from_buffers(len(codes), pa.py_buffer(offsets), pa.py_buffer(data))


def inferred_text_dtype():
    """The dtype pandas gives a column of Python strings (Arrow-backed `str` in pandas 3, object before)."""
    return pd.Series(np.array([""], dtype=object)).dtype

