"""Each node's status as Groot2 reads it, kept from a plan's events as BT.CPP's publisher keeps its buffer."""
from __future__ import annotations

import collections
import struct
import threading
import time

from ..compilers.btcpp.export import BtcppExport
from .protocol import FAILURE, IDLE, IDLE_AFTER, RUNNING, SKIPPED, STATUS_ENTRY, SUCCESS

# bt_exec's op states as BT.CPP's node statuses; "canceled" is decided by what the node was doing (``_canceled``).
STATUS_OF_STATE = {"pending": IDLE, "running": RUNNING, "paused": RUNNING, "succeeded": SUCCESS,
                   "failed": FAILURE, "timeout": FAILURE}
STATUS_OF_OUTCOME = {"succeeded": SUCCESS, "failed": FAILURE, "cancelled": FAILURE}
KEPT_TRANSITIONS = 1000  # the newest status changes kept while recording, as BT.CPP's publisher keeps them
TRANSITION = struct.Struct("<QHB")  # microseconds since recording began (6 of its 8 bytes are sent), uid, status


class StatusBoard:
    """The status reply of one tree: for every node (uid order) its uid and status byte, changed in place.

    ``op_state`` moves the nodes that show an op: running and paused are RUNNING, succeeded SUCCESS, failed and
    timeout FAILURE; canceled is what BT.CPP shows of a halted node (IDLE, once RUNNING) or, for an op stopped
    before it ran, SKIPPED. A step graph's step also moves its branch of the loop (``step_taken``). As in BT.CPP,
    a node that ends resets its children to IDLE (each showing the status it had, ``IDLE_AFTER`` + status), so a
    finished child keeps its status while its parent runs. ``reply`` copies the buffer under the lock the ticking
    thread writes it with: one copy of 3 bytes a node.
    """

    def __init__(self, export: BtcppExport):
        count = export.node_count
        self._buffer = bytearray(b"".join(STATUS_ENTRY.pack(uid, IDLE) for uid in range(1, count + 1)))
        self._children: list[list[int]] = [[] for _ in range(count + 1)]
        self._nodes_of_op: dict[str, list[int]] = {}
        for uid in range(1, count + 1):
            self._children[export.parent[uid]].append(uid)
            op_id = export.op_of[uid]
            if op_id is not None:
                self._nodes_of_op.setdefault(op_id, []).append(uid)
        self._plan_nodes = list(export.plan_nodes)
        self._steps = export.steps
        self._recording_since: int | None = None  # monotonic microseconds when recording began; None: not recording
        self._transitions: collections.deque[tuple[int, int, int]] = collections.deque(maxlen=KEPT_TRANSITIONS)
        self._lock = threading.Lock()

    def reply(self) -> bytes:
        """The status reply's body: uid (uint16) and status (uint8) of every node."""
        with self._lock:
            return bytes(self._buffer)

    def start_recording(self) -> None:
        """Keep each status change from now on (the newest ``KEPT_TRANSITIONS``), forgetting those kept before."""
        with self._lock:
            self._recording_since = time.monotonic_ns() // 1000
            self._transitions.clear()

    def stop_recording(self) -> None:
        """Keep no more status changes."""
        with self._lock:
            self._recording_since = None

    def transitions(self) -> bytes:
        """The status changes kept since the last call, oldest first, as BT.CPP sends them: 9 bytes each, the
        microseconds since recording began (6 bytes), the uid (2) and the new status (1; a reset is IDLE)."""
        with self._lock:
            kept, self._transitions = self._transitions, collections.deque(maxlen=KEPT_TRANSITIONS)
        out = bytearray()
        for at, uid, status in kept:
            packed = TRANSITION.pack(at, uid, status)
            out += packed[:6] + packed[8:]  # the timestamp's 6 low bytes, then uid and status
        return bytes(out)

    def status(self, uid: int) -> int:
        """The status byte node ``uid`` shows now."""
        return self._buffer[3 * uid - 1]

    def uids_of(self, op_id: str) -> list[int]:
        """The nodes that show op ``op_id`` (none for an op the tree does not draw)."""
        return self._nodes_of_op.get(op_id, [])

    def op_state(self, op_id: str, state: str) -> None:
        """An op of the plan is now in ``state`` (a node_state event's)."""
        nodes = self._nodes_of_op.get(op_id)
        if not nodes:
            return
        with self._lock:
            step = self._steps.get(op_id)
            if step is not None and state == "running":  # its branch was chosen: its condition held
                self._set(step.condition, SUCCESS)
                self._set(step.branch, RUNNING)
                self._set(step.guard, RUNNING)
            for uid in nodes:
                status = STATUS_OF_STATE.get(state)
                self._set(uid, self._canceled(uid) if status is None else status)

    def step_taken(self, step_id: str, outcome: str) -> None:
        """A step graph's step reported ``outcome`` and took its transition (a step_transition event): as its
        branch would in BT.CPP, the skill's guard, the transition that matched (or the script that stops the run)
        and the branch succeed, and the loop starts its next pass, leaving the branch IDLE once SUCCESS."""
        step = self._steps.get(step_id)
        if step is None:
            return
        with self._lock:
            self._set(step.guard, SUCCESS)
            edge = step.edges.get(outcome)
            if edge is None:
                self._set(step.unmapped, SUCCESS)
            else:
                sequence, condition, script = edge
                self._set(condition, SUCCESS)
                self._set(script, SUCCESS)
                self._set(sequence, SUCCESS)
            self._set(step.routes, SUCCESS)
            self._set(step.branch, SUCCESS)
            self._set(step.branch, IDLE_AFTER + SUCCESS)

    def plan_started(self) -> None:
        """The plan began: the nodes that show the plan itself run."""
        with self._lock:
            for uid in self._plan_nodes:
                self._set(uid, RUNNING)

    def plan_ended(self, outcome: str) -> None:
        """The plan ended ``outcome``: the nodes that show the plan itself end so, innermost first."""
        status = STATUS_OF_OUTCOME.get(outcome, FAILURE)
        with self._lock:
            for uid in reversed(self._plan_nodes):
                self._set(uid, status)

    def _canceled(self, uid: int) -> int:
        return IDLE_AFTER + RUNNING if self.status(uid) in (RUNNING, IDLE_AFTER + RUNNING) else SKIPPED

    def _set(self, uid: int, status: int) -> None:
        self._show(uid, status)
        if status in (SUCCESS, FAILURE, SKIPPED) or status >= IDLE_AFTER:
            for child in self._children[uid]:
                shown = self._buffer[3 * child - 1]
                if RUNNING <= shown <= SKIPPED:
                    self._show(child, IDLE_AFTER + shown)

    def _show(self, uid: int, status: int) -> None:
        self._buffer[3 * uid - 1] = status
        if self._recording_since is not None:
            self._transitions.append((time.monotonic_ns() // 1000 - self._recording_since, uid,
                                      IDLE if status >= IDLE_AFTER else status))
