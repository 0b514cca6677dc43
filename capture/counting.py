"""FLOPs and bytes of one training iteration, counted per aten op and grouped by NVTX range path.

`nsight-tui capture` runs this in its own process before `nsys profile` starts (so the trace
holds only the profiled workload): the same model, batch and device, one uncounted iteration
(so the optimizer's state exists, as in steady state), then one iteration under
`CountingMode`, a TorchDispatchMode that sees every aten op after autograd and autocast:

* FLOPs: PyTorch's own formulas (`torch.utils.flop_counter.flop_registry`: matmuls,
  convolutions, attention), plus nsight-tui's per-element formulas for the softmaxes and
  PyTorch's foreach AdamW ops (`ELEMENT_FLOPS`), so the softmax and optimizer have FLOPs too.
  Every other op counts 0 FLOPs (its bytes still count).
* bytes: each tensor argument the op reads plus each tensor it writes, at most its storage's
  size: a lower bound of the op's memory traffic (caches can only add re-reads, never remove
  the first read or the last write). Views move nothing and count 0.
* where: the NVTX range path open on the *main* thread when the op ran. Backward runs on
  autograd's own threads while the main thread sits in `backward`, so keying by the main
  thread's stack puts backward's ops under `step_N/backward`, as the process attribution does.

Only the workload process imports this (it needs torch).
"""
from __future__ import annotations

import contextlib
import re
import threading
from collections import defaultdict
from typing import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from nsight_tui.parsers.model.op_ranges import fold_name  # the parsers' own name folding (plain str work)

# FLOPs per element of the op's output (in-place ops: of the tensors they update), for ops
# PyTorch's flop counter leaves at 0. Softmax: max, subtract, exp, sum, divide per element
# (the analytic 5·B·H·T² of the attention softmax). The rest are the elementwise ops of
# PyTorch's foreach AdamW (torch/optim/adamw.py, _multi_tensor_adamw), FLOPs per element:
# decay mul 1, lerp 3 (sub, mul, add), mul 1, addcmul 3, sqrt 1, div 1, add 1, addcdiv 3 = 14
# per parameter. 0-dim tensors are the optimizer's step counters (bookkeeping): skipped.
ELEMENT_FLOPS: dict[str, int] = {
    "_softmax": 5,
    "_log_softmax": 5,
    "_foreach_mul_": 1,
    "_foreach_lerp_": 3,
    "_foreach_addcmul_": 3,
    "_foreach_sqrt": 1,
    "_foreach_div_": 1,
    "_foreach_add_": 1,
    "_foreach_addcdiv_": 3,
}
# Ops that allocate without touching the memory (no kernel runs).
# `_unsafe_view` is a view the schema does not declare as one.
_NO_TRAFFIC = re.compile(r"^(empty|empty_like|empty_strided|new_empty|new_empty_strided|_local_scalar_dense|"
                         r"lift_fresh|detach|alias|_unsafe_view|set_|resize_|_record_function_\w+)$")


def path_key(name: str) -> str:
    """`step_3` -> `step_N`: the name the range tree aggregates instances under
    (parsers.model.path_key; a test checks that the two agree)."""
    return fold_name(name)


class PathTracker:
    """An Annotator that records the open range path instead of (or besides) emitting NVTX.

    The stack is shared by all threads on purpose: ops on autograd's threads read the main
    thread's stack."""

    def __init__(self, inner=None) -> None:
        self.inner = inner
        self.stack: list[str] = []
        self.opened: dict[str, int] = defaultdict(int)  # path -> times opened

    def path(self) -> str:
        return "/".join(self.stack)

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        self.stack.append(path_key(name))
        self.opened[self.path()] += 1
        try:
            if self.inner is not None:
                with self.inner.range(name):
                    yield
            else:
                yield
        finally:
            self.stack.pop()

    def mark(self, message: str) -> None:
        if self.inner is not None:
            self.inner.mark(message)

    # `backward:<part>` ranges (--backward-ranges) open on the autograd thread: not paths of the
    # forward's tree, so they are passed on and not tracked.
    def start(self, name: str) -> object:
        return self.inner.start(name) if self.inner is not None else None

    def end(self, handle: object) -> None:
        if self.inner is not None:
            self.inner.end(handle)


