"""Narrower views of a plan's status or record, for callers that pay for every character (an LLM agent).

A view keeps a status's or record's own fields and chooses its ``ops``: those in some states, those
with some ids, or (``summary``) the counts of ops by state and the running and failed ops only. A
``max_chars`` cap cuts the ops list so the answer's compact JSON fits, and says what was left out
and how to ask for it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import BadArgument
from ..events.shapes import OP_STATES
from .budgets import QUOTE_CHARS, cut_text, json_size, quote

SUMMARY_STATES = frozenset(("running", "paused", "failed", "timeout"))  # what an agent acts on: live or failed ops
MIN_VIEW_CHARS = 1000  # room for a plan's own fields and the truncation marker
MAX_VIEW_CHARS = 64 * 1024 * 1024
MAX_WAIT_FOR_PLAN_S = 60.0  # the longest wait_for_plan holds its caller (at a door: a request and a worker thread)


@dataclass(frozen=True)
class OpView:
    """Which ops an answer lists. ``op_ids``: ids as text (the executor normalises integer ids)."""

    states: frozenset[str] | None = None
    op_ids: frozenset[str] | None = None
    summary: bool = False
    max_chars: int | None = None

    @property
    def everything(self) -> bool:
        return self.states is None and self.op_ids is None and not self.summary and self.max_chars is None

    def apply(self, answer: dict) -> dict:
        """``answer`` (a status or a final record: its ``ops`` each with ``op_id`` and ``state``) as this view
        shows it; a new dict, ``answer`` is left as it is."""
        if self.everything:
            return answer
        ops = answer["ops"]
        shown = [op for op in ops if (self.states is None or op["state"] in self.states)
                 and (self.op_ids is None or op["op_id"] in self.op_ids)]
        view = dict(answer)
        if self.summary:
            counts: dict[str, int] = {}
            for op in ops:
                counts[op["state"]] = counts.get(op["state"], 0) + 1
            view["counts"] = counts
            shown = [op for op in shown if op["state"] in SUMMARY_STATES]
        if self.op_ids is not None:
            present = {op["op_id"] for op in ops}
            missing = sorted(op_id for op_id in self.op_ids if op_id not in present)
            if missing:
                view["unknown_op_ids"] = missing
        view["ops"] = shown
        return _capped(view, len(ops), self.max_chars) if self.max_chars is not None else view


def op_view(caller: str, states=None, op_ids=None, summary: bool = False, max_chars: int | None = None,
            id_of=None) -> OpView:
    """The view these arguments ask for; BadArgument naming ``caller`` and the argument when one is wrong.
    ``id_of(value, name)`` turns one op id into its text (raising BadArgument)."""
    if states is not None:
        if not isinstance(states, (list, tuple)) or any(state not in OP_STATES for state in states):
            raise BadArgument(f"{caller}: states must be a list of op states ({', '.join(OP_STATES)}), "
                              f"got {quote(states)}")
        states = frozenset(states)
    if op_ids is not None:
        if not isinstance(op_ids, (list, tuple)):
            raise BadArgument(f"{caller}: op_ids must be a list of op ids, got {quote(op_ids)}")
        op_ids = frozenset(id_of(op_id, "op_ids") for op_id in op_ids)
    if type(summary) is not bool:
        raise BadArgument(f"{caller}: summary must be true or false, got {quote(summary)}")
    if max_chars is not None and (type(max_chars) is not int or not MIN_VIEW_CHARS <= max_chars <= MAX_VIEW_CHARS):
        raise BadArgument(f"{caller}: max_chars must be an integer from {MIN_VIEW_CHARS} to {MAX_VIEW_CHARS}, "
                          f"got {quote(max_chars)}")
    return OpView(states, op_ids, summary, max_chars)


def _capped(view: dict, ops_total: int, max_chars: int) -> dict:
    """``view`` with as many of its first ops as fit in ``max_chars`` of compact JSON, and a ``truncated``
    marker when some did not."""
    size = json_size(view)
    if size is not None and size <= max_chars:
        return view
    ops = view["ops"]
    for key in ("description", "error", "cancel_reason", "terminal_reason"):
        if isinstance(view.get(key), str):  # a plan's own long texts must not take the ops' room
            view[key] = cut_text(view[key], QUOTE_CHARS)
    view["ops"] = []
    marker = {"ops_total": ops_total, "ops_matching": len(ops), "ops_shown": 0, "first_left_out": None,
              "message": ""}
    room = max_chars - (json_size({**view, "truncated": marker}) or 0) - _MESSAGE_ROOM
    kept = 0
    for op in ops:
        room -= (json_size(op) or max_chars) + 1
        if room < 0:
            break
        kept += 1
    view["ops"] = ops[:kept]
    left_out = ops[kept]["op_id"] if kept < len(ops) else None
    marker.update(ops_shown=kept, first_left_out=left_out,
                  message=f"truncated: {kept} of {len(ops)} ops fit in max_chars={max_chars}; ask for the rest with "
                          f"op_ids (from {quote(left_out)}) or states, for summary=true, or a larger max_chars")
    view["truncated"] = marker
    return view


_MESSAGE_ROOM = 240 + QUOTE_CHARS  # the marker's message, written once the ops are counted
