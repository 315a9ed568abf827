"""Admission through the Python API: which plans take room, what is remembered per run_id, the numbers
a control call takes, and which capabilities an RTDL plan may call."""
import json
import threading

import pytest
from rtdl_plans import do, envelope, seq

import bt_exec
from bt_exec.compilers.catalog import BUILTIN_PREFIX


def builtin(name, **args):
    return do(name, cap=BUILTIN_PREFIX + name, args=args)


def slow_executor(**options):
    return bt_exec.Executor(bt_exec.SimBackend({"default": {"duration_s": 30}}), **options)


class TestRoom:
    def test_a_plan_of_status_reads_takes_a_plans_room(self):
        ex = slow_executor(max_plans=2)
        work = ex.submit(envelope(do("work")))["plan_id"]
        assert ex.submit(envelope(builtin("get_plan_status", plan_id=work)))["accepted"]
        refused = ex.submit(envelope(builtin("get_all_plans")))
        assert refused["verdict"] == "busy" and refused["issues"][0]["code"] == "too_many_plans"
        ex.close(wait_ms=0)

    def test_pure_control_gets_through_a_full_room_and_has_a_room_of_its_own(self):
        ex = slow_executor(max_plans=2)
        first, second = (ex.submit(envelope(do(f"work {n}")))["plan_id"] for n in (1, 2))
        stops = [ex.submit(envelope(builtin("stop_plan_at", plan_id=first, op_id="1"))) for _ in range(3)]
        assert [answer["accepted"] for answer in stops] == [True, True, False], "nothing ticked: both stay in flight"
        assert stops[2]["verdict"] == "busy" and "control plans" in stops[2]["message"]
        ex.tick_once()  # the two control plans end
        assert ex.submit(envelope(builtin("cancel_plan", plan_id=second, wait_ms=0)))["accepted"]
        ex.close(wait_ms=0)

    def test_a_flood_of_status_reads_is_refused_past_max_plans(self):
        ex = slow_executor(max_plans=4)
        target = ex.submit(envelope(do("work")))["plan_id"]
        answers = [ex.submit(envelope(builtin("get_plan_status", plan_id=target))) for _ in range(20)]
        assert sum(answer["accepted"] for answer in answers) == 3
        ex.close(wait_ms=0)


