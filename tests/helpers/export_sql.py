"""Read-only SQL over an export, for expected values the tests write in SQL. Not a test module
(a module of its own, not conftest: `from conftest import` resolves to whichever conftest pytest
loaded last when several test folders are named on one command line)."""
from __future__ import annotations

from pathlib import Path


def sql_rows(path: Path, query: str, *args) -> list[tuple]:
    """The rows of `query` (its `?` bound to `args`) over an export, opened read-only (for expected
    values written in SQL)."""
    import sqlite3

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()
