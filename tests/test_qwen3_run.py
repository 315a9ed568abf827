"""Executing Qwen3 step graphs: one edge per outcome, terminals, what the robot holds, one graph per robot."""
import json
import threading

import pytest
from qwen3_graphs import (REVISION, cap_to_hatch, cap_without_vacuum, envelope, graph, inspect_edges, retry_loop,
                          return_vacuum, scene, screw_to_hole, spec_example, step, vacuum_released_at_work,
                          vacuum_to_work)

import bt_exec
from bt_exec import CallStatus
from bt_exec.compilers import Scene, SkillCatalog
from bt_exec.compilers.symbolic import World

SOCKET = scene()
PATRON = scene(vacuum="patron")
GRANT = SkillCatalog.named("grant")


def state(vacuum="vacuum_socket", cap="cap_storage", robot_at=None, holding=None, uncertain=(), **more):
    """A run's state snapshot: every known location, the held part, the tool on the flange, the robot's place."""
    locations = {"cap": cap, "vacuum": vacuum, **more}
    return {"locations": dict(sorted(locations.items())), "holding": holding,
            "patron": [obj for obj, where in sorted(locations.items()) if where == "patron"], "robot_at": robot_at,
            "uncertain": list(uncertain)}


def sim(script=None, at=SOCKET):
    """A sim backend with scripted outcomes, simulating the Grant skills on the scene's world."""
    return bt_exec.SimBackend(script, world=World.from_scene(GRANT, Scene.from_dict(at)))


@pytest.fixture
def make(make_executor):
    """An executor in scene ``at`` (default: the vacuum in its socket), recording its events."""
    def make_at(at=SOCKET, backend=None, **options):
        return make_executor(backend=backend, scene=at, **options)

    return make_at


def run(executor, source, **kwargs):
    answer = executor.submit(source, **kwargs)
    assert answer["accepted"], answer
    return answer["plan_id"], executor.run_until_complete(answer["plan_id"], timeout=10)


def transitions(events, plan_id):
    return [(e["step"], e["skill"], e["outcome"], e["next"]) for e in events.of(plan_id)
            if e["event"] == "step_transition"]


def called(backend):
    return [(call.op_id, call.cap, call.args) for call in backend.calls]


class BareBackend:
    """A custom backend: answers each call at once with whatever ``answer(call)`` says."""

    def __init__(self, answer):
        self.answer = answer
        self.calls = []

    def start(self, call):
        self.calls.append(call)
        return self.answer(call)

    def status(self, run_id):
        raise AssertionError("every call ends at once")

    def cancel(self, run_id):
        raise AssertionError("every call ends at once")


class LatchingSim(bt_exec.SimBackend):
    """A sim whose failed grasp of a tool still latches it onto the flange: only an inspection can tell."""

    def start(self, call):
        status = super().start(call)
        if call.cap == "grab" and status.event == "grasp_failed":
            self.world.locations[call.args["object"]] = "patron"
        return status


# --- paths and terminals -----------------------------------------------------------------------------------


