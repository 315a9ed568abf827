"""The MCP door: the route table's operations offered as MCP tools, over stdio or the web app's ``/mcp``.

An LLM agent gets the same operations, argument schemas and answers as the
HTTP API: each tool call is ``api.call(name, arguments)`` on a control surface (a
ControlApi over an executor in this process, a fleet's) or an HttpApi (a running
app: the ROS node's, or ``bt-exec run --web``). Refusals come back as tool errors
(``isError``) carrying the code and message every door gives them
(``control.error_answer``), which say what to do next. Needs the ``mcp`` package, 1.x
(``pip install 'bt_exec[mcp]'``).

A tool's answer is its compact JSON in the one text block, which every host shows the model, and, to
clients that negotiated an MCP revision that has it (2025-06-18 on), its ``structuredContent`` too. Past
``TEXT_CHARS`` (unless the call asked for a larger ``max_chars``) the text is the answer cut to fit, still
JSON, with a ``truncated`` entry that says how to ask for the rest.

Every request gets an answer, and the mcp library sees only messages it can take: a message that is not
JSON, not JSON-RPC, a batch, nested deeper than ``MAX_MESSAGE_DEPTH``, a request whose id is neither a
string nor an integer, for a method this server does not serve, or with parameters the method does not
take is answered here with the JSON-RPC error saying so (a plan nested that deep goes as JSON text:
``graph`` takes a string); a notification or a response this server has no use for is dropped, as
JSON-RPC says, without a word on stderr. Answers are written as ASCII JSON without NaN or Infinity
(``finite_json``), and text a client sent that cannot be encoded (lone surrogates) comes back replaced by
U+FFFD, so no answer can fail to be written.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import typing
from importlib import metadata

import bt_exec

from ..control import cut_to_fit, error_answer
from ..events.finite_json import dumps as finite_dumps

INSTRUCTIONS = ("bt_exec runs behaviour-tree plans on a robot. Inspect before you act: get_all_plans, then "
                "get_plan_status for a plan's op ids and states (summary=true for a large plan: counts by state, "
                "running and failed ops), then stop_plan_at (on_enter / on_complete) or cancel_plan. "
                "validate_plan checks a plan without running it; submit_plan runs it; wait_for_plan answers once "
                "it finished, instead of polling. Every issue names where the plan is wrong. A plan nested deeper "
                "than MCP messages carry here (about 60 ops deep) goes as its JSON text: graph as a string.")
STRUCTURED_SINCE = "2025-06-18"  # the first MCP revision whose tool results carry structuredContent
# The longest text block beside structuredContent, unless the call's max_chars asks for more: about the 25,000
# tokens hosts let one tool result take.
TEXT_CHARS = 100_000
GIST_CHARS = 300  # the longest text field kept in the gist of an answer over TEXT_CHARS that has no ops to cut
# The mcp library parses a message with a JSON reader that stops at 200 levels and serialises with one that stops
# at 255; a message is refused, with an answer, well before either.
MAX_MESSAGE_DEPTH = 128
MAX_LINE_BYTES = 16 * 1024 * 1024  # one stdio message, as the executor's input limit (16 MiB)
SUPPORTED_MAJOR = 1
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602


class _UnlistedToolFilter(logging.Filter):
    """Drops the mcp library's warning on a call to a tool it has not listed: the API answers that call as a tool
    error naming the known tools, so the warning says nothing new, and a client could fill the log with it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "not listed, no validation" not in str(record.msg)


_UNLISTED_TOOL_FILTER = _UnlistedToolFilter()


class McpUnavailable(ImportError):
    """The mcp package is not installed, or is a major version bt_exec does not speak."""


def tool_routes(api):
    """The routes ``api`` offers as tools (a ControlApi's, a fleet's: each with its robot argument)."""
    return [route for route in api.routes if route.tool]


