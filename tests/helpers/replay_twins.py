"""The committed twin captures the replay is checked on: each pair one change apart, captured back
to back on one machine, with the edit that is the change. Not a test module: tests/core/
test_replay.py and README's twins table read it. A new pair is one more row, or one more entry
of sample_traces/replay/twins.json (read below) beside its captures."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "sample_traces"


@dataclass(frozen=True)
class Twin:
    name: str
    base: Path  # the capture replayed
    twin: Path  # the capture the edit should turn it into
    edits: tuple[str, ...]  # `kernels-from:{twin}` names the twin itself
    rule: str = ""  # the findings rule whose subtraction estimate this change answers (the old estimate)

    def edit_args(self, twin: Path) -> list[str]:
        return [e.replace("{twin}", str(twin)) for e in self.edits]


def _f(folder: str, stem: str) -> Path:
    return ROOT / folder / f"{stem}.sqlite.xz"


TWINS = (
    # the change is a 5 ms time.sleep at each step's start: that much host time less in the pause it
    # sits in (the pause also holds the loop's own start-up Python, which the twin still runs)
    Twin("host sleep removed", _f("findings", "small_ctx128_host-sleep"), _f("findings", "small_ctx128"),
         ("nohost:-5ms",), "host-bound-gap"),
    Twin("per-step .item() removed", _f("findings", "small_ctx128_nosync_item"), _f("findings", "small_ctx128_nosync"),
         ("nosync:cudaStreamSynchronize",), "sync-stall"),
    Twin(".item() before optimizer.step removed", _f("findings", "small_ctx512_b8_nosync_item-before-step"),
         _f("findings", "small_ctx512_b8_nosync"), ("nosync:cudaStreamSynchronize",), "sync-stall"),
    Twin("AdamW foreach=False -> fused", _f("findings", "small_ctx128_foreach-off"), _f("findings", "small_ctx128_fused-optim"),
         ("kernels-from:{twin}",), "unfused-optimizer"),
    Twin("AdamW foreach=False -> fused (async)", _f("async", "small_ctx512_b8_async_foreach-off"),
         _f("async", "small_ctx512_b8_async_fused-optim"), ("kernels-from:{twin}",), "unfused-optimizer"),
    Twin("CUDA graph (batch 1)", _f("findings", "small_ctx128_b1_nosync_capturable"),
         _f("findings", "small_ctx128_b1_nosync_cuda-graph"), ("graph",), "launch-bound"),
    Twin("fp32 -> TF32 (phase syncs)", _f("findings", "small_ctx512"), _f("findings", "small_ctx512_tf32"),
         ("kernels-from:{twin}",), "fp32-gemm-without-tensor-cores"),
    Twin("fp32 -> TF32 (async, H100)", _f("async", "small_ctx512_b8_async"), _f("async", "small_ctx512_tf32_b8_async"),
         ("kernels-from:{twin}",), "fp32-gemm-without-tensor-cores"),
    Twin("fp32 -> TF32 large (async, H100)", _f("async", "large_ctx512_async"), _f("async", "large_ctx512_tf32_async"),
         ("kernels-from:{twin}",), "fp32-gemm-without-tensor-cores"),
    *(Twin(f"fp32 -> TF32 (H100 repeat r{i})", _f("async/h100_repeats", f"small_ctx512_b8_async_r{i}"),
           _f("async/h100_repeats", f"small_ctx512_tf32_b8_async_r{i}"), ("kernels-from:{twin}",),
           "fp32-gemm-without-tensor-cores") for i in (1, 2, 3)),
    *(Twin(f"fp32 -> TF32 {m} (H200)", _f("async/h200_twins", f"{m}_b8_async"), _f("async/h200_twins", f"{m}_tf32_b8_async"),
           ("kernels-from:{twin}",), "fp32-gemm-without-tensor-cores") for m in ("small_ctx512", "small_ctx1024", "medium_ctx512")),
    Twin("DDP 25 MB buckets -> one bucket", _f("async", "small_ctx512_b8_ddp2_async"),
         _f("async", "small_ctx512_b8_ddp2_async_ddp-one-bucket"), ("kernels-from:{twin}",), "exposed-communication"),
    # a 64 MiB input batch copied each step from pageable memory (8-10 ms of the driver's staging
    # inside one cudaMemcpyAsync) -> the same batch pinned once, copied with non_blocking=True
    Twin("pageable -> pinned input", _f("findings", "small_ctx128_pageable-input"),
         _f("findings", "small_ctx128_pinned-input"), ("pin",), "pageable-memcpy"),
)


@dataclass(frozen=True)
class Repeats:
    """One change captured as several pairs, alternating in one call (A B A B ..., or B A B A ... where
    the order itself is in question; a set may hold several calls'): on a launch-bound step one pair
    measures the CPU's pace of that minute as much as the change (docs/whatif.md, "Twins"), so the
    change and the prediction are the medians over the pairs, and the noise is the pairs' own spread."""
    name: str
    pairs: tuple[Twin, ...]

    @property
    def edits(self) -> tuple[str, ...]:
        return self.pairs[0].edits

    @property
    def rule(self) -> str:
        return self.pairs[0].rule


@dataclass(frozen=True)
class Interleaved:
    """One capture with the change on every other step (`capture --plant-every 2`: planted in step_1,
    step_3, ..., not in step_0, step_2, ...): both sides on the same minute's CPU; the planted steps
    replayed as they ran with the edit against without (twins_table.interleaved_row)."""
    name: str
    capture: Path
    edits: tuple[str, ...]
    rule: str = ""


def _manifest() -> list[dict]:
    import json

    path = ROOT / "replay" / "twins.json"
    return json.loads(path.read_text()) if path.is_file() else []


def _twin(r: dict, base: str, twin: str, name: str) -> Twin:
    folder = ROOT / "replay"
    return Twin(name, folder / base, folder / twin, tuple(r["edits"]), r.get("rule", ""))


# Pairs captured later: sample_traces/replay/twins.json, a list of {"name", "base", "twin", "edits",
# "rule"} with paths relative to sample_traces/replay/ (`kernels-from:{twin}` as above); an entry with
# "pairs": [[base, twin], ...] in place of base and twin is a set of repeats, one with "capture" an
# interleaved capture.
TWINS = TWINS + tuple(_twin(r, r["base"], r["twin"], r["name"]) for r in _manifest() if "base" in r)
INTERLEAVED = tuple(Interleaved(r["name"], ROOT / "replay" / r["capture"], tuple(r["edits"]), r.get("rule", ""))
                    for r in _manifest() if "capture" in r)
REPEATS = (
    # the async/h100_repeats pairs above: one call, fp32 and TF32 alternating
    Repeats("fp32 -> TF32 (H100, 3 pairs alternating)", tuple(t for t in TWINS if t.name.startswith("fp32 -> TF32 (H100 repeat"))),
) + tuple(Repeats(r["name"], tuple(_twin(r, b, t, f"{r['name']} r{i}") for i, (b, t) in enumerate(r["pairs"], 1)))
                for r in _manifest() if "pairs" in r)

