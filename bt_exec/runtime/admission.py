"""Admission: what may enter the runtime. Load, check, idempotency by run_id, room, and plan ids."""
from __future__ import annotations

import copy
import dataclasses
import logging
import re
import threading
from typing import Callable

from bt_exec.compilers import (CheckContext, ControlRequest, Limits, Plan, Report, check_source, dialect_of,
                               document_of, gc_paused, issues_after_fixes, load_with_warnings, refusal_issues)
from bt_exec.compilers.blackboard import SEEDS_PATH, copied, seed_issues, seeded
from bt_exec.errors import Issue, PlanError

from .budgets import MESSAGE_CHARS, QUOTE_CHARS, BoundedTable, cut_text, json_size, quote
from .builtins import reads_plans
from .plan_run import PlanRun
from .runner import MAX_START_HOLD_S

log = logging.getLogger(__name__)

PLAN_ID = re.compile(r"[1-9][0-9]*")


class Admission:
    """Turns a submission into an accepted PlanRun or a refusal, never raising for bad input.

    It owns what admission decides on: the check context (catalogs and the current
    scene, which finished runs move on), the answers remembered per run_id (the newest
    ``remember_run_ids``, at most ``remember_run_ids_bytes`` of them in all; a ``busy``
    refusal is not remembered: the same submission may be admitted once there is room),
    the plans admitted, the runs holding the robot (at most ``max_active_runs``), and the
    plan and op id counters.

    Room: at most ``max_plans`` plans are in flight, and besides them at most ``max_plans``
    plans of pure control (every do op a builtin that cancels or arms a stop point), so
    that control gets through when the plans' room is full. A plan of builtins that also
    reads (``get_all_plans``, ``get_plan_status``) takes a plan's room.
    ``carry_out(request, run_id)`` answers meta ops; ``make_run(plan_id, plan, run_id,
    control_only, world, text_chars)`` builds a run (``text_chars``: the length of the text the
    plan was loaded from, when it came as text); ``accept(run, hold_s)`` hands it to the runner,
    its start held ``hold_s`` seconds (``Runner.add``).
    """

    def __init__(self, context: CheckContext, limits: Limits, *, max_plans: int, max_active_runs: int,
                 remember_run_ids: int, remember_run_ids_bytes: int,
                 carry_out: Callable[[ControlRequest, str | None], dict],
                 make_run: Callable[..., PlanRun], accept: Callable[[PlanRun, float], None],
                 robot_holders: Callable[[], list[PlanRun]]):
        self.context = context
        self.limits = limits
        self.max_plans = max_plans
        self.max_active_runs = max_active_runs
        self._carry_out = carry_out
        self._make_run = make_run
        self._accept = accept
        self._robot_holders = robot_holders
        self._lock = threading.Lock()
        self._answers = BoundedTable(remember_run_ids, remember_run_ids_bytes)
        self._answering: dict[str, _Answering] = {}
        self._robot_slots_taken = 0
        self._plans_admitted = 0
        self._control_plans: set[str] = set()  # ids of the plans of pure control in flight
        self._next_plan_id = 1
        self._next_op_id = 1

    @property
    def scene(self):
        return self.context.scene

    def ever_submitted(self, plan_id: str) -> bool:
        """Whether ``plan_id`` is one this executor gave out."""
        with self._lock:
            # Digits first: a client's id of thousands of digits is never converted to an int.
            return (len(plan_id) <= len(str(self._next_plan_id)) and PLAN_ID.fullmatch(plan_id) is not None
                    and int(plan_id) < self._next_plan_id)

    # --- submit -------------------------------------------------------------------

    def submit(self, source, run_id: str | None, dialect: str, hold_start_s: float = 0.0,
               blackboard_seeds: dict | None = None) -> dict:
        """The answer to a submission; an accepted plan's start is held ``hold_start_s`` seconds (0 to
        MAX_START_HOLD_S; ValueError beyond) or until the runner's ``release_start``. ``blackboard_seeds``
        seed the plan's run (``compilers.blackboard.seeded``): bad ones refuse it (``seed_issues``), and a control
        request given seeds is refused, as it runs no plan."""
        if type(hold_start_s) not in (int, float) or not 0 <= hold_start_s <= MAX_START_HOLD_S:
            raise ValueError(f"hold_start_s must be a number of seconds from 0 to {MAX_START_HOLD_S:g}, "
                             f"got {hold_start_s!r}")
        if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
            return refusal("invalid", [Issue("bad_run_id", "",
                                             f"run_id must be a non-empty string, got {quote(run_id)}")],
                           run_id=None)
        if blackboard_seeds is not None:
            issues = seed_issues(blackboard_seeds, self.limits)
            if issues:
                return refusal("invalid", issues, run_id)
            blackboard_seeds = copied(blackboard_seeds)  # the run's own: the caller's may change after the call
        text_chars = len(source) if isinstance(source, (str, bytes)) else None
        if run_id is not None:
            return self._once(run_id, lambda: self._answer(source, run_id, dialect, text_chars, hold_start_s,
                                                           blackboard_seeds))
        try:
            with gc_paused():
                loaded = load_with_warnings(source, dialect=dialect, limits=self.limits)
        except PlanError as exc:
            return refusal("invalid", refusal_issues(exc, self._context_of), None)
        envelope_run_id = loaded[0].meta.get("run_id") if isinstance(loaded[0], Plan) else None
        if envelope_run_id:  # a submit envelope that names its run
            return self._once(envelope_run_id,
                              lambda: self._answer(loaded, envelope_run_id, dialect, text_chars, hold_start_s,
                                                   blackboard_seeds))
        return self._answer(loaded, None, dialect, text_chars, hold_start_s, blackboard_seeds)

    def _once(self, run_id: str, answer_once: Callable[[], dict]) -> dict:
        """The answer for ``run_id``: computed once, then repeated (also to concurrent callers, who get
        it from the one answering, whether or not the table keeps it)."""
        with self._lock:
            answer = self._answers.get(run_id)
            waiter = self._answering.get(run_id)
            if answer is None and waiter is None:
                mine = self._answering[run_id] = _Answering()
        if answer is not None:
            return copy.deepcopy(answer)
        if waiter is not None:  # the same run_id is being answered by another thread right now
            waiter.done.wait()
            return copy.deepcopy(waiter.answer)
        try:
            answer = mine.answer = answer_once()
        finally:
            with self._lock:
                if mine.answer is not None and mine.answer["verdict"] != "busy":
                    self._answers.put(run_id, mine.answer, json_size(mine.answer) or 0)
                del self._answering[run_id]
            mine.done.set()
        return copy.deepcopy(answer)

    def _answer(self, source, run_id: str | None, dialect: str, text_chars: int | None, hold_s: float,
                seeds: dict | None) -> dict:
        """``source``: what was handed in, or what it loaded as with its warnings."""
        try:
            with gc_paused():  # a plan's many new objects all stay alive: nothing for the collector to find
                return self._admit(source, run_id, dialect, text_chars, hold_s, seeds)
        except Exception as exc:  # a bug must not escape to a service or leave a run_id waiting
            log.exception("submit failed unexpectedly")
            return refusal("invalid", [Issue("internal", "", f"internal error: {type(exc).__name__}: {exc}")], run_id)

    def _admit(self, source, run_id: str | None, dialect: str, text_chars: int | None, hold_s: float,
               seeds: dict | None) -> dict:
        if type(source) is tuple:
            loaded, warnings = source
        elif isinstance(source, (Plan, ControlRequest)):
            loaded, warnings = source, []
        else:
            try:
                loaded, warnings = load_with_warnings(source, dialect=dialect, limits=self.limits)
            except PlanError as exc:
                return refusal("invalid", refusal_issues(exc, self._context_of), run_id)
        return _with_warnings(self._admit_loaded(loaded, run_id, text_chars, hold_s, seeds), warnings)

    def _admit_loaded(self, loaded: Plan | ControlRequest, run_id: str | None, text_chars: int | None,
                      hold_s: float, seeds: dict | None) -> dict:
        if isinstance(loaded, ControlRequest):
            if seeds:
                return refusal("invalid", [Issue("bad_blackboard", SEEDS_PATH, f"blackboard seeds seed a plan's "
                                                 f"run, and {loaded.op} is a control request, which runs none")],
                               run_id)
            return self._carry_out(loaded, run_id)
        plan = seeded(loaded, seeds) if seeds else loaded
        kind = dialect_of(plan)
        context = self.context
        report = kind.check(plan, context)
        if not report.ok:
            answer = {**refusal(report.verdict, report.issues, run_id), **kind.refusal_details(plan, report, context)}
            for key in ("message", "reason"):
                if type(answer.get(key)) is str and len(answer[key]) > MESSAGE_CHARS:
                    answer[key] = cut_text(answer[key])
            return answer
        control_only = kind.is_control_only(plan)
        pure_control = control_only and not reads_plans(plan)
        with self._lock:
            if kind.holds_robot and self.context is not context:
                return refusal("invalid", [Issue("stale_revision", "", "the scene changed to revision "
                                                 f"{self.context.scene.revision} while this graph was checked", ())],
                               run_id)
            if kind.holds_robot and self._robot_slots_taken >= self.max_active_runs:
                held = ", ".join(f"plan {run.plan_id} (run {run.run_id})" for run in self._robot_holders())
                return refusal("busy", [Issue("busy", "", f"the robot is busy with {held or 'another graph'}; wait "
                                                          "for it to end or cancel it", ())], run_id)
            if pure_control and len(self._control_plans) >= self.max_plans:
                return refusal("busy", [Issue("too_many_plans", "", f"{self.max_plans} control plans are in flight "
                                                                    "already (max_plans); wait for one to end", ())],
                               run_id)
            if not pure_control and self._plans_admitted >= self.max_plans:
                return refusal("busy", [Issue("too_many_plans", "", f"{self.max_plans} plans are in flight already "
                                                                    "(max_plans); wait for one to end or cancel one",
                                              ())], run_id)
            plan_id = str(self._next_plan_id)
            self._next_plan_id += 1
            if pure_control:
                self._control_plans.add(plan_id)
            else:
                self._plans_admitted += 1
            self._robot_slots_taken += kind.holds_robot
            first_op = self._next_op_id
            if plan.numbered_by_loader:
                self._next_op_id += plan.op_count
        try:
            plan = plan.renumbered(first_op) if plan.numbered_by_loader else plan
            run = self._make_run(plan_id, plan, run_id, control_only, kind.world_of(plan, context), text_chars)
        except BaseException:
            self._release(plan_id, kind.holds_robot)
            raise
        self._accept(run, hold_s)
        answer = {"accepted": True, "run_id": run_id, "plan_id": plan_id, "verdict": "ok", "issues": [],
                  "message": kind.accepted_message(plan_id, plan, context), "dialect": plan.dialect,
                  "op_count": plan.op_count, "root_op_id": plan.root}
        if report.warnings:
            answer["warnings"] = report.warnings
        return answer

    def replace_scene(self, scene) -> bool:
        """Check step graphs against ``scene`` from now on; False (nothing replaced) while a run holds the robot:
        its end moves the scene on from the one it started in."""
        with self._lock:
            if self._robot_slots_taken:
                return False
            self.context = _with_scene(self.context, scene)
            return True

    # --- release --------------------------------------------------------------------

    def released(self, run: PlanRun, record: dict) -> None:
        """A run ended: give its room back; a run that moved a world moves the scene on."""
        with self._lock:
            self._release_locked(run.plan_id, run.world is not None)
            if run.world is not None:
                scene = run.world.scene_after(self.context.scene)
                if scene is not self.context.scene:
                    self.context = _with_scene(self.context, scene)
                if record["terminal"] == "replan_required":
                    record["scene"] = scene.as_dict()  # a fresh snapshot for the planner; the model is not called

    def _release(self, plan_id: str, holds_robot: bool) -> None:
        with self._lock:
            self._release_locked(plan_id, holds_robot)

    def _release_locked(self, plan_id: str, holds_robot: bool) -> None:
        if plan_id in self._control_plans:
            self._control_plans.discard(plan_id)
        else:
            self._plans_admitted -= 1
        self._robot_slots_taken -= holds_robot

    def check(self, source, dialect: str) -> dict:
        """What submitting would answer about the plan itself, running nothing:
        ``{valid, verdict, dialect, issues, stats}``; where its issues carry fixes, those the repaired
        document still has follow them (``compilers.issues_after_fixes``)."""
        report = self._check_once(source, dialect)
        if not report.ok and report.issues:
            try:
                document = document_of(source, dialect, self.limits)
            except PlanError:
                document = None
            if document is not None:
                report.issues = issues_after_fixes(document, report.issues,
                                                   lambda repaired: self._check_once(repaired, dialect).issues)
        return _with_issues_cut(report.as_dict())

    def _check_once(self, source, dialect: str) -> Report:
        return check_source(source, dialect, self.limits, self._context_of)

    def _context_of(self, _dialect) -> CheckContext:
        """The context plans of every dialect are checked against here (one for all of them)."""
        return self.context


