"""Pause and resume, pause points and single steps: every op kind and phase, running calls, step graphs,
the pause timeout, cancel of a paused plan, and many threads at once."""
import random
import threading
import time

import pytest
from event_watch import EventWatch
from qwen3_graphs import scene, vacuum_to_work
from rtdl_plans import do, par, seq

import bt_exec
from bt_exec.compilers import Scene, SkillCatalog
from bt_exec.behaviours import action
from bt_exec.compilers.symbolic import World
from bt_exec.runtime import pausing

# Pre-order ids of PLAN: 1 seq(root) > 2 do(a), 3 par > [4 do(b), 5 seq > [6 do(c), 7 do(d)]], 8 do(e)
PLAN = seq(do("a"), par(do("b"), seq(do("c"), do("d"), description="inner")), do("e"), description="root")


def states(ex, plan_id):
    return {op["op_id"]: op["state"] for op in ex.get_plan_status(plan_id)["ops"]}


def held(ex, plan_id):
    return {op["op_id"] for op in ex.get_plan_status(plan_id)["ops"] if op.get("held")}


class SteppedClock:
    """A clock a test moves by hand: ``monotonic()`` (and so a SimBackend's ``clock``) reads ``now``."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return time.time()


def tick_until(ex, condition, timeout=5.0):
    """Tick by hand until ``condition()`` holds. The sim's calls end by the clock, so this loop, standing in for
    the tick thread, lets time pass between ticks as that thread does: the sleep paces the loop."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        ex.tick_once()
        time.sleep(0.002)


def called(ex):
    return [call.op_id for call in ex.backend.calls]


def control_events(events, plan_id):
    """The pause events of a plan, without their stream numbers."""
    return [{key: value for key, value in e.items() if key != "seq"} for e in events.of(plan_id)
            if e["event"] in ("paused", "resumed", "pause_point")]


class TestPauseAndResume:
    def test_a_paused_plan_starts_nothing_until_resumed(self, make_executor, events):
        ex = make_executor()
        plan_id = ex.submit(PLAN)["plan_id"]
        answer = ex.pause_plan(plan_id)
        assert answer["success"] and answer["paused"] and "no op starts" in answer["message"]
        for _ in range(5):
            ex.tick_once()
        status = ex.get_plan_status(plan_id)
        assert status["paused"] is True and status["running"] is True
        assert set(states(ex, plan_id).values()) == {"pending"} and held(ex, plan_id) == {"1"}
        assert ex.get_all_plans()["plans"][0]["paused"] is True
        assert ex.get_plans_snapshot()["plans"][0]["paused"] is True
        assert ex.get_plan_tree(plan_id)["paused"] is True
        assert not ex.backend.calls
        again = ex.pause_plan(plan_id)
        assert again["success"] and not again["paused"] and "already paused" in again["message"]
        assert ex.resume_plan(plan_id) == {"success": True, "resumed": True, "message": "plan '1' resumed."}
        record = ex.run_until_complete(plan_id, timeout=10)
        assert record["outcome"] == "succeeded" and called(ex) == ["2", "4", "6", "7", "8"]
        assert [(e["event"], e["source"]) for e in control_events(events, plan_id)] == [("paused", "api"),
                                                                                       ("resumed", "api")]
        assert not ex.resume_plan(plan_id)["resumed"], "a finished plan has nothing to resume"

    def test_resume_of_a_plan_not_paused_says_so(self, make_executor):
        ex = make_executor()
        plan_id = ex.submit(PLAN)["plan_id"]
        answer = ex.resume_plan(plan_id)
        assert answer["success"] and not answer["resumed"] and "not paused" in answer["message"]

    def test_the_watchdog_leaves_a_paused_plan_waiting(self, make_executor):
        ex = make_executor(tick_rate_hz=200)
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.pause_plan(plan_id)
        for _ in range(40):  # the first ticks the tree, which then waits with nothing watched
            ex.tick_once()
        assert ex.get_plan_status(plan_id)["paused"] and ex.get_all_plans()["count"] == 1
        ex.start()
        ex.resume_plan(plan_id)
        record = ex.wait_for_plan(plan_id, timeout_s=10)
        assert record["outcome"] == "succeeded" and record["error"] is None

    def test_refusals_name_the_caller_and_integer_ids_are_taken(self, make_executor):
        ex = make_executor()
        plan_id = ex.submit(PLAN)["plan_id"]
        for method in ("pause_plan", "resume_plan", "step_plan"):
            with pytest.raises(bt_exec.ControlError, match=f"{method}: no plan '99'"):
                getattr(ex, method)("99")
            with pytest.raises(bt_exec.ControlError, match=f"{method}: invalid source 'radio'"):
                getattr(ex, method)(plan_id, source="radio")
            with pytest.raises(bt_exec.ControlError, match=method):
                getattr(ex, method)(-3)
        assert ex.pause_plan(int(plan_id), source="mcp")["paused"]
        assert ex.resume_plan(int(plan_id), source="http")["resumed"]
        with pytest.raises(bt_exec.ControlError, match="stop_plan_at: invalid action 'halt'"):
            ex.stop_plan_at(plan_id, "2", "on_enter", action="halt")


