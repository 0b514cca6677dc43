"""The sweep's memory model on a real sweep: `nsight-tui capture --sweep --models
medium,large,xl --ctxs 512,1024 --batch 8` on an H100 (sample_traces/memsweep, devruns/gpu_memmodel.sh
and its log). The truth is read here apart from the code: each run's configuration and torch's
max_memory_reserved from its marks (SQL + json), the parameter count torch printed on the device
(the log), the GPU's memory and the failed cudaMalloc from the exports (SQL); the fit is redone here
with numpy's least squares on the terms written out again."""
from __future__ import annotations

import itertools
import json
import re
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from conftest import SAMPLES

from nsight_tui.parsers.analyses import memory_model, sweep

SWEEP = SAMPLES / "memsweep"
LOG = Path(__file__).resolve().parents[2] / "devruns" / "gpu_memmodel.log"
RAN = ("medium_ctx512_b8", "medium_ctx1024_b8", "large_ctx512_b8", "large_ctx1024_b8", "xl_ctx512_b8")
OOM = "xl_ctx1024_b8.oom"


def marks(path: Path) -> tuple[dict, list[dict]]:
    """The config mark and the step marks of an export (SQL, then json)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    texts = [t for (t,) in db.execute("""SELECT s.value FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
                                         WHERE n.eventType = 34 ORDER BY n.start""")]
    config = next(json.loads(t[len("nsight-tui:config "):]) for t in texts if t.startswith("nsight-tui:config "))
    steps = [json.loads(t[len("nsight-tui:step "):]) for t in texts if t.startswith("nsight-tui:step ")]
    return config, steps


def torch_reserved(steps: list[dict]) -> int:
    return max(m["peak_reserved_bytes"] for s in steps for m in s["memory"].values() if "peak_reserved_bytes" in m)


def terms(config: dict) -> tuple[int, list[int]]:
    """16 B a parameter (fp32 weight, gradient, AdamW's two moments), and the two fitted terms' elements."""
    d, layers, heads, vocab = config["d_model"], config["n_layers"], config["n_heads"], config["vocab"]
    ctx, batch = config["ctx"], config["batch"]
    params = 2 * vocab * d + ctx * d + layers * (12 * d * d + 13 * d) + 2 * d
    return 16 * params, [batch * ctx * layers * d, batch * heads * ctx * ctx * layers]


@pytest.fixture(scope="module")
def folder(async_trace, tmp_path_factory) -> Path:
    """The sweep's folder as capture wrote it: the exports decompressed, the OOM record beside them."""
    out = tmp_path_factory.mktemp("memsweep")
    for name in [*RAN, OOM]:
        shutil.copyfile(async_trace(SWEEP / f"{name}.sqlite.xz"), out / f"{name}.sqlite")
    shutil.copyfile(SWEEP / f"{OOM}.json", out / f"{OOM}.json")
    return out


@pytest.fixture(scope="module")
def truth(folder) -> dict[str, tuple[dict, int]]:
    out = {}
    for name in RAN:
        config, steps = marks(folder / f"{name}.sqlite")
        out[name] = (config, torch_reserved(steps))
    return out


@pytest.fixture(scope="module")
def runs(folder) -> list[sweep.Run]:
    return sweep.analyse(sweep.discover(folder))


@pytest.fixture(scope="module")
def points(runs) -> dict[str, memory_model.ConfigPoint]:
    found, left_out = sweep.memory_points(runs)
    assert left_out == []
    return {p.file.removesuffix(".sqlite").removesuffix(".json"): p for p in found}


def test_parameter_count_is_what_torch_printed_on_the_device(truth):
    printed = {(m, int(c)): float(n) * 1e6 for m, n, c in
               re.findall(r"^(\w+): ([\d.]+)M parameters, batch 8, ctx (\d+)", LOG.read_text(), re.M)}
    assert len(printed) == 6  # the five that ran and the one that ran out
    for (model, ctx), n in printed.items():
        config = next(c for c, _ in truth.values() if c["model"] == model)
        params = memory_model.parameter_count(config["d_model"], config["n_layers"], config["vocab"], ctx)
        assert abs(params - n) <= 0.05e6  # printed to 0.1M


def test_measured_is_torch_max_reserved(points, truth):
    for name, (_, reserved) in truth.items():
        assert points[name].measured_bytes == reserved and points[name].measured_source == "nsys"


FIT_SETS = [s for s in itertools.combinations(RAN, 3) if len({n.split("_")[1] for n in s}) == 2]


@pytest.mark.parametrize("fitted", FIT_SETS, ids=["+".join(s) for s in FIT_SETS])
def test_three_runs_predict_the_unseen_within_10pct(points, truth, fitted):
    rows, y = [], []
    for name in fitted:
        fixed, elements = terms(truth[name][0])
        rows.append(elements)
        y.append(truth[name][1] - fixed)
    coef = np.linalg.lstsq(np.array(rows, float), np.array(y, float), rcond=None)[0]
    fit = memory_model.fit([points[n] for n in fitted])
    assert fit is not None
    for name in set(RAN) - set(fitted):  # real captures the fit did not see
        fixed, elements = terms(truth[name][0])
        expected = fixed + float(np.dot(coef, elements))
        measured = truth[name][1]
        assert memory_model.predict(fit, points[name]) == pytest.approx(expected, rel=1e-9)
        assert abs(expected / measured - 1) < 0.10, (name, expected, measured)


def test_one_context_length_cannot_fit(points):
    at_512 = [points[n] for n in RAN if "_ctx512_" in n]
    assert memory_model.fit(at_512) is None  # scores/activations = ctx/64 in all three: one direction only


def test_the_oom_cell_is_explained(folder, runs, points, truth):
    m = sweep.memory_model(runs)
    export = folder / f"{OOM}.sqlite"
    db = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    gpu = db.execute("SELECT totalMemory FROM TARGET_INFO_GPU").fetchone()[0]
    beside = []
    for name in RAN:  # what each run held outside torch's allocator: every event's bytes less torch's reserved
        every = sqlite3.connect(folder / f"{name}.sqlite").execute(
            "SELECT SUM(bytes) FROM CUDA_GPU_MEMORY_USAGE_EVENTS").fetchone()[0]
        beside.append(every - truth[name][1])
    assert m.gpu_bytes == gpu and m.beside_allocator_bytes == int(np.median(beside))
    assert m.room_bytes == gpu - m.beside_allocator_bytes
    (cell,) = m.out_of_memory
    assert cell.file == f"{OOM}.json" and cell.predicted_bytes == memory_model.predict(m.fit, points[OOM])
    assert cell.over_bytes == cell.predicted_bytes - m.room_bytes > 0  # it does not fit: as it did not
    # what grew from the xl run that fit is mostly the attention scores (x4 with ctx, activations x2) ...
    assert cell.reference == "xl_ctx512_b8.sqlite" and cell.grew_most == "attention_scores"
    assert cell.growth["attention_scores"] > 2 * cell.growth["activations"] > 0
    # ... and that is where it ran out: the failed cudaMalloc (SQL) in the attention scores' range
    failed = db.execute("""SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                           WHERE s.value LIKE 'cudaMalloc%' AND r.returnValue = 2 ORDER BY r.start LIMIT 1""").fetchone()[0]
    open_ranges = [t for (t,) in db.execute("""SELECT s.value FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
                                               WHERE n.eventType = 59 AND n.start <= ? AND n.end >= ?""", (failed, failed))]
    assert "computing_attention_scores" in open_ranges
    held = db.execute("""SELECT SUM(CASE memoryOperationType WHEN 0 THEN bytes ELSE -bytes END)
                         FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE start <= ?""", (failed,)).fetchone()[0]
    assert held < gpu < cell.predicted_bytes  # it died on the way to the prediction


def test_limits_agree_with_what_ran_and_what_did_not(runs):
    m = sweep.memory_model(runs)
    limits = {lim.model: lim for lim in m.limits}
    assert set(limits) == {"medium", "large", "xl"} and all(lim.batch == 8 for lim in limits.values())
    assert limits["medium"].max_ctx >= 1024 and limits["large"].max_ctx >= 1024  # both ran at ctx 1024
    assert 512 <= limits["xl"].max_ctx < 1024  # ran at 512, ran out at 1024
    assert limits["xl"].max_batch_by_ctx[1024] < 8 <= limits["xl"].max_batch_by_ctx[512]


def test_report_on_the_sweep_folder(folder, truth, runs, capsys):
    """`report FOLDER -f json` (the command) and its Markdown, rendered from the module's analysed runs
    as the command renders them (the analysis is the same call: once is enough)."""
    from nsight_tui.cli import main
    from nsight_tui.render import report, sweep as sweep_text
    from nsight_tui.render.memory_model import memory_model_json
    from nsight_tui.render.numbers import bytes_

    markdown = report.sweep_markdown(folder, sweep_text.tables(runs), "process", runs, [],
                                     memory_model_json(sweep.memory_model(runs)))
    text = markdown.split("## GPU memory model")[1]
    table = text.split("### Peak reserved by torch's caching allocator, model × ctx")[1].split("\n\n")[1]
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()[2:]}
    assert set(rows) == {"medium (batch 8)", "large (batch 8)", "xl (batch 8)"}
    for config, reserved in truth.values():  # each measured cell is torch's max reserved (marks)
        assert f"| {bytes_(reserved)} (fit " in rows[f"{config['model']} (batch 8)"]
    assert re.search(r"\| OOM: predicted [\d.]+ GiB \\> [\d.]+ GiB available, over by [\d.]+ GiB; attention scores grew "
                     r"the most", rows["xl (batch 8)"])
    assert "### Why each OOM cell ran out (model terms)" in text and "### What fits (predicted)" in text
    assert main(["report", str(folder), "-f", "json"]) == 0
    m = json.loads(capsys.readouterr().out)["memory_model"]
    assert len(m["predictions"]) == 6 and len(m["out_of_memory"]) == 1 and m["fit"]["files"]
    assert {p["file"]: p["measured_bytes"] for p in m["predictions"] if p["status"] == "ok"} == \
        {f"{n}.sqlite": r for n, (_, r) in truth.items()}
    assert set(m["definitions"]) >= {"measured_bytes", "fixed", "activations", "attention_scores"}
