"""Whose device memory it is (memory_owners): on every committed capture with memory events,
the caching allocator's segments told apart by the events alone equal torch's max_memory_reserved
(recorded by the workload in its step marks, read here by SQL and json; for the run that ran out,
PyTorch's own OOM message), within the issue's 1% and in fact to the byte; what is not torch's is
listed apart and matches SQL that classifies each cudaMalloc by the call before it on its thread."""
from __future__ import annotations

import json
import re
import sqlite3

import pytest

from conftest import SAMPLES

from nsight_tui.parsers.analyses.memory import memory_analysis
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.read.load import load_trace

CAPTURES = sorted([*(SAMPLES / "memory").glob("*.sqlite.xz"), *(SAMPLES / "memsweep").glob("*.sqlite.xz")])
STEP_MARK = "nsight-tui:step "

# each Device allocation with the CUDA runtime call just before its own on the same thread
CLASSIFIED = """
    WITH calls AS (
        SELECT r.correlationId AS corr, r.globalTid AS tid,
               LAG(s.value) OVER (PARTITION BY r.globalTid ORDER BY r.start) AS prev
        FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId)
    SELECT e.bytes, c.prev LIKE 'cudaStreamIsCapturing%', c.tid
    FROM CUDA_GPU_MEMORY_USAGE_EVENTS e JOIN calls c ON c.corr = e.correlationId
    WHERE e.memKind = 2 AND e.memoryOperationType = 0"""


def torch_max_reserved_from_marks(db) -> int | None:
    """The most torch.cuda.max_memory_reserved() the workload recorded at any phase's end (step marks)."""
    texts = db.execute("""SELECT s.value FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
                          WHERE n.eventType = 34 AND s.value LIKE 'nsight-tui:step %'""").fetchall()
    peaks = [phase["peak_reserved_bytes"] for (text,) in texts
             for phase in json.loads(text[len(STEP_MARK):]).get("memory", {}).values()
             if isinstance(phase, dict) and "peak_reserved_bytes" in phase]
    return max(peaks) if peaks else None


def torch_reserved_from_oom_message(record: dict) -> float:
    """PyTorch's OOM message: "X GiB is allocated by PyTorch, and Y MiB is reserved by PyTorch but unallocated"."""
    m = re.search(r"([\d.]+) GiB is allocated by PyTorch, and ([\d.]+) (GiB|MiB) is reserved by PyTorch but unallocated",
                  record["message"])
    assert m, record["message"]
    return float(m[1]) * 2**30 + float(m[2]) * (2**30 if m[3] == "GiB" else 2**20)


@pytest.fixture(scope="module")
def analysed(async_trace):
    done = {}

    def get(path):
        if path not in done:
            local = async_trace(path)
            done[path] = (local, memory_analysis(range_model(load_trace(local))))
        return done[path]

    return get


