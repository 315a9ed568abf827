"""Robonix capability calls over MCP: the Backend that runs an RTDL ``do`` node on its provider.

A call names its provider (``call.provider``, the node's ``provider_id``) and its contract
(``call.cap``, the ``contract_id``), with ``call.args`` (the decoded ``args_json``). It goes as
robonix-executor sends it (``system/executor/src/dispatch/``):

1. The resolver gives the provider's MCP endpoint for the contract, and whether the contract is
   asynchronous (the provider declares both ``<id>/status`` and ``<id>/cancel``). Over Atlas that is
   Query (with a skill's activation) and ConnectCapability; the resolver is a seam of its own
   (``Resolver``), released with ``release`` once the call's MCP sessions have closed (DisconnectCapability).
2. An MCP session over streamable HTTP to the endpoint (``http://`` put before an endpoint without a
   scheme, ``/mcp`` after one whose text has no ``/mcp``), ``call_tool`` named after the contract id's
   last segment with the args. The output is the text contents joined by newlines (other contents
   are skipped, and ``detail`` says how many); ``isError`` fails the call with ``mcp tool error:
   <text>``. The call ends as soon as its reply is read; its session closes after that, and its endpoint is
   released once it closed.
3. An asynchronous capability: ``run_id`` read from the first reply's JSON (a reply without one, or
   not JSON, leaves it empty: Robonix's legacy providers, whose status and cancel then get ``{}``), then
   ``<id>/status`` (the tool ``status``) called with ``{"run_id"}`` every ``poll_period_s`` (2 s, as
   Robonix) until its ``state`` is SUCCEEDED, FAILED, CANCELED (or CANCELLED) or TIMEOUT. Success's
   output is the status reply's text; a failure's error is its ``detail``. PENDING, RUNNING and PAUSED
   are reported as they come (PAUSED with the detail). A status reply that is not a JSON object, has no
   string ``state`` or an unknown one, or answers isError fails the call, naming what was wrong.
   ``cancel`` on such a call sends ``<id>/cancel`` (the tool ``cancel``, same args) before the call ends.

Threading: one asyncio loop in one thread of the backend's own runs every call as a task; ``start``
returns a run id at once, ``status`` reads the call's state without waiting, ``cancel`` hands the
cancel to the loop: neither blocks the tick thread, and no thread is made per call. The resolver,
which may block (Atlas's gRPC round trips), runs on a small pool (``resolve_workers`` threads, also the
loop's default executor); it must bound its own time (a deadline on each RPC).

A provider that is down, refuses, or answers garbage fails that call only, with the reason. A hang
is ended by the caller's op timeout, which cancels the call: a synchronous call's session is closed
at once; an asynchronous one gets ``<id>/cancel`` first (at most ``cancel_timeout_s`` spent on it).
Memory is bounded in bytes: an HTTP reply over ``max_reply_bytes`` fails its call unread, an output or
error over ``max_output_bytes`` is cut with a marker saying so, and an ended call is forgotten once
its state was read (or ``FORGET_AFTER_S`` after it ended, at most ``keep_unread`` of them kept).

Builtins (the executor's own provider) never reach this backend: the executor routes them first.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import itertools
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Protocol

import httpx

from bt_exec.backends import CallStatus, CapabilityCall
from bt_exec.errors import BtExecError, ConfigError

log = logging.getLogger(__name__)

POLL_PERIOD_S = 2.0  # how often Robonix's executor asks an asynchronous capability's status
FORGET_AFTER_S = 60.0  # an ended call nobody read is dropped then
MAX_OUTPUT_BYTES = 1024 * 1024
MAX_REPLY_BYTES = 16 * 1024 * 1024
STATUS_SUFFIX, CANCEL_SUFFIX = "/status", "/cancel"
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELED", "TIMEOUT")
_LIVE = ("PENDING", "RUNNING", "PAUSED")
_QUOTE_CHARS = 200  # a provider's reply quoted in an error


class Endpoint(NamedTuple):
    """Where to call one contract of one provider, as the resolver found it.

    ``url``: the provider's MCP endpoint as Atlas declares it (``host:port``, ``http://host:port`` or
    a full ``.../mcp`` URL). ``asynchronous``: the provider declares both ``<contract>/status`` and
    ``<contract>/cancel``; they are called at the same endpoint (a provider serves its MCP tools at
    one). ``channel``: the resolver's own handle (an Atlas channel id), handed back to ``release``.
    """

    url: str
    asynchronous: bool = False
    channel: Any = None


class Resolver(Protocol):
    """Where the backend learns how to reach a provider (over Atlas: ``bt_exec.robonix.atlas``).

    ``resolve(provider_id, contract_id)`` answers an ``Endpoint`` or raises ``ResolveError`` saying why
    not (unknown provider, a skill that would not activate, a contract with only one of
    ``/status`` and ``/cancel``, ConnectCapability refused): that call fails with the message. It may
    block (it runs on the backend's pool, never on the tick thread) but must bound its own time.
    ``release(endpoint)`` is called once for every endpoint resolved, when its call's work is over (also
    when it was cancelled meanwhile); it must not raise for an endpoint already gone.
    """

    def resolve(self, provider_id: str, contract_id: str) -> Endpoint: ...

    def release(self, endpoint: Endpoint) -> None: ...


class ResolveError(BtExecError):
    """A resolver could not give an endpoint for a call; the message says why (the call fails with it)."""


class ReplyError(BtExecError):
    """A provider answered something the protocol does not allow; the message names what was wrong."""


class _TooLarge(BaseException):
    """An HTTP reply over ``max_reply_bytes``: its reading stops there. A BaseException: the MCP client logs an
    Exception raised while it reads a reply and then waits for that reply forever; this one ends the session."""


def mcp_url(endpoint: str) -> str:
    """The URL an MCP session opens for an endpoint as Atlas declares it (Robonix's rule: ``http://``
    before one without a scheme, ``/mcp`` after one whose text has no ``/mcp``)."""
    if endpoint.startswith("stdio://"):
        raise ReplyError(f"endpoint {endpoint!r} is an MCP server to spawn over stdio, which bt_exec does not do: "
                         "declare the provider's MCP endpoint over streamable HTTP")
    base = endpoint if endpoint.startswith("http") else f"http://{endpoint}"
    return base if "/mcp" in base else base.rstrip("/") + "/mcp"


def tool_name(contract_id: str) -> str:
    """The MCP tool of a contract: its id's last segment (``robonix/service/map/get_pose`` -> ``get_pose``)."""
    return contract_id.rsplit("/", 1)[-1]


