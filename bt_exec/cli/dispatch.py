"""The ``bt-exec`` command line: validate, compile and run plans; serve and drive them over ROS 2.

``main`` assembles the commands of ``plan_commands``, ``web_commands`` and
``ros_commands`` into one parser and turns whatever a command raises into an
error line and an exit code (``console``).

The ROS commands (``serve``, ``sim-robot``, ``submit``, ``plans``, ``status``,
``stop-at``, ``cancel``) import rclpy only when they run; everything from
``--ros-args`` on is handed to rclpy.
"""
from __future__ import annotations

import argparse
import os
import sys

import bt_exec

from ..errors import BtExecError, PlanError
from . import (fleet_commands, journal_commands, plan_commands, replay_commands, robonix_commands, ros_commands,
               web_commands)
from .console import (EXIT_FAILED, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, CommandError, configure_logging,
                      error, make_output_safe, print_refusal)

# Plain text for --help: the module's docstring is reStructuredText.
DESCRIPTION = "The bt-exec command line: validate, compile and run plans; serve and drive them over ROS 2."


def main(argv: list[str] | None = None) -> int:
    """Run one ``bt-exec`` command; return its exit code. Nothing it is given ends in a traceback."""
    make_output_safe()
    configure_logging()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv[:1] == ["sim-robot"]:  # its options are the sim robot's own: hand them over untouched
            return ros_commands.sim_robot_command(argv[1:])
        argv, ros_args = split_ros_args(argv)
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # argparse: usage errors (2), --help and --version (0)
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        if ros_args and not getattr(args, "takes_ros_args", False):
            raise CommandError(f"--ros-args is only for the ROS commands ({', '.join(ros_commands.ROS_COMMANDS)})")
        args.ros_args = ros_args
        return args.command(args)
    except KeyboardInterrupt:  # a run handles its own; this is Ctrl-C anywhere else
        return EXIT_INTERRUPTED
    except CommandError as exc:
        error(str(exc))
        return exc.exit_code
    except PlanError as exc:
        print_refusal(exc.issues)
        return EXIT_FAILED
    except BrokenPipeError:
        # Whoever reads our output went away (`| head`): stop quietly, and keep the
        # interpreter from complaining when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except (BtExecError, OSError) as exc:
        error(str(exc))
        return EXIT_USAGE
    except Exception as exc:
        error(f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_INTERNAL


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bt-exec", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {bt_exec.__version__}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    plan_commands.add_commands(commands)
    web_commands.add_commands(commands)
    ros_commands.add_commands(commands)
    fleet_commands.add_commands(commands)
    journal_commands.add_commands(commands)
    replay_commands.add_commands(commands)
    robonix_commands.add_commands(commands)
    return parser


def split_ros_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """(bt-exec's own arguments, everything from ``--ros-args`` on, for rclpy)."""
    if "--ros-args" in argv:
        index = argv.index("--ros-args")
        return argv[:index], argv[index:]
    return argv, []
