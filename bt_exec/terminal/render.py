"""The one renderer of a plan for terminals: a tree view as text lines, an event as one line.

Both viewers draw the same data, the tree view ``Executor.get_plan_tree`` gives
(``GET /api/plans/{id}/tree`` over HTTP): ``bt-exec run``'s live view reads it
from its own executor, ``bt-exec watch`` from a running app.
"""
from __future__ import annotations

import json
import unicodedata

STATE_SYMBOLS = {"pending": "○", "running": "▶", "paused": "‖", "succeeded": "✔", "failed": "✘",
                 "canceled": "⊘", "timeout": "⌛"}
# Unicode categories never printed as they are: controls, format characters (bidi overrides), line separators.
_CONTROL_CATEGORIES = frozenset(("Cc", "Cf", "Zl", "Zp"))
# Longest ``cap(args)`` a tree line shows after a do op's description: enough for the cap and a glimpse of its
# args, short enough that a note after it stays on the line.
CALL_CHARS = 64


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


def shortened(text: str, limit: int, ellipsis: str = "…") -> str:
    """``text`` cut to ``limit`` characters, the last being ``ellipsis`` when it was cut."""
    return text if len(text) <= limit else text[:max(limit - len(ellipsis), 0)] + ellipsis


def is_cut_args(args: object) -> bool:
    """Whether ``args`` is the marker a view sends in place of args past its size cap:
    ``{"truncated": true, "bytes": N, "preview": ...}``."""
    return (isinstance(args, dict) and args.get("truncated") is True and isinstance(args.get("bytes"), int)
            and set(args) <= {"truncated", "bytes", "preview"})


def call_text(cap: object, args: object, limit: int = CALL_CHARS) -> str:
    """A do op's call on one short line: ``audio.speak_text(text="hello", volume=3)``, cut to ``limit``
    characters; args cut by the view read ``cap(args of 5000 bytes: {"text": "aaa…)``; no args known: ``cap``."""
    if args is None:
        return shortened(one_line(cap), limit)
    if is_cut_args(args):
        preview = args.get("preview")
        peek = preview if isinstance(preview, str) else json.dumps(preview, ensure_ascii=False)
        inside = f"args of {args['bytes']} bytes: {peek}"
    elif isinstance(args, dict):
        inside = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in args.items())
    else:
        inside = json.dumps(args, ensure_ascii=False)
    head = f"{one_line(cap)}("
    return head + shortened(one_line(inside), max(limit - len(head) - 1, 1)) + ")"


def view_lines(view: dict, running_for_s: float | None = None) -> list[str]:
    """A tree view as text: the heading, a step graph's path, one line per op.

    ``running_for_s``: how long the plan has run, shown in the heading while it runs.
    """
    lines = [view_heading(view, running_for_s)]
    if view.get("path"):
        lines.append("path: " + one_line(" -> ".join(str(step) for step in view["path"])))
    return lines + tree_lines(view)


def view_heading(view: dict, running_for_s: float | None = None) -> str:
    """``plan 3: fetch the cap — running`` (paused, cancelling; or the outcome and duration once finished)."""
    if view.get("running"):
        status = "cancelling" if view.get("cancelled") else ("paused" if view.get("paused") else "running")
        if running_for_s is not None:
            status += f" {running_for_s:.1f} s"
    else:
        duration = view.get("duration_s")
        status = f"{view.get('outcome')}" + (f" after {duration:.2f} s" if isinstance(duration, (int, float)) else "")
    return f"plan {one_line(view.get('plan_id'))}: {one_line(view.get('description', ''))} — {one_line(status)}"


def op_states(ops: list[dict]) -> dict[str, tuple[str, str | None]]:
    """op id -> (state, note) from op dicts as the executor reports them (status, tree view, final record).

    The note: a finished call's error, else a failed or canceled op's detail, else ``held`` (an op held at its
    entry while the plan is paused), else an armed stop or pause point.
    """
    states = {}
    for op in ops:
        result = op.get("result")
        if isinstance(result, dict) and result.get("error"):
            note = result["error"]
        elif op["state"] in ("failed", "canceled", "timeout") and op.get("detail"):
            note = op["detail"]
        elif op.get("held"):
            note = "held"
        elif op.get("stop_point"):
            note = f"stop point {op['stop_point']}"
        elif op.get("pause_point"):
            note = f"pause point {op['pause_point']}"
        else:
            note = None
        states[str(op["op_id"])] = (op["state"], note)
    return states


def tree_lines(view: dict) -> list[str]:
    """One line per op of a tree view, in pre-order, with box-drawing branches: ``├─ ✔ 3 do succeeded: take a
    snapshot — camera.snapshot(size=2)``: a do op's call (``call_text``) after its description, then a note
    (``op_states``) in brackets.

    The view may come from another process: ops it names but lacks, and repeated ops, are skipped; ops
    without a state are pending. A step graph's steps are listed in plan order.
    """
    # a BT XML control op is shown by the BehaviorTree.CPP node it runs as (ReactiveSequence, Retry...)
    ops = {str(op["op_id"]): (op.get("node") or op.get("kind", "?"), op.get("description", ""),
                              op.get("children") or [])
           for op in view["ops"]}
    states = op_states(view["ops"])
    calls = {str(op["op_id"]): call_text(op["cap"], op.get("args"))
             for op in view["ops"] if op.get("kind") == "do" and op.get("cap") is not None}

    def line(lead: str, op_id: str, kind: str | None, description: str) -> str:
        state, note = states.get(op_id, ("pending", None))
        kind_text = f" {one_line(kind)}" if kind is not None else ""
        call = f" — {calls[op_id]}" if op_id in calls else ""
        return (f"{lead}{STATE_SYMBOLS.get(state, '?')} {one_line(op_id)}{kind_text} {one_line(state)}: "
                f"{one_line(description)}{call}" + (f" [{one_line(note)}]" if note else ""))

    if "transitions" in view:  # a step graph, not a tree: its steps in plan order
        return [line("", op_id, None, description) for op_id, (_kind, description, _children) in ops.items()]
    lines = []
    seen = set()
    stack = [(str(view.get("root")), "", "")]  # (op id, this line's lead, the lead of its children's lines)
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
    if kind == "stop_point":  # "armed (over http)", "fired (armed over http)"
        point = "pause point" if event.get("action") == "pause" else "stop point"
        where = f"{point} {event['when']} at op {one_line(str(event['op_id']))}"
        door = f"armed over {event['source']}" if event["state"] == "fired" else f"over {event['source']}"
        return f"{where} {event['state']} ({door})"
    if kind == "pause_point":
        return f"plan {event['plan_id']} reached its pause point {event['when']} at op {one_line(str(event['op_id']))}"
    if kind == "paused":
        where = f" at op {one_line(str(event['op_id']))} ({event['when']})" if event.get("op_id") is not None else ""
        return f"plan {event['plan_id']} paused{where} (over {event['source']}): no op starts until it resumes"
    if kind == "resumed":
        return f"plan {event['plan_id']} resumed (over {event['source']})"
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
