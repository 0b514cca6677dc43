"""A kernel's launches (`enter` on a kernel with 10^5 launches at 4.8M kernels took
110-220 ms, most of it testing every op of the table for the name and pandas turning 10^5
repeated names into Arrow strings): the kernel table passes the slice of its index by name,
and the launch table is built from arrays. Its rows are the ones SQL lists over the export:
that demangled name's kernels, each joined to its runtime call by correlation ID in its
process, in order of start (ties: device, stream, correlation ID)."""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from helpers.xz_samples import plain
from conftest import _BACKWARD_CALLS, SAMPLE, SAMPLES
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.tui.session import Session
from nsight_tui.tui.viewmodels import kernels

SHARED_THREADS = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "small_ctx128_threads.sqlite"

# the launch table's columns, in the order of the SQL below
FIELDS = ("start", "duration", "device", "stream", "corr", "api_name", "api_start", "overhead_ns", "queue_ns", "tid")


def _launches_sql(path: Path, name: str, backward: bool = False) -> list[tuple]:
    """The launches of kernel `name` (every one, or those launched inside step_N/backward)."""
    hits = ("JOIN hit h ON h.corr = k.correlationId AND (h.tid >> 24) = (k.globalPid >> 24)" if backward else "")
    query = (_BACKWARD_CALLS if backward else "") + f"""
        SELECT k.start, k.end - k.start, k.deviceId, k.streamId, k.correlationId, a.value, c.start,
               c.end - c.start, k.start - c.start, c.globalTid & 16777215
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName {hits}
        LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME c ON c.correlationId = k.correlationId
             AND (c.globalTid >> 24) = (k.globalPid >> 24)
        LEFT JOIN StringIds a ON a.id = c.nameId
        WHERE s.value = :name ORDER BY k.start, k.deviceId, k.streamId, k.correlationId"""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute(query, {"name": name, "process": 1}).fetchall()
    finally:
        con.close()
    # nsys shows an API call without its `_vNNNN` version tag
    return [r[:5] + (re.sub(r"_v....$", "", r[5]) if r[5] else "",) + r[6:] for r in rows]


def _names_by_launches(path: Path) -> list[tuple[str, int]]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT s.value, count(*) AS n FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                           "ON s.id = k.demangledName GROUP BY s.value ORDER BY n DESC, s.value").fetchall()
    finally:
        con.close()


def _rows(table) -> list[tuple]:
    """The table's rows in view order, as the SQL above writes them (no call: None)."""
    out = []
    for row in range(len(table)):
        values = [table.value(row, key) for key in FIELDS]
        linked = not (isinstance(values[7], float) and np.isnan(values[7]))
        out.append(tuple(
            (None if not linked and key in ("api_start", "overhead_ns", "queue_ns", "tid") else
             "" if key == "api_name" and not linked else
             value if isinstance(value, str) else int(value))
            for key, value in zip(FIELDS, values)))
    return out


def _session(path: Path) -> Session:
    return Session(path, load_trace(path), "process", 0.0)


@pytest.mark.parametrize("path", [SAMPLE, plain(SAMPLES / "small_ctx128_ddp2.sqlite.xz"), SHARED_THREADS],
                         ids=lambda p: p.stem)
def test_launches_of_a_kernel_in_the_whole_trace_are_sqls(path: Path):
    """Every kernel's table (`2`): the name with the most launches, one from the middle and
    the one with the fewest, each from the index's slice; ddp2's two processes reuse
    correlation IDs (the join is per process)."""
    if not path.exists():
        pytest.skip(f"{path.name} not here")
    session = _session(path)
    model = session.model
    view = session.trace_kernels()
    assert "by_name" in view.index
    ranked = _names_by_launches(path)
    for name, count in (ranked[0], ranked[len(ranked) // 2], ranked[-1]):
        named = view.positions_named(model, name)
        assert len(named) == count
        table = session.launches(named, name)
        assert _rows(table) == _launches_sql(path, name), name
        assert set(table.frame["name"]) == {name}


def test_launches_of_a_kernel_with_many_launches(big_trace: Path):
    """x55 of the sample (scale_trace): the busiest kernel's 10^4 launches, in order."""
    session = _session(big_trace)
    view = session.trace_kernels()
    name, count = _names_by_launches(big_trace)[0]
    assert count >= 10_000
    table = session.launches(view.positions_named(session.model, name), name)
    assert len(table) == count
    assert _rows(table) == _launches_sql(big_trace, name)


def test_launches_of_a_kernel_in_a_range_are_sqls():
    """A range's kernel table (step_N/backward): its kernels' launches are those whose call
    lies in a steady-state backward (SQL of the process view), and the unindexed path (every
    op of the table tested for the name) gives the same table."""
    session = _session(SAMPLE)
    model = session.model
    node = next(n for g in model.aggregated_groups for root in g.roots for n in _walk(root)
                if n.path[-2:] == ("step_N", "backward"))
    view = session.range_kernels(node)
    names = view.summary["name"].tolist()
    for name in (names[0], names[-1]):
        table = session.launches(view.positions_named(model, name), name)
        want = _launches_sql(SAMPLE, name, backward=True)
        assert len(want) > 0 and _rows(table) == want, name
        scan = session.launches(view.positions, name)
        assert _rows(scan) == want
        assert np.array_equal(scan.frame["op"].to_numpy(), table.frame["op"].to_numpy())


def test_launch_rows_of_every_op_are_in_launch_order():
    """No name: every op of the scope (kernels, memcpys, memsets), in the order SQL gives."""
    model = range_model(load_trace(SAMPLE), "process")
    frame = model.launches(model.scope_op_positions())
    con = sqlite3.connect(f"file:{SAMPLE}?mode=ro", uri=True)
    try:
        want = con.execute("""SELECT start, deviceId, streamId, correlationId FROM (
                SELECT start, deviceId, streamId, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL
                SELECT start, deviceId, streamId, correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL
                SELECT start, deviceId, streamId, correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET)
            ORDER BY 1, 2, 3, 4""").fetchall()
    finally:
        con.close()
    got = list(zip(*(frame[c].astype(int).tolist() for c in ("start", "device", "stream", "corr"))))
    assert got == want


def _walk(node):
    yield node
    for child in node.children:
        yield from _walk(child)


def test_kernel_rows_name_their_own_launches():
    """The index slice is the ops of that name only, among the table's own ops."""
    model = range_model(load_trace(SAMPLE), "process")
    view = kernels.trace_kernels(model)
    codes = model.trace.ops["name"].to_numpy()
    for name in view.summary["name"]:
        named = view.positions_named(model, name)
        assert {model.trace.op_names[c] for c in codes[named]} == {name}
