"""The executor: the one control API every door calls (Python, CLI, ROS, HTTP, MCP).

It is a facade over three parts: ``Admission`` (load, check, idempotency, room),
the ``Runner`` (tick loop, wake-ups, watchdog, finishing) and the ``EventBus``.
Its answers are plain dicts, the same whichever door asked.
"""
from __future__ import annotations

import logging
from typing import Callable

from .backends import Backend
from .compilers import (CapabilityCatalog, CheckContext, ControlRequest, Limits, Plan, Scene, SkillCatalog,
                        dialect_of, scene_of, skill_catalog_of)
from .compilers.blackboard import copied
from .compilers.call_guard import CallGuard, CallNames, load_call_guard
from .compilers.dialects import DIALECTS, NodeCatalog, capability_catalog_of, node_catalog_of
from .compilers.ir import STOP_WHENS
from .compilers.limits import INT64_MAX, number_shown
from .errors import BadArgument, Conflict, ControlError, Issue, NotFound
from .events import EventBus
from .events.shapes import STOP_ACTIONS
from .motion.cell_view import CellView, is_cell, no_cell
from .runtime.admission import Admission
from .runtime.budgets import QUOTE_CHARS, cut_text, quote
from .runtime.builtins import BuiltinBackend
from .runtime.capabilities import CapabilityRouter
from .runtime.feedback import OUTPUT_CHARS
from .runtime.plan_reads import PlanReads, checked_id, checked_timeout, checked_view, still_running
from .runtime.plan_run import STOP_POINT_SOURCES, PlanRun
from .runtime.runner import Runner
from .sim import SimBackend

log = logging.getLogger(__name__)

