"""FLOPs and bytes counted at capture (capture.counting) on the CPU, tiny GPT-2, against hand
formulas written here and against the analytic source (parsers.flop_counts)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers.torch_threads import one_torch_thread  # noqa: F401  (autouse: torch on one thread)

torch = pytest.importorskip("torch")

from nsight_tui.capture import workload  # noqa: E402
from nsight_tui.capture.annotate import FLOPS_MARK, flops_message  # noqa: E402
from nsight_tui.capture.counting import path_key  # noqa: E402
from nsight_tui.capture.workload import WorkloadConfig, count_iteration  # noqa: E402
from nsight_tui.parsers.kernels import flop_counts  # noqa: E402
from nsight_tui.parsers.model.ranges import path_key as parsers_path_key  # noqa: E402

# tiny: d 64, 2 layers, 2 heads; vocab 10,000
D, L, H, V, B, T = 64, 2, 2, 10_000, 2, 16
DH, M = D // H, B * T

ATTN = "step_N/forward/scaled_dot_product_attention"


def config(**kw) -> WorkloadConfig:
    return WorkloadConfig(**{**dict(model="tiny", ctx=T, batch=B, device="cpu"), **kw})


@pytest.fixture(scope="module")
def rows():
    return count_iteration(config())


@pytest.fixture(scope="module")
def measured(rows):
    return flop_counts.from_marks(pd.DataFrame({"text": [flops_message(r) for r in rows]}))


def n_params() -> int:
    from nsight_tui.capture.model import GPT2, ModelDims

    return sum(p.numel() for p in GPT2(ModelDims(D, L, H, T)).parameters())


def test_conventions_shared_with_the_parsers():
    assert FLOPS_MARK == flop_counts.MARK_PREFIX
    for name in ("step_3", "warmup_0", "forward", "aten::mm, op_id = 17", "x12y"):
        assert path_key(name) == parsers_path_key(name)


def test_paths_and_instances(rows):
    by = {r["path"]: r for r in rows}
    assert set(by) == {"step_N", "step_N/forward", "step_N/backward", "step_N/optimizer", ATTN,
                       f"{ATTN}/computing_attention_scores", f"{ATTN}/computing_softmax", f"{ATTN}/final_matmul"}
    assert by[ATTN]["instances"] == L and by["step_N/forward"]["instances"] == 1


def test_measured_flops_match_hand_formulas(measured):
    weights = 12 * L * D * D + D * V  # matmul weights: QKV 3d², out d², MLP 8d² per block; LM head d·V
    qk = 2 * B * H * T * T * DH  # one layer's QKᵀ (and attn@V)
    softmax = 5 * B * H * T * T
    loss = 5 * M * V  # log-softmax over the vocabulary
    per = measured.range_counts
    assert per(f"{ATTN}/computing_attention_scores").flops == qk  # one instance = one layer
    assert per(f"{ATTN}/final_matmul").flops == qk
    assert per(f"{ATTN}/computing_softmax").flops == softmax
    assert per(ATTN).flops == 2 * qk + softmax
    assert per("step_N/forward").flops == 2 * weights * M + L * (2 * qk + softmax) + loss
    assert per("step_N/forward").families["gemm"][0] == 2 * weights * M + L * 2 * qk
    assert per("step_N/backward").flops == 2 * (2 * weights * M + L * 2 * qk)  # matmuls 2x forward
    assert per("step_N/optimizer").flops == 14 * n_params()


def test_measured_bytes_match_hand_formulas(measured):
    per = measured.range_counts
    # softmax reads and writes the B·H·T×T scores once, fp32
    assert per(f"{ATTN}/computing_softmax").bytes == 2 * 4 * B * H * T * T
    # QKᵀ: q and k (B·H·T·d_h each) in, scores out
    assert per(f"{ATTN}/computing_attention_scores").families["gemm"][1] == 4 * (2 * B * H * T * DH + B * H * T * T)
    # the optimizer reads every parameter, gradient and both moments at least once
    assert per("step_N/optimizer").bytes >= 4 * 4 * n_params()


def test_flops_and_bytes_add_up_to_the_step(rows, measured):
    step = measured.range_counts("step_N")
    assert step.flops == sum(r["flops"] for r in rows)
    assert step.bytes == sum(r["bytes"] for r in rows)
    parts = [measured.range_counts(f"step_N/{p}") for p in ("forward", "backward", "optimizer")]
    assert step.flops == sum(p.flops for p in parts) and step.bytes == sum(p.bytes for p in parts)
    assert sum(f for f, _ in step.families.values()) == step.flops
    assert sum(b for _, b in step.families.values()) == step.bytes


def test_measured_agrees_with_analytic_on_every_path(measured):
    analytic = flop_counts.analytic_counts(config().metadata())
    for path in analytic.paths():
        m, a = measured.range_counts(path), analytic.range_counts(path)
        assert m.flops == a.flops, path
        for family in ("gemm", "softmax"):
            if family in (a.families or {}):
                assert m.families[family][0] == a.families[family][0], (path, family)


def test_analytic_bytes_are_a_lower_bound_of_measured(measured):
    analytic = flop_counts.analytic_counts(config().metadata())
    for path in analytic.paths():
        assert analytic.range_counts(path).bytes <= measured.range_counts(path).bytes, path


def test_forward_mode_counts_forward_only():
    got = {r["path"]: r for r in count_iteration(config(mode="forward"))}
    assert "step_N/backward" not in got and "step_N/optimizer" not in got
    m = flop_counts.from_marks(pd.DataFrame({"text": [flops_message(r) for r in got.values()]}))
    a = flop_counts.analytic_counts(config(mode="forward").metadata())
    assert m.range_counts("step_N").flops == a.range_counts("step_N").flops


def test_count_out_then_counts_in_as_marks(tmp_path, capsys):
    out = tmp_path / "counts.json"
    args = ["--model", "tiny", "--ctx", str(T), "--batch", str(B), "--device", "cpu"]
    assert workload.main([*args, "--count-out", str(out)]) == 0
    counted = json.loads(out.read_text())["counts"]
    assert "counted one iteration" in capsys.readouterr().out
    emitted = []

    class Recorder:
        def range(self, name):
            import contextlib

            return contextlib.nullcontext()

        def mark(self, message):
            emitted.append(message)

    workload.run_workload(config(steps=1, warmup=0), Recorder(), log=lambda line: None,
                          counts=workload._read_counts(str(out)))
    marks = [json.loads(m[len(FLOPS_MARK):]) for m in emitted if m.startswith(FLOPS_MARK)]
    assert marks == counted


def test_unreadable_counts_are_ignored_with_a_line(tmp_path, capsys):
    bad = tmp_path / "counts.json"
    bad.write_text("{not json")
    assert workload._read_counts(str(bad)) == []
    assert "ignoring the counts" in capsys.readouterr().err
