"""The MCP SDK's own client driving `nsight-tui mcp` over stdio (a real server process), for the
MCP tests (a module of its own, not conftest)."""
from __future__ import annotations

import os
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

from helpers import cli_process

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    """The server runs this checkout's package (PYTHONPATH as the tests have it) with the suite's
    cache settings (tests/conftest.py: a folder of this run, off): without them it wrote the
    traces it served into the user's own cache, and its writer walked that growing folder (a
    gigabyte in ~42k files after some runs) for minutes of CPU per test."""
    return {k: v for k, v in os.environ.items()
            if k in ("PYTHONPATH", "HOME", "PATH", "LANG", "TMPDIR") or k.startswith("NSIGHT_TUI_")}


def params(*paths: str, cwd: Path = ROOT) -> StdioServerParameters:
    """`nsight-tui mcp PATHS` as the SDK starts it: a process of its own with its stdin and stdout
    (forked from a pre-imported interpreter: tests/helpers/cli_process.py)."""
    command, *args = cli_process.launcher_argv(["mcp", *paths], _env())
    return StdioServerParameters(command=command, args=args, env=_env(), cwd=str(cwd))


class Answers:
    """The tool calls' results: structured content, or the error text."""

    def __init__(self, results: dict):
        self.results = results

    def ok(self, key: str) -> dict:
        is_error, doc, text = self.results[key]
        assert not is_error, text
        return doc

    def error(self, key: str) -> str:
        is_error, _, text = self.results[key]
        assert is_error, f"{key} answered instead of failing"
        return text


# Where each tool's page is in its answer, and the argument that moves it on (answers are sized:
# a page holds the rows that fit, next_offset says where the rest begin).
PAGES = {"range_tree": ((), "offset"), "range_kernels": ((), "offset"), "kernel_launches": ((), "offset"),
         "nsys_report": ((), "offset"), "ncu": (("table",), "offset"), "diff": (("kernels", "kernels"), "kernels_offset"),
         "idle_window": (("items",), "items_offset")}


def every_page(key: str) -> str:
    """A call's key asking run_calls to follow next_offset to the end: one answer, every row."""
    return f"{key}*"


async def run_calls(server: StdioServerParameters, calls: dict, tools: list | None = None,
                    stderr=None) -> Answers:
    """Each call's (is_error, structured content, text); a key made by every_page follows the
    pages to the end (the rows joined in the first answer, `pages` their count). A call may be a
    function of the answers before it (a kernel an earlier answer named): asked in its turn, in
    the same session, so one server answers calls that depend on each other."""
    out = {}
    with open(os.devnull, "w") as devnull:
        async with stdio_client(server, errlog=stderr or devnull) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                if tools is not None:
                    tools.extend((await session.list_tools()).tools)
                for key, call in calls.items():
                    name, args = call(Answers(out)) if callable(call) else call
                    if key.endswith("*"):
                        out[key[:-1]] = await _every_page(session, name, args)
                        continue
                    res = await session.call_tool(name, args)
                    out[key] = (res.is_error, res.structured_content, _text(res))
    return Answers(out)


def _text(res) -> str:
    return "".join(getattr(c, "text", "") for c in res.content)


async def _every_page(session: ClientSession, name: str, args: dict) -> tuple:
    where, offset_arg = PAGES[name]
    res = await session.call_tool(name, args)
    if res.is_error:
        return res.is_error, res.structured_content, _text(res)
    first = res.structured_content
    page = _at(first, where)
    pages = 1
    while page["next_offset"] is not None:
        res = await session.call_tool(name, {**args, offset_arg: page["next_offset"]})
        assert not res.is_error, _text(res)
        page_n = _at(res.structured_content, where)
        assert page_n["rows"], "a page that moves nothing on"
        _at(first, where)["rows"].extend(page_n["rows"])
        page = page_n
        pages += 1
    joined = _at(first, where)
    joined.update(returned=len(joined["rows"]), next_offset=None, pages=pages)
    joined.pop("cut", None)
    return False, first, ""


def _at(doc: dict, where: tuple) -> dict:
    for k in where:
        doc = doc[k]
    return doc


