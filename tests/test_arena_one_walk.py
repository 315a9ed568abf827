"""The one-walk loads of a wire arena and of an envelope: where they answer, the long way (check_document,
then the loader) finds nothing wrong and loads the same plan; every kind of bad value sends them the long way."""
import copy
import json

from hypothesis import given, settings, strategies as st

import bt_exec
from bt_exec.compilers.dialects import DIALECTS
from bt_exec.compilers.rtdl import load_rtdl
from bt_exec.compilers.rtdl.arena import load_arena_within_limits
from bt_exec.compilers.rtdl.envelope import load_envelope_within_limits
from bt_exec.compilers.limit_walk import check_document
from bt_exec.compilers.limits import DEFAULT_LIMITS, Limits

LIMITS = Limits(max_string_chars=40, max_ops=20)


def arena():
    return {"plan_id": "7", "session_id": "s", "round": 2, "root_index": 0, "nodes": [
        {"node_kind": 0, "children": [1, 2], "op_id": "1", "description": "both"},
        {"node_kind": 2, "children": [], "op_id": "2", "description": "move",
         "call": {"call_id": "7:1", "provider_id": "arm", "contract_id": "robonix/arm/move",
                  "args_json": '{"x": 1, "y": [2, 3]}'}},
        {"node_kind": 1, "children": [3], "op_id": "3", "description": "look"},
        {"node_kind": 2, "children": [], "op_id": "4", "description": "snap",
         "call": {"contract_id": "robonix/cam/snap"}},
    ]}


ODD_VALUES = st.sampled_from([
    None, True, -1, 0, 1, 3, 2 ** 70, 10 ** 400, 1.5, "", " ", "x" * 41, "\ud800", "é", "a\\u0041", "1" * 320,
    "{}", '{"a": "\\ud800"}', '{"n": ' + "9" * 320 + "}", "[1]", '{"a":' * 30 + "1" + "}" * 30, [], [0], [9], {},
    {"contract_id": "a b"}, {"args_json": "{"}, {"contract_id": "ok", "extra": 1}])
PLACES = st.sampled_from([
    ("plan_id",), ("session_id",), ("round",), ("root_index",), ("extra",), ("nodes", 0, "children"),
    ("nodes", 1, "op_id"), ("nodes", 1, "description"), ("nodes", 1, "node_kind"), ("nodes", 1, "call"),
    ("nodes", 1, "call", "args_json"), ("nodes", 1, "call", "contract_id"), ("nodes", 1, "call", "call_id"),
    ("nodes", 1, "call", "provider_id"), ("nodes", 2, "call"), ("nodes", 3, "op_id"), ("nodes", 3, "extra")])


def plan_fields(plan):
    return (plan.root, plan.description, plan.depth, plan.meta,
            [(op.op_id, op.kind, op.description, op.children, op.cap, op.args, op.provider, op.call_id, op.path)
             for op in plan.ops.values()])


@settings(max_examples=400, derandomize=True, deadline=None)
@given(changes=st.lists(st.tuples(PLACES, ODD_VALUES), max_size=3))
def test_where_the_one_walk_answers_the_long_way_agrees(changes):
    doc = arena()
    for place, value in changes:
        target = doc
        for key in place[:-1]:
            target = target[key] if isinstance(target, list) or key in target else target.setdefault(key, {})
            if not isinstance(target, (dict, list)):
                break
        else:
            if isinstance(target, dict) or (isinstance(target, list) and place[-1] < len(target)):
                target[place[-1]] = copy.deepcopy(value)
    doc = json.loads(json.dumps(doc))  # as a door decodes it
    fast = load_arena_within_limits(doc, LIMITS)
    if fast is None:
        return
    embedded = DIALECTS["rtdl"].embedded_json(doc)
    assert check_document(doc, LIMITS, arena=True, embedded=embedded) == []
    assert plan_fields(fast) == plan_fields(load_rtdl(doc, LIMITS))


def test_a_well_formed_arena_takes_the_one_walk_and_loads_as_the_long_way():
    doc = arena()
    assert load_arena_within_limits(doc, DEFAULT_LIMITS) is not None
    assert plan_fields(bt_exec.load(json.dumps(doc))) == plan_fields(load_rtdl(doc, DEFAULT_LIMITS))


