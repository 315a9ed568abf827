"""What every command shares on the console: exit codes, error lines, output that cannot fail, one-line logs.

Exit codes: 0 success; 1 the plan is invalid, is a control request where a plan
is needed, or failed / was cancelled when run (ROS client commands: the node
refused the request); 2 usage errors and unusable files or options (also: ROS 2
not set up, no node answering); 3 an internal error; 130 a run interrupted with
Ctrl-C.
"""
from __future__ import annotations

import logging
import sys

from ..errors import Issue
from ..terminal.render import printable

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


class CommandError(Exception):
    """A command cannot go on; main prints ``bt-exec: <message>`` and exits with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code


def error(message: str) -> None:
    print(f"bt-exec: {printable(message)}", file=sys.stderr)


def print_refusal(issues: list[Issue]) -> None:
    count = len(issues)
    error(f"plan refused: {count} issue{'s' if count != 1 else ''}")
    for issue in issues:
        print(f"  {printable(issue)}", file=sys.stderr)


def make_output_safe() -> None:
    # Plan text can hold lone surrogates ("\ud800" is valid JSON) or characters the
    # terminal's encoding lacks; print them escaped rather than fail with UnicodeEncodeError.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


class _OneLineFormatter(logging.Formatter):
    """Log records as ``bt-exec: warning: message (Error: detail)``: the CLI never shows a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        message = f"bt-exec: {record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            failure = record.exc_info[1]
            message += f" ({type(failure).__name__}: {failure})"
        return message


def configure_logging() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(_OneLineFormatter())
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