class TestPaths:
    def test_vacuum_to_work_completes_and_leaves_it_in_the_patron(self, make, events):
        ex = make()
        assert (ex.max_active_runs, ex.max_steps) == (1, 1000)
        answer = ex.submit(vacuum_to_work(), run_id="r1")
        assert answer == {"accepted": True, "run_id": "r1", "plan_id": "1", "verdict": "ok", "issues": [],
                          "message": f"plan 1 accepted: 2-step graph from s1, scene revision {REVISION}",
                          "dialect": "qwen3", "op_count": 2, "root_op_id": "s1"}
        record = ex.run_until_complete("1", timeout=10)
        assert (record["outcome"], record["terminal"], record["path"]) == ("succeeded", "completed",
                                                                          ["s1", "s2", "completed"])
        assert record["terminal_reason"] == "step 's2' (transfer) ended 'success'"
        assert record["state"] == state(vacuum="patron", robot_at="work")
        assert "scene" not in record
        assert [(t["step"], t["skill"], t["outcome"], t["next"]) for t in record["trace"]] == [
            ("s1", "grab", "success", "s2"), ("s2", "transfer", "success", "completed")]
        assert record["trace"][0]["state"] == state(vacuum="patron", robot_at="vacuum")
        assert called(ex.backend) == [("s1", "grab", {"object": "vacuum"}),
                                      ("s2", "transfer", {"object": "vacuum", "target": "work"})]
        assert transitions(events, "1") == [("s1", "grab", "success", "s2"), ("s2", "transfer", "success", "completed")]
        assert all(e["run_id"] == "r1" for e in events.of("1") if e["event"] == "step_transition")
        done = events.complete("1")
        assert {k: done[k] for k in ("run_id", "outcome", "any_failed", "cancelled", "terminal", "terminal_reason",
                                      "state")} == {
            "run_id": "r1", "outcome": "succeeded", "any_failed": False, "cancelled": False, "terminal": "completed",
            "terminal_reason": "step 's2' (transfer) ended 'success'", "state": state(vacuum="patron", robot_at="work")}
        assert {op["op_id"]: op["state"] for op in record["ops"]} == {"s1": "succeeded", "s2": "succeeded"}

    def test_the_scene_moves_on_with_a_run_that_changed_the_world(self, make):
        ex = make()
        run(ex, vacuum_to_work(), run_id="r1")
        assert ex.scene.revision == REVISION + 1
        assert ex.scene.state == {"vacuum": "patron", "cap": "cap_storage"} and ex.scene.holding is None
        assert ex.backend.world.locations == {"vacuum": "patron", "cap": "cap_storage"}, "the sim agrees"

    def test_after_a_failed_grasp_the_scene_says_ownership_is_unknown(self, make):
        ex = make(backend=sim({"ops": {"s1": {"outcome": ["grasp_failed", "success"]}}}))
        _, record = run(ex, vacuum_to_work())
        assert (record["terminal"], record["state"]) == ("stop", state(vacuum="unknown", uncertain=["vacuum"]))
        assert ex.scene.revision == REVISION + 1 and ex.scene.state["vacuum"] == "unknown"
        grab_again = vacuum_to_work()
        grab_again["scene_revision"] = REVISION + 1
        answer = ex.submit(grab_again)
        assert answer["verdict"] == "replan_required", "the vacuum may be on the flange: inspect it first"
        assert [(i["code"], i["steps"]) for i in answer["issues"]] == [("precondition_fails_in_scene", ["s1"])]
        inspect_first = spec_example()
        inspect_first.update(entry="s3", scene_revision=REVISION + 1)
        inspect_first["transitions"]["s3"].update(empty="s1", placed="s1")
        _, record = run(ex, inspect_first)
        assert record["path"] == ["s3", "s1", "s2", "completed"]
        assert record["trace"][0]["state"] == state(), "placed: a tool not on the flange is in its socket"
        assert record["state"] == state(vacuum="patron", robot_at="work")

    def test_the_cap_goes_onto_the_hatch(self, make, events):
        ex = make()
        plan_id, record = run(ex, cap_to_hatch())
        assert record["path"] == ["t1", "t2", "t3", "t4", "t5", "completed"]
        assert record["state"] == state(vacuum="patron", cap="hatch_seat", robot_at="hatch_seat")
        assert [t[2] for t in transitions(events, plan_id)] == ["success"] * 5
        assert ex.scene.state == {"vacuum": "patron", "cap": "hatch_seat"}

    def test_a_screw_handed_over_leaves_the_scene(self, make):
        ex = make()
        _, record = run(ex, screw_to_hole())
        assert record["terminal"] == "completed"
        assert record["state"] == state(robot_at="hole_1", screw_1="handed_over")
        assert ex.scene.revision == REVISION + 1
        assert sorted(ex.scene.objects) == ["cap", "screw_2", "vacuum"]

    def test_a_graph_ending_in_replan_required(self, make, events):
        ex = make(backend=sim({"ops": {"h1": {"outcome": "not_found"}}}))
        plan_id, record = run(ex, screw_to_hole())
        assert (record["outcome"], record["terminal"], record["path"]) == ("failed", "replan_required",
                                                                          ["h1", "replan_required"])
        assert record["terminal_reason"] == "step 'h1' (detect) ended 'not_found'"
        assert record["ops"][0]["state"] == "failed" and record["ops"][0]["result"]["event"] == "not_found"
        assert ex.scene.revision == REVISION, "nothing moved"
        assert record["scene"] == Scene.from_dict(SOCKET).as_dict(), "a fresh snapshot for the planner"
        assert events.complete(plan_id)["scene"] == record["scene"]

    def test_sim_scripts_address_skills_by_name_and_steps_by_id(self, make, events):
        ex = make(backend=sim({"caps": {"grab": {"outcome": "grasp_failed"}},
                               "ops": {"s3": {"outcome": "unknown"}}}))
        plan_id, record = run(ex, spec_example(), run_id="r1")
        assert transitions(events, plan_id) == [("s1", "grab", "grasp_failed", "s3"),
                                                ("s3", "inspect_state", "unknown", "operator_required")]
        assert record["terminal"] == "operator_required"
        assert record["state"] == state(vacuum="unknown", uncertain=["vacuum"])

    def test_a_precondition_that_fails_at_run_time_fails_the_step(self, make, events):
        """The executor's scene says the vacuum is on the flange; the simulated cell has it in its socket."""
        ex = make(at=PATRON, backend=sim(at=SOCKET))
        plan_id, record = run(ex, return_vacuum())
        assert transitions(events, plan_id) == [("s1", "transfer", "failed", "stop")]
        assert record["terminal"] == "stop"
        assert record["terminal_reason"] == "outcome 'failed' of step 's1' has no transition"
        assert record["ops"][0]["result"]["error"] == ("sim: precondition of transfer does not hold: vacuum must be "
                                                       "held (a tool: on the flange)")
        assert record["state"] == state(vacuum="patron")

    def test_the_submit_envelope_names_the_run(self, make, events):
        ex = make()
        answer = ex.submit(envelope(vacuum_to_work(), run_id="hatch-7", fenced=True))
        assert answer["accepted"] and answer["run_id"] == "hatch-7"
        ex.run_until_complete(answer["plan_id"], timeout=10)
        assert events.complete(answer["plan_id"])["run_id"] == "hatch-7"
        assert ex.submit(envelope(vacuum_to_work(), run_id="hatch-7")) == answer, "the same run_id: the same answer"


