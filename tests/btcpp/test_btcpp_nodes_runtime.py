"""The node library on the executor with the sim backend: ops that run again (records, events, call ids, the
results' byte budget), the blackboard read and written by calls, reactive nodes ticked every period, timers woken
at their time, a pause."""
from __future__ import annotations

import gc
import tracemalloc

import bt_exec

Executor, SimBackend = bt_exec.Executor, bt_exec.SimBackend


class SteppedClock:
    """The seconds the sim measures its calls' durations in, moved on by the test."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def xml(tree: str, model: str = "") -> str:
    nodes = f"<TreeNodesModel>{model}</TreeNodesModel>" if model else ""
    return f'<root BTCPP_format="4" main_tree_to_execute="Main"><BehaviorTree ID="Main">{tree}</BehaviorTree>' \
           f'{nodes}</root>'


def node_states(events, plan_id: str, op_id: str) -> list[tuple[str, str | None]]:
    return [(event["state"], event.get("detail")) for event in events.of(plan_id)
            if event["event"] == "node_state" and event["op_id"] == op_id]


class TestAnOpRunningAgain:
    def test_each_run_is_a_call_of_its_own_with_its_own_events(self, events):
        sim = SimBackend()
        executor = Executor(sim)
        executor.subscribe(events)
        plan_id = executor.submit(xml('<Repeat num_cycles="3"><Ping name="ping" host="a"/></Repeat>'))["plan_id"]
        assert executor.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"
        assert events.states(plan_id, "2") == ["running", "succeeded"] * 3
        assert [call.call_id for call in sim.calls] == [f"{plan_id}:2", f"{plan_id}:2#2", f"{plan_id}:2#3"]
        op = executor.get_op(plan_id, "2")["op"]
        assert (op["state"], op["runs"], op["result"]["call_id"]) == ("succeeded", 3, f"{plan_id}:2#3")
        repeat = executor.get_op(plan_id, "1")["op"]
        assert (repeat["node"], repeat["detail"]) == ("Repeat", "3 cycles succeeded") and "runs" not in repeat
        started = next(event for event in events.of(plan_id) if event["event"] == "plan_started")
        assert started["plan"]["ops"][0]["node"] == "Repeat"
        assert started["plan"]["ops"][1]["args"] == {"host": "a"}

    def test_a_stop_point_on_it_fires_at_its_first_run(self, events):
        executor = Executor(SimBackend())
        executor.subscribe(events)
        plan_id = executor.submit(xml('<Repeat num_cycles="3"><Ping/></Repeat>'))["plan_id"]
        executor.stop_plan_at(plan_id, "2", "on_complete")
        record = executor.run_until_complete(plan_id, timeout=10)
        assert (record["outcome"], record["cancel_reason"]) == ("cancelled", "stop point on_complete at op 2")
        assert events.states(plan_id, "2") == ["running", "canceled"]
        assert events.states(plan_id, "1") == ["running", "canceled"]

    def test_only_the_latest_result_of_an_op_counts_in_its_plans_budget(self):
        sim = SimBackend({"caps": {"Read": {"output": {"blob": "x" * 1000}}}})
        executor = Executor(sim, max_result_bytes=2000, max_plan_result_bytes=5000)
        plan_id = executor.submit(xml('<Repeat num_cycles="20"><Read/></Repeat>'))["plan_id"]
        executor.run_until_complete(plan_id, timeout=10)
        assert executor.get_op(plan_id, "2")["op"]["result"]["output"] == {"blob": "x" * 1000}


class TestTheBlackboard:
    MODEL = ('<Action ID="GetPose"><output_port name="pose"/></Action>'
             '<Action ID="GoTo"><input_port name="goal"/><input_port name="speed"/></Action>')

    def test_an_output_written_on_success_is_read_when_a_later_call_starts(self):
        sim = SimBackend({"caps": {"GetPose": {"output": {"pose": {"x": 1, "y": 2}}}}})
        executor = Executor(sim)
        plan_id = executor.submit(xml('<Sequence><GetPose pose="{target}"/><GoTo goal="{target}" speed="fast"/>'
                                      '</Sequence>', self.MODEL))["plan_id"]
        assert executor.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"
        assert sim.calls[1].args == {"goal": {"x": 1, "y": 2}, "speed": "fast"}
        assert executor.get_op(plan_id, "3")["op"]["result"]["args"] == {"goal": {"x": 1, "y": 2}, "speed": "fast"}

    def test_a_key_not_set_fails_the_call_before_it_reaches_the_robot(self):
        sim = SimBackend()
        executor = Executor(sim)
        plan_id = executor.submit(xml('<GoTo goal="{nowhere}" speed="slow"/>', self.MODEL))["plan_id"]
        record = executor.run_until_complete(plan_id, timeout=10)
        assert record["outcome"] == "failed" and not sim.calls
        assert record["failed_op"]["error"] == "input port 'goal' reads blackboard key 'nowhere', which is not set"

    def test_the_outcome_event_is_written_however_the_call_ended(self):
        sim = SimBackend({"caps": {"Grab": {"outcome": "failure"}}})
        executor = Executor(sim)
        plan_id = executor.submit(xml(
            '<Sequence><ForceSuccess><Grab event="{ev}"/></ForceSuccess><ScriptCondition code="ev==\'failure\'"/>'
            '</Sequence>', '<Action ID="Grab"><output_port name="event"/></Action>'))["plan_id"]
        assert executor.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"

    def test_the_call_guard_rules_on_the_args_read_at_call_time(self):
        guard = {"rules": [{"name": "no-fast-moves", "effect": "deny", "cap": "GoTo", "args": {"speed": "fast"}}]}
        sim = SimBackend()
        executor = Executor(sim, call_guard=guard)
        plan_id = executor.submit(xml('<Sequence><Script code="pace:=\'fast\'"/><GoTo goal="dock" speed="{pace}"/>'
                                      '</Sequence>', self.MODEL))["plan_id"]
        record = executor.run_until_complete(plan_id, timeout=10)
        assert record["outcome"] == "failed" and not sim.calls
        assert record["failed_op"]["error"] == "call guard: rule 'no-fast-moves' denies 'GoTo'"
        assert executor.get_op(plan_id, "3")["op"]["result"]["args"] == {"goal": "dock", "speed": "fast"}


class TestReactiveNodes:
    def plan(self, condition_outcomes, **executor_options):
        clock = SteppedClock()
        sim = SimBackend({"caps": {"BatteryOk": {"outcome": condition_outcomes},
                                   "Dock": {"duration_s": 1.0}}}, clock=clock)
        executor = Executor(sim, **executor_options)
        plan_id = executor.submit(xml("<ReactiveSequence><BatteryOk/><Dock/></ReactiveSequence>"))["plan_id"]
        return executor, sim, clock, plan_id

    @staticmethod
    def calls(sim, cap: str) -> int:
        return sum(1 for call in sim.calls if call.cap == cap)

    def test_a_plan_holding_one_is_ticked_every_period_and_the_running_call_goes_on(self, events):
        executor, sim, clock, plan_id = self.plan("success")
        executor.subscribe(events)
        for _ in range(5):
            executor.tick_once()
            clock.now += 0.1
        assert (self.calls(sim, "BatteryOk"), self.calls(sim, "Dock")) == (5, 1)
        assert events.states(plan_id, "3") == ["running"]
        clock.now += 1.0
        executor.tick_once()
        assert executor.get_plan_result(plan_id)["outcome"] == "succeeded"
        assert executor.get_op(plan_id, "2")["op"]["runs"] == 6

    def test_the_executors_own_loop_ticks_it_every_period(self):
        sim = SimBackend({"caps": {"Dock": {"duration_s": 0.3}}})
        executor = Executor(sim, tick_rate_hz=100)
        executor.start()
        try:
            plan_id = executor.submit(xml("<ReactiveSequence><BatteryOk/><Dock/></ReactiveSequence>"))["plan_id"]
            assert executor.run_until_complete(plan_id, timeout=30)["outcome"] == "succeeded"
        finally:
            executor.close()
        assert self.calls(sim, "BatteryOk") >= 3 and self.calls(sim, "Dock") == 1

    def test_a_check_failing_halts_the_running_call(self, events):
        executor, sim, clock, plan_id = self.plan(["success", "success", "failure"])
        executor.subscribe(events)
        for _ in range(3):
            executor.tick_once()
            clock.now += 0.1
        assert executor.get_plan_result(plan_id)["outcome"] == "failed"
        assert node_states(events, plan_id, "3")[-1] == ("canceled", "halted by ReactiveSequence [1], which failed")
        assert len(sim.cancelled) == 1

    def test_a_pause_point_on_a_check_holds_it_and_the_running_call_goes_on(self, events):
        executor, sim, clock, plan_id = self.plan("success")
        executor.subscribe(events)
        executor.tick_once()
        executor.stop_plan_at(plan_id, "2", "on_enter", action="pause")
        clock.now += 0.1
        executor.tick_once()
        assert executor.get_plan_status(plan_id)["paused"] and not sim.cancelled
        assert self.calls(sim, "BatteryOk") == 1
        executor.resume_plan(plan_id)
        clock.now += 1.0
        executor.tick_once()
        assert executor.get_plan_result(plan_id)["outcome"] == "succeeded"
        assert events.states(plan_id, "3") == ["running", "succeeded"]

    def test_a_check_run_thousands_of_times_keeps_the_plans_memory_flat(self):
        sim = SimBackend({"caps": {"Dock": {"duration_s": 86400}}}, clock=SteppedClock(), history=10)
        executor = Executor(sim)
        plan_id = executor.submit(xml("<ReactiveSequence><BatteryOk/><Dock/></ReactiveSequence>"))["plan_id"]
        for _ in range(200):
            executor.tick_once()
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            for _ in range(1500):
                executor.tick_once()
            gc.collect()
            grown = sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename"))
        finally:
            tracemalloc.stop()
        assert executor.get_op(plan_id, "2")["op"]["runs"] == 1700
        assert grown < 20_000, f"{grown} bytes more after 1,500 more checks"

    def test_paused_it_runs_no_check_and_names_only_the_call_as_running(self):
        executor, sim, clock, plan_id = self.plan("success")
        executor.tick_once()
        message = executor.pause_plan(plan_id)["message"]
        assert "Ops already running: 3 (" in message and "1 (" not in message
        for _ in range(3):
            clock.now += 0.1
            executor.tick_once()
        assert self.calls(sim, "BatteryOk") == 1
        executor.resume_plan(plan_id)
        executor.tick_once()
        assert self.calls(sim, "BatteryOk") == 2


def test_a_timeout_is_woken_at_its_time_not_ticked_every_period(events):
    sim = SimBackend({"caps": {"Dock": {"duration_s": 60.0}}})
    executor = Executor(sim)
    executor.subscribe(events)
    plan_id = executor.submit(xml('<Timeout msec="50"><Dock/></Timeout>'))["plan_id"]
    executor.tick_once()
    run = executor._runner.active(plan_id)
    assert not run.polled and run.wake_at() is not None
    record = executor.run_until_complete(plan_id, timeout=10)
    assert record["outcome"] == "failed"
    assert node_states(events, plan_id, "2")[-1] == ("canceled", "halted by Timeout [1]: its timeout of 50 ms passed")
    assert len(sim.cancelled) == 1
