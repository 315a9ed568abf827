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
        start_screen(self._stream)
        self._changed.set()
        self._thread.start()

    def close(self, final_record: dict) -> None:
        """Stop redrawing and draw the plan's final states from its record."""
        self._closed.set()
        self._changed.set()
        self._thread.join()
        states = op_states(final_record["ops"])
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
            states = op_states(status["ops"])
            heading = "cancelling" if status["cancelled"] else "running"
            self._draw(f"{heading} {time.monotonic() - self._started_at:.1f} s", states)
            self._closed.wait(self._period)

    def _draw(self, heading: str, states: dict[str, tuple[str, str | None]]) -> None:
        lines = [f"plan {self._plan_id}: {one_line(self._plan.description)} — {heading}"]
        draw_frame(self._stream, lines + tree_lines(self._plan, states))


def start_screen(stream: TextIO) -> None:
    """Clear the terminal once, before the first frame."""
    stream.write(_CLEAR_SCREEN)
    stream.flush()


def draw_frame(stream: TextIO, lines: list[str]) -> None:
    """Draw ``lines`` over the previous frame, cut to the terminal's size (the last line says how many are hidden)."""
    size = shutil.get_terminal_size()
    room = max(size.lines - 2, 2)
    if len(lines) > room:
        hidden = len(lines) - room + 1
        lines = lines[:room - 1] + [f"… {hidden} more ops"]
    width = max(size.columns - 1, 10)
    frame = "".join(line[:width] + _CLEAR_LINE_END + "\n" for line in lines)
    stream.write(_HOME + frame + _CLEAR_BELOW)
    stream.flush()


def op_states(ops: list[dict]) -> dict[str, tuple[str, str | None]]:
    """op id -> (state, note) from op dicts as the executor reports them (status, tree view, final record).

    The note: a finished call's error, else a failed or canceled op's detail, else an armed stop point.
    """
    states = {}
    for op in ops:
        result = op.get("result")
        if isinstance(result, dict) and result.get("error"):
            note = result["error"]
        elif op["state"] in ("failed", "canceled", "timeout") and op.get("detail"):
            note = op["detail"]
        elif op.get("stop_point"):
            note = f"stop point {op['stop_point']}"
        else:
            note = None
        states[str(op["op_id"])] = (op["state"], note)
    return states


def tree_lines(plan: Plan | dict, states: dict[str, tuple[str, str | None]] | None = None) -> list[str]:
    """One line per op, in pre-order, with box-drawing branches: ``├─ ✔ 3 do succeeded: take a snapshot``.

    ``plan``: a loaded Plan, or a tree view as ``Executor.get_plan_tree`` (``GET /api/plans/{id}/tree``)
    gives it, which may come from another process: ops it names but lacks, and repeated ops, are skipped.
    ``states`` maps op ids to (state, note), a note shown after the description in brackets; for a
    tree view it defaults to the view's own (``op_states``). Ops without a state are pending.
    """
    if isinstance(plan, Plan):
        dialect, root = plan.dialect, plan.root
        ops = {op_id: (op.kind, op.description, op.children) for op_id, op in plan.ops.items()}
    else:
        dialect, root = plan.get("dialect"), str(plan.get("root"))
        ops = {str(op["op_id"]): (op.get("kind", "?"), op.get("description", ""), op.get("children") or [])
               for op in plan["ops"]}
        if states is None:
            states = op_states(plan["ops"])
    states = states or {}

    def line(lead: str, op_id: str, kind: str | None, description: str) -> str:
        state, note = states.get(op_id, ("pending", None))
        kind_text = f" {one_line(kind)}" if kind is not None else ""
        return (f"{lead}{STATE_SYMBOLS.get(state, '?')} {one_line(op_id)}{kind_text} {one_line(state)}: "
                f"{one_line(description)}" + (f" [{one_line(note)}]" if note else ""))

    if dialect == "qwen3":  # a graph, not a tree: its steps in plan order
        return [line("", op_id, None, description) for op_id, (_kind, description, _children) in ops.items()]
    lines = []
    seen = set()
    stack = [(root, "", "")]  # (op id, this line's lead, the lead of its children's lines)
    while stack:
        op_id, lead, child_lead = stack.pop()
        if op_id not in ops or op_id in seen:
            continue
        seen.add(op_id)
        kind, description, children = ops[op_id]
        lines.append(line(lead, op_id, kind, description))
        last = len(children) - 1
        for index in range(last, -1, -1):
            is_last = index == last
            stack.append((str(children[index]), child_lead + ("└─ " if is_last else "├─ "),
                          child_lead + ("   " if is_last else "│  ")))
    return lines
