"""A dry run: a plan run on the sim along each way it can go, to show every end it can reach before a robot moves.

Each path is a real run (on a SimBackend whose script gives each op its outcome, at once), all of them on one
Executor: a path's run, its tree and its sim are freed once its record was read, so memory is bounded by one
path's run plus the paths' summaries, whatever the number of paths:
- a tree: one path where every call succeeds, then one per (call, other outcome): the outcomes the capability
  catalog declares for its cap, or success and failure;
- a step graph: paths until every transition was taken at least once, each reaching the step of a transition
  not yet taken by the fewest steps, taking it, then going on by each step's usual outcome (success).
At most ``max_paths`` paths are run; the answer says how many more there would have been. Every path is bounded:
one still running after ``max_ticks`` ticks (a loop that never ends, as a KeepRunningUntilFailure whose child
never fails) is cancelled and ends ``tick_limit``.

In a simulated cell (``cell``: a function making one, such as ``PhysicsCell`` at full speed) each path of a step graph
runs in a cell of its own: the arm decides how each step it is to take as usual ends (an unreachable pose, a
collision, a grasp that finds nothing send the run elsewhere), and only the outcome a path is to take at its branch is
given without moving the arm; each path says where the tool ended and which steps the arm ended otherwise than usual,
and why (the call's error: the pose and IK residual, the colliding pair).
"""
from __future__ import annotations

import collections

from .compilers import Plan, load
from .compilers.catalog import builtin_name
from .errors import ConfigError, Conflict, Issue, PlanError
from .executor import Executor
from .sim import SimBackend

SUCCESS = "success"
# A call's outcomes where the capability catalog declares none.
PLAIN_OUTCOMES = (SUCCESS, "failure")
MAX_PATHS = 500
# Ticks a path may take before it is ended as a loop without end: far more than any plan within the limits takes
# with every call answered at once, unless it loops.
MAX_TICKS = 2000
TICK_LIMIT = "tick_limit"
# The dry run's tick rate: its calls answer at once, so a period only paces what polls each period (a reactive node,
# a loop), and a path's ticks cost what they compute.
TICK_RATE_HZ = 10_000.0
# The longest a path may run in a simulated cell (wall time, at full speed) before it is cancelled: ``time_limit``.
CELL_PATH_S = 300.0
TIME_LIMIT = "time_limit"


def dry_run(source, *, dialect: str = "auto", catalog=None, skill_catalog=None, scene=None, call_guard=None,
            max_steps: int = 1000, max_paths: int = MAX_PATHS, node_catalog=None, max_ticks: int = MAX_TICKS,
            blackboard: dict | None = None, cell=None) -> dict:
    """Run ``source`` on the sim along each path; ``{plan, paths: [{path, chose, outcome, failed_op, terminal?,
    terminal_reason?, steps?}], not_run}``. ``chose``: the op and outcome the path gave (None: every op its usual
    outcome); ``steps``: a step graph's steps in the order they ran. Raises PlanError when the plan is refused.

    ``catalog``, ``skill_catalog``, ``node_catalog``, ``scene``, ``call_guard`` and ``max_steps`` are the
    Executor's; a step graph needs its ``scene``. A path still running after ``max_ticks`` ticks is cancelled: its
    outcome is ``tick_limit``. ``blackboard``: the entries every path's run starts its blackboard with, as
    ``Executor.submit`` takes them.

    ``cell``: run a step graph's paths each in a simulated cell this function makes (a ``MoveItBackend`` such as
    ``PhysicsCell``; without ``scene``, the first cell's); each path then adds ``arm: {tool, decided: [{op_id,
    outcome, error}]}``, where the tool ended (m) and each call the arm ended otherwise than the path's usual
    outcome. A path still running after ``CELL_PATH_S`` is cancelled: its outcome is ``time_limit``."""
    plan = load(source, dialect)
    if not isinstance(plan, Plan):
        raise PlanError([Issue("control_request", "", "a control request, not a plan: a dry run has no paths to "
                                                      "explore in it")])
    options = {"catalog": catalog, "skill_catalog": skill_catalog, "node_catalog": node_catalog, "scene": scene,
               "call_guard": call_guard, "max_steps": max_steps}
    if cell is not None and plan.steps is None:
        raise ConfigError("a dry run in a simulated cell explores step graphs (Qwen3), whose skills the cell serves")
    cell_paths = None
    if cell is not None:
        cell_paths = _CellPaths(cell, {step: _usual(plan.steps, step) for step in plan.steps.steps})
    runner = _PathRunner(source, dialect, plan.numbered_by_loader, options, max_ticks, _outputs_of(plan), blackboard,
                         cell_paths)
    try:
        record = runner.run({})
        if plan.numbered_by_loader:  # the ids of a first run, which the paths' records are given in
            plan = plan.renumbered(int(record["root"]))
        paths = [_path(1, None, record)]
        if plan.steps is not None:
            not_run = _explore_graph(runner, plan, paths, max_paths)
        else:
            catalog = runner.executor.catalog
            choices = [(op.op_id, outcome) for op in plan.ops.values()
                       if op.kind == "do" and builtin_name(op.cap, op.provider) is None
                       for outcome in ((catalog.outcomes_of(op.cap) if catalog is not None else None) or PLAIN_OUTCOMES)
                       if outcome != SUCCESS]
            for op_id, outcome in choices[:max_paths - 1]:
                record = runner.run({op_id: [outcome]})
                paths.append(_path(len(paths) + 1, {"op_id": op_id, "outcome": outcome}, record))
            not_run = max(len(choices) - (max_paths - 1), 0)
    finally:
        runner.close()
    return {"plan": record["description"], "paths": paths, "not_run": not_run}