class TestPausePoints:
    @pytest.mark.parametrize("op_id, descendants", [("2", ""), ("3", "4567"), ("5", "67"), ("1", "2345678")])
    def test_on_enter_holds_the_op_before_it_starts(self, make_executor, events, op_id, descendants):
        ex = make_executor({"default": {"duration_s": 0.01}})
        plan_id = ex.submit(PLAN)["plan_id"]
        answer = ex.stop_plan_at(plan_id, op_id, "on_enter", action="pause")
        assert answer["armed"] and answer["message"].startswith("Pause point set")
        assert ex.get_plan_status(plan_id)["ops"][int(op_id) - 1]["pause_point"] == "on_enter"
        tick_until(ex, lambda: ex.get_plan_status(plan_id)["paused"] and held(ex, plan_id))
        for _ in range(5):
            ex.tick_once()
        assert held(ex, plan_id) == {op_id} and states(ex, plan_id)[op_id] == "pending"
        assert not {call.op_id for call in ex.backend.calls} & set(op_id + descendants)
        point, paused = control_events(events, plan_id)
        assert point == {"event": "pause_point", "plan_id": plan_id, "op_id": op_id, "when": "on_enter",
                         "source": "api", "time": point["time"]}
        assert paused == {"event": "paused", "plan_id": plan_id, "source": "api", "op_id": op_id, "when": "on_enter",
                          "time": paused["time"]}
        assert "pause_point" not in ex.get_plan_status(plan_id)["ops"][int(op_id) - 1], "a pause point fires once"
        ex.resume_plan(plan_id)
        record = ex.run_until_complete(plan_id, timeout=10)
        assert record["outcome"] == "succeeded" and {op["state"] for op in record["ops"]} == {"succeeded"}
        assert [e["event"] for e in control_events(events, plan_id)] == ["pause_point", "paused", "resumed"]
        fired = [e for e in events.of(plan_id) if e["event"] == "stop_point"]
        assert [(e["state"], e["action"]) for e in fired] == [("armed", "pause"), ("fired", "pause")]

    @pytest.mark.parametrize("op_id, next_op", [("6", "7"), ("5", "8"), ("3", "8"), ("2", "3")])
    def test_on_complete_pauses_after_the_op_and_before_the_next(self, make_executor, events, op_id, next_op):
        ex = make_executor({"default": {"duration_s": 0.01}})
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.stop_plan_at(plan_id, op_id, "on_complete", action="pause")
        tick_until(ex, lambda: bool(held(ex, plan_id)))
        assert states(ex, plan_id)[op_id] == "succeeded" and held(ex, plan_id) == {next_op}
        assert next_op not in called(ex) and ex.get_plan_status(plan_id)["paused"]
        assert [e.get("op_id") for e in control_events(events, plan_id)] == [op_id, op_id]
        ex.resume_plan(plan_id)
        assert ex.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"

    def test_disarm_takes_a_pause_point_away(self, make_executor, events):
        ex = make_executor()
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.stop_plan_at(plan_id, "8", "on_enter", action="pause")
        answer = ex.disarm_stop_point(plan_id, "8", "on_enter")
        assert answer["disarmed"]
        assert ex.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"
        assert not control_events(events, plan_id)
        assert [(e["state"], e["action"]) for e in events.of(plan_id) if e["event"] == "stop_point"] == [
            ("armed", "pause"), ("disarmed", "pause")]

    def test_a_stop_point_and_a_pause_point_on_one_op_cancel(self, make_executor):
        ex = make_executor()
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.stop_plan_at(plan_id, "3", "on_enter", action="pause")
        ex.stop_plan_at(plan_id, "3", "on_enter")
        assert ex.run_until_complete(plan_id, timeout=10)["cancel_reason"] == "stop point on_enter at op 3"

    def test_a_stop_point_armed_on_a_held_op_fires_when_it_is_entered(self, make_executor):
        ex = make_executor()
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.stop_plan_at(plan_id, "3", "on_enter", action="pause")
        tick_until(ex, lambda: bool(held(ex, plan_id)))
        ex.stop_plan_at(plan_id, "3", "on_enter")
        for _ in range(3):
            ex.tick_once()
        assert ex.get_all_plans()["count"] == 1, "no stop point fires while the plan is paused"
        ex.resume_plan(plan_id)
        record = ex.run_until_complete(plan_id, timeout=10)
        assert record["cancel_reason"] == "stop point on_enter at op 3" and "4" not in called(ex)


