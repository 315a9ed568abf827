"""``bt-exec watch`` (bt_exec.terminal.watch) as a real process against a real executor's web app."""
import io
import os
import pathlib
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from rtdl_plans import do, envelope, seq
from terminal import run_on_terminal

from bt_exec.terminal.render import CALL_CHARS, call_text, event_line, tree_lines
from bt_exec.terminal import watch as watch_module
from bt_exec.terminal.watch import STREAM_SILENCE_S, EventStream, sse_events
from bt_exec.control import ControlApi
from bt_exec.web.server import WebServer
from bt_exec.web.server import KEEPALIVE_S

# The event stream's reader is a thread: an exception in it fails the test rather than warning.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")

REPO = pathlib.Path(__file__).resolve().parents[1]
TIMEOUT_S = 30
SCRIPT = {"default": {"outcome": "success", "duration_s": 0.05},
          "caps": {"sim.slow": {"outcome": "success", "duration_s": 60},
                   "sim.step": {"outcome": "success", "duration_s": 1.5},
                   "sim.fail": {"outcome": "failure", "duration_s": 0.05}}}


def snapshot_plan(second_cap="sim.act", description="snapshot + battery"):
    return envelope(seq(do("take a snapshot"), do("read the battery", cap=second_cap), do("tell the user")),
                    description=description)


@pytest.fixture
def app(make_executor):
    """(executor, server, url): an executor ticking in its thread, served on a free port."""
    executor = make_executor(SCRIPT)
    executor.start()
    server = WebServer(ControlApi(executor), port=0)
    server.start()
    yield executor, server, f"http://127.0.0.1:{server.port}/"
    server.close()