def _explore_graph(runner: "_PathRunner", plan, paths: list, max_paths: int) -> int:
    """Add paths until every transition was taken or ``max_paths`` ran; answer how many transitions none took."""
    graph = plan.steps
    taken = set()
    _note_taken(paths[0], taken)
    edges = [(step, outcome) for step, targets in graph.transitions.items() for outcome in targets]
    tried = set()
    for edge in edges:
        if len(paths) >= max_paths:
            break
        if edge in taken or edge in tried:
            continue
        tried.add(edge)
        visits = _visits_through(graph, edge)
        if visits is None:  # no step leads there: no run can take it
            continue
        script: dict[str, list] = collections.defaultdict(list)
        for step, outcome in visits:
            script[step].append(outcome)
        for step, outcomes in script.items():
            outcomes.append(_usual(graph, step))  # after the planned visits, the usual outcome for good
        record = runner.run(dict(script))
        path = _path(len(paths) + 1, {"op_id": edge[0], "outcome": edge[1]}, record)
        paths.append(path)
        _note_taken(path, taken)
    return sum(edge not in taken for edge in edges)


def _visits_through(graph, edge: tuple[str, str]) -> list[tuple[str, str]] | None:
    """(step, outcome) visits from the entry to ``edge``'s step by the fewest steps, then ``edge``, then each
    step's usual outcome until a terminal (at most one visit per step past ``edge``: a loop ends it)."""
    target, outcome = edge
    came_from: dict[str, tuple[str, str] | None] = {graph.entry: None}
    queue = collections.deque([graph.entry])
    while queue and target not in came_from:
        step = queue.popleft()
        for event, following in graph.successors(step):
            if following in graph.steps and following not in came_from:
                came_from[following] = (step, event)
                queue.append(following)
    if target not in came_from:
        return None
    visits = []
    step = target
    while came_from[step] is not None:
        visits.append(came_from[step])
        step = came_from[step][0]
    visits.reverse()
    visits.append(edge)
    step = graph.transitions[target][outcome]
    seen = set()
    while step in graph.steps and step not in seen:
        seen.add(step)
        usual = _usual(graph, step)
        visits.append((step, usual))
        step = graph.transitions.get(step, {}).get(usual)
    return visits


def _usual(graph, step: str) -> str:
    targets = graph.transitions.get(step, {})
    return SUCCESS if SUCCESS in targets or not targets else next(iter(targets))


def _note_taken(path: dict, taken: set) -> None:
    taken.update((entry["step"], entry["outcome"]) for entry in path.get("trace", ()))