class TestStep:
    def test_each_step_lets_exactly_the_next_op_in(self, make_executor, events):
        ex = make_executor({"default": {"duration_s": 0.01}})
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.pause_plan(plan_id)
        tick_until(ex, lambda: held(ex, plan_id) == {"1"})
        entered = []
        for expected in ["1", "2", "3", "4", "5", "6", "7", "8"]:
            assert "resumed until the next op" in ex.step_plan(plan_id)["message"]
            tick_until(ex, lambda expected=expected: ex.get_all_plans()["count"] == 0 or (
                ex.get_plan_status(plan_id)["paused"] and states(ex, plan_id)[expected] != "pending"))
            if ex.get_all_plans()["count"]:
                entered.append(expected)
                assert not held(ex, plan_id) & {expected}
        assert entered == ["1", "2", "3", "4", "5", "6", "7", "8"]
        record = ex.run_until_complete(plan_id, timeout=10)  # paused behind the last op: nothing left to hold
        assert record["outcome"] == "succeeded" and called(ex) == ["2", "4", "6", "7", "8"]
        sources = {(e["event"], e["source"]) for e in control_events(events, plan_id)}
        assert sources == {("paused", "api"), ("resumed", "api")}

    def test_a_step_on_a_running_plan_pauses_behind_the_next_op(self, make_executor):
        ex = make_executor({"default": {"duration_s": 0.02}})
        plan_id = ex.submit(PLAN)["plan_id"]
        tick_until(ex, lambda: states(ex, plan_id)["2"] == "running")
        assert "not paused; it pauses behind" in ex.step_plan(plan_id)["message"]
        tick_until(ex, lambda: ex.get_plan_status(plan_id)["paused"])
        assert states(ex, plan_id)["3"] == "running" and held(ex, plan_id) == {"4", "5"}, "a parallel's children wait"
        ex.resume_plan(plan_id)
        assert ex.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"

    def test_resume_after_a_step_drops_the_step_and_runs_on_freely(self, make_executor, events):
        ex = make_executor()
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.pause_plan(plan_id)
        ex.tick_once()
        ex.step_plan(plan_id)  # the step is pending until the next tick enters op 1
        answer = ex.resume_plan(plan_id)
        assert answer["resumed"] and "the pending step is dropped" in answer["message"]
        assert not ex.get_plan_status(plan_id)["paused"]
        record = ex.run_until_complete(plan_id, timeout=10)
        assert record["outcome"] == "succeeded" and called(ex) == ["2", "4", "6", "7", "8"]
        assert [e["event"] for e in control_events(events, plan_id)] == ["paused", "resumed", "resumed"], \
            "paused, resumed for the step, resumed again: never paused behind op 1"

    def test_resume_drops_a_step_asked_of_a_running_plan(self, make_executor, events):
        ex = make_executor({"default": {"duration_s": 0.02}})
        plan_id = ex.submit(PLAN)["plan_id"]
        tick_until(ex, lambda: states(ex, plan_id)["2"] == "running")
        ex.step_plan(plan_id)
        assert ex.resume_plan(plan_id)["resumed"]
        assert not ex.resume_plan(plan_id)["resumed"], "nothing is paused or pending any more"
        assert ex.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"
        assert [e["event"] for e in control_events(events, plan_id)] == ["resumed"]

    def test_resume_once_the_step_paused_the_plan_again_resumes_it(self, make_executor):
        ex = make_executor()
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.pause_plan(plan_id)
        ex.tick_once()
        ex.step_plan(plan_id)
        tick_until(ex, lambda: ex.get_plan_status(plan_id)["paused"])
        assert held(ex, plan_id) == {"2"}, "op 1 went in, its first child waits"
        assert ex.resume_plan(plan_id) == {"success": True, "resumed": True, "message": "plan '1' resumed."}
        assert ex.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"

    def test_a_step_graph_holds_before_its_next_step(self, make_executor, events):
        at = scene()
        backend = bt_exec.SimBackend({"default": {"duration_s": 0.01}},
                                     world=World.from_scene(SkillCatalog.named("grant"), Scene.from_dict(at)))
        ex = make_executor(backend=backend, scene=at)
        plan_id = ex.submit(vacuum_to_work())["plan_id"]
        ex.stop_plan_at(plan_id, "s1", "on_complete", action="pause")
        tick_until(ex, lambda: bool(held(ex, plan_id)))
        assert held(ex, plan_id) == {"s2"} and states(ex, plan_id) == {"s1": "succeeded", "s2": "pending"}
        assert [e["step"] for e in events.of(plan_id) if e["event"] == "step_transition"] == ["s1"]
        ex.step_plan(plan_id)
        tick_until(ex, lambda: ex.get_all_plans()["count"] == 0)
        record = ex.get_plan_result(plan_id)
        assert record["outcome"] == "succeeded" and record["path"] == ["s1", "s2", "completed"]


