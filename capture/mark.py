"""Mark a user's own training loop the way nsight-tui's GPT-2 workload marks its own.

Two lines give what the tool reads best: `step_N` / `warmup_N` NVTX ranges holding `forward`,
`backward` and `optimizer`, and each iteration's Python-clock time as an `nsight-tui:step` mark
(parsers.read.conventions, the same names and marks as capture.workload):

    from nsight_tui.capture import mark
    mark.hooks(model, optimizer, warmup=2)        # module and optimizer hooks, nothing else to edit

or, around the loop's own lines:

    for i, batch in enumerate(loader):
        with mark.step(i, warmup=2):
            with mark.phase("forward"): loss = model(batch)
            with mark.phase("backward"): loss.backward()
            with mark.phase("optimizer"): optimizer.step(); optimizer.zero_grad()

Where NVTX ranges are not wanted (an unannotated trace whose structure the tool infers),
`nvtx=False` keeps only the Python clock: the records go to the file named by
$NSIGHT_TUI_STEPS_FILE (`nsight-tui capture -- CMD` sets it and keeps the file beside the
export as STEM.steps.json, where the tool reads step times of a trace without marks), or to
`mark.save(PATH)`.

Each step ends with a device synchronise *after* its range (sync=True, the default), as the
workload's `--no-sync` mode does: the range is the CPU's span, the recorded time the GPU's pace.
With sync=False the recorded time is the CPU's alone (the loop may run ahead of the GPU).

Torch and nvtx are imported on first use only: importing this module costs nothing.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from nsight_tui.parsers.read import conventions

STEPS_FILE_ENV = "NSIGHT_TUI_STEPS_FILE"  # where the records go at exit (capture -- CMD sets it)
PHASES = conventions.PHASES


def iteration_name(index: int, warmup: int = 0) -> str:
    """`warmup_<index>` for the first `warmup` iterations, then `step_<index - warmup>`."""
    if index < 0 or warmup < 0:
        raise ValueError(f"a step index and warm-up count are at least 0, not {index} and {warmup}")
    return (f"{conventions.WARMUP_PREFIX}{index}" if index < warmup
            else f"{conventions.STEP_PREFIX}{index - warmup}")


class _Nvtx:
    """The `nvtx` package when installed, else PyTorch's own NVTX bindings, else nothing."""

    def __init__(self) -> None:
        self.push = self.pop = self.mark = None
        try:
            import nvtx

            self.push = lambda name: nvtx.push_range(message=name)
            self.pop = nvtx.pop_range
            self.mark = lambda text: nvtx.mark(message=text)
            return
        except ImportError:
            pass
        try:
            import torch

            if torch.cuda.is_available():
                n = torch.cuda.nvtx
                self.push, self.pop, self.mark = n.range_push, n.range_pop, n.mark
        except ImportError:
            pass

    @property
    def available(self) -> bool:
        return self.push is not None


@dataclass
class _OpenStep:
    name: str
    start: float
    sync: bool
    ranges: bool
    phases: dict[str, float] = field(default_factory=dict)
    open_phase: tuple[str, float] | None = None


