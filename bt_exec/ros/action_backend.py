"""Capabilities over ROS 2 actions: a Backend whose calls are ``bt_exec_interfaces/action/RunCapability`` goals.

One call is one goal (``plan_id``, ``op_id``, ``cap``, ``args_json``) sent to
the action server of the call's provider:

* provider: the call's ``provider`` field, else the part of ``cap`` before
  its first dot (``tiago_camera.camera_snapshot`` -> ``tiago_camera``), else
  (a cap without a dot, e.g. a Qwen3 skill such as ``grab``) ``default_provider``
  (``robot``);
* server: ``server_map[provider]``, else ``server_map["*"]``, else
  ``bt_exec/capabilities/<provider>`` in the node's namespace
  (``/robot1/bt_exec/capabilities/sim`` for a node in ``/robot1``) with the
  provider made a valid ROS name token (characters other than letters, digits
  and ``_`` become ``_``).

Threading: ``start``, ``status`` and ``cancel`` are called from the executor's
tick thread and never block it; the answers (goal response, feedback, result)
arrive in callbacks of the node's executor. **The node must be spinning** in
another thread, in a ``MultiThreadedExecutor`` (the clients use a callback
group of their own, so a blocking callback elsewhere on the node does not
starve them). Without spinning, goals stay PENDING and fail after
``server_timeout_s``.

Life of a call, as ``status(run_id)`` reports it:

* PENDING while the server is not there yet (for at most ``server_timeout_s``
  from ``start``, then FAILED: ``no action server /bt_exec/capabilities/x after
  5.0 s``) and while the goal waits for acceptance (again at most
  ``server_timeout_s``); FAILED if the goal is rejected.
* RUNNING once accepted; then RUNNING or PAUSED as the feedback's ``state``
  says, with its ``detail``.
* terminal from the result: CANCELED if the server canceled the goal; TIMEOUT
  if ``event`` is ``timeout``; SUCCEEDED if ``success``; FAILED otherwise with
  the server's ``error``. ``event`` is passed through, ``output_json`` is parsed
  into ``output`` (kept as text if it is not JSON).
* FAILED (``action server ... went away while the goal ran``) when the server
  that accepted the goal leaves the ROS graph (its process died or was
  stopped) and no result came within ``lost_grace_s``. A server restarted
  under the same name is a different server: the goal is not resumed there.

``pause(run_id)`` / ``resume(run_id)``: ROS 2 actions cannot pause, so a
capability server that can hold a goal offers the service
``<action name>/pause`` (``bt_exec_interfaces/srv/PauseGoal``: the goal's UUID
as hex and ``pause`` true or false). The request is sent asynchronously (the
tick thread never waits for it); once the server acknowledges a pause the call
reports PAUSED (and RUNNING again once it acknowledges the resume). A pause
asked before the goal is accepted is sent on acceptance. Where the server
offers no such service (its client, made with the action client, has not found
it), ``pause`` raises ``CapabilityPauseError``: the executor then leaves that
goal running to its end, and ``can_pause(run_id)`` says so beforehand.

``cancel(run_id)`` cancels the goal; after the call finished it does nothing.
The backend names each goal's id itself, so a goal still awaiting acceptance
is cancelled by that id at once: a server whose acceptance never reaches the
client (Fast DDS drops a reply when the server has not yet discovered the
client's reply reader) still holds, and runs, the goal. Should the acceptance
arrive later, the cancel is sent again on the goal's handle, in case the first
one reached the server before the goal did. A goal that is given up for any
other reason (no answer to the goal request, the server gone) is cancelled the
same way. ``close`` cancels what is in flight and waits (bounded) for the
servers to answer.

It pushes (``watch_call``): a watched call's news is told from the node's
callbacks (the goal accepted or rejected, feedback, the result, a pause
answered), so the executor asks for its status only then. What changes with
time alone is told from ``send_due_news``: a goal still waiting for its server
every period, a goal awaiting its acceptance when its time to be accepted runs
out, an accepted goal's liveness check every 0.2 s; a period with nothing due
costs one comparison. ``news_due_at`` says when that next is, so the
executor's loop sleeps until then (while no call is watched, until woken).

Goals go through ``LockedActionClient`` (``bt_exec.compat.rclpy``): rclpy's
ActionClient drops a response that comes as its request is being sent from
another thread.
"""
from __future__ import annotations

