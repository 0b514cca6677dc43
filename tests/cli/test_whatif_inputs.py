"""`whatif -o FILE --force` never writes over a file it reads: the per-rank exports inside a folder
given as the trace, and a kernels-from: twin (a file, or a folder of per-rank exports), not only the
paths as given. Before, `whatif DIR straggler -o DIR/NAME_rank0.sqlite.xz --force` replaced rank 0's
export with the report (the folder was the only input checked)."""
from __future__ import annotations

import hashlib
import shutil

import pytest

from conftest import SAMPLES
from helpers import cli_process

STRAGGLER = SAMPLES / "replay" / "straggler" / "base"
SLEEP = SAMPLES / "replay" / "sleep"


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused(proc, kept, before) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-300:], proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "never writing over an input" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert _digest(kept) == before  # the export as it was


@pytest.fixture
def ranks(tmp_path):
    folder = tmp_path / "ranks"
    shutil.copytree(STRAGGLER, folder)
    return folder


def test_a_rank_export_inside_the_folder_is_never_the_output(ranks):
    target = ranks / "small_ctx512_b8_ddp2_rank0.sqlite.xz"
    before = _digest(target)
    proc = cli_process.run(["whatif", ranks, "straggler", "-o", target, "--force"], text=True, timeout=300)
    _refused(proc, target, before)


def test_a_twin_is_never_the_output(tmp_path, ranks):
    base, twin = tmp_path / "base.sqlite.xz", tmp_path / "twin.sqlite.xz"
    shutil.copyfile(SLEEP / "small_ctx512_b8_async.sqlite.xz", base)
    shutil.copyfile(SLEEP / "small_ctx512_b8_async_host-sleep.sqlite.xz", twin)
    before = _digest(twin)
    proc = cli_process.run(["whatif", base, f"kernels-from:{twin}", "-o", twin, "--force"], text=True, timeout=300)
    _refused(proc, twin, before)
    # a twin that is a folder of per-rank exports: each of them an input too
    target = ranks / "small_ctx512_b8_ddp2_rank1.sqlite.xz"
    before = _digest(target)
    proc = cli_process.run(["whatif", base, f"kernels-from:{ranks}", "-o", target, "--force"], text=True, timeout=300)
    _refused(proc, target, before)
