"""``Groot2Publisher``: one plan of an executor served to Groot2's monitor, as BehaviorTree.CPP 4's publisher serves
a tree (ZeroMQ: request/reply on PORT, publish on PORT+1)."""
from __future__ import annotations

import collections
import logging
import os
import threading
import time

import zmq

from ..compilers.btcpp.export import BtcppExport, ExportError, btcpp_export
from ..compilers.dialects import CheckContext
from ..errors import BtExecError, ControlError
from . import protocol
from .hooks import Breakpoints, HookError
from .protocol import msgpack, reply_header, request_header
from .status import StatusBoard

log = logging.getLogger(__name__)

POLL_MS = 50  # how soon the server thread notices a close, and publishes what the ticks queued
MAX_REQUEST_BYTES = 64 * 1024  # a longer request is dropped by ZeroMQ unread (and its connection with it)
SEND_TIMEOUT_MS = 1000
MAX_VALUE_BYTES = 64 * 1024  # a blackboard value longer than this in MessagePack is shown as a marker
MAX_BLACKBOARD_BYTES = 1024 * 1024  # past this, the blackboard reply leaves the remaining keys out
MAX_QUEUED_NOTICES = 100
WRITTEN_IN_TICK_OPS = 2000  # a larger plan's tree is written by the server thread, not the ticking one
HEARTBEAT_S = 5.0  # breakpoints set by a Groot2 silent this long are removed, as BT.CPP's publisher does
SERVED = ("full_tree", "status", "blackboard", "hook_insert", "hook_remove", "breakpoint_unlock", "hooks_dump",
          "hooks_remove_all", "disable_hooks", "toggle_recording", "get_transitions")
_WITH_PAYLOAD = (protocol.HOOK_INSERT, protocol.HOOK_REMOVE, protocol.BREAKPOINT_UNLOCK, protocol.BLACKBOARD,
                 protocol.TOGGLE_RECORDING)


class Groot2Error(BtExecError):
    """The publisher cannot serve as asked: a port out of range or taken, no such plan."""


class _Served:
    """The tree served now: its plan, XML, node statuses, id (new for every tree) and the blackboard shown."""

    def __init__(self, plan_id: str, export: BtcppExport, step_graph: bool):
        self.plan_id = plan_id
        self.export = export
        self.xml = export.xml.encode("utf-8")
        self.board = StatusBoard(export)
        self.tree_id = os.urandom(protocol.TREE_ID_BYTES)
        # A step graph's blackboard is the XML's: the step to run next and the last outcome (its Scripts').
        self.steps: dict | None = {"step": "", "event": ""} if step_graph else None
        self.final_blackboard: dict | None = None  # the plan's blackboard as it ended, shown once it is gone