import collections
import functools
import itertools
import json
import logging
import math
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from action_msgs.msg import GoalStatus
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.expand_topic_name import expand_topic_name
from rclpy.validate_full_topic_name import validate_full_topic_name

from bt_exec.backends import CallStatus, CapabilityCall
from bt_exec.compat.rclpy import LockedActionClient
from bt_exec.errors import BtExecError
from bt_exec_interfaces.action import RunCapability
from bt_exec_interfaces.srv import PauseGoal
from unique_identifier_msgs.msg import UUID

log = logging.getLogger(__name__)

PAUSE_SERVICE_SUFFIX = "/pause"  # the action name plus this: where a capability server offers PauseGoal
SERVER_PREFIX = "bt_exec/capabilities/"  # in the node's namespace: each robot of a fleet has its own servers
DEFAULT_PROVIDER = "robot"

_FEEDBACK_STATES = {"pending": "PENDING", "running": "RUNNING", "paused": "PAUSED"}
_LIVENESS_PERIOD_S = 0.2  # how often an in-flight goal checks that its server is still in the graph
_FORGET_AFTER_S = 60.0    # a record nobody polls any more (cancelled, or finished and never asked) is dropped then


class CapabilityPauseError(BtExecError):
    """The goal's capability server cannot pause it (it offers no pause service)."""


def name_token(text: str) -> str:
    """``text`` as one valid ROS name token: letters, digits and single underscores, not starting with a digit."""
    token = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", text or "")).strip("_")
    if not token:
        return "unnamed"
    return "p" + token if token[0].isdigit() else token


def provider_of(call: CapabilityCall, default_provider: str = DEFAULT_PROVIDER) -> str:
    """The provider serving a call: its ``provider`` field, else the cap's prefix before the first dot."""
    return _provider_of(call.cap, call.provider, default_provider)


def _provider_of(cap: str, provider: str | None, default_provider: str) -> str:
    if provider:
        return provider
    prefix, dot, _ = cap.partition(".")
    return prefix if dot and prefix else default_provider


def default_server_name(provider: str, namespace: str = "/") -> str:
    """``<namespace>/bt_exec/capabilities/<provider>``, with the provider sanitised into a valid name token."""
    return f"{namespace.rstrip('/')}/{SERVER_PREFIX}{name_token(provider)}"


@dataclass(eq=False, slots=True)
class _Goal:
    """One call's goal, from start to its terminal state (fields guarded by the backend's lock)."""

    run_id: str
    call: CapabilityCall
    server: str
    client: LockedActionClient
    started_at: float
    phase: str = "waiting"        # waiting (for the server) | sent (awaiting acceptance) | active | done
    sent_at: float | None = None
    server_ids: frozenset = frozenset()  # GIDs of the server's status publisher when the goal was sent
    lost_since: float | None = None
    next_check: float = 0.0
    handle: Any = None            # the ClientGoalHandle once accepted
    goal_id: Any = None           # the goal's UUID message, named here when the goal is sent
    cancel_wanted: bool = False   # cancel it on the server (asked by cancel(), or the goal was given up)
    cancel_sent: bool = False     # on the goal's handle (accepted)
    cancel_by_id_sent: bool = False  # by its id alone, while the acceptance was still awaited
    cancel_answered: bool = False  # the server answered the cancel request (whatever its code)
    cancelled_at: float | None = None
    polled_out: bool = False      # cancel() was called: nobody polls this record any more
    goal_uuid: str = ""
    pause_wanted: bool = False    # the state the executor asked for (pause / resume)
    pause_sent: bool = False      # the state last sent to the server's pause service
    pause_in_flight: bool = False  # a PauseGoal request awaits its answer
    progress: CallStatus = CallStatus("PENDING")
    final: CallStatus | None = None
    ended_at: float | None = None
    news: Callable[[], None] | None = None  # what tells the executor the call has news (``watch_call``)