class StepClock:
    """The iterations marked so far in this process (one per process: `mark.clock`)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []  # the iterations that finished
        self.failed: list[dict[str, Any]] = []  # the one that did not (out of memory, an error)
        self.config: dict[str, Any] = {}
        self._open: _OpenStep | None = None
        self._nvtx: _Nvtx | None = None
        self._lock = threading.Lock()
        self._saved_at_exit = False
        self._failed_path: str | None = None

    # -- NVTX -------------------------------------------------------------------------------
    def _nv(self) -> _Nvtx:
        if self._nvtx is None:
            self._nvtx = _Nvtx()
        return self._nvtx

    def _push(self, name: str, ranges: bool) -> None:
        if ranges and self._nv().available:
            self._nv().push(name)  # type: ignore[misc]

    def _pop(self, ranges: bool) -> None:
        if ranges and self._nv().available:
            self._nv().pop()  # type: ignore[misc]

    def _mark(self, kind: str, value: object, ranges: bool) -> None:
        if ranges and self._nv().available:
            self._nv().mark(conventions.mark_text(kind, value))  # type: ignore[misc]

    # -- steps and phases -----------------------------------------------------------------------
    def _path(self) -> str:
        """The NVTX path open now: `step_3/forward`, `step_3`, or ''."""
        step = self._open
        if step is None:
            return ""
        return step.name + (f"/{step.open_phase[0]}" if step.open_phase is not None else "")

    @property
    def in_step(self) -> bool:
        return self._open is not None

    def begin_step(self, index: int, warmup: int = 0, sync: bool = True, nvtx: bool = True) -> str:
        """Open iteration `index` (a callback's on_step_begin); returns its name."""
        name = iteration_name(index, warmup)
        if self._open is not None:
            raise RuntimeError(f"mark: {name} begins while {self._open.name} is still open")
        self._arm_exit_save()
        self._push(name, nvtx)
        self._failed_path = None
        self._open = _OpenStep(name, time.perf_counter(), sync, nvtx)
        return name

    def end_step(self, status: str = "ok", message: str = "", **extra: Any) -> dict[str, Any] | None:
        """Close the open iteration (a callback's on_step_end): the range ends, then (sync) the
        device is synchronised and the time taken; the record is kept and written as a mark.
        An iteration that did not finish (`status` oom, error, unfinished) is no step: it is kept
        apart, under the record file's `failed_steps`, and writes no step mark (as the GPT-2
        workload writes none for the iteration that ran out of memory)."""
        step = self._open
        if step is None:
            return None
        if step.open_phase is not None:
            self.end_phase()
        self._pop(step.ranges)
        if step.sync and status == "ok":
            _synchronize()
        record: dict[str, Any] = {"name": step.name, "seconds": time.perf_counter() - step.start,
                                  "phases": dict(step.phases)}
        record.update(extra)
        self._open = None
        if status != "ok":
            record["status"] = status
            if message:
                record["message"] = message
            with self._lock:
                self.failed.append(record)
            return record
        with self._lock:
            self.records.append(record)
        self._mark(conventions.STEP, record, step.ranges)
        return record

    def begin_phase(self, name: str) -> None:
        step = self._open
        if step is None:
            return  # a phase outside any step (evaluation, say) is not the loop's structure
        if step.open_phase is not None:
            self.end_phase()
        self._push(name, step.ranges)
        step.open_phase = (name, time.perf_counter())

    def end_phase(self) -> None:
        step = self._open
        if step is None or step.open_phase is None:
            return
        name, started = step.open_phase
        self._pop(step.ranges)
        step.phases[name] = step.phases.get(name, 0.0) + time.perf_counter() - started
        step.open_phase = None

    @contextlib.contextmanager
    def step(self, index: int, warmup: int = 0, sync: bool = True, nvtx: bool = True) -> Iterator[str]:
        name = self.begin_step(index, warmup, sync, nvtx)
        try:
            yield name
        except BaseException as exc:
            oom = _is_oom(exc)
            path = self._failed_path or self._path()
            message = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            self.end_step("oom" if oom else "error", message)
            if oom:
                self._mark(conventions.OOM, {"path": path, "message": message}, nvtx)
                self.config.setdefault("oom", {"path": path, "message": message})
            raise
        else:
            self.end_step()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.begin_phase(name)
        try:
            yield
        except BaseException:
            if self._open is not None and self._failed_path is None:
                self._failed_path = self._path()  # before the phase closes: where the error struck
            raise
        finally:
            if self._open is not None and self._open.open_phase is not None and self._open.open_phase[0] == name:
                self.end_phase()

    def record(self, name: str, seconds: float, phases: dict[str, float] | None = None, nvtx: bool = False,
               **extra: Any) -> dict[str, Any]:
        """Keep a time the loop measured itself (a callback's own clock, a generate() call with its
        per-token times under `extra`); `nvtx=True` also writes it into the trace as a step mark."""
        self._arm_exit_save()
        value: dict[str, Any] = {"name": name, "seconds": float(seconds), "phases": dict(phases or {}), **extra}
        with self._lock:
            self.records.append(value)
        self._mark(conventions.STEP, value, nvtx)
        return value

    # -- hooks ------------------------------------------------------------------------------------
    def hooks(self, model, optimizer=None, warmup: int = 0, sync: bool = True, nvtx: bool = True) -> "Hooks":
        return Hooks(self, model, optimizer, warmup, sync, nvtx)

    # -- the record file ----------------------------------------------------------------------------
    def document(self) -> dict[str, Any]:
        with self._lock:
            steps, failed = list(self.records), list(self.failed)
        document: dict[str, Any] = {"config": {"source": "nsight_tui.capture.mark", "clock": "time.perf_counter",
                                               **self.config}, "steps": steps}
        if failed:
            document["failed_steps"] = failed
        return document

    def save(self, path: str | os.PathLike | None = None) -> Path | None:
        """Write the records as JSON (atomically) to `path`, or to $NSIGHT_TUI_STEPS_FILE; None
        when neither names a file."""
        target = path or os.environ.get(STEPS_FILE_ENV)
        if not target:
            return None
        target = Path(target)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.document(), indent=1) + "\n")
        os.replace(tmp, target)
        return target

    def _arm_exit_save(self) -> None:
        if not self._saved_at_exit and os.environ.get(STEPS_FILE_ENV):
            self._saved_at_exit = True
            atexit.register(self._save_quietly)

    def _save_quietly(self) -> None:
        if self._open is not None:  # the process is leaving mid-step (an exception no step() saw)
            exc = getattr(sys, "last_value", None)  # set when an uncaught exception ended the script
            oom = exc is not None and _is_oom(exc)
            message = (str(exc).strip().splitlines() or [type(exc).__name__])[0] if exc is not None else ""
            path = self._path()
            ranges = self._open.ranges
            self.end_step("oom" if oom else "unfinished", message)
            if oom:
                self._mark(conventions.OOM, {"path": path, "message": message}, ranges)
                self.config.setdefault("oom", {"path": path, "message": message})
        try:
            self.save()
        except OSError:
            pass