def test_a_graph_planned_on_an_older_revision_is_refused(make):
    ex = make()
    run(ex, vacuum_to_work(), run_id="r1")
    answer = ex.submit(return_vacuum(), run_id="r2")
    assert (answer["accepted"], answer["verdict"]) == (False, "invalid")
    assert [(i["code"], i["path"], i["steps"]) for i in answer["issues"]] == [("stale_revision", "/scene_revision", [])]
    assert answer["scene"]["scene_revision"] == REVISION + 1, "the refusal carries the current scene"
    new = return_vacuum()
    new["scene_revision"] = REVISION + 1
    _, record = run(ex, new, run_id="r3")
    assert record["terminal"] == "completed" and record["state"] == state(robot_at="vacuum_socket")
    assert ex.scene.revision == REVISION + 2 and ex.scene.state["vacuum"] == "vacuum_socket"


# --- recovery loops and the step limit ------------------------------------------------------------------------


class TestLoops:
    def test_recovery_loop_retries_after_inspection_and_terminates(self, make, events):
        ex = make(backend=sim({"ops": {"s1": {"outcome": ["grasp_failed", "grasp_failed", "success"]}}}))
        plan_id, record = run(ex, retry_loop())
        assert transitions(events, plan_id) == [
            ("s1", "grab", "grasp_failed", "s2"), ("s2", "inspect_state", "placed", "s1"),
            ("s1", "grab", "grasp_failed", "s2"), ("s2", "inspect_state", "placed", "s1"),
            ("s1", "grab", "success", "s3"), ("s3", "transfer", "success", "completed")]
        states = [e["state"] for e in events.of(plan_id) if e["event"] == "step_transition"]
        assert states[0] == state(vacuum="unknown", uncertain=["vacuum"]), "after grasp_failed: uncertain"
        assert states[1] == state(), "inspected: back in its socket"
        assert record["terminal"] == "completed" and record["state"] == state(vacuum="patron", robot_at="work")

    def test_inspection_that_finds_it_held_goes_on(self, make, events):
        """The grasp is reported failed, yet the vacuum latched: inspect_state finds it on the flange."""
        ex = make(backend=LatchingSim({"ops": {"s1": {"outcome": "grasp_failed"}}},
                                      world=World.from_scene(GRANT, Scene.from_dict(SOCKET))))
        plan_id, record = run(ex, retry_loop())
        assert transitions(events, plan_id) == [("s1", "grab", "grasp_failed", "s2"),
                                                ("s2", "inspect_state", "holding", "s3"),
                                                ("s3", "transfer", "success", "completed")]
        assert record["state"] == state(vacuum="patron", robot_at="work")

    def test_the_executed_step_limit_stops_an_endless_retry(self, make, events):
        ex = make(backend=sim({"ops": {"s1": {"outcome": "grasp_failed"}, "s2": {"outcome": "empty"}}}), max_steps=5)
        plan_id, record = run(ex, retry_loop(), run_id="loop")
        assert record["path"] == ["s1", "s2", "s1", "s2", "s1", "stop"]
        assert (record["outcome"], record["terminal"]) == ("failed", "stop")
        assert record["terminal_reason"] == "executed-step limit of 5 reached before step 's2'"
        assert len(ex.backend.calls) == 5
        assert record["state"] == state(vacuum="unknown", uncertain=["vacuum"])
        assert events.complete(plan_id)["terminal_reason"] == record["terminal_reason"]

    def test_the_default_step_limit_is_1000(self, make):
        ex = make(backend=sim({"ops": {"s1": {"outcome": "grasp_failed"}, "s2": {"outcome": "empty"}}}))
        _, record = run(ex, retry_loop())
        assert len(record["trace"]) == 1000 and len(ex.backend.calls) == 1000
        assert record["terminal_reason"] == "executed-step limit of 1000 reached before step 's1'"


