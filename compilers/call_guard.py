"""The call guard: ordered allow/deny rules decided before a capability call reaches the robot's backend.

A rules document (``schemas/call-guard.schema.json``, in JSON or YAML)::

    {"default": "allow" | "deny",
     "rules": [{"name", "effect": "allow" | "deny", "cap": GLOB, "provider": GLOB,
                "args": {key: value}, "state": {key: {"lt"|"le"|"gt"|"ge"|"eq"|"ne": value}}}]}

The first rule whose ``cap`` (and ``provider``, when given) globs match the call, whose ``args`` are all
equal to the call's, and whose ``state`` conditions all hold on the backend's state snapshot decides the
call; when none matches, ``default`` does. Values compare strictly: ``true`` is not ``1``, ``1`` is ``1.0``.

A call is judged by the capability it reaches, never by how it was spelled, so that two spellings of one
capability cannot get two verdicts (``CallNames``): a skill and its aliases are one capability (a rule
naming any of them covers them all), and the cap and provider are those the call is routed by: the
provider is the call's own, else its cap's prefix before the first dot, as the backend names it when
it says (``routed_provider``: the ROS backend serves ``arm_.move`` from the server of ``arm``, so the
call is judged as ``arm.move``, and a rule's literal names are read the same way). A rule naming an
alias is applied to its skill with a warning; one naming a known skill in another case, or holding
whitespace, could match no call and is refused at load.

State conditions are decided when the call is made. One that cannot be decided (the backend reports no
state, lacks the key, or holds a value the comparison cannot order) denies the call, naming its rule:
the guard fails closed. At validate time the rules are walked as far as the plan decides them: the first
rule that matches on cap and args but has a state condition leaves the call to be decided at run time.
The executor's builtins are never guarded.
"""
from __future__ import annotations

import fnmatch
import logging
import math
import pathlib
import re
from dataclasses import dataclass, replace
from typing import Callable

from bt_exec.errors import ConfigError, Issue, Issues

from .catalog import builtin_name
from .config_files import check_schema, read_json_file, read_yaml_file
from .ir import Plan
from .skill_catalog import SkillCatalog

log = logging.getLogger(__name__)

SCHEMA = "call-guard.schema.json"
DEFAULT_RULE = "default"  # the name a decision by the default carries
_ORDERINGS = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
              "ge": lambda a, b: a >= b}
_MAX_KNOWN = 4096  # plans name capabilities freely: the memo of rules per cap stays bounded
_GLOB_CHARS = re.compile(r"[*?\[]")
_WHITESPACE = re.compile(r"\s")
_GUARDED_KINDS = ("do", "step")  # ops that call a capability: RTDL and arena do ops, step-graph steps

RouteProvider = Callable[[str, "str | None"], "str | None"]


def routed_provider(cap: str, provider: str | None) -> str | None:
    """The provider a call is routed by when its backend says nothing else: its own, else its cap's
    prefix before the first dot (``arm.move`` -> ``arm``), else none."""
    if provider:
        return provider
    prefix, dot, _ = cap.partition(".")
    return prefix if dot and prefix else None


