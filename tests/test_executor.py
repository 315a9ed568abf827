"""Executing plans: semantics of sequence/parallel/do, events, results, ids, idempotency, faults."""
import json
import threading
import time

import pytest
from rtdl_plans import do, envelope, par, seq

import bt_exec
from bt_exec import CallStatus


def run(executor, source, **kwargs):
    answer = executor.submit(source, **kwargs)
    assert answer["accepted"], answer
    return answer["plan_id"], executor.run_until_complete(answer["plan_id"], timeout=10)


def states(record):
    return {op["op_id"]: op["state"] for op in record["ops"]}


class TestSemantics:
    def test_sequence_is_fail_fast_and_never_starts_later_siblings(self, make_executor, events):
        ex = make_executor({"caps": {"sim.fail": {"outcome": "failure", "error": "broken gripper"}}})
        plan_id, record = run(ex, seq(do("a"), do("b", cap="sim.fail"), do("c"), par(do("d"))))
        assert states(record) == {"1": "failed", "2": "succeeded", "3": "failed", "4": "pending", "5": "pending",
                                  "6": "pending"}
        assert [call.op_id for call in ex.backend.calls] == ["2", "3"]
        assert record["outcome"] == "failed" and record["any_failed"] and not record["cancelled"]
        failed = [e for e in events.of(plan_id) if e.get("op_id") == "3" and e["state"] == "failed"][0]
        assert failed["result"] == {"success": False, "output": {"sim": True, "cap": "sim.fail"},
                                    "error": "broken gripper", "cap": "sim.fail", "call_id": f"{plan_id}:3",
                                    "event": "failure"}
        root_done = [e for e in events.of(plan_id) if e.get("op_id") == "1" and e["state"] == "failed"][0]
        assert root_done["detail"] == "child 3 failed after 1 of 4 succeeded; 2 skipped"

    def test_parallel_waits_for_all_and_never_cancels_siblings(self, make_executor, events):
        ex = make_executor({"ops": {"3": {"outcome": "failure", "duration_s": 0.0}, "4": {"duration_s": 0.2}}})
        plan_id, record = run(ex, seq(par(do("fails fast"), do("slow but fine")), do("after")))
        assert states(record) == {"1": "failed", "2": "failed", "3": "failed", "4": "succeeded", "5": "pending"}
        assert not ex.backend.cancelled
        par_states = events.states(plan_id, "2")
        assert par_states == ["running", "failed"]
        order = [(e["op_id"], e["state"]) for e in events.of(plan_id) if e["event"] == "node_state"]
        assert order.index(("4", "succeeded")) < order.index(("2", "failed"))

    def test_successful_plan_events_are_in_order(self, make_executor, events):
        ex = make_executor({"default": {"duration_s": 0.01}})
        plan_id, record = run(ex, envelope(seq(do("a"), par(do("b"), do("c"))), "demo"))
        kinds = [e["event"] for e in events.of(plan_id)]
        assert kinds[0] == "plan_started" and kinds[-1] == "plan_complete" and kinds.count("plan_complete") == 1
        for op_id in ("1", "2", "3", "4", "5"):
            assert events.states(plan_id, op_id) == ["running", "succeeded"]
        assert events.complete(plan_id)["any_failed"] is False and record["outcome"] == "succeeded"
        assert events.of(plan_id)[0]["description"] == "demo"
        seqs = [e["seq"] for e in events.of(plan_id)]
        assert seqs == sorted(seqs)

    def test_empty_sequence_plan_succeeds_with_root_description(self, make_executor, events):
        ex = make_executor()
        plan_id, record = run(ex, envelope(seq(description="idle"), ""))
        assert record["outcome"] == "succeeded" and record["description"] == "idle"
        assert events.of(plan_id)[0]["description"] == "idle"

    def test_sim_list_outcomes_and_timeout_state(self, make_executor):
        ex = make_executor({"caps": {"sim.flaky": {"outcome": ["failure", "success"]},
                                     "sim.slow": {"outcome": "timeout"}}})
        _, first = run(ex, seq(do(cap="sim.flaky")))
        _, second = run(ex, seq(do(cap="sim.flaky")))
        _, third = run(ex, seq(do(cap="sim.flaky")))
        assert [first["outcome"], second["outcome"], third["outcome"]] == ["failed", "succeeded", "succeeded"]
        _, timed_out = run(ex, seq(do(cap="sim.slow")))
        assert [op["state"] for op in timed_out["ops"]] == ["failed", "timeout"]

    def test_arena_plan_runs_with_its_own_ids_and_call_ids(self, make_executor, events):
        ex = make_executor()
        arena = {"plan_id": "77", "root_index": 0, "nodes": [
            {"node_kind": 0, "children": [1], "op_id": "4", "description": "run"},
            {"node_kind": 2, "children": [], "op_id": "5", "description": "echo",
             "call": {"call_id": "2:0", "provider_id": "executor", "contract_id": "robonix/x/run_command",
                      "args_json": "{\"command\": \"echo hi\"}"}}]}
        plan_id, record = run(ex, arena)
        assert states(record) == {"4": "succeeded", "5": "succeeded"}
        assert ex.backend.calls[-1].args == {"command": "echo hi"}
        done = [e for e in events.of(plan_id) if e.get("op_id") == "5" and e["state"] == "succeeded"][0]
        assert done["result"]["call_id"] == "2:0" and done["result"]["cap"] == "robonix/x/run_command"
        assert record["input"]["plan_id"] == "77" and plan_id == "1"

    def test_result_record_has_states_results_and_timings(self, make_executor):
        ex = make_executor({"default": {"duration_s": 0.02}})
        plan_id, record = run(ex, envelope(seq(do("a")), "timed"))
        assert record["plan_id"] == plan_id and record["description"] == "timed"
        assert record["duration_s"] >= 0.02 and record["ended_at"] >= record["started_at"]
        leaf = record["ops"][1]
        assert leaf["result"]["success"] and leaf["ended_at"] - leaf["started_at"] >= 0.02
        assert record["input"]["content"] == "text for the user"
        record["ops"][0]["state"] = "edited"
        assert ex.get_plan_result(plan_id)["ops"][0]["state"] == "succeeded"


