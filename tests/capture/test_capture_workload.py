"""The GPT-2 workload on a CPU, tiny config: its NVTX ranges, marks and timings, and its OOM record.

The recording annotator calls the real `nvtx` package too (a no-op without a profiler), so the
calls the workload makes are exercised, and it keeps what was asked so the tree can be checked.
"""
from __future__ import annotations

import contextlib
import json
import threading

import pytest

from helpers.torch_threads import one_torch_thread  # noqa: F401  (autouse: torch on one thread)

torch = pytest.importorskip("torch")

from nsight_tui.capture import workload  # noqa: E402
from nsight_tui.capture.annotate import CONFIG_MARK, STEP_MARK, NvtxAnnotator  # noqa: E402
from nsight_tui.capture.sizes import OOM_EXIT_CODE  # noqa: E402
from nsight_tui.capture.workload import WorkloadConfig, run_workload  # noqa: E402


class RecordingAnnotator:
    """Passes every call on to nvtx and builds the range tree it described."""

    def __init__(self):
        self.real = NvtxAnnotator()
        self.roots: list[dict] = []
        self.marks: list[tuple[int, str]] = []  # (number of closed top-level ranges so far, message)
        self._stack: list[dict] = []

    @contextlib.contextmanager
    def range(self, name):
        node = {"name": name, "children": []}
        (self._stack[-1]["children"] if self._stack else self.roots).append(node)
        self._stack.append(node)
        with self.real.range(name):
            yield
        assert self._stack.pop() is node

    def mark(self, message):
        self.real.mark(message)
        self.marks.append((len(self.roots), message))


def tiny(**overrides) -> WorkloadConfig:
    base = dict(model="tiny", ctx=16, batch=2, steps=2, warmup=1, device="cpu")
    return WorkloadConfig(**{**base, **overrides})


def names(nodes):
    return [n["name"] for n in nodes]


def test_training_ranges_marks_and_times():
    rec = RecordingAnnotator()
    records = run_workload(tiny(), rec, log=lambda line: None)

    assert names(rec.roots) == ["warmup_0", "step_0", "step_1"]
    for step in rec.roots:
        assert names(step["children"]) == ["forward", "backward", "optimizer"]
        forward = step["children"][0]
        # tiny has 2 layers: one attention range each, with the manual path's three parts in order
        assert names(forward["children"]) == ["scaled_dot_product_attention"] * 2
        for attn in forward["children"]:
            assert names(attn["children"]) == ["computing_attention_scores", "computing_softmax", "final_matmul"]
        assert step["children"][1]["children"] == [] and step["children"][2]["children"] == []

    # First mark before any range: the configuration, exactly the keys the parsers read.
    first_position, first = rec.marks[0]
    assert first_position == 0 and first.startswith(CONFIG_MARK)
    assert json.loads(first[len(CONFIG_MARK):]) == {
        "model": "tiny", "d_model": 64, "n_layers": 2, "n_heads": 2, "vocab": 10000, "batch": 2,
        "ctx": 16, "dtype": "fp32", "mode": "train", "attention": "manual", "steps": 2, "warmup": 1,
        "device": "cpu", "torch": torch.__version__,
    }
    # Then one step mark right after each iteration closes, matching what run_workload returned.
    step_marks = rec.marks[1:]
    assert [pos for pos, _ in step_marks] == [1, 2, 3]
    for (_, message), record in zip(step_marks, records):
        assert message.startswith(STEP_MARK)
        payload = json.loads(message[len(STEP_MARK):])
        assert payload == {"name": record.name, "seconds": record.seconds, "phases": record.phases}
        assert set(payload["phases"]) == {"forward", "backward", "optimizer"}
        # phases are timed inside the iteration, so they cannot add up to more than it
        assert 0 < sum(payload["phases"].values()) <= payload["seconds"]
    assert [r.name for r in records] == ["warmup_0", "step_0", "step_1"]


def test_training_updates_the_weights():
    # A train step that forgot backward or the optimizer would still produce the right ranges.
    rec = RecordingAnnotator()
    torch.manual_seed(0)
    from nsight_tui.capture.model import GPT2, ModelDims

    before = GPT2(ModelDims(64, 2, 2, 16)).state_dict()["blocks.0.mlp.fc.weight"].clone()
    captured = {}
    original_step = torch.optim.AdamW.step

    def step(self, *args, **kwargs):
        captured["grads"] = [p.grad is not None for g in self.param_groups for p in g["params"]]
        result = original_step(self, *args, **kwargs)
        captured["after"] = self.param_groups[0]["params"]
        return result

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.optim.AdamW, "step", step)
        run_workload(tiny(steps=1, warmup=0), rec, log=lambda line: None)
    assert captured["grads"] and all(captured["grads"])
    fc = [p for p in captured["after"] if p.shape == before.shape][0]
    assert not torch.equal(fc.detach(), before)


