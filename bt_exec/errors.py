"""Exception types and the validation issue record shared by every module."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Issue:
    """One problem found in an input.

    ``path`` points into the input: a JSON pointer for trees and envelopes
    (``/rtdl/children/2/args``), node indices for arenas
    (``nodes[5].children[1]``), an empty string for the whole document.

    Repairs (``compilers.fixes``), only where the fault has one: ``fix``, a JSON Patch (RFC 6902
    operations, JSON pointers into the document) that repairs it; ``alternatives``, several such
    patches as likely as each other (then no ``fix``); ``fixed_by``, the index in the same report
    of the issue whose fix repairs this one too (one fault, two issues, one fix); ``after_fixes``, found
    in the document as the fixes listed before it leave it (paths point into that document); ``lossy``, the
    fix drops data the input held (a field removed), which a person may have meant.

    What the repairs work from, said by the check that found the fault (None where it says nothing; the message
    says the same in words): ``allowed``, the names or values the place takes (the fields of an object with an
    unknown one, a value of a fixed set); ``expected``, the JSON type its value must have ("object", "array",
    "string", "integer", "non-negative integer", "node index", "JSON text"); ``missing``, what the place lacks (a
    required field, a skill's parameter, the outcome a step has no transition for); ``unknown``, the name it gives
    that names nothing there is (the step a transition or the entry names). ``as_dict`` leaves them out.

    ``unlisted``: on the last issue ``too_many_issues`` only, how many issues it stands for.
    """

    code: str
    path: str
    message: str
    steps: tuple | None = None  # step-graph dialects: the step ids the issue is about
    fix: list | None = field(default=None, compare=False)
    alternatives: list | None = field(default=None, compare=False)
    fixed_by: int | None = field(default=None, compare=False)
    after_fixes: bool = field(default=False, compare=False)
    lossy: bool = field(default=False, compare=False)
    allowed: tuple | None = field(default=None, compare=False)
    expected: str | None = field(default=None, compare=False)
    missing: str | None = field(default=None, compare=False)
    unknown: str | None = field(default=None, compare=False)
    unlisted: int | None = field(default=None, compare=False)

    def as_dict(self) -> dict:
        """The issue as its answers carry it: code, path, message, and steps and the repairs where there are."""
        out = {"code": self.code, "path": self.path, "message": self.message}
        if self.steps is not None:
            out["steps"] = list(self.steps)
        if self.fix is not None:
            out["fix"] = self.fix
        if self.alternatives is not None:
            out["alternatives"] = self.alternatives
        if self.fixed_by is not None:
            out["fixed_by"] = self.fixed_by
        if self.after_fixes:
            out["after_fixes"] = True
        if self.lossy:
            out["lossy"] = True
        return out

    def __str__(self) -> str:
        where = self.path or "(document)"
        return f"{where}: {self.message} [{self.code}]"


MAX_ISSUES = 100  # issues listed for one input; beyond, one last issue ``too_many_issues`` says how many more


class Issues(list):
    """A list of issues that keeps the first ``MAX_ISSUES`` and counts the rest, so that an input
    made of thousands of faults costs memory for a hundred. ``listed()`` gives the issues to report.

    Loops over the parts of an input may stop once ``dropped`` is non-zero: the count of the
    issues not listed is then a lower bound, as the summary says."""

    def __init__(self, issues=()):
        super().__init__()
        self.dropped = 0
        self.extend(issues)

    @property
    def full(self) -> bool:
        return len(self) >= MAX_ISSUES

    def append(self, issue: Issue) -> None:
        if issue.code == "too_many_issues":  # the summary of a part's issues merged into these
            self.dropped += issue.unlisted or 1
        elif len(self) < MAX_ISSUES:
            super().append(issue)
        else:
            self.dropped += 1

    def extend(self, issues) -> None:
        for issue in issues:
            self.append(issue)
        self.dropped += getattr(issues, "dropped", 0)

    def __add__(self, other) -> Issues:
        out = Issues(self)
        out.extend(other)
        return out

    def __iadd__(self, other) -> Issues:
        self.extend(other)
        return self

    def listed(self) -> list[Issue]:
        issues = list(self)
        if self.dropped:
            issues.append(Issue("too_many_issues", "", f"{self.dropped} more issues at least were found and not "
                                                       f"listed (at most {MAX_ISSUES} are)", unlisted=self.dropped))
        return issues


class BtExecError(Exception):
    """Base of every error bt_exec raises on purpose."""


class PlanError(BtExecError):
    """An input was refused. ``issues`` lists every problem found, not just the first (up to
    ``MAX_ISSUES``; then a last ``too_many_issues`` says how many more)."""

    def __init__(self, issues: list[Issue]):
        self.issues = Issues(issues).listed()
        shown = "; ".join(str(i) for i in self.issues[:5])
        more = f" (+{len(self.issues) - 5} more)" if len(self.issues) > 5 else ""
        super().__init__(f"plan refused: {shown}{more}")


class ControlError(BtExecError):
    """A control request (status, stop point, cancel) that cannot be carried out as asked.

    ``code`` is a stable word for programs; each door derives its status from the type (HTTP 404 / 400 / 409 /
    503, MCP ``isError``, ROS ``success``), so the same refusal reads the same on every door. Raise one of the
    subclasses; a bare ``ControlError`` counts as a ``Conflict``.
    """

    code = "control_refused"

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class NotFound(ControlError):
    """What the request names does not exist (or no longer): a plan, an op, an operation."""

    code = "not_found"


class BadArgument(ControlError):
    """An argument is of the wrong type or out of range; the message names it."""

    code = "bad_arguments"


class Conflict(ControlError):
    """The request is well formed, but the plan's or the executor's state does not allow it now."""

    code = "control_refused"


class Busy(ControlError):
    """A bounded resource is taken (waits, streams, the node stopping): the same request may work later."""

    code = "busy"


class TooLarge(BadArgument):
    """A request over a door's size limit (a body, an ``args_json``), refused unread."""

    code = "too_large"


class Unreachable(Busy):
    """The executor that would answer (a robot of a fleet, a running app) gave no answer: it may answer later."""

    code = "unreachable"


class InternalError(ControlError):
    """An operation failed on a bug where it ran (that side logged it), as a client hears it relayed."""

    code = "internal"


class ConfigError(BtExecError):
    """A configuration file or option (sim script, catalog, limits) is unusable."""
