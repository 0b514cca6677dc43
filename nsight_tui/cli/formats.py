"""One name for each output format across subcommands: `table` (the terminal's text), `markdown`,
`csv` and `json`; each command offers the ones it can write. `text` and `md`, names other tools use,
are taken as `table` and `markdown`."""
from __future__ import annotations

import argparse

ALIASES = {"text": "table", "md": "markdown"}


def _canonical(value: str) -> str:
    return ALIASES.get(value, value)


def add_format(parser: argparse.ArgumentParser, choices: tuple[str, ...], default: str) -> None:
    parser.add_argument("-f", "--format", default=default, choices=choices, type=_canonical,
                        help=f"output format: {' | '.join(choices)} (default {default})")
