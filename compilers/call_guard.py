"""The call guard: ordered allow/deny rules decided before a capability call reaches the robot's backend.

A rules document (``schemas/call-guard.schema.json``, in JSON or YAML)::

    {"default": "allow" | "deny",
     "rules": [{"name", "effect": "allow" | "deny", "cap": GLOB, "provider": GLOB,
                "args": {key: value}, "state": {key: {"lt"|"le"|"gt"|"ge"|"eq"|"ne": value}}}]}

The first rule whose ``cap`` (and ``provider``, when given) globs match the call, whose ``args`` are all
equal to the call's, and whose ``state`` conditions all hold on the backend's state snapshot decides the
call; when none matches, ``default`` does. A rule with ``provider`` matches only calls that name a
provider. Values compare strictly: ``true`` is not ``1``, ``1`` is ``1.0``.

State conditions are decided when the call is made. One that cannot be decided (the backend reports no
state, lacks the key, or holds a value the comparison cannot order) denies the call, naming its rule:
the guard fails closed. At validate time the rules are walked as far as the plan decides them: the first
rule that matches on cap and args but has a state condition leaves the call to be decided at run time.
The executor's builtins are never guarded.
"""
from __future__ import annotations

import fnmatch
import math
import pathlib
from dataclasses import dataclass
from typing import Callable

from bt_exec.errors import ConfigError, Issue, Issues

from .catalog import builtin_name
from .config_files import check_schema, read_json_file, read_yaml_file
from .ir import Plan

SCHEMA = "call-guard.schema.json"
DEFAULT_RULE = "default"  # the name a decision by the default carries
_ORDERINGS = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
              "ge": lambda a, b: a >= b}
_MAX_KNOWN = 4096  # plans name capabilities freely: the memo of rules per cap stays bounded


class StateUnknown(Exception):
    """A rule's state condition could not be decided on the snapshot (the guard then denies)."""


@dataclass(frozen=True, slots=True)
class GuardRule:
    """One rule: ``args`` as (key, value) pairs, ``state`` as (key, comparison, value) triples."""

    name: str
    effect: str
    cap: str
    provider: str | None
    args: tuple[tuple[str, object], ...]
    state: tuple[tuple[str, str, object], ...]

    def covers(self, cap: str, provider: str | None) -> bool:
        """Whether the rule's cap and provider globs match."""
        if not fnmatch.fnmatchcase(cap, self.cap):
            return False
        return self.provider is None or (provider is not None and fnmatch.fnmatchcase(provider, self.provider))

    def args_match(self, args: dict | None) -> bool:
        args = args or {}
        return all(key in args and same_value(args[key], value) for key, value in self.args)

    def state_holds(self, snapshot: dict | None) -> bool:
        """Whether every state condition holds; StateUnknown when one cannot be decided."""
        if snapshot is None:
            raise StateUnknown("the backend reports no state")
        for key, comparison, value in self.state:
            if key not in snapshot:
                raise StateUnknown(f"the backend's state has no {key!r}")
            held = snapshot[key]
            if comparison == "eq" or comparison == "ne":
                if same_value(held, value) != (comparison == "eq"):
                    return False
            elif not _is_number(held):
                raise StateUnknown(f"state {key!r} is {_short(held)}, not a number to compare with {value!r}")
            elif not _ORDERINGS[comparison](held, value):
                return False
        return True


@dataclass(frozen=True, slots=True)
class Decision:
    """What the guard decided for one call: ``rule`` names the rule (or ``default``) that decided."""

    allowed: bool
    rule: str
    message: str


