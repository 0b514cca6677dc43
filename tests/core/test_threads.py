"""read.threads (work on every core) and the read-ahead's foreground: plain facts checked
against what the operating system and the threads themselves report."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from conftest import SAMPLES
from nsight_tui.parsers.read import columns, threads
from nsight_tui.parsers.read.load import TraceLoader


def test_in_parallel_gives_each_result_in_order():
    seen = []
    got = threads.in_parallel(lambda: seen.append(threading.current_thread().name) or 1,
                              lambda: seen.append(threading.current_thread().name) or 2)
    assert got == [1, 2]
    if threads.cores() > 1:  # the first call on a thread of its own, the last on the caller's
        assert seen.count(threading.current_thread().name) == 1


def test_in_parallel_raises_once_every_call_ended():
    ended = threading.Event()

    def slow_ok():
        ended.set()

    def fails():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        threads.in_parallel(slow_ok, fails)
    assert ended.is_set()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_background_priority_is_the_threads_own():
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    got = {}

    def worker():
        threads.background_priority()
        got["nice"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert got["nice"] == min(threads.LOWEST_NICE, mine + threads.BACKGROUND_NICE)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine


NICED = """
import os, threading
from nsight_tui.parsers.read import threads
got = []
def worker():
    threads.background_priority()
    got.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
    threads.background_priority()  # a pool thread may be handed the initializer's work again
    got.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
t = threading.Thread(target=worker)
t.start()
t.join()
print(os.getpriority(os.PRIO_PROCESS, 0), *got)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
@pytest.mark.parametrize("niceness", [5, 15])
def test_background_priority_only_ever_lowers_a_niced_process(niceness):
    """Under `nice -n 15` (a long job on a shared box) the threads go below 15, never back up to
    an absolute 10; the main thread keeps what the user gave it; a second call lowers no further."""
    start = os.getpriority(os.PRIO_PROCESS, 0)
    out = subprocess.run(["nice", "-n", str(niceness), sys.executable, "-c", NICED], capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    main, first, again = map(int, out)
    assert main == min(threads.LOWEST_NICE, start + niceness)
    assert first == again == min(threads.LOWEST_NICE, main + threads.BACKGROUND_NICE)
    assert first >= main


@pytest.mark.skipif(not columns._has_adbc(), reason="adbc-driver-sqlite / pyarrow not installed")
def test_foreground_leaves_one_part_fewer_to_the_read_ahead(monkeypatch):
    """While the caller's work runs in `foreground()`, the read-ahead reads one part fewer at
    once (here: one, of two); the load then completes as usual."""
    monkeypatch.setattr(columns, "PART_ROWS", 200)
    monkeypatch.setattr(columns, "READ_AHEAD_THREADS", 2)
    monkeypatch.setattr(columns, "MAX_READ_THREADS", 2)
    lock = threading.Lock()
    state = {"active": 0, "most": 0, "done": 0, "fg": False, "most_fg": 0}
    enough = threading.Event()
    real = columns._arrow

    def spy(con, sql):
        if "rowid >" not in sql:
            yield from real(con, sql)
            return
        with lock:
            state["active"] += 1
            if state["fg"]:
                state["most_fg"] = max(state["most_fg"], state["active"])
        try:
            yield from real(con, sql)
        finally:
            with lock:
                state["active"] -= 1
                state["done"] += 1
                if state["done"] >= 4:
                    enough.set()

    monkeypatch.setattr(columns, "_arrow", spy)
    loader = TraceLoader(SAMPLES / "small_ctx128.sqlite", cache=False)
    with loader.foreground():
        state["fg"] = True
        loader.ranges_only()
        assert enough.wait(60), "the read ahead made no progress while the caller worked"
        state["fg"] = False
    trace = loader.finish()
    assert state["most_fg"] == 1
    assert len(trace.ops) > 0
