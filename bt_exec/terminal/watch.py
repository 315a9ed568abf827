"""``bt-exec watch``: a running executor's plan, live, on a terminal, over its web app (for people on SSH).

It reads the app's JSON API (``GET /api/plans``, ``GET /api/plans/{id}/tree``,
``GET /api/finished``) through ``web.client.HttpApi`` and follows its event
stream (``GET /api/events``, server-sent events) with the standard library.
The app is the ROS node's (parameter ``web_port``) or ``bt-exec run --web``'s, or a fleet's
(``bt-exec fleet --web``) with ``--robot NAME``.

Which plan: ``--plan ID``, followed until it ends; else the newest in flight,
and once it ended the next one (one that started meanwhile, else the next to
start), until Ctrl-C. On a terminal the plan's tree is redrawn on each change,
at most ``--rate`` times a second, with ``render``'s lines; elsewhere
(pipes, logs) each event of the plan is one line (``render.event_line``),
after the plan's tree as it was when picked. ``--once`` prints the tree of the
plan (without ``--plan``: the newest in flight, else the newest finished) and exits.

Exit codes: 0 done (``--once``; ``--plan``'s plan succeeded); 1 ``--plan``'s plan
failed or was cancelled, or the app went away while watched; 2 usage errors, the
app cannot be reached or refused a request (an unknown plan too); 3 an internal
error; 130 Ctrl-C.
An app bound beyond loopback wants its token on reads too: it is taken from
``$BT_EXEC_WEB_TOKEN`` when set.
"""
from __future__ import annotations

import http.client
import json
import math
import os
import queue
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import TextIO

from ..errors import Unreachable
from ..errors import ControlError
from ..web.client import HttpApi, robot_path
from ..web_token import TOKEN_ENV
from .render import event_line, one_line, view_lines
from .screen import draw_frame, start_screen

