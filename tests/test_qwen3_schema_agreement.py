"""The Qwen3 JSON Schemas and the hand-written loader agree on what is well-formed."""
import copy
import json
from importlib import resources

import jsonschema
import pytest
from referencing import Registry, Resource

import bt_exec

SCHEMAS = {name: json.loads(resources.files("bt_exec.schemas").joinpath(f"{name}.schema.json").read_text())
           for name in ("qwen3-graph", "qwen3-envelope")}
REGISTRY = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in SCHEMAS.values())

GOOD = {"status": "ok", "entry": "s1", "scene_revision": 3,
        "plan": [{"id": "s1", "skill": "grab", "object": "vacuum"},
                 {"id": "s2", "skill": "transfer", "args": {"object": "vacuum", "target": "work"}}],
        "transitions": {"s1": {"success": "s2", "grasp_failed": "operator_required"}, "s2": {"success": "completed"}}}


def changed(path, value, base=GOOD):
    doc = copy.deepcopy(base)
    *keys, last = path
    target = doc
    for key in keys:
        target = target[key]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return doc


DELETE = object()

CASES = [
    ("good", GOOD, True),
    ("edge list", changed(["transitions"], [{"from": "s1", "event": "success", "to": "s2"},
                                            {"from": "s2", "event": "success", "to": "completed"}]), True),
    ("blocked with nothing else", {"status": "blocked", "reason": "no vacuum"}, True),
    ("blocked with junk", {"status": "blocked", "plan": 7, "scene_revision": "x"}, True),
    ("skill contracts ignored", changed(["skill_contracts"], {"grab": "anything"}), True),
    ("unknown top-level key", changed(["note"], "hi"), True),
    ("no status", changed(["status"], DELETE), False),
    ("bad status", changed(["status"], "maybe"), False),
    ("no entry", changed(["entry"], DELETE), False),
    ("entry not a string", changed(["entry"], 1), False),
    ("no plan", changed(["plan"], DELETE), False),
    ("plan not a list", changed(["plan"], {}), False),
    ("step not an object", changed(["plan", 0], "grab"), False),
    ("step without id", changed(["plan", 0, "id"], DELETE), False),
    ("blank id", changed(["plan", 0, "id"], " "), False),
    ("terminal as id", changed(["plan", 0, "id"], "stop"), False),
    ("step without skill", changed(["plan", 0, "skill"], DELETE), False),
    ("param not a string", changed(["plan", 0, "object"], 3), False),
    ("blank param", changed(["plan", 0, "object"], ""), False),
    ("args not an object", changed(["plan", 1, "args"], ["vacuum"]), False),
    ("args value not a string", changed(["plan", 1, "args", "target"], None), False),
    ("no transitions", changed(["transitions"], DELETE), False),
    ("transitions a string", changed(["transitions"], "s1->s2"), False),
    ("next not a string", changed(["transitions", "s1", "success"], 2), False),
    ("event map not an object", changed(["transitions", "s1"], ["success"]), False),
    ("edge without to", changed(["transitions"], [{"from": "s1", "event": "success"}]), False),
    ("revision not an integer", changed(["scene_revision"], "3"), False),
    ("257 steps", changed(["plan"], [{"id": f"s{i}", "skill": "detect", "object": "cap"} for i in range(257)]), False),
]

ENVELOPES = [
    ("envelope with object", {"run_id": "r1", "scene_revision": 3, "response": GOOD}, True),
    ("envelope with text", {"run_id": "r1", "scene_revision": 3, "response": json.dumps(GOOD)}, True),
    ("envelope with blank run id", {"run_id": " ", "response": GOOD}, False),
    ("envelope with bad revision", {"scene_revision": 2.5, "response": GOOD}, False),
    ("envelope with a list response", {"response": [GOOD]}, False),
    ("envelope with a broken graph", {"response": changed(["status"], DELETE)}, False),
]


def loads(doc) -> bool:
    try:
        bt_exec.load(doc, dialect="qwen3")
    except bt_exec.PlanError:
        return False
    return True


@pytest.mark.parametrize("name, doc, valid", CASES, ids=[c[0] for c in CASES])
def test_graph_schema_and_loader_agree(name, doc, valid):
    schema_valid = jsonschema.Draft202012Validator(SCHEMAS["qwen3-graph"], registry=REGISTRY).is_valid(doc)
    assert (schema_valid, loads(doc)) == (valid, valid)


@pytest.mark.parametrize("name, doc, valid", ENVELOPES, ids=[c[0] for c in ENVELOPES])
def test_envelope_schema_and_loader_agree(name, doc, valid):
    schema_valid = jsonschema.Draft202012Validator(SCHEMAS["qwen3-envelope"], registry=REGISTRY).is_valid(doc)
    assert (schema_valid, loads(doc)) == (valid, valid)


def test_reference_rules_are_the_loaders_alone():
    dangling = changed(["transitions", "s1", "success"], "s9")
    duplicate = changed(["plan", 1, "id"], "s1")
    for doc in (dangling, duplicate):
        assert jsonschema.Draft202012Validator(SCHEMAS["qwen3-graph"]).is_valid(doc)
        assert not loads(doc)
