"""Each op's record while its plan runs, and the byte budget the ops' results are kept within."""
from __future__ import annotations

from operator import attrgetter

from ..compilers.ir import Plan
from ..events.shapes import FINAL_STATES
from .budgets import MARKER_CHARS, MESSAGE_CHARS, cut_marker, cut_text, json_size, shown

_DESCRIPTION = attrgetter("description")
_KIND = attrgetter("kind")
_CAP = attrgetter("cap")
_ARGS = attrgetter("args")
_PROVIDER = attrgetter("provider")
# Compact JSON of one op's entry beyond its own texts: keys, quotes, state, stop point, times.
_STATUS_ENTRY_CHARS = 90
_RECORD_ENTRY_CHARS = 180
_RESULT_FIELDS_CHARS = 90  # a result's keys and flags beyond its output and texts


class OpRecord:
    """The live and final state of one op. An op may run more than once (a loop, a retry, a reactive check):
    ``runs`` counts its runs, and the record holds the latest run's (its start, end and result)."""

    __slots__ = ("op", "state", "result", "detail", "started_at", "ended_at", "runs", "result_bytes", "_shown_args")

    def __init__(self, op):
        self.op = op
        self.state = "pending"
        self.result: dict | None = None
        self.detail: str | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.runs = 0
        self.result_bytes = 0  # what its result counts in its plan's budget

    def move_to(self, state: str, now: float | None, result: object, detail: str | None) -> None:
        """The op is now in ``state`` (since ``now``), with ``detail``: ``running`` from pending or a final state
        starts a run (its start time, the last run's end and result gone); a final state ends it with ``result``
        (both as the record keeps them)."""
        if state == "running" and (self.state == "pending" or self.state in FINAL_STATES):
            self.runs += 1
            self.started_at = now
            self.ended_at = self.result = None
        self.state = state
        self.detail = detail
        if state in FINAL_STATES:
            self.ended_at = now
            self.result = result

    def as_dict(self, whole_args: bool = True) -> dict:
        """The op and its state; a call's ``cap`` and ``args`` (whole, or as views show them: cut past
        ``ARGS_SHOWN_CHARS`` to a marker), a control op's ``node``, and ``runs`` when it ran more than once."""
        op = self.op
        if op.cap is None:
            entry = {"op_id": op.op_id, "kind": op.kind, "description": op.description, "state": self.state,
                     "children": list(op.children), "result": self.result, "detail": self.detail,
                     "started_at": self.started_at, "ended_at": self.ended_at}
            if op.node is not None:
                entry["node"] = op.node
        else:
            entry = {"op_id": op.op_id, "kind": op.kind, "description": op.description, "state": self.state,
                     "children": list(op.children), "cap": op.cap,
                     "args": op.args if whole_args else self.shown_args(), "result": self.result,
                     "detail": self.detail, "started_at": self.started_at, "ended_at": self.ended_at}
        if self.runs > 1:
            entry["runs"] = self.runs
        return entry

    def shown_args(self) -> object:
        """The call's args as views show them, measured once."""
        try:
            return self._shown_args
        except AttributeError:
            self._shown_args = shown(self.op.args)
            return self._shown_args