class TestIdentity:
    def test_plan_ids_and_tree_op_ids_continue_across_plans(self, make_executor):
        ex = make_executor()
        first = ex.submit(seq(do(), do()))
        refused = ex.submit(seq(do(cap="bad")))
        second = ex.submit(seq(do()))
        assert (first["plan_id"], second["plan_id"]) == ("1", "2") and refused["plan_id"] is None
        assert first["root_op_id"] == "1" and second["root_op_id"] == "4"
        assert [op["op_id"] for op in ex.get_plan_status("2")["ops"]] == ["4", "5"]

    def test_same_run_id_returns_the_same_answer_and_runs_nothing_again(self, make_executor):
        ex = make_executor()
        first = ex.submit(seq(do()), run_id="r-1")
        again = ex.submit(seq(do(), do()), run_id="r-1")
        assert again == first and first["run_id"] == "r-1"
        ex.run_until_complete(first["plan_id"])
        assert ex.submit(seq(do()), run_id="r-1") == first
        assert len(ex.backend.calls) == 1
        assert ex.submit(seq(do(cap="bad")), run_id="r-2") == ex.submit(seq(do()), run_id="r-2")

    def test_concurrent_submits_of_one_run_id_make_one_plan(self, make_executor):
        ex = make_executor({"default": {"duration_s": 0.05}})
        answers = []
        threads = [threading.Thread(target=lambda: answers.append(ex.submit(seq(do()), run_id="same")))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len({a["plan_id"] for a in answers}) == 1 and ex.get_all_plans()["count"] == 1

    @pytest.mark.parametrize("run_id", ["", "  ", 7])
    def test_bad_run_id_is_refused(self, make_executor, run_id):
        answer = make_executor().submit(seq(do()), run_id=run_id)
        assert not answer["accepted"] and answer["issues"][0]["code"] == "bad_run_id"

    def test_refusal_says_where_and_keeps_every_issue(self, make_executor):
        answer = make_executor().submit(json.dumps(seq(do(cap="x"), do(description=""))))
        assert answer["verdict"] == "invalid" and not answer["accepted"]
        assert [i["path"] for i in answer["issues"]] == ["/children/0/cap", "/children/1/description"]
        assert "/children/0/cap" in answer["message"] and "+1 more" in answer["message"]

    def test_catalog_on_the_executor_refuses_unknown_caps(self, make_executor):
        ex = make_executor(catalog={"sim.known": {"args_schema": {"type": "object"}}})
        assert ex.submit(seq(do(cap="sim.known")))["accepted"]
        answer = ex.submit(seq(do(cap="sim.unknown")))
        assert answer["issues"][0]["code"] == "unknown_cap"


class FaultyBackend:
    """A backend that misbehaves in the way named by the cap."""

    def __init__(self):
        self.cancel_calls = 0

    def start(self, call):
        if call.cap == "fault.raise_start":
            raise RuntimeError("driver crashed")
        if call.cap == "fault.garbage_start":
            return 42
        if call.cap == "fault.ok":
            return CallStatus("SUCCEEDED")
        return call.cap

    def status(self, run_id):
        if run_id == "fault.raise_status":
            raise ConnectionError("link down")
        if run_id == "fault.garbage_status":
            return {"state": "SUCCEEDED"}
        if run_id == "fault.unknown_state":
            return CallStatus("EXPLODED")
        if run_id == "fault.paused_once":
            self.paused_once = getattr(self, "paused_once", 0) + 1
            return {1: CallStatus("PAUSED", detail="waiting for operator"), 2: CallStatus("RUNNING")}.get(
                self.paused_once, CallStatus("SUCCEEDED", output={"ok": 1}))
        return CallStatus("RUNNING")

    def cancel(self, run_id):
        self.cancel_calls += 1
        raise RuntimeError("cancel failed too")


class TestBackendFaults:
    @pytest.mark.parametrize("cap, error", [
        ("fault.raise_start", "backend raised RuntimeError: driver crashed"),
        ("fault.garbage_start", "backend returned 42 from start"),
        ("fault.raise_status", "backend status raised ConnectionError: link down"),
        ("fault.garbage_status", "backend returned {'state': 'SUCCEEDED'} from status"),
        ("fault.unknown_state", "from status, expected a CallStatus"),
    ])
    def test_a_misbehaving_backend_fails_that_op_only(self, events, cap, error):
        ex = bt_exec.Executor(backend=FaultyBackend())
        ex.subscribe(events)
        plan_id, record = run(ex, seq(do(cap=cap)))
        assert [op["state"] for op in record["ops"]] == ["failed", "failed"]
        assert error in record["ops"][1]["result"]["error"]
        _, fine = run(ex, seq(do(cap="fault.ok")))
        assert fine["outcome"] == "succeeded"

    def test_paused_state_is_reported_then_running_again(self, events):
        ex = bt_exec.Executor(backend=FaultyBackend())
        ex.subscribe(events)
        plan_id, record = run(ex, seq(do(cap="fault.paused_once")))
        assert events.states(plan_id, "2") == ["running", "paused", "running", "succeeded"]
        paused = [e for e in events.of(plan_id) if e.get("state") == "paused"][0]
        assert paused["detail"] == "waiting for operator"

    def test_a_cancel_that_raises_still_tears_the_plan_down(self, events):
        backend = FaultyBackend()
        ex = bt_exec.Executor(backend=backend)
        ex.subscribe(events)
        plan_id = ex.submit(seq(do(cap="fault.runs_forever")))["plan_id"]
        ex.tick_once()
        assert ex.cancel_plan(plan_id)["finished"]
        assert backend.cancel_calls == 1
        assert events.states(plan_id, "2") == ["running", "canceled"]

    def test_a_raising_subscriber_breaks_nothing(self, make_executor, events):
        ex = make_executor()
        seen = []
        ex.subscribe(lambda event: (_ for _ in ()).throw(ValueError("bad sink")))
        ex.subscribe(seen.append)
        _, record = run(ex, seq(do()))
        assert record["outcome"] == "succeeded" and seen[-1]["event"] == "plan_complete"

    def test_unsubscribe(self, make_executor):
        ex = make_executor()
        seen = []
        unsubscribe = ex.subscribe(seen.append)
        run(ex, seq(do()))
        count = len(seen)
        unsubscribe()
        run(ex, seq(do()))
        assert count > 0 and len(seen) == count


class TestJournal:
    def test_jsonl_journal_writes_every_event(self, make_executor, tmp_path, events):
        ex = make_executor()
        journal = bt_exec.JsonlJournal(tmp_path / "events.jsonl")
        ex.subscribe(journal)
        plan_id, _ = run(ex, seq(do(), do()))
        journal.close()
        header, *lines = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
        assert header["event"] == "journal_run" and header["journal_run_id"] == journal.run_id
        assert [line["seq"] for line in lines] == [e["seq"] for e in events.of(plan_id)]
        assert lines[-1]["event"] == "plan_complete"


class TestTickLoop:
    def test_start_runs_plans_without_manual_ticks(self, make_executor):
        ex = make_executor({"default": {"duration_s": 0.02}})
        ex.start()
        plan_id = ex.submit(seq(do(), par(do(), do())))["plan_id"]
        assert ex.run_until_complete(plan_id, timeout=5)["outcome"] == "succeeded"
        ex.stop()
        assert not any(thread.name == "bt_exec-tick" for thread in threading.enumerate())

    def test_run_until_complete_times_out_with_an_error(self, make_executor):
        ex = make_executor({"default": {"duration_s": 5}})
        plan_id = ex.submit(seq(do()))["plan_id"]
        with pytest.raises(bt_exec.ControlError, match="still running"):
            ex.run_until_complete(plan_id, timeout=0.05)

    def test_compiling_a_submit_never_stalls_running_plans(self, make_executor, monkeypatch):
        from bt_exec.compilers.dialects import Rtdl
        ex = make_executor({"default": {"duration_s": 0.01}})
        ex.start()
        running = ex.submit(seq(do(), do(), do()))["plan_id"]
        release = threading.Event()
        real_compile = Rtdl.compile

        def slow_compile(self, plan, *args):
            release.wait(5)
            return real_compile(self, plan, *args)

        monkeypatch.setattr(Rtdl, "compile", slow_compile)
        submitter = threading.Thread(target=ex.submit, args=(seq(do()),))
        submitter.start()
        assert ex.run_until_complete(running, timeout=3)["outcome"] == "succeeded"
        assert submitter.is_alive()  # still compiling while the other plan ran to its end
        release.set()
        submitter.join()

    def test_plans_at_the_depth_limit_run_and_cancel(self, make_executor):
        def chain(depth):
            node = do("leaf")
            for level in range(depth - 1):
                node = (seq if level % 2 else par)(node)
            return node
        ex = make_executor({"default": {"duration_s": 0.01}})
        _, record = run(ex, chain(128))
        assert record["outcome"] == "succeeded" and len(record["ops"]) == 128
        ex2 = make_executor({"default": {"duration_s": 10}})
        plan_id = ex2.submit(chain(128))["plan_id"]
        ex2.tick_once()
        assert ex2.cancel_plan(plan_id)["finished"]
        assert set(states(ex2.get_plan_result(plan_id)).values()) == {"canceled"}
        assert not ex2.backend.active_calls()
        with pytest.raises(bt_exec.PlanError):
            bt_exec.load(chain(129))


def test_sim_durations_are_real_time(make_executor):
    ex = make_executor({"default": {"duration_s": 0.1}})
    began = time.monotonic()
    run(ex, seq(do(), do()))
    assert time.monotonic() - began >= 0.2


def test_the_sims_instant_answers_are_kept_per_cap_yet_follow_the_script_and_a_world_given_later():
    from qwen3_graphs import scene

    sim = bt_exec.SimBackend({"ops": {"3": {"outcome": "failure"}}, "caps": {"arm.out": {"output": {"x": 1}}}})

    def call(op_id, cap):
        return sim.start(bt_exec.CapabilityCall("1", op_id, cap, {}, cap.split(".")[0], f"1:{op_id}"))

    first = call("1", "sim.act")
    assert first.state == "SUCCEEDED" and call("2", "sim.act") is first  # answered from the memo
    assert call("3", "sim.act").state == "FAILED"  # an op's own entry goes first
    assert call("4", "arm.out").output == {"x": 1} and call("5", "arm.out").output == {"x": 1}
    assert [made.op_id for made in sim.calls] == ["1", "2", "3", "4", "5"]  # every call is in the history
    grab = call("6", "grab")
    sim.world = bt_exec.SimBackend.in_scene(scene=bt_exec.compilers.scene_of(scene())).world  # a new scene
    in_world = call("7", "grab")
    assert in_world is not grab and "state" in in_world.output


@pytest.mark.parametrize("options, named", [
    ({"states": ["done"]}, "states must be a list of op states"), ({"states": "running"}, "states must be a list"),
    ({"op_ids": [True]}, "op_ids must be a non-empty string or a non-negative integer, got true"),
    ({"summary": 1}, "summary must be true or false"), ({"max_chars": 999}, "max_chars must be an integer from 1000"),
])
def test_a_bad_view_option_is_refused_naming_the_method_and_the_option(options, named):
    ex = bt_exec.Executor(bt_exec.SimBackend())
    plan_id = ex.submit(envelope(do()))["plan_id"]
    for method in (ex.get_plan_status, ex.get_plan_result, ex.wait_for_plan):
        with pytest.raises(bt_exec.ControlError, match=f"^{method.__name__}: {named}"):
            method(plan_id, **options)


def test_wait_for_plan_only_waits_while_the_tick_loop_moves_the_plan():
    ex = bt_exec.Executor(bt_exec.SimBackend({"default": {"duration_s": 0.05}}))
    plan_id = ex.submit(envelope(seq(do("a"), do("b"))))["plan_id"]
    started = time.monotonic()
    assert ex.wait_for_plan(plan_id, 0.2) == {"plan_id": plan_id, "finished": False,
                                              "message": f"plan '{plan_id}' still running after 0.2 s; call "
                                                         "wait_for_plan again, or get_plan_status to see its ops"}
    assert time.monotonic() - started >= 0.2 and ex.get_plan_status(plan_id)["ops"][1]["state"] == "pending"
    ex.start()
    try:
        record = ex.wait_for_plan(plan_id, 10**9, summary=True)  # capped at a minute; done long before
        assert record["outcome"] == "succeeded" and record["counts"] == {"succeeded": 3} and record["ops"] == []
    finally:
        ex.close()
    with pytest.raises(bt_exec.ControlError, match="wait_for_plan: timeout_s must be a non-negative number"):
        ex.wait_for_plan(plan_id, float("nan"))


def test_set_scene_replaces_the_scene_graphs_are_checked_against_once_no_graph_holds_the_robot():
    from qwen3_graphs import envelope as graph_envelope
    from qwen3_graphs import scene, vacuum_to_work

    ex = bt_exec.Executor(scene=scene())
    first = ex.submit(graph_envelope(vacuum_to_work(), run_id="first"))
    assert first["accepted"], first
    with pytest.raises(bt_exec.ControlError, match="holds the robot"):
        ex.set_scene(scene(revision=8))
    assert ex.run_until_complete(first["plan_id"])["terminal"] == "completed"
    assert ex.scene.revision == 8 and ex.scene.state["vacuum"] == "patron", "the run moved the scene on"
    again = graph_envelope(vacuum_to_work(), run_id="again", revision=8)
    assert ex.submit(again)["verdict"] == "replan_required", "the vacuum is no longer in its socket"
    ex.set_scene(scene(revision=9))
    assert ex.scene.revision == 9 and ex.scene.state["vacuum"] == "vacuum_socket"
    answer = ex.submit(graph_envelope(vacuum_to_work(), run_id="after", revision=9))
    assert answer["accepted"], answer
    ex.close()
