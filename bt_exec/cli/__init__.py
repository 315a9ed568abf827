"""The ``bt-exec`` command line: validate, compile and run plans; serve and drive them over ROS 2.

``main`` (``dispatch``) parses a command line and runs one command; the
commands come in groups: ``plan_commands`` (validate, compile, run),
``web_commands`` (mcp, watch) and ``ros_commands`` (serve, sim-robot, submit,
plans, status, stop-at, cancel, and the ROS executables). ``console`` holds the
exit codes and what every command prints its errors with.
"""
from .dispatch import main

__all__ = ["main"]
