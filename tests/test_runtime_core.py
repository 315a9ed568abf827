"""The runtime core's contracts: event-driven ticking and its watchdog, stop guards placed where stop
points are (adopting running ops), the tip of the tree, the plan tree's tick, batched events, and
cancellations a door can wait on its own way."""
import threading

import py_trees
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from rtdl_plans import EventLog, do, par, seq

import bt_exec
from bt_exec.behaviours import StopGuard
from bt_exec.compat.py_trees import PlanTree

STEP_S = 0.01


class SteppedClock:
    """The seconds a SimBackend measures durations in, moved on by the test: runs repeat exactly."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def guards(root):
    return [node for node in root.iterate() if isinstance(node, StopGuard)]


# --- event-driven ticking -----------------------------------------------------------

leaves = st.builds(lambda cap: do(cap=f"sim.c{cap}"), st.integers(0, 3))
trees = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, min_size=1, max_size=3).map(lambda kids: seq(*kids)),
    st.lists(inner, min_size=1, max_size=3).map(lambda kids: par(*kids))), max_leaves=8)
outcomes = st.fixed_dictionaries({"outcome": st.sampled_from(["success", "failure", "timeout"]),
                                  "duration_s": st.sampled_from([0.0, STEP_S, 3 * STEP_S, 7 * STEP_S])})


class PolledSim:
    """A SimBackend that cannot push: the runtime asks it for every watched call's status every period."""

    def __init__(self, sim):
        self.sim = sim

    def start(self, call):
        return self.sim.start(call)

    def status(self, run_id):
        return self.sim.status(run_id)

    def cancel(self, run_id):
        self.sim.cancel(run_id)


def run_events(tree, script, stop, gated, pushed=True, pause=None):
    clock = SteppedClock()
    sim = bt_exec.SimBackend(script, clock=clock)
    executor = bt_exec.Executor(sim if pushed else PolledSim(sim), tick_on_news_only=gated)
    log = EventLog()
    executor.subscribe(log)
    plan_id = executor.submit(tree)["plan_id"]
    if stop is not None:
        executor.stop_plan_at(plan_id, *stop)
    for tick in range(500):
        if pause is not None and tick == pause[0]:
            executor.pause_plan(plan_id)
        if pause is not None and tick == pause[0] + pause[1]:
            executor.resume_plan(plan_id)
        executor.tick_once()
        if any(event["event"] == "plan_complete" for event in log.events):
            break
        clock.now += STEP_S
    executor.close(wait_ms=0)
    return [{key: value for key, value in event.items() if key not in ("time", "seq")} for event in log.events]


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees, data=st.data())
def test_gated_ticking_gives_the_same_events_as_ticking_every_period(tree, data):
    """Calls that push their news (the sim) and calls polled every period, each ticked gated and every period:
    the same events, in the same ticks."""
    count = bt_exec.load(tree).op_count
    script = {"ops": {str(op_id): data.draw(outcomes) for op_id in range(1, count + 1)}}
    stop = data.draw(st.none() | st.tuples(st.integers(1, count).map(str), st.sampled_from(["on_enter",
                                                                                                "on_complete"])))
    pause = data.draw(st.none() | st.tuples(st.integers(0, 6), st.integers(1, 5)))  # at tick, for ticks
    pushed = run_events(tree, script, stop, gated=True, pause=pause)
    assert pushed[-1]["event"] == "plan_complete"
    assert pushed == run_events(tree, script, stop, gated=False, pause=pause)
    polled = run_events(tree, script, stop, gated=True, pushed=False, pause=pause)
    assert polled == run_events(tree, script, stop, gated=False, pushed=False, pause=pause)
    if pause is None:  # a polled sim cannot pause its calls: paused, the two differ as they should
        assert pushed == polled