def require_mcp() -> None:
    """McpUnavailable, with what to install, unless an mcp 1.x is importable.

    A Ctrl-C while the package is imported is held until the import is done (pydantic, building mcp's message
    types meanwhile, would turn the KeyboardInterrupt into a SchemaError): called before the process starts
    other threads, it then ends the command as an interrupt."""
    try:
        found = metadata.version("mcp")
    except metadata.PackageNotFoundError:
        found = None
    if found is not None and not found.startswith(f"{SUPPORTED_MAJOR}."):
        raise McpUnavailable(f"bt_exec speaks the mcp {SUPPORTED_MAJOR}.x API (1.10 or later) and mcp {found} is "
                             f"installed: pip install 'mcp>=1.10,<2'")
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        import mcp.types  # noqa: F401
        from mcp.server.lowlevel import Server  # noqa: F401
    except ImportError as exc:
        raise McpUnavailable(f"the MCP server needs the mcp package: pip install 'bt_exec[mcp]' ({exc})") from None
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def build_server(api):
    """An ``mcp`` low-level Server whose tools call ``api.call`` (ControlApi or HttpApi)."""
    require_mcp()
    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import Server

    logging.getLogger("mcp.server.lowlevel.server").addFilter(_UNLISTED_TOOL_FILTER)  # added once, however often
    server = Server("bt_exec", version=bt_exec.__version__, instructions=getattr(api, "instructions", INSTRUCTIONS))
    tools = [types.Tool(name=route.name, description=route.summary, inputSchema=route.schema)
             for route in tool_routes(api)]

    @server.list_tools()
    async def list_tools():
        return tools

    @server.call_tool(validate_input=False)  # the API checks arguments itself, with messages naming them
    async def call_tool(name: str, arguments: dict):
        try:
            # Executor calls block (cancel waits for teardown): keep the event loop free.
            answer = await anyio.to_thread.run_sync(api.call, name, arguments, "mcp")
        except Exception as exc:  # a refusal, or a bug: worded as every door words it
            error = error_answer(exc, f"mcp: {name[:80]!r}")[1]["error"]
            return types.CallToolResult(isError=True, content=[types.TextContent(
                type="text", text=encodable(f"{error['code']}: {error['message']}"))])
        answer = encodable(answer)
        text = compact_json(answer)
        if not _takes_structured(server.request_context):
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        shown = answer_text(answer, text, (arguments or {}).get("max_chars"))
        return types.CallToolResult(content=[types.TextContent(type="text", text=shown)], structuredContent=answer)

    return server


def _takes_structured(context) -> bool:
    """Whether the client negotiated an MCP revision with structured tool results: from its initialize (stdio),
    or the protocol-version header each request of the stateless HTTP transport carries."""
    params = context.session.client_params
    version = params.protocolVersion if params is not None else None
    if version is None and context.request is not None:
        version = context.request.headers.get("mcp-protocol-version")
    return version is not None and str(version) >= STRUCTURED_SINCE


def compact_json(value) -> str:
    return finite_dumps(value, ensure_ascii=False, separators=(",", ":"))


def answer_text(answer, text: str, max_chars=None) -> str:
    """The text block beside a structured ``answer`` whose compact JSON is ``text``: that JSON, or, past
    TEXT_CHARS (or the call's larger ``max_chars``), the answer cut to fit and still JSON: a status's or a
    record's first ops with its ``truncated`` entry, else the answer's short fields with one that says the whole
    answer is in structuredContent."""
    limit = max_chars if type(max_chars) is int and max_chars > TEXT_CHARS else TEXT_CHARS
    if len(text) <= limit:
        return text
    ops = answer.get("ops") if isinstance(answer, dict) else None
    if isinstance(ops, list) and all(isinstance(op, dict) and "op_id" in op for op in ops):
        cut = compact_json(cut_to_fit(answer, limit))
        if len(cut) <= limit:
            return cut
    gist = {key: value if not isinstance(value, str) or len(value) <= GIST_CHARS else value[:GIST_CHARS] + "…"
            for key, value in (answer.items() if isinstance(answer, dict) else ())
            if value is None or isinstance(value, (str, int, float, bool))}
    gist["truncated"] = {"chars": len(text), "message": f"the answer is {len(text)} characters of JSON, over the "
                                                        f"{limit} this text carries: the whole answer is in "
                                                        "structuredContent; ask for less (summary, states, op_ids, "
                                                        "max_chars) to see it here"}
    return compact_json(gist)