# --- outcomes that stop the run ---------------------------------------------------------------------------


class TestStops:
    def test_an_unmapped_outcome_stops_and_keeps_the_tool(self, make, events):
        ex = make(backend=sim({"ops": {"s2": {"outcome": "collision"}}}))
        plan_id, record = run(ex, vacuum_to_work())
        assert transitions(events, plan_id) == [("s1", "grab", "success", "s2"),
                                                ("s2", "transfer", "collision", "stop")]
        assert (record["terminal"], record["terminal_reason"]) == ("stop", "outcome 'collision' of step 's2' has no "
                                                                           "transition")
        assert record["state"] == state(vacuum="patron", robot_at="vacuum")
        assert ex.scene.state["vacuum"] == "patron"

    def test_a_mapped_collision_stops_by_the_graph(self, make, events):
        ex = make(backend=sim({"ops": {"s2": {"outcome": "collision"}}}))
        plan_id, record = run(ex, spec_example())
        assert transitions(events, plan_id)[-1] == ("s2", "transfer", "collision", "stop")
        assert record["terminal_reason"] == "step 's2' (transfer) ended 'collision'"
        assert record["ops"][1]["state"] == "failed"

    @pytest.mark.parametrize("backend", ["sim", "custom"])
    def test_an_outcome_the_catalog_does_not_know_is_never_success(self, make, events, backend):
        if backend == "sim":
            chosen = sim({"ops": {"s1": {"outcome": "dropped"}}})
        else:
            chosen = BareBackend(lambda call: CallStatus("SUCCEEDED", output={}, event="dropped"))
        ex = make(backend=chosen)
        plan_id, record = run(ex, vacuum_to_work())
        assert transitions(events, plan_id) == [("s1", "grab", "dropped", "stop")]
        assert (record["outcome"], record["terminal"]) == ("failed", "stop")
        assert record["terminal_reason"] == "step 's1' (grab) reported 'dropped', an outcome it does not have"
        assert record["ops"][0]["state"] == "failed" and record["ops"][0]["result"]["success"] is False
        assert record["state"] == state(), "nothing moved in the run's world"
        assert [call.op_id for call in chosen.calls] == ["s1"]

    @pytest.mark.parametrize("answer", [
        lambda call: CallStatus("FAILED", output={}, error="gripper fault", event="success"),
        lambda call: CallStatus("CANCELED", event="success"),
        lambda call: 1 / 0,
    ], ids=["failed", "canceled", "raises"])
    def test_a_call_that_did_not_succeed_never_routes_as_success(self, make, events, answer):
        ex = make(backend=BareBackend(answer))
        plan_id, record = run(ex, vacuum_to_work())
        assert transitions(events, plan_id) == [("s1", "grab", "failed", "stop")]
        assert (record["terminal"], record["terminal_reason"]) == ("stop", "outcome 'failed' of step 's1' has no "
                                                                           "transition")
        assert record["ops"][0]["result"]["success"] is False and record["state"] == state()

    def test_a_result_that_does_not_confirm_its_effects_is_not_completed(self, make, events):
        ex = make(backend=BareBackend(lambda call: CallStatus("SUCCEEDED", output={"ok": True})))
        plan_id, record = run(ex, vacuum_to_work())
        assert transitions(events, plan_id) == [("s1", "grab", "success", "stop")]
        assert (record["outcome"], record["terminal"]) == ("failed", "stop")
        assert record["terminal_reason"] == ("step 's1' (grab): its result did not confirm its effects (expected "
                                             "vacuum at patron; the result reported no state)")
        assert record["state"]["patron"] == ["vacuum"], "what the robot may hold stays in the status"

    def test_a_result_reporting_another_location_is_not_completed(self, make):
        wrong = {"state": {"locations": {"vacuum": "vacuum_socket"}}}
        ex = make(backend=BareBackend(lambda call: CallStatus("SUCCEEDED", output=wrong)))
        _, record = run(ex, vacuum_to_work())
        assert record["terminal_reason"] == ("step 's1' (grab): its result did not confirm its effects (expected "
                                             "vacuum at patron, reported 'vacuum_socket')")

    def test_results_that_confirm_their_effects_complete(self, make):
        confirmed = {"state": {"locations": {"vacuum": "patron"}}}
        ex = make(backend=BareBackend(lambda call: CallStatus("SUCCEEDED", output=confirmed)))
        _, record = run(ex, vacuum_to_work())
        assert (record["outcome"], record["terminal"]) == ("succeeded", "completed")


