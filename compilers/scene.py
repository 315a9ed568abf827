"""Scene snapshots: which objects and targets exist, where each movable thing is, what the hand holds."""
from __future__ import annotations

import pathlib
from dataclasses import dataclass, field


from bt_exec.errors import ConfigError

from .config_files import check_schema, read_json_file

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
        check_schema(data, "scene.schema.json", f"scene {source}")
        holding = data.get("holding")
        if holding is not None and holding not in data["objects"]:
            raise ConfigError(f"scene {source}: holding names {holding!r}, which is not among its objects")
        return cls(data["scene_revision"], frozenset(data["objects"]), frozenset(data["targets"]),
                   dict(data.get("state", {})), holding)

    @classmethod
    def from_file(cls, path: str | pathlib.Path) -> "Scene":
        data = read_json_file(path, "scene")
        return cls.from_dict(data, source=str(path))

    def as_dict(self) -> dict:
        return {"scene_revision": self.revision, "objects": sorted(self.objects), "targets": sorted(self.targets),
                "state": dict(self.state), "holding": self.holding}