def encodable(value):
    """``value`` as JSON types whose every string can be written as UTF-8: values JSON lacks (a backend's odd
    result) become text, non-finite numbers their markers, lone surrogates U+FFFD."""
    text = finite_dumps(value, default=str, ensure_ascii=False)
    return json.loads(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))


def nesting_depth(value) -> int:
    """How many arrays and objects deep ``value`` nests, counted without recursion."""
    deepest = 0
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


class MessageScreen:
    """Reads each JSON-RPC message a client sends to ``server`` and says what to do with it: ``screen(text)`` is
    ``(message, None)`` for one to hand to the mcp library, ``(None, answer)`` for one answered here (a JSON-RPC
    error, or a list of them for a batch), ``(None, None)`` for one to drop (a notification or a response this
    server has no use for: JSON-RPC answers neither).

    ``stateless``: each message comes with a session of its own, initialised (HTTP); else one session takes
    them all (stdio), and requests before its ``initialize`` are answered here."""

    def __init__(self, server, stateless: bool):
        import mcp.types as types

        served = {types.InitializeRequest, *server.request_handlers}
        self._requests = {_method_of(kind): kind for kind in _kinds(types.ClientRequest) if kind in served}
        self._notifications = {_method_of(kind): kind for kind in _kinds(types.ClientNotification)}
        self._message = types.JSONRPCMessage
        self._initialized = stateless

    def screen(self, text: str | bytes):
        try:
            raw = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
        except RecursionError:
            return None, _error(None, PARSE_ERROR, _too_deep(None))
        except ValueError as exc:
            return None, _error(None, PARSE_ERROR, f"the message is not JSON: {exc}")
        depth = nesting_depth(raw)
        if depth > MAX_MESSAGE_DEPTH:
            return None, _error(_answer_id(raw), INVALID_REQUEST, _too_deep(depth))
        if isinstance(raw, list):
            return None, _batch_refusal(raw)
        if not isinstance(raw, dict):
            return None, _error(None, INVALID_REQUEST, f"a JSON-RPC message is an object, not {_json_type(raw)}")
        if "method" not in raw and ("result" in raw or "error" in raw):
            return None, None  # a response: this server asks clients nothing, and JSON-RPC answers no response
        code, message = self._fault(raw)
        if code is not None:
            return None, _error(_answer_id(raw), code, message)
        if "id" in raw:
            self._initialized = self._initialized or raw["method"] == "initialize"
            return self._message.model_validate(raw), None
        kind = self._notifications.get(raw["method"])
        if kind is None or not self._initialized:
            return None, None
        try:
            kind.model_validate(_call_of(raw))
        except ValueError:  # pydantic's ValidationError: a notification is dropped, never answered
            return None, None
        return self._message.model_validate(raw), None

    def _fault(self, raw: dict) -> tuple[int | None, str]:
        """What is wrong with a request or a notification, as a JSON-RPC error code and message; ``(None, "")``
        if nothing, or if it is a notification whose only fault is its parameters (never answered)."""
        if raw.get("jsonrpc") != "2.0":
            return INVALID_REQUEST, f'"jsonrpc" must be "2.0", got {_shown(raw.get("jsonrpc"))}'
        if "method" not in raw:
            return INVALID_REQUEST, ("a JSON-RPC message has a method (a request or a notification), or a result "
                                     "or an error (a response)")
        if "id" in raw and type(raw["id"]) not in (str, int):
            return INVALID_REQUEST, f"an MCP request's id is a string or an integer, not {_shown(raw['id'])}"
        method = raw["method"]
        if type(method) is not str:
            return INVALID_REQUEST, f'"method" is a string, not {_shown(method)}'
        params = raw.get("params")
        if params is not None and not isinstance(params, (dict, list)):
            return INVALID_REQUEST, f'"params" is an object or an array, not {_shown(params)}'
        if "id" not in raw:
            return None, ""
        if isinstance(params, list):
            return INVALID_PARAMS, f"{_cut(method)}: MCP takes its params as an object (named), not an array"
        kind = self._requests.get(method)
        if kind is None:
            return METHOD_NOT_FOUND, (f"no method {_shown(method)} here; this server answers "
                                      f"{', '.join(sorted(self._requests))}")
        if not self._initialized and method not in ("initialize", "ping"):
            return INVALID_REQUEST, f"{method} before initialize: a session starts with an initialize request"
        try:
            kind.model_validate(_call_of(raw))
        except ValueError as exc:
            return INVALID_PARAMS, f"{method}: {_first_error(exc)}"
        return None, ""


