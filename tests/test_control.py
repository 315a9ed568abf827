"""Inspect and control: stop points on every node kind, cancel, meta ops, builtins, thread safety."""
import random
import threading

import pytest
from rtdl_plans import do, envelope, par, seq

import bt_exec

# Pre-order ids of PLAN: 1 seq(root) > 2 do(a), 3 par > [4 do(b), 5 seq > [6 do(c), 7 do(d)]], 8 do(e)
PLAN = seq(do("a"), par(do("b"), seq(do("c"), do("d"), description="inner")), do("e"), description="root")


def states(record):
    return {op["op_id"]: op["state"] for op in record["ops"]}


def finish(ex, plan_id):
    return ex.run_until_complete(plan_id, timeout=10)


class TestStopPoints:
    @pytest.mark.parametrize("op_id, kind", [("2", "do"), ("3", "parallel"), ("5", "sequence"), ("1", "sequence")])
    def test_on_enter_cancels_before_the_op_starts(self, make_executor, events, op_id, kind):
        ex = make_executor({"default": {"duration_s": 0.01}})
        plan_id = ex.submit(PLAN)["plan_id"]
        assert ex.stop_plan_at(plan_id, op_id, "on_enter")["armed"]
        record = finish(ex, plan_id)
        assert events.states(plan_id, op_id) == ["canceled"], "an op stopped on_enter never runs"
        assert record["ops"][int(op_id) - 1]["kind"] == kind
        assert record["ops"][int(op_id) - 1]["detail"] == "stop point on_enter fired: the op never started"
        descendants = {"1": "2345678", "2": "", "3": "4567", "5": "67"}[op_id]
        started = {call.op_id for call in ex.backend.calls}
        assert not started & set(descendants) and op_id not in started
        assert all(states(record)[d] == "pending" for d in descendants)
        assert states(record)["8"] == "pending"
        for ancestor in {"2": "1", "3": "1", "5": "13", "1": ""}[op_id]:
            assert states(record)[ancestor] == "canceled"
        done = events.complete(plan_id)
        assert done["cancelled"] is True and done["any_failed"] is True
        assert record["cancel_reason"] == f"stop point on_enter at op {op_id}"

    @pytest.mark.parametrize("op_id, kind", [("6", "do"), ("5", "sequence"), ("3", "parallel")])
    def test_on_complete_cancels_right_after_the_op_finishes(self, make_executor, events, op_id, kind):
        ex = make_executor({"default": {"duration_s": 0.01}})
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.stop_plan_at(plan_id, op_id, "on_complete")
        record = finish(ex, plan_id)
        assert events.states(plan_id, op_id) == ["running", "canceled"]
        stopped = record["ops"][int(op_id) - 1]
        assert stopped["kind"] == kind and stopped["detail"] == "stop point on_complete fired after the op succeeded"
        if kind == "do":
            assert stopped["result"]["success"] is True, "the finished call's result is kept"
            assert states(record)["7"] == "pending"
        assert states(record)["8"] == "pending" and states(record)["1"] == "canceled"
        assert "8" not in {call.op_id for call in ex.backend.calls}
        assert events.complete(plan_id)["cancelled"] is True

    def test_on_complete_of_a_failed_op_still_stops(self, make_executor):
        ex = make_executor({"ops": {"2": {"outcome": "failure"}}})
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.stop_plan_at(plan_id, "2", "on_complete")
        record = finish(ex, plan_id)
        assert record["ops"][1]["state"] == "canceled" and record["ops"][1]["result"]["success"] is False
        assert record["ops"][1]["detail"] == "stop point on_complete fired after the op failed"

    def test_stop_in_one_parallel_branch_cancels_the_running_sibling(self, make_executor, events):
        ex = make_executor({"ops": {"4": {"duration_s": 30}}, "default": {"duration_s": 0.01}})
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.stop_plan_at(plan_id, "7", "on_enter")
        record = finish(ex, plan_id)
        assert states(record) == {"1": "canceled", "2": "succeeded", "3": "canceled", "4": "canceled", "5": "canceled",
                                  "6": "succeeded", "7": "canceled", "8": "pending"}
        assert len(ex.backend.cancelled) == 1 and not ex.backend.active_calls()

    def test_arming_twice_is_idempotent_and_counted_once(self, make_executor):
        ex = make_executor({"default": {"duration_s": 1}})
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.stop_plan_at(plan_id, "6", "on_enter")
        ex.stop_plan_at(plan_id, "6", "on_enter")
        assert ex.get_all_plans()["plans"][0]["stop_points"] == 1
        ex.stop_plan_at(plan_id, "6", "on_complete")
        assert ex.get_all_plans()["plans"][0]["stop_points"] == 2
        ops = {op["op_id"]: op["stop_point"] for op in ex.get_plan_status(plan_id)["ops"]}
        assert ops["6"] == "on_enter" and ops["7"] is None

    def test_armed_while_running_from_another_thread(self, make_executor, events):
        ex = make_executor({"ops": {"2": {"duration_s": 0.3}}})
        ex.start()
        plan_id = ex.submit(PLAN)["plan_id"]
        threading.Thread(target=ex.stop_plan_at, args=(plan_id, "8", "on_enter")).start()
        record = finish(ex, plan_id)
        assert states(record)["8"] == "canceled" and states(record)["4"] == "succeeded"

    def test_arming_an_op_already_past_says_it_will_not_fire(self, make_executor):
        ex = make_executor({"ops": {"4": {"duration_s": 30}}})
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.tick_once()
        answer = ex.stop_plan_at(plan_id, "2", "on_enter")
        assert answer["success"] and "already succeeded" in answer["message"]

    @pytest.mark.parametrize("args, match", [
        (("1", "99", "on_enter"), "has no op '99'"),
        (("1", "2", "halt"), "invalid when 'halt'"),
        (("1", "", "on_enter"), "op_id must be a non-empty string"),
        (("", "2", "on_enter"), "plan_id must be a non-empty string"),
        (("42", "2", "on_enter"), "no plan '42' was ever submitted"),
        ((1, True, "on_enter"), "stop_plan_at: op_id must be a non-empty string or a non-negative integer, got true"),
        ((-1, 2, "on_enter"), "stop_plan_at: plan_id must be .* got -1"),
        ((1, 2.0, "on_enter"), "stop_plan_at: op_id must be .* got 2.0"),
        ((2**63, 2, "on_enter"), "plan_id must be .* got 9223372036854775808"),
    ])
    def test_bad_stop_requests_raise_and_leave_the_plan_untouched(self, make_executor, args, match):
        ex = make_executor({"default": {"duration_s": 0.01}})
        plan_id = ex.submit(PLAN)["plan_id"]
        with pytest.raises(bt_exec.ControlError, match=match):
            ex.stop_plan_at(*args)
        assert ex.get_all_plans()["plans"][0]["stop_points"] == 0
        assert finish(ex, plan_id)["outcome"] == "succeeded"

    def test_integer_ids_are_taken_as_their_decimal_text_by_every_method(self, make_executor):
        ex = make_executor({"default": {"duration_s": 0.01}})
        plan_id = int(ex.submit(PLAN)["plan_id"])
        assert ex.stop_plan_at(plan_id, 8, "on_enter")["armed"]
        assert ex.get_plan_status(plan_id)["plan_id"] == "1" and ex.get_plan_tree(plan_id)["ops"][7]["stop_point"]
        assert ex.get_plan_feedback(plan_id)["plan_id"] == "1"
        record = ex.run_until_complete(plan_id, timeout=10)
        assert record["outcome"] == "cancelled" and ex.get_plan_result(plan_id) == record
        assert ex.wait_for_plan(plan_id, 0)["plan_id"] == "1"
        assert ex.cancel_plan(plan_id, wait_ms=0)["message"] == "plan '1' already finished; nothing to cancel"

    def test_stop_at_a_finished_plan_is_a_success_no_op(self, make_executor):
        ex = make_executor()
        plan_id = ex.submit(PLAN)["plan_id"]
        finish(ex, plan_id)
        answer = ex.stop_plan_at(plan_id, "2", "on_enter")
        assert answer["success"] and not answer["armed"] and "not running" in answer["message"]


