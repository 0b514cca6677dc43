"""A long edit in whatif's Markdown and the TUI's lines: its kind, its count of name patterns and
where it acts, not the kilobytes of kernel-name globs a fix's fuse edit carries (JSON keeps it)."""
from __future__ import annotations

import json

from conftest import ROOT, SAMPLES
from helpers import cli_process
from nsight_tui.render.whatif import EDIT_SHOWN_MAX, edit_shown


def test_short_edits_are_shown_as_they_are():
    for text in ("graph", "speed:gemm=2", "fuse:elementwise@forward", "nosync:cudaStreamSynchronize (fix:sync-stall)"):
        assert edit_shown(text) == text


def test_a_long_fuse_edit_keeps_its_kind_count_and_place():
    patterns = ["*a_very_long_kernel_name_%d*" % i for i in range(9)]
    text = "fuse:" + "+".join(patterns) + "@residual add (grad),3+,<20us (fix:elementwise-chain)"
    assert len(text) > EDIT_SHOWN_MAX
    assert edit_shown(text) == "fuse:(9 name patterns)@residual add (grad),3+,<20us (fix:elementwise-chain)"


def test_a_long_edit_without_a_place_keeps_both_ends():
    text = "speed:" + "x" * 300 + "=2"
    shown = edit_shown(text)
    assert shown.startswith("speed:xxx") and shown.endswith("x=2") and "…" in shown and len(shown) <= EDIT_SHOWN_MAX + 1


def test_the_trainers_elementwise_fix_reads_as_lines():
    path = SAMPLES / "thirdparty" / "hf_trainer_qwen2_l4_b8.sqlite.xz"
    md = cli_process.run(["whatif", str(path), "fix:elementwise-chain"], text=True, cwd=ROOT, timeout=300)
    edits = [ln for ln in md.stdout.splitlines() if ln.startswith("- `fuse:")]
    assert md.returncode == 0 and edits and all(len(ln) < 1000 for ln in edits), max(map(len, edits))
    js = cli_process.run(["whatif", str(path), "fix:elementwise-chain", "-f", "json"], text=True, cwd=ROOT, timeout=300)
    whole = [e["edit"] for e in json.loads(js.stdout)["edits"]]
    assert len(whole) == len(edits) and max(map(len, whole)) > EDIT_SHOWN_MAX  # JSON: every edit whole
