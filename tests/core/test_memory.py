"""GPU memory on the committed captures of sample_traces/memory (devruns/gpu_memory.sh,
an H100): nsys's memory events against a running sum written here in SQL, torch's own figures in
the step marks, and the run that ran out of memory against its failed cudaMalloc found by SQL."""
from __future__ import annotations

import json
import shutil
import sqlite3
import statistics

import pytest

from conftest import SAMPLES

from nsight_tui.parsers.analyses.memory import memory_analysis
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.load import load_trace

MEMORY = SAMPLES / "memory"
TRAINED = ("small_ctx512_b8", "medium_ctx512")
OOM = "xl_ctx1024_b16.oom"


@pytest.fixture(scope="module")
def analysed(async_trace):
    done = {}

    def get(name):
        if name not in done:
            path = async_trace(MEMORY / f"{name}.sqlite.xz")
            done[name] = (path, memory_analysis(range_model(load_trace(path))))
        return done[name]

    return get


def running_sum(db, where: str = "1") -> list[tuple[int, int]]:
    """(start, bytes held after the event), every event in time order: + allocations, - frees."""
    return db.execute(f"""
        SELECT start, SUM(CASE memoryOperationType WHEN 0 THEN bytes ELSE -bytes END)
               OVER (ORDER BY start, rowid ROWS UNBOUNDED PRECEDING)
        FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE {where} ORDER BY start, rowid""").fetchall()


def main_path_at(db, t: int) -> str:
    """The NVTX push/pop ranges open at t on the thread that holds the step ranges, outermost first."""
    gtid = db.execute("""SELECT n.globalTid FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
                         WHERE s.value LIKE 'warmup_%' OR s.value LIKE 'step_%' LIMIT 1""").fetchone()[0]
    rows = db.execute("""SELECT s.value FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
                         WHERE n.eventType = 59 AND n.globalTid = ? AND n.start <= ? AND n.end >= ?
                         ORDER BY n.start, n.end DESC""", (gtid, t, t)).fetchall()
    return "/".join(r[0] for r in rows)


def step_marks(db) -> list[dict]:
    prefix = conventions.mark_prefix(conventions.STEP)
    texts = db.execute("""SELECT s.value FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
                          WHERE n.eventType = 34 AND s.value LIKE ? ORDER BY n.start""", (prefix + "%",)).fetchall()
    return [json.loads(t[0][len(prefix):]) for t in texts]


@pytest.mark.parametrize("name", [*TRAINED, OOM])
def test_in_use_peak_and_when_equal_a_running_sum(analysed, name):
    path, report = analysed(name)
    db = sqlite3.connect(path)
    held = running_sum(db)
    peak = max(b for _, b in held)
    first_at_peak = next(t for t, b in held if b == peak)
    assert report.has_events and report.peak_bytes == peak and report.peak_t_ns == first_at_peak
    assert report.final_bytes == held[-1][1]
    assert report.allocations == db.execute(
        "SELECT COUNT(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memoryOperationType = 0").fetchone()[0]
    device = max(b for _, b in running_sum(db, "memKind = 2"))  # cudaMalloc'd (ENUM_CUDA_MEM_KIND 2)
    assert report.peak_by_kind["Device"] == device
    assert report.gpu_total_bytes == db.execute("SELECT totalMemory FROM TARGET_INFO_GPU").fetchone()[0]
    assert report.peak_path == main_path_at(db, first_at_peak)


@pytest.mark.parametrize("name", TRAINED)
def test_peak_is_torch_reserved_plus_a_constant_outside_the_allocator(analysed, name):
    """nsys's in-use, at each step mark, is torch's reserved (the caching allocator's segments) plus
    the same bytes every time (what libraries cudaMalloc themselves: cuBLAS's workspaces, and modules'
    static globals): the allocator's part is torch's figure to the byte."""
    path, report = analysed(name)
    db = sqlite3.connect(path)
    marks = step_marks(db)
    times = [r[0] for r in db.execute("""SELECT n.start FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
                                         WHERE n.eventType = 34 AND s.value LIKE 'nsight-tui:step %' ORDER BY n.start""")]
    held = running_sum(db)
    outside = set()
    for mark, t in zip(marks, times):
        if not conventions.STEP_RANGE.match(mark["name"]):
            continue
        in_use = [b for s, b in held if s <= t][-1]
        outside.add(in_use - mark[conventions.STEP_MEMORY]["optimizer"][conventions.RESERVED])
    assert len(outside) == 1
    extra = outside.pop()
    assert 0 < extra < 160e6  # 134.7 MB on the H100 captures
    torch_peak = max(m[conventions.PEAK_RESERVED] for s in marks for k, m in s[conventions.STEP_MEMORY].items()
                     if conventions.PEAK_RESERVED in m)
    assert report.torch_peak_reserved_bytes == torch_peak
    assert report.peak_bytes == torch_peak + extra
    assert abs(report.peak_bytes / torch_peak - 1) < 0.025