class TestInspect:
    def test_only_in_flight_plans_are_listed(self, make_executor):
        ex = make_executor({"ops": {"2": {"duration_s": 30}}})
        long = ex.submit(envelope(PLAN, "long one"))["plan_id"]
        short = ex.submit(seq(do()))["plan_id"]
        listing = ex.get_all_plans()
        assert listing["count"] == 2
        assert listing["plans"][0] == {"plan_id": long, "description": "long one", "op_count": 8, "cancelled": False,
                                       "paused": False, "stop_points": 0}
        finish(ex, short)
        assert [p["plan_id"] for p in ex.get_all_plans()["plans"]] == [long]

    def test_status_of_a_live_plan_and_errors_for_others(self, make_executor):
        ex = make_executor({"ops": {"6": {"duration_s": 30}}})
        plan_id = ex.submit(PLAN)["plan_id"]
        for _ in range(3):
            ex.tick_once()
        status = ex.get_plan_status(plan_id)
        assert status["running"] and not status["cancelled"]
        assert {op["op_id"]: op["state"] for op in status["ops"]} == {
            "1": "running", "2": "succeeded", "3": "running", "4": "succeeded", "5": "running", "6": "running",
            "7": "pending", "8": "pending"}
        assert [op["kind"] for op in status["ops"]][:3] == ["sequence", "do", "parallel"]
        ex.cancel_plan(plan_id)
        with pytest.raises(bt_exec.ControlError, match="get_all_plans"):
            ex.get_plan_status(plan_id)
        with pytest.raises(bt_exec.ControlError, match="was ever submitted"):
            ex.get_plan_status("12")
        with pytest.raises(bt_exec.ControlError):
            ex.get_plan_status("")
        with pytest.raises(bt_exec.ControlError, match="still running"):
            ex.get_plan_result(ex.submit(PLAN)["plan_id"])