def test_forward_mode_has_only_forward_and_no_grad():
    rec = RecordingAnnotator()
    grad_enabled = []
    with pytest.MonkeyPatch.context() as mp:
        import nsight_tui.capture.model as model_module

        original = model_module.MLP.forward

        def forward(self, x):
            grad_enabled.append(torch.is_grad_enabled())
            return original(self, x)

        mp.setattr(model_module.MLP, "forward", forward)
        records = run_workload(tiny(mode="forward"), rec, log=lambda line: None)
    assert names(rec.roots) == ["warmup_0", "step_0", "step_1"]
    assert all(names(step["children"]) == ["forward"] for step in rec.roots)
    assert all(set(r.phases) == {"forward"} for r in records)
    assert grad_enabled and not any(grad_enabled)
    config = json.loads(rec.marks[0][1][len(CONFIG_MARK):])
    assert config["mode"] == "forward"


def test_fused_attention_bf16():
    rec = RecordingAnnotator()
    run_workload(tiny(attention="fused", dtype="bf16", steps=1, warmup=0), rec, log=lambda line: None)
    forward = rec.roots[0]["children"][0]
    assert names(forward["children"]) == ["scaled_dot_product_attention"] * 2
    assert all(attn["children"] == [] for attn in forward["children"])
    config = json.loads(rec.marks[0][1][len(CONFIG_MARK):])
    assert (config["attention"], config["dtype"]) == ("fused", "bf16")


