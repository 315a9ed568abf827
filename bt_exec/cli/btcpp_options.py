"""The BehaviorTree.CPP options of ``compile`` and ``run``: ``--to btcpp [-o OUT]`` writes a plan as BT.CPP XML,
``--groot2 PORT`` lets Groot2 watch the run."""
from __future__ import annotations

import argparse
import sys

from ..compilers import Plan, dialect_of
from ..compilers.btcpp.export import ExportError, plan_to_btcpp
from .console import EXIT_FAILED, EXIT_OK, CommandError, error

TARGETS = ("btcpp",)


def groot2_port(text: str) -> int:
    """``--groot2``: a port whose next one is a port too (Groot2's publisher listens there)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 65534:
        raise argparse.ArgumentTypeError(f"expected a port number 1..65534 (it and the next one are served), "
                                         f"got {text!r}")
    return value


def add_export(compile_: argparse.ArgumentParser) -> None:
    compile_.add_argument("--to", choices=TARGETS,
                          help="btcpp: write the plan as BehaviorTree.CPP 4 XML (Groot2 opens it; --dialect btcpp "
                               "reads it back) instead of drawing its tree")
    compile_.add_argument("-o", "--output", metavar="OUT", help="with --to: write to OUT (default: standard output)")


def add_groot2(run: argparse.ArgumentParser) -> None:
    run.add_argument("--groot2", metavar="PORT", type=groot2_port,
                     help="let Groot2 watch the run: its monitor protocol on PORT (request/reply) and PORT+1 "
                          "(publisher); needs pyzmq (the groot2 extra)")
    run.add_argument("--groot2-host", metavar="HOST", default="127.0.0.1",
                     help="address the Groot2 sockets bind to (default: 127.0.0.1; * for every address: the "
                          "protocol has no authentication)")


def export_command(plan: Plan, args: argparse.Namespace) -> int | None:
    """``compile --to``: the plan written as asked (exit 0), or None when ``--to`` was not given."""
    if args.to is None:
        if args.output is not None:
            raise CommandError("-o/--output goes with --to btcpp")
        return None
    context = dialect_of(plan).context_for(args.catalog, None)  # the catalog it was checked against
    try:
        text = plan_to_btcpp(plan, context=context)
    except ExportError as exc:
        raise CommandError(f"cannot write {args.file} as BehaviorTree.CPP XML: {exc}", EXIT_FAILED) from None
    if args.output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return EXIT_OK
    try:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        raise CommandError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    return EXIT_OK


def start_groot2(executor, args: argparse.Namespace):
    """The Groot2 publisher ``run --groot2`` asks for, serving (its address on stderr), else None."""
    if args.groot2 is None:
        return None
    try:
        from ..groot2.publisher import Groot2Error, Groot2Publisher  # only when asked for: it needs pyzmq
    except ImportError as exc:
        raise CommandError(f"--groot2 needs pyzmq ({exc}); install it: pip install 'bt_exec[groot2]'") from None
    try:
        publisher = Groot2Publisher(executor, args.groot2, host=args.groot2_host).start()
    except Groot2Error as exc:
        raise CommandError(f"--groot2: {exc}") from None
    error(f"Groot2: connect to {args.groot2_host}:{args.groot2} (publisher on {args.groot2 + 1})")
    return publisher
