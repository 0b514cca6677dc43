"""A kernel table's index by kernel name (a highlight slices it instead of scanning
the table's 10^6 ops on the UI thread): the durations it gives per name are the ones SQL lists,
and the detail lines, kept for the first row or computed on a highlight, are the ones a scan
over every op of the table gives."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from conftest import SAMPLE
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.tui.viewmodels import kernels


def _durations_sql(path: Path, name: str) -> list[int]:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        rows = con.execute("SELECT k.[end] - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                           "ON s.id = k.demangledName WHERE s.value = ? ORDER BY 1", (name,)).fetchall()
    finally:
        con.close()
    return [r[0] for r in rows]


def test_index_by_name_gives_each_kernels_durations_as_sql():
    model = range_model(load_trace(SAMPLE), "process")
    view = kernels.trace_kernels(model)
    assert "by_name" in view.index  # built with the view
    kernel_names = view.summary.loc[view.summary["kind"] == "kernel", "name"] if "kind" in view.summary else \
        view.summary["name"]
    names = list(kernel_names.iloc[:3]) + list(kernel_names.iloc[-2:])
    assert len(set(names)) >= 4
    for name in names:
        pos = view.positions_named(model, name)
        got = kernels.durations(model, pos, name)
        assert got.tolist() == _durations_sql(SAMPLE, name), name
        assert len(pos) == len(got) > 0


def test_details_from_the_index_equal_a_scan_over_every_op():
    """The first row's lines, kept with the view, and another row's, sliced from the index,
    equal the lines computed over all the table's positions (no index)."""
    model = range_model(load_trace(SAMPLE), "process")
    node = max((n for g in model.aggregated_groups for n in g.roots), key=lambda n: n.kernels)
    view = kernels.range_kernels(model, node)
    first = view.summary["name"].iloc[0]
    assert first in view.index["details"]
    for name in (first, view.summary["name"].iloc[1], view.summary["name"].iloc[-1]):
        scan = (kernels.distribution_line(kernels.durations(model, view.positions, name)),
                kernels.occupancy_line(model, view.positions, name))
        assert view.details(model, name) == scan, name
        assert scan[0]  # a distribution line for every kernel of the table
    # the index is per trace: another trace's model (same file) scans instead, same lines
    other = range_model(load_trace(SAMPLE), "process")
    assert np.array_equal(view.positions_named(other, first), np.sort(view.positions_named(model, first)))
