"""``mcp`` and ``watch``: the control API as MCP tools for an LLM agent, and a running app followed in the terminal.

Also the web app ``run --web`` and ``mcp --web`` serve.
"""
from __future__ import annotations

import argparse
import os
import sys

import bt_exec

from ..control import ControlApi
from ..terminal.watch import DEFAULT_URL, WatchError, watch
from ..web.client import HttpApi
from ..web.mcp_server import McpUnavailable, require_mcp, serve_stdio
from ..web_token import TOKEN_ENV
from .arguments import add_op_timeout, add_web, redraw_rate, tick_rate
from .console import EXIT_OK, CommandError, error

WATCH_DESCRIPTION = ("Follow a running executor's plan live over its web app (the ROS node's web_port, bt-exec run "
                     "--web): its tree on a terminal, one line per event elsewhere.")


def add_commands(commands) -> None:
    mcp = commands.add_parser("mcp", help="serve the control operations as MCP tools on stdin/stdout (for LLM agents)",
                              description="Serve submit_plan, validate_plan, get_all_plans, get_plan_status, "
                                          "get_plan_result, get_plan_feedback, get_plans_snapshot, stop_plan_at, "
                                          "cancel_plan, cancel_all and wait_for_plan as MCP tools "
                                          "over stdio: to a running app (--url) or to an executor of its own on the "
                                          "sim backend. The token of --url's app comes from $" + TOKEN_ENV + ". "
                                          "A running app also serves MCP itself, at its URL's /mcp.")
    mcp.add_argument("--url", metavar="URL", help="drive the app at URL (the ROS node's web_port, bt-exec run --web) "
                                                  "instead of an executor of its own")
    mcp.add_argument("--sim-script", metavar="F", help="own executor: sim backend script")
    mcp.add_argument("--catalog", metavar="PATH", help="own executor: RTDL capability catalog file")
    mcp.add_argument("--skill-catalog", metavar="NAME|PATH", default="grant",
                     help="own executor: Qwen3 skill catalog (default: grant)")
    mcp.add_argument("--scene", metavar="SCENE.json", help="own executor: the scene Qwen3 graphs run in")
    mcp.add_argument("--node-catalog", metavar="FILE.xml",
                     help="own executor: the TreeNodesModel BehaviorTree.CPP XML trees are checked against")
    mcp.add_argument("--tick-rate", metavar="HZ", type=tick_rate, default=100.0, help="ticks per second (default: 100)")
    add_op_timeout(mcp)
    add_web(mcp)
    mcp.set_defaults(command=mcp_command)

    watch_ = commands.add_parser("watch", help="follow a running app's plan live in the terminal (bt-exec run --web, "
                                               "the ROS node's web_port)", description=WATCH_DESCRIPTION)
    watch_.add_argument("--url", default=DEFAULT_URL, metavar="URL",
                        help=f"the app's address (default: {DEFAULT_URL})")
    watch_.add_argument("--plan", metavar="ID", help="the plan to watch, until it ends (default: the newest in "
                                                     "flight, then the next, until Ctrl-C)")
    watch_.add_argument("--robot", metavar="NAME", help="the app is a fleet's (bt-exec fleet --web): watch this "
                                                        "robot's plans")
    watch_.add_argument("--once", action="store_true", help="print the plan's tree as it is now and exit")
    watch_.add_argument("--rate", metavar="HZ", type=redraw_rate, default=10.0,
                        help="on a terminal: most redraws per second (default: 10)")
    watch_.set_defaults(command=watch_command)


def mcp_command(args: argparse.Namespace) -> int:
    mcp_needed()
    if args.url:
        if args.web is not None or args.sim_script or args.catalog or args.scene or args.op_timeout \
                or args.node_catalog:
            raise CommandError("--url drives a running app: --web, --sim-script, --catalog, --node-catalog, --scene "
                               "and --op-timeout are for an executor of its own")
        api = HttpApi(args.url, token=os.environ.get(TOKEN_ENV))
        executor = web = None
    else:
        skill_catalog = bt_exec.SkillCatalog.named(args.skill_catalog)
        scene = bt_exec.Scene.from_file(args.scene) if args.scene else None
        catalog = bt_exec.CapabilityCatalog.from_file(args.catalog) if args.catalog else None
        executor = bt_exec.Executor(backend=bt_exec.SimBackend.in_scene(args.sim_script, skill_catalog, scene),
                                    catalog=catalog, skill_catalog=skill_catalog, scene=scene,
                                    node_catalog=args.node_catalog, tick_rate_hz=args.tick_rate,
                                    op_timeout_s=args.op_timeout)
        api = ControlApi(executor)  # the MCP tools and, with --web, the browser share it
        web = None
    try:
        if executor is not None:
            executor.start()
            web = start_web(api, args)
        serve_mcp_stdio(api, "to " + args.url if args.url else "own executor, sim backend")
    finally:
        if web is not None:
            web.close("bt-exec mcp ended")
        if executor is not None:
            executor.close()
    return EXIT_OK


def watch_command(args: argparse.Namespace) -> int:
    """Run ``bt-exec watch``; the exit code. Ctrl-C, a closed pipe and bugs are handled as for every command,
    by ``main``."""
    try:
        return watch(args.url, plan_id=args.plan, once=args.once, rate_hz=args.rate, stream=sys.stdout,
                     robot=args.robot)
    except WatchError as exc:
        error(str(exc))
        return exc.exit_code


def mcp_needed() -> None:
    """The mcp package, imported before the command starts any thread (see require_mcp); CommandError when it
    is missing."""
    try:
        require_mcp()
    except McpUnavailable as exc:
        raise CommandError(str(exc)) from None


def serve_mcp_stdio(api, serving: str) -> None:
    """The MCP tools of ``api`` on stdin/stdout until the client leaves, or Ctrl-C. Started by hand (stdin is a
    terminal, not an MCP client), it says what it waits for; ``serving`` says what the tools drive."""
    if sys.stdin.isatty():
        print(f"bt-exec {bt_exec.__version__}: serving MCP on stdin/stdout ({serving}); an MCP client speaks "
              "JSON-RPC here. Ctrl-C stops.", file=sys.stderr, flush=True)
    try:
        serve_stdio(api)
    except KeyboardInterrupt:
        pass


def start_web(api, args: argparse.Namespace, what: str = "web console"):
    """The web app serving ``api`` when ``--web`` is given (started, ``what`` and its URL on stderr), else
    None."""
    if args.web is None:
        return None
    from ..web.server import WebServer  # only when asked for: every other command runs without the web stack

    server = WebServer(api, host=args.web_host, port=args.web, token=os.environ.get(TOKEN_ENV) or None)
    server.start()
    print(f"bt-exec: {what}: {server.url}", file=sys.stderr, flush=True)
    return server