class _Answering:
    """A run_id's answer being computed: whoever submits the same run_id meanwhile waits for it here."""

    __slots__ = ("done", "answer")

    def __init__(self):
        self.done = threading.Event()
        self.answer: dict | None = None


def _with_scene(context: CheckContext, scene) -> CheckContext:
    return dataclasses.replace(context, scene=scene)


def refusal(verdict: str, issues: list[Issue], run_id: str | None) -> dict:
    """A refusal's answer. What it quotes of the input is cut to a few hundred characters: answers are
    remembered per run_id and sent by every door."""
    first = issues[0] if issues else None
    more = f" (+{len(issues) - 1} more issues)" if len(issues) > 1 else ""
    message = f"refused ({verdict}): {cut_text(str(first))}{more}" if first else f"refused ({verdict})"
    return {"accepted": False, "run_id": run_id, "plan_id": None, "verdict": verdict,
            "issues": [_issue_cut(issue.as_dict()) for issue in issues], "message": message}


def _issue_cut(issue: dict) -> dict:
    """An issue with its path and message cut to what a message may quote."""
    if len(issue["message"]) > MESSAGE_CHARS:
        issue["message"] = cut_text(issue["message"])
    if len(issue["path"]) > MESSAGE_CHARS:
        issue["path"] = cut_text(issue["path"])
    if "steps" in issue:
        issue["steps"] = [cut_text(step, QUOTE_CHARS) if type(step) is str else step for step in issue["steps"]]
    return issue


def _with_warnings(answer: dict, warnings: list[dict]) -> dict:
    """An answer with the warnings of reading its input (text skipped, a wait capped), when there are any;
    a control answer's message says its wait was capped."""
    if warnings:
        answer["warnings"] = warnings + answer.get("warnings", [])
        if answer.get("verdict") == "control":
            capped = [warning["message"] for warning in warnings if warning["code"] == "wait_capped"]
            if capped:
                answer["message"] = f"{answer['message']} ({capped[0]})"
    return answer


def _with_issues_cut(answer: dict) -> dict:
    answer["issues"] = [_issue_cut(issue) for issue in answer["issues"]]
    return answer