def _kinds(union) -> tuple:
    """The message models a ``ClientRequest``-like root model of the mcp package is the union of."""
    return typing.get_args(union.model_fields["root"].annotation)


def _method_of(kind) -> str:
    return typing.get_args(kind.model_fields["method"].annotation)[0]


def _call_of(raw: dict) -> dict:
    return {"method": raw["method"], **({"params": raw["params"]} if raw.get("params") is not None else {})}


def _first_error(exc) -> str:
    """Where the first of a pydantic ValidationError's faults is, and what it is."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number (JSON numbers are finite)")


def _finite_float(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise ValueError(f"the number {_cut(text)} is beyond what a 64-bit float holds")
    return number


def _answer_id(raw) -> str | int | float | None:
    """The id an error answer to ``raw`` carries: the message's own where JSON-RPC ids may be it (a string or a
    number: a client waits for the id it sent, even one MCP does not take), else null."""
    found = raw.get("id") if isinstance(raw, dict) else None
    return found if type(found) in (str, int, float) else None


def _batch_refusal(batch: list):
    """The answer to a JSON-RPC batch: one error per request in it (a batch with none: one error), since MCP
    (2025-06-18 on) takes no batches."""
    message = "a batch (a JSON array of messages) is not taken: MCP takes one message at a time, so send each alone"
    answers = [_error(_answer_id(item), INVALID_REQUEST, message) for item in batch
               if not (isinstance(item, dict) and "method" in item and "id" not in item)]
    return answers or _error(None, INVALID_REQUEST, message)


def _json_type(value) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object"}[type(value)]


def _shown(value) -> str:
    """``value`` in an error message: short JSON, or its JSON type where long."""
    text = finite_dumps(value, default=str)
    return _cut(text) if len(text) <= 80 else _json_type(value)


def _cut(text: str) -> str:
    return text if len(text) <= 80 else text[:80] + "…"


def _too_deep(depth: int | None) -> str:
    nests = f"nests {depth} levels deep" if depth else "nests too deeply to read"
    return (f"the message {nests}; MCP messages here carry at most {MAX_MESSAGE_DEPTH}: send the plan as JSON "
            "text (graph as a string)")


def _error(request_id, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": encodable(message)}}


def dumps_ascii(payload) -> bytes:
    """One JSON text in ASCII, without NaN or Infinity: lone surrogates are escaped, so it can always be
    written."""
    return finite_dumps(payload, ensure_ascii=True, default=str, separators=(",", ":")).encode("ascii")


def serve_stdio(api) -> None:
    """Serve MCP on standard input and output until the client closes them (or Ctrl-C: KeyboardInterrupt)."""
    server = build_server(api)  # first: McpUnavailable when the mcp package is missing
    import anyio

    anyio.run(_serve_stdio, server)


_TOO_LONG = object()  # what the stdin reader hands on for a line over MAX_LINE_BYTES (dropped as it is read)
_READ_BYTES = 64 * 1024


def _read_stdin(fd: int, hand_on) -> None:
    """Read lines from file descriptor ``fd`` and ``hand_on(line)`` each (text, invalid UTF-8 replaced),
    ``_TOO_LONG`` for one over MAX_LINE_BYTES, then "" at its end (or when it cannot be read); stops when
    ``hand_on`` raises RuntimeError: the event loop is gone. Plain ``os.read``: a thread blocked in it holds
    no lock the interpreter needs at exit (a buffered stdin's would)."""
    pending = bytearray()
    dropping = False  # inside a line already over the limit
    try:
        while True:
            try:
                chunk = os.read(fd, _READ_BYTES)
            except OSError:
                chunk = b""
            if not chunk:
                if dropping or pending:
                    hand_on(_TOO_LONG if dropping else pending.decode("utf-8", "replace"))
                hand_on("")
                return
            start = 0
            while (end := chunk.find(b"\n", start)) != -1:
                if dropping or len(pending) + end + 1 - start > MAX_LINE_BYTES:
                    hand_on(_TOO_LONG)
                else:
                    pending += chunk[start:end + 1]
                    hand_on(pending.decode("utf-8", "replace"))
                pending = bytearray()
                dropping = False
                start = end + 1
            if not dropping:
                pending += chunk[start:]
                if len(pending) > MAX_LINE_BYTES:
                    dropping, pending = True, bytearray()
    except RuntimeError:  # the event loop stopped (Ctrl-C, the server ended): nobody reads any more
        return


async def _serve_stdio(server) -> None:
    # The mcp library's own stdio transport drops a line it cannot parse unanswered and fails on text it cannot
    # encode; this one answers every line and writes ASCII.
    import anyio
    import anyio.from_thread
    import anyio.lowlevel
    from mcp.shared.message import SessionMessage

    # A daemon thread reads stdin: a read waiting for input holds up neither Ctrl-C nor the exit (a worker thread
    # of the event loop would). It hands on one line at a time, so memory holds at most one line.
    lines_send, lines = anyio.create_memory_object_stream(0)
    token = anyio.lowlevel.current_token()
    threading.Thread(target=_read_stdin, name="mcp-stdin", daemon=True,
                     args=(sys.stdin.fileno(), lambda line: anyio.from_thread.run(lines_send.send, line, token=token))
                     ).start()
    stdout = sys.stdout.buffer
    screen = MessageScreen(server, stateless=False)
    write_lock = anyio.Lock()
    incoming_send, incoming = anyio.create_memory_object_stream(0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream(0)

    async def write(payload) -> None:
        line = dumps_ascii(payload) + b"\n"
        async with write_lock:
            await anyio.to_thread.run_sync(_write_flush, stdout, line)

    async def read_lines() -> None:
        async with incoming_send, lines:
            while line := await lines.receive():
                if line is _TOO_LONG:
                    await write(_error(None, INVALID_REQUEST, f"the message is over {MAX_LINE_BYTES} bytes"))
                    continue
                if not line.strip():
                    continue
                message, answer = screen.screen(line)
                if message is not None:
                    await incoming_send.send(SessionMessage(message))
                elif answer is not None:
                    await write(answer)

    async def write_messages() -> None:
        async with outgoing_receive:
            async for session_message in outgoing_receive:
                await write(session_message.message.model_dump(by_alias=True, exclude_none=True, mode="json"))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_lines)
        tasks.start_soon(write_messages)
        await server.run(incoming, outgoing, server.create_initialization_options())
        tasks.cancel_scope.cancel()


def _write_flush(stream, data: bytes) -> None:
    stream.write(data)
    stream.flush()


def http_transport(api):
    """MCP over streamable HTTP for ``api``: ``(handle, lifespan, screen)``, the ASGI app for ``/mcp``, the async
    context the app must run it in, and the MessageScreen every POST's body must pass before ``handle`` sees
    it. Stateless with plain JSON answers: no session state grows with the number of clients, and no request
    holds a connection beyond its answer (the web server answers any method but POST itself)."""
    server = build_server(api)
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)
    return manager.handle_request, manager.run, MessageScreen(server, stateless=True)
