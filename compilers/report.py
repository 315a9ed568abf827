"""The outcome of checking a plan: its verdict and every issue found."""
from __future__ import annotations

from dataclasses import dataclass, field

from bt_exec.errors import Issue, PlanError


@dataclass
class Report:
    """The outcome of ``validate``.

    ``verdict``: "ok"; "invalid"; "control" (an RTDL meta op); for step graphs
    also "replan_required" and "blocked". Only "ok" and "control" may run.
    ``warnings``: what was read but skipped or changed, never a reason to refuse
    (``{code, message}``: text around the JSON, a wait capped); listed only when there are some.
    """

    verdict: str
    dialect: str | None
    issues: list[Issue] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    warnings: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verdict in ("ok", "control")

    def as_dict(self) -> dict:
        return {"valid": self.ok, "verdict": self.verdict, "dialect": self.dialect,
                "issues": [i.as_dict() for i in self.issues], "stats": self.stats,
                **({"warnings": list(self.warnings)} if self.warnings else {})}


class PartlyRead(PlanError):
    """An input refused for its shape, with the plan as far as it could be read (``partial``): the checks that
    need no sound shape still run on it, so that one structural fault (a transition to a missing step) does
    not hide the others (``compilers.refusal_issues``)."""

    def __init__(self, issues: list[Issue], partial):
        super().__init__(issues)
        self.partial = partial
