"""The `nsight-tui` command line: one module per subcommand behind one protocol.

Each subcommand module has ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``.
They are imported lazily so `nsight-tui stats` never pays for Textual and
`nsight-tui FILE` (the ``open`` command, the default) never pays for torch.
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys

from nsight_tui import __version__

# name -> (module, help)
SUBCOMMANDS = {
    "stats": ("nsight_tui.cli.stats", "nsys-stats compatible reports (nvtx_sum, cuda_gpu_kern_sum, ...)"),
    "report": ("nsight_tui.cli.report", "answers to the profiling questions for one trace or a sweep directory"),
    "diff": ("nsight_tui.cli.diff", "what changed between two runs (ranges, kernels, families) and why the step moved"),
    "ncu": ("nsight_tui.cli.ncu", "Nsight Compute report: per-kernel hardware figures joined to the export's NVTX ranges"),
    "ranks": ("nsight_tui.cli.ranks", "per-rank figures, communication vs compute, the straggler"),
    "whatif": ("nsight_tui.cli.whatif", "replay the captured step with edits: the predicted step and what holds it"),
    "mcp": ("nsight_tui.cli.mcp", "a Model Context Protocol server over stdio: the same answers, for agents"),
    "serve": ("nsight_tui.cli.serve", "the TUI in a web browser (textual-serve), on 127.0.0.1 by default"),
    "capture": ("nsight_tui.cli.capture", "run the NVTX-annotated GPT-2 workload, or `-- CMD` your own, under nsys and export SQLite"),
    "cache": ("nsight_tui.cli.cache", "list (or clear) the per-user cache that makes a second open of a file fast"),
}
OPEN = ("nsight_tui.cli.open", "Terminal explorer for Nsight Systems SQLite exports.")
HELP_WORDS = ("help", "-h", "--help")
VERSION_WORDS = ("--version", "-V")
USAGE = "usage: nsight-tui [OPTIONS] FILE [FILE ...] | nsight-tui {%s} ..." % ",".join(SUBCOMMANDS)


def _subcommand_rows() -> str:
    width = max(len(name) for name in SUBCOMMANDS)
    return "\n".join(f"  {name:<{width}}  {text}" for name, (_, text) in SUBCOMMANDS.items())


def _epilog() -> str:
    return (f"subcommands:\n{_subcommand_rows()}\n\n`nsight-tui help SUBCOMMAND` (or SUBCOMMAND --help) for one; "
            "`nsight-tui completion bash|zsh` prints a shell completion script; -q (any command that opens a "
            "profile) says nothing on stderr but errors.")


def _overview() -> str:
    """What a bare `nsight-tui` prints: the usage with every subcommand."""
    return f"{USAGE}\n\n{OPEN[1]} `nsight-tui FILE.sqlite` opens the explorer.\n\n{_epilog()}\n"


# Words a user (or an agent) types for what another subcommand shows: the subcommand that has it
WHERE_IT_IS = {"findings": "report", "finding": "report", "fixes": "report", "fix": "report", "kernels": "stats",
               "nvtx": "stats", "compare": "diff", "replay": "whatif", "what-if": "whatif", "predict": "whatif"}


def _not_a_file(word: str) -> str | None:
    """The subcommand a mistyped first word was meant to be, when it names no file either."""
    if os.path.exists(word) or os.sep in word or "." in word:
        return None
    if word.lower() in WHERE_IT_IS:
        return WHERE_IT_IS[word.lower()]
    close = difflib.get_close_matches(word, [*SUBCOMMANDS, "help", "open"], n=1, cutoff=0.6)
    return close[0] if close else None


def _parser(module_name: str, prog: str, help_text: str, epilog: str | None = None):
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=prog, description=help_text, epilog=epilog)
    module.add_arguments(parser)
    if module_name not in NO_QUIET:
        parser.add_argument("-q", "--quiet", action="store_true",
                            help="say no progress and no notes on stderr; results and errors only")
    if module_name not in NO_TRACE:
        parser.add_argument("--no-cache", action="store_true",
                            help="neither read nor write the per-user cache of loaded files (`nsight-tui cache`)")
    return parser, module


NO_TRACE = ("nsight_tui.cli.capture", "nsight_tui.cli.cache")  # the commands that open no profile
# capture's progress is its runs' own output, on stdout; cache says only what was asked
NO_QUIET = NO_TRACE
QUIET_WORDS = ("-q", "--quiet")


def _finish_cache() -> None:
    """A command that ends normally waits for the copies it started into the per-user cache
    (background threads, so the command's own work went on meanwhile); a signal does not."""
    cache = sys.modules.get("nsight_tui.parsers.read.cache")  # not imported: nothing was loaded
    if cache is not None:
        cache.wait_all()


def _parsed(parser, argv: list[str]):
    # options anywhere among the positionals, as a user types them: `whatif TRACE -f json speed:gemm=2`
    # (argparse alone stops the edits at the first option and calls the rest "unrecognized arguments");
    # not for a command that passes its tail on untouched (`capture -- CMD`)
    tail = any(a.nargs in (argparse.REMAINDER, argparse.PARSER) for a in parser._actions)
    args = parser.parse_args(argv) if tail else parser.parse_intermixed_args(argv)
    if getattr(args, "no_cache", False):
        # An environment variable, so the processes a command starts (`serve`'s app) skip it too.
        os.environ["NSIGHT_TUI_NO_CACHE"] = "1"
    if getattr(args, "quiet", False):
        from nsight_tui.cli.say import QUIET_ENV

        os.environ[QUIET_ENV] = "1"  # read by what runs below: the cache's note, `serve`'s app
    return args


WRITERS = ("stats", "report", "diff", "ranks", "ncu", "whatif")  # the commands that write outputs from a profile


def _subcommand(argv: list[str]) -> int:
    module_name, help_text = SUBCOMMANDS[argv[0]]
    parser, module = _parser(module_name, f"nsight-tui {argv[0]}", help_text)
    code = int(module.run(_parsed(parser, argv[1:])) or 0)
    _finish_cache()
    return code


def _front_matter(argv: list[str]) -> int | None:
    """Usage, help, the version and a mistyped subcommand: answered before any profile is opened."""
    if not argv:
        print(_overview(), end="", file=sys.stderr)
        return 2
    first = argv[0]
    if first in VERSION_WORDS:
        print(f"nsight-tui {__version__}")
        return 0
    if first in HELP_WORDS and len(argv) == 1:
        return _open(["--help"])
    if first == "help":
        name = argv[1]
        if name == "open":
            return _open(["--help"])
        if name not in SUBCOMMANDS:
            return _unknown(name)
        return _subcommand([name, "--help"])
    if first == "completion":
        from nsight_tui.cli.completion import script

        shell = argv[1] if len(argv) > 1 else "bash"
        text = script(shell, SUBCOMMANDS, _options)
        if text is None:
            print(f"nsight-tui: completion: {shell!r} is not supported (bash, zsh)", file=sys.stderr)
            return 2
        print(text, end="")
        return 0
    if first not in (*SUBCOMMANDS, "open") and not first.startswith("-") and not os.path.exists(first):
        guess = _not_a_file(first)
        if guess is not None:
            return _unknown(first, guess)
    return None


def _unknown(word: str, guess: str | None = None) -> int:
    guess = guess if guess is not None else _not_a_file(word)
    hint = f"; did you mean '{guess}'?" if guess else f" (subcommands: {', '.join(SUBCOMMANDS)})"
    print(f"nsight-tui: '{word}' is neither a subcommand nor a file{hint}", file=sys.stderr)
    return 2


def _options(name: str) -> list[str]:
    """Every option string of one subcommand (`open` for the explorer), for shell completion."""
    module_name, help_text = SUBCOMMANDS.get(name, OPEN)
    parser, _ = _parser(module_name, f"nsight-tui {name}", help_text)
    return sorted(opt for action in parser._actions for opt in action.option_strings)


def _open(argv: list[str]) -> int:
    parser, module = _parser(OPEN[0], "nsight-tui", OPEN[1], _epilog())
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.usage = USAGE.removeprefix("usage: ")
    code = int(module.run(_parsed(parser, argv)) or 0)
    _finish_cache()
    return code


def main(argv: list[str] | None = None) -> int:
    from nsight_tui.cli.say import QUIET_ENV

    before = os.environ.get(QUIET_ENV)
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    finally:  # `-q` holds for this command only (tests run several in one process)
        if before is None:
            os.environ.pop(QUIET_ENV, None)
        else:
            os.environ[QUIET_ENV] = before


def _main(argv: list[str]) -> int:
    if argv and argv[0] in QUIET_WORDS and len(argv) > 1 and argv[1] in SUBCOMMANDS:
        argv = [argv[1], argv[0], *argv[2:]]  # `nsight-tui -q report FILE`, as uv takes it before the command
    try:
        early = _front_matter(argv)
        if early is not None:
            return early
        if argv and argv[0] in WRITERS:
            # SIGTERM/SIGHUP end these with 128 + the signal from here on, before the ~0.5 s of
            # imports: a signal then was lost when the process began with it ignored (a harness,
            # nohup), and the command carried on and wrote its files.
            from nsight_tui.render.output import exit_on_signals  # cheap: no pandas, no numpy

            with exit_on_signals():
                return _subcommand(argv)
        if argv and argv[0] in SUBCOMMANDS:
            return _subcommand(argv)
        return _open(argv[1:] if argv and argv[0] == "open" else argv)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # one clear line, never a traceback, for anything we did not foresee
        from nsight_tui.render.output import signalled

        sig = signalled()
        if sig is not None:  # the signal's SystemExit, turned into another exception on its way
            return 128 + sig  # up (an import in C code makes it an ImportError)
        from nsight_tui.parsers import NsightError  # the root of every error meant for the user
        from nsight_tui.render.safe import visible  # messages quote paths and names: one line, no escapes

        if isinstance(exc, NsightError):
            print(f"nsight-tui: {visible(exc)}", file=sys.stderr)
            return exc.exit_code
        print(f"nsight-tui: internal error: {type(exc).__name__}: {visible(exc)}", file=sys.stderr)
        return 70
