"""What the runtime's events and views carry beyond plain fields, named once for every reader.

Kept free of the runtime's imports: the doors (web, replay) read these shapes without loading the
executor, its behaviours or its backends.
"""
from __future__ import annotations

# The states a node_state event gives an op, and those it ends in.
OP_STATES = ("pending", "running", "paused", "succeeded", "failed", "canceled", "timeout")
FINAL_STATES = frozenset(("succeeded", "failed", "canceled", "timeout"))
# What a stop_point event's stop point does when reached: cancel the plan, or pause it.
STOP_ACTIONS = ("cancel", "pause")

# plan_started's field holding the plan's shape: journals keep it (a replay needs it); live doors, which
# serve the plan by other means (tree views, ~/plan), leave it out of what they stream.
PLAN_KEY = "plan"


def trace_view(trace: list[dict]) -> list[dict]:
    """A step graph's trace as views show it: each step's outcome and where it led, without the world state."""
    return [{"step": entry["step"], "outcome": entry["outcome"], "next": entry["next"], "time": entry["time"]}
            for entry in trace]
