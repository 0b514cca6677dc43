"""`nsight-tui ranks FILE | DIR | FILES...`: per-rank figures, communication vs compute, the straggler.

One export holding several processes/GPUs (`nsys profile torchrun ...`), or the per-rank exports
of one run (`--output report_%q{RANK}`: a folder, or the files), summarised per file in parallel
worker processes, or on Dask with `--scheduler local|ADDRESS`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nsight_tui.cli.formats import add_format
from nsight_tui.cli.say import note, quiet
from nsight_tui.parsers import TraceError

HELP = "per-rank figures, communication vs compute, the straggler (one export or a folder of per-rank exports)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", help="an export with several ranks, a folder of per-rank exports, or the files")
    add_format(parser, ("markdown", "json"), "markdown")
    parser.add_argument("-o", "--output", default="-", help="write to this file ('-' = stdout, default)")
    parser.add_argument("--force", action="store_true", help="overwrite the output file (never an input)")
    parser.add_argument("--scheduler", help="run the per-file map on Dask: 'local' (a local cluster) or a scheduler "
                                            "address (tcp://host:8786); default: local worker processes")
    parser.add_argument("--workers", type=int, help="worker processes (default: one per core, at most one per file)")


def _files(paths: list[str]) -> list[Path]:
    from nsight_tui.parsers import columnar_kind, export_paths, run_in

    one = Path(paths[0])
    if len(paths) == 1 and one.is_dir() and columnar_kind(one) is None:
        return run_in(one, per_host=True)  # the files `whatif FOLDER` replays as one, where it would
    files = export_paths(paths)
    missing = next((p for p in files if not p.exists()), None)
    if missing is not None:  # said before any worker starts
        raise TraceError(f"{missing}: no such file or folder")
    return files


def run(args: argparse.Namespace) -> int:
    from nsight_tui.render import output

    with output.exit_on_signals():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from nsight_tui.parsers import Profile, ranks_of_files
    from nsight_tui.render import output
    from nsight_tui.render.ranks import ranks_json_text, ranks_markdown
    from nsight_tui.render.safe import markdown as md_text
    from nsight_tui.render.safe import visible

    if args.workers is not None and args.workers < 1:
        raise TraceError("--workers must be at least 1")
    files = _files(args.paths)
    if args.output != "-":  # refuse before any work
        output.check_target(args.output, args.force, inputs=files)
    if len(files) == 1:
        run_ranks = Profile.open(files[0]).ranks()
        title = files[0].name
    else:
        def progress(done: int, total: int) -> None:
            if not quiet() and sys.stderr is not None and sys.stderr.isatty():
                print(f"\rsummarised {done}/{total} files", end="" if done < total else "\n", file=sys.stderr)

        run_ranks = ranks_of_files(files, args.scheduler, args.workers, progress)
        title = f"{len(files)} files in {files[0].parent}"
    if args.format == "json":
        text = ranks_json_text(run_ranks)
    else:
        text = f"# nsight-tui ranks: {md_text(title)}\n\n" + ranks_markdown(run_ranks)
    if args.output == "-":
        output.write_stdout(text)
    else:
        written = output.write_atomic(args.output, text, overwrite=args.force, inputs=files)
        note(f"wrote {visible(str(written))}")
    return 0