class _PathRunner:
    """Runs a plan's paths one after another on one executor (no events, one finished record kept, no answer
    remembered), each from the scene the dry run was given and with the op ids of a first run."""

    def __init__(self, source, dialect: str, numbered: bool, options: dict, max_ticks: int,
                 outputs: dict[str, dict], blackboard: dict | None = None, cell_paths: _CellPaths | None = None):
        """``numbered``: whether the plan's loader numbered its ops (an executor numbers them on from its counter);
        ``max_ticks``: the most ticks a path may take; ``outputs``: the output each op's calls answer, by op id (of
        the plan as loaded); ``blackboard``: the seeds of each path's run; ``cell_paths``: the simulated cells the
        paths run in (None: the sim)."""
        self.source = source
        self.blackboard = blackboard
        self.max_ticks = max_ticks
        self.outputs = outputs
        self.dialect = dialect
        self.numbered = numbered
        self.backend = _PathBackend() if cell_paths is None else cell_paths
        self.executor = Executor(backend=self.backend, keep_finished=1, remember_run_ids=0, tick_rate_hz=TICK_RATE_HZ,
                                 **{key: value for key, value in options.items() if value is not None})
        self.scene = self.executor.scene
        self.first_root: int | None = None
        self.runs = 0

    def run(self, outcomes: dict) -> dict:
        """One path whose sim gives ``outcomes[op_id]`` (successive calls' outcomes, the last repeating) and success
        elsewhere, at once: the plan's final record, its op ids those of a first run."""
        executor = self.executor
        self.runs += 1
        if self.runs > 1 and self.scene is not None:
            executor.set_scene(self.scene)  # the path before moved it on
        # A run id of its own: the plan's own (a step graph's envelope names one) would answer the first path again.
        answer = executor.submit(self.source, run_id=f"dry run path {self.runs}", dialect=self.dialect,
                                 blackboard=self.blackboard)
        if not answer["accepted"]:
            raise PlanError([Issue(**issue) for issue in answer["issues"]])
        offset = 0
        if self.numbered:  # numbered on from the executor's counter: this run's ids are the first run's, moved
            root = int(answer["root_op_id"])
            if self.first_root is None:
                self.first_root = root
            offset = root - self.first_root
        script = {"default": {"outcome": SUCCESS, "duration_s": 0},
                  "ops": {_moved(op_id, offset): {"outcome": outcomes.get(op_id, SUCCESS), "duration_s": 0,
                                                  **({"output": self.outputs[op_id]} if op_id in self.outputs else {})}
                          for op_id in outcomes.keys() | self.outputs.keys()}}
        if isinstance(self.backend, _CellPaths):
            self.backend.begin({_moved(op_id, offset): outcome for op_id, outcome in outcomes.items()})
            record = self._until_complete_in_cell(answer["plan_id"])
            record["arm"] = self.backend.report()
        else:
            self.backend.sim = SimBackend.in_scene(script, executor.skill_catalog, self.scene)
            record = self._until_complete(answer["plan_id"])
            self.backend.sim = None
        if offset and record["failed_op"] is not None:
            record["failed_op"] = {**record["failed_op"], "op_id": _moved(record["failed_op"]["op_id"], -offset)}
        return record

    def _until_complete(self, plan_id: str) -> dict:
        """The plan's final record once it ended, or once cancelled after ``max_ticks`` ticks (outcome
        ``tick_limit``). Each round ticks once and waits at most a period for news (a timer's, a call's)."""
        executor = self.executor
        for _ in range(self.max_ticks):
            try:
                return executor.run_until_complete(plan_id, timeout=executor.tick_period)
            except Conflict:  # still running
                continue
        executor.begin_cancel(plan_id, f"dry run: still running after {self.max_ticks} ticks")
        record = executor.run_until_complete(plan_id)
        return {**record, "outcome": TICK_LIMIT}

    def _until_complete_in_cell(self, plan_id: str) -> dict:
        """The plan's final record once it ended, or once cancelled after ``CELL_PATH_S`` (outcome
        ``time_limit``): the cell's calls push their ends, the ticks wait for them."""
        executor = self.executor
        try:
            return executor.run_until_complete(plan_id, timeout=CELL_PATH_S)
        except Conflict:
            executor.begin_cancel(plan_id, f"dry run: still running after {CELL_PATH_S:g} s")
            return {**executor.run_until_complete(plan_id), "outcome": TIME_LIMIT}

    def close(self) -> None:
        self.executor.close()
        if isinstance(self.backend, _CellPaths):
            self.backend.end()


