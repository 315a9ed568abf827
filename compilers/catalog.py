"""Capability catalogs (``{cap: {args_schema, async}}``) and the executor's builtin capabilities.

A catalog turns unknown caps and args that break their ``args_schema`` into
validation errors. Builtins are always known and always checked, catalog or not.
"""
from __future__ import annotations

import pathlib
from functools import lru_cache

import jsonschema

from bt_exec.errors import ConfigError, Issue, Issues

from .args_schema import ArgsSchema
from .config_files import check_schema, read_json_file
from .control_values import MAX_WAIT_MS
from .ir import Op, Plan
from .limits import INT64_MAX
from .skill_catalog import SkillCatalog

BUILTIN_PREFIX = "executor.builtin_"
_ARENA_BUILTIN_PREFIX = "robonix/system/executor/builtin/"

_PLAN_ID = {"type": "string", "pattern": r"\S"}
# Longer waits are not refused but capped (Limits.max_wait_ms), as a meta op's are.
_WAIT_MS = {"type": "integer", "minimum": 0, "maximum": INT64_MAX}
BUILTIN_ARGS_SCHEMAS: dict[str, dict] = {
    "get_all_plans": {"type": "object", "additionalProperties": False},
    "get_plan_status": {"type": "object", "required": ["plan_id"], "properties": {"plan_id": _PLAN_ID},
                        "additionalProperties": False},
    "stop_plan_at": {"type": "object", "required": ["plan_id", "op_id"],
                     "properties": {"plan_id": _PLAN_ID, "op_id": _PLAN_ID,
                                    "when": {"enum": ["on_enter", "on_complete"]}},
                     "additionalProperties": False},
    "cancel_plan": {"type": "object", "required": ["plan_id"], "properties": {"plan_id": _PLAN_ID, "wait_ms": _WAIT_MS},
                    "additionalProperties": False},
    "cancel_all_plans": {"type": "object", "properties": {"wait_ms": _WAIT_MS}, "additionalProperties": False},
}


def builtin_name(cap: str | None, provider: str | None = None) -> str | None:
    """The builtin a cap names (``executor.builtin_cancel_plan`` or the arena contract id), else None."""
    if not cap:
        return None
    if cap.startswith(BUILTIN_PREFIX):
        name = cap[len(BUILTIN_PREFIX):]
    elif cap.startswith(_ARENA_BUILTIN_PREFIX) and provider in (None, "executor"):
        name = cap[len(_ARENA_BUILTIN_PREFIX):]
    else:
        return None
    return name if name in BUILTIN_ARGS_SCHEMAS else None


def is_control_only(plan: Plan) -> bool:
    """True when every do op is a builtin: such a plan is control, not task work."""
    has_do = False
    for op in plan.ops.values():
        if op.kind == "do":
            has_do = True
            if builtin_name(op.cap, op.provider) is None:
                return False
    return has_do


class CapabilityCatalog:
    """Known capabilities and the JSON Schema of each one's args."""

    def __init__(self, entries: dict):
        check_schema(entries, "capability-catalog.schema.json", "capability catalog")
        self.entries = entries
        self._schemas: dict[str, ArgsSchema] = {}
        for cap, entry in entries.items():
            schema = entry.get("args_schema", {"type": "object"})
            try:
                jsonschema.Draft202012Validator.check_schema(schema)
            except jsonschema.SchemaError as exc:
                raise ConfigError(f"capability catalog: args_schema of {cap!r} is not a valid JSON Schema: "
                                  f"{exc.message}") from None
            self._schemas[cap] = ArgsSchema(schema)

    @classmethod
    def from_file(cls, path: str | pathlib.Path) -> "CapabilityCatalog":
        entries = read_json_file(path, "capability catalog")
        return cls(entries)

    def __contains__(self, cap: str) -> bool:
        return cap in self.entries

    def outcomes_of(self, cap: str) -> tuple[str, ...] | None:
        """The outcomes the catalog declares for ``cap`` (success among them), or None."""
        entry = self.entries.get(cap)
        outcomes = entry.get("outcomes") if entry is not None else None
        return tuple(outcomes) if outcomes is not None else None

    def check_args(self, cap: str, args: dict) -> list[tuple[str, str]]:
        """(pointer inside args, message) for every way ``args`` breaks the cap's schema."""
        return self._schemas[cap].problems(args)


def check_plan(plan: Plan, catalog: CapabilityCatalog | None, skills: SkillCatalog | None = None,
               warnings: list[dict] | None = None, max_wait_ms: int = MAX_WAIT_MS) -> list[Issue]:
    """Issues of the plan's do ops against the builtins and, when given, the catalog; into ``warnings``,
    each builtin call asking to wait longer than ``max_wait_ms`` (it waits that long).

    A cap naming a skill of ``skills`` (the motion cell's step-graph skills, or an alias of one) is
    refused unless the catalog lists that very name: a skill runs only as a step of a verified step
    graph, which checks its preconditions and scene revision and holds the robot while it runs."""
    issues = Issues()
    builtins: dict[tuple[str, str | None], str | None] = {}  # a plan's many ops share a few caps
    motion_skills: dict[str, bool] = {}
    for op in plan.ops.values():
        if op.kind != "do":
            continue
        key = (op.cap, op.provider)
        builtin = builtins[key] if key in builtins else builtins.setdefault(key, builtin_name(op.cap, op.provider))
        if builtin is not None:
            problems = check_args_of_builtin(builtin, op.args)
            asked = op.args.get("wait_ms") if type(op.args) is dict else None
            if warnings is not None and not problems and asked is not None and asked > max_wait_ms:
                warnings.append({"code": "wait_capped", "message": f"{_field_path(plan, op, 'args', '/wait_ms')}: "
                                 f"wait_ms {asked} capped at {max_wait_ms} (the longest a cancel waits)"})
        elif skills is not None and (motion_skills[op.cap] if op.cap in motion_skills else motion_skills.setdefault(
                op.cap, skills.resolve(op.cap) is not None)) and (catalog is None or op.cap not in catalog):
            issues.append(Issue("motion_skill", _field_path(plan, op, "cap"),
                                f"{op.cap!r} is a skill of the motion cell: it runs only as a step of a step graph, "
                                "which is checked against the scene and holds the robot (or list it in the "
                                "capability catalog to call it directly)"))
            continue
        elif catalog is None:
            continue
        elif op.cap not in catalog:
            issues.append(Issue("unknown_cap", _field_path(plan, op, "cap"),
                                f"capability {op.cap!r} is not in the catalog"))
            continue
        else:
            problems = catalog.check_args(op.cap, op.args)
        for pointer, message in problems:
            issues.append(Issue("bad_args", _field_path(plan, op, "args", pointer), f"args of {op.cap!r}: {message}"))
        if issues.dropped:
            break
    return issues.listed()


def check_args_of_builtin(name: str, args: object) -> list[tuple[str, str]]:
    """(pointer, message) for every way ``args`` break the builtin's args schema."""
    return _builtin_schema(name).problems(args)


def _field_path(plan: Plan, op: Op, field: str, pointer: str = "") -> str:
    if plan.shape == "arena":
        name = "contract_id" if field == "cap" else "args_json"
        suffix = f" at {pointer}" if pointer else ""
        return f"{op.path}.call.{name}{suffix}"
    return f"{op.path}/{field}{pointer}"


@lru_cache(maxsize=None)
def _builtin_schema(name: str) -> ArgsSchema:
    return ArgsSchema(BUILTIN_ARGS_SCHEMAS[name])