class TestRunningCalls:
    def test_a_sim_call_is_paused_and_resumed_where_it_was(self, make_executor, events):
        clock = SteppedClock()
        ex = make_executor(backend=bt_exec.SimBackend({"ops": {"2": {"duration_s": 0.3}}}, clock=clock))
        plan_id = ex.submit(PLAN)["plan_id"]
        tick_until(ex, lambda: states(ex, plan_id)["2"] == "running")
        clock.now += 0.1
        answer = ex.pause_plan(plan_id)
        assert answer["paused"] and "Ops already running: 2 (paused too)." in answer["message"]
        tick_until(ex, lambda: states(ex, plan_id)["2"] == "paused")
        clock.now += 10  # far past the call's whole duration: a paused clock stops
        for _ in range(3):
            ex.tick_once()
        assert states(ex, plan_id)["2"] == "paused"
        assert ex.backend.status("sim-1").state == "PAUSED"
        ex.resume_plan(plan_id)
        ex.tick_once()
        clock.now += 0.19
        for _ in range(3):
            ex.tick_once()
        assert states(ex, plan_id)["2"] == "running", "0.29 s of its 0.3 s ran"
        clock.now += 0.02
        assert ex.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"
        assert events.states(plan_id, "2") == ["running", "paused", "running", "succeeded"]

    def test_a_call_on_a_backend_without_pause_goes_on(self, make_executor):
        class Unpausable:
            def __init__(self):
                self.sim = bt_exec.SimBackend({"default": {"duration_s": 0.05}})

            def start(self, call):
                return self.sim.start(call)

            def status(self, run_id):
                return self.sim.status(run_id)

            def cancel(self, run_id):
                self.sim.cancel(run_id)

        ex = make_executor(backend=Unpausable())
        plan_id = ex.submit(PLAN)["plan_id"]
        tick_until(ex, lambda: states(ex, plan_id)["2"] == "running")
        assert "2 (goes on to its end)" in ex.pause_plan(plan_id)["message"]
        tick_until(ex, lambda: states(ex, plan_id)["2"] == "succeeded")
        tick_until(ex, lambda: held(ex, plan_id) == {"3"})
        ex.resume_plan(plan_id)
        assert ex.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"

    def test_the_op_timeout_does_not_count_while_paused(self, make_executor, monkeypatch):
        clock = SteppedClock()  # both the sim's and the op timeout's
        monkeypatch.setattr(action, "time", clock)
        ex = make_executor(backend=bt_exec.SimBackend({"ops": {"2": {"duration_s": 0.15}}}, clock=clock),
                           op_timeout_s=0.2)
        plan_id = ex.submit(PLAN)["plan_id"]
        tick_until(ex, lambda: states(ex, plan_id)["2"] == "running")
        clock.now += 0.1
        ex.pause_plan(plan_id)
        ex.tick_once()
        clock.now += 10
        ex.tick_once()
        assert states(ex, plan_id)["2"] == "paused"
        ex.resume_plan(plan_id)
        ex.tick_once()
        clock.now += 0.06
        record = ex.run_until_complete(plan_id, timeout=10)
        assert record["outcome"] == "succeeded" and record["ops"][1]["state"] == "succeeded"


