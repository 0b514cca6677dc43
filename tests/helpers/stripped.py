"""A copy of an export as an unannotated capture would leave the same run: every NVTX event deleted
(plain sqlite3, independent of nsight_tui)."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path


def without_nvtx(source: Path, target: Path) -> Path:
    shutil.copyfile(source, target)
    target.chmod(0o644)
    con = sqlite3.connect(target)
    con.execute("DELETE FROM NVTX_EVENTS")
    con.commit()
    con.close()
    return target