class RosActionBackend:
    """The Backend protocol over RunCapability action servers; see the module docstring.

    ``node``: an rclpy node that is spinning (MultiThreadedExecutor) in another
    thread for as long as the backend is used. ``server_map``: provider ->
    action server name (absolute, or relative to the node's namespace; key
    ``"*"`` for every provider not listed). ``server_timeout_s``: how long a
    call waits for its server to appear, and then for its goal to be accepted.
    """

    def __init__(self, node, server_map: dict[str, str] | None = None, server_timeout_s: float = 5.0, *,
                 default_provider: str = DEFAULT_PROVIDER, lost_grace_s: float = 0.5):
        if not server_timeout_s > 0:
            raise ValueError(f"server_timeout_s must be positive, got {server_timeout_s!r}")
        self.node = node
        self.server_timeout_s = float(server_timeout_s)
        self.lost_grace_s = float(lost_grace_s)
        self.default_provider = default_provider
        self.server_map = {provider: self._full_name(name, provider) for provider, name in (server_map or {}).items()}
        self._lock = threading.RLock()
        self._clients: dict[str, LockedActionClient] = {}
        self._pause_clients: dict[str, Any] = {}  # action name -> client of its pause service
        self._goals: dict[str, _Goal] = {}
        self._finished: collections.OrderedDict[str, CallStatus] = collections.OrderedDict()
        self._run_ids = itertools.count(1)
        self._group = MutuallyExclusiveCallbackGroup()
        self._closed = False
        self._next_sweep = 0.0
        self._next_due = 0.0  # when send_due_news has something to tell next (at the latest); inf: nothing

    # --- routing -------------------------------------------------------------------

    def server_for(self, call: CapabilityCall) -> str:
        """The fully qualified name of the action server that serves ``call``."""
        provider = provider_of(call, self.default_provider)
        name = self.server_map.get(provider) or self.server_map.get("*")
        return name or default_server_name(provider, self.node.get_namespace())

    def routed_provider(self, cap: str, provider: str | None) -> str:
        """The name a call's provider is routed by, for the call guard: the provider a ``server_map`` entry
        names as it is, any other as the name token of its server, so that every spelling of one server
        (``arm_.move``, ``arm-.move``, ``arm.move``) is judged as one."""
        routed = _provider_of(cap, provider, self.default_provider)
        return routed if routed in self.server_map or "*" in self.server_map else name_token(routed)

    def _full_name(self, name: str, provider: str) -> str:
        if not isinstance(name, str) or not name:
            raise ValueError(f"server_map[{provider!r}] must be a non-empty action name, got {name!r}")
        try:
            full = expand_topic_name(name, self.node.get_name(), self.node.get_namespace())
            validate_full_topic_name(full)
        except Exception as exc:
            raise ValueError(f"server_map[{provider!r}] = {name!r} is not a valid ROS action name: {exc}") from None
        return full

    def _client(self, server: str) -> LockedActionClient:
        with self._lock:
            if self._closed:
                raise RuntimeError("the ROS action backend is closed")
            client = self._clients.get(server)
            if client is None:
                client = LockedActionClient(self.node, RunCapability, server, callback_group=self._group)
                self._clients[server] = client
                # Made now, so that by the time a plan is paused the pause service has been discovered.
                self._pause_clients[server] = self.node.create_client(PauseGoal, server + PAUSE_SERVICE_SUFFIX,
                                                                      callback_group=self._group)
            return client

    # --- Backend protocol ----------------------------------------------------------

    def start(self, call: CapabilityCall) -> CallStatus | str:
        """Send the goal if the server is there (never waits for it); return the run id."""
        try:
            server = self.server_for(call)
            client = self._client(server)
        except Exception as exc:
            return CallStatus("FAILED", error=f"cannot reach an action server for {call.cap}: {exc}")
        goal = _Goal(f"ros-{next(self._run_ids)}", call, server, client, time.monotonic())
        with self._lock:
            self._goals[goal.run_id] = goal
        self._sweep()
        self._advance(goal)
        return goal.run_id

    def status(self, run_id: str) -> CallStatus:
        with self._lock:
            goal = self._goals.get(run_id)
            if goal is None:
                known = self._finished.get(run_id)
                return known or CallStatus("FAILED", error=f"ros: unknown run {run_id!r}")
        self._advance(goal)
        with self._lock:
            if goal.final is None:
                return goal.progress
            self._retire(goal)
            return goal.final

    def cancel(self, run_id: str) -> None:
        """Cancel the goal (now, or as soon as it is accepted); nothing for a finished call."""
        with self._lock:
            goal = self._goals.get(run_id)
            if goal is None or goal.polled_out:
                return
            goal.polled_out = True
            goal.news = None  # nobody waits on it now: the executor's run is not kept for the record's sake
            goal.cancelled_at = time.monotonic()
            if goal.final is not None:  # finished but not yet polled: nothing to cancel
                self._retire(goal)
                return
            self._end(goal, CallStatus("CANCELED", error="canceled on request"), cancel=True)
            if goal.phase == "waiting":  # nothing was sent: nothing to cancel on a server
                self._retire(goal)
        self._send_cancel_if_due(goal)

    def watch_call(self, run_id: str, news: Callable[[], None]) -> None:
        """Call ``news()`` (from the node's callbacks, or from ``send_due_news``) whenever the call may have
        changed, until it ended."""
        with self._lock:
            goal = self._goals.get(run_id)
            if goal is not None:
                goal.news = news
                self._next_due = 0.0

    def send_due_news(self) -> None:
        """Tell the watched calls whose goal must be moved on with time: sent once its server is there, given
        up when it waits too long, checked for its server's liveness (the executor calls it once per period)."""
        now = time.monotonic()
        if now < self._next_due:
            return
        due = []
        next_due = math.inf
        with self._lock:
            for goal in self._goals.values():
                if goal.news is None or goal.final is not None:
                    continue
                if goal.phase == "waiting":
                    due.append(goal.news)
                    next_due = now  # every period until its server is there: discovery tells nobody
                elif goal.phase == "sent":  # its acceptance is told by its callback; only its time-out is due
                    gives_up_at = goal.sent_at + self.server_timeout_s
                    if gives_up_at <= now:
                        due.append(goal.news)
                        next_due = now  # until the tick it wakes has given it up
                    else:
                        next_due = min(next_due, gives_up_at)
                elif goal.phase == "active":
                    if goal.next_check <= now:
                        due.append(goal.news)
                        next_due = min(next_due, now + _LIVENESS_PERIOD_S)
                    else:
                        next_due = min(next_due, goal.next_check)
            self._next_due = next_due
        for news in due:
            news()

    def news_due_at(self) -> float | None:
        """When ``send_due_news`` next has something to tell, on ``time.monotonic``'s clock (at the latest: a
        call watched since is due at once); None while no watched call is to be moved on with time."""
        next_due = self._next_due
        return None if next_due == math.inf else next_due

    def can_pause(self, run_id: str) -> bool:
        """Whether the server of this call offers the pause service (as far as discovery knows now)."""
        with self._lock:
            goal = self._goals.get(run_id)
            client = None if goal is None else self._pause_clients.get(goal.server)
        return client is not None and client.service_is_ready()

    def pause(self, run_id: str) -> None:
        """Ask the goal's server to pause it (without waiting); raises CapabilityPauseError where it cannot."""
        with self._lock:
            goal = self._goals.get(run_id)
            if goal is None or goal.final is not None:
                return
        if not self.can_pause(run_id):
            raise CapabilityPauseError(f"action server {goal.server} offers no pause service "
                                       f"{goal.server}{PAUSE_SERVICE_SUFFIX}: the goal goes on to its end")
        with self._lock:
            goal.pause_wanted = True
        self._send_pause_if_due(goal)

    def resume(self, run_id: str) -> None:
        """Ask the goal's server to resume it (without waiting); nothing for a call that was not paused."""
        with self._lock:
            goal = self._goals.get(run_id)
            if goal is None or not goal.pause_wanted:
                return
            goal.pause_wanted = False
        self._send_pause_if_due(goal)

    def close(self, wait_s: float = 1.0) -> None:
        """Cancel what is still in flight (an unanswered goal by its id), wait up to ``wait_s`` for the servers
        to answer the cancels (so that no goal runs on unknown to them), destroy the clients."""
        with self._lock:
            if self._closed:
                return
            self._closed = True  # start() refuses from now on
            goals = list(self._goals.values())
        for goal in goals:
            if goal.final is None:
                self.cancel(goal.run_id)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            with self._lock:
                if not any(_unsettled(g) for g in self._goals.values()):
                    break
            time.sleep(0.01)
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
            pause_clients, self._pause_clients = list(self._pause_clients.values()), {}
        for client in clients:
            try:
                client.destroy()
            except Exception as exc:  # the node may already be destroyed
                log.debug("destroying action client %s: %s", client.action_name, exc)
        for pause_client in pause_clients:
            try:
                self.node.destroy_client(pause_client)
            except Exception as exc:
                log.debug("destroying pause client %s: %s", pause_client.srv_name, exc)

    # --- inspection ----------------------------------------------------------------

    def in_flight(self) -> list[dict]:
        """Goals not yet ended on their server as far as this backend knows (also cancelled ones)."""
        with self._lock:
            return [{"run_id": g.run_id, "server": g.server, "cap": g.call.cap, "op_id": g.call.op_id,
                     "phase": g.phase, "goal_id": g.goal_uuid, "cancel_requested": g.cancel_wanted}
                    for g in self._goals.values() if g.phase != "done"]

    # --- progress (tick thread) ----------------------------------------------------

    def _advance(self, goal: _Goal) -> None:
        """Move a goal on without blocking: send it once its server is ready, enforce the timeouts."""
        with self._lock:
            phase, final = goal.phase, goal.final
        if final is not None or phase == "done":
            return
        now = time.monotonic()
        if phase == "waiting":
            if goal.client.server_is_ready():
                self._send(goal)
            elif now - goal.started_at >= self.server_timeout_s:
                with self._lock:
                    if goal.phase == "waiting":
                        goal.phase = "done"
                        self._end(goal, CallStatus("FAILED", error=f"no action server {goal.server} after "
                                                                   f"{self.server_timeout_s} s"))
            return
        if phase == "sent" and now - goal.sent_at >= self.server_timeout_s:
            with self._lock:
                if goal.phase == "sent":
                    self._end(goal, CallStatus("FAILED", error=f"action server {goal.server} did not accept or "
                                                               f"reject the goal within {self.server_timeout_s} s "
                                                               "(is the client node spinning?)"), cancel=True)
            self._send_cancel_if_due(goal)  # the server may hold the goal all the same
            return
        if now >= goal.next_check:
            goal.next_check = now + _LIVENESS_PERIOD_S
            with self._lock:  # a goal accepted since send_due_news last looked is checked from now on
                self._next_due = min(self._next_due, goal.next_check)
            if self._server_there(goal):
                goal.lost_since = None
            elif goal.lost_since is None:
                goal.lost_since = now
            elif now - goal.lost_since >= self.lost_grace_s:
                with self._lock:
                    if goal.final is None:
                        self._end(goal, CallStatus("FAILED", error=f"action server {goal.server} went away while "
                                                                   f"the goal ran (op {goal.call.op_id}, "
                                                                   f"{goal.call.cap})"), cancel=True)
                self._send_cancel_if_due(goal)  # should it be there after all, the goal must not go on

    def _send(self, goal: _Goal) -> None:
        call = goal.call
        try:
            args_json = json.dumps(call.args, separators=(",", ":"), default=str)
        except (TypeError, ValueError) as exc:
            with self._lock:
                goal.phase = "done"
                self._end(goal, CallStatus("FAILED", error=f"args of {call.cap} are not JSON: {exc}"))
            return
        message = RunCapability.Goal(plan_id=call.plan_id, op_id=call.op_id, cap=call.cap, args_json=args_json)
        server_ids = self._server_ids(goal.server)
        with self._lock:
            if goal.phase != "waiting" or goal.final is not None:
                return
            goal.phase = "sent"
            goal.sent_at = time.monotonic()
            goal.server_ids = server_ids
            goal.goal_id = UUID(uuid=list(uuid.uuid4().bytes))
            goal.goal_uuid = _uuid_text(goal.goal_id.uuid)
            try:
                future = goal.client.send_goal_async(message, goal_uuid=goal.goal_id,
                                                     feedback_callback=functools.partial(self._on_feedback, goal))
            except Exception as exc:
                goal.phase = "done"
                self._end(goal, CallStatus("FAILED", error=f"sending the goal to {goal.server} failed: "
                                                           f"{type(exc).__name__}: {exc}"))
                return
        future.add_done_callback(functools.partial(self._on_goal_response, goal))

    def _server_ids(self, server: str) -> frozenset:
        try:
            return frozenset(bytes(info.endpoint_gid)
                             for info in self.node.get_publishers_info_by_topic(server + "/_action/status"))
        except Exception as exc:
            log.debug("graph query for %s failed: %s", server, exc)
            return frozenset()

    def _server_there(self, goal: _Goal) -> bool:
        """Whether the server that got the goal is still in the graph (the same one: a restart is another)."""
        if goal.server_ids:
            return bool(self._server_ids(goal.server) & goal.server_ids)
        return goal.client.server_is_ready()

    # --- answers (the node's executor threads) -------------------------------------

    def _on_goal_response(self, goal: _Goal, future) -> None:
        exc = future.exception()
        handle = None if exc is not None else future.result()
        with self._lock:
            if exc is not None or handle is None:
                goal.phase = "done"
                self._end(goal, CallStatus("FAILED", error=f"sending the goal to {goal.server} failed: {exc}"))
                self._forget_if_unpolled(goal)
                rejected = True
            elif not handle.accepted:
                goal.phase = "done"
                self._end(goal, CallStatus("FAILED", error=f"action server {goal.server} rejected the goal "
                                                           f"(op {goal.call.op_id}, {goal.call.cap})"))
                self._forget_if_unpolled(goal)
                rejected = True
            else:
                rejected = False
                goal.handle = handle
                goal.phase = "active"
                if goal.final is None and goal.progress.state == "PENDING":
                    goal.progress = CallStatus("RUNNING")
        _tell(goal)
        if rejected:
            return
        try:
            handle.get_result_async().add_done_callback(functools.partial(self._on_result, goal))
        except Exception as exc:
            with self._lock:
                self._end(goal, CallStatus("FAILED", error=f"asking {goal.server} for the result failed: {exc}"),
                          cancel=True)
            _tell(goal)
        self._send_cancel_if_due(goal)
        self._send_pause_if_due(goal)  # a pause asked while the goal awaited acceptance

    def _on_feedback(self, goal: _Goal, message) -> None:
        feedback = message.feedback
        state = _FEEDBACK_STATES.get(feedback.state.strip().lower(), "RUNNING")
        with self._lock:
            if goal.final is None and goal.phase != "done":
                goal.progress = CallStatus(state, detail=feedback.detail)
        _tell(goal)

    def _on_result(self, goal: _Goal, future) -> None:
        exc = future.exception()
        if exc is not None:
            outcome = CallStatus("FAILED", error=f"getting the result from {goal.server} failed: {exc}")
        else:
            outcome = _outcome(future.result(), goal.server)
        with self._lock:
            goal.phase = "done"
            if goal.final is None:
                self._end(goal, outcome)
            self._forget_if_unpolled(goal)
        _tell(goal)

    def _on_cancel_response(self, goal: _Goal, future) -> None:
        with self._lock:
            goal.cancel_answered = True
        exc = future.exception()
        if exc is not None:
            log.warning("cancel of goal %s on %s failed: %s", goal.goal_uuid, goal.server, exc)
            return
        code = future.result().return_code
        if code != 0:  # rejected, unknown goal, or already terminated: the goal ends anyway
            log.debug("cancel of goal %s on %s answered with code %s", goal.goal_uuid, goal.server, code)

    # --- helpers -------------------------------------------------------------------

    def _end(self, goal: _Goal, outcome: CallStatus, cancel: bool = False) -> None:
        """Set the call's final status (first one wins); with ``cancel`` the goal is to be cancelled on the server."""
        if goal.final is None:
            goal.final = outcome
            goal.ended_at = time.monotonic()
        if cancel:
            goal.cancel_wanted = True

    def _send_cancel_if_due(self, goal: _Goal) -> None:
        """Cancel a goal that is to be cancelled: on its handle once accepted, by its id while still awaited."""
        with self._lock:
            if not goal.cancel_wanted:
                return
            if goal.phase == "active" and goal.handle is not None and not goal.cancel_sent:
                goal.cancel_sent = True
                goal.cancel_answered = False  # an answer to a cancel by id does not answer this one
                send = goal.handle.cancel_goal_async
            elif goal.phase == "sent" and not goal.cancel_by_id_sent:
                goal.cancel_by_id_sent = True
                send = functools.partial(goal.client.cancel_goal_id_async, goal.goal_id)
            else:
                return
        try:
            send().add_done_callback(functools.partial(self._on_cancel_response, goal))
        except Exception as exc:
            log.warning("cancelling goal %s on %s failed: %s", goal.goal_uuid, goal.server, exc)

    def _send_pause_if_due(self, goal: _Goal) -> None:
        """Send the pause state the executor wants, one request at a time (so a pause and the resume right
        after it reach the server in order)."""
        with self._lock:
            if (goal.pause_in_flight or goal.pause_wanted == goal.pause_sent or goal.phase != "active"
                    or goal.final is not None or goal.cancel_wanted):
                return
            client = self._pause_clients.get(goal.server)
            if client is None:
                return
            goal.pause_in_flight = True
            goal.pause_sent = pausing = goal.pause_wanted
            request = PauseGoal.Request(goal_id=goal.goal_uuid, pause=pausing)
        try:
            future = client.call_async(request)
        except Exception as exc:
            with self._lock:
                goal.pause_in_flight = False
            log.warning("%s of goal %s on %s failed: %s", "pause" if pausing else "resume", goal.goal_uuid,
                        goal.server, exc)
            return
        future.add_done_callback(functools.partial(self._on_pause_response, goal, pausing))

    def _on_pause_response(self, goal: _Goal, pausing: bool, future) -> None:
        exc = future.exception()
        answer = None if exc is not None else future.result()
        with self._lock:
            goal.pause_in_flight = False
            if answer is not None and answer.success and goal.final is None and goal.phase == "active":
                goal.progress = CallStatus("PAUSED" if pausing else "RUNNING", detail=answer.message or None)
        _tell(goal)
        if answer is None or not answer.success:
            log.warning("%s of goal %s on %s was refused: %s", "pause" if pausing else "resume", goal.goal_uuid,
                        goal.server, exc or answer.message)
        self._send_pause_if_due(goal)

    def _retire(self, goal: _Goal) -> None:
        """The outcome was handed out (or is not wanted): remember it; drop the record once its goal ended."""
        self._finished[goal.run_id] = goal.final
        while len(self._finished) > 1000:
            self._finished.popitem(last=False)
        goal.polled_out = True
        goal.news = None
        if goal.phase == "done" or goal.phase == "waiting":
            self._goals.pop(goal.run_id, None)

    def _forget_if_unpolled(self, goal: _Goal) -> None:
        if goal.polled_out:
            self._goals.pop(goal.run_id, None)

    def _sweep(self) -> None:
        """Drop records nobody will ask about: handed out or cancelled long ago, or ended and never polled."""
        now = time.monotonic()
        with self._lock:
            if now < self._next_sweep:
                return
            self._next_sweep = now + 1.0
            stale = [g.run_id for g in self._goals.values()
                     if (g.polled_out and now - (g.cancelled_at or g.ended_at or now) > _FORGET_AFTER_S)
                     or (g.final is not None and g.ended_at is not None and now - g.ended_at > _FORGET_AFTER_S)]
            for run_id in stale:
                self._goals.pop(run_id, None)


