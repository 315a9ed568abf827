"""The executor's builtin capabilities, served in-process whatever the backend.

A planner can inspect and act from inside a plan, as in Robonix. They run in
the ticking thread, so none of them blocks: a cancel asks for the teardown and
then reports, through ``status``, once the targets finished or ``wait_ms`` passed.
"""
from __future__ import annotations

import itertools
import threading
import time

from ..backends import CallStatus, CapabilityCall
from ..compilers import Plan
from ..compilers.catalog import builtin_name, check_args_of_builtin
from ..errors import ControlError

READS = frozenset(("get_all_plans", "get_plan_status"))  # the builtins that read plans rather than control them


def reads_plans(plan: Plan) -> bool:
    """Whether any do op of the plan calls a builtin that reads plans."""
    return any(op.kind == "do" and builtin_name(op.cap, op.provider) in READS for op in plan.ops.values())


class BuiltinBackend:
    """Backend for ``executor.builtin_*`` capabilities, bound to one executor.

    A plan's status larger than ``max_result_bytes`` is answered by its marker without being
    built: a plan reading its own status from each of its ops costs the size of the budget per op,
    not the size of the plan."""

    def __init__(self, executor, max_result_bytes: int):
        self._executor = executor
        self._max_result_bytes = max_result_bytes
        self._lock = threading.Lock()
        self._waits: dict[str, tuple[list, float, dict]] = {}
        self._run_ids = itertools.count(1)

    def start(self, call: CapabilityCall) -> CallStatus | str:
        name = builtin_name(call.cap, call.provider)
        problems = check_args_of_builtin(name, call.args)
        if problems:
            return CallStatus("FAILED",
                              error=f"{name}: bad args: " + "; ".join(f"{p or '/'}: {m}" for p, m in problems))
        args = call.args
        ex = self._executor
        try:
            if name == "get_all_plans":
                return _done(ex.get_all_plans())
            if name == "get_plan_status":
                return _done(ex.reads.plan_status(args["plan_id"], self._max_result_bytes))
            if name == "stop_plan_at":
                return _done(ex.stop_plan_at(args["plan_id"], args["op_id"], args.get("when", "on_complete"),
                                             source="builtin"))
            if name == "cancel_plan":
                run = ex.request_cancel(args["plan_id"], f"builtin cancel_plan from plan {call.plan_id}")
                runs = [] if run is None else [run]
                summary = {"plan_id": args["plan_id"]}
            else:
                runs = ex.request_cancel_all(f"builtin cancel_all_plans from plan {call.plan_id}")
                summary = {"count": len(runs), "plan_ids": [run.plan_id for run in runs]}
        except ControlError as exc:
            return CallStatus("FAILED", error=str(exc))
        run_id = f"builtin-{next(self._run_ids)}"
        asked = args.get("wait_ms", 5000)
        waited = min(asked, ex.limits.max_wait_ms)
        if waited < asked:
            summary["wait_ms"] = waited
        with self._lock:
            self._waits[run_id] = (runs, time.monotonic() + waited / 1000.0, summary)
        return run_id

    def status(self, run_id: str) -> CallStatus:
        with self._lock:
            waited = self._waits.get(run_id)
            if waited is None:
                return CallStatus("FAILED", error=f"unknown builtin run {run_id!r}")
            runs, deadline, summary = waited
            finished = all(run.done.is_set() for run in runs)
            if not finished and time.monotonic() < deadline:
                return CallStatus("RUNNING")
            del self._waits[run_id]
        message = "all targets finished" if finished else "targets still tearing down when wait_ms passed"
        if "wait_ms" in summary:
            message += f" (wait_ms capped at {summary['wait_ms']})"
        return _done({**summary, "finished": finished, "message": message})

    def cancel(self, run_id: str) -> None:
        with self._lock:
            self._waits.pop(run_id, None)


def _done(output: dict) -> CallStatus:
    return CallStatus("SUCCEEDED", output=output, event="success")
