"""Work on every core this process may use: numpy releases the GIL inside its big array
operations, so two threads each running a pass over 10^7-10^8 values run side by side."""
from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def in_parallel(*calls: Callable[[], Any]) -> list[Any]:
    """Each call's result, in order: the first ones on threads of their own, the last on the
    caller's (one core: one after the other). An exception in any is raised here, after all end.
    Only the last call may wait for another: a signal's exception (SystemExit from the command
    line's handler) lands on the caller's thread, and this joins the others before it goes on."""
    if len(calls) < 2 or cores() < 2:
        return [call() for call in calls]
    with ThreadPoolExecutor(max_workers=len(calls) - 1, thread_name_prefix="nsight-tui-work") as pool:
        futures = [pool.submit(call) for call in calls[:-1]]
        try:
            last = calls[-1]()
        finally:
            done = [f.exception() for f in futures]  # every call ends before anything is raised
        for error in done:
            if error is not None:
                raise error
        return [f.result() for f in futures] + [last]


# How much lower than the process's own priority background work runs (nice steps; 19 is the floor).
BACKGROUND_NICE = 10
LOWEST_NICE = 19


def background_priority() -> None:
    """Lower the calling thread's scheduling priority (Linux: nice is per thread): work that
    runs behind the one in the foreground (read-ahead, the cache's writer) takes the cores the
    foreground leaves, instead of halving its share. Relative to the process's own nice (the
    main thread's, as the user started it: `nice -n 15 nsight-tui ...` puts it at 19), and only
    ever lower: an absolute value would raise a niced process's threads above it (root may).
    Calling it again on the same thread changes nothing. Elsewhere, or when refused, nothing."""
    import threading

    try:
        own = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, own)
        target = min(LOWEST_NICE, os.getpriority(os.PRIO_PROCESS, os.getpid()) + BACKGROUND_NICE)
        if target > current:
            os.setpriority(os.PRIO_PROCESS, own, target)
    except (AttributeError, OSError):
        pass