DEFAULT_URL = "http://127.0.0.1:8080/"
EVENTS_PATH = "/api/events"
TIMEOUT_S = 10.0                      # to connect, and for each JSON answer
STREAM_SILENCE_S = 45.0               # 3 keepalives (web.server.KEEPALIVE_S) missed: a dead link
MAX_EVENT_BYTES = 64 * 1024 * 1024    # an event line longer than this is skipped, not kept in memory
REDRAW_IDLE_S = 1.0                   # a terminal frame is redrawn this often anyway (the terminal may have resized)
POLL_S = 0.1                          # how long Ctrl-C may wait to be noticed

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class WatchError(Exception):
    """Watching cannot go on: ``bt-exec: <message>`` on stderr, exit ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code


class _Gone(WatchError):
    def __init__(self, url: str, why: str):
        super().__init__(f"the app at {url} went away ({why})", EXIT_FAILED)


def watch(url: str, plan_id: str | None = None, once: bool = False, rate_hz: float = 10.0,
          stream: TextIO | None = None, terminal: bool | None = None, robot: str | None = None) -> int:
    """Watch the app at ``url`` (see the module's docstring); the exit code.

    ``terminal``: draw frames (default: whether ``stream`` is a terminal); ``robot``: the app is a fleet's,
    and the plans watched are that robot's.
    """
    stream = sys.stdout if stream is None else stream
    _check_url(url)
    token = os.environ.get(TOKEN_ENV) or None
    api = HttpApi(url, token=token, timeout_s=TIMEOUT_S, robot=robot)
    if once:
        return _print_once(api, url, plan_id, stream)
    events = EventStream(url, token, robot)  # listening first: no event is missed between the first read and the stream
    try:
        terminal = stream.isatty() if terminal is None else terminal
        follower = _Follower(api, url, stream, terminal, plan_id, rate_hz)
        return follower.run(events)
    finally:
        events.close()


# --- reading the app ----------------------------------------------------------------

def _check_url(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WatchError(f"--url: not an http(s) URL: {url!r} (expected, for example, {DEFAULT_URL})")
    try:
        _port = parts.port  # checks it
    except ValueError:
        raise WatchError(f"--url: bad port in {url!r}") from None


def _call(api, url: str, name: str, args: dict | None = None, following: bool = False) -> dict:
    """``api.call``; WatchError (exit 2) if it fails, or, while ``following``, _Gone (exit 1) if no answer came."""
    try:
        answer = api.call(name, args)
    except Unreachable as exc:
        why = exc.message.removeprefix(f"no answer from {api.base}: ")
        if following:
            raise _Gone(url, why) from None
        raise WatchError(f"cannot reach the app at {url}: {why}") from None
    except ControlError as exc:
        raise WatchError(f"the app at {url} refused {name}: {exc.message} ({exc.code})") from None
    if not isinstance(answer, dict):
        raise WatchError(f"the app at {url} answered {name} with {type(answer).__name__}, not an object")
    return answer


def _newest_in_flight(api, url: str, following: bool = False) -> str | None:
    plans = _call(api, url, "get_all_plans", following=following).get("plans") or []
    return str(plans[-1]["plan_id"]) if plans else None  # the executor lists them in submission order


def _print_once(api, url: str, plan_id: str | None, stream: TextIO) -> int:
    if plan_id is None:
        plan_id = _newest_in_flight(api, url)
    if plan_id is None:
        finished = _call(api, url, "get_finished_plans", {"limit": 1}).get("plans") or []
        if not finished:
            print(f"no plans at {url}: none in flight, none finished", file=stream, flush=True)
            return EXIT_OK
        plan_id = str(finished[0]["plan_id"])
    view = _call(api, url, "get_plan_tree", {"plan_id": plan_id})
    print("\n".join(view_lines(view)), file=stream, flush=True)
    return EXIT_OK


class EventStream:
    """The app's event stream (``GET /api/events``), read in a thread of its own into a queue.

    ``get(timeout)`` returns ("event", dict), ("gone", why) once the stream
    ended, or None. Opening it raises WatchError when the app cannot be reached
    or refuses.
    """

    def __init__(self, url: str, token: str | None = None, robot: str | None = None):
        self.url = url
        self._path = EVENTS_PATH if robot is None else robot_path(robot, EVENTS_PATH)
        parts = urllib.parse.urlsplit(url)
        connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._connection = connection_class(parts.hostname, parts.port, timeout=TIMEOUT_S)
        self._queue: queue.Queue = queue.Queue()
        self._closed = False
        try:
            self._connection.connect()
            # Kept here: the connection lets go of its socket when the stream ends with the connection
            # (no length, not chunked), and the socket's timeout must still change to the stream's.
            self._sock = self._connection.sock
            headers = {"Accept": "text/event-stream"}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            self._connection.request("GET", self._path, headers=headers)
            response = self._connection.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            self._connection.close()
            raise WatchError(f"cannot reach the app at {url}: {_reason(exc)}") from None
        if response.status != 200:
            message = _error_message(response)
            self._connection.close()
            response.close()
            raise WatchError(f"the app at {url} refused its event stream: {message} (HTTP {response.status})")
        self._sock.settimeout(STREAM_SILENCE_S)
        self._response = response
        self._thread = threading.Thread(target=self._read, name="bt_exec-watch-events", daemon=True)
        self._thread.start()

    def get(self, timeout: float):
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def get_nowait(self):
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

    def close(self) -> None:
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the reading thread, which closes the rest
        except OSError:
            pass

    def _read(self) -> None:
        try:
            for event in sse_events(self._response):
                self._queue.put(("event", event))
            why = "it closed the event stream"
        except TimeoutError:
            why = f"no word from it in {STREAM_SILENCE_S:.0f} s"
        except (OSError, ValueError, http.client.HTTPException) as exc:
            why = _reason(exc)
        finally:
            # Here, not in close(): closing the response (the connection closes it too) while this
            # thread reads from it breaks http.client.
            self._response.close()
            self._connection.close()
        if not self._closed:
            self._queue.put(("gone", why))


def sse_events(response) -> Iterator[dict]:
    """The JSON objects of a server-sent event stream's ``data:`` fields, as they come (comments skipped)."""
    data: list[str] = []
    size = 0
    skipping = False  # inside an event over MAX_EVENT_BYTES, or a line that is not JSON
    while True:
        raw = response.readline(MAX_EVENT_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_EVENT_BYTES and not raw.endswith(b"\n"):
            skipping = True
            data, size = [], 0
            continue
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:  # the end of an event
            if data and not skipping:
                try:
                    event = json.loads("\n".join(data))
                except ValueError:
                    event = None
                if isinstance(event, dict):
                    yield event
            data, size, skipping = [], 0, False
            continue
        if skipping or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            size += len(raw)
            if size > MAX_EVENT_BYTES:
                skipping = True
                continue
            data.append(value.removeprefix(" "))


def _error_message(response: http.client.HTTPResponse) -> str:
    try:
        return str(json.loads(response.read(65536))["error"]["message"])
    except (ValueError, KeyError, TypeError, OSError, http.client.HTTPException):
        return response.reason or "refused"


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


# --- following ------------------------------------------------------------------------

class _Follower:
    """Which plan is shown and how: picks plans, turns events into lines or redraws."""

    def __init__(self, api, url: str, stream: TextIO, terminal: bool, pinned: str | None, rate_hz: float):
        self.api = api
        self.url = url
        self.out = stream
        self.terminal = terminal
        self.pinned = pinned
        self.period = 1.0 / rate_hz
        self.started = False    # past the first reads: a read that gets no answer now means the app went away
        self.plan_id: str | None = None
        self.view: dict | None = None
        self.finished = True    # no plan, or the followed one ended: the next to start is picked
        self.stale = False      # terminal: the view must be read again before the next frame
        self.drawn_at = -math.inf

    def run(self, events: EventStream) -> int:
        if self.terminal:
            start_screen(self.out)
        if self.pinned:
            code = self._pick(self.pinned)
        else:
            code = self._pick_next(first=True)
        if code is not None:
            return code
        self.started = True
        while True:
            item = events.get(POLL_S)
            while item is not None:  # everything that came, then one frame
                kind, payload = item
                if kind == "gone":
                    raise _Gone(self.url, payload)
                code = self._on_event(payload)
                if code is not None:
                    return code
                item = events.get_nowait()
            if self.terminal:
                self._maybe_draw()

    # --- plans ---

    def _call(self, name: str, args: dict | None = None) -> dict:
        return _call(self.api, self.url, name, args, following=self.started)

    def _pick_next(self, first: bool = False) -> int | None:
        """Follow the newest plan in flight; with none, wait for the next to start."""
        plan_id = _newest_in_flight(self.api, self.url, following=self.started)
        if plan_id is not None:
            return self._pick(plan_id)
        if self.terminal:
            self._draw_now()
        elif first:
            self._print(f"no plan in flight at {self.url}; waiting for one to start")
        else:
            self._print("waiting for the next plan to start")
        return None

    def _pick(self, plan_id: str) -> int | None:
        self.plan_id = plan_id
        self.view = None
        return self._refresh()

    def _refresh(self) -> int | None:
        """Read the followed plan again and show it; the exit code if it has ended."""
        self.view = self._read_view()
        self.finished = self.view is None or not self.view.get("running")
        if self.terminal:
            self._draw_now()
        elif self.view is not None:
            self._print(*view_lines(self.view))
        return self._ended() if self.finished else None

    def _read_view(self) -> dict | None:
        """The followed plan's tree view; None when the app no longer keeps it (WatchError for an unknown --plan)."""
        try:
            return self._call("get_plan_tree", {"plan_id": self.plan_id})
        except _Gone:
            raise
        except WatchError:
            if self.pinned and not self.started:
                raise
            return None

    def _ended(self) -> int | None:
        """The followed plan ended: with ``--plan``, the exit code; else follow the next plan."""
        if self.pinned:
            outcome = self.view.get("outcome") if self.view else None
            return EXIT_OK if outcome == "succeeded" else EXIT_FAILED
        return self._pick_next()

    # --- events ---

    def _on_event(self, event: dict) -> int | None:
        kind = event.get("event")
        if kind == "dropped":
            if not self.terminal:
                self._print(f"({event.get('count')} events lost: reading the plan again)")
            return self._resync()
        plan_id = event.get("plan_id")
        if plan_id is None:
            return None
        plan_id = str(plan_id)
        if plan_id != self.plan_id:
            if kind == "plan_started" and self.finished and not self.pinned:
                return self._pick(plan_id)
            return None
        if self.finished:
            return None
        if self.terminal:
            self.stale = True
        else:
            line = event_line(event)
            if line is not None:
                self._print(line)
        if kind != "plan_complete":
            return None
        self.finished = True
        self.view = self._read_view() or self.view
        if self.view is not None and self.view.get("running"):  # not yet in the record: take the event's word
            self.view = {**self.view, "running": False, "outcome": event.get("outcome")}
        if self.terminal:
            self._draw_now()
        return self._ended()

    def _resync(self) -> int | None:
        """After lost events: read the followed plan again, which may have ended meanwhile."""
        if self.finished:
            return None if self.pinned else self._pick_next()
        return self._refresh()

    # --- output ---

    def _print(self, *lines: str) -> None:
        print("\n".join(lines), file=self.out, flush=True)

    def _maybe_draw(self) -> None:
        now = time.monotonic()
        if self.stale and now - self.drawn_at >= self.period:
            self.stale = False
            self.view = self._read_view() or self.view
            self._draw_now()
        elif now - self.drawn_at >= REDRAW_IDLE_S:
            self._draw_now()

    def _draw_now(self) -> None:
        if not self.terminal:
            return
        lines = [f"bt-exec watch {self.url} — Ctrl-C to quit"]
        if self.plan_id is None:
            lines.append("no plan in flight; waiting for one to start")
        elif self.view is None:
            lines.append(f"plan {one_line(self.plan_id)}: no longer kept by the app")
        else:
            lines += view_lines(self.view)
        if self.finished and not self.pinned and self.plan_id is not None:
            lines.append("waiting for the next plan to start")
        draw_frame(self.out, lines)
        self.drawn_at = time.monotonic()

