"""``fleet``: every bt_exec node on the ROS domain behind one web console and one set of MCP tools.

The robots are found through ROS (``bt_exec.ros.fleet``, imported only when the
command runs); the console and the tools are the web package's, over a
``FleetApi`` that names the robot of each operation.
"""
from __future__ import annotations

import argparse
import signal
import threading

from ..web.fleet_api import FleetApi
from .arguments import add_web, positive_seconds
from .console import EXIT_OK, CommandError
from .ros_commands import ROS_SETUP, ros_module
from .web_commands import mcp_needed, serve_mcp_stdio, start_web


def add_commands(commands) -> None:
    fleet = commands.add_parser(
        "fleet", help="serve every bt_exec node on this ROS domain as one fleet: a web console with a robot picker "
                      "(--web) and MCP tools taking a robot (--mcp)",
        description="Find every bt_exec node on this ROS domain (each robot's node, in its namespace) and serve "
                    "them together: --web PORT serves one operator console with a robot picker, its JSON API "
                    "under /api/robots/ROBOT/... and MCP at /mcp; --mcp serves the MCP tools on stdin/stdout. "
                    "Each operation goes to the robot it names, whose executor answers it. Stops on Ctrl-C.",
        epilog="ROS options go last, after --ros-args. Needs ROS 2: " + ROS_SETUP)
    add_web(fleet)
    fleet.add_argument("--mcp", action="store_true", help="serve the fleet's MCP tools on stdin/stdout")
    fleet.add_argument("--timeout", type=positive_seconds, default=10.0, metavar="S",
                       help="seconds a robot has to answer, beyond what an operation asks to wait (default: 10)")
    fleet.set_defaults(command=fleet_command, takes_ros_args=True)


def fleet_command(args: argparse.Namespace) -> int:
    if args.web is None and not args.mcp:
        raise CommandError("say what to serve: --web PORT (the console), --mcp (MCP on stdin/stdout), or both")
    if args.mcp:
        mcp_needed()
    fleet_module = ros_module("bt_exec.ros.fleet")
    try:
        api = FleetApi(fleet_module.RosFleet(args.ros_args, call_timeout_s=args.timeout))
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # bad --ros-args
        raise CommandError(f"cannot start a ROS 2 node for the fleet ({type(exc).__name__}: {exc}); "
                           "check --ros-args") from None
    web = None
    try:
        web = start_web(api, args, "fleet console")
        if args.mcp:
            serve_mcp_stdio(api, "the fleet's robots")
        else:
            _wait_for_stop()
    except KeyboardInterrupt:
        pass
    finally:
        if web is not None:
            web.close("bt-exec fleet ended")  # closes the api, and so the fleet's node
        else:
            api.close()
    return EXIT_OK


def _wait_for_stop() -> None:
    """Until SIGINT (KeyboardInterrupt) or SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