class TestCancel:
    def test_cancel_while_a_call_runs(self, make_executor, events):
        ex = make_executor({"ops": {"6": {"duration_s": 30}}})
        plan_id = ex.submit(PLAN)["plan_id"]
        ex.tick_once()
        answer = ex.cancel_plan(plan_id, wait_ms=1000)
        assert answer["finished"] and "finished cancelled" in answer["message"]
        record = ex.get_plan_result(plan_id)
        assert states(record) == {"1": "canceled", "2": "succeeded", "3": "canceled", "4": "succeeded",
                                  "5": "canceled", "6": "canceled", "7": "pending", "8": "pending"}
        assert list(ex.backend.cancelled) == ["sim-1"] and not ex.backend.active_calls()
        assert events.complete(plan_id) | {} and events.complete(plan_id)["any_failed"]
        order = [(e["op_id"], e["state"]) for e in events.of(plan_id) if e.get("state") == "canceled"]
        assert order == [("6", "canceled"), ("5", "canceled"), ("3", "canceled"), ("1", "canceled")]

    def test_cancel_before_the_first_tick_leaves_everything_pending(self, make_executor, events):
        ex = make_executor()
        plan_id = ex.submit(PLAN)["plan_id"]
        assert ex.cancel_plan(plan_id, wait_ms=0)["finished"]
        assert set(states(ex.get_plan_result(plan_id)).values()) == {"pending"}
        assert [e["event"] for e in events.of(plan_id)] == ["plan_started", "plan_complete"]

    def test_cancel_with_the_tick_loop_waits_for_the_teardown(self, make_executor):
        ex = make_executor({"default": {"duration_s": 30}})
        ex.start()
        plan_id = ex.submit(PLAN)["plan_id"]
        answer = ex.cancel_plan(plan_id, wait_ms=2000)
        assert answer["finished"] and ex.get_plan_result(plan_id)["cancelled"]

    def test_cancel_of_finished_and_unknown_plans(self, make_executor):
        ex = make_executor()
        plan_id = ex.submit(seq(do()))["plan_id"]
        finish(ex, plan_id)
        assert ex.cancel_plan(plan_id)["message"] == f"plan '{plan_id}' already finished; nothing to cancel"
        with pytest.raises(bt_exec.ControlError):
            ex.cancel_plan("99")
        with pytest.raises(bt_exec.ControlError):
            ex.cancel_plan(plan_id, wait_ms=-5)

    def test_cancel_all(self, make_executor):
        ex = make_executor({"default": {"duration_s": 30}})
        ids = [ex.submit(PLAN)["plan_id"] for _ in range(3)]
        ex.tick_once()
        answer = ex.cancel_all(wait_ms=1000)
        assert answer["count"] == 3 and answer["finished"] and answer["plan_ids"] == ids
        assert ex.get_all_plans()["count"] == 0 and not ex.backend.active_calls()


