"""The leaves of BehaviorTree.CPP 4 that call no capability: AlwaysSuccess, AlwaysFailure, Script, ScriptCondition."""
from __future__ import annotations

from .bt_node import FAILURE, SUCCESS, LeafNode
from .bt_ports import PortSpec
from .bt_script import Script as ScriptProgram
from .bt_script import ScriptError, truth


class AlwaysSuccess(LeafNode):
    """BehaviorTree.CPP's AlwaysSuccess: SUCCESS at once, every run."""

    NODE = "AlwaysSuccess"

    def step(self):
        return SUCCESS
        yield


class AlwaysFailure(LeafNode):
    """BehaviorTree.CPP's AlwaysFailure: FAILURE at once, every run."""

    NODE = "AlwaysFailure"

    def step(self):
        return FAILURE
        yield


class Script(LeafNode):
    """BehaviorTree.CPP's Script: runs ``code`` (the subset ``bt_script`` reads) on the plan's blackboard; SUCCESS,
    or FAILURE with the reason when the code cannot be read or run."""

    NODE = "Script"
    PORTS = {"code": PortSpec("in", None, "std::string")}
    _program: ScriptProgram | None = None
    _problem: str | None = None

    def start(self, fresh: bool) -> str | None:
        code = self.port("code")
        if self._program is None or self._program.code != code:
            try:
                self._program = ScriptProgram(str(code))
            except ScriptError as exc:
                return f"{self.NODE} [{self.op_id}]: {exc}"
        return None

    def step(self):
        try:
            verdict = self._program.run(self.hooks.blackboard)
        except ScriptError as exc:
            self._detail = f"{self.NODE} [{self.op_id}]: {exc}"
            return FAILURE
        return self.status_of(verdict)
        yield

    def status_of(self, verdict: object):
        return SUCCESS


class ScriptCondition(Script):
    """BehaviorTree.CPP's ScriptCondition: SUCCESS when ``code``'s last expression holds, else FAILURE (a key the
    blackboard does not hold fails it)."""

    NODE = "ScriptCondition"

    def status_of(self, verdict: object):
        holds = truth(verdict)
        self._detail = f"{self._program.code!r:.80} is {'true' if holds else 'false'}"
        return SUCCESS if holds else FAILURE
