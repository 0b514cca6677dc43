"""Work done in blocks to bound the peak memory (the range model's per-range figures, the
attribution's enclosing test) gives exactly what one block gives: blocks of a few pairs,
cut anywhere, against the whole (the whole is what the nsys oracle tests check)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES
from helpers.xz_samples import plain

from nsight_tui.parsers.model import attribution, ranges as model
from nsight_tui.parsers.read.load import load_trace

FIGURES = ("op_count", "kernel_count", "kernel_ns", "op_ns", "proj_ns", "busy_ns", "pair_op", "pair_range",
           "pair_offsets")
TRACES = ["small_ctx128.sqlite", "small_ctx128_ddp2.sqlite.xz", "edge_overlap.sqlite.xz", "small_ctx128_agnvtx.sqlite.xz"]


@pytest.mark.parametrize("name", TRACES)
@pytest.mark.parametrize("mode", ["process", "nsys"])
def test_blocks_change_no_figure(monkeypatch, name, mode):
    whole = model.RangeModel(load_trace(plain(SAMPLES / name)), mode)
    assert len(model._range_blocks(whole.pair_offsets, model.METRIC_BLOCK_PAIRS)) <= 1  # one block
    monkeypatch.setattr(model, "METRIC_BLOCK_PAIRS", 7)
    monkeypatch.setattr(attribution, "BLOCK", 5)
    blocked = model.RangeModel(load_trace(plain(SAMPLES / name)), mode)
    assert len(model._range_blocks(blocked.pair_offsets, 7)) > 1 or whole.pair_offsets[-1] <= 7
    for figure in FIGURES:
        np.testing.assert_array_equal(getattr(blocked, figure), getattr(whole, figure), err_msg=figure)


def test_range_blocks_cover_every_range_once():
    # ranges with 0, 3, 0, 10, 1, 1, 0 pairs
    offsets = np.cumsum([0, 0, 3, 0, 10, 1, 1, 0])
    for size in (1, 2, 3, 4, 11, 100):
        blocks = model._range_blocks(offsets, size)
        assert [lo for lo, _ in blocks][0] == 0 and blocks[-1][1] == 7
        assert all(hi == lo2 for (_, hi), (lo2, _) in zip(blocks, blocks[1:]))  # contiguous, in order
        for lo, hi in blocks:  # its first range's pairs, and at most `size` more
            assert offsets[hi] - offsets[lo] <= size + offsets[lo + 1] - offsets[lo]
    assert model._range_blocks(np.zeros(1, dtype=np.int64), 4) == []


def test_slices_to_pairs_int32_matches_int64():
    lo = np.array([5, 0, 7, 3], dtype=np.int64)
    hi = np.array([8, 0, 9, 3], dtype=np.int64)
    rows, pos = attribution.slices_to_pairs(lo, hi, np.int32)
    assert rows.dtype == np.int32 and pos.dtype == np.int32
    assert rows.tolist() == [0, 0, 0, 2, 2] and pos.tolist() == [5, 6, 7, 7, 8]


def _launches_by_sql(path, pid_column: bool) -> list[tuple[str, int, int]]:
    """(table, op rowid, the launching call's rank in the runtime table or -1), by SQL: the
    first call (by rowid) with the op's correlation ID in the op's process."""
    import sqlite3

    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    present = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    key = "correlationId, globalTid >> 24" if pid_column else "correlationId, 0"
    rows = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if table not in present:
            continue
        op_key = "o.correlationId, o.globalPid >> 24" if pid_column else "o.correlationId, 0"
        rows += con.execute(f"""
            WITH ranked AS (SELECT correlationId, globalTid, ROW_NUMBER() OVER (ORDER BY rowid) - 1 AS rank
                            FROM CUPTI_ACTIVITY_KIND_RUNTIME),
                 first AS (SELECT {key} AS k1, MIN(rank) AS rank FROM ranked
                           WHERE correlationId IS NOT NULL GROUP BY 1, 2)
            SELECT '{table}', o.rowid, COALESCE(f.rank, -1)
            FROM {table} o LEFT JOIN first f ON (f.correlationId, f.k1) = ({op_key})""").fetchall()
    con.close()
    return rows


@pytest.mark.parametrize("name", ["small_ctx128.sqlite", "small_ctx128_ddp2.sqlite.xz", "edge_overlap.sqlite.xz"])
@pytest.mark.parametrize("drop_pid", [False, True], ids=["with_pid", "no_globalPid"])
def test_ops_linked_to_their_launch_as_sql_finds_it(tmp_path, monkeypatch, name, drop_pid):
    import shutil
    import sqlite3

    from nsight_tui.parsers.read import load
    from nsight_tui.parsers.read.ids import KERNEL, MEMCPY, MEMSET

    path = plain(SAMPLES / name)
    if drop_pid:  # a cut-down export: the correlation ID alone decides (one process)
        if name == "small_ctx128_ddp2.sqlite.xz":
            pytest.skip("two processes: without globalPid the IDs are ambiguous")
        path = Path(shutil.copy(path, tmp_path / path.name))
        con = sqlite3.connect(path)
        present = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            if table in present:
                con.execute(f"ALTER TABLE {table} DROP COLUMN globalPid")
        con.commit()
        con.close()
    monkeypatch.setattr(load, "LINK_BLOCK", 3)
    trace = load_trace(path)
    tables = {KERNEL: "CUPTI_ACTIVITY_KIND_KERNEL", MEMCPY: "CUPTI_ACTIVITY_KIND_MEMCPY",
              MEMSET: "CUPTI_ACTIVITY_KIND_MEMSET"}
    got = sorted(zip([tables[k] for k in trace.ops["kind"].tolist()], trace.ops["rowid"].tolist(),
                     trace.ops["api"].tolist()))
    want = sorted(_launches_by_sql(path, not drop_pid))
    assert got == want
    assert (trace.ops["api"].to_numpy() >= 0).sum() > 0


def test_std_in_blocks_is_the_one_pass_formula(monkeypatch):
    from nsight_tui.parsers.read import groupstats

    rng = np.random.default_rng(7)
    counts = rng.integers(0, 40, 300)
    counts[rng.random(300) < 0.2] = 0
    counts[-1] = 3
    gid = np.repeat(np.arange(len(counts)), counts)
    values = np.sort(rng.integers(0, 10**9, len(gid)))
    # the plain formula: sample standard deviation of each group, one pass over all rows
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    avg = np.add.reduceat(values, starts) / np.maximum(counts, 1)
    dev = values - np.repeat(avg, counts)
    ss = np.add.reduceat(dev * dev, starts)
    want = np.where(counts > 1, np.sqrt(ss / np.maximum(counts - 1, 1)), 0.0)
    for block in (1, 7, 50, 10**6):
        monkeypatch.setattr(groupstats, "STD_BLOCK", block)
        np.testing.assert_array_equal(groupstats.group_stats(gid, len(counts), values, presorted=True).std, want)


@pytest.mark.parametrize("name", ["small_ctx128.sqlite", "small_ctx128_ddp2.sqlite.xz"])
def test_nvtx_kern_sum_in_blocks_is_unchanged(monkeypatch, name):
    from nsight_tui.parsers.nsys import kern_groups
    from nsight_tui.parsers.nsys import reports as nsys_reports
    from nsight_tui.parsers.read import groupstats

    whole = nsys_reports.nvtx_kern_sum(load_trace(plain(SAMPLES / name)), "nsys").rows
    monkeypatch.setattr(kern_groups, "BLOCK", 3)  # the pairs' keys made, read back and reused in blocks of 3
    monkeypatch.setattr(groupstats, "STD_BLOCK", 5)
    blocked = nsys_reports.nvtx_kern_sum(load_trace(plain(SAMPLES / name)), "nsys").rows
    assert blocked == whole and len(whole) > 10


@pytest.mark.parametrize("bound", [None, 1, 4, 9, 1000])
def test_batches_read_into_arrays_of_the_bound_equal_the_whole_table(bound):
    """Row bounds too small (grown), exact, or too large (cut); NULLs from a later batch;
    a column that turns to text half-way: as the whole table converted at once."""
    pa = pytest.importorskip("pyarrow")
    from nsight_tui.parsers.read import columns

    batches = [
        pa.record_batch({"a": pa.array([1, 2, 3], pa.int64()), "b": pa.array([7, 8, 9], pa.int64()),
                         "c": pa.array([1, 1, 1], pa.int64())}),
        pa.record_batch({"a": pa.array([4, None], pa.int64()), "b": pa.array([10, 11], pa.int64()),
                         "c": pa.array(["x", None], pa.string())}),
        pa.record_batch({"a": pa.array([5, 6, None, 8], pa.int64()), "b": pa.array([12, 13, 14, 15], pa.int64()),
                         "c": pa.array([2, None, 3, 4], pa.int64())}),
    ]
    names = ["a", "b", "c"]
    got = columns.from_arrow_batches("t", iter(batches), names, bound)
    assert got.n == 9
    np.testing.assert_array_equal(got.values["a"], [1, 2, 3, 4, 0, 5, 6, 0, 8])
    np.testing.assert_array_equal(got.nulls["a"], [0, 0, 0, 0, 1, 0, 0, 1, 0])
    np.testing.assert_array_equal(got.values["b"], np.arange(7, 16))
    assert "b" not in got.nulls and got.is_integer("a") and got.is_integer("b")
    assert got.values["c"].tolist() == [1, 1, 1, "x", None, 2, None, 3, 4]
    empty = columns.from_arrow_batches("t", iter([]), names, bound)
    assert empty.n == 0 and all(len(empty.values[c]) == 0 for c in names)
