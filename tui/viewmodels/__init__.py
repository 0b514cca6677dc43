"""View models: what each screen shows, computed without Textual.

The rule (an import-linter contract in pyproject.toml): nothing in this package, nor
`tui/session.py`, `tui/table_model.py` or `tui/tree_source.py`, imports `textual`. Each module
turns the model (`nsight_tui.parsers`) into plain dataclasses and TableModels for one view;
`Session` caches them per file and attribution mode. Screens ask the Session from a
`@work(thread=True)` worker, get the result back as a typed message (`tui/messages.py`)
and only render it. A new view adds one module here, one method on Session, one message.
"""
