"""The MCP door: the route table's operations offered as MCP tools over stdio.

An LLM agent gets the same operations, argument schemas and answers as the
HTTP API: each tool call is ``api.call(name, arguments)`` on a ControlApi (an
executor in this process) or an HttpApi (a running app: the ROS node's, or
``bt-exec run --web``). Refusals come back as tool errors carrying the API's
message, which says what to do next. Needs the ``mcp`` package
(``pip install 'bt_exec[mcp]'``).
"""
from __future__ import annotations

import json
import logging

from .api import ROUTES, ApiError

log = logging.getLogger(__name__)

INSTRUCTIONS = ("bt_exec runs behaviour-tree plans on a robot. Inspect before you act: get_all_plans, then "
                "get_plan_status for a plan's op ids and states, then stop_plan_at (on_enter / on_complete) or "
                "cancel_plan. validate_plan checks a plan without running it; submit_plan runs it. Every issue "
                "names where the plan is wrong.")


class McpUnavailable(ImportError):
    """The mcp package is not installed."""


def tool_routes():
    return [route for route in ROUTES if route.tool]


def build_server(api):
    """An ``mcp`` low-level Server whose tools call ``api.call`` (ControlApi or HttpApi)."""
    try:
        import anyio
        import mcp.types as types
        from mcp.server.lowlevel import Server
    except ImportError as exc:
        raise McpUnavailable(f"the MCP server needs the mcp package: pip install 'bt_exec[mcp]' ({exc})") from None

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
                type="text", text=f"{exc.code}: {exc.message}")])
        # Round-trip through JSON so values JSON lacks (a backend's odd result) arrive as text, not as a failure.
        return json.loads(json.dumps(answer, default=str))

    return server


def serve_stdio(api) -> None:
    """Serve MCP on standard input and output until the client closes them."""
    server = build_server(api)  # first: McpUnavailable when the mcp package is missing
    import anyio
    from mcp.server.stdio import stdio_server

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