def test_a_behaviour_that_nothing_can_wake_is_ended_by_the_watchdog(make_executor):
    ex = make_executor()
    plan_id = ex.submit(seq(do("first"), do("second")))["plan_id"]
    root = ex.behaviour_trees()[plan_id]
    timer = py_trees.timers.Timer("stock timer", duration=0.05)  # RUNNING, and registers nothing to wake it
    root.children[0] = timer
    timer.parent = root
    record = ex.run_until_complete(plan_id, timeout=5)
    assert record["outcome"] == "failed"
    assert record["error"].startswith("stalled: 'stock timer' is RUNNING but nothing can wake the plan")
    assert [op["state"] for op in record["ops"]] == ["canceled", "pending", "pending"]


def test_ticking_every_period_runs_what_does_not_keep_the_waking_contract(make_executor):
    ex = make_executor(tick_on_news_only=False, tick_rate_hz=200)
    plan_id = ex.submit(seq(do("first"), do("second")))["plan_id"]
    root = ex.behaviour_trees()[plan_id]
    timer = py_trees.timers.Timer("stock timer", duration=0.05)
    root.children[0] = timer
    timer.parent = root
    assert ex.run_until_complete(plan_id, timeout=5)["outcome"] == "succeeded"


def test_an_idle_plan_is_not_ticked_until_its_call_has_news(make_executor):
    clock = SteppedClock()
    ex = make_executor(backend=bt_exec.SimBackend({"default": {"duration_s": 1.0}}, clock=clock))
    plan_id = ex.submit(seq(do()))["plan_id"]
    ex.tick_once()
    root = ex.behaviour_trees()[plan_id]
    ticked = []
    ex.behaviour_trees()  # the same tree: count the ticks that reach its root
    real_tick = root.tick
    root.tick = lambda: (ticked.append(1), (yield from real_tick()))[1]
    for _ in range(5):
        ex.tick_once()
    assert ticked == []
    clock.now = 1.0
    ex.tick_once()
    assert ticked == [1]
    assert ex.run_until_complete(plan_id, timeout=1)["outcome"] == "succeeded"


class SilentBackend:
    """Pushes, but never has news: its calls run until cancelled. Counts the status calls."""

    def __init__(self):
        self.asked = 0
        self.cancelled = []

    def start(self, call):
        return f"silent-{call.op_id}"

    def status(self, run_id):
        self.asked += 1
        return bt_exec.CallStatus("RUNNING")

    def cancel(self, run_id):
        self.cancelled.append(run_id)

    def watch_call(self, run_id, news):
        self.news = news


def test_a_call_whose_backend_pushes_is_asked_only_when_told(make_executor):
    backend = SilentBackend()
    ex = make_executor(backend=backend)
    plan_id = ex.submit(seq(do()))["plan_id"]
    for _ in range(20):
        ex.tick_once()
    assert backend.asked == 1, "asked once, right after watch_call, then never without news"
    assert ex.get_plan_status(plan_id)["running"], "a plan waiting on a pushing call is not stalled"
    backend.news()
    ex.tick_once()
    ex.tick_once()
    assert backend.asked == 2
    ex.cancel_plan(plan_id)


def test_the_op_timeout_ends_a_call_that_never_has_news(make_executor):
    backend = SilentBackend()
    ex = make_executor(backend=backend, op_timeout_s=0.05)
    plan_id = ex.submit(seq(do()))["plan_id"]
    record = ex.run_until_complete(plan_id, timeout=5)
    assert record["ops"][1]["state"] == "timeout" and backend.cancelled == ["silent-2"]
    assert backend.asked <= 2, "the deadline came from the runner's timer, not from asking every period"


