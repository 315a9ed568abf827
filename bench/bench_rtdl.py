"""bt_exec vs raw py_trees on RTDL plans: tick, run, compile, memory and growth, each against raw py_trees.

Run from the repository root::

    python bench/bench_rtdl.py            # full run (about 1 minute on 2 cores)
    python bench/bench_rtdl.py --quick    # smoke run for CI (about 25 s)

Ratio = ours / raw py_trees measured in the same run; lower is better. "ops" counts every node of
the plan, the root included. The raw tree of a plan is the same shape in plain py_trees
behaviours, one per op: ``Sequence(memory=True)``, ``Parallel(SuccessOnAll)``,
``behaviours.Success`` for a do op and ``behaviours.Running`` for the long-running one. Raw trees
are always ticked with ``root.tick_once()``: py_trees' ``BehaviourTree.tick()`` also walks the
whole tree after every tick, which is not the cost of ticking it.

Figures:

1. Real tick. A 1000-op plan (flat: a root sequence of do ops; nested: a sequence of 10
   parallels of 10 sequences of do ops) with one do op made long-running by a SimBackend script
   (``{"ops": {"<op id>": {"duration_s": 3600}}}``) and a stop point armed (``stop_plan_at``,
   on_enter) on the last do op, which is never reached; submitted to an ``Executor`` and ticked
   until steady (that op running). One ``tick_once()`` of our compiled tree's root, taken from
   ``ex.behaviour_trees()[plan_id]`` and ticked directly (the guard of the armed stop point is in
   the tree; the running call's news comes from the runner's poll, so the tick asks no backend), vs one
   ``root.tick_once()`` of the raw tree, ticked to the same steady state.
2. Idle tick. On the same executor: one ``Executor.tick_once()`` when nothing changed (the
   executor skips the py_trees tick), vs the same raw ``root.tick_once()``. Gated on the flat
   1000-op plan; also shown (info) for flat plans of 100 and 10,000 ops: the idle tick follows
   the running calls, not the tree size. Figures 1 and 2 share their raw samples: in each
   repeat the idle tick, the real tick and the raw tick are timed in turn.
3. 2000 instant ops, submit -> plan_complete: ``ex.submit(text)`` + ``ex.run_until_complete``
   on a fresh ``Executor(backend=SimBackend())`` (made untimed; the sim answers every call at
   once) vs building the raw tree (a sequence of 2000 ``Success``) + ``root.tick_once()`` until
   SUCCESS. 3b: the same with a ``JsonlJournal`` to a temporary file subscribed
   (``ex.subscribe_batches(journal.write_batch)``: one call per tick), timed until ``journal.close()``
   returned, every line written (the detail line gives the close's own median); the check that every
   event was written is not timed. Targets (reported, not gated): 1.5 for 3, 2.0 for 3b.
4. Load + validate + compile a 10,000-op nested plan: ``bt_exec.load(text)`` +
   ``bt_exec.validate(plan)`` + ``bt_exec.compile_plan(plan)`` vs building the raw tree of the
   same shape, for the nested-tree (envelope) input (4) and the wire-arena input of the same plan
   (4b). 4c: the envelope input validated against a ``CapabilityCatalog`` holding the sim cap
   with an args schema (every op's args checked), total vs the same raw build. The four sides
   are timed in turn in each repeat.
5. Memory per op (tracemalloc, 10,000-op nested plan): bytes allocated by ``compile_plan(plan)``
   and still retained by its result, the Plan excluded (loaded before tracing), vs bytes
   retained by the raw tree of the same shape. 5b (info): the same with the Plan included (load
   + validate + compile traced; Plan and compiled tree kept).
6. Growth: per-op time of load + validate + compile (envelope input, nested shape; loaded with
   ``Limits(max_ops=50_000)``) at 50,000 ops divided by the same at 1,000 ops; the raw column has
   raw py_trees' own build growth. The bench leaves the cyclic GC as users get it.
7. Control, against arming a stop point (the raw column: ``stop_plan_at(plan_id, op, "on_enter")`` on an
   op not yet reached, the guard already placed) on the steady flat 1000-op plan of figure 1 (its long
   op running on a SimBackend, which can pause calls): ``pause_plan`` + ``resume_plan`` (7), and
   arming a pause point on the same op (``action="pause"``, 7b). No tick runs between calls: each
   measures what the caller's thread pays, as the stop point's arm does.
8. An idle tick's cost against the number of plans waiting: 10, 1,000 and 10,000 plans (one executor
   each, ``max_plans`` raised), each plan one do op whose SimBackend call lasts an hour, every call
   started; one ``Executor.tick_once()`` when nothing changed, the three executors timed in turn in
   each repeat. The ratio is against the 10-plan executor (the raw column holds its time, not raw
   py_trees'): a tick that costs what waiting plans do grows with them; one that only does work
   for plans with news stays flat. Gated for 1,000 (8) and 10,000 plans (8b).
9. 10,000 plans admitted at once, each waiting: in a child process of its own (spawned, so that its memory is
   this figure's alone), one ``Executor(max_plans=10_000)`` on a SimBackend whose clock the figure steps is
   given 10,000 one-op plans (each do op's call lasting an hour; the last plan's a minute); every one must be
   accepted and its call started. Then one idle ``tick_once()`` is timed (the median of a few), the tick loop
   is started, the sim's clock is moved a minute on, and the last plan must be seen to finish (its call's end
   pushed, its plan ticked to plan_complete) while the others still wait. The figure is the child's peak
   resident memory (``VmHWM`` of /proc/self/status, else ``ru_maxrss``), gated at 2 GB (10^9 bytes); the
   detail line gives the memory before the plans, per plan, the submit time and the idle tick.

Method: each figure is measured ``--repeats`` times (the ticks twice as often); within a repeat
ours and raw run one after the other, the order rotating from repeat to repeat, each sample
after ``gc.collect()`` (GC stays enabled). Short calls are looped so that each sample lasts
about 20 ms (the 1,000-op side of the growth figure about 200 ms). The table (the one of
``benchlib``, as every bench script prints) shows the median time of each side and the median
of the per-repeat ratios (``--json`` also has the minima). A gated row FAILs when its ratio
(growth: its value) exceeds its bar; the script then exits 1.
"""
from __future__ import annotations

