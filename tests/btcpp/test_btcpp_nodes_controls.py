"""The library's control nodes tick by tick, as BehaviorTree.CPP 4 and Nav2 run them: which child is ticked, which
runs again, which is halted, and what each op reports."""
from __future__ import annotations

import pytest

from bt_exec.behaviours.bt_library import EVERY_PERIOD, NODE_LIBRARY
from node_harness import FAILURE, INVALID, RUNNING, SUCCESS, Leaf, Tree, node


def halted_detail(tree: Tree, op_id: str) -> str:
    return next(detail for reported, state, detail in tree.hooks.reports if reported == op_id and state == "canceled")


class TestSequence:
    def test_children_in_order_and_a_running_child_goes_on_without_the_earlier_ones(self):
        a, b = Leaf("a", SUCCESS), Leaf("b")
        tree = Tree(node("Sequence", "s", a, b))
        assert tree.tick() == RUNNING
        assert tree.hooks.take() == [("s", "running"), ("a", "running"), ("a", "succeeded"), ("b", "running")]
        assert tree.root.current_child is b
        assert tree.tick() == RUNNING
        assert (a.starts, a.ticks, b.starts, b.ticks) == (1, 1, 1, 2)
        b.next = SUCCESS
        assert tree.tick() == SUCCESS
        assert tree.hooks.take() == [("b", "succeeded"), ("s", "succeeded")]

    def test_a_failure_fails_it_and_the_next_run_starts_at_the_first_child(self):
        a, b, c = Leaf("a", SUCCESS), Leaf("b", FAILURE), Leaf("c", SUCCESS)
        tree = Tree(node("Sequence", "s", a, b, c))
        assert tree.tick() == FAILURE
        assert c.starts == 0
        assert tree.hooks.reports[-1] == ("s", "failed", "child b failed")
        assert tree.tick() == FAILURE
        assert (a.starts, b.starts, c.starts) == (2, 2, 0)

    def test_with_memory_the_next_run_starts_at_the_child_that_failed(self):
        a, b = Leaf("a", SUCCESS), Leaf("b", FAILURE)
        tree = Tree(node("SequenceWithMemory", "s", a, b))
        assert tree.tick() == FAILURE
        b.next = SUCCESS
        assert tree.tick() == SUCCESS
        assert (a.starts, b.starts) == (1, 2)
        assert tree.tick() == SUCCESS  # a finished run starts at the first child again
        assert (a.starts, b.starts) == (2, 3)

    def test_with_memory_halted_it_goes_on_at_the_running_child(self):
        a, b = Leaf("a", SUCCESS), Leaf("b")
        tree = Tree(node("SequenceWithMemory", "s", a, b))
        tree.tick()
        tree.halt()
        assert b.halts == 1
        tree.tick()
        assert (a.starts, b.starts) == (1, 2)

    def test_pass_through_runs_its_children_as_a_sequence(self):
        a, b = Leaf("a", SUCCESS), Leaf("b", FAILURE)
        tree = Tree(NODE_LIBRARY["PassThrough"].build("c", "MyCustomNode c", {"anything": "1"}, {}, [a, b]))
        assert tree.tick() == FAILURE
        assert (a.starts, b.starts) == (1, 1)


class TestFallback:
    def test_a_failed_child_passes_on_and_a_success_ends_it(self):
        a, b, c = Leaf("a", FAILURE), Leaf("b"), Leaf("c")
        tree = Tree(node("Fallback", "f", a, b, c))
        assert tree.tick() == RUNNING
        b.next = SUCCESS
        assert tree.tick() == SUCCESS
        assert (a.starts, b.starts, c.starts) == (1, 1, 0)
        assert tree.hooks.reports[-1] == ("f", "succeeded", "child b succeeded")

    def test_all_failed_fails_it(self):
        tree = Tree(node("Fallback", "f", Leaf("a", FAILURE), Leaf("b", FAILURE)))
        assert tree.tick() == FAILURE