def test_a_sleeping_tick_loop_is_woken_by_news_and_by_the_op_timeout(make_executor):
    """With nothing polled and no send_due_news, the loop sleeps until told or until its next timer."""
    class Told(SilentBackend):
        def __init__(self):
            super().__init__()
            self.watched = threading.Event()
            self.ended = False

        def status(self, run_id):
            self.asked += 1
            return bt_exec.CallStatus("SUCCEEDED" if self.ended else "RUNNING")

        def watch_call(self, run_id, news):
            self.news = news
            self.watched.set()

    short, long = Told(), Told()
    ex = make_executor(backend=short, op_timeout_s=0.3)
    ex.start()
    timed_out = ex.submit(seq(do()))["plan_id"]
    assert ex.run_until_complete(timed_out, timeout=5)["ops"][1]["state"] == "timeout"
    ex = make_executor(backend=long, op_timeout_s=60)
    ex.start()
    told = ex.submit(seq(do()))["plan_id"]
    assert long.watched.wait(5)
    long.ended = True
    threading.Thread(target=long.news).start()
    assert ex.run_until_complete(told, timeout=5)["outcome"] == "succeeded"



def test_a_tick_loop_on_the_sim_sleeps_until_its_call_ends(make_executor):
    """The sim says when its next call ends (``news_due_at``): the loop sleeps until then, not period after period."""
    class CountedSim(bt_exec.SimBackend):
        looks = 0

        def send_due_news(self):
            self.looks += 1
            super().send_due_news()

    sim = CountedSim({"default": {"duration_s": 0.3}})
    ex = make_executor(backend=sim)
    ex.start()
    plan_id = ex.submit(seq(do()))["plan_id"]
    record = ex.run_until_complete(plan_id, timeout=5)
    assert record["outcome"] == "succeeded" and record["ops"][1]["state"] == "succeeded"
    assert sim.looks <= 10, f"the loop woke {sim.looks} times in 0.3 s (every period: 30)"
    assert sim.news_due_at() is None, "no call is to end: the loop sleeps until woken"

# --- stop guards ------------------------------------------------------------------------

def test_one_node_per_op_and_a_guard_only_where_a_stop_point_is_armed(make_executor):
    ex = make_executor({"default": {"duration_s": 60}})
    plan_id = ex.submit(seq(do("move"), par(do("look"), do("listen"), description="sense")))["plan_id"]
    root = ex.behaviour_trees()[plan_id]
    assert [node.name for node in root.iterate()] == ["[2] move", "[4] look", "[5] listen", "[3] sense", "[1] in order"]
    assert guards(root) == []
    ex.stop_plan_at(plan_id, "4", "on_enter")
    ex.stop_plan_at(plan_id, "4", "on_complete")  # the same op: the same guard checks both
    placed = guards(ex.behaviour_trees()[plan_id])
    assert len(placed) == 1 and placed[0].name == "stop point at [4]" and placed[0].decorated.name == "[4] look"


def test_a_guard_armed_on_a_running_op_adopts_it_and_stops_after_it_completes(make_executor, events):
    clock = SteppedClock()
    sim = bt_exec.SimBackend({"ops": {"2": {"duration_s": 1.0}}}, clock=clock)
    ex = make_executor(backend=sim)
    plan_id = ex.submit(seq(do("slow"), do("next")))["plan_id"]
    ex.tick_once()
    assert events.states(plan_id, "2") == ["running"]
    ex.stop_plan_at(plan_id, "2", "on_complete")
    ex.tick_once()
    assert len(sim.calls) == 1 and list(sim.cancelled) == [] and events.states(plan_id, "2") == ["running"]
    clock.now = 1.0
    record = ex.run_until_complete(plan_id, timeout=1)
    assert record["outcome"] == "cancelled" and len(sim.calls) == 1 and list(sim.cancelled) == []
    slow, following = record["ops"][1], record["ops"][2]
    assert slow["state"] == "canceled" and slow["detail"] == "stop point on_complete fired after the op succeeded"
    assert slow["result"]["success"] is True and following["state"] == "pending"
    assert events.states(plan_id, "2") == ["running", "canceled"]


