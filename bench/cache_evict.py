"""What a big per-user cache costs a first open: `whatif FOLDER` on files the cache has not seen,
beside the same command with `--no-cache` (the floor) and with an empty cache, in one run.

    python bench/cache_evict.py [--slots 1800] [--seed FOLDER] [--copies 8] [--repeat 3] [--cmd CMD]
                                [--baseline CHECKOUT]

The folder: `--copies` copies of sample_traces/ranks_small_ctx128_ddp2/*rank0* named
r_rank0..r_rankN.sqlite.xz, copied afresh for every run (new inodes: files the cache has not seen).
The big cache: `--seed FOLDER` hard-linked (a real cache, e.g. ~/.cache/nsight-tui; nothing in it
is changed), else `--slots` synthetic slots of 3 bundles of 18 small files each (~55 files a
slot, as a real cache holds), made once under the work folder. Each measured run gets its own
copy of that cache (hard links), pointed at by $NSIGHT_TUI_CACHE_DIR, so runs do not feed the
next. Where the code measured keeps a ledger of the slots' sizes (cache.LEDGER), the big cache
is measured twice: as it is (the first write after an upgrade makes the ledger: one walk) and
with its ledger made beforehand (every later write). Wall seconds of the whole command, its
exit (the wait for the cache's writer) included. `--cmd` (default: this checkout,
`python -m nsight_tui`) is what is measured; the ledger is made by this checkout's code.
`--baseline CHECKOUT` (another commit's tree, e.g. `git archive COMMIT | tar -x -C DIR`): its
code is measured on the big cache too, in the same rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RANK0 = next((REPO / "sample_traces" / "ranks_small_ctx128_ddp2").glob("*rank0*.sqlite*"))


def synthetic_cache(folder: Path, n: int) -> None:
    """n slots of 3 bundles, 18 files of 1 KiB and a manifest each (the shape of a real slot)."""
    folder.mkdir(parents=True)
    payload = b"\0" * 1024
    for s in range(n):
        slot = folder / f"{s:032x}"
        for b in ("trace", "process_device_pairs", "range_model"):
            bundle = slot / b
            bundle.mkdir(parents=True)
            files = {}
            for i in range(18):
                (bundle / f"a{i}.npy").write_bytes(payload)
                files[f"k{i}"] = [f"a{i}.npy", len(payload)]
            (bundle / "manifest.json").write_text(json.dumps(
                {"format": 1, "bundle": b, "profile": f"/nowhere/p{s}.sqlite", "files": files, "values": {}}))


def fresh_ranks(work: Path, copies: int) -> Path:
    ranks = Path(tempfile.mkdtemp(prefix="ranks-", dir=work))
    for i in range(copies):
        shutil.copyfile(RANK0, ranks / f"r_rank{i}{''.join(RANK0.suffixes)}")
    return ranks


def run_once(cmd: list[str], ranks: Path, cache: Path | None, code: Path = REPO) -> float:
    env = dict(os.environ, PYTHONPATH=str(code))  # and run there: `python -m` puts the working folder first
    env.pop("NSIGHT_TUI_NO_CACHE", None)
    env.pop("NSIGHT_TUI_CACHE_MAX_GB", None)
    args = [*cmd, "whatif", str(ranks)]
    if cache is None:
        args.append("--no-cache")
    else:
        env["NSIGHT_TUI_CACHE_DIR"] = str(cache)
    t = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        sys.exit(f"{shlex.join(args)} (cache {cache}, code {code}) failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall


def with_ledger(seed: Path, dest: Path) -> Path | None:
    """A hard-linked copy of `seed` with the ledger this checkout keeps (None: it keeps none)."""
    sys.path.insert(0, str(REPO))
    from nsight_tui.parsers.read import cache

    if not hasattr(cache, "LEDGER"):
        return None
    subprocess.run(["cp", "-al", str(seed), str(dest)], check=True)
    cache.evict(dest)  # the ledger replaced, never written through a hard link
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slots", type=int, default=1800)
    ap.add_argument("--seed", type=Path, help="a real cache folder, hard-linked for each run")
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cmd", default=f"{sys.executable} -m nsight_tui")
    ap.add_argument("--work", type=Path, help="work folder (default: a temporary one, removed)")
    ap.add_argument("--baseline", type=Path, help="another checkout, measured on the big cache beside this one")
    args = ap.parse_args()
    cmd = shlex.split(args.cmd)
    work = Path(tempfile.mkdtemp(prefix="cache-evict-", dir=args.work))
    try:
        seed = args.seed
        if seed is None:
            seed = work / "seed"
            synthetic_cache(seed, args.slots)
        nslots = sum(1 for p in seed.iterdir() if p.is_dir() and not p.name.startswith("."))
        nfiles = sum(len(f) for _, _, f in os.walk(seed))
        big = f"cache of {nslots:,} slots, {nfiles:,} files"
        rows = {"--no-cache (floor)": [], "empty cache": [], big: []}
        baseline = f"{big}: baseline {args.baseline}"
        if args.baseline is not None:
            rows[baseline] = []
        kept = with_ledger(seed, work / "seed-ledger")
        if kept is not None:
            rows[f"{big}, its ledger kept"] = []
        for r in range(args.repeat):
            for label in rows:  # the three side by side in each round
                ranks = fresh_ranks(work, args.copies)
                cache = None
                if label.startswith("empty"):
                    cache = work / f"empty-{r}"
                elif label.startswith("cache of"):
                    cache = work / f"big-{r}"
                    subprocess.run(["cp", "-al", str(kept if label.endswith("kept") else seed), str(cache)],
                                   check=True)
                code = args.baseline.resolve() if label == baseline else REPO
                rows[label].append(run_once(cmd, ranks, cache, code))
                shutil.rmtree(ranks)
                if cache is not None:
                    shutil.rmtree(cache, ignore_errors=True)
        print(f"`{args.cmd} whatif FOLDER` ({args.copies} copies of {RANK0.name}, unseen), "
              f"{args.repeat} rounds, load average {os.getloadavg()[0]:.1f} at the end")
        print("| cache | wall s, median (min-max) |")
        print("|---|---|")
        for label, walls in rows.items():
            print(f"| {label} | {statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f}) |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
