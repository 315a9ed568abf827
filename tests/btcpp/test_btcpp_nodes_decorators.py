"""The library's decorators and built-in leaves tick by tick, as BehaviorTree.CPP 4 and Nav2 run them: loops, timers
on a clock the test moves (never a sleep), rates, distances, and the blackboard ports they read."""
from __future__ import annotations

import pytest

from bt_exec.behaviours import place_stop_guard
from bt_exec.behaviours.bt_library import EVERY_PERIOD, NODE_LIBRARY
from node_harness import FAILURE, INVALID, RUNNING, SUCCESS, Leaf, Tree, node


class TestInvertersAndForces:
    @pytest.mark.parametrize(("name", "child", "expected"), [
        ("Inverter", SUCCESS, FAILURE), ("Inverter", FAILURE, SUCCESS), ("ForceSuccess", FAILURE, SUCCESS),
        ("ForceSuccess", SUCCESS, SUCCESS), ("ForceFailure", SUCCESS, FAILURE), ("ForceFailure", FAILURE, FAILURE)])
    def test_the_child_status_mapped_once_it_ended(self, name, child, expected):
        leaf = Leaf("a")
        tree = Tree(node(name, "d", leaf))
        assert tree.tick() == RUNNING
        leaf.next = child
        assert tree.tick() == expected
        assert leaf.starts == 1


class TestRepeat:
    def test_a_child_ending_at_once_runs_again_at_each_period_until_the_count(self):
        leaf = Leaf("a", SUCCESS)
        tree = Tree(node("Repeat", "r", leaf, num_cycles="3"))
        assert tree.tick() == RUNNING
        assert leaf.starts == 1 and tree.root._wait is EVERY_PERIOD and tree.due()
        assert tree.tick() == RUNNING
        assert tree.tick() == SUCCESS
        assert leaf.starts == 3
        assert tree.hooks.states("a") == ["running", "succeeded"] * 3
        assert tree.hooks.states("r") == ["running", "succeeded"]
        assert tree.hooks.reports[-1][2] == "3 cycles succeeded"
        assert not tree.hooks.watched

    def test_a_child_running_across_ticks_runs_again_in_the_tick_it_ended(self):
        leaf = Leaf("a")
        tree = Tree(node("Repeat", "r", leaf, num_cycles="2"))
        tree.tick()
        leaf.next = SUCCESS
        assert tree.tick() == SUCCESS  # cycle 1 ended, cycle 2 started and ended in the same tick
        assert leaf.starts == 2

    def test_a_failed_cycle_fails_it(self):
        leaf = Leaf("a", SUCCESS)
        tree = Tree(node("Repeat", "r", leaf, num_cycles="-1"))
        for _ in range(5):
            assert tree.tick() == RUNNING
        leaf.next = FAILURE
        assert tree.tick() == FAILURE
        assert leaf.starts == 6
        assert tree.hooks.reports[-1][2] == "cycle 6 failed"

    def test_its_count_read_from_the_blackboard_at_each_run(self):
        leaf = Leaf("a", SUCCESS)
        tree = Tree(node("Repeat", "r", leaf, num_cycles="{times}"))
        assert tree.tick() == FAILURE
        assert tree.hooks.reports[-1] == ("r", "failed", "Repeat [r]: input port 'num_cycles' reads blackboard key "
                                                         "'times', which is not set")
        assert leaf.starts == 0
        tree.hooks.blackboard["times"] = 1
        assert tree.tick() == SUCCESS
        tree.hooks.blackboard["times"] = "many"
        assert tree.tick() == FAILURE
        assert tree.hooks.reports[-1][2] == ("Repeat [r]: port 'num_cycles' (blackboard key 'times'): expected a "
                                             "whole number, got 'many'")

    def test_retry_runs_a_failed_child_again_up_to_its_attempts(self):
        leaf = Leaf("a", FAILURE)
        tree = Tree(node("RetryUntilSuccessful", "r", leaf, num_attempts="3"))
        assert tree.tick() == RUNNING
        assert tree.tick() == RUNNING
        assert tree.tick() == FAILURE
        assert leaf.starts == 3 and tree.hooks.reports[-1][2] == "all 3 attempts failed"
        leaf.next = SUCCESS
        assert tree.tick() == SUCCESS
        assert tree.hooks.reports[-1][2] == "succeeded at attempt 1"

    def test_keep_running_until_failure(self):
        leaf = Leaf("a", SUCCESS)
        tree = Tree(node("KeepRunningUntilFailure", "k", leaf))
        assert tree.tick() == RUNNING and tree.due()
        assert tree.tick() == RUNNING
        leaf.next = FAILURE
        assert tree.tick() == FAILURE
        assert leaf.starts == 3
        assert tree.hooks.reports[-1][2] == "child a failed after 2 successful runs"


