"""``robonix``: bt_exec in a Robonix deployment, in place of ``robonix-executor``.

It serves the executor's gRPC contracts to Pilot, keeps the executor registered with Atlas, and calls the
capability providers a plan's ``do`` nodes name over MCP, as Atlas resolves them. Its address, Atlas's and
its provider id come from the options or robonix-executor's own environment variables, with its defaults.
"""
from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
import threading

import bt_exec

from ..errors import BtExecError
from ..robonix import DEFAULT_ATLAS, DEFAULT_LISTEN, DEFAULT_PROVIDER_ID
from .arguments import add_guard, add_op_timeout, add_web, positive_seconds, tick_rate
from .console import EXIT_OK, CommandError, error
from .web_commands import start_web

ATLAS_ENV = ("ROBONIX_ATLAS_ENDPOINT", "ROBONIX_ATLAS")
LISTEN_ENV = "ROBONIX_EXECUTOR_LISTEN"
ID_ENV = "ROBONIX_EXECUTOR_PROVIDER_ID"
# How often a wait for Ctrl-C or SIGTERM looks again: a signal handed to another thread is seen this late.
SIGNAL_LATENCY_S = 0.2

DESCRIPTION = ("Run as Robonix's executor: serve its gRPC contracts (execute, control_plan, list_active_plans, "
               "cancel_all_plans, get_health) to Pilot, register with Atlas, and call the providers of each do node "
               "over MCP. A drop-in for robonix-executor, with bt_exec's checks, stop points, pause and step, call "
               "guard, journal and console. Ctrl-C or SIGTERM stops it.")


def add_commands(commands) -> None:
    robonix = commands.add_parser("robonix", help="serve Robonix's executor contracts over gRPC (a drop-in for "
                                                  "robonix-executor)", description=DESCRIPTION)
    robonix.add_argument("--atlas", metavar="HOST:PORT",
                         help=f"Atlas's address (default: ${ATLAS_ENV[0]}, else ${ATLAS_ENV[1]}, else {DEFAULT_ATLAS})")
    robonix.add_argument("--listen", metavar="HOST:PORT",
                         help=f"where the executor's gRPC contracts are served (default: ${LISTEN_ENV}, else "
                              f"{DEFAULT_LISTEN}); port 0 takes a free one")
    robonix.add_argument("--id", metavar="NAME",
                         help=f"the executor's provider id in Atlas (default: ${ID_ENV}, else {DEFAULT_PROVIDER_ID})")
    robonix.add_argument("--catalog", metavar="PATH",
                         help="an RTDL capability catalog file to check each do node's contract and args against")
    robonix.add_argument("--events", metavar="F.jsonl", help="append every event of every plan to this JSONL journal")
    robonix.add_argument("--poll-period", metavar="S", type=positive_seconds, default=2.0,
                         help="how often an asynchronous capability's status is asked (default: 2, as "
                              "robonix-executor)")
    robonix.add_argument("--heartbeat", metavar="S", type=positive_seconds, default=20.0,
                         help="how often Atlas is told the executor is alive, and finds out that Atlas restarted "
                              "(default: 20, as robonix-executor)")
    robonix.add_argument("--tick-rate", metavar="HZ", type=tick_rate, default=100.0,
                         help="ticks per second (default: 100)")
    add_guard(robonix)
    add_op_timeout(robonix)
    add_web(robonix)
    robonix.set_defaults(command=robonix_command)


def settings(args: argparse.Namespace, environ=os.environ) -> tuple[str, str, str]:
    """(Atlas's address, the listen address, the provider id): each option, else robonix-executor's
    environment variable, else its default."""
    atlas = args.atlas or next((environ[name] for name in ATLAS_ENV if environ.get(name)), DEFAULT_ATLAS)
    listen = args.listen or environ.get(LISTEN_ENV) or DEFAULT_LISTEN
    provider_id = args.id or environ.get(ID_ENV) or DEFAULT_PROVIDER_ID
    for what, value in (("--atlas", atlas), ("--listen", listen)):
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit() or int(port) > 65535:
            raise CommandError(f"{what}: not HOST:PORT: {value!r}")
    if not provider_id.strip():
        raise CommandError("--id: the provider id is empty")
    return atlas, listen, provider_id


def robonix_command(args: argparse.Namespace) -> int:
    atlas_address, listen, provider_id = settings(args)
    try:
        from ..robonix.deployment import RobonixExecutor
    except BtExecError as exc:  # the gRPC stubs or a package missing: the error says what to run
        raise CommandError(str(exc)) from None
    catalog = bt_exec.CapabilityCatalog.from_file(args.catalog) if args.catalog else None
    journal = _open_journal(args.events) if args.events else None
    robonix = RobonixExecutor(atlas_address, listen, provider_id, catalog=catalog, call_guard=args.guard,
                              op_timeout_s=args.op_timeout, poll_period_s=args.poll_period,
                              tick_rate_hz=args.tick_rate, heartbeat_s=args.heartbeat)
    web = None
    # Taken from here on: a supervisor may stop it as soon as it says it serves, or while it starts.
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    try:
        if journal is not None:
            robonix.executor.subscribe_batches(journal.write_batch)
        address = robonix.start()
        web = start_web(robonix.control, args)
        # What is loaded by now lives as long as the process: out of the collector's sight, a full collection
        # (which a large plan's objects can trigger) no longer walks it.
        gc.freeze()
        print(f"bt-exec robonix: serving the executor's contracts at {address} as '{provider_id}'; Atlas at "
              f"{atlas_address}", file=sys.stderr, flush=True)
        _wait_for(stop)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if web is not None:
            web.close("bt-exec robonix ended")
        robonix.close()
        if journal is not None:
            journal.close()
            if journal.failed:
                error(f"journal {args.events} failed: {journal.error}, {journal.unwritten} events not written")
    return EXIT_OK


def _open_journal(path: str) -> bt_exec.JsonlJournal:
    try:
        return bt_exec.JsonlJournal(path)
    except OSError as exc:
        raise CommandError(f"cannot write events to {path}: {exc.strerror or exc}") from None


def _wait_for(stop: threading.Event) -> None:
    """Until ``stop`` is set (SIGTERM: a deployment's supervisor stops robonix-executor so) or Ctrl-C."""
    try:
        while not stop.wait(SIGNAL_LATENCY_S):
            continue
    except KeyboardInterrupt:
        pass