class TestMetaOps:
    def test_meta_ops_are_control_and_create_no_plan(self, make_executor):
        ex = make_executor({"default": {"duration_s": 30}})
        target = ex.submit(PLAN)["plan_id"]
        armed = ex.submit({"op": "stop_plan_at", "plan_id": target, "target_op_id": "8", "when": "on_enter"})
        assert armed["accepted"] and armed["verdict"] == "control" and armed["plan_id"] is None
        assert ex.get_all_plans()["plans"][0]["stop_points"] == 1
        cancelled = ex.submit(envelope({"op": "cancel_plan", "plan_id": target, "wait_ms": 500}, ""), run_id="c1")
        assert cancelled["accepted"] and cancelled["result"]["finished"]
        assert ex.submit({"op": "cancel_plan", "plan_id": target}, run_id="c1") == cancelled
        assert ex.submit(seq(do()))["plan_id"] == "2", "meta ops consumed no plan id"

    def test_meta_op_on_an_unknown_plan_is_refused_with_a_reason(self, make_executor):
        answer = make_executor().submit({"op": "cancel_plan", "plan_id": "5"})
        assert not answer["accepted"] and answer["verdict"] == "control" and "was ever submitted" in answer["message"]


class TestBuiltins:
    def test_a_plan_can_inspect_and_stop_another_plan(self, make_executor, events):
        ex = make_executor({"caps": {"sim.slow": {"duration_s": 30}}})
        target = ex.submit(seq(do("long", cap="sim.slow"), do("never")))["plan_id"]
        ex.tick_once()
        control = seq(
            do("list", cap="executor.builtin_get_all_plans"),
            do("inspect", cap="executor.builtin_get_plan_status", args={"plan_id": target}),
            do("stop", cap="executor.builtin_stop_plan_at", args={"plan_id": target, "op_id": "3", "when": "on_enter"}),
            do("cancel", cap="executor.builtin_cancel_plan", args={"plan_id": target, "wait_ms": 2000}),
        )
        control_id = ex.submit(control)["plan_id"]
        assert [p["plan_id"] for p in ex.get_all_plans()["plans"]] == [target], "control-only plans are not listed"
        record = finish(ex, control_id)
        outputs = [op["result"]["output"] for op in record["ops"][1:]]
        assert outputs[0]["count"] == 1 and outputs[0]["plans"][0]["plan_id"] == target
        assert outputs[1]["ops"][1]["state"] == "running"
        assert outputs[2]["armed"] is True
        assert outputs[3] == {"plan_id": target, "finished": True, "message": "all targets finished"}
        assert ex.get_plan_result(target)["cancelled"] and not ex.backend.active_calls()

    def test_cancel_all_spares_control_only_plans(self, make_executor):
        ex = make_executor({"default": {"duration_s": 30}})
        work = ex.submit(PLAN)["plan_id"]
        control = ex.submit(seq(do(cap="executor.builtin_cancel_all_plans", args={"wait_ms": 2000})))["plan_id"]
        record = finish(ex, control)
        assert record["outcome"] == "succeeded" and record["control_only"]
        assert record["ops"][1]["result"]["output"]["plan_ids"] == [work]
        assert ex.get_plan_result(work)["cancelled"]

    def test_builtin_errors_fail_the_op_with_the_reason(self, make_executor):
        ex = make_executor()
        plan = seq(do(cap="executor.builtin_get_plan_status", args={"plan_id": "40"}))
        record = finish(ex, ex.submit(plan)["plan_id"])
        assert record["outcome"] == "failed" and "was ever submitted" in record["ops"][1]["result"]["error"]

    def test_arena_builtin_contracts_are_served_in_process(self, make_executor):
        ex = make_executor()
        arena = {"root_index": 0, "nodes": [
            {"node_kind": 0, "children": [1], "op_id": "1", "description": "look"},
            {"node_kind": 2, "children": [], "op_id": "2", "description": "list",
             "call": {"provider_id": "executor", "contract_id": "robonix/system/executor/builtin/get_all_plans",
                      "args_json": "{}"}}]}
        record = finish(ex, ex.submit(arena)["plan_id"])
        assert record["ops"][1]["result"]["output"] == {"count": 0, "plans": []} and not ex.backend.calls