def test_there_are_captures_to_check():
    assert len(CAPTURES) >= 3


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.name for p in CAPTURES])
def test_allocator_segments_equal_torch_max_reserved(analysed, capture):
    local, report = analysed(capture)
    db = sqlite3.connect(f"file:{local}?mode=ro", uri=True)
    assert db.execute("SELECT COUNT(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memoryOperationType = 1").fetchone()[0] == 0
    rows = db.execute(CLASSIFIED).fetchall()
    segments = sum(b for b, torch_s, _ in rows if torch_s)
    assert report.allocator_peak_bytes == segments  # no frees: the peak is the sum
    torch_reserved = torch_max_reserved_from_marks(db)
    if torch_reserved is None:  # the run that ran out before its first step mark: PyTorch's message says it
        record = json.loads(capture.with_name(capture.name.replace(".sqlite.xz", ".json")).read_text())
        torch_reserved = torch_reserved_from_oom_message(record)
        assert abs(report.allocator_peak_bytes / torch_reserved - 1) < 0.001  # the message's 2 decimals
    else:
        assert report.torch_peak_reserved_bytes == torch_reserved
        assert abs(report.allocator_peak_bytes / torch_reserved - 1) < 0.01  # the 1%
        assert report.allocator_peak_bytes == torch_reserved  # in fact to the byte
    # all device memory (every kind) is more than torch's: the rest is listed apart
    assert report.peak_bytes > report.allocator_peak_bytes


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.name for p in CAPTURES])
def test_what_is_not_torch_is_listed_apart(analysed, capture):
    local, report = analysed(capture)
    db = sqlite3.connect(f"file:{local}?mode=ro", uri=True)
    rows = db.execute(CLASSIFIED).fetchall()
    library = [(b, tid) for b, torch_s, tid in rows if not torch_s]
    lib = report.owners["library"]
    assert (lib.allocations, lib.bytes, lib.held_at_end_bytes) == (len(library), sum(b for b, _ in library),
                                                                   sum(b for b, _ in library))
    # cuBLAS's handle setup: 1 KiB, 128 KiB and 64 MiB on each thread that ran a GEMM before the capture ended
    threads = {tid for _, tid in library}
    assert sorted(b for b, _ in library) == sorted([1024, 131072, 64 * 2**20] * len(threads))
    assert lib.threads == sorted(t & 0xFFFFFF for t in threads)
    static = db.execute("""SELECT COUNT(*), SUM(bytes) FROM CUDA_GPU_MEMORY_USAGE_EVENTS
                           WHERE memKind = 5 AND memoryOperationType = 0""").fetchone()
    assert (report.owners["static"].allocations, report.owners["static"].bytes) == static
    everything = db.execute("SELECT SUM(bytes) FROM CUDA_GPU_MEMORY_USAGE_EVENTS").fetchone()[0]
    assert report.peak_bytes == everything == report.allocator_peak_bytes + lib.bytes + static[1]
    assert report.beside_allocator_bytes == lib.bytes + static[1]


def test_report_lists_static_apart_and_the_gap_to_torch(async_trace, capsys):
    from nsight_tui.cli import main

    path = async_trace(SAMPLES / "memory" / "medium_ctx512.sqlite.xz")
    assert main(["report", str(path)]) == 0
    text = capsys.readouterr().out.split("## GPU memory")[1]
    assert "| not torch's allocator: libraries' own cudaMalloc (cuBLAS handles) | 128.25 MiB in 6 allocations; " \
           "sizes 64.00 MiB ×2, 128.00 KiB ×2, 1.00 KiB ×2 |" in text
    assert re.search(r"\| not torch's allocator: Device Static \(modules' __device__ globals\) \| [\d.]+ KiB in "
                     r"[\d,]+ allocations \|", text)
    assert "| allocator's segments (nsys) − torch max reserved (step marks) | 0 B (0.00%) |" in text
    assert main(["report", str(path), "-f", "json"]) == 0
    memory = json.loads(capsys.readouterr().out)["memory"]
    assert memory["allocator_peak_bytes"] == memory["torch_peak_reserved_bytes"]
    assert set(memory["owners"]) == {"allocator", "library", "static"} and "allocator_peak_bytes" in memory["definitions"]


def test_without_the_allocators_check_nothing_is_called_torchs(tmp_path, async_trace):
    """A trace whose runtime calls are gone cannot tell the allocator's segments: no figure, not a wrong one."""
    import shutil

    path = tmp_path / "no_api.sqlite"
    shutil.copyfile(async_trace(SAMPLES / "memory" / "small_ctx512_b8.sqlite.xz"), path)
    db = sqlite3.connect(path)
    db.execute("""DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN
                  (SELECT id FROM StringIds WHERE value LIKE 'cudaStreamIsCapturing%')""")
    db.commit()
    db.close()
    report = memory_analysis(range_model(load_trace(path)))
    assert report.allocator_peak_bytes is None and report.beside_allocator_bytes is None
    assert report.owners["library"].bytes == report.peak_by_kind["Device"]