def test_a_guard_on_the_root_op_becomes_the_root(make_executor):
    ex = make_executor({"default": {"duration_s": 60}})
    plan_id = ex.submit(seq(do()))["plan_id"]
    op = ex.behaviour_trees()[plan_id]
    ex.stop_plan_at(plan_id, "1", "on_enter")
    root = ex.behaviour_trees()[plan_id]
    assert isinstance(root, StopGuard) and root.decorated is op and root.parent is None
    record = ex.run_until_complete(plan_id, timeout=1)
    assert record["ops"][0]["detail"] == "stop point on_enter fired: the op never started"


# --- the tip of the tree ---------------------------------------------------------------

@pytest.mark.parametrize("tree, running", [
    (seq(do("a"), do("slow", cap="sim.slow"), do("c")), "[3] slow"),
    (par(do("fast"), seq(do("slow", cap="sim.slow"))), "[4] slow"),
])
def test_the_tip_is_the_running_op(make_executor, tree, running):
    ex = make_executor({"caps": {"sim.slow": {"duration_s": 60}}})
    plan_id = ex.submit(tree)["plan_id"]
    ex.tick_once()
    root = ex.behaviour_trees()[plan_id]
    assert root.tip().name == running


def test_the_tip_of_a_step_graph_is_its_running_step(make_executor):
    from qwen3_graphs import cap_to_hatch, scene
    ex = make_executor(scene=scene(), backend=bt_exec.SimBackend({"caps": {"grab": {"duration_s": 60}}}))
    plan_id = ex.submit(cap_to_hatch())["plan_id"]
    ex.tick_once()
    router = ex.behaviour_trees()[plan_id]
    assert router.tip().name.startswith("[t1] grab") and router.current_child is router.tip()


# --- the plan tree ------------------------------------------------------------------------

class CountingVisitor(py_trees.visitors.VisitorBase):
    def __init__(self, full):
        super().__init__(full=full)
        self.visited = 0

    def run(self, behaviour):
        self.visited += 1


@pytest.mark.parametrize("full, visits", [(False, 2), (True, 101)])
def test_the_plan_tree_walks_every_node_only_for_a_full_visitor(full, visits):
    root = py_trees.composites.Sequence("root", memory=True,
                                        children=[py_trees.behaviours.Running(f"op{i}") for i in range(100)])
    tree = PlanTree(root)
    visitor = CountingVisitor(full)
    tree.add_visitor(visitor)
    handled = []
    tree.add_post_tick_handler(lambda _tree: handled.append(_tree.count))
    tree.tick()
    assert visitor.visited == visits and handled == [0] and tree.count == 1


# --- events and cancellations --------------------------------------------------------

def test_batches_carry_a_ticks_events_in_order(make_executor):
    ex = make_executor()
    batches = []
    ex.subscribe_batches(batches.append)
    plan_id = ex.submit(seq(do(), do()))["plan_id"]
    ex.run_until_complete(plan_id)
    events = [event for batch in batches for event in batch]
    assert [e["event"] for e in batches[0]] == ["plan_started"]  # before the first tick moves anything
    assert [e["state"] for e in batches[1]] == ["running", "running", "succeeded", "running", "succeeded", "succeeded"]
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events) and events[-1]["event"] == "plan_complete"


def test_a_cancellation_says_when_its_plans_finished(make_executor):
    ex = make_executor({"default": {"duration_s": 60}})
    first, second = ex.submit(seq(do()))["plan_id"], ex.submit(seq(do()))["plan_id"]
    ex.tick_once()
    cancellation = ex.begin_cancel(None, "operator")
    assert cancellation.plan_ids == [first, second] and not cancellation.finished
    ex.tick_once()
    assert cancellation.finished
    assert cancellation.answer(100) == {"count": 2, "plan_ids": [first, second], "finished": True,
                                        "message": "cancelled 2 plan(s)"}
    assert ex.begin_cancel(first, "again").answer(0)["message"] == f"plan {first!r} already finished; nothing to cancel"