def test_bad_values_are_still_reported_at_their_place():
    doc = arena()
    doc["nodes"][1]["description"] = "\ud800"
    try:
        bt_exec.load(json.dumps(doc))
    except bt_exec.PlanError as exc:
        assert [(issue.code, issue.path) for issue in exc.issues] == [("bad_text", "nodes[1].description")]
    else:
        raise AssertionError("a lone surrogate loaded")


# --- the envelope ------------------------------------------------------------------------------------

def envelope():
    return {"content": "c", "rtdl_description": "plan", "task_update": {"goal": "g", "status": "in_progress"},
            "rtdl": {"op": "sequence", "op_id": 0, "description": "both", "children": [
                {"op": "do", "op_id": 0, "description": "move", "cap": "arm.move", "args": {"x": 1, "y": "up"}},
                {"op": "parallel", "op_id": 0, "description": "look", "children": [
                    {"op": "do", "op_id": 0, "description": "snap", "cap": "cam.snap"}]}]}}


ENVELOPE_PLACES = st.sampled_from([
    ("content",), ("rtdl_description",), ("task_update",), ("task_update", "goal"), ("extra",),
    ("rtdl", "op_id"), ("rtdl", "description"), ("rtdl", "children"), ("rtdl", "extra"), ("rtdl", "op"),
    ("rtdl", "children", 0, "op_id"), ("rtdl", "children", 0, "description"), ("rtdl", "children", 0, "cap"),
    ("rtdl", "children", 0, "args"), ("rtdl", "children", 0, "args", "x"), ("rtdl", "children", 0, "args", "z"),
    ("rtdl", "children", 0, "extra"), ("rtdl", "children", 1, "children"),
    ("rtdl", "children", 1, "children", 0, "args"), ("rtdl", "children", 1, "children", 0, "op_id")])
ENVELOPE_VALUES = st.one_of(ODD_VALUES, st.sampled_from([
    {"a": {"b": 1}}, {"a": [1]}, {"a": "x" * 41}, {"é": 1}, {"x" * 41: 1}, {"a": 2 ** 1100}, [[[[]]]],
    "do", "sequence", "cancel_all", "arm.other", "executor.builtin_cancel_plan", {"plan_id": 3}]))


@settings(max_examples=400, derandomize=True, deadline=None)
@given(changes=st.lists(st.tuples(ENVELOPE_PLACES, ENVELOPE_VALUES), max_size=3))
def test_where_the_envelope_walk_answers_the_long_way_agrees(changes):
    doc = envelope()
    for place, value in changes:
        target = doc
        for key in place[:-1]:
            if isinstance(target, list) and isinstance(key, int):
                target = target[key] if key < len(target) else None
            elif isinstance(target, dict) and isinstance(key, str):
                target = target.setdefault(key, {})
            else:
                target = None
            if not isinstance(target, (dict, list)):
                break
        else:
            last = place[-1]
            if isinstance(target, dict) and isinstance(last, str) or \
                    isinstance(target, list) and isinstance(last, int) and last < len(target):
                target[last] = copy.deepcopy(value)
    doc = json.loads(json.dumps(doc))  # as a door decodes it
    fast = load_envelope_within_limits(doc, LIMITS)
    if fast is None:
        return
    assert check_document(doc, LIMITS) == []
    assert plan_fields(fast) == plan_fields(load_rtdl(doc, LIMITS))


def test_a_well_formed_envelope_takes_the_one_walk_and_loads_as_the_long_way():
    doc = envelope()
    assert load_envelope_within_limits(doc, DEFAULT_LIMITS) is not None
    assert plan_fields(bt_exec.load(json.dumps(doc))) == plan_fields(load_rtdl(doc, DEFAULT_LIMITS))


def test_bad_values_in_an_envelope_are_still_reported_at_their_place():
    doc = envelope()
    doc["rtdl"]["children"][0]["args"]["y"] = "\ud800"
    assert load_envelope_within_limits(json.loads(json.dumps(doc)), DEFAULT_LIMITS) is None
    try:
        bt_exec.load(json.dumps(doc))
    except bt_exec.PlanError as exc:
        assert [(issue.code, issue.path) for issue in exc.issues] == [("bad_text", "/rtdl/children/0/args/y")]
    else:
        raise AssertionError("a lone surrogate loaded")