class TestTimers:
    def test_timeout_halts_a_child_still_running_when_its_time_passed(self):
        leaf = Leaf("a")
        tree = Tree(node("Timeout", "t", leaf, msec="500"))
        tree.tick()
        assert tree.hooks.poll_times[tree.root] == pytest.approx(100.5)
        assert tree.root not in tree.hooks.polled  # woken at its time, not every period
        tree.clock.now += 0.4
        assert not tree.due()
        tree.tick()
        tree.clock.now += 0.1
        assert tree.due()
        assert tree.tick() == FAILURE
        assert leaf.halts == 1
        canceled = [detail for op_id, state, detail in tree.hooks.reports if state == "canceled"]
        assert canceled == ["halted by Timeout [t]: its timeout of 500 ms passed"]
        assert tree.hooks.reports[-1] == ("t", "failed", "child a ran past the timeout of 500 ms and was halted")
        assert not tree.hooks.watched

    def test_timeout_passes_on_a_child_ending_in_time(self):
        leaf = Leaf("a")
        tree = Tree(node("Timeout", "t", leaf, msec="500"))
        tree.tick()
        tree.clock.now += 0.3
        leaf.next = SUCCESS
        assert tree.tick() == SUCCESS
        assert not tree.hooks.watched

    def test_delay_starts_the_child_once_its_time_passed(self):
        leaf = Leaf("a", SUCCESS)
        tree = Tree(node("Delay", "d", leaf, delay_msec="300"))
        assert tree.tick() == RUNNING
        assert leaf.starts == 0 and tree.hooks.poll_times[tree.root] == pytest.approx(100.3)
        tree.clock.now += 0.2
        assert not tree.due() and tree.tick() == RUNNING and leaf.starts == 0
        tree.clock.now += 0.1
        assert tree.due()
        assert tree.tick() == SUCCESS and leaf.starts == 1

    def test_rate_controller_in_a_pipeline_runs_its_child_once_a_period(self):
        planner, follower = Leaf("plan", SUCCESS), Leaf("follow")
        rate = node("RateController", "rc", planner, hz="2")
        tree = Tree(node("PipelineSequence", "p", rate, follower))
        tree.tick()
        assert (planner.starts, follower.starts) == (1, 1)
        tree.clock.now += 0.3
        tree.tick()
        assert (planner.starts, follower.ticks) == (1, 2)  # within the period: the follower goes on alone
        assert tree.hooks.poll_times[rate] == pytest.approx(100.5)
        tree.clock.now += 0.2
        assert tree.due()
        tree.tick()
        assert planner.starts == 2 and follower.starts == 1

    def test_rate_controller_reset_by_its_parent_starts_afresh(self):
        planner = Leaf("plan", SUCCESS)
        tree = Tree(node("Repeat", "r", node("RateController", "rc", planner, hz="1"), num_cycles="2"))
        tree.tick()
        tree.tick()  # Repeat resets its child after each cycle: the rate starts over and runs the child at once
        assert planner.starts == 2 and tree.root.status == SUCCESS


class TestRunOnce:
    def test_the_child_runs_once_then_the_node_is_skipped(self):
        once, fallback_child = Leaf("init", FAILURE), Leaf("other", SUCCESS)
        tree = Tree(node("Fallback", "f", node("RunOnce", "o", once), fallback_child))
        assert tree.tick() == SUCCESS
        assert (once.starts, fallback_child.starts) == (1, 1)
        fallback_child.next = FAILURE
        assert tree.tick() == FAILURE  # skipped: the fallback goes on to its next child, as with a failure
        assert (once.starts, fallback_child.starts) == (1, 2)
        assert tree.hooks.states("o") == ["running", "failed"]

    def test_a_skipped_child_is_no_success_to_a_fallback(self):
        tree = Tree(node("Fallback", "f", node("RunOnce", "o", Leaf("init", SUCCESS)), Leaf("other", FAILURE)))
        assert tree.tick() == SUCCESS
        assert tree.tick() == FAILURE

    def test_then_skip_false_repeats_the_status_without_running(self):
        once = Leaf("init", FAILURE)
        tree = Tree(node("Sequence", "s", node("RunOnce", "o", once, then_skip="false"), Leaf("b", SUCCESS)))
        assert tree.tick() == FAILURE
        assert tree.tick() == FAILURE
        assert once.starts == 1


