"""`report -f json`'s memory.torch_source names where torch's figures were read: the step marks, or
the STEM.steps.json a `capture --no-nvtx` run leaves beside its export. A --no-nvtx export opened
without that file beside it has no torch figures, and the source is null, not the name of a file
that does not exist (it was)."""
from __future__ import annotations

import json
import shutil
import subprocess

from conftest import SAMPLES
from helpers.xz_samples import plain
from helpers import cli_process

STEM = "small_ctx512_b8_async_nonvtx"


def memory_json(path):
    proc = cli_process.run(["report", str(path), "-f", "json"],
                           text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["memory"]


def test_no_sidecar_no_source(tmp_path):
    export = shutil.copyfile(plain(SAMPLES / "nonvtx" / f"{STEM}.sqlite.xz"), tmp_path / f"{STEM}.sqlite")
    m = memory_json(export)
    assert not (tmp_path / f"{STEM}.steps.json").exists()
    assert m["torch_source"] is None and not m["phases"]


def test_the_sidecar_beside_it_is_named(tmp_path):
    export = shutil.copyfile(plain(SAMPLES / "nonvtx" / f"{STEM}.sqlite.xz"), tmp_path / f"{STEM}.sqlite")
    shutil.copyfile(SAMPLES / "nonvtx" / f"{STEM}.steps.json", tmp_path / f"{STEM}.steps.json")
    m = memory_json(export)
    assert m["torch_source"] == f"{STEM}.steps.json"


def test_marks_are_the_source_of_a_marked_export():
    assert memory_json(SAMPLES / "small_ctx128.sqlite")["torch_source"] == "step marks"
