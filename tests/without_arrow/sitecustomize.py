"""Python as if pyarrow and adbc-driver-sqlite were not installed: put this folder first on
PYTHONPATH (`PYTHONPATH=tests/without_arrow python -m pytest tests/core tests/cli`). Every
import of either raises ImportError, so the loader takes its sqlite3 path (parsers/read/columns.py)
and the tests that need them skip; tests/cli/test_without_arrow.py runs the CLI this way."""
import importlib.abc
import sys

BLOCKED = ("pyarrow", "adbc_driver_sqlite", "adbc_driver_manager")


class _Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"No module named {name!r} (hidden by tests/without_arrow)")
        return None


sys.meta_path.insert(0, _Absent())