@pytest.mark.parametrize("name", TRAINED)
def test_phases_are_torch_marks_over_the_steady_steps(analysed, name):
    path, report = analysed(name)
    marks = [m for m in step_marks(sqlite3.connect(path)) if m["name"].startswith("step_")]
    assert len(marks) == 3 and [p.phase for p in report.phases] == ["forward", "backward", "optimizer"]
    before = {"forward": "start", "backward": "forward", "optimizer": "backward"}
    for p in report.phases:
        kept = [m["memory"][p.phase]["allocated_bytes"] - m["memory"][before[p.phase]]["allocated_bytes"]
                for m in marks]
        assert p.steps == 3 and p.kept_bytes == int(statistics.median(kept))
        assert p.peak_allocated_bytes == int(statistics.median(m["memory"][p.phase]["peak_allocated_bytes"]
                                                               for m in marks))
    forward, backward, optimizer = report.phases
    assert forward.kept_bytes > 0 > backward.kept_bytes  # activations kept for backward, freed by it
    assert optimizer.kept_bytes < 0  # zero_grad(set_to_none) frees the gradients
    # the optimizer's state: AdamW's two moments (fp32, 8 bytes a parameter) and more
    n_params = {"small_ctx512_b8": 100.8e6, "medium_ctx512": 323.3e6}[name]
    assert 8 * n_params * 0.99 < report.optimizer_state_bytes < 8 * n_params * 1.15


def test_range_instances_allocated_freed_and_peak_by_sql(analysed):
    path, report = analysed("small_ctx512_b8")
    db = sqlite3.connect(path)
    held = running_sum(db)
    rows = {r.path: r for r in report.steps}
    assert {"warmup_0", "warmup_0/forward", "step_2/optimizer"} <= set(rows)
    for key in ("warmup_0", "warmup_0/forward", "warmup_0/backward", "warmup_1/forward", "step_0/backward"):
        r = rows[key]
        alloc, freed = db.execute("""SELECT COALESCE(SUM(CASE memoryOperationType WHEN 0 THEN bytes END), 0),
                                            COALESCE(SUM(CASE memoryOperationType WHEN 1 THEN bytes END), 0)
                                     FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE start >= ? AND start <= ?""",
                                  (r.start_ns, r.end_ns)).fetchone()
        assert (r.allocated_bytes, r.freed_bytes, r.net_bytes) == (alloc, freed, alloc - freed)
        inside = [b for s, b in held if r.start_ns <= s <= r.end_ns]
        before = [b for s, b in held if s < r.start_ns]
        assert r.peak_bytes == max([*inside, before[-1] if before else 0])
    assert rows["warmup_0/forward"].allocated_bytes > 3e9  # the first forward grows the segments
    assert rows["step_2"].allocated_bytes == 0  # steady state: the allocator reuses its segments


