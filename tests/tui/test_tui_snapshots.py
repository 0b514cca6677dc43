"""Snapshots (pytest-textual-snapshot) of every view at the 80x24 minimum, and of the main
ones at 100x30, on the committed sample trace. Update deliberately with
`pytest tests/tui/test_tui_snapshots.py --snapshot-update` and look at the SVGs."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.xz_samples import plain

SMALL, NORMAL = (80, 24), (100, 30)


async def backward(ui) -> None:
    await ui.open_backward_kernels()


async def files_read(ui) -> None:
    await ui.until(lambda: getattr(ui.screen, "view", None) is not None, "the files read")


VIEWS = {
    "ranges": (),
    "backward_kernels": (backward,),
    "launches": (backward, "enter"),
    "correlation": (backward, "enter", "enter"),
    "api_summary": ("3",),
    "all_kernels": ("2",),
}


@pytest.mark.parametrize("view", list(VIEWS))
def test_snapshot_80x24(snap_compare, fixed_app, steps, sample: Path, view):
    assert snap_compare(fixed_app([sample]), terminal_size=SMALL, run_before=steps(*VIEWS[view]))


@pytest.mark.parametrize("view", ["ranges", "backward_kernels", "launches", "correlation", "api_summary"])
def test_snapshot_100x30(snap_compare, fixed_app, steps, sample: Path, view):
    assert snap_compare(fixed_app([sample]), terminal_size=NORMAL, run_before=steps(*VIEWS[view]))


def test_snapshot_help(snap_compare, fixed_app, steps, sample: Path):
    assert snap_compare(fixed_app([sample]), terminal_size=NORMAL, run_before=steps("question_mark"))


@pytest.fixture()
def sweep_files(samples_dir: Path, tmp_path: Path) -> list[Path]:
    """The committed samples under fixed names (the snapshot shows them): two variants of one
    model and ctx, and a file whose name says neither."""
    names = {"small_ctx128.sqlite": "small_ctx128.sqlite", "small_ctx128_fwd.sqlite.xz": "small_ctx128_fwd.sqlite",
             "small_ctx128_fused.sqlite.xz": "run B.sqlite"}
    out = []
    for src, dst in names.items():
        if not (samples_dir / src).exists():
            pytest.skip(f"{src} missing")
        out.append(Path(shutil.copyfile(plain(samples_dir / src), tmp_path / dst)))
    return sorted(out)


@pytest.mark.parametrize("size", [SMALL, NORMAL], ids=["80x24", "100x30"])
def test_snapshot_files(snap_compare, fixed_app, steps, sweep_files, size):
    assert snap_compare(fixed_app(sweep_files), terminal_size=size, run_before=steps(files_read))


def test_snapshot_questions_80x24(snap_compare, fixed_app, steps, sweep_files):
    assert snap_compare(fixed_app(sweep_files), terminal_size=SMALL, run_before=steps(files_read, "t"))


@pytest.fixture()
def agnvtx(samples_dir: Path) -> Path:
    # decompressed into the per-user cache under its own name: the title shows the same file name
    return plain(samples_dir / "small_ctx128_agnvtx.sqlite.xz")


def test_snapshot_autograd_nvtx_80x24(snap_compare, fixed_app, steps, agnvtx):
    """An --autograd-nvtx capture opens on step_N -> forward / backward / optimizer; PyTorch's op
    ranges wait under collapsed `ops` rows, the autograd thread's under the range they ran in."""
    assert snap_compare(fixed_app([agnvtx]), terminal_size=SMALL, run_before=steps())


def test_snapshot_backward_parts(snap_compare, fixed_app, steps, agnvtx):
    assert snap_compare(fixed_app([agnvtx]), terminal_size=NORMAL, run_before=steps("b"))