class CallNames:
    """The names a call is judged by: every spelling of the capability it reaches (a skill and its aliases
    in ``skills``), and the provider it is routed by (``route``: the backend's routing, ``routed_provider``
    when it has none of its own)."""

    def __init__(self, skills: SkillCatalog | None = None, route: RouteProvider | None = None):
        self.skills = skills
        self.route = route or routed_provider
        self._spellings: dict[str, tuple[str, ...]] = {}
        if skills is not None:
            for name in skills.skills:
                self._spellings[name] = (name,)
            for alias, name in skills.aliases.items():
                self._spellings[name] += (alias,)

    def canonical(self, cap: str) -> str:
        """The capability ``cap`` names: the skill an alias stands for, else ``cap`` as it is."""
        resolved = self.skills.resolve(cap) if self.skills is not None else None
        return resolved or cap

    def spellings(self, cap: str) -> tuple[str, ...]:
        """Every name of the capability ``cap`` names, the canonical one first."""
        canonical = self.canonical(cap)
        return self._spellings.get(canonical, (canonical,))

    def routed(self, cap: str, provider: str | None) -> tuple[str, str | None]:
        """The cap and provider a call is routed by: the provider as the backend names it, and a cap whose
        prefix spelled that provider written with the provider's routed name (``arm_.move`` -> ``arm.move``
        where a backend serves provider ``arm_`` as ``arm``)."""
        routed = self.route(cap, provider)
        prefix, dot, rest = cap.partition(".")
        if dot and prefix and routed and routed != prefix and prefix == (provider or prefix):
            return f"{routed}.{rest}", routed
        return cap, routed

    def routed_rule(self, rule: "GuardRule") -> "GuardRule":
        """``rule`` with its literal names routed as a call's are (globs are left to match routed names)."""
        if self.route is routed_provider:
            return rule
        cap, provider = rule.cap, rule.provider
        prefix, dot, _ = cap.partition(".")
        if dot and prefix and not _GLOB_CHARS.search(prefix):
            cap = self.routed(cap, None)[0]
        if provider is not None and not _GLOB_CHARS.search(provider):
            provider = self.route("", provider) or provider
        return rule if (cap, provider) == (rule.cap, rule.provider) else replace(rule, cap=cap, provider=provider)

    def check_rule(self, rule: "GuardRule", what: str, index: int) -> str | None:
        """A warning for a rule naming an alias (it applies to the skill); ConfigError for a rule naming a
        known skill or alias in another case (names are case-sensitive: it could match no call)."""
        if self.skills is None or _GLOB_CHARS.search(rule.cap):
            return None
        if rule.cap in self.skills.aliases:
            skill = self.skills.aliases[rule.cap]
            return (f"{what} at /rules/{index}: rule {rule.name!r} names {rule.cap!r}, an alias of skill {skill!r}: "
                    f"it applies to {skill!r} under every spelling ({', '.join(map(repr, self._spellings[skill]))})")
        if rule.cap in self._spellings:
            return None
        folded = rule.cap.casefold()
        for name in [*self.skills.skills, *self.skills.aliases]:
            if name.casefold() == folded:
                raise ConfigError(f"{what} is invalid at /rules/{index}/cap: rule {rule.name!r} names {rule.cap!r}, "
                                  f"which no call is named (names are case-sensitive): the skill is "
                                  f"{self.canonical(name)!r}")
        return None


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

    def covers(self, spellings: tuple[str, ...], provider: str | None) -> bool:
        """Whether the rule's cap glob matches a spelling of the capability, and its provider glob the
        provider the call is routed by."""
        if not any(fnmatch.fnmatchcase(name, self.cap) for name in spellings):
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

    def __init__(self, default: str, rules: tuple[GuardRule, ...], names: CallNames | None = None,
                 what: str = "call guard"):
        self.default = default
        self.names = names or CallNames()
        self.what = what
        self.warnings: tuple[str, ...] = ()
        for index, rule in enumerate(rules):
            if warning := self.names.check_rule(rule, what, index):
                self.warnings += (warning,)
                log.warning("%s", warning)
        self.written = rules
        self.rules = tuple(map(self.names.routed_rule, rules))  # as calls are judged: routed names
        self._rules_of: dict[tuple[str, str | None], tuple[tuple[GuardRule, ...], str | None]] = {}

    @classmethod
    def from_dict(cls, doc: object, what: str = "call guard", names: CallNames | None = None) -> "CallGuard":
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
            for field in ("cap", "provider"):
                if field in rule and _WHITESPACE.search(rule[field]):
                    raise ConfigError(f"{what} is invalid at /rules/{index}/{field}: {rule[field]!r} holds "
                                      f"whitespace, which no {field} a call is routed by holds (it could match none)")
            rules.append(GuardRule(name, rule["effect"], rule["cap"], rule.get("provider"),
                                   tuple(rule.get("args", {}).items()),
                                   tuple((key, comparison, value) for key, condition in rule.get("state", {}).items()
                                         for comparison, value in condition.items())))
        return cls(doc.get("default", "allow"), tuple(rules), names, what)

    def naming(self, names: CallNames) -> "CallGuard":
        """These rules judging calls by ``names`` (an executor's skill catalog and its backend's routing)."""
        return CallGuard(self.default, self.written, names, self.what)

    @classmethod
    def from_file(cls, path: str | pathlib.Path, names: CallNames | None = None) -> "CallGuard":
        """The guard of a rules file: YAML for .yaml and .yml, JSON otherwise."""
        what = f"call guard {path}"
        if pathlib.Path(path).suffix.lower() in (".yaml", ".yml"):
            doc = read_yaml_file(path, "call guard")
        else:
            doc = read_json_file(path, "call guard")
        return cls.from_dict(doc, what, names)

    def rules_for(self, cap: str, provider: str | None) -> tuple[GuardRule, ...]:
        """The rules covering the capability ``cap`` reaches, in order (a plan's many ops share a few caps)."""
        return self._judged(cap, provider)[0]

    def _judged(self, cap: str, provider: str | None) -> tuple[tuple[GuardRule, ...], str | None]:
        """The rules covering the call, and the name of what it reaches when it was spelled otherwise (or None)."""
        key = (cap, provider)
        judged = self._rules_of.get(key)
        if judged is None:
            routed_cap, routed = self.names.routed(cap, provider)
            spellings = self.names.spellings(routed_cap)
            judged = (tuple(rule for rule in self.rules if rule.covers(spellings, routed)),
                      spellings[0] if spellings[0] != cap else None)
            if len(self._rules_of) < _MAX_KNOWN:
                self._rules_of[key] = judged
        return judged

    def passes_untouched(self, cap: str, provider: str | None) -> bool:
        """Whether every call of this cap is allowed whatever its args and state (no rule covers it)."""
        return self.default == "allow" and not self.rules_for(cap, provider)

    def decide(self, cap: str, provider: str | None, args: dict | None,
               state: Callable[[], dict | None] | None) -> Decision:
        """The decision for a call being made; ``state`` gives the backend's snapshot, asked at most once
        and only when a rule with a state condition is reached (None: the backend has no state)."""
        snapshot: dict | None = None
        asked = False
        rules, skill = self._judged(cap, provider)
        shown = _shown(cap, skill)
        for rule in rules:
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
                                                      f"{shown} ({exc}), so the call is denied")
            return _decision(rule.effect, rule.name, shown)
        return _decision(self.default, DEFAULT_RULE, shown)

    def decide_statically(self, cap: str, provider: str | None, args: dict | None) -> Decision | None:
        """The decision the plan alone settles; None when a rule with a state condition is reached first."""
        rules, skill = self._judged(cap, provider)
        for rule in rules:
            if not rule.args_match(args):
                continue
            if rule.state:
                return None
            return _decision(rule.effect, rule.name, _shown(cap, skill))
        return _decision(self.default, DEFAULT_RULE, _shown(cap, skill))

    def check_plan(self, plan: Plan) -> list[Issue]:
        """A ``call_denied`` issue for every op calling a capability (an RTDL or arena do op, a step of a
        step graph) that the guard would deny whatever the robot's state."""
        issues = Issues()
        for op in plan.ops.values():
            if op.kind not in _GUARDED_KINDS or op.cap is None or builtin_name(op.cap, op.provider) is not None:
                continue
            decision = self.decide_statically(op.cap, op.provider, op.args)
            if decision is not None and not decision.allowed:
                if op.kind == "step":
                    issues.append(Issue("call_denied", op.path, f"step {op.op_id}: {decision.message}", (op.op_id,)))
                else:
                    issues.append(Issue("call_denied", op.path, f"op {op.op_id}: {decision.message}"))
                if issues.dropped:
                    break
        return issues.listed()


def load_call_guard(source: "CallGuard | dict | str | pathlib.Path | None",
                    names: CallNames | None = None) -> CallGuard | None:
    """A CallGuard from itself, its rules document, or a rules file path, judging calls by ``names``
    when given; None for None."""
    if source is None:
        return None
    if isinstance(source, CallGuard):
        return source if names is None else source.naming(names)
    if isinstance(source, dict):
        return CallGuard.from_dict(source, names=names)
    if isinstance(source, (str, pathlib.Path)):
        return CallGuard.from_file(source, names)
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


def _shown(cap: str, reached: str | None) -> str:
    return repr(cap) if reached is None else f"{cap!r} (as {reached!r})"


def _decision(effect: str, rule: str, shown: str) -> Decision:
    if effect == "allow":
        return Decision(True, rule, "")
    if rule == DEFAULT_RULE:
        return Decision(False, rule, f"call guard: no rule allows {shown} and the default denies it")
    return Decision(False, rule, f"call guard: rule {rule!r} denies {shown}")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