def _tell(goal: _Goal) -> None:
    """Tell the executor the goal may have changed (a callback's last step, outside the backend's lock)."""
    news = goal.news
    if news is not None:
        news()


def _unsettled(goal: _Goal) -> bool:
    """Closing waits for it: cancelled on its server (by handle or by id) with no answer yet."""
    if goal.phase == "sent":
        return not goal.cancel_answered
    return goal.phase == "active" and goal.cancel_sent and not goal.cancel_answered


def _outcome(response, server: str) -> CallStatus:
    """A terminal CallStatus from a GetResult response."""
    result = response.result
    output = _parse_output(result.output_json)
    event = result.event or None
    if response.status == GoalStatus.STATUS_CANCELED:
        return CallStatus("CANCELED", output=output, error=result.error or f"goal canceled by action server {server}",
                          event=event)
    if response.status == GoalStatus.STATUS_UNKNOWN:
        return CallStatus("FAILED", error=f"action server {server} has no result for the goal (status unknown; "
                                          "it may have restarted or expired the result)")
    if event == "timeout":
        return CallStatus("TIMEOUT", output=output, error=result.error or "timed out", event=event)
    if result.success:
        return CallStatus("SUCCEEDED", output=output, event=event)
    how = "aborted" if response.status == GoalStatus.STATUS_ABORTED else f"ended with status {response.status}"
    return CallStatus("FAILED", output=output, error=result.error or f"goal {how} by action server {server}",
                      event=event)


def _parse_output(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _uuid_text(uuid_bytes) -> str:
    return bytes(uuid_bytes).hex()
