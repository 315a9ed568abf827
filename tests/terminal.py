"""Running a command on a pseudo-terminal, for the tests of live views (imported by name, as rtdl_plans is)."""
import os
import subprocess
import sys


def run_on_terminal(args, cwd, timeout_s, on_output=None):
    """Run ``python -m bt_exec.cli ARGS`` with stdout on a 160x40 pseudo-terminal until it exits.

    ``on_output(screen_so_far)`` is called after each read. Returns (process, screen text).
    """
    primary, secondary = os.openpty()
    terminal_size = {**os.environ, "COLUMNS": "160", "LINES": "40"}  # a fresh pseudo-terminal has no size
    proc = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", *args], stdout=secondary, stderr=subprocess.PIPE,
                            cwd=cwd, env=terminal_size)
    os.close(secondary)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the process closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
            if on_output is not None:
                on_output(b"".join(chunks).decode("utf-8", "replace"))
        proc.wait(timeout=timeout_s)
    finally:
        os.close(primary)
        if proc.poll() is None:
            proc.kill()
    return proc, b"".join(chunks).decode("utf-8")