class TestDistanceController:
    def test_runs_the_child_again_each_time_the_robot_moved_the_distance(self):
        planner, follower = Leaf("plan", SUCCESS), Leaf("follow")
        distance = node("DistanceController", "dc", planner, distance="1.0")
        tree = Tree(node("PipelineSequence", "p", distance, follower))
        tree.hooks.blackboard["robot_pose"] = {"x": 0.0, "y": 0.0}
        tree.tick()
        assert planner.starts == 1
        tree.hooks.blackboard["robot_pose"] = {"x": 0.6, "y": 0.0}
        tree.tick()
        assert planner.starts == 1 and distance in tree.hooks.polled
        tree.hooks.blackboard["robot_pose"] = [0.6, 0.8, 0.0]
        tree.tick()
        assert planner.starts == 2

    def test_without_a_pose_it_fails(self):
        tree = Tree(node("DistanceController", "dc", Leaf("plan")))
        assert tree.tick() == FAILURE
        assert "input port 'robot_pose' reads blackboard key 'robot_pose', which is not set" in \
            tree.hooks.reports[-1][2]
        tree.hooks.blackboard["odom"] = "here"
        tree = Tree(node("DistanceController", "dc", Leaf("plan"), robot_pose="{odom}"))
        tree.hooks.blackboard["odom"] = "here"
        assert tree.tick() == FAILURE
        assert "expected {'x', 'y'[, 'z']} or [x, y[, z]] numbers" in tree.hooks.reports[-1][2]


class TestLeaves:
    def test_always_success_and_failure(self):
        assert Tree(node("AlwaysSuccess", "s")).tick() == SUCCESS
        assert Tree(node("AlwaysFailure", "f")).tick() == FAILURE

    def test_script_sets_keys_and_a_condition_reads_them(self):
        tree = Tree(node("Sequence", "s", node("Script", "set", code="step:='s1'; tries:=2"),
                         node("ScriptCondition", "if", code="step=='s1' && tries>=2 || missing=='x'")))
        assert tree.tick() == SUCCESS
        assert tree.hooks.blackboard == {"step": "s1", "tries": 2}

    def test_a_condition_on_a_key_never_set_fails(self):
        tree = Tree(node("ScriptCondition", "if", code="event=='success'"))
        assert tree.tick() == FAILURE
        assert tree.hooks.reports[-1] == ("if", "failed", "ScriptCondition [if]: blackboard key 'event' is not set")
        tree.hooks.blackboard["event"] = "failed"
        assert tree.tick() == FAILURE
        tree.hooks.blackboard["event"] = "success"
        assert tree.tick() == SUCCESS

    def test_a_script_that_cannot_be_read_is_found_before_it_runs(self):
        assert NODE_LIBRARY["Script"].check({"code": "a:='x' b"}, 0) == \
            "port 'code': expected ';' or the end of the script after a statement, got 'b'"
        tree = Tree(node("Script", "set", code="a:=("))
        assert tree.tick() == FAILURE


    def test_a_hostile_script_is_refused_without_recursing_and_a_long_one_runs(self):
        check = NODE_LIBRARY["ScriptCondition"].check
        assert check({"code": "(" * 2000 + "a" + ")" * 2000}, 0) == \
            "port 'code': the script nests '(' and '!' more than 32 deep"
        assert check({"code": "!" * 40 + "a"}, 0) is not None
        assert check({"code": "a" * 5000}, 0) == "port 'code': the script is longer than 4096 characters"
        tree = Tree(node("ScriptCondition", "if", code=" && ".join(["a==1"] * 500)))
        tree.hooks.blackboard["a"] = 1
        assert tree.tick() == SUCCESS


class TestStopGuards:
    def test_a_guard_placed_over_a_decorators_child_takes_its_place(self):
        leaf = Leaf("a", SUCCESS)
        tree = Tree(node("Repeat", "r", leaf, num_cycles="2"))
        tree.tick()
        guard, new = place_stop_guard(leaf, is_root=False)
        assert new and tree.root.children == [guard] and tree.root.decorated is guard
        assert tree.tick() == SUCCESS
        assert leaf.starts == 2 and tree.hooks.states("a") == ["running", "succeeded"] * 2

    def test_a_halted_child_under_a_guard_is_canceled_naming_the_node(self):
        leaf = Leaf("a")
        tree = Tree(node("Timeout", "t", leaf, msec="10"))
        tree.tick()
        place_stop_guard(leaf, is_root=False)
        tree.clock.now += 1
        assert tree.tick() == FAILURE
        assert leaf.halts == 1 and leaf.status == INVALID


class TestEveryDecorator:
    @pytest.mark.parametrize("name", [name for name, spec in NODE_LIBRARY.items() if spec.category == "decorator"])
    def test_a_plan_torn_down_cancels_the_running_child_then_the_node(self, name):
        ports = {"Repeat": {"num_cycles": "2"}, "RetryUntilSuccessful": {"num_attempts": "2"},
                 "Timeout": {"msec": "1000"}, "Delay": {"delay_msec": "0"}}.get(name, {})
        leaf = Leaf("a")
        tree = Tree(node(name, "d", leaf, **ports))
        tree.hooks.blackboard["robot_pose"] = [0, 0]
        tree.tick()
        assert leaf.status == RUNNING
        tree.hooks.take()
        tree.halt()
        assert tree.hooks.take() == [("a", "canceled"), ("d", "canceled")]
        assert not tree.hooks.watched