class TestEnding:
    def test_a_forgotten_pause_turns_into_a_cancel(self, make_executor, events):
        ex = make_executor(pause_timeout_s=0.1)
        plan_id = ex.submit(PLAN)["plan_id"]
        assert "Unless resumed within 0.1 s it is cancelled." in ex.pause_plan(plan_id)["message"]
        record = ex.run_until_complete(plan_id, timeout=10)
        assert record["outcome"] == "cancelled"
        assert record["cancel_reason"].startswith("paused for longer than the pause timeout of 0.1 s; cancelled")
        events.complete(plan_id)

    def test_a_resume_in_time_keeps_the_plan(self, make_executor, monkeypatch):
        clock = SteppedClock()  # the pause timeout's
        monkeypatch.setattr(pausing, "time", clock)
        ex = make_executor(pause_timeout_s=0.2)
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.pause_plan(plan_id)
        ex.tick_once()
        clock.now += 0.1
        ex.resume_plan(plan_id)
        clock.now += 10
        assert ex.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"

    def test_bad_pause_timeouts_are_refused(self):
        for bad in (0, -1, float("inf"), "5", True):
            with pytest.raises(ValueError, match="pause_timeout_s"):
                bt_exec.Executor(pause_timeout_s=bad)

    def test_cancel_of_a_paused_plan_tears_down_as_usual(self, make_executor, events):
        ex = make_executor({"ops": {"4": {"duration_s": 5}}, "default": {"duration_s": 0.01}})
        plan_id = ex.submit(PLAN)["plan_id"]
        tick_until(ex, lambda: states(ex, plan_id)["4"] == "running")
        ex.pause_plan(plan_id)
        tick_until(ex, lambda: states(ex, plan_id)["4"] == "paused")
        assert ex.cancel_plan(plan_id, wait_ms=2000)["finished"]
        record = ex.get_plan_result(plan_id)
        assert record["outcome"] == "cancelled" and record["cancel_reason"] == "cancel_plan"
        by_id = {op["op_id"]: op["state"] for op in record["ops"]}
        assert by_id["4"] == "canceled" and by_id["8"] == "pending"
        assert not ex.backend.active_calls() and ex.backend.cancelled
        events.complete(plan_id)


def test_many_threads_pause_resume_step_and_cancel_while_the_loop_ticks(make_executor, events):
    ex = make_executor({"default": {"duration_s": 0.003}, "caps": {"sim.slow": {"duration_s": 0.03}}}, max_plans=100)
    ex.start()
    submitted, errors = [], []
    lock = threading.Lock()

    def worker(seed):
        rng = random.Random(seed)
        for _ in range(15):
            answer = ex.submit(seq(do(), par(do(cap="sim.slow"), do()), do()))
            with lock:
                submitted.append(answer["plan_id"])
            for _ in range(3):
                plan_id = rng.choice(submitted)
                action = rng.random()
                try:
                    if action < 0.25:
                        ex.pause_plan(plan_id, source=rng.choice(["api", "http", "mcp"]))
                    elif action < 0.45:
                        ex.resume_plan(plan_id)
                    elif action < 0.6:
                        ex.step_plan(plan_id)
                    elif action < 0.75:
                        op_id = str(int(plan_id) * 6 - rng.randrange(6))
                        ex.stop_plan_at(plan_id, op_id, rng.choice(["on_enter", "on_complete"]), action="pause")
                    elif action < 0.85:
                        ex.cancel_plan(plan_id, wait_ms=rng.choice([0, 20]))
                    else:
                        ex.get_plan_status(plan_id)
                        ex.get_plans_snapshot()
                except bt_exec.ControlError as exc:
                    if "get_plan_status" not in str(exc):
                        errors.append(exc)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    with EventWatch(ex) as watch:
        while ex.get_all_plans()["count"]:
            for plan in ex.get_all_plans()["plans"]:  # pause points may still fire: resume until every plan ends
                ex.resume_plan(plan["plan_id"])
            watch.wait(lambda event: event["event"] in ("paused", "plan_complete"), timeout_s=30)
    assert not ex.backend.active_calls()
    for plan_id in submitted:
        mine = events.of(plan_id)
        assert mine[0]["event"] == "plan_started" and mine[-1]["event"] == "plan_complete"
        events.complete(plan_id)
        for record in ex.get_plan_result(plan_id)["ops"]:
            assert record["state"] not in ("running", "paused")