import gc
import json
import multiprocessing
import resource
import pathlib
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import py_trees
from py_trees.common import ParallelPolicy, Status

from benchlib import Figure, fmt_time, fmt_value, parse_args, report
import bt_exec

# figure -> bar on the ratio ours / raw (growth: on the value, the per-op ratio 50k / 1k)
BARS = {"real tick": 1.0, "idle tick": 0.3, "instant": 2.0, "instant, journal": 2.5, "compile": 2.5,
        "compile, catalog": 3.5, "memory": 1.5, "growth": 1.2, "control": 1.5, "waiting plans": 1.5}
# figure -> where we want the ratio to be: reported, not gated
TARGETS = {"instant": 1.5, "instant, journal": 2.0}
WAITING_PLANS = (10, 1000, 10_000)
ADMITTED_AT_ONCE = 10_000
RSS_BAR_GB = 2.0

SIM_CAP = "sim_robot.move_step"
# The sim cap's args as the catalog figure checks them (every op of the bench plans matches).
SIM_CAP_CATALOG = {SIM_CAP: {"async": True, "description": "move one step",
                             "args_schema": {"type": "object", "required": ["step"],
                                             "properties": {"step": {"type": "integer", "minimum": 1}},
                                             "additionalProperties": False}}}
SAMPLE_S = 0.02
GROWTH_SIZES = (1000, 50_000)
# The small size is looped for longer than SAMPLE_S: one 1k-op compile is too short to be a stable per-op baseline.
GROWTH_SMALL_SAMPLE_S = 0.2

# --- plan shapes --------------------------------------------------------------------
# A spec is "do", "long" (the one long-running do op), or ("sequence" | "parallel", [children]).