def test_out_of_memory_failed_cudamalloc_and_range_by_sql(analysed):
    path, report = analysed(OOM)
    db = sqlite3.connect(path)
    start, gtid, ret = db.execute("""SELECT r.start, r.globalTid, r.returnValue FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                                     JOIN StringIds s ON s.id = r.nameId
                                     WHERE s.value LIKE 'cudaMalloc%' AND r.returnValue = 2
                                     ORDER BY r.start LIMIT 1""").fetchone()
    oom = report.out_of_memory
    assert oom is not None and (oom.t_ns, oom.return_value, oom.call) == (start, 2, "cudaMalloc_v3020")
    assert oom.failed_calls == db.execute("""SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
        JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaMalloc%' AND r.returnValue = 2""").fetchone()[0]
    record = json.loads((MEMORY / f"{OOM}.json").read_text())
    # the range the workload knew was open, the one SQL finds around the failed call, and the analysis's
    assert oom.path == main_path_at(db, start) == record["range"] == oom.workload_path
    assert oom.path == "warmup_0/forward/scaled_dot_product_attention/computing_attention_scores"
    in_use = [b for s, b in running_sum(db) if s <= start][-1]
    total = db.execute("SELECT totalMemory FROM TARGET_INFO_GPU").fetchone()[0]
    assert oom.in_use_bytes == in_use and oom.total_memory_bytes == total
    assert in_use < total < in_use + 1.56 * 2**30  # PyTorch: "Tried to allocate 1.56 GiB"
    assert oom.message.startswith("CUDA out of memory. Tried to allocate 1.56 GiB")


def test_report_json_and_markdown_carry_memory(async_trace, capsys):
    from nsight_tui.cli import main

    path = async_trace(MEMORY / f"{OOM}.sqlite.xz")
    assert main(["report", str(path), "-f", "json"]) == 0
    memory = json.loads(capsys.readouterr().out)["memory"]
    assert memory["peak_bytes"] > 0 and memory["peak_path"].endswith("computing_attention_scores")
    assert memory["out_of_memory"]["path"].endswith("computing_attention_scores")
    assert main(["report", str(path)]) == 0
    text = capsys.readouterr().out
    assert "## GPU memory" in text and "**Out of memory**" in text and "cudaErrorMemoryAllocation" in text
    assert "| warmup_0/forward |" in text.split("### Where device memory was taken (nsys)")[1]


def test_trace_without_memory_events_reads_nothing_at_load():
    trace = load_trace(SAMPLES / "small_ctx128.sqlite")
    assert "gpu_memory" not in trace.__dict__  # read on first use only
    report = memory_analysis(range_model(trace))
    assert not report.has_events and report.peak_bytes is None and report.out_of_memory is None
    assert report.phases == []  # captured before the step marks carried memory


@pytest.mark.parametrize("with_range", [True, False])
def test_sweep_oom_cell_says_where(tmp_path, async_trace, with_range):
    from nsight_tui.parsers.analyses.sweep import discover
    from nsight_tui.render.sweep import _cell

    record = json.loads((MEMORY / f"{OOM}.json").read_text())
    if not with_range:  # an older record: where comes from the export beside it
        record.pop("range")
    (tmp_path / f"{OOM}.json").write_text(json.dumps(record))
    shutil.copy(async_trace(MEMORY / f"{OOM}.sqlite.xz"), tmp_path / f"{OOM}.sqlite")
    runs = discover(tmp_path)
    assert [(r.path.name, r.status) for r in runs] == [(f"{OOM}.json", "oom")]  # the export is no run
    assert runs[0].oom_range == "warmup_0/forward/scaled_dot_product_attention/computing_attention_scores"
    assert _cell(runs[0], lambda a: "x", {}) == "OOM (computing_attention_scores)"


