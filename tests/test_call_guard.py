"""The call guard: its rules file, the refusal at validate time, the denial at call time, and state rules."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rtdl_plans import do, envelope, seq

import bt_exec
from bt_exec.compilers.call_guard import CallGuard, load_call_guard
from bt_exec.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]

NO_ARM_WHEN_LOW = {
    "default": "allow",
    "rules": [
        {"name": "camera-always", "effect": "allow", "cap": "camera.*"},
        {"name": "arm-needs-charge", "effect": "deny", "cap": "arm.*", "state": {"battery": {"lt": 20}}},
        {"name": "no-fast-base", "effect": "deny", "cap": "base.move", "args": {"speed": "fast"}},
        {"name": "no-laser", "effect": "deny", "cap": "laser.*"},
    ],
}


@contextlib.contextmanager
def executor_of(**options):
    executor = bt_exec.Executor(**options)
    try:
        yield executor
    finally:
        executor.close()


def run_plan(executor: bt_exec.Executor, plan: dict) -> tuple[dict, dict]:
    answer = executor.submit(plan)
    assert answer["accepted"], answer
    return answer, executor.run_until_complete(answer["plan_id"], timeout=10)


def op_of(record: dict, cap: str) -> dict:
    (op,) = [op for op in record["ops"] if op.get("cap") == cap]
    return op


class TestRulesFile:
    @pytest.mark.parametrize("doc, where", [
        ({"default": "maybe"}, "/default"),
        ({"rules": [{"name": "a", "effect": "deny"}]}, "/rules/0"),
        ({"rules": [{"name": "a", "effect": "deny", "cap": "x"}, {"name": "b", "effect": "block", "cap": "y"}]},
         "/rules/1/effect"),
        ({"rules": [{"name": "a", "effect": "deny", "cap": "x", "state": {"battery": {"below": 3}}}]},
         "/rules/0/state/battery"),
        ({"rules": [{"name": "a", "effect": "deny", "cap": "x", "state": {"battery": {"lt": "low"}}}]},
         "/rules/0/state/battery/lt"),
        ({"rules": [{"name": "a", "effect": "deny", "cap": "x"}, {"name": "a", "effect": "allow", "cap": "y"}]},
         "/rules/1/name"),
        ({"rules": [], "extra": 1}, "/"),
    ])
    def test_a_bad_rules_document_is_refused_where_it_is_wrong(self, doc, where):
        with pytest.raises(ConfigError, match=f"invalid at {where}"):
            CallGuard.from_dict(doc)

    def test_json_and_yaml_files_load_to_the_same_rules(self, tmp_path):
        as_json = tmp_path / "rules.json"
        as_json.write_text(json.dumps(NO_ARM_WHEN_LOW))
        as_yaml = tmp_path / "rules.yaml"
        as_yaml.write_text("default: allow\nrules:\n"
                           "  - {name: camera-always, effect: allow, cap: 'camera.*'}\n"
                           "  - name: arm-needs-charge\n    effect: deny\n    cap: 'arm.*'\n"
                           "    state: {battery: {lt: 20}}\n"
                           "  - {name: no-fast-base, effect: deny, cap: base.move, args: {speed: fast}}\n"
                           "  - {name: no-laser, effect: deny, cap: 'laser.*'}\n")
        assert load_call_guard(as_json).rules == load_call_guard(as_yaml).rules == CallGuard.from_dict(
            NO_ARM_WHEN_LOW).rules

    def test_a_bad_file_names_the_file_and_the_place(self, tmp_path):
        bad = tmp_path / "rules.json"
        bad.write_text(json.dumps({"rules": [{"name": "a", "effect": "deny", "cap": 3}]}))
        with pytest.raises(ConfigError, match=r"call guard .*rules\.json is invalid at /rules/0/cap"):
            load_call_guard(bad)
        bad.write_text("{not json")
        with pytest.raises(ConfigError, match="not valid JSON"):
            load_call_guard(bad)
        with pytest.raises(ConfigError, match="cannot read"):
            load_call_guard(tmp_path / "missing.json")

    def test_an_executor_with_a_bad_guard_is_not_built(self):
        with pytest.raises(ConfigError, match="/rules/0/effect"):
            bt_exec.Executor(call_guard={"rules": [{"name": "a", "effect": "no", "cap": "x"}]})


class TestDecisions:
    def test_the_first_matching_rule_decides_and_the_default_covers_the_rest(self):
        guard = CallGuard.from_dict({"default": "deny", "rules": [
            {"name": "grip-soft", "effect": "allow", "cap": "arm.grip", "args": {"force": 5}},
            {"name": "no-grip", "effect": "deny", "cap": "arm.grip"},
            {"name": "arm", "effect": "allow", "cap": "arm.*"},
            {"name": "dock-on-b", "effect": "allow", "cap": "base.dock", "provider": "base_b"},
        ]})
        assert guard.decide("arm.grip", None, {"force": 5}, None).rule == "grip-soft"
        assert guard.decide("arm.grip", None, {"force": 5.0}, None).allowed  # numbers compare by value
        denied = guard.decide("arm.grip", None, {"force": True}, None)  # true is not 1
        assert (denied.allowed, denied.rule) == (False, "no-grip")
        assert guard.decide("arm.lift", None, {}, None).rule == "arm"
        assert guard.decide("base.dock", "base_b", {}, None).allowed
        for provider in ("base_a", None):  # a provider rule matches only calls naming a matching provider
            decision = guard.decide("base.dock", provider, {}, None)
            assert (decision.allowed, decision.rule) == (False, "default")

    def test_a_state_condition_that_cannot_be_decided_denies(self):
        guard = CallGuard.from_dict(NO_ARM_WHEN_LOW)
        for state in (None, lambda: {}, lambda: {"battery": "low"}, lambda: 1 / 0):
            decision = guard.decide("arm.grip", None, {}, state)
            assert (decision.allowed, decision.rule) == (False, "arm-needs-charge"), state
        assert guard.decide("arm.grip", None, {}, lambda: {"battery": 80}).allowed
        assert not guard.decide("arm.grip", None, {}, lambda: {"battery": 19.5}).allowed

    def test_eq_and_ne_compare_strictly(self):
        guard = CallGuard.from_dict({"rules": [
            {"name": "hands-full", "effect": "deny", "cap": "arm.grab",
             "state": {"holding": {"ne": None}, "mode": {"eq": "auto"}}}]})
        assert not guard.decide("arm.grab", None, {}, lambda: {"holding": "cup", "mode": "auto"}).allowed
        assert guard.decide("arm.grab", None, {}, lambda: {"holding": None, "mode": "auto"}).allowed
        assert guard.decide("arm.grab", None, {}, lambda: {"holding": "cup", "mode": "manual"}).allowed


class TestStaticCheck:
    def test_validate_refuses_a_denied_call_naming_op_and_rule(self):
        with executor_of(call_guard=NO_ARM_WHEN_LOW) as executor:
            report = executor.validate_plan(envelope(seq(do(cap="camera.snap"), do(cap="laser.fire"),
                                                         do(cap="base.move", args={"speed": "fast"}))))
        assert report["valid"] is False
        denied = [issue for issue in report["issues"] if issue["code"] == "call_denied"]
        assert len(denied) == 2
        assert "no-laser" in denied[0]["message"] and "'laser.fire'" in denied[0]["message"]
        assert denied[0]["message"].startswith("op 3:") and denied[0]["path"] == "/rtdl/children/1"
        assert "no-fast-base" in denied[1]["message"] and denied[1]["path"] == "/rtdl/children/2"

    def test_calls_left_to_the_state_or_to_other_args_pass_validation(self):
        with executor_of(call_guard=NO_ARM_WHEN_LOW) as executor:
            report = executor.validate_plan(envelope(seq(do(cap="arm.grip"),
                                                         do(cap="base.move", args={"speed": "slow"}))))
        assert report["valid"] is True, report["issues"]

    def test_a_deny_default_refuses_what_no_rule_allows(self):
        with executor_of(call_guard={"default": "deny", "rules": [
                {"name": "camera", "effect": "allow", "cap": "camera.*"}]}) as executor:
            report = executor.validate_plan(envelope(seq(do(cap="camera.snap"), do(cap="gripper.open"))))
            builtins_only = executor.validate_plan(envelope(
                do(cap="executor.builtin_get_all_plans", args={})))
        (issue,) = report["issues"]
        assert issue["code"] == "call_denied" and "the default denies it" in issue["message"]
        assert builtins_only["valid"] is True, builtins_only["issues"]  # the executor's own are never guarded

    def test_an_arena_is_checked_too(self):
        arena = json.loads((REPO / "examples" / "rtdl" / "three_commands_arena.json").read_text())
        caps = [node["call"]["contract_id"] for node in arena["nodes"] if node.get("call")]
        with executor_of(call_guard={"rules": [{"name": "not-this", "effect": "deny", "cap": caps[0]}]}) as ex:
            report = ex.validate_plan(arena)
        assert [issue["code"] for issue in report["issues"]] == ["call_denied"] * caps.count(caps[0])
        assert "not-this" in report["issues"][0]["message"]


class TestRuntimeDenial:
    def test_a_denied_call_fails_its_op_and_never_reaches_the_backend(self):
        sim = bt_exec.SimBackend({"state": {"battery": 12}})
        with executor_of(backend=sim, call_guard=NO_ARM_WHEN_LOW) as executor:
            _, record = run_plan(executor, envelope(seq(do(cap="camera.snap"), do(cap="arm.grip"),
                                                        do(cap="camera.save"))))
        assert record["outcome"] == "failed"
        grip = op_of(record, "arm.grip")
        assert grip["state"] == "failed" and "arm-needs-charge" in grip["result"]["error"]
        assert [call.cap for call in sim.calls] == ["camera.snap"]  # the denied call and what follows never ran

    def test_a_state_that_allows_lets_the_call_through(self):
        sim = bt_exec.SimBackend({"state": {"battery": 64}})
        with executor_of(backend=sim, call_guard=NO_ARM_WHEN_LOW) as executor:
            _, record = run_plan(executor, envelope(seq(do(cap="arm.grip"), do(cap="arm.lift"))))
        assert record["outcome"] == "succeeded"
        assert [call.cap for call in sim.calls] == ["arm.grip", "arm.lift"]

    def test_a_backend_without_state_is_denied_by_state_rules(self):
        class Stateless:
            """A backend with no state(): what it would do is never asked."""

            def __init__(self):
                self.started = []

            def start(self, call):
                self.started.append(call.cap)
                return bt_exec.CallStatus("SUCCEEDED")

            def status(self, run_id):
                return bt_exec.CallStatus("FAILED")

            def cancel(self, run_id):
                pass

        backend = Stateless()
        with executor_of(backend=backend, call_guard=NO_ARM_WHEN_LOW) as executor:
            _, record = run_plan(executor, envelope(seq(do(cap="camera.snap"), do(cap="arm.grip"))))
        assert "reports no state" in op_of(record, "arm.grip")["result"]["error"]
        assert backend.started == ["camera.snap"]

    def test_without_a_guard_the_sim_state_changes_nothing(self):
        sim = bt_exec.SimBackend({"state": {"battery": 1}})
        with executor_of(backend=sim) as executor:
            _, record = run_plan(executor, envelope(seq(do(cap="arm.grip"), do(cap="laser.fire"))))
        assert record["outcome"] == "succeeded" and len(sim.calls) == 2
        assert sim.state() == {"battery": 1}

    def test_a_sim_state_must_be_an_object(self):
        with pytest.raises(ConfigError, match="/state"):
            bt_exec.SimBackend({"state": [1, 2]})


def bt_exec_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bt_exec.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


class TestCli:
    def test_validate_with_guard_names_op_and_rule(self, tmp_path):
        rules = tmp_path / "rules.json"
        rules.write_text(json.dumps(NO_ARM_WHEN_LOW))
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(envelope(seq(do(cap="camera.snap"), do(cap="laser.fire")))))
        unguarded = bt_exec_cli("validate", plan, "--json")
        guarded = bt_exec_cli("validate", plan, "--json", "--guard", rules)
        assert unguarded.returncode == 0, unguarded.stderr
        assert guarded.returncode == 1, guarded.stderr
        (issue,) = json.loads(guarded.stdout)["issues"]
        assert issue["code"] == "call_denied" and "no-laser" in issue["message"] and issue["message"].startswith("op 3")

    def test_run_with_guard_fails_the_denied_op_from_the_sim_state(self, tmp_path):
        rules = tmp_path / "rules.yaml"
        rules.write_text("rules:\n  - {name: arm-needs-charge, effect: deny, cap: 'arm.*', "
                         "state: {battery: {lt: 20}}}\n")
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(envelope(seq(do(cap="camera.snap"), do(cap="arm.grip")))))
        events = tmp_path / "events.jsonl"
        charged, low = tmp_path / "charged.json", tmp_path / "low.json"
        charged.write_text(json.dumps({"state": {"battery": 90}}))
        low.write_text(json.dumps({"state": {"battery": 10}}))
        assert bt_exec_cli("run", plan, "--guard", rules, "--sim-script", charged).returncode == 0
        result = bt_exec_cli("run", plan, "--guard", rules, "--sim-script", low, "--events", events)
        assert result.returncode == 1, result.stderr
        failed = [json.loads(line) for line in events.read_text().splitlines()]
        failed = [e for e in failed if e.get("event") == "node_state" and e.get("state") == "failed"
                  and "arm-needs-charge" in json.dumps(e)]
        assert failed, "no failed op names the rule"

    def test_a_bad_rules_file_is_a_usage_error_without_traceback(self, tmp_path):
        rules = tmp_path / "rules.json"
        rules.write_text(json.dumps({"rules": [{"name": "a", "effect": "deny"}]}))
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(envelope(do(cap="camera.snap"))))
        for command in ("validate", "run"):
            result = bt_exec_cli(command, plan, "--guard", rules)
            assert result.returncode == 2, result
            assert "/rules/0" in result.stderr and "Traceback" not in result.stderr


def test_the_guard_still_refuses_up_front_after_a_step_graph_moved_the_scene():
    from qwen3_graphs import cap_to_hatch, scene
    with executor_of(call_guard=NO_ARM_WHEN_LOW, scene=scene()) as executor:
        revision = executor.scene.revision
        answer = executor.submit(cap_to_hatch())
        assert answer["accepted"], answer
        executor.run_until_complete(answer["plan_id"], timeout=10)
        assert executor.scene.revision == revision + 1  # the run moved the scene: admission took a new context
        refused = executor.submit({"op": "do", "description": "fire", "cap": "laser.fire", "args": {}})
        assert not refused["accepted"] and [issue["code"] for issue in refused["issues"]] == ["call_denied"]


def one_step_graph(skill: str) -> dict:
    from qwen3_graphs import graph, step
    return graph([step("t1", skill, "vacuum")], {"t1": {"success": "completed", "grasp_failed": "stop",
                                                       "collision": "stop"}})


def rules(*listed: dict, default: str = "allow") -> dict:
    return {"default": default, "rules": list(listed)}


class TestOneVerdictPerCapability:
    """Every spelling of one capability gets the verdict of that capability: a skill and its aliases
    (``pick`` is ``grab`` in the grant catalog), a cap and the provider it is routed by."""

    @pytest.mark.parametrize("rule_cap", ["pick", "grab", "pi*", "g?ab"])
    @pytest.mark.parametrize("spelled", ["pick", "grab"])
    def test_a_rule_on_any_spelling_of_a_skill_refuses_steps_of_every_spelling(self, rule_cap, spelled):
        from qwen3_graphs import scene
        with executor_of(scene=scene(), call_guard=rules({"name": "no-grab", "effect": "deny", "cap": rule_cap})) as ex:
            answer = ex.submit(one_step_graph(spelled))
        assert not answer["accepted"], answer
        (issue,) = answer["issues"]
        assert issue["code"] == "call_denied" and issue["steps"] == ["t1"]
        assert "no-grab" in issue["message"] and "'grab'" in issue["message"]

    def test_an_allow_rule_on_an_alias_lets_the_skill_through_a_deny_default(self):
        from qwen3_graphs import scene
        guard = rules({"name": "picking-ok", "effect": "allow", "cap": "pick"}, default="deny")
        with executor_of(scene=scene(), call_guard=guard) as ex:
            answer, record = run_plan(ex, one_step_graph("grab"))
        assert record["ops"][0]["state"] == "succeeded", record

    def test_a_state_rule_on_an_alias_decides_the_skills_calls_at_run_time(self):
        from qwen3_graphs import scene
        guard = rules({"name": "grab-needs-charge", "effect": "deny", "cap": "pick", "state": {"battery": {"lt": 20}}})
        for battery, state in ((12, "failed"), (64, "succeeded")):
            sim = bt_exec.SimBackend.in_scene({"state": {"battery": battery}},
                                              scene=bt_exec.compilers.scene_of(scene()))
            with executor_of(backend=sim, scene=scene(), call_guard=guard) as ex:
                _, record = run_plan(ex, one_step_graph("grab"))
            (step,) = record["ops"]
            assert step["state"] == state, record
            if state == "failed":
                assert "grab-needs-charge" in step["result"]["error"] and not sim.calls

    def test_a_rule_naming_an_alias_warns_that_it_applies_to_the_skill(self, caplog):
        with executor_of(call_guard=rules({"name": "no-pick", "effect": "deny", "cap": "pick"})) as ex:
            (warning,) = ex.call_guard.warnings
        assert "'pick', an alias of skill 'grab'" in warning and "/rules/0" in warning
        assert warning in caplog.text

    @pytest.mark.parametrize("cap, named", [("Grab", "'grab'"), ("PICK", "'grab'")])
    def test_a_rule_naming_a_skill_in_another_case_is_refused_at_load(self, cap, named):
        with pytest.raises(ConfigError, match=r"/rules/0/cap") as refused:
            bt_exec.Executor(call_guard=rules({"name": "no", "effect": "deny", "cap": cap}))
        assert "case-sensitive" in str(refused.value) and named in str(refused.value)

    @pytest.mark.parametrize("field, value", [("cap", "arm.move "), ("cap", " grab"), ("provider", "arm\t")])
    def test_a_rule_holding_whitespace_is_refused_at_load(self, field, value):
        rule = {"name": "no", "effect": "deny", "cap": "arm.*", field: value}
        with pytest.raises(ConfigError, match=f"/rules/0/{field}: .* holds whitespace"):
            CallGuard.from_dict(rules(rule))

    def test_an_arena_contract_naming_an_alias_is_judged_as_the_skill(self):
        arena = {"plan_id": "7", "session_id": "s", "round": 1, "root_index": 0, "nodes": [
            {"node_kind": 2, "children": [], "op_id": "1", "description": "pick",
             "call": {"contract_id": "pick", "args_json": '{"object": "vacuum"}'}}]}
        with executor_of(catalog={"pick": {}}, call_guard=rules({"name": "no-grab", "effect": "deny",
                                                                 "cap": "grab"})) as ex:
            report = ex.validate_plan(arena)
        assert [issue["code"] for issue in report["issues"]] == ["call_denied"], report
        assert "'pick' (as 'grab')" in report["issues"][0]["message"]

    @pytest.mark.parametrize("node", [
        {"op": "do", "op_id": 0, "description": "move", "cap": "arm.move", "args": {}},
        {"nodes": [{"node_kind": 2, "children": [], "op_id": "1", "description": "move",
                    "call": {"contract_id": "arm.move"}}], "plan_id": "7", "session_id": "s", "round": 1,
         "root_index": 0},
        {"nodes": [{"node_kind": 2, "children": [], "op_id": "1", "description": "move",
                    "call": {"contract_id": "arm.move", "provider_id": ""}}], "plan_id": "7", "session_id": "s",
         "round": 1, "root_index": 0},
    ], ids=["rtdl-cap", "arena-contract", "arena-empty-provider"])
    def test_a_provider_rule_judges_the_provider_a_call_is_routed_by(self, node):
        guard = rules({"name": "arm-off", "effect": "deny", "cap": "*", "provider": "arm"})
        with executor_of(call_guard=guard) as ex:
            report = ex.validate_plan(node)
        assert [issue["code"] for issue in report["issues"]] == ["call_denied"], report

    def test_a_backend_that_routes_calls_itself_is_asked_for_the_provider(self):
        class RoutesToRobot(bt_exec.SimBackend):
            """Serves every cap without a dot from its provider ``robot`` (as the ROS action backend does)."""

            def routed_provider(self, cap, provider):
                return provider or (cap.partition(".")[0] if "." in cap else "robot")

        from qwen3_graphs import scene
        guard = rules({"name": "robot-off", "effect": "deny", "cap": "*", "provider": "robot"})
        with executor_of(backend=RoutesToRobot(), scene=scene(), call_guard=guard) as ex:
            refused = ex.submit(one_step_graph("grab"))
        assert [issue["code"] for issue in refused["issues"]] == ["call_denied"], refused
