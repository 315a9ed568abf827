"""Stand-in Robonix capability providers: MCP servers over streamable HTTP, run as a real process.

    python tests/robonix/providers.py [--host 127.0.0.1] [--port 0]

prints ``READY <port>`` on stdout once it serves (port 0: any free port), then serves until SIGTERM or
SIGINT. Written from Robonix's facts: a provider serves its MCP tools at one endpoint, each tool named
after its contract id's last segment (robonix_api's MCP decorator registers them so, and the executor
calls them so); an asynchronous capability ``<id>`` comes with ``<id>/status`` and ``<id>/cancel``, the
tools ``status`` and ``cancel``. Three providers share the port, each at its own endpoint:

* ``/sync/mcp``, synchronous capabilities: ``echo`` (answers its ``text``), ``lines`` (``count`` text
  contents), ``fail`` (raises: the tool answers isError), ``refuse`` (answers isError with its
  ``reason``), ``hang`` (never answers), ``image`` (one image content, no text), ``big`` (``size`` bytes
  of text) and ``rendezvous`` (answers once ``count`` calls of its ``group`` are in at once).
* ``/async/mcp``, one asynchronous capability: ``run`` starts a run and answers ``{"run_id": ...}``
  (no run_id with ``with_run_id`` false: status and cancel then address the latest run, as Robonix's
  legacy providers do); ``status`` answers ``{"state", "detail"}``: ``running_state`` (RUNNING unless
  asked otherwise) for ``duration_s`` after the start, then ``outcome`` (or CANCELED once cancelled);
  ``status_reply`` makes it answer garbage instead (``not_json``, ``no_state``, ``unknown_state``,
  ``error``); ``reply_after_s`` holds the start's answer back that long after the run began; ``cancel``
  cancels the run.
* ``/garbage/mcp``: answers the MCP handshake, then every tool call with a result that is not a
  CallToolResult.

``GET /state`` answers what the providers saw, as JSON: each asynchronous run's arguments, status polls
and whether it was cancelled (and by which run id the cancel named it), and how many ``hang`` calls
hang now.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import time
import uuid

import mcp.types as types
import uvicorn
from mcp.server.fastmcp import FastMCP
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

RENDEZVOUS_WAIT_S = 30.0  # a rendezvous whose group never fills answers anyway, so no test hangs on it

sync_provider = FastMCP("standin_sync", stateless_http=True, log_level="WARNING")
async_provider = FastMCP("standin_async", stateless_http=True, log_level="WARNING")


@sync_provider.tool()
def echo(text: str = "") -> str:
    """Answers its text."""
    return text


@sync_provider.tool()
def lines(count: int = 2) -> list[types.TextContent]:
    """Answers ``count`` text contents: line 1, line 2, ..."""
    return [types.TextContent(type="text", text=f"line {i}") for i in range(1, count + 1)]


@sync_provider.tool()
def fail(reason: str = "the arm is stuck") -> str:
    """Raises: the server answers isError with the reason in its text."""
    raise RuntimeError(reason)


@sync_provider.tool()
def refuse(reason: str = "refused") -> types.CallToolResult:
    """Answers isError with exactly its reason."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=reason)], isError=True)


_hanging: list[int] = [0]


@sync_provider.tool()
async def hang() -> str:
    """Never answers (``/state`` counts the calls hanging now)."""
    _hanging[0] += 1
    try:
        await asyncio.Event().wait()
    finally:
        _hanging[0] -= 1
    return ""


@sync_provider.tool()
def image() -> types.ImageContent:
    """One image content and no text."""
    return types.ImageContent(type="image", data="iVBORw0KGgo=", mimeType="image/png")


@sync_provider.tool()
def big(size: int = 1024) -> str:
    """``size`` bytes of text."""
    return "x" * size


_groups: dict[str, int] = {}
_group_changed = asyncio.Condition()


@sync_provider.tool()
async def rendezvous(group: str = "", count: int = 1) -> str:
    """Answers once ``count`` calls of ``group`` are in at once (or after 30 s): how many were in."""
    async with _group_changed:
        _groups[group] = _groups.get(group, 0) + 1
        _group_changed.notify_all()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(_group_changed.wait_for(lambda: _groups[group] >= count), RENDEZVOUS_WAIT_S)
        return str(_groups[group])