def flat(n_ops: int, long_op: bool = True) -> tuple:
    """A root sequence of n_ops - 1 do ops; the middle one long-running if ``long_op``."""
    leaves = ["do"] * (n_ops - 1)
    if long_op:
        leaves[len(leaves) // 2] = "long"
    return ("sequence", leaves)


def nested(n_ops: int, long_op: bool = True, width: int = 10) -> tuple:
    """Root sequence of ``width`` parallels of ``width`` sequences of do ops; n_ops in all."""
    n_do = n_ops - 1 - width - width * width
    per, extra = divmod(n_do, width * width)
    branches = [["do"] * (per + (i < extra)) for i in range(width * width)]
    if long_op:
        middle = branches[width * width // 2 + width // 2]
        middle[len(middle) // 2] = "long"
    return ("sequence", [("parallel", [("sequence", branches[p * width + s]) for s in range(width)])
                         for p in range(width)])


def preorder(spec):
    stack = [spec]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, tuple):
            stack.extend(reversed(node[1]))


def count_ops(spec) -> int:
    return sum(1 for _ in preorder(spec))


def op_ids(spec, leaf: str) -> list[str]:
    """The op ids a fresh executor gives the leaves ``leaf`` (tree plans are numbered 1, 2, ... in pre-order)."""
    return [str(i) for i, node in enumerate(preorder(spec), 1) if node == leaf]


def to_envelope(spec) -> str:
    counter = iter(range(1, 1 << 30))

    def node(s):
        i = next(counter)
        if isinstance(s, tuple):
            return {"op": s[0], "op_id": 0, "description": f"{s[0]} {i}", "children": [node(c) for c in s[1]]}
        return {"op": "do", "op_id": 0, "description": f"step {i}", "cap": SIM_CAP, "args": {"step": i}}

    return json.dumps({"content": "benchmark plan", "rtdl_description": "benchmark", "rtdl": node(spec),
                       "task_update": None})


def to_arena(spec) -> str:
    nodes = []

    def node(s) -> int:
        index = len(nodes)
        nodes.append(None)
        op_id = str(index + 1)
        if isinstance(s, tuple):
            children = [node(c) for c in s[1]]
            nodes[index] = {"node_kind": 0 if s[0] == "sequence" else 1, "children": children, "op_id": op_id,
                            "description": f"{s[0]} {op_id}"}
        else:
            nodes[index] = {"node_kind": 2, "children": [], "op_id": op_id, "description": f"step {op_id}",
                            "call": {"call_id": f"1:{index}", "provider_id": "sim_robot",
                                     "contract_id": "robonix/sim_robot/move_step",
                                     "args_json": json.dumps({"step": index + 1})}}
        return index

    node(spec)
    return json.dumps({"plan_id": "1", "session_id": "bench", "round": 1, "root_index": 0, "nodes": nodes})


def to_raw(spec) -> py_trees.behaviour.Behaviour:
    """The same shape as plain py_trees behaviours, one per op."""
    counter = iter(range(1, 1 << 30))

    def node(s):
        name = f"op{next(counter)}"
        if s == "do":
            return py_trees.behaviours.Success(name)
        if s == "long":
            return py_trees.behaviours.Running(name)
        if s[0] == "sequence":
            composite = py_trees.composites.Sequence(name, memory=True)
        else:
            composite = py_trees.composites.Parallel(name, policy=ParallelPolicy.SuccessOnAll())
        composite.add_children([node(c) for c in s[1]])
        return composite

    return node(spec)


# --- measuring ----------------------------------------------------------------------

@dataclass
class Side:
    """One side of a comparison. A sample times ``loops`` calls of ``run`` after ``gc.collect()``;
    with ``prepare``, ``run`` gets what it made (made untimed), and ``finish`` gets it back afterwards
    (untimed)."""
    run: Callable
    loops: int = 1
    prepare: Callable | None = None
    finish: Callable | None = None

    def sample(self) -> float:
        """Seconds per call."""
        made = self.prepare() if self.prepare else None
        gc.collect()
        start = time.perf_counter()
        if self.prepare:
            for _ in range(self.loops):
                self.run(made)
        else:
            for _ in range(self.loops):
                self.run()
        seconds = (time.perf_counter() - start) / self.loops
        if self.finish:
            self.finish(made)
        return seconds


def loops_for(fn: Callable, sample_s: float = SAMPLE_S) -> int:
    """How many calls of ``fn`` make a sample of about ``sample_s`` seconds."""
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < sample_s / 10:
        fn()
        calls += 1
    return max(1, round(sample_s * calls / (time.perf_counter() - start)))


def interleave(repeats: int, sides: dict[str, Side]) -> dict[str, list[float]]:
    """Each side sampled once per repeat, in turn; the order rotates each repeat so that no side always goes first."""
    names = list(sides)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(sides[name].sample())
    return times


def paired(times: dict[str, list[float]], ours: str, raw: str = "raw") -> dict:
    """Medians and minima of two sides, and the median of their per-repeat ratios."""
    return {"ours": statistics.median(times[ours]), "ours_min": min(times[ours]),
            "raw": statistics.median(times[raw]), "raw_min": min(times[raw]),
            "ratio": statistics.median(o / r for o, r in zip(times[ours], times[raw]))}


def retained_bytes(build: Callable) -> int:
    """Bytes allocated by ``build()`` and still held (by what it returns) once garbage is collected."""
    gc.collect()
    tracemalloc.start()
    try:
        kept = build()
        gc.collect()
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    return size


# --- the figures --------------------------------------------------------------------

def ticks(spec, repeats: int) -> dict:
    """Figures 1 and 2 on one plan: {"real": paired, "idle": paired}."""
    long_id, = op_ids(spec, "long")
    stop_id = op_ids(spec, "do")[-1]
    ex = bt_exec.Executor(backend=bt_exec.SimBackend({"ops": {long_id: {"duration_s": 3600}}}))
    answer = ex.submit(to_envelope(spec))
    assert answer["accepted"], answer["message"]
    plan_id = answer["plan_id"]
    assert ex.stop_plan_at(plan_id, stop_id, "on_enter")["armed"]
    for _ in range(3):
        ex.tick_once()
    assert_steady(ex, plan_id, long_id)
    ours = ex.behaviour_trees()[plan_id]

    raw = to_raw(spec)
    for _ in range(3):
        raw.tick_once()
    assert raw.status == Status.RUNNING
    assert [b.name for b in raw.iterate() if b.status == Status.RUNNING and not b.children] == [f"op{long_id}"], \
        "raw tree not steady"

    sides = {"idle": Side(ex.tick_once, loops_for(ex.tick_once)),
             "real": Side(ours.tick_once, loops_for(ours.tick_once)),
             "raw": Side(raw.tick_once, loops_for(raw.tick_once))}
    times = interleave(repeats, sides)
    assert_steady(ex, plan_id, long_id)  # the stop point never fired, the long op still runs
    ex.close(wait_ms=0)
    return {"real": paired(times, "real"), "idle": paired(times, "idle")}


def waiting_plans(repeats: int) -> dict[str, list[float]]:
    """Figure 8: an idle tick with each count of waiting plans; {count: seconds per tick, one per repeat}."""
    executors = {}
    for count in WAITING_PLANS:
        ex = bt_exec.Executor(backend=bt_exec.SimBackend({"default": {"duration_s": 3600}}), max_plans=count)
        plan = to_envelope(("sequence", ["do"]))
        for _ in range(count):
            answer = ex.submit(plan)
            assert answer["accepted"], answer["message"]
        ex.tick_once()
        ex.tick_once()
        assert ex.backend.calls_in_flight == count, "not every plan waits on its call"
        executors[str(count)] = ex
    times = interleave(repeats, {name: Side(ex.tick_once, loops_for(ex.tick_once)) for name, ex in executors.items()})
    for ex in executors.values():
        assert ex.backend.calls_in_flight == ex.get_all_plans()["count"], "a waiting plan moved"
        ex.close(wait_ms=0)
    return times


def admitted_at_once(count: int) -> dict:
    """Figure 9, measured in a spawned child process: what ``_admitted_at_once`` returns."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_admitted_at_once, (count,))


def _admitted_at_once(count: int) -> dict:
    """``count`` one-op plans admitted at once, each waiting on its call; the last one's call ends and the tick
    loop sees it. {peak_bytes, before_bytes, waiting_bytes, submit_s, idle_tick_s, seen_s}"""
    minutes = [0.0]
    last_op = str(2 * count)  # each plan is a sequence (op 2k - 1) of one do op (op 2k)
    script = {"default": {"duration_s": 3600}, "ops": {last_op: {"duration_s": 60}}}
    ex = bt_exec.Executor(backend=bt_exec.SimBackend(script, clock=lambda: minutes[0]), max_plans=count)
    plan = to_envelope(("sequence", ["do"]))
    gc.collect()
    before = _memory_bytes("VmRSS")
    start = time.perf_counter()
    answers = [ex.submit(plan) for _ in range(count)]
    submit_s = time.perf_counter() - start
    assert all(answer["accepted"] for answer in answers), next(a["message"] for a in answers if not a["accepted"])
    ex.tick_once()
    assert ex.backend.calls_in_flight == count, "not every plan waits on its call"
    gc.collect()
    waiting = _memory_bytes("VmRSS")
    idle = []
    for _ in range(9):
        start = time.perf_counter()
        ex.tick_once()
        idle.append(time.perf_counter() - start)
    last_plan = answers[-1]["plan_id"]
    ex.start()
    try:
        start = time.perf_counter()
        minutes[0] = 60.0  # the last plan's call ends; the others have an hour to go
        record = ex.wait_for_plan(last_plan, timeout_s=30)
        seen_s = time.perf_counter() - start
        assert record.get("outcome") == "succeeded", record
        assert ex.backend.calls_in_flight == count - 1 and ex.get_all_plans()["count"] == count - 1, \
            "another plan moved"
    finally:
        ex.stop()
    return {"peak_bytes": _memory_bytes("VmHWM"), "before_bytes": before, "waiting_bytes": waiting,
            "submit_s": submit_s, "idle_tick_s": statistics.median(idle), "seen_s": seen_s}


def _memory_bytes(field: str) -> int:
    """This process's resident memory now (``VmRSS``) or at its peak (``VmHWM``), from /proc/self/status; where
    there is none, the peak that ``getrusage`` gives (kilobytes on Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def control(spec, repeats: int) -> dict[str, list[float]]:
    """Figure 7: pause + resume, and arming a pause point, against arming a stop point, on one steady plan."""
    long_id, = op_ids(spec, "long")
    target = op_ids(spec, "do")[-1]
    ex = bt_exec.Executor(backend=bt_exec.SimBackend({"ops": {long_id: {"duration_s": 3600}}}))
    plan_id = ex.submit(to_envelope(spec))["plan_id"]
    for _ in range(3):
        ex.tick_once()
    assert_steady(ex, plan_id, long_id)
    ex.stop_plan_at(plan_id, target, "on_enter")  # the guard is placed once; the arms timed below find it

    def arm_stop():
        ex.stop_plan_at(plan_id, target, "on_enter")

    def arm_pause():
        ex.stop_plan_at(plan_id, target, "on_enter", action="pause")

    def pause_and_resume():
        ex.pause_plan(plan_id)
        ex.resume_plan(plan_id)

    times = interleave(repeats, {"raw": Side(arm_stop, loops_for(arm_stop)),
                                 "pause": Side(pause_and_resume, loops_for(pause_and_resume)),
                                 "pause point": Side(arm_pause, loops_for(arm_pause))})
    ex.tick_once()
    assert_steady(ex, plan_id, long_id)  # neither point fired, nothing stays paused: the long op still runs
    ex.close(wait_ms=0)
    return times


def assert_steady(ex: bt_exec.Executor, plan_id: str, long_id: str) -> None:
    ops = ex.get_plan_status(plan_id)["ops"]
    running = [op["op_id"] for op in ops if op["kind"] == "do" and op["state"] == "running"]
    assert running == [long_id], f"not steady: running do ops {running}"


def instant_ops(n_do: int, repeats: int, journal_close_s: list[float]) -> dict[str, list[float]]:
    """Figure 3 and 3b: submit -> plan_complete without and with a journal (closed: every line written), and
    the raw build + tick. ``journal_close_s`` gets how long each journal's close took (within 3b's time)."""
    spec = flat(n_do + 1, long_op=False)
    text = to_envelope(spec)
    journals = iter(range(1 << 30))

    def run_plan(made):
        ex, journal = made
        answer = ex.submit(text)
        assert ex.run_until_complete(answer["plan_id"])["outcome"] == "succeeded"
        if journal is not None:  # every line written before the clock stops
            closing = time.perf_counter()
            journal.close()
            journal_close_s.append(time.perf_counter() - closing)

    def raw():
        root = to_raw(spec)
        while root.status != Status.SUCCESS:
            root.tick_once()

    with tempfile.TemporaryDirectory(prefix="bench_rtdl_journal_") as folder:
        def fresh_executor():
            return bt_exec.Executor(backend=bt_exec.SimBackend()), None

        def executor_with_journal():
            ex = bt_exec.Executor(backend=bt_exec.SimBackend())
            journal = bt_exec.JsonlJournal(pathlib.Path(folder) / f"journal{next(journals)}.jsonl")
            ex.subscribe_batches(journal.write_batch)
            return ex, journal

        def check_journal(made):
            _, journal = made
            lines = journal.path.read_text(encoding="utf-8").count("\n")
            # a header, plan_started, each op's running and succeeded, plan_complete
            assert lines >= 2 * (n_do + 1) + 3 and journal.dropped == 0 and not journal.failed, \
                f"journal wrote {lines} lines, dropped {journal.dropped}, error {journal.error}"
            journal.path.unlink()

        return interleave(repeats, {"plain": Side(run_plan, prepare=fresh_executor),
                                    "journal": Side(run_plan, prepare=executor_with_journal, finish=check_journal),
                                    "raw": Side(raw)})


def load_validate_compile(spec, repeats: int) -> dict[str, list[float]]:
    """Figure 4, 4b and 4c: the three inputs and the raw build, in turn."""
    envelope, arena = to_envelope(spec), to_arena(spec)
    catalog = bt_exec.CapabilityCatalog(SIM_CAP_CATALOG)
    assert_catalog_checks(catalog)

    def ours(text, with_catalog=None):
        def run():
            plan = bt_exec.load(text)
            assert bt_exec.validate(plan, catalog=with_catalog).ok
            bt_exec.compile_plan(plan)
        return run

    return interleave(repeats, {"tree": Side(ours(envelope)), "arena": Side(ours(arena)),
                                "catalog": Side(ours(envelope, catalog)), "raw": Side(lambda: to_raw(spec))})


def assert_catalog_checks(catalog: bt_exec.CapabilityCatalog) -> None:
    """The catalog figure measures a real args check: the same catalog refuses a bad arg."""
    doc = json.loads(to_envelope(flat(3, long_op=False)))
    doc["rtdl"]["children"][1]["args"] = {"step": "two"}
    report = bt_exec.validate(bt_exec.load(json.dumps(doc)), catalog=catalog)
    assert [issue.code for issue in report.issues] == ["bad_args"], report.issues


def memory_per_op(spec) -> dict:
    """Figure 5 and 5b: bytes per op, ours (Plan excluded, Plan included) and raw."""
    text = to_envelope(spec)
    plan = bt_exec.load(text)
    assert bt_exec.validate(plan).ok
    bt_exec.compile_plan(plan)  # first compile outside tracing: module-level caches are not per-plan memory

    def everything():
        loaded = bt_exec.load(text)
        assert bt_exec.validate(loaded).ok
        return loaded, bt_exec.compile_plan(loaded)

    n = count_ops(spec)
    return {"tree": retained_bytes(lambda: bt_exec.compile_plan(plan)) / n,
            "with plan": retained_bytes(everything) / n,
            "raw": retained_bytes(lambda: to_raw(spec)) / n}


def growth(repeats: int) -> dict:
    """Figure 6: per-op time at the large size over per-op time at the small one, ours and raw
    (medians of the per-repeat ratios)."""
    small, large = GROWTH_SIZES
    limits = bt_exec.Limits(max_ops=large)
    sides = {}
    for n in GROWTH_SIZES:
        spec = nested(n, long_op=False)
        text = to_envelope(spec)

        def ours(text=text):
            plan = bt_exec.load(text, limits=limits)
            assert bt_exec.validate(plan).ok
            bt_exec.compile_plan(plan)

        def raw(spec=spec):
            to_raw(spec)

        sides[f"ours {n}"] = Side(ours, loops_for(ours, GROWTH_SMALL_SAMPLE_S) if n == small else 1)
        sides[f"raw {n}"] = Side(raw, loops_for(raw, GROWTH_SMALL_SAMPLE_S) if n == small else 1)
    times = interleave(repeats, sides)

    def per_op_growth(side: str) -> float:
        return statistics.median((big / large) / (little / small)
                                 for little, big in zip(times[f"{side} {small}"], times[f"{side} {large}"]))

    return {"ours": per_op_growth("ours"), "raw": per_op_growth("raw"),
            "ours per op": {n: statistics.median(times[f"ours {n}"]) / n for n in GROWTH_SIZES}}


# --- report -------------------------------------------------------------------------

def _figure(name: str, bar: str | None, r: dict) -> Figure:
    return Figure("rtdl", name, ours_s=r["ours"], raw_s=r["raw"], ratio=r["ratio"],
                  bar=BARS[bar] if bar else None, target=TARGETS.get(bar), ours_min_s=r["ours_min"],
                  raw_min_s=r["raw_min"])


def _waiting_figure(name: str, times: dict[str, list[float]], count: int) -> Figure:
    r = paired(times, str(count), str(WAITING_PLANS[0]))
    return Figure("rtdl", name, ours_s=r["ours"], raw_s=r["raw"], ratio=r["ratio"], bar=BARS["waiting plans"],
                  ours_min_s=r["ours_min"], raw_min_s=r["raw_min"],
                  note=f"raw column: the idle tick with {WAITING_PLANS[0]} waiting plans, not raw py_trees")


def figures(args, detail: list[str] | None = None) -> list[Figure]:
    """The figures of the module doc, in its order; ``detail`` gets one line per group."""
    repeats = args.repeats
    flat_ticks = {n: ticks(flat(n), repeats * 2) for n in (100, 1000, 10_000)}
    nested_ticks = ticks(nested(1000), repeats * 2)
    journal_close_s: list[float] = []
    instant = instant_ops(2000, repeats, journal_close_s)
    compile_spec = nested(10_000, long_op=False)
    compiled = load_validate_compile(compile_spec, repeats)
    memory = memory_per_op(compile_spec)
    grown = growth(repeats)
    controls = control(flat(1000), repeats)
    waiting = waiting_plans(repeats * 2)
    at_once = admitted_at_once(ADMITTED_AT_ONCE)

    memory_note = ("tracemalloc: bytes allocated and still retained per op; the Plan excluded (loaded before "
                   "tracing) unless the row says included; raw: the raw tree of the same shape")
    growth_note = (f"per-op time of load+validate+compile at {GROWTH_SIZES[1]:,} ops / at {GROWTH_SIZES[0]:,} ops "
                   "(nested, GC enabled); raw column: raw py_trees build, same ratio")
    result = [
        _figure("1  real tick, flat 1000 ops", "real tick", flat_ticks[1000]["real"]),
        _figure("1b real tick, nested 1000 ops", "real tick", nested_ticks["real"]),
        _figure("2  idle tick, flat 1000 ops", "idle tick", flat_ticks[1000]["idle"]),
        _figure("2b idle tick, nested 1000 ops", None, nested_ticks["idle"]),
        _figure("2c idle tick, flat 100 ops", None, flat_ticks[100]["idle"]),
        _figure("2c idle tick, flat 10000 ops", None, flat_ticks[10_000]["idle"]),
        _figure("3  2000 instant ops, submit->complete", "instant", paired(instant, "plain")),
        _figure("3b same, JSONL journal subscribed", "instant, journal", paired(instant, "journal")),
        _figure("4  10k ops load+validate+compile, tree", "compile", paired(compiled, "tree")),
        _figure("4b 10k ops load+validate+compile, arena", "compile", paired(compiled, "arena")),
        _figure("4c same, tree, capability catalog", "compile, catalog", paired(compiled, "catalog")),
        Figure("rtdl", "5  memory per op, compiled tree", value=memory["tree"], raw_value=memory["raw"], unit="B",
               ratio=memory["tree"] / memory["raw"], bar=BARS["memory"], note=memory_note),
        Figure("rtdl", "5b memory per op, Plan included", value=memory["with plan"], raw_value=memory["raw"],
               unit="B", ratio=memory["with plan"] / memory["raw"], note=memory_note),
        Figure("rtdl", "6  growth 1k->50k ops, per op", value=grown["ours"], raw_value=grown["raw"], unit="x",
               on="value", bar=BARS["growth"], note=growth_note),
        _figure("7  pause+resume 1000 ops vs arming a stop point", "control", paired(controls, "pause")),
        _figure("7b arming a pause point vs a stop point", "control", paired(controls, "pause point")),
        _waiting_figure("8  idle tick's cost, 1,000 waiting plans vs 10", waiting, 1000),
        _waiting_figure("8b idle tick's cost, 10,000 waiting plans vs 10", waiting, 10_000),
        Figure("rtdl", f"9  {ADMITTED_AT_ONCE:,} plans admitted at once, waiting: peak RSS",
               value=at_once["peak_bytes"] / 1e9, unit="GB", on="value", bar=RSS_BAR_GB,
               note="no raw py_trees counterpart: the peak resident memory of a child process holding the plans, "
                    "every one accepted, the tick loop seeing one of their calls end (GB: 10^9 bytes)"),
    ]
    if detail is not None:
        idle = [flat_ticks[n]["idle"]["ours"] for n in (100, 1000, 10_000)]
        real = [flat_ticks[n]["real"]["ours"] for n in (100, 1000, 10_000)]
        raw = [flat_ticks[n]["real"]["raw"] for n in (100, 1000, 10_000)]
        per_op = grown["ours per op"]
        detail += [
            f"rtdl: {repeats} repeats ({repeats * 2} for ticks)",
            "rtdl: flat 100 / 1000 / 10000 ops, one op running: idle tick "
            f"{' / '.join(fmt_time(t) for t in idle)}, real tick {' / '.join(fmt_time(t) for t in real)}, "
            f"raw tick {' / '.join(fmt_time(t) for t in raw)}",
            f"rtdl: JSONL journal close after plan_complete (timed in 3b): median "
            f"{fmt_time(statistics.median(journal_close_s))}",
            f"rtdl: the catalog check adds "
            f"{paired(compiled, 'catalog')['ratio'] - paired(compiled, 'tree')['ratio']:+.2f}x "
            "of the raw build to the tree input",
            f"rtdl: memory per op: compiled tree {fmt_value(memory['tree'], 'B')}, Plan included "
            f"{fmt_value(memory['with plan'], 'B')}, raw py_trees {fmt_value(memory['raw'], 'B')}",
            "rtdl: idle tick with 10 / 1,000 / 10,000 waiting plans: "
            f"{' / '.join(fmt_time(statistics.median(waiting[str(n)])) for n in WAITING_PLANS)}",
            f"rtdl: {ADMITTED_AT_ONCE:,} plans admitted at once: all accepted in {fmt_time(at_once['submit_s'])}, "
            f"idle tick {fmt_time(at_once['idle_tick_s'])}, the last plan's call end seen by the tick loop in "
            f"{fmt_time(at_once['seen_s'])}; resident memory {at_once['before_bytes'] / 1e6:.0f} MB before the "
            f"plans, {at_once['waiting_bytes'] / 1e6:.0f} MB with them waiting "
            f"({(at_once['waiting_bytes'] - at_once['before_bytes']) / ADMITTED_AT_ONCE / 1e3:.1f} kB a plan), "
            f"peak {at_once['peak_bytes'] / 1e6:.0f} MB",
            f"rtdl: load+validate+compile per op: {' / '.join(fmt_time(per_op[n]) for n in GROWTH_SIZES)} at "
            f"{' / '.join(f'{n:,}' for n in GROWTH_SIZES)} ops",
        ]
    return result


def main(argv=None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0], 9, 3, "few repeats: a smoke run (CI)")
    detail: list[str] = []
    return report("rtdl", figures(args, detail), args, detail)


if __name__ == "__main__":
    sys.exit(main())
