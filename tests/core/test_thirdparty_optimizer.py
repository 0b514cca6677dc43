"""`unfused-optimizer` on a third-party run whose AdamW already runs foreach (timm's ViT-small under
`AdamW(foreach=True, capturable=True)`, sample_traces/thirdparty/vitattn_r1_vit_b64_bf16_manual): the
per-tensor kernels beside the multi-tensor ones are still a fusion target, but the fix it gives must not be
foreach=True, which the run has. Its multi-tensor launches a step counted by SQL over the export's own
`optimizer` ranges; what the workload ran from its STEM.steps.json and the script's options."""
from __future__ import annotations

import json
import sqlite3

import pytest

from nsight_tui.parsers import Profile

from conftest import SAMPLES

STEM = "vitattn_r1_vit_b64_bf16_manual"


def multi_tensor_launches_per_step(path) -> float:
    """multi_tensor_apply kernels launched (by the main thread's calls) inside each steady step's `optimizer`
    range, per step."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        text = "COALESCE(n.text, (SELECT value FROM StringIds WHERE id = n.textId))"
        steps = db.execute(f"SELECT n.start, n.\"end\" FROM NVTX_EVENTS n WHERE {text} LIKE 'step\\_%' ESCAPE '\\'").fetchall()
        count = 0
        for s0, s1 in steps:
            count += db.execute(
                f"SELECT COUNT(*) FROM NVTX_EVENTS n JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                f"ON r.start >= n.start AND r.start < n.\"end\" "
                f"JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId "
                f"JOIN StringIds s ON s.id = k.shortName "
                f"WHERE {text} = 'optimizer' AND n.start >= ? AND n.\"end\" <= ? AND s.value = 'multi_tensor_apply_kernel'",
                (s0, s1)).fetchone()[0]
        return count / len(steps)


def test_a_foreach_adamw_is_not_told_to_turn_foreach_on(thirdparty):
    config = json.loads((SAMPLES / "thirdparty" / f"{STEM}.steps.json").read_text())["config"]
    assert config["optim"] == "capturable"  # devruns/thirdparty/timm_vit_twins.py: AdamW(foreach=True, capturable=True)
    path = thirdparty(STEM)
    found = {f.id: f for f in Profile.open(path).report().findings.findings}
    f = found["unfused-optimizer"]
    assert "foreach=True" not in f.fix and "fused=True" in f.fix and "foreach is on already" in f.fix
    want = multi_tensor_launches_per_step(path)
    assert want > 0
    assert f.evidence["multi_tensor_kernels_per_step"] == pytest.approx(want)
