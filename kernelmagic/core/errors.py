"""The errors a file can raise on the way in, in one place (imports nothing).

``ProfileFileError`` (a ValueError) is any file ``kernelmagic.load`` cannot open;
``TraceFileError`` is one of them, for torch's trace files; ``NotATrace`` tells the trace
reader's caller that the JSON is a kernelmagic profile, not a trace. Each message is one
line naming the file.
"""

from __future__ import annotations


class ProfileFileError(ValueError):
    """A profile file that is missing, not JSON, or of another format or version."""


class TraceFileError(ProfileFileError):
    """A trace file that cannot be read: its one-line message names the file and the fault."""


class NotATrace(Exception):
    """The JSON has a top-level ``format`` key and no ``traceEvents``: a profile, not a trace."""
