"""The replay twins (sample_traces/replay) and third-party captures (sample_traces/thirdparty) hold
what their READMEs say, read with SQL over the exports and from the records beside them."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from helpers.xz_samples import plain

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
REPLAY, THIRD = SAMPLES / "replay", SAMPLES / "thirdparty"
PAIRS = {"sleep": {"plant": ("", "host-sleep")}, "item": {"plant": ("", "item-before-step")},
         "tf32": {"tf32": (False, True)}, "optim": {"plant": ("foreach-off", "fused-optim")},
         "graph": {"plant": ("capturable", "cuda-graph")}}
UNANNOTATED = ["hf_trainer_qwen2_l4_b8", "hf_trainer_qwen2_l4_b8_agnvtx", "lightning_resnet50_b32",
               "lightning_resnet50_b32_channels_last", "hf_generate_llama_eager", "hf_generate_llama_static",
               "hf_trainer_qwen2_l4_b8_eager"]
HOOKED = ["timm_vit_small_b64", "timm_convnext_tiny_b32"]


def texts(path: Path) -> list[tuple[str, int, int, int, int | None]]:
    """(text, eventType, globalTid, start, end) of every NVTX event."""
    with sqlite3.connect(f"file:{plain(path)}?mode=ro", uri=True) as db:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'NVTX_EVENTS'").fetchone():
            return []  # nsys writes no table when the run wrote no NVTX event
        return db.execute("SELECT COALESCE(n.text, s.value), n.eventType, n.globalTid, n.start, n.\"end\" "
                          "FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId").fetchall()


def marks(path: Path, kind: str) -> list[dict]:
    prefix = f"nsight-tui:{kind} "
    return [json.loads(t[len(prefix):]) for t, *_ in texts(path) if t and t.startswith(prefix)]


def kernels(path: Path) -> int:
    with sqlite3.connect(f"file:{plain(path)}?mode=ro", uri=True) as db:
        return db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_each_replay_pair_differs_by_its_one_change(pair):
    files = sorted((REPLAY / pair).glob("*.sqlite.xz"))
    assert len(files) == 2
    (key, (a_value, b_value)), = PAIRS[pair].items()
    configs = [marks(f, "config")[0] for f in files]
    a, b = sorted(configs, key=lambda c: c.get(key) == b_value)
    assert (a.get(key) or "", b.get(key) or "") == (a_value or "", b_value or "")
    rest = {k for k in a.keys() | b.keys() if k != key}
    assert {k: a.get(k) for k in rest} == {k: b.get(k) for k in rest}  # same machine, same settings
    assert a["phase_sync"] is False and a["range_sync"] is False  # nothing synchronised inside a range
    for f in files:
        names = [m["name"] for m in marks(f, "step")]
        assert names == [f"warmup_{i}" for i in range(3)] + [f"step_{i}" for i in range(5)]


def test_third_party_records_sit_beside_each_export():
    exports = sorted(THIRD.glob("*.sqlite.xz"))
    assert len(exports) == 13
    for export in exports:
        stem = export.name[: -len(".sqlite.xz")]
        base = stem[: -len(".oom")] if stem.endswith(".oom") else stem
        steps = json.loads((THIRD / f"{base}.steps.json").read_text())
        if base.startswith("small_ctx"):  # the GPT-2 capture's own sidecar
            assert steps["config"]["nvtx"] is False
            continue
        run = json.loads((THIRD / f"{base}.run.json").read_text())
        assert run["export"] == export.name[: -len(".xz")] and run["command"][0] == "python3"
        assert run["exit_status"] == (1 if stem.endswith(".oom") else 0) and run["wall_seconds"] > 0
        assert run["nsys"][1:5] == ["profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none"]
        assert kernels(export) > 100


@pytest.mark.parametrize("stem", UNANNOTATED)
def test_callback_marked_runs_add_nothing_to_the_trace(stem):
    events = texts(THIRD / f"{stem}.sqlite.xz")
    assert not [t for t, *_ in events if t and (t.startswith("nsight-tui:") or t.startswith(("step_", "warmup_")))]
    steps = json.loads((THIRD / f"{stem}.steps.json").read_text())["steps"]
    steady = [s for s in steps if s["name"].startswith("step_")]
    command = json.loads((THIRD / f"{stem}.run.json").read_text())["command"]
    asked = int(command[command.index("--steps") + 1]) if "--steps" in command else 6  # the scripts' default
    assert len(steady) == (3 if "generate" in stem else asked)
    if "generate" in stem:
        for s in steps:
            assert s["new_tokens"] == 32 and len(s["decode_token_s"]) == 31
            assert s["prefill_s"] + sum(s["decode_token_s"]) <= s["seconds"]
    if stem.endswith("_agnvtx"):  # PyTorch's op ranges, from nsys --pytorch=autograd-nvtx
        assert any(t and t.startswith("aten::") for t, *_ in events)


@pytest.mark.parametrize("stem", HOOKED)
def test_marked_loops_carry_the_workloads_ranges_and_marks(stem):
    events = texts(THIRD / f"{stem}.sqlite.xz")
    ranges = [(t, g, s, e) for t, kind, g, s, e in events if kind == 59]  # push/pop ranges
    iterations = [r for r in ranges if r[0].startswith(("step_", "warmup_"))]
    assert [r[0] for r in sorted(iterations, key=lambda r: r[2])] == \
        [f"warmup_{i}" for i in range(3)] + [f"step_{i}" for i in range(6)]
    for name, gtid, start, end in iterations:
        inside = sorted((s, t) for t, g, s, e in ranges if g == gtid and start < s and e <= end)
        assert [t for _, t in inside] == ["forward", "backward", "optimizer"], name
    recorded = {m["name"]: m["seconds"] for m in marks(THIRD / f"{stem}.sqlite.xz", "step")}
    sidecar = json.loads((THIRD / f"{stem}.steps.json").read_text())["steps"]
    assert recorded == {s["name"]: s["seconds"] for s in sidecar}
    # the step's time runs past its range (the synchronise comes after the range closes)
    for name, _, start, end in iterations:
        assert recorded[name] * 1e9 >= (end - start) * 0.99


def test_the_oom_run_is_recorded_as_one():
    export = THIRD / "oom_qwen2_b256.oom.sqlite.xz"
    record = json.loads((THIRD / "oom_qwen2_b256.oom.json").read_text())
    assert record["status"] == "oom" and record["range"] == "step_0/forward"
    assert marks(export, "oom") == [{"path": "step_0/forward", "message": record["message"]}]
    assert marks(export, "step") == []  # no iteration finished
    with sqlite3.connect(f"file:{plain(export)}?mode=ro", uri=True) as db:
        failed = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
                            "WHERE s.value LIKE 'cudaMalloc%' AND r.returnValue = 2").fetchone()[0]
    assert failed >= 1