def watch(*args, timeout=TIMEOUT_S):
    return subprocess.run([sys.executable, "-m", "bt_exec.cli", "watch", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


class Watcher:
    """``bt-exec watch ARGS`` running, its output read line by line."""

    def __init__(self, *args):
        self.process = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", "watch", *args], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, cwd=REPO)
        self.lines = []
        self._queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def expect(self, text, timeout=TIMEOUT_S):
        """Read lines until one holds ``text``; that line."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                line = None
            if line is not None:
                self.lines.append(line)
                if text in line:
                    return line
                continue
            self.stop()
            raise AssertionError(f"no line with {text!r}; got:\n" + "\n".join(self.lines)
                                 + f"\nstderr: {self.process.stderr.read()}")

    def wait(self, timeout=TIMEOUT_S):
        """The exit code and stderr; the remaining stdout lines are added to ``lines``."""
        try:
            code = self.process.wait(timeout)
        finally:
            self.stop()
        while True:
            line = self._queue.get(timeout=5)
            if line is None:
                break
            self.lines.append(line)
        return code, self.process.stderr.read()

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def wait_for_state(executor, plan_id, op_id, state):
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        ops = {op["op_id"]: op["state"] for op in executor.get_plan_status(plan_id)["ops"]}
        if ops[op_id] == state:
            return
        time.sleep(0.02)
    raise AssertionError(f"op {op_id} of plan {plan_id} never {state}")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- one renderer ---------------------------------------------------------------------

def test_a_tree_view_renders_each_op_with_its_state_and_note(make_executor):
    executor = make_executor(SCRIPT)
    answer = executor.submit(snapshot_plan(second_cap="sim.fail"))
    executor.run_until_complete(answer["plan_id"], timeout=TIMEOUT_S)
    view = executor.get_plan_tree(answer["plan_id"])
    assert tree_lines(view) == ["✘ 1 sequence failed: in order [child 3 failed after 1 of 3 succeeded; 1 skipped]",
                                "├─ ✔ 2 do succeeded: take a snapshot — sim.act()",
                                "├─ ✘ 3 do failed: read the battery — sim.fail() [sim outcome failure]",
                                "└─ ○ 4 do pending: tell the user — sim.act()"]


def test_a_do_op_shows_its_call_cut_to_one_short_line_and_args_cut_by_the_view_as_their_size(make_executor):
    executor = make_executor(SCRIPT)
    speak = do("say it", cap="audio.speak_text", args={"text": "Snapshot taken and battery checked.", "volume": 3})
    huge = do("send the map", cap="map.upload", args={"cells": "#" * 5000})
    answer = executor.submit(envelope(seq(do("wave", args={"arm": "left"}), speak, huge)))
    view = executor.get_plan_tree(answer["plan_id"])
    lines = tree_lines(view)
    assert lines[1] == '├─ ○ 2 do pending: wave — sim.act(arm="left")'
    assert lines[2] == '├─ ○ 3 do pending: say it — audio.speak_text(text="Snapshot taken and battery checked.", v…)'
    assert len(lines[2].split(" — ", 1)[1]) == CALL_CHARS
    [cut] = [op["args"] for op in view["ops"] if op["op_id"] == "4"]
    assert cut["truncated"] is True  # the view's marker, shown as such, not as args named truncated and bytes
    assert lines[3].startswith(f'└─ ○ 4 do pending: send the map — map.upload(args of {cut["bytes"]} bytes: '
                               '{"cells":"####') and lines[3].endswith("#…)")
    assert call_text("sim.act", None) == "sim.act"  # an app whose views carry no args


def test_server_sent_events_are_read_as_they_come():
    stream = io.BytesIO(b"retry: 1000\n\n: keepalive\n\ndata: {\"event\": \"a\"}\r\n\r\n"
                        b"data: {\"event\":\ndata: \"b\"}\n\ndata: not json\n\ndata: [1]\n\ndata: {\"event\": \"c\"}\n")
    assert list(sse_events(stream)) == [{"event": "a"}, {"event": "b"}]  # c never ended: the stream was cut
    assert STREAM_SILENCE_S >= 2 * KEEPALIVE_S  # a quiet app is not taken for a dead one


def test_a_quiet_stream_is_followed_until_the_silence_limit_and_close_ends_its_reader(app, monkeypatch):
    executor, _server, url = app
    # Shortened so the test is quick (answers must come within 1 s, the stream may be quiet for 3 s), yet long
    # enough for a loaded machine to connect in time.
    monkeypatch.setattr(watch_module, "TIMEOUT_S", 1.0)
    monkeypatch.setattr(watch_module, "STREAM_SILENCE_S", 3.0)
    events = EventStream(url)
    try:
        time.sleep(1.5)  # quiet past the answer timeout: still followed
        assert events.get_nowait() is None
        executor.submit(snapshot_plan())
        kind, first = events.get(5)
        assert (kind, first["event"], first["plan_id"]) == ("event", "plan_started", "1")
        while (item := events.get(5)) is not None and item[0] == "event":
            continue
        assert item == ("gone", "no word from it in 3 s")
    finally:
        events.close()
    quiet = EventStream(url)
    quiet.close()
    quiet._thread.join(2)
    assert not quiet._thread.is_alive()  # close() woke the reader, which then reported nothing
    assert quiet.get_nowait() is None


# --- --once ---------------------------------------------------------------------------

def test_once_prints_the_running_plan_and_exits(app):
    executor, _server, url = app
    plan_id = executor.submit(snapshot_plan(second_cap="sim.slow"))["plan_id"]
    wait_for_state(executor, plan_id, "3", "running")
    executor.stop_plan_at(plan_id, "4", "on_enter")
    result = watch("--url", url, "--once")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["plan 1: snapshot + battery — running",
                                          "▶ 1 sequence running: in order",
                                          "├─ ✔ 2 do succeeded: take a snapshot — sim.act()",
                                          "├─ ▶ 3 do running: read the battery — sim.slow()",
                                          "└─ ○ 4 do pending: tell the user — sim.act() [stop point on_enter]"]
    assert result.stderr == ""


def test_once_shows_a_paused_plan_and_its_held_op(app):
    executor, _server, url = app
    plan_id = executor.submit(snapshot_plan(second_cap="sim.slow"))["plan_id"]
    executor.stop_plan_at(plan_id, "3", "on_enter", action="pause")
    executor.stop_plan_at(plan_id, "4", "on_complete", action="pause")
    deadline = time.monotonic() + TIMEOUT_S
    while not executor.get_plan_status(plan_id)["paused"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    result = watch("--url", url, "--once")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["plan 1: snapshot + battery — paused",
                                          "▶ 1 sequence running: in order",
                                          "├─ ✔ 2 do succeeded: take a snapshot — sim.act()",
                                          "├─ ○ 3 do pending: read the battery — sim.slow() [held]",
                                          "└─ ○ 4 do pending: tell the user — sim.act() [pause point on_complete]"]
    executor.cancel_plan(plan_id)


def test_pause_events_are_one_line_each():
    assert event_line({"event": "paused", "plan_id": "2", "source": "http", "op_id": "5", "when": "on_enter"}) == (
        "plan 2 paused at op 5 (on_enter) (over http): no op starts until it resumes")
    assert event_line({"event": "paused", "plan_id": "2", "source": "api"}) == (
        "plan 2 paused (over api): no op starts until it resumes")
    assert event_line({"event": "resumed", "plan_id": "2", "source": "mcp"}) == "plan 2 resumed (over mcp)"
    assert event_line({"event": "pause_point", "plan_id": "2", "op_id": "5", "when": "on_complete",
                       "source": "api"}) == "plan 2 reached its pause point on_complete at op 5"
    assert event_line({"event": "stop_point", "plan_id": "2", "op_id": "5", "when": "on_enter", "state": "armed",
                       "source": "http", "action": "pause"}) == "pause point on_enter at op 5 armed (over http)"


def test_once_without_plans_in_flight_shows_the_newest_finished(app):
    executor, _server, url = app
    assert watch("--url", url, "--once").stdout == f"no plans at {url}: none in flight, none finished\n"
    for description in ("first", "second"):
        executor.run_until_complete(executor.submit(snapshot_plan(description=description))["plan_id"],
                                    timeout=TIMEOUT_S)
    result = watch("--url", url, "--once")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("plan 2: second — succeeded after ")
    assert "└─ ✔ 8 do succeeded: tell the user — sim.act()" in result.stdout.splitlines()
    assert watch("--url", url, "--once", "--plan", "1").stdout.startswith("plan 1: first — succeeded")


# --- following --------------------------------------------------------------------------

def test_following_picks_each_plan_as_it_starts_until_ctrl_c(app):
    executor, _server, url = app
    watcher = Watcher("--url", url)
    watcher.expect(f"no plan in flight at {url}; waiting for one to start")
    executor.submit(snapshot_plan(second_cap="sim.step"))  # 1.5 s: time enough to be picked while it runs
    watcher.expect("plan 1: snapshot + battery — running")  # the plan as it was picked, then its events
    watcher.expect("3 do running: read the battery")  # in the tree or an event line: it may have begun first
    watcher.expect("op 3 do succeeded: read the battery")
    watcher.expect("plan 1 complete: succeeded")
    watcher.expect("waiting for the next plan to start")
    plan_id = executor.submit(snapshot_plan(second_cap="sim.slow", description="the second"))["plan_id"]
    watcher.expect("plan 2: the second — running")
    watcher.expect("7 do running: read the battery")
    executor.cancel_plan(plan_id)
    watcher.expect("op 7 do canceled: read the battery [plan cancelled while the op ran]")
    watcher.expect("plan 2 complete: cancelled")
    watcher.expect("waiting for the next plan to start")
    watcher.process.send_signal(signal.SIGINT)
    code, stderr = watcher.wait()
    assert code == 130 and stderr == ""


def test_following_one_plan_ends_with_it(app):
    executor, _server, url = app
    plan_id = executor.submit(snapshot_plan(second_cap="sim.slow"))["plan_id"]
    wait_for_state(executor, plan_id, "3", "running")
    watcher = Watcher("--url", url, "--plan", plan_id)
    watcher.expect("├─ ▶ 3 do running: read the battery")
    executor.cancel_plan(plan_id)
    watcher.expect("op 3 do canceled: read the battery")
    code, stderr = watcher.wait()
    assert code == 1 and stderr == ""  # it was cancelled
    assert watcher.lines[-1] == "plan 1 complete: cancelled"


def test_a_plan_that_succeeded_exits_0(app):
    executor, _server, url = app
    plan_id = executor.submit(snapshot_plan())["plan_id"]
    executor.run_until_complete(plan_id, timeout=TIMEOUT_S)
    result = watch("--url", url, "--plan", plan_id)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("plan 1: snapshot + battery — succeeded after ")


def test_the_app_going_away_ends_the_watch(app):
    executor, server, url = app
    executor.submit(snapshot_plan(second_cap="sim.slow"))
    watcher = Watcher("--url", url)
    watcher.expect("▶ 3 do running: read the battery")
    server.close()
    code, stderr = watcher.wait()
    assert code == 1
    assert stderr == f"bt-exec: the app at {url} went away (it closed the event stream)\n"


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_on_a_terminal_the_tree_is_redrawn(app):
    executor, _server, url = app
    plan_id = executor.submit(snapshot_plan(second_cap="sim.slow"))["plan_id"]
    wait_for_state(executor, plan_id, "3", "running")
    cancelled = []

    def cancel_once_running(screen):
        if not cancelled and "▶ 3 do running" in screen:
            executor.cancel_plan(plan_id)
            cancelled.append(True)

    proc, screen = run_on_terminal(["watch", "--url", url, "--plan", plan_id], REPO, TIMEOUT_S, cancel_once_running)
    assert proc.returncode == 1, proc.stderr.read()
    assert "\x1b[2J" in screen and "\x1b[H" in screen
    final_frame = screen.rsplit("\x1b[H", 1)[1]
    assert f"bt-exec watch {url} — Ctrl-C to quit" in final_frame
    assert "plan 1: snapshot + battery — cancelled after " in final_frame
    assert "├─ ⊘ 3 do canceled: read the battery — sim.slow() [plan cancelled while the op ran]" in final_frame
    assert "op 3 do" not in screen  # a terminal gets the tree, not event lines


# --- errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("once", [True, False])
def test_an_unreachable_app_is_one_clear_line_and_exit_2(once):
    url = f"http://127.0.0.1:{free_port()}/"
    result = watch("--url", url, *(["--once"] if once else []))
    assert result.returncode == 2
    assert result.stderr.startswith(f"bt-exec: cannot reach the app at {url}: ")
    assert "refused" in result.stderr.lower() and result.stderr.count("\n") == 1 and result.stdout == ""


@pytest.mark.parametrize("args, message", [
    (["--url", "ftp://localhost/"],
     "--url: not an http(s) URL: 'ftp://localhost/' (expected, for example, http://127.0.0.1:8080/)"),
    (["--url", "http://localhost:99999/"], "--url: bad port in 'http://localhost:99999/'"),
])
def test_bad_urls_exit_2(args, message):
    result = watch(*args)
    assert result.returncode == 2 and result.stderr == f"bt-exec: {message}\n"


def test_bad_options_exit_2():
    result = watch("--rate", "0")
    assert result.returncode == 2 and "expected a positive number" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("once", [True, False])
def test_an_unknown_plan_is_refused_with_exit_2(app, once):
    _executor, _server, url = app
    result = watch("--url", url, "--plan", "42", *(["--once"] if once else []))
    assert result.returncode == 2
    assert result.stderr.startswith(f"bt-exec: the app at {url} refused get_plan_tree: get_plan_tree: no plan '42'")
    assert "(not_found)" in result.stderr and "Traceback" not in result.stderr


def test_beyond_loopback_the_watch_sends_the_token_from_the_environment(make_executor):
    executor = make_executor(SCRIPT)
    executor.start()
    server = WebServer(ControlApi(executor), host="0.0.0.0", port=0, token="s3cret")
    server.start()
    try:
        plan_id = executor.submit(snapshot_plan())["plan_id"]
        executor.run_until_complete(plan_id, timeout=TIMEOUT_S)
        url = f"http://127.0.0.1:{server.port}/"
        refused = watch("--url", url, "--once")
        assert refused.returncode == 2 and "token" in refused.stderr, refused.stderr
        env = {**os.environ, "BT_EXEC_WEB_TOKEN": "s3cret"}
        shown = subprocess.run([sys.executable, "-m", "bt_exec.cli", "watch", "--url", url, "--once"],
                               capture_output=True, text=True, timeout=TIMEOUT_S, cwd=REPO, env=env)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.splitlines()[0].startswith("plan 1: snapshot + battery — succeeded")
    finally:
        server.close()