class Groot2Publisher:
    """Serves one plan of ``executor`` to Groot2: the newest plan started (``plan_id`` None), or plan ``plan_id``.

    The request/reply socket is bound on ``host``:``port``, the publisher on ``port`` + 1 (``host``: an address of
    this machine, ``*`` for all; the protocol has no authentication, so the default is loopback). Served: the
    full tree (BT.CPP XML with a ``_uid`` on every node, ``plan_to_btcpp(plan, uids=True)``), every node's status
    (``StatusBoard``), the blackboard, breakpoints as the plan's pause points (``Breakpoints``) and the recording
    of status changes; any other request gets an error reply saying what is served. A new plan followed is a new tree
    id: Groot2 then asks for the tree again. Bad requests never stop it; it uses one thread, ``start`` to
    ``close``.
    """

    def __init__(self, executor, port: int, *, plan_id: str | None = None, host: str = "127.0.0.1",
                 heartbeat_s: float = HEARTBEAT_S):
        if type(port) is not int or not 1 <= port <= 65534:
            raise Groot2Error(f"the Groot2 port must be 1 to 65534 (it and the next one are served), got {port!r}")
        self.executor = executor
        self.port = port
        self.host = host
        self.plan_id = None if plan_id is None else str(plan_id)  # ids are text, as the executor's events give them
        self.heartbeat_s = heartbeat_s  # breakpoints of a Groot2 silent this long are removed
        self._served: _Served | None = None
        self._pending: tuple[str, object] | None = None  # (plan id, plan) of a large plan whose tree is to be written
        self._lock = threading.RLock()  # a batch of events, or a switch to another tree, at a time
        self._notices: collections.deque[list[bytes]] = collections.deque(maxlen=MAX_QUEUED_NOTICES)
        self.breakpoints = Breakpoints(executor)
        # the catalogs the executor checks plans against: the tree is drawn with the skills and nodes they name
        self._context_of_checks = CheckContext(skill_catalog=executor.skill_catalog,
                                               node_catalog=executor.node_catalog)
        self._last_request = time.monotonic()
        self._stopping = threading.Event()
        self._context: zmq.Context | None = None
        self._server = self._publisher = None
        self._thread: threading.Thread | None = None
        self._unsubscribe = None

    @property
    def address(self) -> str:
        """Where Groot2 connects: host:port of the request/reply socket."""
        return f"{self.host}:{self.port}"

    @property
    def publisher_port(self) -> int:
        """The port of the publisher socket: the request/reply port + 1."""
        return self.port + 1

    def start(self) -> "Groot2Publisher":
        """Bind both sockets and serve from a thread of its own; Groot2Error if a port is taken (nothing is then
        left bound). A plan already running (``plan_id``, or the newest) is served at once."""
        context = zmq.Context()
        try:
            self._server = self._bound(context, zmq.REP, self.port)
            self._publisher = self._bound(context, zmq.PUB, self.publisher_port)
        except Groot2Error:
            for socket in (self._server, self._publisher):
                if socket is not None:
                    socket.close(0)
            self._server = self._publisher = None
            context.term()
            raise
        self._context = context
        self._unsubscribe = self.executor.subscribe_batches(self._on_events)
        self._follow_running_plan()
        self._thread = threading.Thread(target=self._serve, name=f"bt_exec-groot2-{self.port}", daemon=True)
        self._thread.start()
        log.info("serving Groot2 on %s:%d (publisher %d)", self.host, self.port, self.publisher_port)
        return self

    def close(self) -> None:
        """Stop serving and free both ports."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for socket in (self._server, self._publisher):
            if socket is not None:
                socket.close(0)
        self._server = self._publisher = None
        if self._context is not None:
            self._context.term()
            self._context = None

    def __enter__(self) -> "Groot2Publisher":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def served_plan(self) -> str | None:
        """The id of the plan served now, None before one started."""
        served = self._served
        return served.plan_id if served is not None else None

    # --- the plan followed (from the ticking thread: never blocks) ------------------------------------------

    def _on_events(self, events: list[dict]) -> None:
        with self._lock:  # a batch is taken in whole before or after another tree is served, never across it
            for event in events:
                if event["event"] == "plan_started":
                    self._plan_started(event["plan_id"])
                    continue
                served = self._served
                if served is not None and event.get("plan_id") == served.plan_id:
                    self._apply(served, event)

    def _apply(self, served: _Served, event: dict) -> None:
        """One event of the plan served, on its tree."""
        kind = event["event"]
        if kind == "node_state":
            served.board.op_state(event["op_id"], event["state"])
        elif kind == "plan_complete":
            served.board.plan_ended(event["outcome"])
            if served.steps is None:
                served.final_blackboard = self._plan_blackboard(served.plan_id)
        elif kind == "step_transition" and served.steps is not None:
            served.board.step_taken(event["step"], event["outcome"])
            served.steps = {"step": event["next"], "event": ""}
        elif kind == "pause_point":
            self.breakpoints.fired(event["op_id"], event["when"])
            uids = served.board.uids_of(event["op_id"])
            if uids:  # Groot2 hears a breakpoint reached, as from BT.CPP's publisher
                header = protocol.HEADER.pack(protocol.PROTOCOL_ID, protocol.BREAKPOINT_REACHED[0],
                                              int.from_bytes(os.urandom(4), "little"))
                self._notices.append([header, str(uids[0]).encode()])

    def _plan_started(self, plan_id: str) -> None:
        """A plan started: serve it (if it is the one followed) from now on. A large plan's tree is written by the
        server thread (``_take_pending``), so the tick is not held while it is."""
        if self.plan_id is not None and plan_id != self.plan_id:
            return
        try:
            plan = self.executor.get_plan_ir(plan_id)
        except ControlError:  # a plan of pure control, or one already gone
            return
        if plan.op_count > WRITTEN_IN_TICK_OPS:
            self._pending = (plan_id, plan)
            return
        self._pending = None
        served = self._written(plan_id, plan)
        if served is not None:
            served.board.plan_started()
            self.breakpoints.remove_all(self._switch(served))

    def _written(self, plan_id: str, plan) -> _Served | None:
        """Plan ``plan_id``'s tree ready to serve; None (the tree served stays) for one BT.CPP XML cannot hold."""
        try:
            export = btcpp_export(plan, uids=True, context=self._context_of_checks)
        except ExportError as exc:
            log.warning("Groot2: plan %s is not served: %s", plan_id, exc)
            return None
        served = _Served(plan_id, export, plan.steps is not None)
        if served.steps is not None:
            served.steps["step"] = plan.root
        return served

    def _switch(self, served: _Served) -> _Served | None:
        """Serve ``served`` from now on; the tree served before, whose breakpoints the caller lets go (outside the
        lock: that plan must not stay paused at one)."""
        with self._lock:
            before, self._served = self._served, served
        return before

    def _take_pending(self) -> None:
        """Write the tree of the large plan started last (in the server thread), then serve it from its ops' states
        now: the events it had meanwhile are in those states, the ones after it go to its tree."""
        pending = self._pending
        served = self._written(*pending)
        with self._lock:
            if self._pending is not pending:
                return  # another plan started meanwhile: its tree is the one to serve
            self._pending = None
            if served is None:
                return  # BT.CPP XML cannot hold it: the tree served stays
            self._seed(served)
            before = self._switch(served)
        self.breakpoints.remove_all(before)

    def _seed(self, served: _Served) -> None:
        """Give a tree its plan's states now: of its ops, and its outcome if it ended."""
        served.board.plan_started()
        try:
            ops, outcome = self.executor.get_plan_status(served.plan_id, with_args=False)["ops"], None
        except ControlError:  # it ended already
            try:
                record = self.executor.get_plan_result(served.plan_id)
            except ControlError:
                return
            ops, outcome = record["ops"], record["outcome"]
        for op in ops:
            if op["state"] != "pending":
                served.board.op_state(op["op_id"], op["state"])
        if outcome is not None:
            served.board.plan_ended(outcome)

    def _follow_running_plan(self) -> None:
        """At start: serve the plan named, or the newest, if it already runs, with its ops' states now."""
        plan_id = self.plan_id
        if plan_id is None:
            plans = self.executor.get_all_plans()["plans"]
            if not plans:
                return
            plan_id = plans[-1]["plan_id"]
        try:
            plan = self.executor.get_plan_ir(plan_id)
        except ControlError:
            return  # not started yet, or over: its plan_started (or none) decides
        served = self._written(plan_id, plan)
        if served is not None:
            with self._lock:
                self._seed(served)
                self._switch(served)  # nothing was served before: no breakpoint to let go

    # --- the server thread --------------------------------------------------------------------------------

    def _bound(self, context: zmq.Context, kind: int, port: int):
        socket = context.socket(kind)
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)
        if kind == zmq.REP:
            socket.setsockopt(zmq.MAXMSGSIZE, MAX_REQUEST_BYTES)
        try:
            socket.bind(f"tcp://{self.host}:{port}")
        except zmq.ZMQError as exc:
            socket.close(0)
            raise Groot2Error(f"cannot serve Groot2 on {self.host}:{port}: {exc.strerror}") from None
        return socket

    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self._server, zmq.POLLIN)
        while not self._stopping.is_set():
            if self._pending is not None:
                self._take_pending()
            while self._notices:
                try:
                    self._publisher.send_multipart(self._notices.popleft(), zmq.NOBLOCK)
                except zmq.ZMQError:
                    pass  # no subscriber keeps up: a notice is not worth blocking for
            if not poller.poll(POLL_MS):
                if self.breakpoints.armed and time.monotonic() - self._last_request > self.heartbeat_s:
                    log.warning("Groot2: no request for %g s; its breakpoints are removed", self.heartbeat_s)
                    self.breakpoints.remove_all(self._served)
                continue
            self._last_request = time.monotonic()
            try:
                request = self._server.recv_multipart(zmq.NOBLOCK)
            except zmq.ZMQError:
                continue
            try:
                reply = self.answer(request)
            except Exception:  # a bug answering must not end the service; the client hears it
                log.exception("Groot2: answering a request failed")
                reply = [b"error", b"internal error answering the request"]
            try:
                self._server.send_multipart(reply)
            except zmq.ZMQError:  # the client is gone or stuck: start a fresh socket for the next one
                poller.unregister(self._server)
                self._server.close(0)
                try:
                    self._server = self._bound(self._context, zmq.REP, self.port)
                except Groot2Error as exc:
                    log.error("Groot2: serving stopped: %s", exc)
                    self._server = None
                    return
                poller.register(self._server, zmq.POLLIN)

    def answer(self, request: list[bytes]) -> list[bytes]:
        """The reply to one request (its parts): what the server thread sends back."""
        header = request_header(request[0]) if request else None
        if header is None:
            size = len(request[0]) if request else 0
            return _error(f"a request starts with a {protocol.HEADER.size}-byte header (protocol, type, id); this "
                          f"one has {size} bytes")
        _protocol, kind, request_id = header
        name = protocol.REQUEST_NAMES.get(kind)
        if name not in SERVED:
            what = f"request {name!r}" if name else f"request type {kind!r}"
            return _error(f"{what} is not served: bt_exec serves {', '.join(SERVED)} (breakpoints are the plan's "
                          "own pause points; stop and pause points are armed from every door too: bt-exec run "
                          "--stop-at/--pause-at, stop_plan_at)")
        served = self._served
        if served is None:
            return _error("no plan to show yet: one is served once it starts")
        if kind in _WITH_PAYLOAD and len(request) != 2:
            second = {protocol.BLACKBOARD: "the blackboards' names separated by ';'",
                      protocol.TOGGLE_RECORDING: "start or stop"}.get(kind, "JSON")
            return _error(f"a {name} request has two parts: the header, then {second}")
        head = reply_header(kind, request_id, served.tree_id)
        if kind == protocol.FULLTREE:
            return [head, served.xml]
        if kind == protocol.STATUS:
            return [head, served.board.reply()]
        if kind == protocol.BLACKBOARD:
            names = request[1].decode("utf-8", "replace").split(";")
            return [head, msgpack(self._blackboards(served, names))]
        if kind == protocol.HOOKS_DUMP:
            return [head, self.breakpoints.dump()]
        if kind == protocol.GET_TRANSITIONS:
            return [head, served.board.transitions()]
        if kind == protocol.TOGGLE_RECORDING:
            return self._toggle_recording(served, head, request[1])
        try:
            if kind == protocol.HOOK_INSERT:
                self.breakpoints.insert(served, request[1])
            elif kind == protocol.HOOK_REMOVE:
                self.breakpoints.remove(served, request[1])
            elif kind == protocol.BREAKPOINT_UNLOCK:
                self.breakpoints.unlock(served, request[1])
            else:  # remove or disable them all: either way no breakpoint holds the plan any more
                self.breakpoints.remove_all(served)
        except HookError as exc:
            return _error(str(exc))
        return [head]

    @staticmethod
    def _toggle_recording(served: _Served, head: bytes, command: bytes) -> list[bytes]:
        """``start``: keep the status changes from now on, answering the time now (microseconds since the epoch,
        what Groot2 lines them up with); ``stop``: keep no more."""
        if command == b"start":
            served.board.start_recording()
            return [head, str(time.time_ns() // 1000).encode()]
        if command == b"stop":
            served.board.stop_recording()
            return [head]
        return _error("a toggle_recording request's second part is start or stop")

    def _blackboards(self, served: _Served, names: list[str]) -> dict:
        """The blackboards asked for by name that this tree has (its one: the main tree's), each bounded in size."""
        if served.export.tree_id not in names:
            return {}
        values = served.steps if served.steps is not None else (
            served.final_blackboard if served.final_blackboard is not None else self._plan_blackboard(served.plan_id))
        shown, size = {}, 0
        for key, value in values.items():
            packed = len(msgpack(value))
            if packed > MAX_VALUE_BYTES:
                value, packed = f"<{packed} bytes, not shown>", 32
            size += packed + len(key)
            if size > MAX_BLACKBOARD_BYTES:
                break
            shown[key] = value
        return {served.export.tree_id: shown}

    def _plan_blackboard(self, plan_id: str) -> dict:
        try:
            return self.executor.get_blackboard(plan_id)
        except ControlError:
            return {}


def _error(message: str) -> list[bytes]:
    return [b"error", message.encode("utf-8")]