def _tensors(tree) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(tree)
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes one tensor occupies: numel x element size, at most its storage (an expanded or
    broadcast view does not read its elements more than once from memory)."""
    size = t.numel() * t.element_size()
    try:
        return min(size, t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):  # tensors without storage (sparse, nested)
        return size


class CountingMode(TorchDispatchMode):
    """Per (range path, aten op): calls, FLOPs, bytes."""

    def __init__(self, tracker: PathTracker, device: torch.device) -> None:
        super().__init__()
        self.tracker = tracker
        self.device_type = device.type
        self.counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
        self.formulas: dict[str, str] = {}
        self._lock = threading.Lock()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        name = packet.__name__
        flops = 0
        formula = ""
        if packet in flop_registry:
            flops = int(flop_registry[packet](*args, **kwargs, out_val=out))
            formula = "torch.utils.flop_counter"
        elif name in ELEMENT_FLOPS:
            # in-place foreach ops return None: their elements are those of the first list
            target = _tensors(out) or _tensors(args[0] if args else [])
            flops = ELEMENT_FLOPS[name] * sum(t.numel() for t in target if t.dim() > 0)
            formula = f"nsight-tui: {ELEMENT_FLOPS[name]} per element"
        moved = 0 if (func.is_view or _NO_TRAFFIC.match(name)) else self._bytes(func, args, kwargs, out)
        key = (self.tracker.path(), f"aten.{name}")
        with self._lock:
            row = self.counts[key]
            row[0] += 1
            row[1] += flops
            row[2] += moved
            if formula:
                self.formulas[f"aten.{name}"] = formula
        return out

    def _bytes(self, func, args, kwargs, out) -> int:
        """Reads: every tensor argument but `out=`. Writes: what the op returns plus the
        arguments it mutates (in-place foreach ops return nothing), each tensor once."""
        schema_args = func._schema.arguments
        reads, written = [], []
        for i, value in enumerate(args):
            arg = schema_args[i] if i < len(schema_args) else None
            ts = _tensors(value)
            reads += ts
            if arg is not None and arg.alias_info is not None and arg.alias_info.is_write:
                written += ts
        for key, value in kwargs.items():
            ts = _tensors(value)
            arg = next((a for a in schema_args if a.name == key), None)
            is_out = arg is not None and arg.is_out
            if not is_out:
                reads += ts
            if arg is not None and arg.alias_info is not None and arg.alias_info.is_write:
                written += ts
        written += _tensors(out)
        seen: set[int] = set()
        unique_written = []
        for t in written:
            if id(t) not in seen:
                seen.add(id(t))
                unique_written.append(t)
        on_device = [t for t in reads + unique_written if t.device.type == self.device_type]
        return sum(tensor_bytes(t) for t in on_device)

    def rows(self) -> list[dict]:
        """Counts as plain rows, per path: the JSON the capture writes and the marks carry."""
        by_path: dict[str, dict] = {}

        def entry_for(path: str) -> dict:
            return by_path.setdefault(path, {"path": path, "instances": self.tracker.opened.get(path, 1),
                                             "flops": 0, "bytes": 0, "ops": {}})

        for path in sorted(self.tracker.opened):  # ranges with no op of their own count too
            entry_for(path)
        for (path, op), (calls, flops, moved) in sorted(self.counts.items()):
            entry = entry_for(path)
            entry["flops"] += flops
            entry["bytes"] += moved
            entry["ops"][op] = [calls, flops, moved]
        return sorted(by_path.values(), key=lambda e: e["path"])
