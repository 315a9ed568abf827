"""Groot2's breakpoints served as bt_exec's own pause points: the one kind of hook whose meaning bt_exec has.

A breakpoint before a node (``position`` 0) is a pause point ``on_enter`` at the op the node shows, one after it
(``position`` 1) a pause point ``on_complete``; unlocking it resumes the plan. As a pause point does, it fires
once. What bt_exec never does is not served: a hook that replaces a node's result (``mode`` 1), or an unlock
that makes the paused op end with a result of Groot2's choosing, since an op's result is its call's.
"""
from __future__ import annotations

import json
import threading

from ..errors import ControlError

BREAKPOINT, REPLACE = 0, 1
WHEN_OF_POSITION = {0: "on_enter", 1: "on_complete"}
CONTINUE = ("SKIPPED", "IDLE")  # an unlock that lets the node run as it would have
MAX_HOOKS = 1000


class HookError(Exception):
    """A hook request that cannot be served as asked; the message is the error reply's."""


class Breakpoints:
    """The breakpoints Groot2 set on the plan served, each a pause point armed through the executor."""

    def __init__(self, executor):
        self.executor = executor
        self._hooks: dict[tuple[int, int], dict] = {}  # (uid, position) -> the hook as Groot2 reads it back
        self._holding = False  # the plan is paused at one of them, until an unlock (or all are removed)
        self._lock = threading.Lock()

    def insert(self, served, payload: bytes) -> None:
        """Arm each hook of ``payload`` (one JSON hook, or an array of them)."""
        given = _json(payload)
        for hook in given if isinstance(given, list) else [given]:
            uid, position = _uid(hook), _position(hook)
            mode = hook.get("mode", BREAKPOINT) if isinstance(hook, dict) else None
            if mode != BREAKPOINT:
                raise HookError("only breakpoints (mode 0) are served: a hook that replaces a node's result "
                                "(mode 1) is not, since an op's result is its call's")
            op_id = self._op_of(served, uid)
            when = WHEN_OF_POSITION[position]
            if hook.get("enabled", True) is False:
                self._disarm(served.plan_id, op_id, uid, position)
                continue
            with self._lock:
                if len(self._hooks) >= MAX_HOOKS and (uid, position) not in self._hooks:
                    raise HookError(f"at most {MAX_HOOKS} breakpoints are served at once")
            self._call(self.executor.stop_plan_at, served.plan_id, op_id, when, "api", "pause")
            with self._lock:
                self._hooks[(uid, position)] = {"enabled": True, "uid": uid, "mode": BREAKPOINT, "once": True,
                                                "desired_status": "SKIPPED", "position": position,
                                                "op_id": op_id}

    def remove(self, served, payload: bytes) -> None:
        """Disarm the breakpoint ``payload`` names (``uid``, ``position``); HookError for one not set."""
        hook = _json(payload)
        uid, position = _uid(hook), _position(hook)
        with self._lock:
            known = self._hooks.get((uid, position))
        if known is None:
            raise HookError(f"no breakpoint is set at node {uid} (position {position})")
        self._disarm(served.plan_id, known["op_id"], uid, position)

    def unlock(self, served, payload: bytes) -> None:
        """Go on from the breakpoint ``payload`` names: the plan resumes; the op runs as it would have."""
        hook = _json(payload)
        uid, position = _uid(hook), _position(hook)
        self._op_of(served, uid)
        status = hook.get("desired_status", "SKIPPED")
        if status not in CONTINUE:
            raise HookError(f"an unlock with desired_status {status!r} is not served: the op runs and ends with its "
                            "own result (unlock with SKIPPED to go on)")
        self._call(self.executor.resume_plan, served.plan_id, "api")
        self._holding = False
        if hook.get("remove_when_done") is True:
            with self._lock:
                known = self._hooks.get((uid, position))
            if known is not None:
                self._disarm(served.plan_id, known["op_id"], uid, position)

    def remove_all(self, served) -> None:
        """Disarm every breakpoint and let a plan paused at one go on (Groot2 does this before it disconnects)."""
        with self._lock:
            hooks, self._hooks = list(self._hooks.values()), {}
            holding, self._holding = self._holding, False
        if served is None or not (hooks or holding):
            return
        for hook in hooks:
            try:
                self.executor.disarm_stop_point(served.plan_id, hook["op_id"], WHEN_OF_POSITION[hook["position"]],
                                                "api")
            except ControlError:
                pass  # the plan ended: nothing left to disarm
        try:
            self.executor.resume_plan(served.plan_id, "api")
        except ControlError:
            pass

    def fired(self, op_id: str, when: str) -> None:
        """A pause point of the plan served fired: the breakpoint it was is spent (pause points fire once)."""
        with self._lock:
            for key, hook in list(self._hooks.items()):
                if hook["op_id"] == op_id and WHEN_OF_POSITION[hook["position"]] == when:
                    del self._hooks[key]
                    self._holding = True

    def forget(self) -> None:
        """Another tree is served: the breakpoints named the last one's nodes."""
        with self._lock:
            self._hooks, self._holding = {}, False

    @property
    def armed(self) -> bool:
        """Whether a breakpoint is set, or holds the plan."""
        return bool(self._hooks) or self._holding

    def dump(self) -> bytes:
        """The breakpoints set, as Groot2 reads hooks (a JSON array)."""
        with self._lock:
            hooks = [{key: value for key, value in hook.items() if key != "op_id"} for hook in self._hooks.values()]
        return json.dumps(hooks).encode()

    def _disarm(self, plan_id: str, op_id: str, uid: int, position: int) -> None:
        self._call(self.executor.disarm_stop_point, plan_id, op_id, WHEN_OF_POSITION[position], "api")
        with self._lock:
            self._hooks.pop((uid, position), None)

    @staticmethod
    def _op_of(served, uid: int) -> str:
        if not 1 <= uid <= served.export.node_count:
            raise HookError(f"the tree has no node {uid}")
        op_id = served.export.op_of[uid]
        if op_id is None:
            raise HookError(f"node {uid} stands for no op of the plan (a step graph's script or loop): only the "
                            "nodes of ops take breakpoints")
        return op_id

    @staticmethod
    def _call(operation, *args) -> None:
        try:
            operation(*args)
        except ControlError as exc:
            raise HookError(exc.message) from None


def _json(payload: bytes) -> object:
    try:
        return json.loads(payload)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise HookError("a hook request's second part must be JSON") from None


def _uid(hook: object) -> int:
    uid = hook.get("uid") if isinstance(hook, dict) else None
    if type(uid) is not int or not 0 <= uid <= 65535:
        raise HookError(f"a hook names its node by uid (0 to 65535), got {uid!r}")
    return uid


def _position(hook: dict) -> int:
    position = hook.get("position", 0)
    if position not in WHEN_OF_POSITION or type(position) is not int:
        raise HookError(f"a hook's position is 0 (before the node) or 1 (after it), got {position!r}")
    return position