class _PathBackend:
    """The dry run's backend: each path's SimBackend in turn, made for that path."""

    sim: SimBackend | None = None

    def start(self, call):
        return self.sim.start(call)

    def status(self, run_id: str):
        return self.sim.status(run_id)

    def cancel(self, run_id: str) -> None:
        self.sim.cancel(run_id)

    def state(self) -> dict:
        return self.sim.state()


class _CellPaths:
    """A dry run's backend in simulated cells: each path's cell in turn, made as the path begins (the first one
    made at once: its scene is the dry run's when none is given). A call the path is to end with another outcome
    than its step's usual one is answered so at once, the arm not moved; every other call runs on the arm."""

    def __init__(self, make_cell, usual: dict[str, str]):
        """``make_cell``: makes a fresh cell; ``usual``: each step's usual outcome, by op id."""
        self.make_cell = make_cell
        self.usual = usual
        self.cell = make_cell()
        self.scene = self.cell.scene
        self._fresh = True  # the cell has run no path yet
        self._given: dict[str, list] = {}
        self._visits: collections.Counter = collections.Counter()
        self._ops: dict[str, str] = {}  # run id -> op id, of the calls on the arm
        self._decided: list[dict] = []

    def begin(self, given: dict[str, list]) -> None:
        """A new path: a fresh cell, ``given[op_id]`` the outcomes of that op's successive calls (the last
        repeating)."""
        if not self._fresh:
            self.end()
            self.cell = self.make_cell()
        self._fresh = False
        self._given = given
        self._visits.clear()
        self._ops.clear()
        self._decided = []

    def start(self, call):
        outcomes = self._given.get(call.op_id)
        if outcomes:
            visit = self._visits[call.op_id]
            self._visits[call.op_id] += 1
            outcome = outcomes[min(visit, len(outcomes) - 1)]
            if outcome != self.usual.get(call.op_id):
                return self.cell.answer_at_once(call, outcome, "dry run: the path's outcome, the arm not moved")
        started = self.cell.start(call)
        if isinstance(started, str):
            self._ops[started] = call.op_id
        else:
            self._note(call.op_id, started)
        return started

    def status(self, run_id: str):
        status = self.cell.status(run_id)
        if status.state not in ("RUNNING", "PENDING"):
            self._note(self._ops.pop(run_id, None), status)
        return status

    def cancel(self, run_id: str) -> None:
        self.cell.cancel(run_id)

    def watch_call(self, run_id: str, news) -> None:
        self.cell.watch_call(run_id, news)

    def report(self) -> dict:
        """Where the tool ended (m, the world frame), and the calls the arm ended otherwise than usual."""
        return {"tool": [round(value, 4) for value in self.cell.tool_position()], "decided": self._decided}

    def end(self) -> None:
        """Let the last cell's skill worker end."""
        self.cell.wait_idle()

    def _note(self, op_id: str | None, status) -> None:
        if op_id is not None and status.event != self.usual.get(op_id):
            self._decided.append({"op_id": op_id, "outcome": status.event, "error": status.error})


def _outputs_of(plan: Plan) -> dict[str, dict]:
    """What the calls of ops that read or write the blackboard (a BT.CPP leaf's {key} ports) answer: a value for
    each such port, so that what one call writes another reads on every path."""
    return {op.op_id: {port: f"<{port} of op {op.op_id}>" for port in {**(op.reads or {}), **(op.writes or {})}}
            for op in plan.ops.values() if op.kind == "do" and (op.reads or op.writes)}


def _moved(op_id: str, offset: int) -> str:
    return str(int(op_id) + offset) if offset else op_id


def _path(number: int, chose: dict | None, record: dict) -> dict:
    path = {"path": number, "chose": chose, "outcome": record["outcome"], "failed_op": record["failed_op"]}
    if "arm" in record:
        path["arm"] = record["arm"]
    if "terminal" in record:
        path.update(terminal=record["terminal"], terminal_reason=record["terminal_reason"],
                    steps=[entry["step"] for entry in record["trace"]],
                    trace=[{"step": entry["step"], "outcome": entry["outcome"]} for entry in record["trace"]])
    return path
