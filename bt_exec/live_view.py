"""Progress of a running plan for the command line: one plain line per event, or a live tree on a terminal."""
from __future__ import annotations

import shutil
import threading
import time
import unicodedata
from typing import TextIO

from .compilers import Plan
from .errors import ControlError

STATE_SYMBOLS = {"pending": "○", "running": "▶", "paused": "‖", "succeeded": "✔", "failed": "✘",
                 "canceled": "⊘", "timeout": "⌛"}
# Home the cursor, then redraw over the old frame: clearing first would make the tree flicker.
_HOME = "\x1b[H"
_CLEAR_SCREEN = "\x1b[2J"
_CLEAR_LINE_END = "\x1b[K"
_CLEAR_BELOW = "\x1b[J"
# Unicode categories never printed as they are: controls, format characters (bidi overrides), line separators.
_CONTROL_CATEGORIES = frozenset(("Cc", "Cf", "Zl", "Zp"))


def printable(text: object) -> str:
    """``text`` with control characters other than newlines (escapes, carriage returns) turned into spaces.

    Descriptions and errors come from the plan and the backend; printed raw they
    could send escape sequences to the user's terminal.
    """
    return "".join(char if char == "\n" or unicodedata.category(char) not in _CONTROL_CATEGORIES else " "
                   for char in str(text))


def one_line(text: object) -> str:
    """``text`` fit for a single terminal line: printable, whitespace runs (newlines too) made one space."""
    return " ".join(printable(text).split())


def event_line(event: dict) -> str | None:
    """The plain line for one executor event, or None for an event of no interest here."""
    kind = event.get("event")
    if kind == "plan_started":
        return f"plan {event['plan_id']} started: {one_line(event['description'])} ({event['op_count']} ops)"
    if kind == "node_state":
        line = f"op {event['op_id']} {event['kind']} {event['state']}: {one_line(event['description'])}"
        notes = []
        result = event.get("result")
        if isinstance(result, dict) and result.get("error"):
            notes.append(f"error: {one_line(result['error'])}")
        if event.get("detail"):
            notes.append(one_line(event["detail"]))
        return line + (f" [{'; '.join(notes)}]" if notes else "")
    if kind == "step_transition":
        return f"step {event['step']} {event['skill']} -> {event['outcome']} -> {event['next']}"
    if kind == "plan_complete":
        terminal = event.get("terminal")
        if terminal:
            reason = event.get("terminal_reason")
            return (f"plan {event['plan_id']} complete: {event['outcome']}, terminal {terminal}"
                    + (f" ({one_line(reason)})" if reason else ""))
        return f"plan {event['plan_id']} complete: {event['outcome']}"
    return None


class EventLines:
    """Subscriber printing one line per event (for logs and pipes)."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self._reader_gone = False

    def __call__(self, event: dict) -> None:
        line = event_line(event)
        if line is None or self._reader_gone:
            return
        try:
            print(line, file=self._stream, flush=True)
        except BrokenPipeError:  # the reader went away (`| head`): the run goes on, silently
            self._reader_gone = True


class LiveView:
    """Subscriber redrawing the plan as a tree of op states on a terminal, at most ``max_rate_hz`` times a second.

    Events only mark the view as changed: the executor calls subscribers in its
    ticking thread, so the drawing (which reads ``get_plan_status``) happens in a
    thread of the view's own, which also keeps the rate bounded however fast events come.
    """

    def __init__(self, executor, plan_id: str, plan: Plan, stream: TextIO, max_rate_hz: float = 10.0):
        self._executor = executor
        self._plan_id = plan_id
        self._plan = plan
        self._stream = stream
        self._period = 1.0 / max_rate_hz
        self._changed = threading.Event()
        self._closed = threading.Event()
        self._started_at = time.monotonic()
        self._thread = threading.Thread(target=self._redraw_loop, name="bt_exec-live-view", daemon=True)

    def __call__(self, event: dict) -> None:
        self._changed.set()

    def start(self) -> None:
        self._stream.write(_CLEAR_SCREEN)
        self._changed.set()
        self._thread.start()

    def close(self, final_record: dict) -> None:
        """Stop redrawing and draw the plan's final states from its record."""
        self._closed.set()
        self._changed.set()
        self._thread.join()
        states = {op["op_id"]: (op["state"], _final_note(op)) for op in final_record["ops"]}
        self._draw(f"{final_record['outcome']} after {final_record['duration_s']:.2f} s", states)

    def _redraw_loop(self) -> None:
        while True:
            self._changed.wait(1.0)  # without events, still once a second: the elapsed time moves on
            if self._closed.is_set():
                return
            self._changed.clear()
            try:
                status = self._executor.get_plan_status(self._plan_id)
            except ControlError:  # the plan just finished; close() draws its final record
                return
            states = {op["op_id"]: (op["state"], op["stop_point"] and f"stop point {op['stop_point']}")
                      for op in status["ops"]}
            heading = "cancelling" if status["cancelled"] else "running"
            self._draw(f"{heading} {time.monotonic() - self._started_at:.1f} s", states)
            self._closed.wait(self._period)

    def _draw(self, heading: str, states: dict[str, tuple[str, str | None]]) -> None:
        size = shutil.get_terminal_size()
        lines = [f"plan {self._plan_id}: {one_line(self._plan.description)} — {heading}"]
        lines += tree_lines(self._plan, states)
        room = max(size.lines - 2, 2)
        if len(lines) > room:
            hidden = len(lines) - room + 1
            lines = lines[:room - 1] + [f"… {hidden} more ops"]
        width = max(size.columns - 1, 10)
        frame = "".join(line[:width] + _CLEAR_LINE_END + "\n" for line in lines)
        self._stream.write(_HOME + frame + _CLEAR_BELOW)
        self._stream.flush()


def _final_note(op: dict) -> str | None:
    """What a finished op's line adds: its call's error, else a failed or canceled operator's detail."""
    result = op.get("result")
    if isinstance(result, dict) and result.get("error"):
        return result["error"]
    return op.get("detail") if op["state"] in ("failed", "canceled", "timeout") else None


def tree_lines(plan: Plan, states: dict[str, tuple[str, str | None]]) -> list[str]:
    """One line per op, in pre-order, with box-drawing branches: ``├─ ✔ 3 do succeeded: take a snapshot``.

    ``states`` maps op ids to (state, note); a note is shown after the description, in brackets.
    """
    lines = []
    if plan.dialect == "qwen3":  # a graph, not a tree: its steps in plan order
        for op_id, op in plan.ops.items():
            state, note = states.get(op_id, ("pending", None))
            lines.append(f"{STATE_SYMBOLS.get(state, '?')} {op_id} {state}: {one_line(op.description)}"
                         + (f" [{one_line(note)}]" if note else ""))
        return lines
    stack = [(plan.root, "", "")]  # (op id, this line's lead, the lead of its children's lines)
    while stack:
        op_id, lead, child_lead = stack.pop()
        op = plan.ops[op_id]
        state, note = states.get(op_id, ("pending", None))
        lines.append(f"{lead}{STATE_SYMBOLS.get(state, '?')} {op_id} {op.kind} {state}: "
                     f"{one_line(op.description)}" + (f" [{one_line(note)}]" if note else ""))
        last = len(op.children) - 1
        for index in range(last, -1, -1):
            is_last = index == last
            stack.append((op.children[index], child_lead + ("└─ " if is_last else "├─ "),
                          child_lead + ("   " if is_last else "│  ")))
    return lines
