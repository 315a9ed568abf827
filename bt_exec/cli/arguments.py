"""Option types and the options several commands share."""
from __future__ import annotations

import argparse
import math

from ..compilers import DIALECT_NAMES
from ..compilers.ir import STOP_WHENS
from ..web_token import TOKEN_ENV


def add_input(command: argparse.ArgumentParser) -> None:
    command.add_argument("file", metavar="FILE", help="plan file (JSON, or BehaviorTree.CPP XML), or - for standard "
                                                      "input")
    command.add_argument("--dialect", choices=DIALECT_NAMES, default="auto", help="plan dialect (default: auto)")


def add_catalog(command: argparse.ArgumentParser) -> None:
    command.add_argument("--catalog", metavar="NAME|PATH",
                         help="RTDL: a capability catalog file to check caps and args against; Qwen3: the skill "
                              "catalog, shipped (grant, the default) or a file; BT.CPP XML: a TreeNodesModel file "
                              "(Groot2's palette) to check node IDs and ports against")


def add_scene(command: argparse.ArgumentParser) -> None:
    command.add_argument("--scene", metavar="SCENE.json",
                         help="Qwen3: the scene to check the graph against (without it a graph is refused, no_scene)")


def add_guard(command: argparse.ArgumentParser) -> None:
    command.add_argument("--guard", metavar="RULES",
                         help="call guard rules file (JSON or YAML): allow/deny rules every capability call passes; "
                              "plans with calls it denies are refused, and a call denied at run time fails its op")


def add_fix(command: argparse.ArgumentParser) -> None:
    command.add_argument("--fix", metavar="OUT",
                         help="write the plan repaired by the report's fixes to OUT (a new file renamed over OUT, "
                              "which may be FILE) and check it again; only unambiguous fixes are applied, and OUT "
                              "is written only when one was. Exit 0 if FILE is valid or OUT is, else 1. A reply "
                              "with text around its plan: OUT holds the repaired plan alone (BT.CPP XML is written "
                              "back as XML, its comments kept, its layout not)")
    command.add_argument("--fix-lossy", action="store_true",
                         help="with --fix: also apply the fixes that drop data the input holds (lossy: an unknown "
                              "field removed, which may be a setting written in the wrong place)")


def add_op_timeout(command: argparse.ArgumentParser) -> None:
    command.add_argument("--op-timeout", metavar="S", type=positive_seconds,
                         help="longest one capability call may run; past it the call is cancelled and its op ends "
                              "timeout (default: no limit)")


def add_web(command: argparse.ArgumentParser) -> None:
    command.add_argument("--web", metavar="PORT", type=port_number,
                         help="serve the operator console and HTTP API on PORT (0: any free port) while running; "
                              "its URL is printed on stderr")
    command.add_argument("--web-host", metavar="HOST", default="127.0.0.1",
                         help="address the web app binds to (default: 127.0.0.1); beyond loopback it needs a token "
                              "in $" + TOKEN_ENV)


def stop_point(text: str) -> tuple[str, str]:
    """``OP[:on_enter|on_complete]`` -> (op id, when). Op ids may hold colons: only a known WHEN is split off,
    and whether ``5:on_exit`` is an op or op 5 with a bad WHEN is told once the plan's ops are known (``run``)."""
    op_id, colon, when = text.rpartition(":")
    if not colon or when not in STOP_WHENS:
        op_id, when = text, "on_complete"
    if not op_id.strip():
        raise argparse.ArgumentTypeError(f"{text!r} names no op (expected OP or OP:on_enter or OP:on_complete)")
    return op_id, when


def _number_argument(convert, accept, expected: str):
    """An argparse type: ``convert`` the text, then refuse values ``accept`` rejects, saying what was expected."""
    noun = "whole number" if convert is int else "number"

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {noun}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


def _positive_finite(value: float) -> bool:
    return value > 0 and math.isfinite(value)


positive_int = _number_argument(int, lambda value: value >= 1, "a positive whole number")
non_negative_int = _number_argument(int, lambda value: value >= 0, "a whole number >= 0")
positive_seconds = _number_argument(float, _positive_finite, "a positive number of seconds")
tick_rate = _number_argument(float, _positive_finite, "a positive number of ticks per second")
redraw_rate = _number_argument(float, _positive_finite, "a positive number of redraws per second")
port_number = _number_argument(int, lambda value: 0 <= value <= 65535, "a port number 0..65535")