# --- control: cancel, stop points, status -------------------------------------------------------------------


class TestControl:
    def test_status_while_running_shows_what_the_robot_holds(self, make):
        ex = make(backend=sim({"ops": {"s2": {"duration_s": 30}}}))
        plan_id = ex.submit(vacuum_to_work(), run_id="r1")["plan_id"]
        ex.tick_once()
        status = ex.get_plan_status(plan_id)
        assert (status["run_id"], status["path"], status["running"]) == ("r1", ["s1"], True)
        assert status["state"] == state(vacuum="patron", robot_at="vacuum")
        assert {op["op_id"]: op["state"] for op in status["ops"]} == {"s1": "succeeded", "s2": "running"}

    def test_cancel_mid_run_keeps_the_holdings(self, make, events):
        ex = make(backend=sim({"ops": {"s2": {"duration_s": 30}}}))
        plan_id = ex.submit(vacuum_to_work(), run_id="r1")["plan_id"]
        ex.tick_once()
        assert ex.cancel_plan(plan_id, wait_ms=1000)["finished"]
        record = ex.get_plan_result(plan_id)
        assert (record["outcome"], record["terminal"], record["terminal_reason"]) == ("cancelled", "stop",
                                                                                      "cancel_plan")
        assert record["path"] == ["s1", "stop"]
        assert record["state"] == state(vacuum="patron", robot_at="vacuum")
        assert list(ex.backend.cancelled) == ["sim-1"] and not ex.backend.active_calls()
        done = events.complete(plan_id)
        assert (done["terminal"], done["cancelled"], done["state"]["patron"]) == ("stop", True, ["vacuum"])
        assert ex.scene.state["vacuum"] == "patron" and ex.scene.revision == REVISION + 1

    def test_stop_point_on_enter_of_a_step(self, make, events):
        ex = make()
        plan_id = ex.submit(vacuum_to_work())["plan_id"]
        assert ex.stop_plan_at(plan_id, "s2", "on_enter")["armed"]
        record = ex.run_until_complete(plan_id, timeout=10)
        assert [call.op_id for call in ex.backend.calls] == ["s1"], "s2 never started"
        assert record["path"] == ["s1", "stop"]
        assert (record["terminal"], record["terminal_reason"]) == ("stop", "stop point on_enter at op s2")
        assert {op["op_id"]: op["state"] for op in record["ops"]} == {"s1": "succeeded", "s2": "canceled"}
        assert record["state"] == state(vacuum="patron", robot_at="vacuum")

    def test_stop_point_on_complete_keeps_what_the_step_did(self, make, events):
        ex = make()
        plan_id = ex.submit(vacuum_to_work())["plan_id"]
        ex.stop_plan_at(plan_id, "s1", "on_complete")
        record = ex.run_until_complete(plan_id, timeout=10)
        assert [call.op_id for call in ex.backend.calls] == ["s1"]
        assert transitions(events, plan_id) == [("s1", "grab", "success", "stop")]
        assert record["path"] == ["s1", "stop"]
        assert (record["terminal"], record["terminal_reason"]) == ("stop", "stop point on_complete at op s1")
        assert record["state"] == state(vacuum="patron", robot_at="vacuum"), "the grab happened: the vacuum is held"
        assert ex.scene.state["vacuum"] == "patron" and ex.backend.world.locations["vacuum"] == "patron"
        assert ex.scene.revision == REVISION + 1

    def test_stop_at_an_unknown_step(self, make):
        ex = make(backend=sim({"default": {"duration_s": 30}}))
        plan_id = ex.submit(vacuum_to_work())["plan_id"]
        with pytest.raises(bt_exec.ControlError, match="has no op 's9'"):
            ex.stop_plan_at(plan_id, "s9", "on_enter")


