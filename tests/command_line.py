"""Running ``bt-exec`` for the tests (imported by name, as rtdl_plans is): in this interpreter through
``bt_exec.cli.main(argv)``, which is how most CLI tests run it, or as a real process for what needs one (the
entry point, signals, a terminal)."""
from __future__ import annotations

import contextlib
import io
import json
import logging
import pathlib
import subprocess
import sys

import bt_exec
from bt_exec.cli import main

REPO = pathlib.Path(__file__).resolve().parents[1]
TIMEOUT_S = 60


def bt_exec_cli(*args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """``bt-exec ARGS`` run by ``main`` in this interpreter, as a process would run it: standard streams of its
    own (stdin empty unless given, never a terminal), and the logging ``main`` sets up writing to its stderr.
    Its exit code, stdout and stderr as text."""
    argv = [str(arg) for arg in args]
    stdout, stderr = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True) for _ in range(2))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    # main's logging.basicConfig sets up the root logger only where it has no handler, as in a fresh process;
    # pytest's own handlers go back once main returned.
    root.handlers = []
    saved_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = main(argv)
            except SystemExit as exc:  # main answers with a code; this shows a command that exits instead
                code = exc.code
    finally:
        sys.stdin = saved_stdin
        root.handlers, root.level = handlers, level
    return subprocess.CompletedProcess(argv, code, *(text_of(stream) for stream in (stdout, stderr)))


def text_of(stream: io.TextIOWrapper) -> str:
    """What was written to ``stream``, decoded as a reader of the process's output would."""
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8", "replace")


def bt_exec_process(*args, stdin: bytes | None = None, timeout: float = TIMEOUT_S,
                    env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m bt_exec.cli ARGS`` run in a fresh interpreter; stdout and stderr as text."""
    proc = subprocess.run([sys.executable, "-m", "bt_exec.cli", *map(str, args)], input=stdin,
                          stdin=None if stdin is not None else subprocess.DEVNULL, capture_output=True,
                          timeout=timeout, cwd=REPO, env=env)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def read_events(path: pathlib.Path) -> list[dict]:
    """The events of one run's journal (``--events``), after its run header."""
    header, *events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert header["event"] == "journal_run" and header["bt_exec_version"] == bt_exec.__version__
    return events


def plan_complete(events: list[dict]) -> dict:
    """The one plan_complete event of a run's events."""
    [complete] = [e for e in events if e["event"] == "plan_complete"]
    return complete
