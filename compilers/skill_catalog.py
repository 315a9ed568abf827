"""Skill catalogs for step-graph dialects (Qwen3): versioned data that says which skills, objects,
targets and events exist, and what each skill needs and does.

Catalogs are JSON files validated by ``schemas/skill-catalog.schema.json``;
``grant`` ships with bt_exec. Nothing a graph says about its own skills
(``skill_contracts``) is trusted.
"""
from __future__ import annotations

import json
import pathlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


from bt_exec.errors import ConfigError

from .config_files import check_schema, read_json_file

TERMINALS = ("completed", "replan_required", "operator_required", "stop")
PREDICATES = ("hand_empty", "patron_free", "own_tool_in_patron", "carried", "present")


@dataclass(frozen=True)
class Skill:
    name: str
    params: dict            # param -> {"types": [...], "optional": bool, "must_be": ...}
    outcomes: tuple
    required: tuple
    motion: bool
    pre: dict               # object type (or "*") -> predicate names
    effects: tuple          # ({"take": "object"}, {"robot_at": "target"}, ...)
    one_of: tuple = ()
    uncertain_after: tuple = ()
    returns_tool: bool = False
    observes: bool = False


class SkillCatalog:
    """A loaded, validated skill catalog."""

    def __init__(self, data: dict, source: str = "<dict>"):
        check_schema(data, "skill-catalog.schema.json", f"skill catalog {source}")
        self.data = data
        self.name = data["catalog"]
        self.version = data["version"]
        self.failure_outcomes = frozenset(data["failure_outcomes"])
        self.skills = {name: Skill(name=name, params=spec["params"], outcomes=tuple(spec["outcomes"]),
                                   required=tuple(spec["required"]), motion=spec["motion"], pre=spec.get("pre", {}),
                                   effects=tuple(spec.get("effects", ())), one_of=tuple(spec.get("one_of", ())),
                                   uncertain_after=tuple(spec.get("uncertain_after", ())),
                                   returns_tool=spec.get("returns_tool", False), observes=spec.get("observes", False))
                       for name, spec in data["skills"].items()}
        self.aliases = data.get("aliases", {})
        self.unsupported = data.get("unsupported", {})
        self.tools = data.get("tools", {})
        self.parts = data.get("parts", {})
        self.storage = data.get("storage", {})
        self._object_types = _type_matchers(data["object_types"])
        self._target_types = _type_matchers(data["target_types"])
        for alias, skill in self.aliases.items():
            if skill not in self.skills:
                raise ConfigError(f"skill catalog {source}: alias {alias!r} names unknown skill {skill!r}")

    @classmethod
    def named(cls, name_or_path: str | pathlib.Path) -> "SkillCatalog":
        """A shipped catalog by name (``grant``) or a catalog file by path."""
        if isinstance(name_or_path, str) and name_or_path in shipped_catalogs():
            return _shipped(name_or_path)
        path = pathlib.Path(name_or_path)
        if not path.exists():
            raise ConfigError(f"no skill catalog named {str(name_or_path)!r} (shipped: "
                              f"{', '.join(shipped_catalogs())}) and no such file")
        data = read_json_file(path, "skill catalog")
        return cls(data, source=str(path))

    def resolve(self, skill_name: str) -> str | None:
        """The canonical skill a name or explicit alias stands for; None if unknown."""
        if skill_name in self.skills:
            return skill_name
        return self.aliases.get(skill_name)

    def object_type(self, name: str) -> str | None:
        return _match(self._object_types, name)

    def target_type(self, name: str) -> str | None:
        return _match(self._target_types, name)

    def is_failure(self, event: str) -> bool:
        return event in self.failure_outcomes

    def tool_of(self, part: str) -> str | None:
        return self.parts.get(part, {}).get("tool")

    def socket_of(self, tool: str) -> str | None:
        return self.tools.get(tool, {}).get("socket")


@lru_cache(maxsize=None)
def shipped_catalogs() -> tuple[str, ...]:
    return tuple(sorted(p.name[:-5] for p in resources.files("bt_exec.catalogs").iterdir() if p.name.endswith(".json")))


@lru_cache(maxsize=None)
def _shipped(name: str) -> SkillCatalog:
    # Loaded and schema-checked once per process: catalogs are read-only data.
    text = resources.files("bt_exec.catalogs").joinpath(f"{name}.json").read_text(encoding="utf-8")
    return SkillCatalog(json.loads(text), source=name)


def _type_matchers(spec: dict) -> list[tuple[str, frozenset, list]]:
    return [(type_name, frozenset(entry.get("names", ())), [re.compile(p) for p in entry.get("patterns", ())])
            for type_name, entry in spec.items()]


def _match(matchers, name: str) -> str | None:
    for type_name, names, patterns in matchers:
        if name in names or any(p.fullmatch(name) for p in patterns):
            return type_name
    return None
