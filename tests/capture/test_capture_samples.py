"""The committed sample traces, made by `nsight-tui capture` on an H200, hold what the parsers rely on.

Expected counts come from NVIDIA's own `nsys stats` CSVs (sample_traces/oracle) and from the model's
shape (12 layers, 5 iterations), not from our own code's output.
"""
from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest

from nsight_tui.capture.annotate import CONFIG_MARK, STEP_MARK

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
TRACES = {
    "small_ctx128": {"mode": "train", "attention": "manual"},
    "small_ctx128_fwd": {"mode": "forward", "attention": "manual"},
    "small_ctx128_fused": {"mode": "train", "attention": "fused"},
}


def open_ro(name: str) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{SAMPLES / name}.sqlite?mode=ro", uri=True)


def nvtx_texts(db: sqlite3.Connection, event_type: int) -> list[tuple[int, int | None, str]]:
    # The nvtx package registers its strings: the text sits in StringIds, not NVTX_EVENTS.text.
    return db.execute(
        "SELECT e.start, e.end, COALESCE(e.text, s.value) FROM NVTX_EVENTS e "
        "LEFT JOIN StringIds s ON e.textId = s.id WHERE e.eventType = ? ORDER BY e.start", (event_type,)
    ).fetchall()


@pytest.mark.parametrize("name", TRACES)
def test_config_and_step_marks(name):
    with open_ro(name) as db:
        marks = nvtx_texts(db, 34)  # NvtxMark
        ranges = nvtx_texts(db, 59)  # NvtxPushPopRange
    assert marks[0][2].startswith(CONFIG_MARK)
    config = json.loads(marks[0][2][len(CONFIG_MARK):])
    assert config == {"model": "small", "d_model": 768, "n_layers": 12, "n_heads": 12, "vocab": 10000,
                      "batch": 4, "ctx": 128, "dtype": "fp32", **TRACES[name], "steps": 3, "warmup": 2,
                      "device": "NVIDIA H200", "torch": config["torch"]}
    steps = [json.loads(text[len(STEP_MARK):]) for _, _, text in marks[1:]]
    assert [s["name"] for s in steps] == ["warmup_0", "warmup_1", "step_0", "step_1", "step_2"]
    iterations = {text: (start, end) for start, end, text in ranges if text in {s["name"] for s in steps}}
    for step in steps:
        start, end = iterations[step["name"]]
        # perf_counter around the iteration vs the NVTX range around it: the same interval, give or
        # take the cost of the NVTX calls themselves
        assert step["seconds"] == pytest.approx((end - start) / 1e9, abs=5e-5)
        expected = {"forward"} if TRACES[name]["mode"] == "forward" else {"forward", "backward", "optimizer"}
        assert set(step["phases"]) == expected


@pytest.mark.parametrize("name", TRACES)
def test_range_counts_match_nsys(name):
    with (SAMPLES / "oracle" / f"{name}_nvtx_sum.csv").open() as f:
        instances = {row["Range"].lstrip(":"): int(row["Instances"]) for row in csv.DictReader(f)}
    iterations = 5
    expected = {"warmup_0": 1, "warmup_1": 1, "step_0": 1, "step_1": 1, "step_2": 1, "forward": iterations,
                "scaled_dot_product_attention": 12 * iterations}
    if TRACES[name]["mode"] == "train":
        expected.update(backward=iterations, optimizer=iterations)
    if TRACES[name]["attention"] == "manual":
        expected.update({part: 12 * iterations for part in
                         ("computing_attention_scores", "computing_softmax", "final_matmul")})
    assert instances == expected


def test_sample_traces_stay_small():
    total = sum(p.stat().st_size for p in SAMPLES.rglob("*") if p.is_file())
    # every device run ships the tree (64 MiB at most) and every clone carries it: keep it small
    assert total < 25_000_000