class CallGuard:
    """Ordered allow/deny rules with a default (see the module's description)."""

    def __init__(self, default: str, rules: tuple[GuardRule, ...]):
        self.default = default
        self.rules = rules
        self._rules_of: dict[tuple[str, str | None], tuple[GuardRule, ...]] = {}

    @classmethod
    def from_dict(cls, doc: object, what: str = "call guard") -> "CallGuard":
        """The guard of a rules document; ConfigError naming where the document is wrong."""
        check_schema(doc, SCHEMA, what)
        seen: dict[str, int] = {}
        rules = []
        for index, rule in enumerate(doc.get("rules", [])):
            name = rule["name"]
            if name in seen:
                raise ConfigError(f"{what} is invalid at /rules/{index}/name: rule name {name!r} is already the "
                                  f"name of /rules/{seen[name]} (a denial names its rule, so names are unique)")
            seen[name] = index
            rules.append(GuardRule(name, rule["effect"], rule["cap"], rule.get("provider"),
                                   tuple(rule.get("args", {}).items()),
                                   tuple((key, comparison, value) for key, condition in rule.get("state", {}).items()
                                         for comparison, value in condition.items())))
        return cls(doc.get("default", "allow"), tuple(rules))

    @classmethod
    def from_file(cls, path: str | pathlib.Path) -> "CallGuard":
        """The guard of a rules file: YAML for .yaml and .yml, JSON otherwise."""
        what = f"call guard {path}"
        if pathlib.Path(path).suffix.lower() in (".yaml", ".yml"):
            doc = read_yaml_file(path, "call guard")
        else:
            doc = read_json_file(path, "call guard")
        return cls.from_dict(doc, what)

    def rules_for(self, cap: str, provider: str | None) -> tuple[GuardRule, ...]:
        """The rules whose cap and provider globs match, in order (a plan's many ops share a few caps)."""
        key = (cap, provider)
        rules = self._rules_of.get(key)
        if rules is None:
            rules = tuple(rule for rule in self.rules if rule.covers(cap, provider))
            if len(self._rules_of) < _MAX_KNOWN:
                self._rules_of[key] = rules
        return rules

    def passes_untouched(self, cap: str, provider: str | None) -> bool:
        """Whether every call of this cap is allowed whatever its args and state (no rule covers it)."""
        return self.default == "allow" and not self.rules_for(cap, provider)

    def decide(self, cap: str, provider: str | None, args: dict | None,
               state: Callable[[], dict | None] | None) -> Decision:
        """The decision for a call being made; ``state`` gives the backend's snapshot, asked at most once
        and only when a rule with a state condition is reached (None: the backend has no state)."""
        snapshot: dict | None = None
        asked = False
        for rule in self.rules_for(cap, provider):
            if not rule.args_match(args):
                continue
            if rule.state:
                if not asked:
                    snapshot, asked = _snapshot(state), True
                try:
                    if not rule.state_holds(snapshot):
                        continue
                except StateUnknown as exc:
                    return Decision(False, rule.name, f"call guard: rule {rule.name!r} cannot be decided for "
                                                      f"{cap!r} ({exc}), so the call is denied")
            return _decision(rule.effect, rule.name, cap)
        return _decision(self.default, DEFAULT_RULE, cap)

    def decide_statically(self, cap: str, provider: str | None, args: dict | None) -> Decision | None:
        """The decision the plan alone settles; None when a rule with a state condition is reached first."""
        for rule in self.rules_for(cap, provider):
            if not rule.args_match(args):
                continue
            if rule.state:
                return None
            return _decision(rule.effect, rule.name, cap)
        return _decision(self.default, DEFAULT_RULE, cap)

    def check_plan(self, plan: Plan) -> list[Issue]:
        """A ``call_denied`` issue for every do op the guard would deny whatever the robot's state."""
        issues = Issues()
        for op in plan.ops.values():
            if op.kind != "do" or builtin_name(op.cap, op.provider) is not None:
                continue
            decision = self.decide_statically(op.cap, op.provider, op.args)
            if decision is not None and not decision.allowed:
                issues.append(Issue("call_denied", op.path, f"op {op.op_id}: {decision.message}"))
                if issues.dropped:
                    break
        return issues.listed()


def load_call_guard(source: "CallGuard | dict | str | pathlib.Path | None") -> CallGuard | None:
    """A CallGuard from itself, its rules document, or a rules file path; None for None."""
    if source is None or isinstance(source, CallGuard):
        return source
    if isinstance(source, dict):
        return CallGuard.from_dict(source)
    if isinstance(source, (str, pathlib.Path)):
        return CallGuard.from_file(source)
    raise ConfigError(f"a call guard is a rules dict, a rules file path or a CallGuard, not {type(source).__name__}")


def same_value(a: object, b: object) -> bool:
    """JSON equality: booleans equal only booleans, numbers compare by value, containers item by item."""
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _is_number(value: object) -> bool:
    return type(value) in (int, float) and not (type(value) is float and math.isnan(value))


def _snapshot(state: Callable[[], dict | None] | None) -> dict | None:
    if state is None:
        return None
    try:
        snapshot = state()
    except Exception:  # a backend whose state cannot be read has none; state rules then deny
        return None
    return snapshot if isinstance(snapshot, dict) else None


def _decision(effect: str, rule: str, cap: str) -> Decision:
    if effect == "allow":
        return Decision(True, rule, "")
    if rule == DEFAULT_RULE:
        return Decision(False, rule, f"call guard: no rule allows {cap!r} and the default denies it")
    return Decision(False, rule, f"call guard: rule {rule!r} denies {cap!r}")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
