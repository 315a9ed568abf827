"""The ``bt-exec`` command line: validate, compile and run plans; serve and drive them over ROS 2.

``main`` (``dispatch``) parses a command line and runs one command; the
commands come in groups: ``plan_commands`` (validate, compile, run),
``web_commands`` (mcp, watch), ``ros_commands`` (serve, sim-robot, submit,
plans, status, stop-at, cancel, and the ROS executables) and ``fleet_commands``
(fleet). ``console`` holds the exit codes and what every command prints its
errors with.
"""
EXIT_INTERRUPTED = 130  # as console's; console is not imported before main runs


def main(argv: list[str] | None = None) -> int:
    """Run one ``bt-exec`` command (``dispatch.main``); its exit code. The commands' modules are imported here,
    so a Ctrl-C while they load (the web stack takes a while) is an interrupted command, not a traceback."""
    try:
        from .dispatch import main as run_command
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return run_command(argv)


__all__ = ["main"]
