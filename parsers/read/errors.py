"""The error the readers and the model raise for bad input; its message is the line the user sees."""
from nsight_tui.parsers.exception import NsightError


class TraceError(NsightError):
    """A problem with the user's input (missing file, not an nsys export, ...).

    `str(err)` is a complete, single-line explanation, ready to print; `exit_code` the status.
    """
