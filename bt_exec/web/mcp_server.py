"""The MCP door: the route table's operations offered as MCP tools, over stdio or the web app's ``/mcp``.

An LLM agent gets the same operations, argument schemas and answers as the
HTTP API: each tool call is ``api.call(name, arguments)`` on a ControlApi (an
executor in this process) or an HttpApi (a running app: the ROS node's, or
``bt-exec run --web``). Refusals come back as tool errors carrying the API's
message, which says what to do next. Needs the ``mcp`` package, 1.x
(``pip install 'bt_exec[mcp]'``).

A tool's answer is sent once: as ``structuredContent`` (with a one-line text saying so) to clients that
negotiated an MCP revision that has it (2025-06-18 on), else as its compact JSON text.

Every request gets an answer: a message that is not JSON, not JSON-RPC, or
nested deeper than ``MAX_MESSAGE_DEPTH`` is answered with a JSON-RPC error
saying so (a plan nested that deep goes as JSON text: ``graph`` takes a
string). Answers are written as ASCII JSON, and text a client sent that
cannot be encoded (lone surrogates) comes back replaced by U+FFFD, so no
answer can fail to be written.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from importlib import metadata

import bt_exec

from .api import ROUTES, ApiError

log = logging.getLogger(__name__)

INSTRUCTIONS = ("bt_exec runs behaviour-tree plans on a robot. Inspect before you act: get_all_plans, then "
                "get_plan_status for a plan's op ids and states (summary=true for a large plan: counts by state, "
                "running and failed ops), then stop_plan_at (on_enter / on_complete) or cancel_plan. "
                "validate_plan checks a plan without running it; submit_plan runs it; wait_for_plan answers once "
                "it finished, instead of polling. Every issue names where the plan is wrong. A plan nested deeper "
                "than MCP messages carry here (about 60 ops deep) goes as its JSON text: graph as a string.")
STRUCTURED_SINCE = "2025-06-18"  # the first MCP revision whose tool results carry structuredContent
GIST_CHARS = 300
# The mcp library parses a message with a JSON reader that stops at 200 levels and serialises with one that stops
# at 255; a message is refused, with an answer, well before either.
MAX_MESSAGE_DEPTH = 128
MAX_LINE_BYTES = 16 * 1024 * 1024  # one stdio message, as the executor's input limit (16 MiB)
SUPPORTED_MAJOR = 1
INVALID_REQUEST = -32600
PARSE_ERROR = -32700


class McpUnavailable(ImportError):
    """The mcp package is not installed, or is a major version bt_exec does not speak."""


def tool_routes(api=None):
    """The routes ``api`` offers as tools (a ControlApi's, a fleet's: each with its robot argument)."""
    return [route for route in getattr(api, "routes", ROUTES) if route.tool]


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
        except ApiError as exc:
            return types.CallToolResult(isError=True, content=[types.TextContent(
                type="text", text=encodable(f"{exc.code}: {exc.message}"))])
        answer = encodable(answer)
        text = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
        if not _takes_structured(server.request_context):
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        return types.CallToolResult(content=[types.TextContent(type="text", text=_gist(name, answer, len(text)))],
                                    structuredContent=answer)

    return server


def _takes_structured(context) -> bool:
    """Whether the client negotiated an MCP revision with structured tool results: from its initialize (stdio),
    or the protocol-version header each request of the stateless HTTP transport carries."""
    params = context.session.client_params
    version = params.protocolVersion if params is not None else None
    if version is None and context.request is not None:
        version = context.request.headers.get("mcp-protocol-version")
    return version is not None and str(version) >= STRUCTURED_SINCE


def _gist(name: str, answer, size: int) -> str:
    """The one line of text beside a structured answer: where the answer is, and its message if it has one."""
    message = answer.get("message") if isinstance(answer, dict) else None
    gist = f"{name}: answered in structuredContent ({size} characters of JSON)"
    if isinstance(message, str) and message:
        gist += ": " + (message if len(message) <= GIST_CHARS else message[:GIST_CHARS] + "…")
    return gist


def encodable(value):
    """``value`` as JSON types whose every string can be written as UTF-8: values JSON lacks (a backend's odd
    result) become text, lone surrogates U+FFFD."""
    text = json.dumps(value, default=str, ensure_ascii=False)
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


def screen_message(text: str | bytes):
    """``(message, None)`` for a JSON-RPC message the mcp library can take, else ``(None, error)``: the JSON-RPC
    error answer to send instead."""
    import mcp.types as types
    from pydantic import ValidationError

    try:
        raw = json.loads(text)
    except RecursionError:
        return None, _error(None, PARSE_ERROR, _too_deep(None))
    except ValueError as exc:
        return None, _error(None, PARSE_ERROR, f"the message is not JSON: {exc}")
    request_id = raw.get("id") if isinstance(raw, dict) else None
    request_id = request_id if isinstance(request_id, (str, int)) and not isinstance(request_id, bool) else None
    depth = nesting_depth(raw)
    if depth > MAX_MESSAGE_DEPTH:
        return None, _error(request_id, INVALID_REQUEST, _too_deep(depth))
    try:
        return types.JSONRPCMessage.model_validate(raw), None
    except ValidationError as exc:
        return None, _error(request_id, INVALID_REQUEST,
                            f"not a JSON-RPC 2.0 request, notification or response: {exc.errors()[0]['msg']}")


def _too_deep(depth: int | None) -> str:
    nests = f"nests {depth} levels deep" if depth else "nests too deeply to read"
    return (f"the message {nests}; MCP messages here carry at most {MAX_MESSAGE_DEPTH}: send the plan as JSON "
            "text (graph as a string)")


def _error(request_id, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": encodable(message)}}


def dumps_ascii(payload) -> bytes:
    """One JSON text in ASCII: lone surrogates are escaped, so it can always be written."""
    return json.dumps(payload, ensure_ascii=True, default=str, separators=(",", ":")).encode("ascii")


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
                message, refusal = screen_message(line)
                if refusal is not None:
                    await write(refusal)
                else:
                    await incoming_send.send(SessionMessage(message))

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
    """MCP over streamable HTTP for ``api``: ``(handle, lifespan)``, the ASGI app for ``/mcp`` and the async
    context the app must run it in. Its requests come screened (``screen_message``) by the web server."""
    server = build_server(api)
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    # Stateless, plain JSON answers: no session state grows with the number of clients.
    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)
    return manager.handle_request, manager.run