class OpRecords(dict):
    """op id -> ``OpRecord`` of every op of ``plan``, in plan order, and the byte budget their results are kept
    within: an output larger than ``max_result_bytes``, or past ``max_plan_result_bytes`` kept by the plan in all
    (each output larger than its marker, then), is kept as its marker; a long error or detail is cut. Sizes are
    measured once, when a result is kept, and add up to what the plan's final record measures.

    ``text_chars``: the length of the text the plan was loaded from, if it came as text (it holds every
    description and cap, so it stands for them when the final record is measured)."""

    def __init__(self, plan: Plan, max_result_bytes: int, max_plan_result_bytes: int, text_chars: int | None = None):
        super().__init__((op_id, OpRecord(op)) for op_id, op in plan.ops.items())
        self.plan = plan
        self.max_result_bytes = max_result_bytes
        self.max_plan_result_bytes = max_plan_result_bytes
        self.result_bytes = 0  # what the results kept so far measure
        self._text_chars = text_chars
        self._op_text_chars: int | None = None
        self._last_output: object = None  # the output measured last, its size, and the plan's kept bytes
        self._last_output_size: int | None = 4  # below which that output is kept whole again
        self._whole_below = -1

    def set_state(self, op_id: str, state: str, result: dict | None, detail: str | None,
                  now: float) -> tuple[dict | None, str | None]:
        """Op ``op_id`` is now in ``state`` (at ``now``); a final state keeps ``result`` within the budget. The
        result and detail as kept, which the op's event carries."""
        if detail is not None and len(detail) > MESSAGE_CHARS:
            detail = cut_text(detail)
        record = self[op_id]
        if record.result_bytes and (state in FINAL_STATES or state == "running"):  # an op running again:
            self.result_bytes -= record.result_bytes  # its last result goes (replaced, or gone as it starts again)
            record.result_bytes = 0
        if result is not None and state in FINAL_STATES:
            before = self.result_bytes
            if type(result) is dict and result.get("output") is self._last_output and not result.get("error") \
                    and self.result_bytes < self._whole_below:
                self.result_bytes += self._last_output_size + _RESULT_FIELDS_CHARS  # the common case, inline
            else:
                result = self._kept(result)
            record.result_bytes = self.result_bytes - before
        record.move_to(state, now, result, detail)
        return result, detail

    def _kept(self, result: dict) -> dict:
        """The result as records and events keep it: an output over the budgets replaced by its marker,
        a long error cut. Measured here, once; the behaviour's own result is left as it is."""
        if type(result) is not dict:
            size = json_size(result)
            if size is not None and size <= self.max_result_bytes:
                self.result_bytes += size
                return result
            self.result_bytes += MARKER_CHARS
            return cut_marker(result, size)
        output = result.get("output")
        if output is self._last_output:  # a backend answering many calls with one object: measured once
            size = self._last_output_size
        else:
            size = json_size(output)
            self._last_output, self._last_output_size = output, size
            # Below this, the same output again is kept whole (set_state checks it inline).
            self._whole_below = (self.max_plan_result_bytes - size if size is not None and size <= self.max_result_bytes
                                 else -1)
        if size is None or size > self.max_result_bytes or (
                self.result_bytes + size > self.max_plan_result_bytes and size > MARKER_CHARS):
            result = {**result, "output": cut_marker(output, size)}
            size = MARKER_CHARS
        error = result.get("error")
        if error:
            if type(error) is not str:
                error = ""
            elif len(error) > MESSAGE_CHARS:
                error = cut_text(error)
                result = {**result, "error": error}
            size += len(error)
        self.result_bytes += size + _RESULT_FIELDS_CHARS
        return result

    def status_size(self) -> int:
        """About the compact JSON size of a status's op list (at most), without building it."""
        return self.op_text_chars() + _STATUS_ENTRY_CHARS * len(self)

    def record_size(self, record: dict) -> int:
        """About the compact JSON size of the plan's final ``record``, from what was measured as it ran."""
        plan = self.plan
        ops = plan.ops
        if self._text_chars is None:  # the record keeps each call's args too (in a text, they are counted)
            texts = self.op_text_chars() + sum(json_size(args) or 0 for args in filter(None, map(_ARGS, ops.values())))
        else:  # the ids: in the text once (arena) or renumbered by the executor; twice in the record
            texts = self._text_chars + (2 * len(ops) * len(next(reversed(ops), "")) if plan.numbered_by_loader
                                        else sum(map(len, ops)))
        size = (texts + _RECORD_ENTRY_CHARS * len(ops) + self.result_bytes + len(plan.description)
                + (json_size(record["input"]) or 0) + 400)
        for key in ("transitions", "trace", "state", "scene", "error", "cancel_reason", "terminal_reason"):
            if record.get(key) is not None:
                size += json_size(record[key]) or 0
        return size

    def op_text_chars(self) -> int:
        """The characters of every op's id, kind, description, cap and provider: counted once, when first asked."""
        if self._op_text_chars is None:
            ops = self.plan.ops
            self._op_text_chars = (2 * sum(map(len, ops)) + sum(map(len, map(_DESCRIPTION, ops.values())))
                                   + sum(map(len, map(_KIND, ops.values())))
                                   + sum(map(len, filter(None, map(_CAP, ops.values()))))
                                   + sum(map(len, filter(None, map(_PROVIDER, ops.values())))))
        return self._op_text_chars
