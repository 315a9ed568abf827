"""What the planner reads back after a run: each call that started and finished, in the planner's own format, cut
to size (a call stopped before it started never ran: the cancel reason says where the plan stopped).

An entry is ``{op_id, cap, success, output, error}``. An output whose compact JSON is over the
limit (characters, as ``budgets`` counts them) is replaced by the budgets' marker shape,
``{"truncated": true, "bytes": N, "preview": TEXT}``, with as much preview as the limit leaves room
for; an error is cut to the limit (at most a message's length) with a note of how much was left out.
"""
from __future__ import annotations

from ..errors import BadArgument
from .budgets import MESSAGE_CHARS, cut_text, json_preview, json_size, quote

OUTPUT_CHARS = 2000        # default limit on one output in feedback
MIN_OUTPUT_CHARS = 100     # below this a marker would hold no useful preview
MAX_OUTPUT_CHARS = 1_000_000
_MARKER_KEYS_CHARS = 64    # a marker's JSON beyond its preview text
_MARKER_KEYS = frozenset(("truncated", "bytes", "preview"))


def check_output_chars(value: object, caller: str) -> None:
    """The limit must be a whole number of characters within the range every door takes."""
    if type(value) is not int or not MIN_OUTPUT_CHARS <= value <= MAX_OUTPUT_CHARS:
        raise BadArgument(f"{caller}: max_output_chars must be an integer from {MIN_OUTPUT_CHARS} to "
                          f"{MAX_OUTPUT_CHARS} (characters of one output's JSON), got {quote(value)}")


def op_feedback(op_id: str, cap: str, state: str, result: object, detail: str | None, max_chars: int) -> dict:
    """One finished call's entry. ``result`` is what the record keeps (None when the op ended without one,
    e.g. cancelled before its call answered)."""
    if type(result) is dict:
        success = result.get("success")
        output = result.get("output")
        error = result.get("error")
    else:
        success, output, error = None, result, None
    if type(success) is not bool:
        success = state == "succeeded"
    if not error and not success:
        error = detail or f"the op ended {state}"
    if error and type(error) is not str:
        error = quote(error, MESSAGE_CHARS)
    return {"op_id": op_id, "cap": cap, "success": success, "output": cut_output(output, max_chars),
            "error": cut_text(error, min(max_chars, MESSAGE_CHARS)) if error else ""}


def cut_output(output: object, max_chars: int) -> object:
    """``output`` whole when its compact JSON is within ``max_chars``; else a marker of about that size."""
    if output is None or type(output) in (bool, int, float) and not (type(output) is int and output.bit_length() > 64):
        return output
    if type(output) is dict and output.keys() == _MARKER_KEYS and output["truncated"] is True \
            and type(output["preview"]) is str:  # cut already when the record kept it: its own size stands
        preview = output["preview"]
        room = max_chars - _MARKER_KEYS_CHARS
        if len(preview) > room:
            preview = preview[:room - 1] + "\u2026"
        return {"truncated": True, "bytes": output["bytes"], "preview": preview}
    size = json_size(output)
    if size is not None and size <= max_chars:
        return output
    return {"truncated": True, "bytes": size, "preview": json_preview(output, max_chars - _MARKER_KEYS_CHARS)}


def call_entries(calls, max_chars: int) -> list[dict]:
    """The entries of finished ``calls`` (``(op_id, cap, state, result, detail, ended_at)`` each), in the order
    they ended."""
    return [op_feedback(op_id, cap, state, result, detail, max_chars)
            for op_id, cap, state, result, detail, _ended_at in sorted(calls, key=lambda call: call[5])]


def snapshot_op(op_id: str, kind: str, cap: str | None, state: str, stop_point: str | None) -> dict:
    """One op of an active plan as the next prompt shows it: ``cap`` only on calls, ``stop_point`` only when
    one is armed on it."""
    entry = {"op_id": op_id, "kind": kind}
    if cap is not None:
        entry["cap"] = cap
    entry["state"] = state
    if stop_point is not None:
        entry["stop_point"] = stop_point
    return entry
