"""Scene snapshots: which objects and targets exist, where each movable thing is, what the hand holds."""
from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import jsonschema

from bt_exec.errors import ConfigError

PATRON = "patron"  # a tool mounted on the flange


@dataclass(frozen=True)
class Scene:
    revision: int
    objects: frozenset
    targets: frozenset
    state: dict = field(default_factory=dict)
    holding: str | None = None

    @classmethod
    def from_dict(cls, data: dict, source: str = "<dict>") -> "Scene":
        problems = sorted(_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
        if problems:
            where = "/" + "/".join(str(p) for p in problems[0].absolute_path)
            raise ConfigError(f"scene {source} is invalid at {where}: {problems[0].message}")
        holding = data.get("holding")
        if holding is not None and holding not in data["objects"]:
            raise ConfigError(f"scene {source}: holding names {holding!r}, which is not among its objects")
        return cls(data["scene_revision"], frozenset(data["objects"]), frozenset(data["targets"]),
                   dict(data.get("state", {})), holding)

    @classmethod
    def from_file(cls, path: str | pathlib.Path) -> "Scene":
        try:
            data = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read scene {path}: {exc.strerror or exc}") from None
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"scene {path} is not valid JSON: {exc}") from None
        return cls.from_dict(data, source=str(path))

    def as_dict(self) -> dict:
        return {"scene_revision": self.revision, "objects": sorted(self.objects), "targets": sorted(self.targets),
                "state": dict(self.state), "holding": self.holding}


@lru_cache(maxsize=None)
def _validator() -> jsonschema.Draft202012Validator:
    text = resources.files("bt_exec.schemas").joinpath("scene.schema.json").read_text(encoding="utf-8")
    return jsonschema.Draft202012Validator(json.loads(text))