class TestThreadSafety:
    def test_many_threads_submit_stop_cancel_and_inspect_while_the_loop_ticks(self, make_executor, events):
        # Every submit must be accepted (the op ids below are derived from plan ids): room for all 90.
        ex = make_executor({"default": {"duration_s": 0.005}, "caps": {"sim.slow": {"duration_s": 0.05}}},
                           max_plans=100)
        ex.start()
        submitted = []
        errors = []
        lock = threading.Lock()

        def worker(seed):
            rng = random.Random(seed)
            for _ in range(15):
                answer = ex.submit(seq(do(), par(do(cap="sim.slow"), do()), do()))
                with lock:
                    submitted.append(answer["plan_id"])
                plan_id = rng.choice(submitted)
                action = rng.random()
                try:
                    if action < 0.3:
                        ex.stop_plan_at(plan_id, str(int(plan_id) * 6 - rng.randrange(6)),
                                        rng.choice(["on_enter", "on_complete"]))
                    elif action < 0.5:
                        ex.cancel_plan(plan_id, wait_ms=rng.choice([0, 50]))
                    elif action < 0.7:
                        ex.get_plan_status(plan_id)
                    else:
                        ex.get_all_plans()
                except bt_exec.ControlError as exc:
                    if "get_plan_status" not in str(exc) and "has no op" not in str(exc):
                        errors.append(exc)

        threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for plan_id in submitted:
            ex.run_until_complete(plan_id, timeout=20)
        assert not errors
        assert ex.get_all_plans()["count"] == 0 and not ex.backend.active_calls()
        for plan_id in submitted:
            mine = events.of(plan_id)
            assert mine[0]["event"] == "plan_started" and mine[-1]["event"] == "plan_complete"
            events.complete(plan_id)
            for record in ex.get_plan_result(plan_id)["ops"]:
                assert record["state"] not in ("running", "paused")


def test_a_stop_in_one_branch_keeps_later_branches_from_starting(make_executor, events):
    ex = make_executor()
    plan_id = ex.submit(seq(par(do("first"), do("second"), do("third"))))["plan_id"]
    ex.stop_plan_at(plan_id, "3", "on_enter")
    record = finish(ex, plan_id)
    assert states(record) == {"1": "canceled", "2": "canceled", "3": "canceled", "4": "pending", "5": "pending"}
    assert not ex.backend.calls and events.states(plan_id, "4") == []


def test_run_until_complete_returns_after_plan_complete_was_delivered(make_executor):
    ex = make_executor({"default": {"duration_s": 0.01}})
    ex.start()
    delivered = []
    ex.subscribe(lambda event: event["event"] == "plan_complete" and delivered.append(event["plan_id"]))
    for _ in range(20):
        plan_id = ex.submit(seq(do()))["plan_id"]
        ex.run_until_complete(plan_id, timeout=5)
        assert plan_id in delivered


class TestReentrancy:
    """Subscribers run inside the tick: control calls from them must never deadlock."""

    def test_cancel_from_a_subscriber_during_a_cancel_teardown(self, make_executor):
        ex = make_executor({"default": {"duration_s": 5}})
        plan_id = ex.submit(seq(do()))["plan_id"]
        answers = []
        ex.subscribe(lambda e: e["event"] == "plan_started" and answers.append(ex.cancel_plan(plan_id)))
        assert ex.cancel_plan(plan_id)["finished"]
        assert answers[0]["finished"] is False and "after the tick in progress" in answers[0]["message"]

    def test_waiting_or_closing_from_a_subscriber_is_refused(self, make_executor):
        ex = make_executor({"default": {"duration_s": 0.01}})
        plan_id = ex.submit(seq(do()))["plan_id"]
        errors = []

        def misbehave(event):
            for call in (lambda: ex.run_until_complete(plan_id), ex.close):
                try:
                    call()
                except bt_exec.ControlError as exc:
                    errors.append(str(exc))

        ex.subscribe(misbehave)
        ex.tick_once()
        assert errors and all("inside a tick" in e for e in errors)
        assert finish(ex, plan_id)["outcome"] == "succeeded"


def test_behaviour_trees_lists_in_flight_task_plans(make_executor):
    ex = make_executor({"default": {"duration_s": 30}})
    work = ex.submit(PLAN)["plan_id"]
    ex.submit(seq(do(cap="executor.builtin_get_all_plans")))
    trees = ex.behaviour_trees()
    assert list(trees) == [work] and trees[work].name.startswith("[1] root")
    ex.cancel_plan(work)
    assert work not in ex.behaviour_trees()