class Hooks:
    """`step_N` opens at the model's first forward of an iteration and closes after the
    optimizer's step; `forward` is the model's own call, `backward` the call of
    torch.autograd.backward (which `loss.backward()` makes) inside an open step, and `optimizer`
    the optimizer's step. `remove()` takes every hook (and the backward wrapper) away."""

    def __init__(self, clock: StepClock, model, optimizer, warmup: int, sync: bool, nvtx: bool):
        import torch

        self.clock, self.warmup, self.sync, self.nvtx = clock, warmup, sync, nvtx
        self.index = 0
        self.handles: list = []
        self._torch = torch
        self.handles.append(model.register_forward_pre_hook(self._forward_begins))
        self.handles.append(model.register_forward_hook(self._forward_ends))
        if optimizer is not None:
            self.handles.append(optimizer.register_step_pre_hook(self._optimizer_begins))
            self.handles.append(optimizer.register_step_post_hook(self._optimizer_ends))
        self._original_backward = torch.autograd.backward
        clock_ref = self

        def backward(*args, **kwargs):
            if not clock_ref.clock.in_step:
                return clock_ref._original_backward(*args, **kwargs)
            clock_ref.clock.begin_phase("backward")
            try:
                return clock_ref._original_backward(*args, **kwargs)
            finally:
                clock_ref.clock.end_phase()

        torch.autograd.backward = backward
        self._wrapper = backward
        self.optimizer = optimizer

    def _forward_begins(self, module, args) -> None:
        if not self.clock.in_step:
            self.clock.begin_step(self.index, self.warmup, self.sync, self.nvtx)
            self.index += 1
        self.clock.begin_phase("forward")

    def _forward_ends(self, module, args, output) -> None:
        self.clock.end_phase()
        if self.optimizer is None and self.clock.in_step:
            self.clock.end_step()  # no optimizer (inference): one model call is one iteration

    def _optimizer_begins(self, optimizer, args, kwargs) -> None:
        self.clock.begin_phase("optimizer")

    def _optimizer_ends(self, optimizer, args, kwargs) -> None:
        self.clock.end_phase()
        self.clock.end_step()

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        if self._torch.autograd.backward is self._wrapper:
            self._torch.autograd.backward = self._original_backward


def _synchronize() -> None:
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _is_oom(exc: BaseException) -> bool:
    try:
        import torch
    except ImportError:
        return False
    kinds = tuple(k for k in (getattr(torch, "OutOfMemoryError", None),
                              getattr(torch.cuda, "OutOfMemoryError", None)) if k is not None)
    return bool(kinds) and isinstance(exc, kinds)


clock = StepClock()
step = clock.step
phase = clock.phase
begin_step = clock.begin_step
end_step = clock.end_step
begin_phase = clock.begin_phase
end_phase = clock.end_phase
record = clock.record
save = clock.save
hooks = clock.hooks


def config(**values: Any) -> None:
    """Add what describes the run to the record file's `config` (kept out of the trace: the
    GPT-2 capture's config mark carries model dimensions the report reads)."""
    clock.config.update(values)
