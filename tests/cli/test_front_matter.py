"""What the command line says before it opens anything: usage, help, the version, a mistyped
subcommand, shell completion (the conventions of nsys, ruff and uv)."""
from __future__ import annotations

import asyncio
import importlib.metadata
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from nsight_tui import __version__
from nsight_tui.cli import SUBCOMMANDS, main

ROOT = Path(__file__).resolve().parents[2]


def exit_code(argv: list[str]) -> int:
    """The command's exit status, whether `main` returns it or argparse exits with it (--help)."""
    try:
        return main(argv)
    except SystemExit as done:
        return int(done.code or 0)


def test_one_version_everywhere(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"nsight-tui {__version__}\n"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # the package's version is read from the code, so the two cannot drift apart
    assert "version" not in project and "version" in project["dynamic"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_installed_metadata_carries_the_code_version():
    try:
        installed = importlib.metadata.version("nsight-tui")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("nsight-tui is not installed (run from a bare checkout)")
    if importlib.metadata.distribution("nsight-tui").locate_file("") and installed != __version__:
        # an install made from another checkout (an editable install of a sibling worktree)
        origin = importlib.metadata.distribution("nsight-tui").read_text("direct_url.json") or ""
        if str(ROOT) not in origin:
            pytest.skip(f"nsight-tui is installed from elsewhere: {origin}")
    assert installed == __version__


def test_mcp_server_announces_the_version():
    pytest.importorskip("mcp.server.mcpserver", reason="needs the mcp SDK version 2")
    from mcp import ClientSession, stdio_client
    from helpers.mcp_client import params

    async def server_version() -> str:
        async with stdio_client(params(str(ROOT / "sample_traces" / "small_ctx128.sqlite"))) as (read, write):
            async with ClientSession(read, write) as session:
                result = await session.initialize()
                return result.server_info.version

    assert asyncio.run(server_version()) == __version__


@pytest.mark.parametrize("words", [["help"], ["--help"], ["-h"]])
def test_help_lists_every_subcommand_and_the_explorer_options(words, capsys):
    assert exit_code(words) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: nsight-tui [OPTIONS] FILE")
    for name, (_, text) in SUBCOMMANDS.items():
        assert re.search(rf"^  {name} +{re.escape(text)}$", out, re.M), name
    assert "--attribution" in out  # the explorer's own options too


def test_bare_command_prints_usage_and_fails(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: nsight-tui") and all(name in err for name in SUBCOMMANDS)


def test_help_of_one_subcommand(capsys):
    assert exit_code(["help", "report"]) == 0
    assert capsys.readouterr().out.startswith("usage: nsight-tui report")


@pytest.mark.parametrize(("typed", "meant"), [("reprot", "report"), ("stat", "stats"), ("dif", "diff"),
                                               ("rank", "ranks"), ("findings", "report"), ("replay", "whatif")])
def test_a_mistyped_subcommand_is_named(typed, meant, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([typed, "x.sqlite"]) == 2
    err = capsys.readouterr().err
    assert err == f"nsight-tui: '{typed}' is neither a subcommand nor a file; did you mean '{meant}'?\n"


def test_open_is_a_word_of_its_own(capsys, tmp_path, monkeypatch):
    """`nsight-tui open FILE` opens FILE: the word is not a mistyped one (it was answered with "did you
    mean 'open'?")."""
    monkeypatch.chdir(tmp_path)
    assert main(["open", "missing.sqlite"]) == 2
    assert capsys.readouterr().err == "nsight-tui: missing.sqlite: no such file\n"


def test_a_file_named_like_a_subcommand_still_opens(tmp_path, monkeypatch, capsys):
    """A word that names an existing file is a file, however close to a subcommand it is."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reprot").write_bytes(b"not a profile")
    code = main(["reprot"])
    err = capsys.readouterr().err
    assert code == 2 and "did you mean" not in err and "reprot" in err


def test_help_of_an_unknown_subcommand(capsys):
    assert main(["help", "reprot"]) == 2
    assert "did you mean 'report'" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.parametrize(("line", "expected"), [
    ("nsight-tui rep", {"report"}),
    ("nsight-tui st", {"stats"}),
    ("nsight-tui diff --fail", {"--fail-slower"}),
    ("nsight-tui report --fail-", {"--fail-on"}),
])
def test_bash_completion_completes_subcommands_and_options(line, expected, tmp_path, capsys):
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    words = line.split(" ")
    probe = (f"{script}\nCOMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}; _nsight_tui; "
             'printf "%s\\n" "${COMPREPLY[@]}"')
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == expected


def test_completion_of_another_shell_is_refused(capsys):
    assert main(["completion", "fish"]) == 2
    assert "not supported" in capsys.readouterr().err


def test_one_name_per_output_format_across_subcommands():
    """Every subcommand names its formats from one vocabulary; `text`/`md` are taken as `table`/`markdown`."""
    from nsight_tui.cli import _parser
    from nsight_tui.cli.formats import ALIASES

    vocabulary = {"table", "markdown", "csv", "json"}
    offered = {}
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        parser, _ = _parser(module_name, name, help_text)
        for action in parser._actions:
            if "--format" in action.option_strings:
                offered[name] = set(action.choices)
                assert action.type("text") == "table" and action.type("md") == "markdown"
    assert set(offered) >= {"stats", "report", "diff", "ncu", "ranks"}
    for name, choices in offered.items():
        assert choices <= vocabulary, (name, choices)
    assert set(ALIASES.values()) <= vocabulary


@pytest.mark.parametrize("command", [["report", "{trace}", "-o", "{out}"],
                                     ["stats", "{trace}", "-r", "nvtx_sum", "-f", "csv", "-o", "{prefix}"],
                                     ["ranks", "{trace}", "-o", "{out}"]])
def test_an_existing_output_is_kept_with_its_own_exit_status(command, tmp_path, capsys):
    trace = ROOT / "sample_traces" / "small_ctx128_fwd.sqlite.xz"  # read compressed as it is
    out = tmp_path / "out.md"
    prefix = tmp_path / "out"
    for existing in (out, tmp_path / "out_nvtx_sum.csv"):
        existing.write_text("kept\n")
    argv = [w.format(trace=trace, out=out, prefix=prefix) for w in command]
    assert main(argv) == 73  # sysexits' EX_CANTCREAT, not the usage error's 2
    err = capsys.readouterr().err
    assert "exists; not overwriting" in err and err.count("\n") == 1
    assert out.read_text() == "kept\n" and (tmp_path / "out_nvtx_sum.csv").read_text() == "kept\n"