_runs: dict[str, dict] = {}
_latest: list[str] = []


@async_provider.tool()
async def run(duration_s: float = 0.2, outcome: str = "SUCCEEDED", detail: str = "", status_reply: str = "json",
              with_run_id: bool = True, running_state: str = "RUNNING", reply_after_s: float = 0.0) -> str:
    """Starts a run that reports ``running_state`` for ``duration_s``, then ``outcome`` with ``detail``; the
    start is answered ``reply_after_s`` after the run began."""
    run_id = uuid.uuid4().hex
    _runs[run_id] = {"started": time.monotonic(), "duration_s": duration_s, "outcome": outcome, "detail": detail,
                     "status_reply": status_reply, "running_state": running_state, "polls": 0, "cancelled": False,
                     "cancelled_by": None}
    _latest[:] = [run_id]
    await asyncio.sleep(reply_after_s)
    return json.dumps({"run_id": run_id, "accepted": True} if with_run_id else {"accepted": True})


def _run_named(run_id: str) -> tuple[str, dict]:
    run_id = run_id or (_latest[0] if _latest else "")
    if run_id not in _runs:
        raise ValueError(f"unknown run_id {run_id!r}")
    return run_id, _runs[run_id]


@async_provider.tool()
def status(run_id: str = "") -> str:
    """The run's state and detail (or the garbage its start asked for)."""
    run_id, record = _run_named(run_id)
    record["polls"] += 1
    reply = record["status_reply"]
    if reply == "not_json":
        return "all is well, probably"
    if reply == "no_state":
        return json.dumps({"known": True, "progress": 0.5})
    if reply == "unknown_state":
        return json.dumps({"state": "WIGGLING"})
    if reply == "error":
        raise RuntimeError("the status board is down")
    if record["cancelled"]:
        return json.dumps({"state": "CANCELED", "detail": "cancelled on request"})
    if time.monotonic() - record["started"] < record["duration_s"]:
        return json.dumps({"state": record["running_state"], "detail": "on its way"})
    return json.dumps({"state": record["outcome"], "detail": record["detail"]})


@async_provider.tool()
def cancel(run_id: str = "") -> str:
    """Cancels the run (the latest run without a run_id)."""
    named, record = _run_named(run_id)
    record["cancelled"] = True
    record["cancelled_by"] = run_id
    return json.dumps({"accepted": True, "detail": f"run {named} cancelled"})


async def state(request: Request) -> Response:
    return JSONResponse({"runs": _runs, "latest": _latest[0] if _latest else None, "hanging": _hanging[0]})


async def garbage(request: Request) -> Response:
    """Just enough of MCP over streamable HTTP to get past the handshake, then nonsense for every call."""
    if request.method != "POST":
        return Response(status_code=405)
    message = await request.json()
    if "id" not in message:  # a notification
        return Response(status_code=202)
    if message.get("method") == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "standin_garbage", "version": "0"}}
    else:
        result = {"content": "this is not a list of contents"}
    return JSONResponse({"jsonrpc": "2.0", "id": message["id"], "result": result})


@contextlib.asynccontextmanager
async def lifespan(app):
    # Starlette runs no lifespan of a mounted app: the providers' session managers run here.
    async with sync_provider.session_manager.run(), async_provider.session_manager.run():
        yield


def make_app() -> Starlette:
    routes = [Route("/state", state), Route("/garbage/mcp", garbage, methods=["GET", "POST", "DELETE"]),
              Mount("/sync", app=sync_provider.streamable_http_app()),
              Mount("/async", app=async_provider.streamable_http_app())]
    return Starlette(routes=routes, lifespan=lifespan)


async def serve(host: str, port: int) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(1024)
    server = uvicorn.Server(uvicorn.Config(make_app(), log_level="warning", timeout_graceful_shutdown=1))
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    while not server.started and not serving.done():
        await asyncio.sleep(0.01)
    if server.started:
        print(f"READY {listener.getsockname()[1]}", flush=True)
    await serving


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (the READY line names it)")
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