@dataclass(eq=False, slots=True)
class _Call:
    """One call from ``start`` until its end was read (state changed on the loop, read under the lock)."""

    run_id: str
    call: CapabilityCall
    progress: CallStatus
    final: CallStatus | None = None
    ended_at: float | None = None
    task: asyncio.Task | None = None
    endpoint: Endpoint | None = None
    provider_run_id: str = ""  # an asynchronous capability's run_id, from its first reply
    start_sent: bool = False  # an asynchronous capability's run was asked for: a cancel must reach it
    cancel_requested: bool = False
    wake: asyncio.Event | None = None  # set by a cancel: the status poll's wait ends early
    news: Callable[[], None] | None = None  # what tells the runtime the call's state changed (``watch_call``)


class _Reply(NamedTuple):
    is_error: bool
    text: str
    skipped: int  # contents that were not text


class McpBackend:
    """The Backend protocol over Robonix capability providers reached by MCP; see the module's description.

    ``resolver``: a ``Resolver``. ``poll_period_s``: how often an asynchronous capability's status is
    asked. ``cancel_timeout_s``: the longest a cancel spends telling an asynchronous capability (its
    start reply still awaited, then ``<id>/cancel``). It pushes: a call watched (``watch_call``) has its
    ``news`` called from the backend's threads whenever its state changed (it ended, or its status moved),
    so the runtime asks for a call's state only then; an asynchronous capability's status is polled on the
    backend's own schedule, in its loop. ``notify``: called likewise on any call's change (it must not block).
    ``resolve_workers``: the threads the resolver's calls (and the loop's other blocking work) run on.
    """

    def __init__(self, resolver: Resolver, *, poll_period_s: float = POLL_PERIOD_S, cancel_timeout_s: float = 10.0,
                 max_output_bytes: int = MAX_OUTPUT_BYTES, max_reply_bytes: int = MAX_REPLY_BYTES,
                 resolve_workers: int = 4, keep_unread: int = 1000, notify: Callable[[], None] | None = None):
        for name, value in (("poll_period_s", poll_period_s), ("cancel_timeout_s", cancel_timeout_s)):
            if not (isinstance(value, (int, float)) and value > 0):
                raise ConfigError(f"McpBackend: {name} must be a positive number of seconds, got {value!r}")
        for name, value, least in (("max_output_bytes", max_output_bytes, 256), ("max_reply_bytes", max_reply_bytes,
                                   1024), ("resolve_workers", resolve_workers, 1), ("keep_unread", keep_unread, 1)):
            if not (isinstance(value, int) and value >= least):
                raise ConfigError(f"McpBackend: {name} must be an integer of at least {least}, got {value!r}")
        try:
            import mcp.types as mcp_types
            from mcp import ClientSession
            from mcp.client.streamable_http import streamable_http_client
        except ImportError as exc:
            raise ConfigError(f"calling Robonix capabilities over MCP needs the mcp package, 1.24 or later ({exc}): "
                              "pip install 'bt_exec[robonix]'") from None
        self._session_type, self._open_transport, self._types = ClientSession, streamable_http_client, mcp_types
        self.resolver = resolver
        self.poll_period_s = float(poll_period_s)
        self.cancel_timeout_s = float(cancel_timeout_s)
        self.max_output_bytes = max_output_bytes
        self.max_reply_bytes = max_reply_bytes
        self.keep_unread = keep_unread
        self._notify = notify
        self._resolve_workers = resolve_workers
        self._lock = threading.Lock()
        self._calls: dict[str, _Call] = {}
        self._unread: collections.OrderedDict[str, float] = collections.OrderedDict()  # ended, unread: run_id -> when
        self._run_ids = itertools.count(1)
        self._tasks: set[asyncio.Task] = set()  # on the loop only
        self._working = 0  # calls started whose work has not ended
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._http = None
        self._closed = False

    # --- life ----------------------------------------------------------------------------

    def setup(self) -> None:
        """Start the loop thread (``start`` does it on first use; again after ``close``: nothing)."""
        with self._lock:
            if self._loop is not None or self._closed:
                return
            self._pool = concurrent.futures.ThreadPoolExecutor(self._resolve_workers, thread_name_prefix="bt_exec-mcp")
            self._loop = asyncio.new_event_loop()
            self._loop.set_default_executor(self._pool)
            # No read timeout: a capability may run long; the caller's op timeout ends a hang.
            self._http = httpx.AsyncClient(transport=_CappedTransport(self.max_reply_bytes),
                                           timeout=httpx.Timeout(30.0, read=None))
            self._thread = threading.Thread(target=self._run_loop, name="bt_exec-mcp-loop", daemon=True)
            self._thread.start()

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def close(self, wait_s: float = 2.0) -> None:
        """Cancel what is in flight (asynchronous capabilities are sent their cancel), wait up to ``wait_s``
        for that, end what is left, and stop the loop thread. ``start`` answers FAILED afterwards."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            in_flight = [c.run_id for c in self._calls.values() if c.final is None]
            loop = self._loop
        for run_id in in_flight:
            self.cancel(run_id)
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._wind_down(wait_s), loop).result(wait_s + 5.0)
        except Exception as exc:  # the loop is stopped below whatever happened
            log.warning("MCP backend: winding down: %s: %s", type(exc).__name__, exc)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(5.0)
        self._pool.shutdown(wait=False)  # releases still queued run on

    async def _wind_down(self, wait_s: float) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=wait_s)
        pending = set(self._tasks)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1.0)
        await self._http.aclose()

    # --- Backend protocol ----------------------------------------------------------------

    def start(self, call: CapabilityCall) -> CallStatus | str:
        """A run id at once; the call goes on in the loop. FAILED at once for a call without a provider."""
        if not call.provider:
            return CallStatus("FAILED", error=f"{call.cap}: the call names no provider (provider_id), so no "
                                              "provider can be asked for it")
        self.setup()
        with self._lock:
            if self._closed:
                return CallStatus("FAILED", error="the MCP backend is closed")
            run = _Call(f"mcp-{next(self._run_ids)}", call, CallStatus("RUNNING"))
            self._calls[run.run_id] = run
            self._working += 1
            self._forget_stale()
            self._pool.submit(self._resolve, run)  # then on to the loop: one thread hop fewer than through it
        return run.run_id

    def status(self, run_id: str) -> CallStatus:
        """The call's state now; an ended call's final state is handed out once, then forgotten."""
        with self._lock:
            run = self._calls.get(run_id)
            if run is None:
                return CallStatus("FAILED", error=f"mcp: unknown run {run_id!r} (ended and read, or never started)")
            if run.final is None:
                return run.progress
            del self._calls[run_id]
            self._unread.pop(run_id, None)
            run.news = None  # read: the executor's run is not kept while the call's work winds down
            return run.final

    def watch_call(self, run_id: str, news: Callable[[], None]) -> None:
        """Call ``news()`` (from the backend's threads) whenever the call's state changes, until it ended."""
        with self._lock:
            run = self._calls.get(run_id)
            if run is not None:
                run.news = news

    def cancel(self, run_id: str) -> None:
        """End the call: its state is forgotten at once; an asynchronous capability is sent ``<id>/cancel``."""
        with self._lock:
            run = self._calls.pop(run_id, None)
            if run is None:
                return
            self._unread.pop(run_id, None)
            run.news = None
            if run.final is not None:
                return
            run.final = CallStatus("CANCELED", error="canceled on request")
            run.cancel_requested = True
            loop = self._loop
        loop.call_soon_threadsafe(self._cancel_on_loop, run)

    @property
    def calls_in_flight(self) -> int:
        """Calls whose work (the MCP calls, a cancel being sent) has not ended yet, cancelled ones included."""
        return self._working

    # --- on the loop ---------------------------------------------------------------------

    def _begin(self, run: _Call) -> None:
        if run.cancel_requested:  # cancelled before its MCP calls began: the endpoint goes back, nothing else
            self._close_call(run)
            return
        run.task = self._loop.create_task(self._drive(run))
        self._tasks.add(run.task)
        run.task.add_done_callback(functools.partial(self._task_done, run))

    def _task_done(self, run: _Call, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        self._close_call(run)

    def _work_ended(self) -> None:
        with self._lock:
            self._working -= 1
        self._tell()  # its work is over too (calls_in_flight counts one fewer)

    def _cancel_on_loop(self, run: _Call) -> None:
        task = run.task
        if task is None or task.done():
            return
        if run.start_sent:  # the provider holds a run: the task tells it, within the cancel timeout
            if run.wake is not None:
                run.wake.set()
            self._loop.call_later(self.cancel_timeout_s, task.cancel)
        else:
            task.cancel()

    async def _drive(self, run: _Call) -> None:
        outcome = None
        try:
            outcome = await self._call(run)
        except asyncio.CancelledError:
            pass  # cancel() set the final state; the task just ends
        except Exception as exc:
            outcome = CallStatus("FAILED", error=self._cut(describe(exc)))
        self._end(run, outcome)

    async def _call(self, run: _Call) -> CallStatus | None:
        """The call's end; None where it was told already (a synchronous call's at its reply, a cancel's)."""
        call, endpoint = run.call, run.endpoint
        url = mcp_url(endpoint.url)
        if not endpoint.asynchronous:
            # Ended once the reply is read: the session's close (its DELETE, its tasks) would otherwise hold the
            # plan back, and compete for the interpreter with the tick that takes the end.
            await self._call_tool(url, tool_name(call.cap), call.args, functools.partial(self._replied, run))
            return None
        run.start_sent = True
        reply = await self._call_tool(url, tool_name(call.cap), call.args)
        if reply.is_error:
            return CallStatus("FAILED", error=self._cut(f"mcp tool error: {reply.text}"))
        run.provider_run_id = provider_run_id(reply.text)
        run.wake = asyncio.Event()
        args = {"run_id": run.provider_run_id} if run.provider_run_id else {}
        status_contract = call.cap + STATUS_SUFFIX
        while not run.cancel_requested:
            try:
                await asyncio.wait_for(run.wake.wait(), self.poll_period_s)
            except asyncio.TimeoutError:
                pass
            if run.cancel_requested:
                break
            reply = await self._call_tool(url, tool_name(status_contract), args)
            if reply.is_error:
                return CallStatus("FAILED", error=self._cut(f"status poll failed for {call.cap}: mcp tool error: "
                                                             f"{reply.text}"))
            state, detail = read_status(reply.text, status_contract)
            if state in TERMINAL:
                if state == "SUCCEEDED":
                    return CallStatus(state, output=self._cut(reply.text), event="success")
                return CallStatus(state, error=self._cut(detail or f"{call.cap} reported {state} without a detail"))
            self._progress(run, CallStatus(state, detail=self._cut(detail)))
        await self._send_cancel(run, url, args)
        return None

    def _replied(self, run: _Call, reply: _Reply) -> None:
        """A synchronous call's end, from its reply."""
        if reply.is_error:
            self._end(run, CallStatus("FAILED", error=self._cut(f"mcp tool error: {reply.text}")))
        else:
            self._end(run, CallStatus("SUCCEEDED", output=self._cut(reply.text), detail=_skipped(reply),
                                      event="success"))

    async def _send_cancel(self, run: _Call, url: str, args: dict) -> None:
        contract = run.call.cap + CANCEL_SUFFIX
        try:
            reply = await self._call_tool(url, tool_name(contract), args)
        except Exception as exc:
            log.warning("MCP backend: %s for %s (op %s) failed: %s", contract, run.call.provider, run.call.op_id,
                        describe(exc))
            return
        if reply.is_error:
            log.warning("MCP backend: %s for %s (op %s) answered an error: %s", contract, run.call.provider,
                        run.call.op_id, reply.text[:_QUOTE_CHARS])

    async def _call_tool(self, url: str, name: str, args: dict, replied: Callable[[_Reply], None] | None = None) \
            -> _Reply:
        """One MCP session to ``url``: initialize, ``call_tool(name, args)``, close. ``replied(reply)`` is called
        as soon as the reply is read, before the session closes."""
        connected = False
        try:
            async with self._open_transport(url, http_client=self._http) as (read, write, _):
                async with self._session_type(read, write) as session:
                    await session.initialize()
                    connected = True
                    # Not session.call_tool: it lists the tools first (a round trip more) to check a tool's
                    # structured output against its schema, and fails a call on it. Robonix's executor reads
                    # the text contents alone, and so does this backend.
                    request = self._types.CallToolRequest(params=self._types.CallToolRequestParams(name=name,
                                                                                                  arguments=args))
                    result = await session.send_request(self._types.ClientRequest(request),
                                                        self._types.CallToolResult)
                    texts = [item.text for item in result.content if getattr(item, "type", None) == "text"]
                    reply = _Reply(bool(result.isError), "\n".join(texts), len(result.content) - len(texts))
                    if replied is not None:
                        replied(reply)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            leaves = list(_leaves(exc))
            if not all(isinstance(leaf, (Exception, _TooLarge)) for leaf in leaves):
                raise  # a cancel or an interrupt, not the provider's doing
            too_large = [leaf for leaf in leaves if isinstance(leaf, _TooLarge)]
            what = f"MCP call_tool {name!r} failed" if connected else f"MCP HTTP connect to {url!r} failed"
            raise ReplyError(f"{what}: {describe(too_large[0] if too_large else exc)}") from None
        return reply

    # --- on the pool -------------------------------------------------------------------

    def _resolve(self, run: _Call) -> None:
        """The call's endpoint, then its MCP calls handed to the loop; a call cancelled meanwhile goes no further."""
        if run.cancel_requested:
            self._work_ended()
            return
        try:
            endpoint = self._endpoint_of(run.call)
        except ResolveError as exc:
            self._end(run, CallStatus("FAILED", error=self._cut(str(exc))))
            self._work_ended()
            return
        with self._lock:
            run.endpoint = endpoint
        try:
            self._loop.call_soon_threadsafe(self._begin, run)
        except RuntimeError:  # the loop was closed meanwhile
            self._close_call(run)

    def _endpoint_of(self, call: CapabilityCall) -> Endpoint:
        try:
            endpoint = self.resolver.resolve(call.provider, call.cap)
        except ResolveError:
            raise
        except Exception as exc:
            raise ResolveError(f"resolving {call.cap} of provider {call.provider!r} failed: {describe(exc)}") from None
        if not isinstance(endpoint, Endpoint) or not isinstance(endpoint.url, str):
            raise ResolveError(f"the resolver answered {_quote(repr(endpoint))} for {call.cap}, not an Endpoint")
        return endpoint

    def _close_call(self, run: _Call) -> None:
        """The call's work is over: its endpoint goes back to the resolver (on the pool), then it no longer
        counts as in flight."""
        with self._lock:
            endpoint, run.endpoint = run.endpoint, None
        if endpoint is None:
            self._work_ended()
            return
        try:
            self._pool.submit(self._release_then_end, endpoint)
        except RuntimeError:  # the pool is shut down: release it here
            self._release_then_end(endpoint)

    def _release_then_end(self, endpoint: Endpoint) -> None:
        try:
            self.resolver.release(endpoint)
        except Exception as exc:
            log.warning("MCP backend: releasing %s failed: %s", endpoint.url, describe(exc))
        self._work_ended()

    def _progress(self, run: _Call, status: CallStatus) -> None:
        with self._lock:
            changed = run.final is None and run.progress.state != status.state
            run.progress = status
        if changed:
            self._tell(run)

    def _end(self, run: _Call, outcome: CallStatus | None) -> None:
        with self._lock:
            ended = run.final is None
            if ended:
                run.final = outcome or CallStatus("CANCELED", error="canceled on request")
                run.ended_at = time.monotonic()
                if run.run_id in self._calls:
                    self._unread[run.run_id] = run.ended_at
        if ended:
            self._tell(run)  # at once: the endpoint's release that follows is no reason to keep the caller waiting

    def _tell(self, run: _Call | None = None) -> None:
        for callback in (None if run is None else run.news, self._notify):
            if callback is not None:
                try:
                    callback()
                except Exception as exc:
                    log.warning("MCP backend: telling of a change raised %s: %s", type(exc).__name__, exc)

    def _forget_stale(self) -> None:
        """Under the lock: drop ended calls nobody read, past ``keep_unread`` or ``FORGET_AFTER_S``."""
        now = time.monotonic()
        while self._unread:
            run_id, ended_at = next(iter(self._unread.items()))
            if len(self._unread) <= self.keep_unread and now - ended_at < FORGET_AFTER_S:
                break
            del self._unread[run_id]
            self._calls.pop(run_id, None)

    def _cut(self, text: str) -> str:
        return cut_text(text, self.max_output_bytes)


def provider_run_id(text: str) -> str:
    """An asynchronous capability's ``run_id`` from its first reply: empty where there is none (Robonix's
    legacy providers answer without one; their status and cancel are then called with ``{}``)."""
    try:
        value = json.loads(text)
    except ValueError:
        return ""
    run_id = value.get("run_id") if isinstance(value, dict) else None
    return run_id if isinstance(run_id, str) else ""


def read_status(text: str, contract: str) -> tuple[str, str]:
    """``(state, detail)`` of a status reply, the state upper-cased (CANCELLED read as CANCELED); ReplyError
    naming what is wrong for a reply that is not a JSON object, or has no string state or an unknown one."""
    try:
        value = json.loads(text)
    except ValueError:
        raise ReplyError(f"{contract} answered text that is not JSON: {_quote(text)}") from None
    if not isinstance(value, dict):
        raise ReplyError(f"{contract} answered JSON that is not an object: {_quote(text)}")
    state = value.get("state")
    if not isinstance(state, str):
        raise ReplyError(f"{contract} answered no 'state' field (a string is required): {_quote(text)}")
    state = state.upper()
    if state == "CANCELLED":
        state = "CANCELED"
    if state not in TERMINAL and state not in _LIVE:
        raise ReplyError(f"{contract} answered the unknown state {state!r} (known: "
                         f"{', '.join(_LIVE + TERMINAL)}): {_quote(text)}")
    detail = value.get("detail")
    return state, detail if isinstance(detail, str) else ""


def cut_text(text: str, limit: int) -> str:
    """``text`` within ``limit`` UTF-8 bytes: cut where it would pass, with a marker saying how much there was."""
    if len(text) * 4 <= limit:
        return text
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    marker = f"\n[cut: the text was {len(data)} bytes, only its start is kept]"
    return data[:limit - len(marker)].decode("utf-8", "ignore") + marker


def describe(exc: BaseException) -> str:
    """An exception as one line: an exception group by its leaves, a reply the MCP client could not read
    as what it says it is, the words of an error that spans lines."""
    leaves = list(_leaves(exc))
    parts = []
    for leaf in leaves:
        text = " ".join(str(leaf).split())
        if type(leaf).__name__ == "ValidationError":  # pydantic's: the reply is not the MCP result it should be
            text = f"the reply is not a valid MCP result ({text})"
        parts.append(_quote(text) if text else type(leaf).__name__)
    return "; ".join(parts)


def _leaves(exc: BaseException):
    inner = getattr(exc, "exceptions", None)  # BaseExceptionGroup, or its backport on Python 3.10
    if isinstance(inner, (tuple, list)) and inner and all(isinstance(e, BaseException) for e in inner):
        for e in inner:
            yield from _leaves(e)
    else:
        yield exc


def _quote(text: str) -> str:
    return text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS - 3] + "..."


def _skipped(reply: _Reply) -> str:
    if not reply.skipped:
        return ""
    return f"{reply.skipped} content{'s' if reply.skipped > 1 else ''} other than text not kept in the output"


class _CappedTransport(httpx.AsyncBaseTransport):
    """An httpx transport whose replies fail once they pass ``limit`` bytes, before more is read."""

    def __init__(self, limit: int):
        # Calls in flight are bounded by the plans' ops; each holds a connection while it runs.
        self._inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=None, max_keepalive_connections=32))
        self._limit = limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        response.stream = _CappedStream(response.stream, self._limit, str(request.url))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, limit: int, url: str):
        self._inner, self._limit, self._url = inner, limit, url

    async def __aiter__(self):
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise _TooLarge(f"the reply from {self._url} passed {self._limit} bytes; it was not read further")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
