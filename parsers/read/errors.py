"""The one exception type the model raises for bad input; its message is the line the user sees."""


class TraceError(Exception):
    """A problem with the user's input (missing file, not an nsys export, ...).

    `str(err)` is a complete, single-line explanation, ready to print.
    """

    exit_code = 2

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code
