"""`whatif DIR` on per-rank exports says how many steps each rank holds. The step period is the
median over every rank's steady-state step periods, so two ranks of 6 steps said "median of 12
steady-state steps" of a run that made 6: the count read as the run's. Each rank's count now stands
beside it (and `steps_per_rank` in the JSON), checked against SQL over each rank's export."""
from __future__ import annotations

import json
import shutil
import sqlite3

from conftest import SAMPLES
from helpers import cli_process
from helpers.step_sql import steps
from helpers.xz_samples import plain
from nsight_tui.parsers.api import Profile
from nsight_tui.render.whatif import whatif_markdown

FOLDER = SAMPLES / "replay" / "straggler" / "base"
FILES = sorted(FOLDER.glob("*_rank*.sqlite.xz"))


def test_each_ranks_steps_are_said_beside_the_count():
    per_rank = [len(steps(plain(f))) for f in FILES]
    assert per_rank == [6, 6]
    p = Profile.open_ranks(FOLDER).whatif([])
    assert p.steps == sum(per_rank) and p.steps_per_rank == (6, 6)
    assert "median of 12 steady-state steps (6 on each of 2 ranks, each period on its own rank's timeline)" \
        in whatif_markdown(p)
    doc = json.loads(cli_process.run(["whatif", FOLDER, "-f", "json"], text=True, check=True, timeout=300).stdout)
    assert doc["steps"] == 12 and doc["steps_per_rank"] == [6, 6]


def test_ranks_of_other_step_counts_are_said_apart(tmp_path):
    """Rank 1's last step range taken out of its export (a copy): 6 and 5 steps, said so."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    shutil.copyfile(FILES[0], folder / FILES[0].name)
    rank1 = folder / FILES[1].name.removesuffix(".xz")
    shutil.copyfile(plain(FILES[1]), rank1)
    with sqlite3.connect(rank1) as con:
        con.execute("""DELETE FROM NVTX_EVENTS WHERE textId = (SELECT id FROM StringIds WHERE value = 'step_5')""")
    assert len(steps(rank1)) == 5
    p = Profile.open_ranks(folder).whatif([])
    assert p.steps == 11 and p.steps_per_rank == (6, 5)
    assert "median of 11 steady-state steps (6, 5 on 2 ranks" in whatif_markdown(p)


def test_one_export_says_no_ranks():
    p = Profile.open(SAMPLES / "replay" / "sleep" / "small_ctx512_b8_async.sqlite.xz").whatif([])
    assert len(p.steps_per_rank) == 1 and f"median of {p.steps} steady-state steps:" in whatif_markdown(p)