# --- one graph per robot, idempotent run ids, refusals without motion ----------------------------------------


class TestAdmission:
    def test_busy_idempotent_and_free_again(self, make):
        ex = make(backend=sim({"ops": {"s1": {"duration_s": 30}}}))
        first = ex.submit(vacuum_to_work(), run_id="r1")
        assert first["accepted"]
        ex.tick_once()
        busy = ex.submit(screw_to_hole(), run_id="r2")
        assert (busy["accepted"], busy["verdict"], busy["plan_id"]) == (False, "busy", None)
        assert [i["code"] for i in busy["issues"]] == ["busy"]
        assert busy["issues"][0]["message"] == ("the robot is busy with plan 1 (run r1); wait for it to end or "
                                                "cancel it")
        assert ex.submit(vacuum_to_work(), run_id="r1") == first, "the same run_id: the same answer, no second run"
        assert [call.op_id for call in ex.backend.calls] == ["s1"], "no motion for the refused graph"
        assert ex.get_all_plans()["count"] == 1
        ex.cancel_plan(first["plan_id"], wait_ms=1000)
        again = ex.submit(screw_to_hole(), run_id="r2")
        assert again["accepted"], "a busy refusal is not remembered: once the robot is free the run is admitted"
        assert ex.submit(screw_to_hole(), run_id="r2") == again, "an admitted run's answer does not change"

    def test_resubmitting_a_finished_run_does_not_run_it_again(self, make):
        ex = make()
        answer = ex.submit(vacuum_to_work(), run_id="r1")
        ex.run_until_complete(answer["plan_id"], timeout=10)
        calls = len(ex.backend.calls)
        assert ex.submit(vacuum_to_work(), run_id="r1") == answer
        assert len(ex.backend.calls) == calls and ex.get_all_plans()["count"] == 0

    def test_concurrent_submits_admit_exactly_one_graph(self, make):
        ex = make(backend=sim({"default": {"duration_s": 30}}))
        answers, barrier = [], threading.Barrier(8)

        def submit(n):
            barrier.wait()
            answers.append(ex.submit(vacuum_to_work(), run_id=f"r{n}"))

        threads = [threading.Thread(target=submit, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(a["verdict"] for a in answers) == ["busy"] * 7 + ["ok"]
        assert ex.get_all_plans()["count"] == 1

    def test_the_tick_loop_runs_graphs_and_a_scene_file_is_read(self, make, tmp_path):
        path = tmp_path / "scene.json"
        path.write_text(json.dumps(SOCKET))
        ex = make(at=str(path), backend=sim({"default": {"duration_s": 0.01}}))
        ex.start()
        answer = ex.submit(vacuum_to_work(), run_id="loop")
        record = ex.run_until_complete(answer["plan_id"], timeout=10)
        assert (record["terminal"], record["path"]) == ("completed", ["s1", "s2", "completed"])
        assert ex.scene.revision == REVISION + 1

    def test_more_active_runs_when_allowed(self, make):
        ex = make(backend=sim({"default": {"duration_s": 30}}), max_active_runs=2)
        assert ex.submit(screw_to_hole(), run_id="a")["accepted"]
        assert ex.submit(vacuum_to_work(), run_id="b")["accepted"]
        assert ex.submit(spec_example(), run_id="c")["verdict"] == "busy"

    @pytest.mark.parametrize("the_graph, verdict, code", [
        (graph([step("s1", "grab", "vacuum")], {}, status="blocked", reason="no tool"), "blocked", None),
        (vacuum_released_at_work(), "invalid", "tool_not_in_socket"),
        (cap_without_vacuum(), "replan_required", "precondition_fails_in_scene"),
    ])
    def test_refused_graphs_never_call_the_backend(self, make, events, the_graph, verdict, code):
        ex = make(backend=sim())
        answer = ex.submit(the_graph, run_id="r1")
        assert (answer["accepted"], answer["verdict"], answer["plan_id"]) == (False, verdict, None)
        assert [i["code"] for i in answer["issues"]] == ([code] if code else [])
        assert list(ex.backend.calls) == [] and events.events == [] and ex.get_all_plans()["count"] == 0
        assert ex.scene.revision == REVISION
        if verdict == "replan_required":
            assert answer["scene"] == Scene.from_dict(SOCKET).as_dict(), "a fresh snapshot for the planner"

    def test_without_a_scene_a_blocked_graph_is_still_blocked(self):
        ex = bt_exec.Executor(bt_exec.SimBackend())
        blocked = ex.submit(graph([], {}, entry="x", status="blocked"))
        assert (blocked["verdict"], blocked["issues"]) == ("blocked", [])
        other = ex.submit(vacuum_to_work())
        assert (other["verdict"], [i["code"] for i in other["issues"]]) == ("invalid", ["no_scene"])
        assert list(ex.backend.calls) == []


# --- the journal -------------------------------------------------------------------------------------------


def test_jsonl_journal_keeps_run_step_skill_event_next_state_and_terminal_reason(make, tmp_path):
    ex = make(backend=sim({"ops": {"s1": {"outcome": ["grasp_failed", "success"]}}}))
    journal = bt_exec.JsonlJournal(tmp_path / "journal.jsonl")
    ex.subscribe(journal)
    plan_id, record = run(ex, retry_loop(), run_id="loop-1")
    journal.close()
    _header, *lines = [json.loads(line) for line in (tmp_path / "journal.jsonl").read_text().splitlines()]
    steps = [line for line in lines if line["event"] == "step_transition"]
    assert [(s["run_id"], s["plan_id"], s["step"], s["skill"], s["outcome"], s["next"]) for s in steps] == [
        ("loop-1", plan_id, "s1", "grab", "grasp_failed", "s2"),
        ("loop-1", plan_id, "s2", "inspect_state", "placed", "s1"),
        ("loop-1", plan_id, "s1", "grab", "success", "s3"),
        ("loop-1", plan_id, "s3", "transfer", "success", "completed")]
    assert [s["state"] for s in steps] == [t["state"] for t in record["trace"]]
    assert steps[0]["state"]["uncertain"] == ["vacuum"]
    (complete,) = [line for line in lines if line["event"] == "plan_complete"]
    assert {k: complete[k] for k in ("run_id", "terminal", "terminal_reason", "state")} == {
        "run_id": "loop-1", "terminal": "completed", "terminal_reason": "step 's3' (transfer) ended 'success'",
        "state": state(vacuum="patron", robot_at="work")}
    assert lines[0]["event"] == "plan_started" and lines[0]["run_id"] == "loop-1"


def test_an_inspection_finds_a_part_where_it_last_lay(make, events):
    """A failed grasp of the cap, inspected (placed: still in storage), retried; after the cap is released on the
    hatch seat a last inspection finds it placed there, not where it lay before."""
    the_graph = cap_to_hatch()
    the_graph["plan"].append(step("t7", "inspect_state", "cap"))
    the_graph["transitions"]["t5"]["success"] = "t7"
    the_graph["transitions"]["t7"] = inspect_edges("operator_required", placed="completed")
    ex = make(backend=sim({"ops": {"t2": {"outcome": ["grasp_failed", "success"]}}}))
    plan_id, record = run(ex, the_graph)
    assert [t[0] for t in transitions(events, plan_id)] == ["t1", "t2", "t6", "t2", "t3", "t4", "t5", "t7"]
    assert transitions(events, plan_id)[2] == ("t6", "inspect_state", "placed", "t2")
    assert record["trace"][2]["state"]["locations"]["cap"] == "cap_storage"
    assert transitions(events, plan_id)[-1] == ("t7", "inspect_state", "placed", "completed")
    assert record["state"] == state(vacuum="patron", cap="hatch_seat", robot_at="hatch_seat")
    assert ex.scene.state == {"vacuum": "patron", "cap": "hatch_seat"}



def test_a_blocked_answer_carries_the_planners_reason():
    ex = bt_exec.Executor(scene={"scene_revision": 1, "objects": ["cap"], "targets": ["work"]})
    answer = ex.submit({"status": "blocked", "reason": "the hatch is already closed"})
    assert answer["verdict"] == "blocked" and not answer["accepted"] and answer["plan_id"] is None
    assert answer["reason"] == "the hatch is already closed"
    assert answer["message"] == "blocked by the planner: the hatch is already closed"
    assert not ex.backend.calls


def test_the_sims_generic_failure_is_the_skills_failed_event():
    scene = {"scene_revision": 1, "objects": ["cap"], "targets": ["work"]}
    graph = {"status": "ok", "entry": "s1", "scene_revision": 1,
             "plan": [{"id": "s1", "skill": "detect", "object": "cap"}],
             "transitions": {"s1": {"success": "completed", "not_found": "replan_required",
                                    "failed": "operator_required"}}}
    catalog = bt_exec.SkillCatalog.named("grant")
    backend = bt_exec.SimBackend({"ops": {"s1": {"outcome": "failure"}}},
                                 world=World.from_scene(catalog, bt_exec.Scene.from_dict(scene)))
    ex = bt_exec.Executor(backend, scene=scene)
    record = ex.run_until_complete(ex.submit(graph)["plan_id"], timeout=5)
    assert record["terminal"] == "operator_required" and record["trace"][0]["outcome"] == "failed"
