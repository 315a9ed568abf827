"""``replay``: a recorded run played back, as ``run`` printed it or through the web console and API."""
from __future__ import annotations

import argparse
import os
import sys
import threading

from ..events.replay import MAX_SPEED, MIN_SPEED, ReplayError, checked_speed, find_run, paced, read_events
from ..replayed_plans import ReplayedPlans
from ..terminal.render import event_line, printable
from ..web.replay_api import ReplayApi
from ..web_token import TOKEN_ENV
from .arguments import port_number, positive_int
from .console import EXIT_INTERRUPTED, EXIT_OK, CommandError, error
from .plan_commands import summary_line

# Longest a Ctrl-C waits to be noticed while a replay plays for the web.
CTRL_C_LATENCY_S = 0.1


def add_commands(commands) -> None:
    replay = commands.add_parser(
        "replay", help="play a recorded run back from its journal (bt-exec run --events, the ROS node's journal_path)",
        description="Play a run of a JSONL journal back at its recorded pace: its event lines and summary as "
                    "bt-exec run prints them, or (--web) through the operator console and HTTP API, which follow it "
                    "as if it ran now. A run with torn or malformed lines, or with events of several runs mixed "
                    "in, is refused (exit 2).")
    replay.add_argument("file", metavar="JOURNAL.jsonl", help="the journal")
    replay.add_argument("--run", metavar="N", type=positive_int,
                        help="which run of the journal, from 1 as bt-exec journal check lists them (default: the last)")
    replay.add_argument("--speed", metavar="X", type=speed, default=1.0,
                        help=f"play X times as fast as recorded, {MIN_SPEED:g} to {MAX_SPEED:g} (default: 1); 0: "
                             "as fast as possible")
    replay.add_argument("--web", metavar="PORT", type=port_number,
                        help="serve the replay on PORT (0: any free port) to the operator console, the HTTP API and "
                             "bt-exec watch --url; it starts playing when a client follows its events, and serves "
                             "on after the end until Ctrl-C")
    replay.add_argument("--web-host", metavar="HOST", default="127.0.0.1",
                        help="address the web app binds to (default: 127.0.0.1); beyond loopback it needs a token "
                             "in $" + TOKEN_ENV)
    replay.set_defaults(command=replay_command)


def speed(text: str) -> float:
    """``--speed``: 0 (as fast as possible), or a factor the replay takes (``checked_speed``)."""
    try:
        return checked_speed(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    except ReplayError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def replay_command(args: argparse.Namespace) -> int:
    try:
        run = find_run(args.file, args.run)
    except OSError as exc:
        raise CommandError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    printer = _Printer()
    if args.web is None:
        plans = ReplayedPlans()
        try:
            for batch in paced(read_events(run), args.speed):
                printer(batch, plans.apply(batch))
                if printer.reader_gone:
                    return EXIT_OK
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        except OSError as exc:
            raise CommandError(f"cannot read {args.file}: {exc.strerror or exc}") from None
        printer.unfinished(plans)
        return EXIT_OK
    return _serve(run, args, printer)


def _serve(run, args: argparse.Namespace, printer: "_Printer") -> int:
    api = ReplayApi(run, args.speed, on_played=printer)
    from ..web.server import WebServer  # only when serving: the replay prints without the web stack

    server = WebServer(api, host=args.web_host, port=args.web, token=os.environ.get(TOKEN_ENV) or None)
    server.start()
    try:
        error(f"web console: {server.url}")
        error(f"replaying run {run.number} of {args.file} ({run.events} events) once a client follows it: open "
              f"the console, or bt-exec watch --url {server.url}")
        try:
            while not api.done.wait(CTRL_C_LATENCY_S):
                continue
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        if api.error is not None:
            raise CommandError(api.error)
        printer.unfinished(api.plans)
        try:  # said inside the wait: a Ctrl-C as soon as it is read ends the wait, not the command
            error(f"the replay ended; still serving {server.url} until Ctrl-C")
            while True:
                threading.Event().wait(3600)
        except KeyboardInterrupt:
            return EXIT_OK
    finally:
        server.close("bt-exec replay ended")


class _Printer:
    """Prints what ``run`` prints: a line per event, a summary per plan as it completes."""

    def __init__(self):
        self.reader_gone = False

    def __call__(self, events: list[dict], completed: list[dict]) -> None:
        lines = [line for line in map(event_line, events) if line is not None]
        lines += [summary_line(record) for record in completed]
        self._print(lines)

    def unfinished(self, plans: ReplayedPlans) -> None:
        """A line for each plan the journal saw start but not complete (the run ended first)."""
        self._print([f"plan {record['plan_id']} did not complete in the journal (its run ended first); ops: "
                     + ", ".join(f"{count} {state}" for state, count in _counts(record).items())
                     for record in plans.unfinished()])

    def _print(self, lines: list[str]) -> None:
        if not lines or self.reader_gone:
            return
        try:
            print(printable("\n".join(lines)), file=sys.stdout, flush=True)
        except BrokenPipeError:  # the reader went away (`| head`): the replay goes on, silently
            self.reader_gone = True


def _counts(record: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in record["ops"]:
        counts[op["state"]] = counts.get(op["state"], 0) + 1
    return counts
