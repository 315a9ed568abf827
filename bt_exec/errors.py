"""Exception types and the validation issue record shared by every module."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Issue:
    """One problem found in an input.

    ``path`` points into the input: a JSON pointer for trees and envelopes
    (``/rtdl/children/2/args``), node indices for arenas
    (``nodes[5].children[1]``), an empty string for the whole document.
    """

    code: str
    path: str
    message: str
    steps: tuple | None = None  # step-graph dialects: the step ids the issue is about

    def as_dict(self) -> dict:
        out = {"code": self.code, "path": self.path, "message": self.message}
        if self.steps is not None:
            out["steps"] = list(self.steps)
        return out

    def __str__(self) -> str:
        where = self.path or "(document)"
        return f"{where}: {self.message} [{self.code}]"


class BtExecError(Exception):
    """Base of every error bt_exec raises on purpose."""


class PlanError(BtExecError):
    """An input was refused. ``issues`` lists every problem found, not just the first."""

    def __init__(self, issues: list[Issue]):
        self.issues = list(issues)
        shown = "; ".join(str(i) for i in self.issues[:5])
        more = f" (+{len(self.issues) - 5} more)" if len(self.issues) > 5 else ""
        super().__init__(f"plan refused: {shown}{more}")


class ControlError(BtExecError):
    """A control request (status, stop point, cancel) that cannot be carried out as asked."""


class ConfigError(BtExecError):
    """A configuration file or option (sim script, catalog, limits) is unusable."""