_NAMED_RUNNING_OPS = 10  # a pause's answer names this many running ops, then counts the rest


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
                 op_timeout_s: float | None = None, max_plans: int = 64, tick_on_news_only: bool = True,
                 max_result_bytes: int = 16 * 1024, max_plan_result_bytes: int = 4 * 1024 * 1024,
                 keep_finished_bytes: int = 64 * 1024 * 1024, remember_run_ids_bytes: int = 16 * 1024 * 1024,
                 call_guard: CallGuard | dict | str | None = None, pause_timeout_s: float | None = None,
                 node_catalog: NodeCatalog | str | None = None):
        """``catalog``: RTDL capability catalog. Step graphs (Qwen3) use ``skill_catalog`` (default
        grant) and ``scene`` (a Scene, its dict, or a file path): without a scene they are refused.
        ``max_active_runs`` step graphs may run at once (one robot: 1); each executes at most
        ``max_steps`` steps. With no backend, a SimBackend simulating the scene is used; with no scene, the
        backend's ``scene`` if it has one (a simulated cell such as ``PhysicsCell``), so both work on one scene.
        ``op_timeout_s``: the longest one capability call may run; past it the call is cancelled
        and its op ends ``timeout`` (None: no limit). At most ``max_plans`` plans (any dialect) are in
        flight at once; beyond that a submit is refused as ``busy`` (``too_many_plans``).
        ``tick_on_news_only=False`` ticks every plan every period instead of only when something
        in it changed (see ``Runner``).

        Byte budgets (sizes are compact JSON, strings by characters, measured once when stored):
        an op's output larger than ``max_result_bytes``, or past ``max_plan_result_bytes`` kept by its
        plan in all, is kept as ``{"truncated": true, "bytes": N, "preview": "..."}``; the finished
        records (``keep_finished`` at most) and the answers remembered per run_id
        (``remember_run_ids`` at most) are kept within ``keep_finished_bytes`` and
        ``remember_run_ids_bytes`` in all, oldest evicted first.

        ``call_guard``: allow/deny rules every capability call but the builtins passes (a CallGuard, its
        rules dict, or a rules file path, JSON or YAML; ConfigError saying where it is wrong). A denied
        call ends its op ``failed`` with the rule's name and never reaches the backend; RTDL plans whose
        do ops it denies whatever the robot's state are refused at submit (``call_denied``).

        ``pause_timeout_s``: a plan paused longer than this is cancelled, its cancel reason saying so
        (None: a pause lasts until resumed).

        ``node_catalog``: the BT.CPP nodes BT XML trees are checked against (a NodeCatalog, or the path of a
        TreeNodesModel file; None: their leaves are not checked)."""
        if tick_rate_hz <= 0:
            raise ValueError(f"tick_rate_hz must be positive, got {tick_rate_hz}")
        if op_timeout_s is not None and not (isinstance(op_timeout_s, (int, float))
                                             and 0 < op_timeout_s < float("inf")):
            raise ValueError(f"op_timeout_s must be a positive number of seconds or None, got {op_timeout_s!r}")
        if pause_timeout_s is not None and not (type(pause_timeout_s) in (int, float)
                                                and 0 < pause_timeout_s < float("inf")):
            raise ValueError(f"pause_timeout_s must be a positive number of seconds or None, got {pause_timeout_s!r}")
        if not isinstance(max_plans, int) or isinstance(max_plans, bool) or max_plans < 1:
            raise ValueError(f"max_plans must be an integer >= 1, got {max_plans!r}")
        for name, value in (("keep_finished", keep_finished), ("remember_run_ids", remember_run_ids),
                            ("max_result_bytes", max_result_bytes), ("max_plan_result_bytes", max_plan_result_bytes),
                            ("keep_finished_bytes", keep_finished_bytes),
                            ("remember_run_ids_bytes", remember_run_ids_bytes)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        self.max_result_bytes = max_result_bytes
        self.max_plan_result_bytes = max_plan_result_bytes
        self.op_timeout_s = op_timeout_s
        self.pause_timeout_s = pause_timeout_s
        self.max_steps = max_steps
        self.skill_catalog = skill_catalog_of(skill_catalog)
        self.catalog = capability_catalog_of(catalog)
        self.node_catalog = node_catalog_of(node_catalog)
        self.limits = limits or Limits()
        if scene is None:  # a backend that simulates a cell of its own (PhysicsCell) shares its scene
            scene = getattr(backend, "scene", None)
        scene = scene_of(scene)
        if backend is None:
            backend = SimBackend.in_scene(skill_catalog=self.skill_catalog, scene=scene)
        self.backend = backend
        self._cell_view: CellView | None = None  # made on the first get_cell_view
        # Calls are judged by the capability they reach: the skill an alias names, the provider the backend routes by.
        self.call_guard = load_call_guard(call_guard, CallNames(self.skill_catalog,
                                                                getattr(backend, "routed_provider", None)))
        context = CheckContext(self.catalog, self.skill_catalog, scene, require_scene=True,
                               call_guard=self.call_guard, max_wait_ms=self.limits.max_wait_ms,
                               node_catalog=self.node_catalog)
        builtins = BuiltinBackend(self, max_result_bytes)
        self._routers = {name: CapabilityRouter(backend, builtins if kind.routes_builtins else None, self.call_guard)
                         for name, kind in DIALECTS.items()}
        self._bus = EventBus()
        self._runner = Runner(publish=self._bus.publish, tick_period=1.0 / tick_rate_hz,
                              keep_finished=keep_finished, keep_finished_bytes=keep_finished_bytes,
                              on_finished=self._released, tick_on_news_only=tick_on_news_only,
                              send_due_news=getattr(backend, "send_due_news", None),
                              news_due_at=getattr(backend, "news_due_at", None))
        self._admission = Admission(context, self.limits, max_plans=max_plans, max_active_runs=max_active_runs,
                                    remember_run_ids=remember_run_ids, remember_run_ids_bytes=remember_run_ids_bytes,
                                    carry_out=self._carry_out,
                                    make_run=self._make_run, accept=self._runner.add,
                                    robot_holders=self._robot_holders)
        # The read operations, answered from the runner's tables as a replay answers from its own.
        self.reads = PlanReads(self._runner, self._admission.ever_submitted)

    @property
    def scene(self) -> Scene | None:
        """The current scene step graphs are checked against (finished runs move it on)."""
        return self._admission.scene

    def set_scene(self, scene: Scene | dict | str) -> None:
        """Check step graphs against ``scene`` (a Scene, its dict, or a file path) from now on, e.g. once the cell
        reported a new one; Conflict while a step graph holds the robot (its end moves the scene on). The
        backend's own idea of the world is its own: a simulating backend is given the scene by its owner."""
        if not self._admission.replace_scene(scene_of(scene)):
            raise Conflict("set_scene: a step graph holds the robot; wait for it to end or cancel it first")

    @property
    def max_plans(self) -> int:
        return self._admission.max_plans

    @property
    def max_active_runs(self) -> int:
        return self._admission.max_active_runs

    @property
    def tick_period(self) -> float:
        return self._runner.tick_period

    # --- submit and validate ------------------------------------------------------

    def submit(self, source, run_id: str | None = None, dialect: str = "auto", *, hold_start_s: float = 0.0,
               blackboard: dict | None = None) -> dict:
        """Validate, compile and enqueue a plan, or carry out a meta op; never raises for bad input.

        ``source``: a dict, JSON text (str or bytes) or a ``pathlib.Path``. A str is never opened as a file
        (text from a network door could name any file): one that reads like a file name is refused with
        ``json_syntax`` saying so (and that ``pathlib.Path(...)`` reads a file).

        Returns ``{accepted, run_id, plan_id, verdict, issues, message, ...}``. A
        ``run_id`` seen before returns the same answer and runs nothing again.

        ``hold_start_s`` (0 to 1 s; ValueError beyond): an accepted plan does not start (no ``plan_started``,
        no tick) until ``release_start(plan_id)`` or until that long has passed, so that a door can send its
        answer first; the tick loop skips it meanwhile and never waits for it.

        ``blackboard``: entries (key -> JSON value) the plan's run starts its blackboard with, which a BT XML
        plan's ``{key}`` ports read (``compilers.blackboard``: each key a main-tree entry's name, the whole at
        most 1 MiB as JSON). Bad seeds refuse the submission (``invalid``), each issue at ``/blackboard/<key>``.
        """
        return self._admission.submit(source, run_id, dialect, hold_start_s, blackboard)

    def release_start(self, plan_id: str) -> None:
        """Let a plan submitted with ``hold_start_s`` start at the next tick; nothing if it is not held."""
        self._runner.release_start(plan_id)

    def validate_plan(self, source, dialect: str = "auto") -> dict:
        """Check a plan as ``submit`` would, running nothing: ``{valid, verdict, dialect, issues, stats}``.

        RTDL is checked against this executor's capability catalog, step graphs
        against its skill catalog and current scene (without one: ``invalid``,
        ``no_scene``, with every other issue listed beside it).
        """
        return self._admission.check(source, dialect)

    def _make_run(self, plan_id: str, plan: Plan, run_id: str | None, control_only: bool, world,
                  text_chars: int | None) -> PlanRun:
        kind = dialect_of(plan)
        compiled = kind.compile(plan, self._admission.context)
        run = PlanRun(plan_id, plan, compiled, run_id, control_only, world, self._bus, self._runner.wake_run,
                      max_result_bytes=self.max_result_bytes, max_plan_result_bytes=self.max_plan_result_bytes,
                      text_chars=text_chars, pause_timeout_s=self.pause_timeout_s)
        if plan.blackboard_seeds:
            run.blackboard.update(copied(plan.blackboard_seeds))  # the run's own: its ops may change what they hold
        run.set_up({"capabilities": self._routers[plan.dialect], "op_timeout_s": self.op_timeout_s,
                    "max_steps": self.max_steps})
        return run

    def _released(self, run: PlanRun, record: dict) -> None:
        self._admission.released(run, record)

    def _robot_holders(self) -> list[PlanRun]:
        return [run for run in self._runner.active_runs() if run.world is not None]

    def _carry_out(self, request: ControlRequest, run_id: str | None) -> dict:
        try:
            if request.op == "cancel_plan":
                result = self.cancel_plan(request.plan_id, wait_ms=request.wait_ms)
            elif request.op == "cancel_all":
                result = self.cancel_all(wait_ms=request.wait_ms)
            else:
                result = self.stop_plan_at(request.plan_id, request.target_op_id, when=request.when, source="builtin")
        except ControlError as exc:
            return {"accepted": False, "run_id": run_id, "plan_id": None, "verdict": "control",
                    "issues": [Issue("control_refused", "", str(exc)).as_dict()], "message": str(exc),
                    "control": request.as_dict()}
        return {"accepted": True, "run_id": run_id, "plan_id": None, "verdict": "control", "issues": [],
                "message": result["message"], "control": request.as_dict(), "result": result}

    # --- inspect -------------------------------------------------------------------

    def get_all_plans(self) -> dict:
        """In-flight plans (control-only plans are not listed)."""
        return self.reads.get_all_plans()

    def get_plan_status(self, plan_id: str | int, *, states=None, op_ids=None, summary: bool = False,
                        max_chars: int | None = None, with_args: bool = True) -> dict:
        """Live state of every op of an in-flight plan; NotFound for a plan never submitted, Conflict for one that
        finished.

        Each call lists its ``cap`` and ``args`` (args past 4 KiB of JSON as a marker; the whole op is
        ``get_op``'s answer); ``with_args=False`` leaves both out.

        The ops listed can be narrowed: ``states`` (a list of op states), ``op_ids`` (a list; ids not in the
        plan are named in ``unknown_op_ids``), ``summary=True`` (``counts`` of ops by state, and the running,
        paused, failed and timed-out ops only); ``max_chars`` (1,000 or more) cuts the ops list so the
        answer's compact JSON fits, with a ``truncated`` marker saying what to ask for next."""
        return self.reads.get_plan_status(plan_id, states=states, op_ids=op_ids, summary=summary,
                                          max_chars=max_chars, with_args=with_args)

    def get_plan_tree(self, plan_id: str) -> dict:
        """A plan's ops with their children, states, stop points and results: in flight or finished.

        The shape viewers draw from: ``{plan_id, description, dialect, root, running, paused, stepping (a step
        pending: resume_plan would drop it), cancelled, outcome, ops: [{op_id, kind, description, children, state,
        stop_point, result, detail, ...}]}``,
        plus ``transitions``, ``path`` and ``state`` for step graphs. ``outcome`` is None while running.
        """
        return self.reads.get_plan_tree(plan_id)

    def get_op(self, plan_id: str | int, op_id: str | int) -> dict:
        """One op of a plan in flight or kept, whole: ``{plan_id, running, op: {op_id, kind, description,
        children, state, cap, args, result, detail, started_at, ended_at, stop_point}}`` (``cap`` and
        ``args`` on calls; args never cut, where views show them past 4 KiB as a marker)."""
        return self.reads.get_op(plan_id, op_id)

    def get_finished_plans(self, limit: int = 50) -> dict:
        """The newest ``limit`` finished plans still kept, newest first: id, description, outcome, times."""
        return self.reads.get_finished_plans(limit)

    def get_cell_view(self, frame_width: int | None = None, frame_height: int | None = None) -> dict:
        """The simulated cell the backend moves (``PhysicsCell``), as a viewer draws it: its links, the current
        skill's target, joints and their speeds, its named places, whether frames can be rendered, and one frame
        (PNG, base64) when a frame size is given and they can (``motion.cell_view.CellView.view``), ``cell`` true;
        ``{cell: false, reason}`` when the backend simulates no cell."""
        if not is_cell(self.backend):
            return no_cell(self.backend)
        if self._cell_view is None:
            self._cell_view = CellView(self.backend)
        return self._cell_view.view(frame_width, frame_height)

    def behaviour_trees(self) -> dict:
        """plan_id -> py_trees root of each in-flight plan (not control-only ones), for tree viewers.

        Read only: ticking or stopping them is the executor's job.
        """
        trees = {}
        for run in self._runner.active_runs():
            tree = run.tree
            if tree is not None and not run.control_only:
                trees[run.plan_id] = tree.root
        return trees

    def get_plan_ir(self, plan_id: str | int) -> Plan:
        """The loaded plan (``bt_exec.compilers.Plan``) of a plan in flight, or ending now (its ``plan_complete`` not
        yet delivered), its op ids as its events name them: for a door that draws the plan in a format of its own
        (Groot2's XML). Read only. NotFound for a plan not in flight and for a plan of pure control (neither is
        listed by ``get_all_plans``)."""
        plan_id = checked_id(plan_id, "plan_id", "get_plan_ir")
        run = self._runner.live(plan_id)
        if run is None or run.control_only:
            raise NotFound(f"get_plan_ir: no plan {quote(plan_id)} in flight; call get_all_plans to list them")
        return run.plan

    def get_blackboard(self, plan_id: str | int) -> dict:
        """A copy of the blackboard of a plan in flight (key -> value, as its ports wrote them; empty for a plan that
        keeps none): for a door that shows it (Groot2). NotFound for a plan not in flight."""
        plan_id = checked_id(plan_id, "plan_id", "get_blackboard")
        run = self._runner.live(plan_id)
        if run is None:
            raise NotFound(f"get_blackboard: no plan {quote(plan_id)} in flight; call get_all_plans to list them")
        return dict(run.blackboard)

    def get_plan_result(self, plan_id: str | int, *, states=None, op_ids=None, summary: bool = False,
                        max_chars: int | None = None) -> dict:
        """The final record of a finished plan (states, results, timings); its ops narrowed as
        ``get_plan_status`` narrows them (``summary``: counts by state and the failed ops)."""
        return self.reads.get_plan_result(plan_id, states=states, op_ids=op_ids, summary=summary,
                                          max_chars=max_chars)

    # --- control -------------------------------------------------------------------

    def stop_plan_at(self, plan_id: str | int, op_id: str | int, when: str = "on_complete",
                     source: str = "api", action: str = "cancel") -> dict:
        """Arm a stop point: when execution reaches ``op_id`` the whole plan is cancelled (``action``
        cancel) or paused (``action`` pause: a pause point, which fires once; on_complete pauses after the
        op finished, before the next op starts).

        A StopGuard is placed above the op (an op already running goes on untouched and
        is checked when it completes). ``source``: the door that asks (api, http, mcp, ros, robonix,
        builtin), named by the ``stop_point`` events.
        """
        plan_id, op_id, when = self._stop_point_args(plan_id, op_id, when, source, "stop_plan_at")
        if action not in STOP_ACTIONS:
            raise BadArgument(f"stop_plan_at: invalid action {quote(action)} (expected cancel or pause)")
        run = self._active_run(plan_id, "stop_plan_at")
        if run is None:
            return {"success": True, "armed": False,
                    "message": f"plan {quote(plan_id)} is not running (already finished or cancelled); "
                               "no stop point needed."}
        record = self._op_record(run, op_id, "stop_plan_at")
        run.arm(op_id, when, in_tick=self._runner.in_tick(), source=source, action=action)
        shown_op = cut_text(op_id, QUOTE_CHARS)
        if action == "cancel":
            message = f"Stop point set: plan {quote(plan_id)} will be cancelled {when} op_id={shown_op}."
        else:
            message = (f"Pause point set: plan {quote(plan_id)} will pause {when} op_id={shown_op} (once; "
                       "resume_plan or step_plan goes on).")
        too_late = record.state != "pending" if when == "on_enter" else \
            record.state not in ("pending", "running", "paused")
        if too_late:
            message += f" Note: op {op_id} is already {record.state}, so this stop point will not fire."
        return {"success": True, "armed": True, "message": message}

    def disarm_stop_point(self, plan_id: str | int, op_id: str | int, when: str = "on_complete",
                          source: str = "api") -> dict:
        """Disarm a stop point armed with ``stop_plan_at`` (a pause point too): the plan goes on through ``op_id``.
        ``{success, disarmed, message}``; ``disarmed`` is false when none was armed there."""
        plan_id, op_id, when = self._stop_point_args(plan_id, op_id, when, source, "disarm_stop_point")
        run = self._active_run(plan_id, "disarm_stop_point")
        if run is None:
            return {"success": True, "disarmed": False,
                    "message": f"plan {quote(plan_id)} is not running (already finished or cancelled); "
                               "nothing to disarm."}
        self._op_record(run, op_id, "disarm_stop_point")
        shown = cut_text(op_id, QUOTE_CHARS)
        if not run.disarm(op_id, when, source=source):
            return {"success": True, "disarmed": False,
                    "message": f"plan {quote(plan_id)} has no stop point {when} op_id={shown}; nothing to disarm."}
        return {"success": True, "disarmed": True,
                "message": f"Stop point disarmed: plan {quote(plan_id)} goes on {when} op_id={shown}."}

    def pause_plan(self, plan_id: str | int, source: str = "api") -> dict:
        """Pause a plan: no op starts until ``resume_plan`` (an op about to be entered is held, ``pending``
        with ``held: true``). Ops already running go on to their end, or are paused too where their
        backend has the optional ``pause``/``resume`` pair; the message names them.
        ``{success, paused, message}``; ``paused`` is false when the plan was already paused."""
        plan_id, run = self._control_run(plan_id, source, "pause_plan")
        if run is None:
            return {"success": True, "paused": False,
                    "message": f"plan {quote(plan_id)} is not running (already finished or cancelled); "
                               "nothing to pause."}
        if not run.pause(source):
            return {"success": True, "paused": False,
                    "message": f"plan {quote(plan_id)} is already paused; resume_plan or step_plan goes on."}
        message = f"plan {quote(plan_id)} paused: no op starts until resume_plan (or step_plan)."
        calls = run.running_calls()
        if calls:
            named = [f"{cut_text(op_id, QUOTE_CHARS)} ({'paused too' if pausable else 'goes on to its end'})"
                     for op_id, pausable in calls[:_NAMED_RUNNING_OPS]]
            more = f" and {len(calls) - _NAMED_RUNNING_OPS} more" if len(calls) > _NAMED_RUNNING_OPS else ""
            message += f" Ops already running: {', '.join(named)}{more}."
        if self.pause_timeout_s is not None:
            message += f" Unless resumed within {self.pause_timeout_s:g} s it is cancelled."
        return {"success": True, "paused": True, "message": message}

    def resume_plan(self, plan_id: str | int, source: str = "api") -> dict:
        """Let a plan run on freely: a paused plan goes on from exactly where it held (held ops are entered,
        paused calls go on); a plan with a step pending (``step_plan`` answered, the next op not yet entered)
        drops it and does not pause behind that op. ``{success, resumed, message}``; ``resumed`` is false
        when the plan was neither paused nor stepping: nothing changed."""
        plan_id, run = self._control_run(plan_id, source, "resume_plan")
        if run is None:
            return {"success": True, "resumed": False,
                    "message": f"plan {quote(plan_id)} is not running (already finished or cancelled); "
                               "nothing to resume."}
        ended = run.resume(source)
        if ended is None:
            return {"success": True, "resumed": False,
                    "message": f"plan {quote(plan_id)} is not paused and no step is pending; nothing to resume."}
        if ended == "step":
            return {"success": True, "resumed": True,
                    "message": f"plan {quote(plan_id)} resumed: the pending step is dropped, so it runs on without "
                               "pausing behind its next op."}
        return {"success": True, "resumed": True, "message": f"plan {quote(plan_id)} resumed."}

    def step_plan(self, plan_id: str | int, source: str = "api") -> dict:
        """Resume until the next op is entered, then pause again (a plan not paused pauses behind the
        next op it enters). ``{success, message}``."""
        plan_id, run = self._control_run(plan_id, source, "step_plan")
        if run is None:
            return {"success": True,
                    "message": f"plan {quote(plan_id)} is not running (already finished or cancelled); "
                               "nothing to step."}
        was_paused = run.resume(source, step=True) == "pause"
        state = "resumed until" if was_paused else "not paused; it pauses behind"
        return {"success": True, "message": f"plan {quote(plan_id)} {state} the next op it enters, then pauses."}

    def _control_run(self, plan_id, source: str, caller: str) -> tuple[str, PlanRun | None]:
        plan_id = checked_id(plan_id, "plan_id", caller)
        if source not in STOP_POINT_SOURCES:
            raise BadArgument(f"{caller}: invalid source {quote(source)} (expected {', '.join(STOP_POINT_SOURCES)})")
        return plan_id, self._active_checked(plan_id, caller)

    @staticmethod
    def _stop_point_args(plan_id, op_id, when, source: str, caller: str) -> tuple[str, str, str]:
        op_id = checked_id(op_id, "op_id", caller)
        plan_id = checked_id(plan_id, "plan_id", caller)
        if when not in STOP_WHENS:
            raise BadArgument(f"{caller}: invalid when {quote(when)} (expected on_enter or on_complete)")
        if source not in STOP_POINT_SOURCES:
            raise BadArgument(f"{caller}: invalid source {quote(source)} (expected {', '.join(STOP_POINT_SOURCES)})")
        return plan_id, op_id, when

    @staticmethod
    def _op_record(run: PlanRun, op_id: str, caller: str):
        record = run.records.get(op_id)
        if record is None:
            raise NotFound(f"{caller}: plan {quote(run.plan_id)} has no op {quote(op_id)}; "
                           "call get_plan_status to see its op ids")
        return record

    def begin_cancel(self, plan_id: str | None, reason: str) -> "Cancellation":
        """Ask for a cancel without waiting: one plan, or (``plan_id`` None) every plan but control-only ones.

        The Cancellation says which plans it waits for, whether they all finished, and words the answer
        ``cancel_plan`` / ``cancel_all`` give.
        """
        if plan_id is None:
            return Cancellation(None, self.request_cancel_all(reason), self._runner.in_tick)
        run = self.request_cancel(plan_id, reason)
        return Cancellation(plan_id, [] if run is None else [run], self._runner.in_tick)

    def cancel_plan(self, plan_id: str | int, wait_ms: int = 5000) -> dict:
        """Cancel a plan; return once it finished or ``wait_ms`` passed, saying which. A wait over
        ``Limits.max_wait_ms`` (30,000 by default) waits that long, and the message says so."""
        waited = self._wait_of(wait_ms, "cancel_plan")
        cancellation = self.begin_cancel(checked_id(plan_id, "plan_id", "cancel_plan"), "cancel_plan")
        self._runner.await_runs(cancellation.runs, waited)
        return _said_capped(cancellation.answer(waited), wait_ms, waited)

    def cancel_all(self, wait_ms: int = 5000) -> dict:
        """Cancel every in-flight plan except control-only ones (``wait_ms`` as for ``cancel_plan``)."""
        waited = self._wait_of(wait_ms, "cancel_all")
        cancellation = self.begin_cancel(None, "cancel_all")
        self._runner.await_runs(cancellation.runs, waited)
        return _said_capped(cancellation.answer(waited), wait_ms, waited)

    def request_cancel(self, plan_id: str, reason: str) -> PlanRun | None:
        """Mark a plan for cancellation without waiting; None if it already finished."""
        run = self._active_run(plan_id, "cancel_plan")
        if run is not None:
            run.request_cancel(reason)
        return run

    def request_cancel_all(self, reason: str) -> list[PlanRun]:
        runs = [run for run in self._runner.active_runs() if not run.control_only]
        for run in runs:
            run.request_cancel(reason)
        return runs

    # --- ticking -------------------------------------------------------------------

    def tick_once(self) -> None:
        """Tick every in-flight plan once (from inside a tick, e.g. in a subscriber: nothing, it follows)."""
        self._runner.tick_once()

    def run_until_complete(self, plan_id: str | int, timeout: float | None = None) -> dict:
        """Tick (or wait for the tick loop) until the plan finished; return its final record."""
        plan_id = checked_id(plan_id, "plan_id", "run_until_complete")
        if self._runner.in_tick():
            raise Conflict("run_until_complete: cannot wait for a plan from inside a tick (an event subscriber)")
        run = self._runner.live(plan_id)
        if run is not None and not self._runner.run_until_done(run, timeout):
            raise Conflict(f"run_until_complete: plan {quote(plan_id)} still running after {timeout} s")
        return self.get_plan_result(plan_id)

    def wait_for_plan(self, plan_id: str | int, timeout_s: float = 30.0, *, states=None, op_ids=None,
                      summary: bool = False, max_chars: int | None = None) -> dict:
        """The plan's final record (narrowed as ``get_plan_result`` narrows it) once it finished, or
        ``{"plan_id", "finished": False, "message"}`` when ``timeout_s`` passed first: a normal answer, ask
        again. ``timeout_s`` from 0 to 60 (longer is waited 60 s, and the message says so). Unlike
        ``run_until_complete`` it never ticks: a plan moves on only while the tick loop runs (``start``)."""
        caller = "wait_for_plan"
        plan_id = checked_id(plan_id, "plan_id", caller)
        waited = checked_timeout(timeout_s, caller)
        view = checked_view(caller, states, op_ids, summary, max_chars)
        if self._runner.in_tick():  # the plan waited for could only finish once this tick ends
            raise Conflict(f"{caller}: cannot wait for a plan from inside a tick (an event subscriber)")
        self.reads.known(plan_id, caller)
        run = self._runner.live(plan_id)
        if run is not None and not run.done.wait(waited):  # waits only: the tick loop (or another thread) ticks
            return still_running(plan_id, waited, timeout_s, caller)
        return self.reads.plan_result(plan_id, view)

    def start(self) -> None:
        """Run the tick loop in a thread of its own (the ROS node and the web server drive it so)."""
        self._runner.start()

    def stop(self) -> None:
        """Stop the tick loop; plans stay in flight and can be ticked by hand."""
        self._runner.stop()

    def close(self, wait_ms: int = 5000) -> None:
        """Cancel every plan (control-only ones too), then stop the tick loop (``wait_ms``: 0 to 30,000)."""
        wait_ms = self._wait_of(wait_ms, "close")
        if self._runner.in_tick():
            raise Conflict("close: cannot close the executor from inside a tick (an event subscriber)")
        runs = self._runner.active_runs()
        for run in runs:
            run.request_cancel("executor closed")
        self._runner.await_runs(runs, wait_ms)
        self._runner.stop()
        for run in runs:
            self._runner.tick_run(run)

    # --- events --------------------------------------------------------------------

    def subscribe(self, callback: Callable[[dict], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event, in the ticking thread; returns an unsubscribe function."""
        return self._bus.subscribe(callback)

    def subscribe_batches(self, callback: Callable[[list[dict]], None]) -> Callable[[], None]:
        """Call ``callback(events)`` once per tick with that tick's events (cheaper for sinks such as
        ``JsonlJournal.write_batch``); returns an unsubscribe function."""
        return self._bus.subscribe_batches(callback)

    # --- helpers --------------------------------------------------------------------

    def _active_run(self, plan_id: str, caller: str) -> PlanRun | None:
        """The in-flight run; None for a plan that finished; NotFound for one never seen, BadArgument for no id."""
        return self._active_checked(checked_id(plan_id, "plan_id", caller), caller)

    def _active_checked(self, plan_id: str, caller: str) -> PlanRun | None:
        """``_active_run`` of an id already checked."""
        run = self._runner.active(plan_id)
        if run is None and not self._admission.ever_submitted(plan_id):
            raise NotFound(f"{caller}: no plan {quote(plan_id)} was ever submitted to this executor; "
                           "call get_all_plans to list running plans")
        return run

    def _wait_of(self, wait_ms: object, caller: str) -> int:
        """The milliseconds a cancel waits: ``wait_ms`` capped at ``Limits.max_wait_ms``; BadArgument for
        anything but a non-negative integer."""
        if type(wait_ms) is not int or not 0 <= wait_ms <= INT64_MAX:
            raise BadArgument(f"{caller}: wait_ms must be a non-negative integer (milliseconds, int64; at most "
                              f"{self.limits.max_wait_ms} are waited), got {number_shown(wait_ms)}")
        return min(wait_ms, self.limits.max_wait_ms)

    # --- feedback for the planner ----------------------------------------------------

    def get_plan_feedback(self, plan_id: str, max_output_chars: int = OUTPUT_CHARS) -> dict:
        """What a planner reads back about a plan, finished or in flight: ``{plan_id, running, outcome, error,
        cancel_reason, ops}``, ``ops`` holding each call that started and finished, ``{op_id, cap, success, output,
        error}``, in the order they finished (step graphs add ``path``); a call stopped before it started (an
        ``on_enter`` stop point) is left out, as are ops never reached. An output whose compact JSON is over
        ``max_output_chars`` (100 to 1,000,000) becomes ``{"truncated": true, "bytes": N, "preview": TEXT}``
        of about that size; an error is cut to it too. ``outcome`` is None while the plan runs."""
        return self.reads.get_plan_feedback(plan_id, max_output_chars)

    def get_plans_snapshot(self) -> dict:
        """The plans in flight as the next prompt shows them: ``get_all_plans``' entries, each with its ``ops``,
        ``{op_id, kind, cap?, state, stop_point?}`` (``cap`` on calls only, ``stop_point`` where one is armed)."""
        return self.reads.get_plans_snapshot()


class Cancellation:
    """A cancel asked for: which plans it waits for, a callback when they all finished, and its answer."""

    def __init__(self, plan_id: str | None, runs: list[PlanRun], in_tick: Callable[[], bool]):
        self.plan_id = plan_id  # None: cancel all
        self.runs = runs
        self._in_tick = in_tick

    @property
    def plan_ids(self) -> list[str]:
        return [run.plan_id for run in self.runs]

    @property
    def finished(self) -> bool:
        return all(run.done.is_set() for run in self.runs)

    def answer(self, wait_ms: int) -> dict:
        """What ``cancel_plan`` (or ``cancel_all``) answers once it waited ``wait_ms``."""
        finished = self.finished
        if self.plan_id is None:
            return {"count": len(self.runs), "plan_ids": self.plan_ids, "finished": finished,
                    "message": f"cancelled {len(self.runs)} plan(s)" +
                               ("" if finished else f"; some still tearing down after {wait_ms} ms")}
        if not self.runs:
            return {"plan_id": self.plan_id, "finished": True,
                    "message": f"plan {quote(self.plan_id)} already finished; nothing to cancel"}
        if finished:
            state = "finished cancelled"
        elif self._in_tick():
            state = "will be torn down right after the tick in progress"
        else:
            state = f"still tearing down after {wait_ms} ms"
        return {"plan_id": self.plan_id, "finished": finished, "message": f"plan {quote(self.plan_id)} {state}"}


def _said_capped(answer: dict, asked_ms: int, waited_ms: int) -> dict:
    if waited_ms < asked_ms:
        answer["message"] += f" (wait_ms capped at {waited_ms})"
    return answer
