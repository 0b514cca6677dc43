"""`nsight-tui mcp FILE|DIR...`: a Model Context Protocol server over stdio for agents.

Serves only the profiles named here (files, or the exports inside a folder), read-only.
Needs the `mcp` extra: pip install 'nsight-tui[mcp]'.
"""
from __future__ import annotations

import argparse
import importlib.util

from nsight_tui.parsers.read.errors import TraceError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="FILE|DIR",
                        help="the profiles the server may read: nsys SQLite exports, parquetdir/arrowdir "
                        "exports, or folders of them (nothing else is ever read)")


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mcp") is None or importlib.util.find_spec("mcp.server.mcpserver") is None:
        raise TraceError("the MCP server needs the mcp package (version 2): pip install 'nsight-tui[mcp]'")
    from nsight_tui.mcp.server import serve

    serve(args.paths)
    return 0
