"""Ports of the library's nodes: how each is declared, and its value read as BehaviorTree.CPP reads it."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

_INTEGER = re.compile(r"[+-]?[0-9]{1,12}")  # longer is out of every range read here (and costly to convert)
_BOUNDS = {"int": (-2**31, 2**31 - 1), "unsigned": (0, 2**32 - 1)}
_TRUE = ("1", "true", "TRUE", "True")
_FALSE = ("0", "false", "FALSE", "False")
PORT_TYPES = ("int", "unsigned", "double", "bool", "std::string")
PORT_DIRECTIONS = ("in", "out", "inout")


class PortValueError(ValueError):
    """A port's value is not one of its type (or a key it reads is not set); the message says what was expected."""


def blackboard_key(text: str) -> str | None:
    """The key of a port written ``{key}`` (BehaviorTree.CPP's blackboard remapping), else None."""
    if len(text) > 2 and text[0] == "{" and text[-1] == "}":
        return text[1:-1]
    return None


@dataclass(frozen=True)
class PortSpec:
    """One port of a node: ``direction`` ("in", "out" or "inout"), ``default`` (the text a port not written takes;
    None: the port is required; ``"{key}"``: it reads that blackboard key) and ``type`` (BehaviorTree.CPP's name of
    it: "int", "unsigned", "double", "bool" or "std::string")."""

    direction: str = "in"
    default: str | None = None
    type: str = "std::string"

    def parse(self, value: object) -> object:
        """``value`` (a port's text, or a blackboard value) as this port's type; PortValueError if it is none."""
        kind = self.type
        if kind in _BOUNDS:
            if type(value) is int:
                number = value
            elif isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
                number = int(value)
            else:
                raise PortValueError(f"expected a whole number, got {_shown(value)}")
            low, high = _BOUNDS[kind]
            if not low <= number <= high:
                raise PortValueError(f"{number} is out of the range of {kind} ({low} to {high})")
            return number
        if kind == "double":
            if type(value) in (int, float):
                number = float(value)
            else:
                try:
                    number = float(value) if isinstance(value, str) and len(value) <= 64 else math.nan
                except ValueError:
                    number = math.nan
            if not math.isfinite(number):
                raise PortValueError(f"expected a finite number, got {_shown(value)}")
            return number
        if kind == "bool":
            if type(value) is bool:
                return value
            if value in _TRUE:
                return True
            if value in _FALSE:
                return False
            raise PortValueError(f"expected true or false, got {_shown(value)}")
        return value


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
