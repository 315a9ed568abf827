"""bt-exec robonix's gRPC server: the Robonix executor's five contracts, served over bt_exec's control surface.

``RobonixServer(control, executor_id, listen)`` serves, on one asyncio loop in one thread of its own (grpc.aio:
no thread per stream):

- ``Execute`` (``robonix.pilot.Plan`` -> stream of ``RtdlEvent``): the plan is read as an RTDL wire arena and
  submitted through the control surface; its events come from the executor's event stream (``control.listen``),
  one stream for the whole server, handed to the Execute call of their plan: ``plan_started`` first, each
  node's states, one ``plan_complete`` last, then the stream ends. A plan is refused before any event as
  robonix-executor refuses it (INVALID_ARGUMENT, its reason word for word), or as bt_exec does (its first issue),
  with bt_exec's located issues and fixes after the reason (``convert.refusal_message``); a Plan with an
  ``auth_session_token`` is refused PERMISSION_DENIED (no Keystone identity check here).
- ``ControlPlan`` (cancel, cancel_all, stop_at), ``CancelAll``, ``ListActivePlans``, ``GetModuleHealth``.

Every operation is a control call, so a plan that came over Execute is the one every other door shows, and a
cancel, stop point or pause from any door acts on it (a cancel ends its Execute stream with ``plan_complete``).
Plans are named by Pilot's ``plan_id`` on this door (bt_exec's own id where Pilot gave none); a plan of another
door by bt_exec's id.

When the Execute client goes away mid-plan the plan runs on to its end, as robonix-executor's does (its plan task
keeps running and ignores that the stream is gone); ``ControlPlan`` and ``ListActivePlans`` still reach it.

``plan_started`` goes out before the plan starts (its start is held until then): its first tick would otherwise
hold the interpreter while this loop waits to write.

Bounds: at most ``max_streams`` Execute streams at once (one more: RESOURCE_EXHAUSTED). Events wait for a slow
client in its stream's backlog, at most every event its plan can give (``events_allowance``) plus
``max_backlog_bytes``, and at most ``max_total_backlog_bytes`` over all streams (then the stream furthest behind
is the one ended): past either, that stream is ended with RESOURCE_EXHAUSTED, its backlog dropped, and the plan
runs on; the executor's thread never waits for a client. Requests are at most the executor's
``max_input_bytes``; an answer at most 4 MiB (what Robonix's clients read). A request that is not the protobuf it
should be is refused INVALID_ARGUMENT, and the server serves on. bt_exec's event stream for the door is drained
as soon as it has news; events it dropped when full are made good from the plans' final records.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import threading

from bt_exec.control import ControlCalls, error_answer
from bt_exec.errors import BadArgument, BtExecError, ControlError, Conflict, NotFound
from bt_exec.events.shapes import FINAL_STATES
from bt_exec.robonix import DEFAULT_LISTEN, convert
from bt_exec.robonix.stubs import load_wire

_wire = load_wire()  # raises StubsMissing, saying what to run, before grpc is needed

import grpc  # noqa: E402  (installed: load_wire checked)
from google.protobuf.message import DecodeError  # noqa: E402

from bt_exec.robonix.wire import executor_pb2, module_health_pb2, pilot_pb2  # noqa: E402

log = logging.getLogger(__name__)

DOOR = "robonix"  # what the executor's events name as the door of the stop points armed here
MAX_STREAMS = 64  # Execute streams at once: an executor runs 64 plans at once by default
# One stream's events waiting for its client, beyond every event its plan can give (events_allowance): outputs
# (bt_exec keeps at most 4 MiB of a plan's results) and the states a pause or a paused call adds.
MAX_BACKLOG_BYTES = 8 * 1024 * 1024
MAX_TOTAL_BACKLOG_BYTES = 256 * 1024 * 1024
MAX_UNARY_CALLS = 64  # other calls in progress at once, beyond the streams (gRPC refuses more)
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # what Robonix's clients (tonic, grpcio) read of one message by default
EVENT_FIELDS_BYTES = 64  # an RtdlEvent's fields and tags beyond its texts, and more
ENTRY_BYTES = 64  # what a queued event costs beyond its own bytes (its deque slot, the bytes object's header)
INLINE_SUBMIT_BYTES = 64 * 1024  # a plan this small is admitted on the loop: a worker's round trip costs more
START_HOLD_S = 1.0  # an admitted plan waits at most this long for its Execute stream to be ready for its events
CALL_WORKERS = 2  # blocking control calls: admitting a large plan, listing, arming
WAIT_WORKERS = 4  # cancels, each waiting up to its wait_ms for the plans to end

_CONTRACTS = "robonix.contracts."


class ServeError(BtExecError):
    """The server could not start: the address cannot be listened on, or the control surface has no event stream
    left for it."""


class _Stream:
    """One Execute call's events on their way out: the serialized ``RtdlEvent``s its client has not taken yet."""

    __slots__ = ("backlog", "size", "bound", "ready", "last_queued", "ended", "writing", "gone", "task", "plan")

    def __init__(self, task: asyncio.Task, bound: int):
        self.backlog: collections.deque[bytes] = collections.deque()
        self.size = 0
        self.bound = bound  # the most its backlog may hold, in bytes
        self.ready = asyncio.Event()
        self.last_queued = False  # plan_complete is in the backlog (or written)
        self.ended: tuple[grpc.StatusCode, str] | None = None  # the server ended the stream: with this status
        self.writing = False
        self.gone = False  # its place and backlog are freed: nothing more is queued
        self.task = task
        self.plan: _Plan | None = None


