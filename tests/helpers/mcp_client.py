"""The MCP SDK's own client driving `nsight-tui mcp` over stdio (a real server process), for the
MCP tests (a module of its own, not conftest)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    """The server runs this checkout's package (PYTHONPATH as the tests have it)."""
    return {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HOME", "PATH", "LANG", "TMPDIR")}


def params(*paths: str, cwd: Path = ROOT) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "nsight_tui", "mcp", *paths], env=_env(),
                                 cwd=str(cwd))


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


async def run_calls(server: StdioServerParameters, calls: dict[str, tuple[str, dict]], tools: list | None = None,
                    stderr=None) -> Answers:
    out = {}
    with open(os.devnull, "w") as devnull:
        async with stdio_client(server, errlog=stderr or devnull) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                if tools is not None:
                    tools.extend((await session.list_tools()).tools)
                for key, (name, args) in calls.items():
                    res = await session.call_tool(name, args)
                    text = "".join(getattr(c, "text", "") for c in res.content)
                    out[key] = (res.is_error, res.structured_content, text)
    return Answers(out)


