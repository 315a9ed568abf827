"""``journal check``: a JSONL journal's runs, torn lines and malformed lines, by line number."""
from __future__ import annotations

import argparse
import datetime
import math

from ..events.journal import JournalCheck, check_journal
from ..terminal.render import one_line, printable
from .console import EXIT_FAILED, EXIT_OK, CommandError

# Longest a header field is shown: the file is anyone's text.
SHOWN_CHARS = 80


def add_commands(commands) -> None:
    journal = commands.add_parser("journal", help="inspect a JSONL journal (bt-exec run --events, the ROS node's "
                                                  "journal_path)")
    actions = journal.add_subparsers(title="actions", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="list a journal's runs, torn lines and malformed lines; exit 0 if it "
                                             "has neither, 1 if it has some",
                               description="Read a journal line by line: each run's header (where appended runs "
                                           "begin), lines cut short by a run that ended mid-line (torn), and lines "
                                           "that are not one JSON event (malformed), with their line numbers.")
    check.add_argument("file", metavar="FILE", help="the journal, a JSONL file")
    check.set_defaults(command=check_command)


def check_command(args: argparse.Namespace) -> int:
    try:
        report = check_journal(args.file)
    except OSError as exc:
        raise CommandError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    print(printable(check_text(report)))
    return EXIT_OK if report.clean else EXIT_FAILED


def check_text(report: JournalCheck) -> str:
    """A summary line, then one line per run, torn line and malformed line."""
    lines = [f"{report.path}: {_count(report.run_count, 'run')}, {_count(report.events, 'event')}, "
             f"{_count(report.torn_count, 'torn line')}, {_count(report.malformed_count, 'malformed line')}"]
    if report.events_before_first_run:
        lines.append(f"  {_count(report.events_before_first_run, 'event')} before the first run header (written by "
                     "a bt_exec that wrote none)")
    for number, (line, header) in enumerate(report.runs, 1):
        lines.append(f"  run {number} at line {line}: {_shown(header.get('journal_run_id'))}, bt_exec "
                     f"{_shown(header.get('bt_exec_version'))}, started {_started(header.get('time'))}")
    lines += _more(report.run_count, len(report.runs), "run")
    lines += [f"  line {line}: torn (cut short: the run writing it ended mid-line)" for line in report.torn]
    lines += _more(report.torn_count, len(report.torn), "torn line")
    lines += [f"  line {line}: malformed: {why}" for line, why in report.malformed]
    lines += _more(report.malformed_count, len(report.malformed), "malformed line")
    return "\n".join(lines)


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def _more(count: int, listed: int, noun: str) -> list[str]:
    return [f"  ... and {_count(count - listed, noun)} more"] if count > listed else []


def _shown(value: object) -> str:
    if isinstance(value, str):
        text = one_line(value[:SHOWN_CHARS + 1])
        return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _shown(repr(value))
    return "(none)" if value is None else f"(a {type(value).__name__})"


def _started(seconds: object) -> str:
    """A header's time (seconds since the epoch) in UTC; as written when it is no such time."""
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and math.isfinite(seconds):
        try:
            return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        except (OverflowError, OSError, ValueError):
            pass
    return _shown(seconds)
