"""The shipped call-guard example (examples/guard): valid rules, and validate/run --guard as the user guide says."""
import json

import jsonschema
import pytest

import bt_exec
from bt_exec.cli import main
from bt_exec.compilers.call_guard import load_call_guard

GUARD = "examples/guard/"
RULES = GUARD + "battery_rules.json"


def test_the_example_rules_are_valid_and_use_a_cap_glob_args_and_a_state_condition():
    rules = json.load(open(RULES))
    jsonschema.Draft202012Validator(json.load(open("schemas/call-guard.schema.json"))).validate(rules)
    load_call_guard(RULES)
    assert any("*" in rule["cap"] for rule in rules["rules"])
    assert any("args" in rule for rule in rules["rules"]) and any("state" in rule for rule in rules["rules"])


def test_validate_refuses_the_plan_a_rule_denies_naming_the_op_and_the_rule(capsys):
    assert main(["validate", GUARD + "pick_up_cup.json", "--guard", RULES]) == 0  # its rule waits for the state
    assert main(["validate", GUARD + "drive_fast.json", "--guard", RULES]) == 1
    said = capsys.readouterr().out
    assert "op 2: call guard: rule 'no-fast-base' denies 'base.move' [call_denied]" in said
    assert main(["validate", GUARD + "drive_fast.json"]) == 0  # without the guard nothing denies it


def test_run_refuses_a_denied_plan_and_fails_the_op_a_state_rule_denies(capsys):
    assert main(["run", GUARD + "drive_fast.json", "--guard", RULES]) != 0
    assert "rule 'no-fast-base' denies 'base.move'" in capsys.readouterr().err
    assert main(["run", GUARD + "pick_up_cup.json", "--guard", RULES, "--sim-script", GUARD + "low_battery.json"]) == 1
    said = capsys.readouterr().out
    assert "op 3 do failed: grasp the cup [error: call guard: rule 'arm-needs-charge' denies 'arm.grasp']" in said
    assert main(["run", GUARD + "pick_up_cup.json", "--guard", RULES, "--sim-script", GUARD + "charged.json"]) == 0
    assert "op 3 do succeeded: grasp the cup" in capsys.readouterr().out


@pytest.mark.parametrize("battery, outcome", [(15, "failed"), (20, "succeeded")])
def test_the_python_api_applies_the_example_rules_alike(battery, outcome):
    backend = bt_exec.SimBackend({"default": {"outcome": "success"}, "state": {"battery": battery}})
    executor = bt_exec.Executor(backend, call_guard=RULES)
    plan_id = executor.submit(json.load(open(GUARD + "pick_up_cup.json")))["plan_id"]
    assert executor.run_until_complete(plan_id, timeout=10)["outcome"] == outcome
    assert executor.submit(json.load(open(GUARD + "drive_fast.json")))["issues"][0]["code"] == "call_denied"