class _Plan:
    """A plan that came over Execute, until its ``plan_complete`` went out: its ids, its nodes, its stream (None
    once the client went away or the stream was ended), the ops whose final state went out, and whether events of
    it may have been lost (then the rest is read from its record)."""

    __slots__ = ("robonix_id", "bt_id", "nodes", "stream", "reported", "lossy")

    def __init__(self, robonix_id: str, bt_id: str, nodes: dict[str, convert.PlanNode], stream: _Stream):
        self.robonix_id = robonix_id
        self.bt_id = bt_id
        self.nodes = nodes
        self.stream: _Stream | None = stream
        self.reported: set[str] = set()
        self.lossy = False


class RobonixServer:
    """The Robonix executor's gRPC contracts over ``control`` (a ``bt_exec.control.ControlApi`` over an Executor).

    ``executor_id``: the provider id Atlas knows this executor by (GetModuleHealth's ``provider_id``); ``listen``:
    ``host:port`` (port 0: any free port). ``start()`` serves and returns the bound ``host:port``; ``stop(grace_s)``
    ends it. The bounds are the module's (``max_streams``, ``max_backlog_bytes``, ``max_total_backlog_bytes``).
    """

    def __init__(self, control, executor_id: str, listen: str = DEFAULT_LISTEN, *, max_streams: int = MAX_STREAMS,
                 max_backlog_bytes: int = MAX_BACKLOG_BYTES, max_total_backlog_bytes: int = MAX_TOTAL_BACKLOG_BYTES):
        self.control = control
        self.executor_id = executor_id
        self.listen = listen
        self.max_streams = max_streams
        self.max_backlog_bytes = max_backlog_bytes
        self.max_total_backlog_bytes = max_total_backlog_bytes
        self.address: str | None = None
        # Execute's submits: a plan's start held until its stream is ready for its events, so none is published before.
        self._submits = ControlCalls(control.executor, hold_start_s=START_HOLD_S)
        self._max_request_bytes = control.executor.limits.max_input_bytes
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: grpc.aio.Server | None = None
        self._events = None
        self._drain_pending = False
        self._calls = concurrent.futures.ThreadPoolExecutor(CALL_WORKERS, thread_name_prefix="bt_exec-robonix-call")
        self._waits = concurrent.futures.ThreadPoolExecutor(WAIT_WORKERS, thread_name_prefix="bt_exec-robonix-wait")
        # Read and changed on the loop only.
        self._streams: set[_Stream] = set()
        self._backlog_total = 0
        self._by_bt: dict[str, _Plan] = {}
        self._by_robonix: dict[str, _Plan] = {}
        self._admitting: set[str] = set()

    # --- life ----------------------------------------------------------------------------------------------

    def start(self) -> str:
        """Serve the five contracts; the bound ``host:port``. ServeError when it cannot."""
        if self._thread is not None:
            raise ServeError("the Robonix gRPC server is started already")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="bt_exec-robonix-grpc", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self.address = asyncio.run_coroutine_threadsafe(self._serve(), loop).result(timeout=60)
        except BaseException:
            self.stop(0)
            raise
        log.info("Robonix executor contracts served on %s as %r", self.address, self.executor_id)
        return self.address

    def stop(self, grace_s: float = 1.0) -> None:
        """Stop serving: calls in progress get ``grace_s`` seconds, then are cancelled (their plans run on)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._shut(grace_s), loop).result(timeout=grace_s + 30)
        except Exception:
            log.exception("the Robonix gRPC server did not stop cleanly")
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        if not thread.is_alive():
            loop.close()
        self._calls.shutdown(wait=False, cancel_futures=True)
        self._waits.shutdown(wait=False, cancel_futures=True)
        self._loop = self._thread = None

    @property
    def open_streams(self) -> int:
        """How many Execute streams are open."""
        return len(self._streams)

    @property
    def backlog_bytes(self) -> int:
        """The bytes of events waiting for their clients, over every stream."""
        return self._backlog_total

    async def _serve(self) -> str:
        server = grpc.aio.server(
            options=[("grpc.max_receive_message_length", self._max_request_bytes),
                     ("grpc.max_send_message_length", MAX_ANSWER_BYTES)],
            maximum_concurrent_rpcs=self.max_streams + MAX_UNARY_CALLS)
        server.add_generic_rpc_handlers(self._handlers())
        try:
            port = server.add_insecure_port(self.listen)
        except RuntimeError as exc:
            port, why = 0, str(exc)
        else:
            why = "the address is taken or not this machine's"
        if port == 0:
            raise ServeError(f"cannot listen on {self.listen!r} for the Robonix executor contracts: {why}")
        try:
            self._events = self.control.listen()
        except ControlError as exc:
            raise ServeError(f"the Robonix door gets no event stream: {exc}") from None
        self._events.on_ready(self._wake)
        await server.start()
        self._server = server
        return f"{self.listen.rsplit(':', 1)[0]}:{port}"

    async def _shut(self, grace_s: float) -> None:
        if self._server is not None:
            await self._server.stop(grace_s)
        if self._events is not None:
            self._events.close()

    def _handlers(self) -> tuple:
        def unary(handler, request_type):
            async def answer(request: bytes, context):
                return await handler(await _parsed(request_type, request, context), context)
            return grpc.unary_unary_rpc_method_handler(answer, response_serializer=_serialized)

        return (
            grpc.method_handlers_generic_handler(_CONTRACTS + "RobonixSystemExecutorExecute", {
                "Execute": grpc.unary_stream_rpc_method_handler(self._execute)}),
            grpc.method_handlers_generic_handler(_CONTRACTS + "RobonixSystemExecutorControlPlan", {
                "ControlPlan": unary(self._control_plan, executor_pb2.ControlPlan_Request)}),
            grpc.method_handlers_generic_handler(_CONTRACTS + "RobonixSystemExecutorListActivePlans", {
                "ListActivePlans": unary(self._list_active_plans, executor_pb2.ListActivePlans_Request)}),
            grpc.method_handlers_generic_handler(_CONTRACTS + "RobonixSystemExecutorCancelAllPlans", {
                "CancelAll": unary(self._cancel_all, executor_pb2.CancelAll_Request)}),
            grpc.method_handlers_generic_handler(_CONTRACTS + "RobonixSystemExecutorGetHealth", {
                "GetModuleHealth": unary(self._health, module_health_pb2.GetModuleHealth_Request)}),
        )

    # --- Execute -------------------------------------------------------------------------------------------

    async def _execute(self, request: bytes, context) -> None:
        plan = await _parsed(pilot_pb2.Plan, request, context)
        if plan.auth_session_token:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, auth_refusal(plan.plan_id))
        if len(self._streams) >= self.max_streams:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"{self.max_streams} Execute streams are open already; try again once a plan ended")
        robonix_id = plan.plan_id
        if robonix_id in self._by_robonix or robonix_id in self._admitting:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS,
                                f"plan '{robonix_id}' is running already; a new plan needs a plan_id of its own")
        stream = _Stream(asyncio.current_task(), self.max_backlog_bytes + events_allowance(plan, len(request)))
        self._streams.add(stream)
        if robonix_id:
            self._admitting.add(robonix_id)
        try:
            admitting = self._admit(plan, len(request), stream)
            if len(request) <= INLINE_SUBMIT_BYTES:
                outcome = await admitting  # admitted on the loop, never suspended: a client going away cannot cut it
            else:
                # Shielded: a client that goes away while its plan is admitted leaves an admitted plan, tracked.
                outcome = await asyncio.shield(asyncio.ensure_future(admitting))
            if not isinstance(outcome, _Plan):
                await context.abort(*outcome)
            # plan_started goes out before the plan starts: its first tick would hold the interpreter while this
            # loop waits to write. The write also carries the stream's headers, so that an end from the server's
            # side that gives up a later write sends only its status (gRPC refuses headers twice).
            started = convert.event_to_msg({"event": "plan_started"}, outcome.robonix_id, outcome.nodes)
            try:
                await context.write(started.SerializeToString())
            finally:
                self.control.executor.release_start(outcome.bt_id)
            await self._write(stream, context)
        finally:
            self._let_go(stream)
            tracked = stream.plan
            if tracked is not None and tracked.stream is stream:
                tracked.stream = None
            if tracked is not None and self._by_bt.get(tracked.bt_id) is tracked and stream.ended is None:
                # The client went away, or the server stops.
                log.info("the Execute client of plan '%s' went away; the plan runs on to its end, as "
                         "robonix-executor's does", tracked.robonix_id)

    async def _admit(self, plan, size: int, stream: _Stream) -> _Plan | tuple[grpc.StatusCode, str]:
        """Check and submit ``plan``: its tracking once admitted (its start held until ``plan_started`` went out,
        or released at once when the client went away meanwhile), or the status refusing it."""
        try:
            arena = convert.msg_to_arena(plan)
            inline = size <= INLINE_SUBMIT_BYTES
            reason = convert.robonix_refusal(arena)
            if reason is not None:
                checked = await self._call(inline, self.control.call, "validate_plan",
                                           {"graph": arena, "dialect": "rtdl"})
                return grpc.StatusCode.INVALID_ARGUMENT, convert.refusal_message(reason, checked["issues"])
            graph = convert.addressed_to_builtins(arena, self.executor_id)
            answer = await self._call(inline, self._submits.call, "submit_plan", {"graph": graph, "dialect": "rtdl"})
        except Exception as exc:  # never a dead server: the refusal or the bug's type, as every door answers it
            status, answer = error_answer(exc, "Execute")
            return _GRPC_STATUS.get(status, grpc.StatusCode.INTERNAL), answer["error"]["message"]
        finally:
            self._admitting.discard(plan.plan_id)
        if not answer["accepted"]:
            code = grpc.StatusCode.RESOURCE_EXHAUSTED if answer["verdict"] == "busy" else \
                grpc.StatusCode.INVALID_ARGUMENT
            return code, convert.refusal_message(answer["message"], answer["issues"])
        bt_id = answer["plan_id"]
        tracked = _Plan(plan.plan_id or bt_id, bt_id, convert.plan_nodes(arena), None if stream.gone else stream)
        stream.plan = tracked
        self._by_bt[bt_id] = tracked
        self._by_robonix.setdefault(tracked.robonix_id, tracked)
        if stream.gone:
            self.control.executor.release_start(bt_id)
        return tracked

    async def _call(self, inline: bool, function, name: str, args: dict) -> dict:
        """A control call for Execute: here on the loop when ``inline``, else on a worker."""
        if inline:
            return function(name, args, DOOR)
        return await asyncio.get_running_loop().run_in_executor(self._calls, function, name, args, DOOR)

    async def _write(self, stream: _Stream, context) -> None:
        """Send the stream's events as they come, until ``plan_complete`` went out or the server ended it."""
        while True:
            if stream.backlog:
                data = stream.backlog.popleft()
                self._paid(stream, len(data) + ENTRY_BYTES)
                stream.writing = True
                try:
                    await context.write(data)
                except asyncio.CancelledError:
                    if stream.ended is None:
                        raise  # the client went away
                    asyncio.current_task().uncancel()  # the write the client never took, given up by _end
                finally:
                    stream.writing = False
            elif stream.ended is not None:
                await context.abort(*stream.ended)
            elif stream.last_queued:
                return
            else:
                stream.ready.clear()
                await stream.ready.wait()

    def _paid(self, stream: _Stream, cost: int) -> None:
        stream.size -= cost
        self._backlog_total -= cost

    def _let_go(self, stream: _Stream) -> None:
        """The stream's place and backlog freed."""
        stream.gone = True
        self._streams.discard(stream)
        self._paid(stream, stream.size)
        stream.backlog.clear()

    def _end(self, stream: _Stream, code: grpc.StatusCode, message: str) -> None:
        """End ``stream`` from the server's side (its plan runs on): its backlog dropped, a write its client does
        not take given up, the status sent once the client reads."""
        plan = stream.plan
        if plan is not None and plan.stream is stream:
            plan.stream = None
        stream.ended = (code, message)
        self._let_go(stream)
        stream.ready.set()
        if stream.writing:
            stream.task.cancel()

    # --- events ----------------------------------------------------------------------------------------------

    def _wake(self) -> None:  # from the ticking thread: never blocks
        if self._drain_pending:
            return
        self._drain_pending = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except (RuntimeError, AttributeError):
            pass  # the loop is gone: the server stopped

    def _drain(self) -> None:
        self._drain_pending = False
        events = self._events
        while True:
            closed = events.closed  # read first: what was queued before the close is still handed out
            event = events.get(0)
            if event is None:
                break
            if event.get("event") == "dropped":
                self._recover(event.get("count"))
            else:
                self._route(event)
        if closed:
            for stream in list(self._streams):
                if stream.ended is None and not stream.last_queued:
                    self._end(stream, grpc.StatusCode.UNAVAILABLE,
                              "bt_exec's executor closed before the plan ended")

    def _route(self, event: dict) -> None:
        plan = self._by_bt.get(event.get("plan_id"))
        if plan is None:
            return
        if event["event"] == "plan_started":
            return  # the stream's own went out before the plan started
        if event["event"] == "node_state":
            op_id = event.get("op_id")
            if op_id in plan.reported:  # its final state went out already (read from the record after a loss)
                return
            if event.get("state") in FINAL_STATES:
                plan.reported.add(op_id)
        elif event["event"] == "plan_complete":
            if plan.lossy:
                record = self._record(plan)
                if record:
                    self._send_missed(plan, record)
            self._complete(plan, event)
            return
        self._send(plan, event)

    def _send(self, plan: _Plan, event: dict, last: bool = False) -> None:
        stream = plan.stream
        if stream is None or stream.gone:
            return
        message = convert.event_to_msg(event, plan.robonix_id, plan.nodes)
        if message is None:
            return
        data = message.SerializeToString()
        cost = len(data) + ENTRY_BYTES
        stream.backlog.append(data)
        stream.size += cost
        self._backlog_total += cost
        stream.last_queued = stream.last_queued or last
        if stream.size > stream.bound:
            self._end(stream, grpc.StatusCode.RESOURCE_EXHAUSTED, _behind(plan.robonix_id, stream.bound))
        elif self._backlog_total > self.max_total_backlog_bytes:
            furthest = max(self._streams, key=lambda each: each.size)
            self._end(furthest, grpc.StatusCode.RESOURCE_EXHAUSTED,
                      _behind(furthest.plan.robonix_id if furthest.plan else "", furthest.size)
                      + " (the Execute streams' backlogs are full)")
        stream.ready.set()

    def _complete(self, plan: _Plan, event: dict) -> None:
        """``plan_complete`` out, the last of its stream, and the plan no longer tracked."""
        self._send(plan, event, last=True)
        del self._by_bt[plan.bt_id]
        if self._by_robonix.get(plan.robonix_id) is plan:
            del self._by_robonix[plan.robonix_id]

    def _recover(self, count: object) -> None:
        """bt_exec's event stream dropped events (``count``) when it was full: every tracked plan is read again.
        A plan that ended gets its missed final states and its ``plan_complete`` from its record now; one still
        running gets them when it ends."""
        log.warning("the Robonix door's event stream lost %s event(s); the Execute streams are completed from the "
                    "plans' records", count)
        for plan in list(self._by_bt.values()):
            plan.lossy = True
            record = self._record(plan)
            if record is not None:
                self._send_missed(plan, record)
                self._complete(plan, {"event": "plan_complete", "any_failed": record.get("any_failed", True),
                                      "cancelled": record.get("cancelled", False)})

    def _record(self, plan: _Plan) -> dict | None:
        """The plan's final record; None while it runs; empty when it is no longer kept."""
        try:
            return self.control.call("get_plan_result", {"plan_id": plan.bt_id}, DOOR)
        except Conflict:
            return None
        except ControlError:
            return {}

    def _send_missed(self, plan: _Plan, record: dict) -> None:
        """The final states of ``plan``'s ops that did not go out, children before their parents."""
        for op in reversed(record.get("ops") or []):
            if op.get("state") in FINAL_STATES and op.get("op_id") not in plan.reported:
                plan.reported.add(op["op_id"])
                self._send(plan, {"event": "node_state", **op})

    # --- the other contracts ----------------------------------------------------------------------------------

    async def _control_plan(self, request, context):
        ask = convert.msg_to_control(request)
        if ask.error:
            return convert.refused_control_to_msg(ask)
        tracked = self._by_robonix.get(ask.plan_id)
        if ask.action == "stop_at" and tracked is not None and ask.op_id not in tracked.nodes:
            return convert.stop_at_to_msg(ask, None, op_missing=True)
        bt_id = tracked.bt_id if tracked is not None else ask.plan_id
        pool = self._calls if ask.action == "stop_at" else self._waits
        return await asyncio.get_running_loop().run_in_executor(pool, self._control, ask, bt_id, tracked is not None)

    def _control(self, ask: convert.ControlAsk, bt_id: str, tracked: bool):
        """ControlPlan's answer, on a worker: the control call ``ask`` stands for, on bt_exec's plan ``bt_id``."""
        name, args = convert.control_call(ask, bt_id)
        try:
            if ask.action == "cancel_all":
                return convert.cancel_all_to_msg(self.control.call(name, args, DOOR))
            in_flight = tracked or any(plan["plan_id"] == bt_id
                                       for plan in self.control.call("get_all_plans", {}, DOOR)["plans"])
            if ask.action == "cancel":
                return convert.cancel_to_msg(ask.plan_id, self.control.call(name, args, DOOR) if in_flight else None)
            if not in_flight:
                return convert.stop_at_to_msg(ask, None)
            try:
                return convert.stop_at_to_msg(ask, self.control.call(name, args, DOOR))
            except NotFound:  # the plan was in flight, so it is the op that is not found
                return convert.stop_at_to_msg(ask, None, op_missing=True)
        except BadArgument as exc:
            return convert.failed_control_to_msg(exc.message)
        except Exception as exc:  # never a dead server: the refusal or the bug's type, as every door answers it
            return convert.failed_control_to_msg(error_answer(exc, "ControlPlan")[1]["error"]["message"])

    async def _cancel_all(self, request, context):
        answer = await self._unary(context, self._waits, "cancel_all", {"wait_ms": convert.DEFAULT_WAIT_MS})
        return convert.cancel_all_plans_to_msg(answer)

    async def _list_active_plans(self, request, context):
        known = {plan.bt_id: (plan.robonix_id, plan.nodes) for plan in self._by_bt.values()}
        try:
            text = await asyncio.get_running_loop().run_in_executor(self._calls, self._active_plans, known)
        except Exception as exc:
            return convert.list_to_msg(None, error_answer(exc, "ListActivePlans")[1]["error"]["message"])
        if len(text.encode()) > MAX_ANSWER_BYTES - 1024:
            return convert.list_to_msg(None, f"the active plans' JSON is {len(text.encode())} bytes, over the "
                                             f"{MAX_ANSWER_BYTES} a Robonix client reads; ask bt_exec's "
                                             "get_plan_status with summary=true (HTTP, MCP) instead")
        return convert.list_to_msg(text)

    def _active_plans(self, known: dict) -> str:
        entries = []
        for listing in self.control.call("get_all_plans", {}, DOOR)["plans"]:
            robonix_id, nodes = known.get(listing["plan_id"], (listing["plan_id"], None))
            try:
                status = self.control.call("get_plan_status", {"plan_id": listing["plan_id"],
                                                                "with_args": nodes is None}, DOOR)
            except ControlError:
                continue  # it ended meanwhile
            if "ops" in status:
                entries.append(convert.active_plan(listing, status, robonix_id, nodes))
        return convert.plans_json(entries)

    async def _health(self, request, context):
        return convert.health_to_msg(self.executor_id)

    async def _unary(self, context, pool, name: str, args: dict) -> dict:
        """A control call on a worker; a refusal aborts the call with the status it stands for."""
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, self.control.call, name, args, DOOR)
        except Exception as exc:
            status, answer = error_answer(exc, name)
            await context.abort(_GRPC_STATUS.get(status, grpc.StatusCode.INTERNAL), answer["error"]["message"])