def test_sweep_report_has_the_memory_table_and_where_each_run_ran_out(tmp_path, async_trace, capsys):
    from nsight_tui.cli import main

    for name in ("small_ctx512_b8", OOM):
        shutil.copy(async_trace(MEMORY / f"{name}.sqlite.xz"), tmp_path / f"{name}.sqlite")
    shutil.copy(MEMORY / f"{OOM}.json", tmp_path)
    assert main(["report", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    small = memory_analysis(range_model(load_trace(tmp_path / "small_ctx512_b8.sqlite")))
    from nsight_tui.render.numbers import bytes_

    table = text.split("### GPU memory peak: in use / torch reserved")[1].split("###")[0]
    assert f"| small \\[b8\\] | {bytes_(small.peak_bytes)} / {bytes_(small.torch_peak_reserved_bytes)} |" in table
    assert "| xl \\[b16\\] |  | OOM (computing_attention_scores) |" in table
    assert ("| xl_ctx1024_b16.oom.json | warmup_0/forward/scaled_dot_product_attention/computing_attention_scores | "
            "CUDA out of memory. Tried to allocate 1.56 GiB |") in text


def test_timeline_memory_lane_levels_are_the_running_sums_max_per_cell(analysed):
    """The timeline's memory lane: a cell's height is the most held during it (SQL running sum)
    over the peak; nothing before the first event."""
    import numpy as np

    from nsight_tui.parsers.analyses.idle import idle_analysis
    from nsight_tui.parsers.analyses.timeline import MEMORY, cell_edges, timeline

    path, report = analysed("small_ctx512_b8")
    trace = load_trace(path)
    tl = timeline(trace, range_model(trace), idle_analysis(trace))
    lane = tl.lanes[tl.lane_index("memory:0")]
    assert lane.kind == MEMORY and lane.title == "GPU0 mem" and lane.peak == report.peak_bytes
    held = running_sum(sqlite3.connect(path))
    times = np.array([t for t, _ in held])
    values = np.array([b for _, b in held])
    for t0, t1, n in ((tl.t_min, tl.t_max, 80), (report.peak_t_ns - 50_000_000, report.peak_t_ns + 50_000_000, 37)):
        cells = lane.cells(t0, t1, n)
        edges = cell_edges(t0, t1, n)
        for k in range(n):
            before = values[times < edges[k]]  # hold at the cell's start, then every event inside
            inside = values[(times >= edges[k]) & (times < edges[k + 1])]
            levels = [*([before[-1]] if len(before) else []), *inside.tolist()]
            want = max(levels) / report.peak_bytes if levels else 0.0
            assert cells.fullness[k] == pytest.approx(want), k
            assert (cells.dominant[k] == 0) == (want > 0)
    item = tl.item(tl.lane_index("memory:0"), report.peak_t_ns, report.peak_t_ns + 1)
    assert item is not None and f"{report.peak_bytes:,} B" in item.name


def test_memory_events_with_values_nsys_never_writes_are_left_out(tmp_path, async_trace, capsys):
    """Text or NULL where nsys writes integers in the memory events (and a failed call's return
    value): those rows are left out of the sums, the rest is read; report still succeeds."""
    from conftest import mutated_copy

    from nsight_tui.cli import main

    src = async_trace(MEMORY / "small_ctx512_b8.sqlite.xz")
    bad = mutated_copy(tmp_path, "bad_memory",
                       "UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET bytes = 'lots' WHERE rowid = 30",
                       "UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET start = NULL WHERE rowid = 31",
                       "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET returnValue = 'x' WHERE rowid = 5",
                       src=src, drop_not_null=True)
    db = sqlite3.connect(bad)
    good = running_sum(db, "rowid NOT IN (30, 31)")
    report = memory_analysis(range_model(load_trace(bad)))
    assert report.allocations == len(good) and report.peak_bytes == max(b for _, b in good)
    assert report.out_of_memory is None
    assert main(["report", str(bad), "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["memory"]["peak_bytes"] == report.peak_bytes


def test_report_json_lists_every_iteration_and_phase_instance(analysed, async_trace, capsys):
    from nsight_tui.cli import main

    path, report = analysed("small_ctx512_b8")
    assert main(["report", str(path), "-f", "json"]) == 0
    instances = json.loads(capsys.readouterr().out)["memory"]["instances"]
    assert [i["path"] for i in instances] == [r.path for r in report.steps]
    assert [p for p in (i["path"] for i in instances) if "/" not in p] == [
        "warmup_0", "warmup_1", "step_0", "step_1", "step_2"]
    grown = {i["path"]: i["allocated_bytes"] for i in instances}
    # what the iterations took from the driver adds up to what was held at the end less before them
    assert sum(v for k, v in grown.items() if "/" not in k) == report.final_bytes - instances[0]["in_use_start_bytes"]


def test_several_gpus_figures_are_of_the_one_that_held_the_most(tmp_path, async_trace):
    from conftest import mutated_copy

    src = async_trace(MEMORY / "small_ctx512_b8.sqlite.xz")
    two = mutated_copy(tmp_path, "two_gpus", "UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET deviceId = 1 WHERE rowid % 3 = 0",
                       src=src)
    db = sqlite3.connect(two)
    peaks = {d: max(b for _, b in running_sum(db, f"deviceId = {d}")) for d in (0, 1)}
    report = memory_analysis(range_model(load_trace(two)))
    assert report.device_peaks == peaks and report.device == max(peaks, key=peaks.get)
    assert report.peak_bytes == peaks[report.device]
