"""The executor: accepts plans, ticks their trees, and answers inspect / stop-at / cancel."""
from __future__ import annotations

import collections
import copy
import itertools
import logging
import re
import threading
import time
from typing import Callable

from .backends import Backend
from .behaviours import CapabilityAction
from .builtins import BuiltinBackend
from .compilers import (CapabilityCatalog, ControlRequest, Limits, Plan, Report, Scene, SkillCatalog, compile_plan,
                        load, validate)
from .compilers import scene_of, skill_catalog_of
from .compilers.catalog import builtin_name, check_plan, is_control_only
from .compilers.symbolic import World
from .compilers.ir import STOP_WHENS
from .errors import ControlError, Issue, PlanError
from .plan_run import PlanRun
from .sim import SimBackend

log = logging.getLogger(__name__)

_PLAN_ID = re.compile(r"[1-9][0-9]*")
_NO_SCENE = Issue("no_scene", "", "this executor has no scene: step graphs are checked against one "
                                  "(Executor(scene=...), --scene FILE)", ())


class Executor:
    """Runs plans on a capability backend.

    It ticks only when asked (``tick_once``, ``run_until_complete``) unless
    ``start()`` runs its own tick loop thread. Every public method is safe to
    call from any thread while another thread ticks.
    """

    def __init__(self, backend: Backend | None = None, *, catalog: CapabilityCatalog | dict | None = None,
                 limits: Limits | None = None, tick_rate_hz: float = 100.0, keep_finished: int = 1000,
                 remember_run_ids: int = 10_000, skill_catalog: SkillCatalog | str | None = None,
                 scene: Scene | dict | str | None = None, max_active_runs: int = 1, max_steps: int = 1000,
                 op_timeout_s: float | None = None, max_plans: int = 64):
        """``catalog``: RTDL capability catalog. Step graphs (Qwen3) use ``skill_catalog`` (default
        grant) and ``scene`` (a Scene, its dict, or a file path): without a scene they are refused.
        ``max_active_runs`` step graphs may run at once (one robot: 1); each executes at most
        ``max_steps`` steps. With no backend, a SimBackend simulating the scene is used.
        ``op_timeout_s``: the longest one capability call may run; past it the call is cancelled
        and its op ends ``timeout`` (None: no limit). At most ``max_plans`` plans (any dialect) are in
        flight at once; beyond that a submit is refused as ``busy`` (``too_many_plans``)."""
        if tick_rate_hz <= 0:
            raise ValueError(f"tick_rate_hz must be positive, got {tick_rate_hz}")
        if op_timeout_s is not None and not (isinstance(op_timeout_s, (int, float)) and 0 < op_timeout_s < float("inf")):
            raise ValueError(f"op_timeout_s must be a positive number of seconds or None, got {op_timeout_s!r}")
        self.op_timeout_s = op_timeout_s
        if not isinstance(max_plans, int) or isinstance(max_plans, bool) or max_plans < 1:
            raise ValueError(f"max_plans must be an integer >= 1, got {max_plans!r}")
        self.max_plans = max_plans
        self.skill_catalog = skill_catalog_of(skill_catalog)
        self.scene = Scene.from_file(scene) if isinstance(scene, str) else scene_of(scene)
        self.max_active_runs = max_active_runs
        self.max_steps = max_steps
        if backend is None:
            backend = SimBackend.in_scene(skill_catalog=self.skill_catalog, scene=self.scene)
        self.backend = backend
        self.catalog = CapabilityCatalog(catalog) if isinstance(catalog, dict) else catalog
        self.limits = limits or Limits()
        self.tick_period = 1.0 / tick_rate_hz
        self._builtins = BuiltinBackend(self)
        self._lock = threading.Lock()  # guards the tables and counters below; never held while ticking
        self._active: dict[str, PlanRun] = {}
        self._finished: collections.OrderedDict[str, dict] = collections.OrderedDict()
        self._finishing: dict[str, PlanRun] = {}  # left the table, plan_complete not yet delivered
        self._keep_finished = keep_finished
        self._answers: collections.OrderedDict[str, dict] = collections.OrderedDict()
        self._answering: dict[str, threading.Event] = {}
        self._remember_run_ids = remember_run_ids
        self._graph_slots_taken = 0  # step graphs admitted and not yet finished (one robot: at most max_active_runs)
        self._plans_admitted = 0  # plans admitted and not yet finished (at most max_plans)
        self._next_plan_id = 1
        self._next_op_id = 1
        self._subscribers: tuple[Callable[[dict], None], ...] = ()
        self._seq = itertools.count(1)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._ticking = threading.local()

    # --- submit -----------------------------------------------------------------

    def submit(self, source, run_id: str | None = None, dialect: str = "auto") -> dict:
        """Validate, compile and enqueue a plan, or carry out a meta op; never raises for bad input.

        Returns ``{accepted, run_id, plan_id, verdict, issues, message, ...}``. A
        ``run_id`` seen before returns the same answer and runs nothing again.
        """
        if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
            return _refusal("invalid", [Issue("bad_run_id", "", f"run_id must be a non-empty string, got {run_id!r}")],
                            run_id=None)
        if run_id is not None:
            return self._once(run_id, lambda: self._answer(source, run_id, dialect))
        try:
            loaded = load(source, dialect=dialect, limits=self.limits)
        except PlanError as exc:
            return _refusal("invalid", exc.issues, None)
        envelope_run_id = loaded.meta.get("run_id") if isinstance(loaded, Plan) else None
        if envelope_run_id:  # a step graph's submit envelope names its run
            return self._once(envelope_run_id, lambda: self._answer(loaded, envelope_run_id, dialect))
        return self._answer(loaded, None, dialect)

    def _once(self, run_id: str, answer_once: Callable[[], dict]) -> dict:
        """The answer for ``run_id``: computed once, then repeated (also to concurrent callers)."""
        with self._lock:
            answer = self._answers.get(run_id)
            waiter = self._answering.get(run_id)
            if answer is None and waiter is None:
                self._answering[run_id] = threading.Event()
        if answer is not None:
            return copy.deepcopy(answer)
        if waiter is not None:  # the same run_id is being answered by another thread right now
            waiter.wait()
            with self._lock:
                return copy.deepcopy(self._answers[run_id])
        answer = answer_once()
        with self._lock:
            self._answers[run_id] = answer
            while len(self._answers) > self._remember_run_ids:
                self._answers.popitem(last=False)
            self._answering.pop(run_id).set()
        return copy.deepcopy(answer)

    def _answer(self, source, run_id: str | None, dialect: str) -> dict:
        try:
            return self._submit(source, run_id, dialect)
        except Exception as exc:  # a bug must not escape to a service or leave a run_id waiting
            log.exception("submit failed unexpectedly")
            return _refusal("invalid", [Issue("internal", "", f"internal error: {type(exc).__name__}: {exc}")], run_id)

    def _submit(self, source, run_id: str | None, dialect: str) -> dict:
        if isinstance(source, (Plan, ControlRequest)):
            loaded = source
        else:
            try:
                loaded = load(source, dialect=dialect, limits=self.limits)
            except PlanError as exc:
                return _refusal("invalid", exc.issues, run_id)
        if isinstance(loaded, ControlRequest):
            return self._carry_out(loaded, run_id)
        if loaded.dialect == "qwen3":
            return self._submit_graph(loaded, run_id)
        issues = check_plan(loaded, self.catalog)
        if issues:
            return _refusal("invalid", issues, run_id)
        # Reserve ids under the lock; load and compile outside it so big plans never stall ticking.
        counted = not is_control_only(loaded)  # control (builtins only) is never refused for room
        with self._lock:
            if counted and self._plans_admitted >= self.max_plans:
                return _refusal("busy", [self._too_many_plans()], run_id)
            self._plans_admitted += counted
            plan_id = str(self._next_plan_id)
            self._next_plan_id += 1
            first_op = self._next_op_id
            if loaded.numbered_by_loader:
                self._next_op_id += loaded.op_count
        plan = loaded.renumbered(first_op) if loaded.numbered_by_loader else loaded
        try:
            run = self._make_run(plan_id, plan, run_id)
        except BaseException:
            with self._lock:
                self._plans_admitted -= counted
            raise
        with self._lock:
            self._active[plan_id] = run
        self._wake.set()
        return {"accepted": True, "run_id": run_id, "plan_id": plan_id, "verdict": "ok", "issues": [],
                "message": f"plan {plan_id} accepted: {plan.op_count} ops, {plan.description!r}",
                "dialect": plan.dialect, "op_count": plan.op_count, "root_op_id": plan.root}

    def _submit_graph(self, plan: Plan, run_id: str | None) -> dict:
        """Step graphs: verified against the catalog and the current scene, one robot at a time."""
        scene = self.scene
        if scene is None and plan.steps.status != "blocked":  # blocked is decided first, scene or not
            return _refusal("invalid", [_NO_SCENE], run_id)
        report = validate(plan, catalog=self.skill_catalog, scene=scene)
        if report.verdict != "ok":
            refusal = _refusal(report.verdict, report.issues, run_id)
            if report.verdict == "blocked":  # the planner refused: report its reason, run nothing
                reason = plan.steps.reason
                refusal["message"] = "blocked by the planner" + (f": {reason}" if reason else "")
                refusal["reason"] = reason
            if report.verdict == "replan_required" or any(i.code in ("stale_revision", "revision_missing")
                                                          for i in report.issues):
                refusal["scene"] = scene.as_dict()  # a fresh snapshot for the planner; the model is not called
            return refusal
        with self._lock:
            if self.scene is not scene:
                return _refusal("invalid", [Issue("stale_revision", "", f"the scene changed to revision "
                                                                        f"{self.scene.revision} while this graph was checked",
                                                  ())], run_id)
            busy = [run for run in self._active.values() if run.world is not None]
            if self._graph_slots_taken >= self.max_active_runs:
                held = ", ".join(f"plan {run.plan_id} (run {run.run_id})" for run in busy) or "another graph"
                return _refusal("busy", [Issue("busy", "", f"the robot is busy with {held}; wait for it to end or "
                                                           "cancel it", ())], run_id)
            if self._plans_admitted >= self.max_plans:
                return _refusal("busy", [self._too_many_plans()], run_id)
            self._graph_slots_taken += 1
            self._plans_admitted += 1
            plan_id = str(self._next_plan_id)
            self._next_plan_id += 1
        try:
            run = self._make_run(plan_id, plan, run_id, world=World.from_scene(self.skill_catalog, scene))
        except BaseException:
            with self._lock:
                self._graph_slots_taken -= 1
                self._plans_admitted -= 1
            raise
        with self._lock:
            self._active[plan_id] = run
        self._wake.set()
        return {"accepted": True, "run_id": run_id, "plan_id": plan_id, "verdict": "ok", "issues": [],
                "message": f"plan {plan_id} accepted: {plan.op_count}-step graph from {plan.root}, scene revision "
                           f"{scene.revision}",
                "dialect": "qwen3", "op_count": plan.op_count, "root_op_id": plan.root}

    def _too_many_plans(self) -> Issue:
        return Issue("too_many_plans", "", f"{self.max_plans} plans are in flight already (max_plans); wait for one "
                                           "to end or cancel one", ())

    def _make_run(self, plan_id: str, plan: Plan, run_id: str | None, world: World | None = None) -> PlanRun:
        compiled = compile_plan(plan, self.skill_catalog)
        run = PlanRun(plan_id, plan, compiled, run_id, is_control_only(plan), self._emit)
        if world is not None:
            run.world, run.state = world, world.snapshot()
            compiled.root.setup(plan=run, world=world, max_steps=self.max_steps)
        for guard in compiled.guards.values():
            guard.setup(plan=run)
            body = guard.decorated
            if not isinstance(body, CapabilityAction):
                continue
            backend = self._builtins if plan.dialect == "rtdl" and builtin_name(body.cap, body.provider) else self.backend
            body.setup(plan=run, backend=backend, op_timeout_s=self.op_timeout_s)
        return run

    def _carry_out(self, request: ControlRequest, run_id: str | None) -> dict:
        try:
            if request.op == "cancel_plan":
                result = self.cancel_plan(request.plan_id, wait_ms=request.wait_ms)
            elif request.op == "cancel_all":
                result = self.cancel_all(wait_ms=request.wait_ms)
            else:
                result = self.stop_plan_at(request.plan_id, request.target_op_id, when=request.when)
        except ControlError as exc:
            return {"accepted": False, "run_id": run_id, "plan_id": None, "verdict": "control",
                    "issues": [Issue("control_refused", "", str(exc)).as_dict()], "message": str(exc),
                    "control": request.as_dict()}
        return {"accepted": True, "run_id": run_id, "plan_id": None, "verdict": "control", "issues": [],
                "message": result["message"], "control": request.as_dict(), "result": result}

    # --- inspect -------------------------------------------------------------------

    def get_all_plans(self) -> dict:
        """In-flight plans (control-only plans are not listed)."""
        with self._lock:
            runs = [run for run in self._active.values() if not run.control_only]
        plans = [{"plan_id": run.plan_id, "description": run.plan.description, "op_count": run.plan.op_count,
                  "cancelled": run.cancel_requested, "stop_points": len(run.stop_points)} for run in runs]
        return {"count": len(plans), "plans": plans}

    def get_plan_status(self, plan_id: str) -> dict:
        """Live state of every op of an in-flight plan; raises ControlError for any other plan."""
        run = self._active_run(plan_id, "get_plan_status")
        if run is None:
            raise ControlError(f"get_plan_status: no active plan {plan_id!r} (it already finished or was "
                               "cancelled); call get_all_plans to list running plans, or get_plan_result for "
                               "a finished plan's record")
        ops = [{"op_id": op_id, "kind": record.op.kind, "description": record.op.description,
                "state": record.state, "stop_point": run.stop_point_of(op_id)}
               for op_id, record in run.records.items()]
        status = {"plan_id": run.plan_id, "running": not run.finished, "cancelled": run.cancel_requested,
                  "description": run.plan.description, "ops": ops}
        if run.world is not None:  # a step graph: what the robot holds, always
            status.update(run_id=run.run_id, state=run.state, path=[entry["step"] for entry in run.trace])
        return status

    def get_plan_tree(self, plan_id: str) -> dict:
        """A plan's ops with their children, states, stop points and results: in flight or finished.

        The shape viewers draw from: ``{plan_id, description, dialect, root, running, cancelled,
        outcome, ops: [{op_id, kind, description, children, state, stop_point, result, detail, ...}]}``,
        plus ``transitions``, ``path`` and ``state`` for step graphs. ``outcome`` is None while running.
        """
        self._check_id(plan_id, "plan_id", "get_plan_tree")
        with self._lock:
            run = self._active.get(plan_id) or self._finishing.get(plan_id)
            record = self._finished.get(plan_id)
        if record is not None:
            view = {key: record.get(key) for key in ("plan_id", "run_id", "description", "dialect", "root", "cancelled",
                                                     "cancel_reason", "outcome", "error", "duration_s")}
            view.update(running=False, ops=[{**op, "stop_point": None} for op in record["ops"]])
            if "transitions" in record:
                view.update(transitions=record["transitions"], path=record["path"], state=record["state"])
            return view
        if run is None:
            raise ControlError(f"get_plan_tree: no plan {plan_id!r} is running or kept (never submitted, or too "
                               "old); call get_all_plans or get_finished_plans to list plans")
        return run.tree()

    def get_finished_plans(self, limit: int = 50) -> dict:
        """The newest ``limit`` finished plans still kept, newest first: id, description, outcome, times."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise ControlError(f"get_finished_plans: limit must be a non-negative integer, got {limit!r}")
        with self._lock:
            records = list(self._finished.values())[-limit:] if limit else []
        plans = [{key: record.get(key) for key in ("plan_id", "run_id", "description", "dialect", "outcome",
                                                   "cancel_reason", "error", "started_at", "ended_at", "duration_s")}
                 | {"op_count": len(record["ops"])} for record in reversed(records)]
        return {"count": len(plans), "plans": plans}

    def validate_plan(self, source, dialect: str = "auto") -> dict:
        """Check a plan as ``submit`` would, running nothing: ``{valid, verdict, dialect, issues, stats}``.

        RTDL is checked against this executor's capability catalog, step graphs
        against its skill catalog and current scene.
        """
        try:
            loaded = load(source, dialect=dialect, limits=self.limits)
        except PlanError as exc:
            return Report("invalid", None if dialect == "auto" else dialect, exc.issues).as_dict()
        if isinstance(loaded, Plan) and loaded.dialect == "qwen3":
            report = validate(loaded, catalog=self.skill_catalog, scene=self.scene)
            if self.scene is None and report.verdict == "ok":
                report = Report("invalid", "qwen3", [_NO_SCENE], report.stats)
        else:
            report = validate(loaded, catalog=self.catalog)
        return report.as_dict()

    def behaviour_trees(self) -> dict:
        """plan_id -> py_trees root of each in-flight plan (not control-only ones), for tree viewers.

        Read only: ticking or stopping them is the executor's job.
        """
        with self._lock:
            runs = list(self._active.values())
        return {run.plan_id: run.root for run in runs if run.root is not None and not run.control_only}

    def get_plan_result(self, plan_id: str) -> dict:
        """The final record of a finished plan (states, results, timings)."""
        self._check_id(plan_id, "plan_id", "get_plan_result")
        with self._lock:
            record = self._finished.get(plan_id)
            active = plan_id in self._active
        if record is not None:
            # Two levels deep is what callers edit; a deepcopy of 10k op results costs more than the run.
            return {**record, "ops": [dict(op) for op in record["ops"]]}
        if active:
            raise ControlError(f"get_plan_result: plan {plan_id!r} is still running; use get_plan_status")
        raise ControlError(f"get_plan_result: no record of plan {plan_id!r} (never submitted, or too old to be kept)")

    # --- control -------------------------------------------------------------------

    def stop_plan_at(self, plan_id: str, op_id: str, when: str = "on_complete") -> dict:
        """Arm a stop point: when execution reaches ``op_id`` the whole plan is cancelled."""
        self._check_id(op_id, "op_id", "stop_plan_at")
        if when not in STOP_WHENS:
            raise ControlError(f"stop_plan_at: invalid when {when!r} (expected on_enter or on_complete)")
        run = self._active_run(plan_id, "stop_plan_at")
        if run is None:
            return {"success": True, "armed": False,
                    "message": f"plan {plan_id!r} is not running (already finished or cancelled); no stop point needed."}
        record = run.records.get(op_id)
        if record is None:
            raise ControlError(f"stop_plan_at: plan {plan_id!r} has no op {op_id!r}; "
                               "call get_plan_status to see its op ids")
        run.arm(op_id, when)
        message = f"Stop point set: plan {plan_id!r} will be cancelled {when} op_id={op_id}."
        too_late = record.state != "pending" if when == "on_enter" else record.state not in ("pending", "running", "paused")
        if too_late:
            message += f" Note: op {op_id} is already {record.state}, so this stop point will not fire."
        return {"success": True, "armed": True, "message": message}

    def cancel_plan(self, plan_id: str, wait_ms: int = 5000) -> dict:
        """Cancel a plan; return once it finished or ``wait_ms`` passed, saying which."""
        _check_wait(wait_ms)
        run = self.request_cancel(plan_id, "cancel_plan")
        if run is None:
            return {"plan_id": plan_id, "finished": True, "message": f"plan {plan_id!r} already finished; nothing to cancel"}
        finished = self._await([run], wait_ms)
        if finished:
            state = "finished cancelled"
        elif self._in_tick():
            state = "will be torn down right after the tick in progress"
        else:
            state = f"still tearing down after {wait_ms} ms"
        return {"plan_id": plan_id, "finished": finished, "message": f"plan {plan_id!r} {state}"}

    def cancel_all(self, wait_ms: int = 5000) -> dict:
        """Cancel every in-flight plan except control-only ones."""
        _check_wait(wait_ms)
        runs = self.request_cancel_all("cancel_all")
        finished = self._await(runs, wait_ms)
        ids = [run.plan_id for run in runs]
        return {"count": len(runs), "plan_ids": ids, "finished": finished,
                "message": f"cancelled {len(runs)} plan(s)" + ("" if finished else f"; some still tearing down after {wait_ms} ms")}

    def request_cancel(self, plan_id: str, reason: str) -> PlanRun | None:
        """Mark a plan for cancellation without waiting; None if it already finished."""
        run = self._active_run(plan_id, "cancel_plan")
        if run is not None:
            run.request_cancel(reason)
            self._wake.set()
        return run

    def request_cancel_all(self, reason: str) -> list[PlanRun]:
        with self._lock:
            runs = [run for run in self._active.values() if not run.control_only]
        for run in runs:
            run.request_cancel(reason)
        self._wake.set()
        return runs

    def _in_tick(self) -> bool:
        """Whether this thread is inside a tick (a subscriber or a builtin is running in it)."""
        return getattr(self._ticking, "active", False)

    def _await(self, runs: list[PlanRun], wait_ms: int) -> bool:
        if self._in_tick():
            return all(run.done.is_set() for run in runs)  # the teardown follows the tick in progress
        if self._thread is None:
            for run in runs:
                self._tick_run(run)  # no tick loop: tear down here
        else:
            deadline = time.monotonic() + wait_ms / 1000.0
            for run in runs:
                if not run.done.wait(max(0.0, deadline - time.monotonic())):
                    break
        return all(run.done.is_set() for run in runs)

    # --- ticking -------------------------------------------------------------------

    def tick_once(self) -> None:
        """Tick every in-flight plan once (from inside a tick, e.g. in a subscriber: nothing, it follows)."""
        with self._lock:
            runs = list(self._active.values())
        for run in runs:
            self._tick_run(run)

    def _tick_run(self, run: PlanRun) -> None:
        if self._in_tick():
            return  # nested (a subscriber asked): the tick in progress, or the next one, does it
        self._ticking.active = True
        try:
            self._tick_run_unnested(run)
        finally:
            self._ticking.active = False

    def _tick_run_unnested(self, run: PlanRun) -> None:
        with run.tick_lock:
            if run.finished:
                return
            if not run.started:
                run.begin()
            try:
                if not run.cancel_requested:
                    run.tick()
                if run.cancel_requested:
                    run.tear_down()
                elif not run.complete:
                    return
            except Exception as exc:  # a fault in one plan's tree never stops the executor
                log.exception("plan %s: tick failed", run.plan_id)
                run.error = f"internal error while ticking: {type(exc).__name__}: {exc}"
                try:
                    run.tear_down()
                except Exception:
                    log.exception("plan %s: teardown after a failed tick failed too", run.plan_id)
            self._finish(run)

    def _finish(self, run: PlanRun) -> None:
        run.finished = True
        run.ended_at = time.time()
        record = run.final_record()
        with self._lock:
            self._active.pop(run.plan_id, None)
            self._plans_admitted -= not run.control_only
            if run.world is not None:
                self._graph_slots_taken -= 1
                self.scene = run.world.scene_after(self.scene)
                if record["terminal"] == "replan_required":
                    record["scene"] = self.scene.as_dict()  # a fresh snapshot for the planner; the model is not called
            self._finishing[run.plan_id] = run
            self._finished[run.plan_id] = record
            while len(self._finished) > self._keep_finished:
                self._finished.popitem(last=False)
        run.release_tree()
        complete = {"event": "plan_complete", "plan_id": run.plan_id, "run_id": run.run_id,
                    "any_failed": record["any_failed"], "cancelled": record["cancelled"],
                    "outcome": record["outcome"], "description": run.plan.description, "time": run.ended_at}
        if run.world is not None:
            complete.update(terminal=record["terminal"], terminal_reason=record["terminal_reason"], state=record["state"])
            if "scene" in record:
                complete["scene"] = record["scene"]
        self._emit(complete)
        run.done.set()
        with self._lock:
            del self._finishing[run.plan_id]

    def run_until_complete(self, plan_id: str, timeout: float | None = None) -> dict:
        """Tick (or wait for the tick loop) until the plan finished; return its final record."""
        self._check_id(plan_id, "plan_id", "run_until_complete")
        if self._in_tick():
            raise ControlError("run_until_complete: cannot wait for a plan from inside a tick (an event subscriber)")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            run = self._active.get(plan_id) or self._finishing.get(plan_id)
        if run is not None:
            while not run.done.is_set():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise ControlError(f"run_until_complete: plan {plan_id!r} still running after {timeout} s")
                if self._thread is not None:
                    run.done.wait(remaining)
                    continue
                self.tick_once()
                if not run.done.is_set():
                    self._wake.wait(self.tick_period if remaining is None else min(self.tick_period, remaining))
                    self._wake.clear()
        return self.get_plan_result(plan_id)

    def start(self) -> None:
        """Run the tick loop in a thread of its own (the ROS node and the web server drive it so)."""
        with self._lock:
            if self._thread is not None:
                return
            self._stopping.clear()
            self._thread = threading.Thread(target=self._loop, name="bt_exec-tick", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the tick loop; plans stay in flight and can be ticked by hand."""
        thread = self._thread
        if thread is None:
            return
        self._stopping.set()
        self._wake.set()
        thread.join()
        self._thread = None

    def close(self, wait_ms: int = 5000) -> None:
        """Cancel every plan (control-only ones too), then stop the tick loop."""
        if self._in_tick():
            raise ControlError("close: cannot close the executor from inside a tick (an event subscriber)")
        with self._lock:
            runs = list(self._active.values())
        for run in runs:
            run.request_cancel("executor closed")
        self._await(runs, wait_ms)
        self.stop()
        for run in runs:
            self._tick_run(run)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            began = time.monotonic()
            try:
                self.tick_once()
            except Exception:
                log.exception("tick loop: unexpected error")
            self._wake.wait(max(0.0, self.tick_period - (time.monotonic() - began)))
            self._wake.clear()

    # --- events --------------------------------------------------------------------

    def subscribe(self, callback: Callable[[dict], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event, in the ticking thread; returns an unsubscribe function."""
        with self._lock:
            self._subscribers = self._subscribers + (callback,)

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers = tuple(s for s in self._subscribers if s is not callback)

        return unsubscribe

    def _emit(self, event: dict) -> None:
        event["seq"] = next(self._seq)
        for callback in self._subscribers:
            try:
                callback(event)
            except Exception as exc:
                log.warning("event subscriber %r raised %s: %s", callback, type(exc).__name__, exc)

    # --- helpers --------------------------------------------------------------------

    def _active_run(self, plan_id: str, caller: str) -> PlanRun | None:
        """The in-flight run; None for a plan that finished; ControlError for one never seen."""
        self._check_id(plan_id, "plan_id", caller)
        with self._lock:
            run = self._active.get(plan_id)
            seen = _PLAN_ID.fullmatch(plan_id) is not None and int(plan_id) < self._next_plan_id
        if run is None and not seen:
            raise ControlError(f"{caller}: no plan {plan_id!r} was ever submitted to this executor; "
                               "call get_all_plans to list running plans")
        return run

    @staticmethod
    def _check_id(value: object, name: str, caller: str) -> None:
        if not isinstance(value, str) or not value.strip():
            raise ControlError(f"{caller}: {name} must be a non-empty string, got {value!r}")


def _check_wait(wait_ms: object) -> None:
    if not isinstance(wait_ms, int) or isinstance(wait_ms, bool) or wait_ms < 0:
        raise ControlError(f"wait_ms must be a non-negative integer, got {wait_ms!r}")


def _refusal(verdict: str, issues: list[Issue], run_id: str | None) -> dict:
    first = issues[0] if issues else None
    message = f"refused ({verdict}): {first}" + (f" (+{len(issues) - 1} more issues)" if len(issues) > 1 else "") \
        if first else f"refused ({verdict})"
    return {"accepted": False, "run_id": run_id, "plan_id": None, "verdict": verdict,
            "issues": [issue.as_dict() for issue in issues], "message": message}