def test_fused_and_manual_attention_agree():
    from nsight_tui.capture.model import GPT2, ModelDims

    torch.manual_seed(0)
    manual = GPT2(ModelDims(64, 2, 2, 16), attention="manual")
    fused = GPT2(ModelDims(64, 2, 2, 16), attention="fused")
    fused.load_state_dict(manual.state_dict())
    tokens = torch.randint(0, 10000, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(manual(tokens), fused(tokens), rtol=1e-4, atol=1e-4)


def test_attention_is_causal():
    from nsight_tui.capture.model import GPT2, ModelDims

    torch.manual_seed(0)
    model = GPT2(ModelDims(64, 2, 2, 16)).eval()
    tokens = torch.randint(0, 10000, (1, 16))
    changed = tokens.clone()
    changed[0, 10] = (changed[0, 10] + 1) % 10000
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    torch.testing.assert_close(a[0, :10], b[0, :10])
    assert not torch.allclose(a[0, 10], b[0, 10])


def test_cuda_requested_without_cuda_is_an_error(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    status = tmp_path / "status.json"
    code = workload.main(["--model", "tiny", "--ctx", "16", "--status-file", str(status)])
    assert code == 1
    assert json.loads(status.read_text())["status"] == "error"


def test_out_of_memory_is_recorded_in_the_status_file(tmp_path, monkeypatch, capsys):
    def out_of_memory(*args, **kwargs):
        raise workload.oom_error_type()("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail")

    monkeypatch.setattr(workload, "run_workload", out_of_memory)
    status = tmp_path / "status.json"
    code = workload.main(["--model", "xl", "--ctx", "1024", "--device", "cpu", "--status-file", str(status)])
    assert code == OOM_EXIT_CODE
    record = json.loads(status.read_text())
    assert record["status"] == "oom"
    assert record["message"] == "CUDA out of memory. Tried to allocate 2.00 GiB"
    assert (record["config"]["model"], record["config"]["ctx"]) == ("xl", 1024)
    assert "out of memory" in capsys.readouterr().err


def test_main_writes_ok_status_with_step_times(tmp_path, capsys):
    status = tmp_path / "status.json"
    code = workload.main(["--model", "tiny", "--ctx", "16", "--batch", "2", "--steps", "1", "--warmup", "1",
                          "--device", "cpu", "--status-file", str(status)])
    assert code == 0
    record = json.loads(status.read_text())
    assert record["status"] == "ok"
    assert [s["name"] for s in record["steps"]] == ["warmup_0", "step_0"]
    out = capsys.readouterr().out
    assert "[2/2] step_0" in out


class StartEndRecorder(RecordingAnnotator):
    """Also keeps the start/end calls (the backward hooks), with the range each end closes."""

    def __init__(self):
        super().__init__()
        self.pushes: list[tuple[str, str, int]] = []

    def start(self, name):
        handle = (self.real.start(name), name)
        self.pushes.append(("push", name, threading.get_ident()))
        return handle

    def end(self, handle):
        self.real.end(handle[0])
        self.pushes.append(("pop", handle[1], threading.get_ident()))


def test_backward_ranges_nest_per_part_in_reverse_order():
    rec = StartEndRecorder()
    run_workload(tiny(backward_ranges=True, steps=1, warmup=0), rec, log=lambda line: None)
    # Rebuild the tree the starts and ends describe: each end closes the innermost open range.
    roots, stack = [], []
    for kind, name, _ in rec.pushes:
        if kind == "push":
            node = {"name": name, "children": []}
            (stack[-1]["children"] if stack else roots).append(node)
            stack.append(node)
        else:
            assert stack.pop()["name"] == name
    assert not stack
    # tiny: 2 layers, backward visits them last to first; in each, the parts in reverse order.
    assert names(roots) == ["backward:scaled_dot_product_attention"] * 2
    for attn in roots:
        assert names(attn["children"]) == ["backward:final_matmul", "backward:computing_softmax",
                                           "backward:computing_attention_scores"]
    # The forward's own ranges are unchanged by the hooks.
    forward = rec.roots[0]["children"][0]
    assert names(forward["children"]) == ["scaled_dot_product_attention"] * 2


def test_forward_mode_adds_no_backward_ranges():
    rec = StartEndRecorder()
    run_workload(tiny(backward_ranges=True, mode="forward", steps=1, warmup=0), rec, log=lambda line: None)
    assert rec.pushes == []


def test_op_ranges_must_be_known():
    with pytest.raises(ValueError, match="op ranges"):
        run_workload(tiny(op_ranges="everything"), RecordingAnnotator(), log=lambda line: None)
def test_model_order_lists_the_capture_sizes_in_size_order():
    from nsight_tui.capture.sizes import MODEL_SIZES
    from nsight_tui.parsers.read.conventions import MODEL_ORDER

    assert tuple(MODEL_SIZES) == MODEL_ORDER
    assert [MODEL_SIZES[m][0] for m in MODEL_ORDER] == sorted(MODEL_SIZES[m][0] for m in MODEL_ORDER)


def test_path_tracking_names_the_range_an_exception_left():
    # the OOM record and mark name the deepest range open when memory ran out
    from nsight_tui.capture.annotate import NullAnnotator, PathTracking

    tracking = PathTracking(NullAnnotator())
    with tracking.range("warmup_0"):
        with tracking.range("forward"):
            pass
    assert tracking.failed_path is None and tracking.stack == []
    with pytest.raises(MemoryError):
        with tracking.range("warmup_0"), tracking.range("forward"), tracking.range("computing_attention_scores"):
            raise MemoryError
    assert tracking.failed_path == "warmup_0/forward/computing_attention_scores" and tracking.stack == []


def test_no_nvtx_emits_no_range_and_no_mark_but_keeps_the_step_times(tmp_path, monkeypatch, capsys):
    # `--no-nvtx` must leave a truly unannotated trace; the same run without it annotates.
    made: list[RecordingAnnotator] = []

    def recording():
        made.append(RecordingAnnotator())
        return made[-1]

    monkeypatch.setattr(workload, "NvtxAnnotator", recording)
    argv = ["--model", "tiny", "--ctx", "16", "--batch", "2", "--steps", "2", "--warmup", "1", "--device", "cpu"]
    assert workload.main([*argv, "--status-file", str(tmp_path / "annotated.json")]) == 0
    assert len(made) == 1 and names(made[0].roots) == ["warmup_0", "step_0", "step_1"] and made[0].marks
    assert workload.main([*argv, "--no-nvtx", "--status-file", str(tmp_path / "bare.json")]) == 0
    assert len(made) == 1  # no NVTX annotator was made for the --no-nvtx run
    record = json.loads((tmp_path / "bare.json").read_text())
    assert record["status"] == "ok" and record["config"]["nvtx"] is False
    assert [s["name"] for s in record["steps"]] == ["warmup_0", "step_0", "step_1"]
    assert all(s["seconds"] > 0 for s in record["steps"])


def test_no_nvtx_refuses_op_ranges():
    with pytest.raises(ValueError, match="no NVTX"):
        run_workload(tiny(nvtx=False, op_ranges="emit-nvtx"), RecordingAnnotator(), log=lambda line: None)


def test_annotator_without_the_nvtx_package_uses_pytorchs_bindings(monkeypatch):
    """No `nvtx` package: the workload's ranges and marks go through torch.cuda.nvtx (the default
    domain, as the package writes them), in the order asked; without CUDA either, ImportError (the
    workload's one line)."""
    import sys

    monkeypatch.setitem(sys.modules, "nvtx", None)  # `import nvtx` raises ImportError
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ImportError):
        NvtxAnnotator()
    calls: list[tuple] = []
    n = torch.cuda.nvtx
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(n, "range_push", lambda msg: calls.append(("push", msg)))
    monkeypatch.setattr(n, "range_pop", lambda: calls.append(("pop",)))
    monkeypatch.setattr(n, "mark", lambda msg: calls.append(("mark", msg)))
    monkeypatch.setattr(n, "range_start", lambda msg: calls.append(("start", msg)) or 7)
    monkeypatch.setattr(n, "range_end", lambda rid: calls.append(("end", rid)))
    a = NvtxAnnotator()
    with a.range("step_0"):
        a.mark("m")
    a.end(a.start("warm"))
    assert calls == [("push", "step_0"), ("mark", "m"), ("pop",), ("start", "warm"), ("end", 7)]