# The gRPC status of each status error_answer gives.
_GRPC_STATUS = {400: grpc.StatusCode.INVALID_ARGUMENT, 404: grpc.StatusCode.NOT_FOUND,
                409: grpc.StatusCode.FAILED_PRECONDITION, 413: grpc.StatusCode.INVALID_ARGUMENT,
                500: grpc.StatusCode.INTERNAL, 503: grpc.StatusCode.UNAVAILABLE,
                504: grpc.StatusCode.DEADLINE_EXCEEDED}


def auth_refusal(plan_id: str) -> str:
    """Why a Plan carrying Keystone's ``auth_session_token`` is not run."""
    return (f"plan '{plan_id}' carries an auth_session_token, and bt-exec robonix does not support Keystone identity "
            "checks: it cannot verify the token, and does not run a plan unverified that robonix-executor would "
            "verify. Send plans without a token to this executor, or run robonix-executor where Keystone is used.")


def events_allowance(plan, request_bytes: int) -> int:
    """What every event of ``plan`` weighs at most, outputs aside: a node's description, ids and call ids twice (its
    running and final states), and the plan id each event repeats. A client that reads its stream is never that
    far behind, even when a tick of a large plan hands out all its events at once."""
    return 2 * request_bytes + len(plan.nodes) * 2 * (len(plan.plan_id.encode()) + EVENT_FIELDS_BYTES)


def _behind(plan_id: str, size: int) -> str:
    return (f"the client of plan '{plan_id}' fell {size} bytes of events behind; its stream was ended, and the plan "
            "runs on (ControlPlan and ListActivePlans still reach it)")


def _serialized(message) -> bytes:
    return message.SerializeToString()


async def _parsed(message_type, data: bytes, context):
    """``data`` read as ``message_type``; a call whose request is not that protobuf is refused INVALID_ARGUMENT."""
    try:
        return message_type.FromString(data)
    except DecodeError as exc:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                            f"the request is not a {message_type.DESCRIPTOR.full_name} in protobuf's wire format: "
                            f"{exc}")