class TestReactiveSequence:
    def test_earlier_children_run_again_every_tick_and_the_running_one_goes_on(self):
        condition, action = Leaf("c", SUCCESS), Leaf("a")
        tree = Tree(node("ReactiveSequence", "r", condition, action))
        tree.tick()
        tree.tick()
        tree.tick()
        assert (condition.starts, action.starts, action.ticks) == (3, 1, 3)
        assert tree.hooks.states("c") == ["running", "succeeded"] * 3
        assert tree.hooks.states("a") == ["running"]

    def test_it_asks_to_be_ticked_every_period_while_it_runs(self):
        action = Leaf("a")
        tree = Tree(node("ReactiveSequence", "r", Leaf("c", SUCCESS), action))
        tree.tick()
        assert tree.root in tree.hooks.polled and tree.due()
        action.next = SUCCESS
        assert tree.tick() == SUCCESS
        assert not tree.hooks.watched

    def test_a_check_failing_halts_the_running_child(self):
        condition, action = Leaf("c", SUCCESS), Leaf("a")
        tree = Tree(node("ReactiveSequence", "r", condition, action))
        tree.tick()
        condition.next = FAILURE
        assert tree.tick() == FAILURE
        assert action.halts == 1 and action.status == INVALID
        assert halted_detail(tree, "a") == "halted by ReactiveSequence [r], which failed"
        assert tree.hooks.reports[-1] == ("r", "failed", "child c failed")

    def test_an_earlier_child_running_halts_the_later_one(self):
        condition, action = Leaf("c", SUCCESS), Leaf("a")
        tree = Tree(node("ReactiveSequence", "r", condition, action))
        tree.tick()
        condition.next = RUNNING
        assert tree.tick() == RUNNING
        assert action.halts == 1
        assert halted_detail(tree, "a") == "halted by ReactiveSequence [r]: child c runs"
        assert tree.root.current_child is condition

    def test_while_paused_no_check_runs_again(self):
        condition, action = Leaf("c", SUCCESS), Leaf("a")
        tree = Tree(node("ReactiveSequence", "r", condition, action))
        tree.tick()
        tree.hooks.paused = True
        tree.tick()
        tree.tick()
        assert (condition.starts, action.halts, action.ticks) == (1, 0, 3)
        tree.hooks.paused = False
        tree.tick()
        assert condition.starts == 2


class TestReactiveFallback:
    def test_a_check_succeeding_ends_it_and_halts_the_running_child(self):
        goal_reached, action = Leaf("g", FAILURE), Leaf("a")
        tree = Tree(node("ReactiveFallback", "r", goal_reached, action))
        tree.tick()
        tree.tick()
        assert (goal_reached.starts, action.starts) == (2, 1)
        goal_reached.next = SUCCESS
        assert tree.tick() == SUCCESS
        assert action.halts == 1

    def test_all_failed_fails_it(self):
        tree = Tree(node("ReactiveFallback", "r", Leaf("a", FAILURE), Leaf("b", FAILURE)))
        assert tree.tick() == FAILURE


class TestParallel:
    def test_success_count_reached_halts_the_children_still_running(self):
        a, b, c = Leaf("a", SUCCESS), Leaf("b"), Leaf("c")
        tree = Tree(node("Parallel", "p", a, b, c, success_count="2", failure_count="2"))
        assert tree.tick() == RUNNING
        assert tree.tick() == RUNNING
        assert (a.ticks, b.ticks, c.ticks) == (1, 2, 2)  # a finished child is not ticked again
        b.next = SUCCESS
        assert tree.tick() == SUCCESS
        assert c.halts == 1 and halted_detail(tree, "c") == "halted by Parallel [p], which succeeded"
        assert tree.hooks.reports[-1] == ("p", "succeeded", "2 of 3 children succeeded (success_count 2)")

    def test_by_default_all_must_succeed_and_one_failure_fails_it(self):
        a, b, c = Leaf("a", SUCCESS), Leaf("b", FAILURE), Leaf("c")
        tree = Tree(node("Parallel", "p", a, b, c))
        assert tree.tick() == FAILURE
        assert c.starts == 0  # decided before c was ticked: BT.CPP checks after each child

    def test_success_out_of_reach_fails_it(self):
        a, b, c = Leaf("a", FAILURE), Leaf("b", FAILURE), Leaf("c")
        tree = Tree(node("Parallel", "p", a, b, c, success_count="2", failure_count="3"))
        assert tree.tick() == FAILURE
        assert tree.hooks.reports[-1][2] == "2 of 3 children failed (failure_count 3)"

    def test_thresholds_beyond_its_children_fail_it_at_start_and_are_found_before(self):
        tree = Tree(node("Parallel", "p", Leaf("a"), success_count="3"))
        assert tree.tick() == FAILURE
        assert tree.hooks.reports[-1] == ("p", "failed", "success_count 3 is more than its 1 children: it could "
                                                           "never succeed")
        assert NODE_LIBRARY["Parallel"].check({"failure_count": "4"}, 2) is not None
        assert NODE_LIBRARY["Parallel"].check({"success_count": "-1"}, 2) is None
        assert NODE_LIBRARY["Parallel"].check({"success_count": "two"}, 2) == \
            "port 'success_count': expected a whole number, got 'two'"
        assert NODE_LIBRARY["Parallel"].check({"success_count": "9" * 5000}, 2).startswith(
            "port 'success_count': expected a whole number, got '999")  # never converted: Python refuses such ints
        assert NODE_LIBRARY["RateController"].check({"hz": "1" * 5000}, 1).startswith("port 'hz': expected a finite")
        assert NODE_LIBRARY["Timeout"].check({"msec": "4294967296"}, 1) == \
            "port 'msec': 4294967296 is out of the range of unsigned (0 to 4294967295)"

    def test_parallel_all_runs_every_child_to_its_end(self):
        a, b, c = Leaf("a", FAILURE), Leaf("b"), Leaf("c", SUCCESS)
        tree = Tree(node("ParallelAll", "p", a, b, c, max_failures="2"))
        assert tree.tick() == RUNNING
        assert b.halts == 0
        b.next = SUCCESS
        assert tree.tick() == SUCCESS
        assert a.ticks == 1  # a finished child is not ticked again
        tree = Tree(node("ParallelAll", "p", Leaf("a", FAILURE), Leaf("b", FAILURE), Leaf("c", SUCCESS),
                         max_failures="2"))
        assert tree.tick() == FAILURE
        assert tree.hooks.reports[-1][2] == "2 of 3 children failed (max_failures 2)"


