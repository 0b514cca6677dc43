"""What a view, or the command palette, may read of the app: a Protocol, so that no view imports
the app (the app imports the views; a view that imported it back, even for its type, made the
app and every view one import circle). The app satisfies it (mypy checks `app.host_of`).

Views never ask the app to open anything: they post what the user chose (messages.Navigation)
and the navigator decides where it leads.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from nsight_tui.tui.session import Session


class Host(Protocol):
    @property
    def session(self) -> Session | None:
        """The file on screen (None on the files view, or while loading)."""
        ...

    @property
    def multi(self) -> bool:
        """Several files open (the files view is home, not the range tree)."""
        ...

    def held_session(self, path: Path) -> Session | None:
        """The file's session when the app has loaded it already (else None)."""
        ...
