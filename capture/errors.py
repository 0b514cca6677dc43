"""The capture side's one error type: its message is the single line the user sees."""
from nsight_tui.parsers.read.errors import TraceError


class CaptureError(TraceError):
    """Something the capture needs is missing or went wrong (no nsys, no CUDA, would clobber, ...)."""