class TestRunIds:
    def test_a_busy_refusal_is_not_remembered(self):
        ex = slow_executor(max_plans=1)
        holder = ex.submit(envelope(do("hold the room")))["plan_id"]
        busy = ex.submit(envelope(do("later")), run_id="later-1")
        assert busy["verdict"] == "busy"
        ex.cancel_plan(holder, wait_ms=1000)
        admitted = ex.submit(envelope(do("later")), run_id="later-1")
        assert admitted["accepted"], "the same submission is admitted once there is room"
        assert ex.submit(envelope(do("later")), run_id="later-1") == admitted, "and that answer is remembered"
        ex.close(wait_ms=0)

    def test_an_invalid_answer_is_remembered(self):
        ex = bt_exec.Executor(bt_exec.SimBackend())
        bad = ex.submit(envelope(do("bad", cap="no dot")), run_id="r")
        assert not bad["accepted"]
        assert ex.submit(envelope(do("now good")), run_id="r") == bad
        ex.close(wait_ms=0)

    @pytest.mark.parametrize("remember", [0, 1])
    def test_concurrent_submits_of_one_run_id_get_one_answer(self, remember):
        ex = bt_exec.Executor(bt_exec.SimBackend(), remember_run_ids=remember)
        text = json.dumps(envelope(seq(*[do(f"op {n}") for n in range(3000)])))  # long to admit: submits overlap
        start = threading.Barrier(8)
        answers, errors = [], []

        def submit():
            start.wait()
            try:
                answers.append(ex.submit(text, run_id="same"))
            except Exception as exc:  # what the test is about: nothing escapes submit
                errors.append(exc)

        threads = [threading.Thread(target=submit) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == [] and len(answers) == 8 and all(answer["accepted"] for answer in answers)
        plan_ids = {answer["plan_id"] for answer in answers}
        assert len(plan_ids) < 8, "submits that overlap the one answering share its answer"
        ex.close(wait_ms=0)


class TestWaitMs:
    @pytest.fixture
    def ex(self):
        executor = slow_executor()
        yield executor
        executor.close(wait_ms=0)

    @pytest.mark.parametrize("wait_ms", [-1, 2**63, 10**400])
    def test_out_of_range_is_refused_naming_wait_ms(self, ex, wait_ms):
        plan_id = ex.submit(envelope(do("work")))["plan_id"]
        for call in (lambda: ex.cancel_plan(plan_id, wait_ms=wait_ms), lambda: ex.cancel_all(wait_ms=wait_ms),
                     lambda: ex.close(wait_ms=wait_ms)):
            with pytest.raises(bt_exec.ControlError, match="wait_ms must be a non-negative integer"):
                call()
        assert ex.get_all_plans()["count"] == 1, "nothing was cancelled"

    @pytest.mark.parametrize("wait_ms", [30_001, 2**63 - 1])
    def test_a_wait_past_the_cap_waits_the_cap_and_says_so(self, ex, wait_ms):
        plan_id = ex.submit(envelope(do("work")))["plan_id"]
        answer = ex.cancel_plan(plan_id, wait_ms=wait_ms)
        assert answer["finished"] and answer["message"].endswith("(wait_ms capped at 30000)")
        assert ex.cancel_all(wait_ms=wait_ms)["message"] == "cancelled 0 plan(s) (wait_ms capped at 30000)"

    @pytest.mark.parametrize("wait_ms", [1e13, 1.0, True, "5"])
    def test_a_non_integer_is_refused_naming_wait_ms(self, ex, wait_ms):
        plan_id = ex.submit(envelope(do("work")))["plan_id"]
        with pytest.raises(bt_exec.ControlError, match="cancel_plan: wait_ms"):
            ex.cancel_plan(plan_id, wait_ms=wait_ms)

    def test_the_maximum_is_taken(self, ex):
        plan_id = ex.submit(envelope(do("work")))["plan_id"]
        assert ex.cancel_plan(plan_id, wait_ms=30_000)["finished"]

    def test_a_builtins_wait_past_the_cap_waits_the_cap_and_says_so(self, ex):
        answer = ex.submit(envelope(seq(builtin("cancel_all_plans", wait_ms=30_001))))
        assert answer["accepted"] and answer["warnings"] == [{
            "code": "wait_capped",
            "message": "/rtdl/children/0/args/wait_ms: wait_ms 30001 capped at 30000 (the longest a cancel waits)"}]
        record = ex.run_until_complete(answer["plan_id"], timeout=10)
        output = record["ops"][1]["result"]["output"]
        assert output["wait_ms"] == 30_000 and output["message"] == "all targets finished (wait_ms capped at 30000)"
        report = ex.validate_plan(envelope(seq(builtin("cancel_all_plans", wait_ms=30_001))))
        assert report["valid"] and [w["code"] for w in report["warnings"]] == ["wait_capped"]
        within = ex.submit(envelope(seq(builtin("cancel_all_plans", wait_ms=30_000))))
        assert "warnings" not in within

    def test_a_builtins_wait_ms_out_of_range_is_refused_where_it_stands(self, ex):
        for wait_ms in (10**400, 2**63, -1, 1.5):
            answer = ex.submit(envelope(seq(builtin("cancel_all_plans", wait_ms=wait_ms))))
            assert not answer["accepted"] and answer["issues"][0]["code"] in ("bad_args", "bad_value")
            assert answer["issues"][0]["path"] == "/rtdl/children/0/args/wait_ms"


class TestMotionSkills:
    @staticmethod
    def arena(contract_id):
        return {"root_index": 0, "nodes": [{"node_kind": 2, "children": [], "op_id": "a", "description": "call it",
                                            "call": {"call_id": "c", "provider_id": "prim", "contract_id": contract_id,
                                                     "args_json": json.dumps({"object": "screw"})}}]}

    @pytest.mark.parametrize("skill", ["grab", "pick", "inspect_state"])
    def test_an_rtdl_op_naming_a_skill_is_refused_at_validation(self, skill):
        scene = json.loads(open("examples/qwen3/scene.json").read())
        ex = bt_exec.Executor(scene=scene)
        revision = ex.scene.revision
        checked = ex.validate_plan(self.arena(skill))
        assert not checked["valid"]
        assert [(i["code"], i["path"]) for i in checked["issues"]] == [("motion_skill", "nodes[0].call.contract_id")]
        answer = ex.submit(self.arena(skill))
        assert not answer["accepted"] and answer["issues"][0]["code"] == "motion_skill"
        assert list(ex.backend.calls) == [] and ex.scene.revision == revision, "nothing reached the robot"
        ex.close(wait_ms=0)

    def test_a_skill_listed_in_the_capability_catalog_is_an_explicit_opt_in(self):
        ex = bt_exec.Executor(bt_exec.SimBackend(), catalog={"grab": {"args_schema": {"type": "object"}}})
        record = ex.run_until_complete(ex.submit(self.arena("grab"))["plan_id"], timeout=10)
        assert record["outcome"] == "succeeded"
        ex.close(wait_ms=0)

    def test_other_capabilities_are_unaffected(self):
        ex = bt_exec.Executor(bt_exec.SimBackend())
        assert ex.submit(self.arena("robonix/prim/grab"))["accepted"]
        ex.close(wait_ms=0)
