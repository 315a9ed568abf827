"""The BehaviorTree.CPP options of ``compile`` and ``run``: ``--to btcpp [-o OUT]`` writes a plan as BT.CPP XML,
``--groot2 PORT`` lets Groot2 watch the run, ``--blackboard`` seeds the run's blackboard."""
from __future__ import annotations

import argparse
import pathlib
import sys

from ..compilers import Plan, dialect_of
from ..compilers.blackboard import MAX_SEED_BYTES
from ..compilers.btcpp.export import ExportError, plan_to_btcpp
from ..compilers.limits import STRICT_JSON
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


def add_blackboard(run: argparse.ArgumentParser) -> None:
    run.add_argument("--blackboard", metavar="KEY=JSON|FILE.json", action="append", default=[],
                     help="seed the plan's blackboard, which a BT XML plan's {key} ports read: KEY=JSON sets the "
                          "entry KEY to a JSON value (text in quotes: goal='\"kitchen\"'), FILE.json every entry of "
                          "the JSON object it holds; repeatable, a later one wins for a key both set")


def blackboard_seeds(args: argparse.Namespace) -> dict | None:
    """The entries ``--blackboard`` seeds the run's blackboard with (None when it is not given); CommandError naming
    the argument whose value is no JSON, or the file that holds no JSON object. The executor checks the keys and
    values themselves."""
    if not args.blackboard:
        return None
    seeds: dict = {}
    for given in args.blackboard:
        key, equals, text = given.partition("=")
        if equals:
            seeds[key] = _json_of(text, f"--blackboard {given!r}", f"write text in quotes: {key}='\"{text}\"'")
            continue
        try:
            with open(pathlib.Path(given), "rb") as file:
                data = file.read(MAX_SEED_BYTES + 1)
        except OSError as exc:
            raise CommandError(f"--blackboard {given!r}: neither KEY=JSON nor a readable JSON file "
                               f"({exc.strerror or exc})") from None
        if len(data) > MAX_SEED_BYTES:
            raise CommandError(f"--blackboard {given}: over the limit of {MAX_SEED_BYTES} bytes of seeds")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise CommandError(f"--blackboard {given}: not UTF-8 (byte {exc.start})") from None
        entries = _json_of(text, f"--blackboard {given}", "the file holds one JSON object of key -> value")
        if not isinstance(entries, dict):
            raise CommandError(f"--blackboard {given}: the file holds one JSON object of key -> value, not "
                               f"{type(entries).__name__}")
        seeds.update(entries)
    return seeds


def _json_of(text: str, where: str, remedy: str) -> object:
    try:
        return STRICT_JSON.decode(text)
    except ValueError as exc:
        raise CommandError(f"{where}: not JSON ({exc}): {remedy}") from None
    except RecursionError:
        raise CommandError(f"{where}: nested too deep to read") from None
