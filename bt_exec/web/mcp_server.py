"""The MCP door: the route table's operations offered as MCP tools, over stdio or the web app's ``/mcp``.

An LLM agent gets the same operations, argument schemas and answers as the
HTTP API: each tool call is ``api.call(name, arguments)`` on a ControlApi (an
executor in this process) or an HttpApi (a running app: the ROS node's, or
``bt-exec run --web``). Refusals come back as tool errors carrying the API's
message, which says what to do next. Needs the ``mcp`` package, 1.x
(``pip install 'bt_exec[mcp]'``).

Every request gets an answer: a message that is not JSON, not JSON-RPC, or
nested deeper than ``MAX_MESSAGE_DEPTH`` is answered with a JSON-RPC error
saying so (a plan nested that deep goes as JSON text: ``graph`` takes a
string). Answers are written as ASCII JSON, and text a client sent that
cannot be encoded (lone surrogates) comes back replaced by U+FFFD, so no
answer can fail to be written.
"""
from __future__ import annotations

import io
import json
import logging
import sys
from importlib import metadata

from .api import ROUTES, ApiError

log = logging.getLogger(__name__)

INSTRUCTIONS = ("bt_exec runs behaviour-tree plans on a robot. Inspect before you act: get_all_plans, then "
                "get_plan_status for a plan's op ids and states, then stop_plan_at (on_enter / on_complete) or "
                "cancel_plan. validate_plan checks a plan without running it; submit_plan runs it. Every issue "
                "names where the plan is wrong. A plan nested deeper than MCP messages carry here (about 60 ops "
                "deep) goes as its JSON text: graph as a string.")
# The mcp library parses a message with a JSON reader that stops at 200 levels and serialises with one that stops
# at 255; a message is refused, with an answer, well before either.
MAX_MESSAGE_DEPTH = 128
MAX_LINE_CHARS = 16 * 1024 * 1024  # one stdio message, as the executor's input limit (16 MiB)
SUPPORTED_MAJOR = 1
INVALID_REQUEST = -32600
PARSE_ERROR = -32700


class McpUnavailable(ImportError):
    """The mcp package is not installed, or is a major version bt_exec does not speak."""


def tool_routes():
    return [route for route in ROUTES if route.tool]


def require_mcp() -> None:
    """McpUnavailable, with what to install, unless an mcp 1.x is importable."""
    try:
        found = metadata.version("mcp")
    except metadata.PackageNotFoundError:
        found = None
    if found is not None and not found.startswith(f"{SUPPORTED_MAJOR}."):
        raise McpUnavailable(f"bt_exec speaks the mcp {SUPPORTED_MAJOR}.x API (1.10 or later) and mcp {found} is "
                             f"installed: pip install 'mcp>=1.10,<2'")
    try:
        import mcp.types  # noqa: F401
        from mcp.server.lowlevel import Server  # noqa: F401
    except ImportError as exc:
        raise McpUnavailable(f"the MCP server needs the mcp package: pip install 'bt_exec[mcp]' ({exc})") from None


def build_server(api):
    """An ``mcp`` low-level Server whose tools call ``api.call`` (ControlApi or HttpApi)."""
    require_mcp()
    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import Server

    server = Server("bt_exec", instructions=INSTRUCTIONS)
    tools = [types.Tool(name=route.name, description=route.summary, inputSchema=route.schema)
             for route in tool_routes()]

    @server.list_tools()
    async def list_tools():
        return tools

    @server.call_tool(validate_input=False)  # the API checks arguments itself, with messages naming them
    async def call_tool(name: str, arguments: dict):
        try:
            # Executor calls block (cancel waits for teardown): keep the event loop free.
            answer = await anyio.to_thread.run_sync(api.call, name, arguments)
        except ApiError as exc:
            return types.CallToolResult(isError=True, content=[types.TextContent(
                type="text", text=encodable(f"{exc.code}: {exc.message}"))])
        return encodable(answer)

    return server


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
    """Serve MCP on standard input and output until the client closes them."""
    server = build_server(api)  # first: McpUnavailable when the mcp package is missing
    import anyio

    anyio.run(_serve_stdio, server)


async def _serve_stdio(server) -> None:
    # The mcp library's own stdio transport drops a line it cannot parse unanswered and fails on text it cannot
    # encode; this one answers every line and writes ASCII.
    import anyio
    from mcp.shared.message import SessionMessage

    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")

    async def read_line(most: int) -> str:
        return await anyio.to_thread.run_sync(stdin.readline, most)
    stdout = sys.stdout.buffer
    write_lock = anyio.Lock()
    incoming_send, incoming = anyio.create_memory_object_stream(0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream(0)

    async def write(payload) -> None:
        line = dumps_ascii(payload) + b"\n"
        async with write_lock:
            await anyio.to_thread.run_sync(_write_flush, stdout, line)

    async def read_lines() -> None:
        async with incoming_send:
            while line := await read_line(MAX_LINE_CHARS + 1):
                if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
                    while (rest := await read_line(MAX_LINE_CHARS)) and not rest.endswith("\n"):
                        pass  # the rest of the line, dropped a piece at a time
                    await write(_error(None, INVALID_REQUEST, f"the message is over {MAX_LINE_CHARS} characters"))
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