class TestIfThenElse:
    def test_the_condition_runs_once_and_picks_the_branch(self):
        condition, then, otherwise = Leaf("c", SUCCESS), Leaf("t"), Leaf("e")
        tree = Tree(node("IfThenElse", "i", condition, then, otherwise))
        tree.tick()
        tree.tick()
        assert (condition.starts, then.ticks, otherwise.starts) == (1, 2, 0)
        then.next = FAILURE
        assert tree.tick() == FAILURE
        condition.next = FAILURE
        otherwise.next = SUCCESS
        assert tree.tick() == SUCCESS
        assert (condition.starts, otherwise.starts) == (2, 1)

    def test_without_an_else_a_failed_condition_fails_it(self):
        tree = Tree(node("IfThenElse", "i", Leaf("c", FAILURE), Leaf("t")))
        assert tree.tick() == FAILURE


class TestWhileDoElse:
    def test_the_condition_runs_every_tick_and_its_change_halts_the_other_branch(self):
        condition, do, otherwise = Leaf("c", SUCCESS), Leaf("d"), Leaf("e")
        tree = Tree(node("WhileDoElse", "w", condition, do, otherwise))
        tree.tick()
        tree.tick()
        assert (condition.starts, do.starts, do.ticks) == (2, 1, 2)
        assert tree.root in tree.hooks.polled
        condition.next = FAILURE
        assert tree.tick() == RUNNING
        assert do.halts == 1 and otherwise.starts == 1
        assert halted_detail(tree, "d") == "halted by WhileDoElse [w]: condition c no longer holds"
        otherwise.next = SUCCESS
        assert tree.tick() == SUCCESS

    def test_a_running_condition_leaves_the_branch_running(self):
        condition, do = Leaf("c", SUCCESS), Leaf("d")
        tree = Tree(node("WhileDoElse", "w", condition, do))
        tree.tick()
        condition.next = RUNNING
        tree.tick()
        assert do.status == RUNNING and do.halts == 0 and do.ticks == 1

    def test_two_children_and_a_failed_condition_fail_it(self):
        tree = Tree(node("WhileDoElse", "w", Leaf("c", FAILURE), Leaf("d")))
        assert tree.tick() == FAILURE


class TestPipelineSequence:
    def test_earlier_children_run_on_while_later_ones_run(self):
        plan, follow, spin = Leaf("plan"), Leaf("follow"), Leaf("spin")
        tree = Tree(node("PipelineSequence", "p", plan, follow, spin))
        assert tree.tick() == RUNNING and follow.starts == 0
        plan.next = SUCCESS
        tree.tick()
        assert follow.starts == 1
        plan.next = RUNNING  # planning again while the path is followed
        tree.tick()
        tree.tick()
        assert (plan.starts, follow.starts, follow.ticks) == (2, 1, 3)
        assert tree.root.current_child is follow
        follow.next = SUCCESS
        tree.tick()  # plan still running: the pipeline goes on to spin
        assert spin.starts == 1 and plan.status == RUNNING
        assert tree.root in tree.hooks.polled

    def test_a_failure_halts_the_running_children(self):
        plan, follow = Leaf("plan", SUCCESS), Leaf("follow")
        tree = Tree(node("PipelineSequence", "p", plan, follow))
        tree.tick()
        plan.next = FAILURE
        assert tree.tick() == FAILURE
        assert follow.halts == 1

    def test_all_succeeded_halts_an_earlier_child_still_running(self):
        plan, follow = Leaf("plan", SUCCESS), Leaf("follow")
        tree = Tree(node("PipelineSequence", "p", plan, follow))
        tree.tick()
        plan.next = RUNNING
        follow.next = SUCCESS
        assert tree.tick() == SUCCESS
        assert plan.halts == 1


