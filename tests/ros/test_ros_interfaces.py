"""The generated interface classes agree with the messages tests/test_ros_convert.py makes from the definitions,
and the conversions fill the generated classes as they fill those."""
import importlib

import interface_messages
import pytest
from std_msgs.msg import String

from bt_exec.ros import convert

GENERATED_KIND = {"bool": "boolean"}  # rosidl's name for it; every other kind keeps its .srv name


def generated(name: str):
    return getattr(importlib.import_module("bt_exec_interfaces.srv"), name)


def assert_same_message(stand_in_class, generated_class):
    kinds = {field: GENERATED_KIND.get(kind, kind) for field, (kind, _default) in stand_in_class.FIELDS.items()}
    assert generated_class.get_fields_and_field_types() == kinds
    made, stand_in = generated_class(), stand_in_class()
    assert {field: getattr(made, field) for field in kinds} == {field: getattr(stand_in, field) for field in kinds}


@pytest.mark.parametrize("name", interface_messages.SERVICES)
def test_the_definitions_read_without_ros_are_the_generated_classes(name):
    stand_in = interface_messages.service(name)
    assert_same_message(stand_in.Request, generated(name).Request)
    assert_same_message(stand_in.Response, generated(name).Response)


def test_string_is_std_msgs_string():
    assert_same_message(interface_messages.String, String)


SUBMIT_ANSWER = {"accepted": False, "run_id": None, "plan_id": None, "verdict": "replan_required",
                 "message": "plan\nagain", "issues": [{"code": "stale_revision", "path": "", "message": "\ud800"}],
                 "scene": {"scene_revision": 12}}
REFUSED = {"error": {"code": "not_found", "message": "no plan\n'9'"}}
FILLS = {  # conversion: (service or None for String, arguments before the message, arguments after it)
    "answer_to_submit_msg": ("Submit", (200, SUBMIT_ANSWER), ("made",)),
    "stop_at_to_msg": ("StopAt", (200, {"success": True, "message": "armed\nat 2"}), ()),
    "disarm_to_msg": ("Disarm", (200, {"success": True, "disarmed": True, "message": "disarmed\nat 2"}), ()),
    "plan_control_to_msg": ("PlanControl", ("pause_plan", 200, {"success": True, "paused": True, "message": "p"}), ()),
    "cancel_to_msg": ("Cancel", (200, {"finished": False, "message": "still\ntearing down"}), ()),
    "status_to_msg": ("GetStatus", (404, REFUSED), ()),
    "plans_to_msg": ("ListPlans", (200, {"count": 0, "plans": []}), ()),
    "text_to_msg": (None, ("graph \u00e9",), ()),
    "event_to_msg": (None, ({"event": "plan_started", "time": 1.5},), ()),
    "snapshot_to_msg": (None, ({"time": 1.0, "plans": []},), ()),
}


@pytest.mark.parametrize("conversion", FILLS)
def test_conversions_fill_the_generated_classes(conversion):
    srv, before, after = FILLS[conversion]
    if srv is None:
        real_class, stand_in_class = String, interface_messages.String
    else:
        real_class, stand_in_class = generated(srv).Response, interface_messages.service(srv).Response
    real = getattr(convert, conversion)(*before, real_class(), *after)
    stand_in = getattr(convert, conversion)(*before, stand_in_class(), *after)
    assert isinstance(real, real_class)
    fields = real_class.get_fields_and_field_types()
    assert {field: getattr(real, field) for field in fields} == {field: getattr(stand_in, field) for field in fields}
    assert any(getattr(real, field) != getattr(real_class(), field) for field in fields)  # it filled something


def test_requests_read_from_the_generated_classes():
    submit = generated("Submit").Request(graph_json='{"plan": []}', dialect="QWEN3", scene_revision=3, run_id="h")
    assert convert.msg_to_submission(submit, 1024).source.startswith('{"run_id": "h", "scene_revision": 3')
    assert convert.msg_to_stop_at(generated("StopAt").Request(plan_id="1", op_id="2")) == (
        "stop_plan_at", {"plan_id": "1", "op_id": "2"})
    assert convert.msg_to_stop_at(generated("StopAt").Request(plan_id="1", op_id="2", action="pause"))[1][
        "action"] == "pause"
    assert convert.msg_to_disarm(generated("Disarm").Request(plan_id="1", op_id="2", when="on_enter")) == (
        "disarm_stop_point", {"plan_id": "1", "op_id": "2", "when": "on_enter"})
    assert convert.msg_to_cancel(generated("Cancel").Request(wait_ms=4_000_000_000)) == (
        "cancel_all", {"wait_ms": 4_000_000_000})