class TestRecoveryNode:
    def test_the_recovery_runs_after_a_failure_then_the_child_again_at_the_next_period(self):
        child, recovery = Leaf("n", FAILURE), Leaf("r", SUCCESS)
        tree = Tree(node("RecoveryNode", "rn", child, recovery, number_of_retries="2"))
        assert tree.tick() == RUNNING
        assert (child.starts, recovery.starts) == (1, 1)
        assert tree.root._wait is EVERY_PERIOD and tree.due()
        child.next = SUCCESS
        assert tree.tick() == SUCCESS
        assert child.starts == 2
        assert tree.hooks.reports[-1] == ("rn", "succeeded", "child n succeeded after 1 recoveries")

    def test_retries_spent_or_the_recovery_failing_fail_it(self):
        child, recovery = Leaf("n", FAILURE), Leaf("r", SUCCESS)
        tree = Tree(node("RecoveryNode", "rn", child, recovery))
        tree.tick()
        assert tree.tick() == FAILURE
        assert (child.starts, recovery.starts) == (2, 1)
        tree = Tree(node("RecoveryNode", "rn", Leaf("n", FAILURE), Leaf("r", FAILURE)))
        assert tree.tick() == FAILURE
        assert tree.hooks.reports[-1] == ("rn", "failed", "recovery r failed")


class TestRoundRobin:
    def test_a_success_ends_it_and_the_next_run_starts_after_it(self):
        a, b, c = Leaf("a", FAILURE), Leaf("b", SUCCESS), Leaf("c", FAILURE)
        tree = Tree(node("RoundRobin", "rr", a, b, c, wrap_around="true"))
        assert tree.tick() == SUCCESS
        assert (a.starts, b.starts, c.starts) == (1, 1, 0)
        a.next = RUNNING
        assert tree.tick() == RUNNING  # c fails, wraps to a
        assert (a.starts, b.starts, c.starts) == (2, 1, 1)

    def test_without_wrap_around_the_last_child_failing_fails_it(self):
        a, b = Leaf("a", SUCCESS), Leaf("b", FAILURE)
        tree = Tree(node("RoundRobin", "rr", a, b))
        assert tree.tick() == SUCCESS
        assert tree.tick() == FAILURE  # starts at b, which fails; a is not tried again
        assert (a.starts, b.starts) == (1, 1)
        assert tree.tick() == SUCCESS  # a new run from the first child
        assert a.starts == 2

    def test_all_failing_fails_it(self):
        tree = Tree(node("RoundRobin", "rr", Leaf("a", FAILURE), Leaf("b", FAILURE), wrap_around="true"))
        assert tree.tick() == FAILURE


class TestEveryControl:
    @pytest.mark.parametrize("name", [name for name, spec in NODE_LIBRARY.items() if spec.category == "control"])
    def test_a_plan_torn_down_cancels_the_running_child_then_the_node(self, name):
        children = [Leaf("a"), Leaf("b"), Leaf("c")][:NODE_LIBRARY[name].max_children or 3]
        tree = Tree(node(name, "n", *children))
        tree.tick()
        tree.hooks.take()
        tree.halt()
        reports = tree.hooks.reports
        assert reports[-1] == ("n", "canceled", "plan cancelled while the op ran")
        assert all(state == "canceled" and detail == "plan cancelled while the op ran"
                   for _op, state, detail in reports)
        assert not tree.hooks.watched

    @pytest.mark.parametrize("name", [name for name, spec in NODE_LIBRARY.items() if spec.category == "control"])
    def test_held_back_while_paused_then_entered_on_resume(self, name):
        children = [Leaf("a", SUCCESS), Leaf("b", SUCCESS), Leaf("c", SUCCESS)][:NODE_LIBRARY[name].max_children or 3]
        tree = Tree(node(name, "n", *children))
        tree.hooks.paused = True
        assert tree.tick() == RUNNING
        assert tree.hooks.reports == [] and all(child.starts == 0 for child in children)
        tree.hooks.paused = False
        tree.tick()
        assert tree.hooks.take()[0] == ("n", "running")


def test_every_node_is_built_lean():
    """No uuid, logger, qualified name or name is made as a node is built: most of a large plan's build cost."""
    for name, spec in NODE_LIBRARY.items():
        children = [Leaf(str(index)) for index in range(spec.min_children)]
        built = spec.build("n", name, {}, {}, children)
        assert not {"id", "logger", "qualified_name", "name", "blackboards"} & vars(built).keys(), name
        assert all(child.parent is built for child in children)
        assert built.name == f"[n] {name}"
