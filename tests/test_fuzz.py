"""Property-based tests and a fuzz harness over ``load``, ``validate`` and ``Executor.submit``, both dialects.

Inputs: (a) random JSON values (as dicts, JSON text and bytes, with the dialects' own keys and words
mixed in) and random text; (b) mutations of valid plans: the shipped examples and the test builders
(RTDL trees, envelopes, arenas and meta ops; Qwen3 graphs, edge lists and submit envelopes, the
response as an object, as text and fenced), with keys deleted or added, values of the wrong type,
strings over the length limit, deep nesting, duplicated entries (ids), dangling and cyclic
references, unicode oddities, NaN-ish numbers as text, huge integers, NaN in a dict; sent as a dict,
as JSON text or as bytes, sometimes with small limits.

Properties:
- ``load`` raises nothing but ``PlanError`` (never TypeError, KeyError, RecursionError, ...), and a
  PlanError always carries issues;
- ``validate`` never raises; it returns a Report whose verdict is one of ok, invalid, control,
  replan_required, blocked, agrees with ``load`` (refused: invalid; meta op: control), and whose
  issues have string codes, paths and messages; ok and control come with no issue;
- results are deterministic: the same input gives the same report (as a dict) twice, and neither
  call changes the input;
- every issue's path exists in the input, or its parent does (a missing field is reported where it
  belongs): JSON pointers for trees, envelopes and graphs (through a ``response`` given as text),
  index notation for arenas (through ``args_json``);
- ``Executor.submit`` (sim backend; for step graphs an executor with a scene) never raises and never
  answers with an ``internal`` issue; an accepted plan runs to its end with exactly one
  ``plan_complete``, every op final or pending, and leaves no plan in flight;
- every report, answer and final record encodes as UTF-8 JSON (text with no UTF-8 form, a lone
  surrogate, is refused at load), so no door can fail to send it.

Short form (CI, a modest number of examples per property, about 25 s on 2 cores)::

    python -m pytest -q tests/test_fuzz.py

Long form (N examples per property)::

    BT_EXEC_FUZZ_EXAMPLES=5000 python -m pytest -q tests/test_fuzz.py -s

Both forms are reproducible: hypothesis is derandomized and keeps no example database. With
``-s`` each property prints how many inputs it tried.
"""
import json
import math
import os
import pathlib
import re

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from jsonpointer import unescape
from qwen3_graphs import (cap_to_hatch, cap_without_vacuum, detect_chain, edge_list, retry_loop, return_vacuum,
                          scene, screw_to_hole, spec_example, vacuum_released_at_work, vacuum_to_work)
from qwen3_graphs import envelope as graph_envelope
from qwen3_graphs import graph, step
from rtdl_plans import EventLog, do, envelope, par, seq

import bt_exec
from bt_exec.compilers import Report, Scene, SkillCatalog
from bt_exec.compilers.qwen3 import _FENCE
from bt_exec.errors import Issue, PlanError

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = int(os.environ.get("BT_EXEC_FUZZ_EXAMPLES", "0") or 0)
VERDICTS = {"ok", "invalid", "control", "replan_required", "blocked"}
FINAL_OR_PENDING = {"succeeded", "failed", "canceled", "timeout", "pending"}
CATALOG = SkillCatalog.named("grant")
TRIED: dict[str, int] = {}
VERDICTS_SEEN: dict[str, dict[str, int]] = {}


def fuzz(short: int):
    """Settings of one property: ``short`` examples in CI, BT_EXEC_FUZZ_EXAMPLES in the long form."""
    return settings(max_examples=EXAMPLES or short, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck), print_blob=True)


def count(name: str) -> None:
    TRIED[name] = TRIED.get(name, 0) + 1


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    yield
    if TRIED:
        print("\nfuzz inputs tried per property: " + ", ".join(f"{k} {v}" for k, v in sorted(TRIED.items())))
        for name, verdicts in sorted(VERDICTS_SEEN.items()):
            print(f"  {name} verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())))


# --- seeds: valid inputs of every shape ---------------------------------------------------------------


def _arena_do(op_id, contract="robonix/prim/act", args_json="{}"):
    return {"node_kind": 2, "children": [], "op_id": op_id, "description": f"act {op_id}",
            "call": {"call_id": f"c{op_id}", "provider_id": "prim", "contract_id": contract, "args_json": args_json}}


def _arena(nodes, root_index=0):
    return {"plan_id": "p", "session_id": "s", "round": 1, "root_index": root_index, "nodes": nodes}


def _example(name):
    return json.loads((ROOT / "examples" / name).read_text())


RTDL_SEEDS = {
    "example_snapshot": lambda: _example("rtdl/snapshot_battery.json"),
    "example_arena": lambda: _example("rtdl/three_commands_arena.json"),
    "example_cancel_all": lambda: _example("rtdl/cancel_all.json"),
    "tree": lambda: seq(do("a", args={"text": "hi", "n": 1}), par(do("b"), do("c", cap="cam.snap")),
                        description="root"),
    "envelope": lambda: envelope(seq(do("a"), par(do("b"), seq(do("c"), do("d"))))),
    "empty_sequence": lambda: envelope(seq(), description=""),
    "builtins": lambda: envelope(seq(do("list", cap="executor.builtin_get_all_plans"),
                                     do("stop", cap="executor.builtin_cancel_all_plans", args={"wait_ms": 0}))),
    "arena": lambda: _arena([{"node_kind": 0, "children": [1, 2], "op_id": "10", "description": "root"},
                             _arena_do("11", args_json='{"x": [1, 2], "y": {"z": "w"}}'),
                             {"node_kind": 1, "children": [3], "op_id": "12", "description": "par"},
                             _arena_do("13")]),
    "cancel_plan": lambda: envelope({"op": "cancel_plan", "plan_id": "1", "wait_ms": 10}, description="stop it"),
    "stop_plan_at": lambda: {"op": "stop_plan_at", "plan_id": "1", "target_op_id": "2", "when": "on_enter"},
}

RTDL_CATALOG = bt_exec.CapabilityCatalog({
    "sim.act": {"args_schema": {"type": "object", "properties": {"text": {"type": "string", "maxLength": 5},
                                                              "n": {"type": "integer"}},
                                "additionalProperties": False}},
    "cam.snap": {}, "battery.battery_status": {},
    "tiago_camera.camera_snapshot": {"args_schema": {"type": "object", "additionalProperties": False}},
    "audio.speak_text": {"args_schema": {"type": "object", "required": ["text"],
                                         "properties": {"text": {"type": "string"}, "a/b~c": {"type": "null"}}}},
    "robonix/prim/act": {"args_schema": {"type": "object", "properties": {
        "x": {"type": "array", "items": {"type": "integer", "maximum": 1}},
        "y": {"type": "object", "required": ["q"]}}}},
})
SCENE = Scene.from_dict(scene())
EXAMPLE_SCENE = Scene.from_file(ROOT / "examples" / "qwen3" / "scene.json")
QWEN3_SEEDS = {
    "spec_example": lambda: (spec_example(), SCENE),
    "cap_to_hatch": lambda: (cap_to_hatch(), Scene.from_dict(scene(vacuum="vacuum_socket"))),
    "cap_without_vacuum": lambda: (cap_without_vacuum(), SCENE),
    "retry_loop": lambda: (retry_loop(), SCENE),
    "screw_to_hole": lambda: (screw_to_hole(), SCENE),
    "vacuum_to_work": lambda: (vacuum_to_work(), SCENE),
    "vacuum_released": lambda: (vacuum_released_at_work(), SCENE),
    "return_vacuum": lambda: (return_vacuum(), Scene.from_dict(scene(vacuum="patron"))),
    "detect_chain": lambda: (detect_chain(6), SCENE),
    "edge_list": lambda: ({**spec_example(), "transitions": edge_list(spec_example()["transitions"])}, SCENE),
    "blocked": lambda: (graph([step("s1", "tighten", "screw_1")], {"s1": {"success": "completed"}}, status="blocked",
                              reason="tighten is not supported"), SCENE),
    "envelope": lambda: (graph_envelope(spec_example()), SCENE),
    "envelope_text": lambda: (graph_envelope(cap_to_hatch(), as_text=True), SCENE),
    "envelope_fenced": lambda: (graph_envelope(retry_loop(), fenced=True), SCENE),
    "example_cap_to_hatch": lambda: (_example("qwen3/cap_to_hatch.json"), EXAMPLE_SCENE),
    "example_cap_without_vacuum": lambda: (_example("qwen3/cap_without_vacuum.json"), EXAMPLE_SCENE),
}

# --- random JSON values ----------------------------------------------------------------------------------

KEYS = ["op", "op_id", "description", "children", "cap", "args", "rtdl", "rtdl_description", "content",
        "task_update", "goal", "success_criterion", "nodes", "root_index", "node_kind", "call", "call_id",
        "provider_id", "contract_id", "args_json", "plan_id", "session_id", "round", "wait_ms", "target_op_id",
        "when", "status", "entry", "plan", "transitions", "id", "skill", "object", "target", "tool", "from",
        "event", "to", "response", "run_id", "scene_revision", "reason", "skill_contracts"]
WORDS = ["sequence", "parallel", "do", "cancel_plan", "cancel_all", "stop_plan_at", "on_enter", "on_complete",
         "ok", "blocked", "in_progress", "done", "s1", "s2", "s3", "completed", "stop", "replan_required",
         "operator_required", "success", "grasp_failed", "collision", "not_found", "unknown", "holding", "grab",
         "pick", "transfer", "release", "inspect_state", "dock_tool", "detect", "tighten", "vacuum", "cap",
         "work", "vacuum_socket", "hatch_seat", "screw_1", "hole_1", "sim.act", "executor.builtin_cancel_all_plans",
         "robonix/system/executor/builtin/get_all_plans", "1", "0", "", " ", "{}", "[]"]
ODD_STRINGS = ["\x00", "\ud800", "\udfff", "\\ud800", "\\uDC00x", "\u202e", "\ufeff", "e\u0301", "\U0001d4e21",
               "\uff33\uff34\uff2f\uff30", "\u200b", "s1\u200b", "S1", " s1", "s1 ", "\n", "a/b", "~0~1", "..", "[0]",
               "a.b", "nodes[0]", "NaN", "Infinity", "-Infinity", "1e999", "-0", "0x1F", "\uff11", "1_000", "null",
               "true"]
ODD_NUMBERS = [-1, 0, 1, 2, 7, 12, 2 ** 31, 2 ** 63, 2 ** 64 + 1, -(2 ** 63), 1e308, -0.0, 0.5, 1e-320, True, False,
               30_001, 10 ** 13, 1e13, 1.0, 2 ** 1023, 2 ** 1023 - 1]

scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=12) | st.sampled_from(WORDS) | st.sampled_from(ODD_STRINGS))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5)
                           | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=6),
                           max_leaves=25)
documents = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), json_values, max_size=8)

SMALL = bt_exec.Limits(max_input_bytes=600, max_ops=4, max_depth=3, max_graph_steps=3, max_string_chars=12)
limits_choice = st.sampled_from([None, None, None, SMALL])

# --- mutations ---------------------------------------------------------------------------------------------------


def _locations(doc):
    """Every (container, key) of a document, in document order (bounded: mutations may nest deeply)."""
    out, stack = [], [doc]
    while stack and len(out) < 5000:
        value = stack.pop()
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in items:
            out.append((value, key))
            stack.append(child)
    return out


def _values_like(doc, value):
    return [container[key] for container, key in _locations(doc) if type(container[key]) is type(value)]


def clone(value):
    """A deep copy of a JSON-like value without recursion (mutations nest deeper than copy.deepcopy goes)."""
    def shell(v):
        return {} if isinstance(v, dict) else [] if isinstance(v, list) else v

    top = shell(value)
    stack = [(value, top)]
    while stack:
        original, copied = stack.pop()
        if isinstance(original, dict):
            for key, child in original.items():
                copied[key] = shell(child)
                stack.append((child, copied[key]))
        elif isinstance(original, list):
            for child in original:
                copied.append(shell(child))
                stack.append((child, copied[-1]))
    return top


def _nest(value, levels, as_list):
    for _ in range(levels):
        value = [value] if as_list else {"k": value}
    return value


def mutate(data, doc, as_dict: bool):
    """One mutation at a place drawn in ``doc``; returns the new document (the top may be replaced)."""
    places = _locations(doc)
    kind = data.draw(st.sampled_from(["delete", "retype", "huge_string", "deep", "duplicate", "dangle", "swap",
                                      "unicode", "number_text", "number", "add_key", "rename_key", "cycle", "top"]
                                     + (["nan", "huge_int"] if as_dict else [])), label="mutation")
    if kind == "top" or not places:
        return data.draw(json_values, label="new top")
    container, key = places[data.draw(st.integers(0, len(places) - 1), label="place")]
    value = container[key]
    if kind == "delete":
        del container[key]
    elif kind == "retype":
        container[key] = data.draw(json_values, label="value")
    elif kind == "huge_string":
        size = data.draw(st.sampled_from([bt_exec.Limits().max_string_chars + 1, 13, 100_000]), label="size")
        container[key] = data.draw(st.sampled_from(["x", "\u00e9", "\U0001f600", "\\"]), label="char") * size
    elif kind == "deep":
        levels = data.draw(st.sampled_from([3, 40, 200, 330, 1000, 3000]), label="levels")
        container[key] = _nest(value, levels, data.draw(st.booleans(), label="as list"))
    elif kind == "duplicate":
        if isinstance(container, list):
            container.insert(key, clone(value))
        else:
            for other in container:
                container[other] = clone(value)
                break
    elif kind == "dangle":
        if isinstance(value, int) and not isinstance(value, bool):
            container[key] = data.draw(st.sampled_from([-1, value + 1, value + 1000, 2 ** 40]), label="index")
        else:
            container[key] = data.draw(st.sampled_from(["s99", "nowhere", "99", "0", "stop", "completed "]), label="id")
    elif kind == "swap":
        like = _values_like(doc, value)
        if like:
            container[key] = clone(data.draw(st.sampled_from(like), label="other value"))
    elif kind == "unicode":
        odd = data.draw(st.sampled_from(ODD_STRINGS), label="odd")
        container[key] = (value + odd if data.draw(st.booleans(), label="append") else odd + value) \
            if isinstance(value, str) else odd
    elif kind == "number_text":
        container[key] = data.draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-0", "0x1F", "\uff11",
                                                    "1_000", "", " 1", "1.0", "+1"]), label="number text")
    elif kind == "number":
        container[key] = data.draw(st.sampled_from(ODD_NUMBERS), label="number")
    elif kind == "add_key" and isinstance(container, dict):
        container[data.draw(st.sampled_from(KEYS + ODD_STRINGS), label="key")] = data.draw(json_values, label="value")
    elif kind == "add_key":
        container.append(data.draw(json_values, label="value"))
    elif kind == "rename_key" and isinstance(container, dict):
        new = data.draw(st.sampled_from([key.upper(), key + " ", " " + key, key + "\u200b", key[:-1] or "_"]),
                        label="renamed")
        container[new] = container.pop(key)
    elif kind == "cycle":
        # a reference back to something earlier: arena children, transition targets, the entry
        if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            value.append(data.draw(st.integers(0, 3), label="index back"))
        elif isinstance(value, str):
            ids = [v for v in _values_like(doc, "") if re.fullmatch(r"[a-z]\d+", v)]
            if ids:
                container[key] = data.draw(st.sampled_from(ids), label="id back")
        elif isinstance(value, dict) and isinstance(container, dict):
            value[data.draw(st.sampled_from(["success", "holding", "children"]), label="edge")] = \
                data.draw(st.sampled_from(["s1", "t1", "h1", "d1", [0], [1, 0]]), label="back to")
    elif kind == "nan":
        container[key] = data.draw(st.sampled_from([math.nan, math.inf, -math.inf]), label="non-finite")
    elif kind == "huge_int":
        container[key] = 10 ** 5000
    return doc


def render(data, doc, dict_only=False):
    """The document as a dict, JSON text or bytes (drawn); a document JSON cannot hold stays a dict."""
    form = "dict" if dict_only else data.draw(st.sampled_from(["dict", "text", "text", "bytes", "bom", "pretty"]),
                                              label="form")
    if form == "dict" or not isinstance(doc, dict):
        if not isinstance(doc, dict):
            form = data.draw(st.sampled_from(["dict", "text"]), label="form of a non-object")
            if form == "dict":
                return doc
        else:
            return doc
    try:
        text = json.dumps(doc, ensure_ascii=data.draw(st.booleans(), label="ascii"),
                          indent=2 if form == "pretty" else None)
    except (RecursionError, ValueError):  # nested past what json.dumps takes: keep the dict
        return doc
    if form in ("bytes", "bom"):
        try:
            return ("\ufeff" if form == "bom" else "").encode() + text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: only text can carry it
            return text
    return text


# --- checking --------------------------------------------------------------------------------------------------


def shown(source) -> str:
    try:
        return repr(source)[:2000]
    except (ValueError, RecursionError):
        return "(too deep or too long to show)"


def _snapshot(doc):
    return clone(doc)


def _same(before, after) -> bool:
    try:
        return before == after
    except RecursionError:
        return True


def _decode(text):
    fenced = _FENCE.match(text)
    try:
        return True, json.loads((fenced.group(1) if fenced else text).strip())
    except (ValueError, RecursionError):
        return False, None


def _step(value, token: str):
    """The child ``token`` names in ``value``; (False, None) when there is none."""
    if isinstance(value, dict):
        return (True, value[token]) if token in value else (False, None)
    if isinstance(value, list):
        if re.fullmatch(r"0|[1-9][0-9]*", token) and int(token) < len(value):
            return True, value[int(token)]
    return False, None


def pointer_resolves(doc, pointer: str) -> bool:
    """Whether a JSON pointer, or its parent, exists in ``doc`` (through fields holding JSON text)."""
    if pointer == "":
        return True
    assert pointer.startswith("/"), f"not a JSON pointer: {pointer!r}"
    tokens = [unescape(token) for token in pointer.split("/")[1:]]
    value = doc
    for index, token in enumerate(tokens):
        if isinstance(value, str):
            decoded, value = _decode(value)
            if not decoded:
                return False
        found, child = _step(value, token)
        if not found:
            return index == len(tokens) - 1  # the parent exists
        value = child
    return True


def arena_path_resolves(doc, path: str) -> bool:
    """Whether an arena path (``nodes[3].call.args_json at /x``), or its parent, exists in ``doc``."""
    main, _, pointer = path.partition(" at ")
    value, rest = doc, main
    while rest:
        if isinstance(value, list):
            match = re.match(r"\[(\d+)\]\.?", rest)
            if not match or int(match.group(1)) >= len(value):
                return not re.search(r"[.\[]", rest[1:])
            value, rest = value[int(match.group(1))], rest[match.end():]
        elif isinstance(value, dict):
            keys = [k for k in value if rest.startswith(k) and rest[len(k):len(k) + 1] in ("", ".", "[")]
            if not keys:
                return not re.search(r"[.\[]", rest)  # only the last name is missing: the parent exists
            key = max(keys, key=len)
            value, rest = value[key], rest[len(key):]
            rest = rest[1:] if rest.startswith(".") else rest
        else:
            return False
    if pointer:
        decoded, args = _decode(value) if isinstance(value, str) else (False, None)
        return decoded and pointer_resolves(args, pointer)
    return True


def utf8(answer: dict) -> bytes:
    """An answer as a door sends it, UTF-8 JSON: text with no UTF-8 form (a lone surrogate) must have been refused."""
    return json.dumps(answer, ensure_ascii=False).encode("utf-8")


def check_paths(doc, issues, arena: bool) -> None:
    for issue in issues:
        if arena and not issue.path.startswith("/"):
            assert arena_path_resolves(doc, issue.path), f"{issue}: no such place in the input"
        else:
            assert pointer_resolves(doc, issue.path), f"{issue}: no such place in the input"


def is_arena(doc) -> bool:
    return isinstance(doc, dict) and "rtdl" not in doc and ("nodes" in doc or "root_index" in doc)


def check_load_and_validate(source, doc, dialect="auto", limits=None, scene=None, tally=None, catalog=None):
    """Every property of load and validate on one input; returns the loaded plan or None."""
    before = _snapshot(source)
    try:
        loaded = bt_exec.load(source, dialect=dialect, limits=limits)
    except PlanError as exc:
        loaded, refusal = None, exc
        assert exc.issues and all(isinstance(i, Issue) for i in exc.issues)
    else:
        refusal = None
    first = bt_exec.validate(source, catalog=catalog, dialect=dialect, limits=limits, scene=scene)
    second = bt_exec.validate(source, catalog=catalog, dialect=dialect, limits=limits, scene=scene)
    assert isinstance(first, Report) and first.verdict in VERDICTS
    assert first.as_dict() == second.as_dict(), "validate is not deterministic"
    assert _same(before, source), "load or validate changed its input"
    for issue in first.issues:
        assert isinstance(issue.code, str) and issue.code and isinstance(issue.path, str)
        assert isinstance(issue.message, str) and issue.message
        assert issue.code != "internal"
    utf8(first.as_dict())  # every door can send the report
    # What the input itself has; the issues of the document its fixes give follow them (after_fixes).
    own = [issue for issue in first.issues if not issue.after_fixes]
    assert first.issues[:len(own)] == own, "the issues found after fixes come last"
    if refusal is not None:  # what load refuses, then what the checks find in a graph read in part
        assert first.verdict == "invalid"
        assert [i.as_dict() for i in own[:len(refusal.issues)]] == [i.as_dict() for i in refusal.issues]
    elif catalog is not None:
        assert first.verdict in ("ok", "invalid", "control")
    elif isinstance(loaded, bt_exec.ControlRequest):
        assert first.verdict == "control"
    else:
        assert first.verdict != "control"
        if loaded.dialect == "rtdl":
            assert first.verdict in ("ok", "invalid")
        if first.verdict == "invalid" and catalog is None and loaded.dialect == "rtdl":
            assert all(i.code == "bad_args" for i in own)  # a builtin's args: the only check after load
    if first.verdict in ("ok", "control", "blocked"):
        assert first.issues == []
    if first.verdict == "replan_required":
        assert own and all(i.code == "precondition_fails_in_scene" for i in own)
    if doc is not None:
        check_paths(doc, own, arena=dialect != "qwen3" and is_arena(doc))
    if tally:
        VERDICTS_SEEN.setdefault(tally, {}).setdefault(first.verdict, 0)
        VERDICTS_SEEN[tally][first.verdict] += 1
    return loaded


def check_submit(executor, events, source, run_id=None):
    """Executor.submit never raises; an accepted plan runs to its end, once, leaving nothing in flight."""
    answer = executor.submit(source, run_id=run_id)
    assert isinstance(answer, dict) and isinstance(answer["accepted"], bool)
    utf8(answer)
    count("submits accepted" if answer["accepted"] else "submits refused")
    assert all(issue["code"] != "internal" for issue in answer["issues"]), answer["issues"]
    if answer["accepted"] and answer["plan_id"] is not None:
        plan_id = answer["plan_id"]
        record = executor.run_until_complete(plan_id, timeout=30)
        assert record["outcome"] is not None
        utf8(record)
        assert all(op["state"] in FINAL_OR_PENDING for op in record["ops"]), record["ops"]
        events.complete(plan_id)  # exactly one plan_complete
    assert executor.get_all_plans()["count"] == 0
    return answer


def rtdl_executor(limits=None):
    executor = bt_exec.Executor(bt_exec.SimBackend(), limits=limits)
    events = EventLog()
    executor.subscribe(events)
    return executor, events


def graph_executor(the_scene, limits=None):
    executor = bt_exec.Executor(scene=the_scene, skill_catalog=CATALOG, limits=limits, max_steps=50)
    events = EventLog()
    executor.subscribe(events)
    return executor, events


# --- properties ------------------------------------------------------------------------------------------------


@fuzz(200)
@given(doc=json_values | documents, dialect=st.sampled_from(["auto", "rtdl", "qwen3"]), limits=limits_choice,
       data=st.data())
def test_random_json_values(doc, dialect, limits, data):
    count("random_json")
    source = render(data, doc)
    check_load_and_validate(source, doc, dialect=dialect, limits=limits, scene=SCENE, tally="random_json")


@fuzz(200)
@given(text=st.text(max_size=60) | st.binary(max_size=60).map(bytes),
       dialect=st.sampled_from(["auto", "rtdl", "qwen3"]))
def test_random_text_and_bytes(text, dialect):
    count("random_text")
    check_load_and_validate(text, None, dialect=dialect)


@fuzz(200)
@given(name=st.sampled_from(sorted(RTDL_SEEDS) + sorted(QWEN3_SEEDS)), data=st.data())
def test_mutated_json_text(name, data):
    """Text-level damage to a valid plan's JSON: cut, characters inserted or removed, literals swapped in."""
    count("mutated_text")
    doc = RTDL_SEEDS[name]() if name in RTDL_SEEDS else QWEN3_SEEDS[name]()[0]
    text = json.dumps(doc)
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        at = data.draw(st.integers(0, len(text)), label="at")
        edit = data.draw(st.sampled_from(["cut", "insert", "remove"]), label="edit")
        if edit == "cut":
            text = text[:at]
        elif edit == "insert":
            text = text[:at] + data.draw(st.sampled_from(['"', "{", "}", "[", "]", ",", ":", "\\", "NaN", "Infinity",
                                                          "1e999", "-", "\x00", "\ud800", "null", " "] + ODD_STRINGS),
                                         label="inserted") + text[at:]
        else:
            text = text[:at] + text[at + data.draw(st.integers(1, 5), label="removed"):]
    check_load_and_validate(text, None, tally="mutated_text")
    check_load_and_validate(text, None, dialect="qwen3", scene=SCENE)


@fuzz(300)
@given(name=st.sampled_from(sorted(RTDL_SEEDS)), limits=limits_choice, data=st.data())
def test_mutated_rtdl(name, limits, data):
    count("mutated_rtdl")
    as_dict = data.draw(st.booleans(), label="as dict")
    doc = RTDL_SEEDS[name]()
    for _ in range(data.draw(st.integers(0, 4), label="mutations")):
        doc = mutate(data, doc, as_dict)
    source = render(data, doc, dict_only=as_dict)
    note(f"source: {shown(source)}")
    check_load_and_validate(source, doc, limits=limits, tally="mutated_rtdl")
    if isinstance(doc, dict) and not isinstance(source, bytes):
        check_load_and_validate(source, doc, limits=limits, catalog=RTDL_CATALOG)
    executor, events = rtdl_executor(limits)
    check_submit(executor, events, source, run_id=data.draw(st.sampled_from([None, "run-a"]), label="run_id"))
    executor.close(wait_ms=0)


@fuzz(300)
@given(name=st.sampled_from(sorted(QWEN3_SEEDS)), limits=limits_choice, data=st.data())
def test_mutated_qwen3(name, limits, data):
    count("mutated_qwen3")
    as_dict = data.draw(st.booleans(), label="as dict")
    doc, the_scene = QWEN3_SEEDS[name]()
    if data.draw(st.booleans(), label="response as an object") and isinstance(doc.get("response"), str):
        doc["response"] = _decode(doc["response"])[1]
    for _ in range(data.draw(st.integers(0, 4), label="mutations")):
        doc = mutate(data, doc, as_dict)
    source = render(data, doc, dict_only=as_dict)
    note(f"source: {shown(source)}")
    check_load_and_validate(source, doc, limits=limits, scene=the_scene, tally="mutated_qwen3")
    check_load_and_validate(source, doc, dialect="qwen3", limits=limits, scene=None)
    executor, events = graph_executor(the_scene, limits)
    check_submit(executor, events, source, run_id=data.draw(st.sampled_from([None, "run-a"]), label="run_id"))
    executor.close(wait_ms=0)


# The seeds their scene refuses (blocked, replan_required, invalid): nothing of them runs.
REFUSED_QWEN3_SEEDS = {"blocked", "cap_without_vacuum", "example_cap_without_vacuum", "vacuum_released"}


@fuzz(100)
@given(name=st.sampled_from(sorted(set(QWEN3_SEEDS) - REFUSED_QWEN3_SEEDS)), data=st.data())
def test_valid_looking_graphs_run_to_a_terminal(name, data):
    """Graphs that pass validation, on an executor whose sim scripts random outcomes per skill."""
    count("graphs_run")
    doc, the_scene = QWEN3_SEEDS[name]()
    outcomes = ["success", "failure", "timeout", "grasp_failed", "collision", "not_found", "holding", "empty",
                "unknown", "nonsense"]
    script = {"caps": {skill: {"outcome": data.draw(st.lists(st.sampled_from(outcomes), min_size=1, max_size=4),
                                                    label=skill)}
                       for skill in ("grab", "pick", "transfer", "detect", "inspect_state", "release", "dock_tool")}}
    from bt_exec.compilers.symbolic import World
    backend = bt_exec.SimBackend(script, world=World.from_scene(CATALOG, the_scene))
    executor = bt_exec.Executor(backend, scene=the_scene, skill_catalog=CATALOG, max_steps=30)
    events = EventLog()
    executor.subscribe(events)
    answer = check_submit(executor, events, doc)
    assert answer["accepted"], (name, answer["verdict"])
    assert executor.get_plan_result(answer["plan_id"])["terminal"] is not None
    executor.close(wait_ms=0)


SKILLS = sorted(CATALOG.skills) + ["pick", "inspect", "tighten", "fly"]
OBJECTS = ["vacuum", "cap", "screw_1", "screw_2", "hole_1", "hammer"]
TARGETS = ["work", "hatch_seat", "vacuum_socket", "cap_storage", "hole_1", "hole_2", "moon"]
EVENTS = ["success", "failed", "collision", "timeout", "grasp_failed", "not_found", "empty", "holding", "placed",
          "unknown", "slipped"]
TERMINALS = ["completed", "replan_required", "operator_required", "stop"]


def _fits(spec, names, typed):
    return [name for name in names if typed(name) in spec["types"]]


@st.composite
def random_graphs(draw):
    """A graph made of the catalog's own words on a random scene. Loose: skills, parameters, events and next
    steps at random (cycles, dead ends, unreachable steps). Sound: parameters of the right types, the
    required events, failures to terminals or inspect_state, a success chain through every step plus
    random extra edges (recovery loops): these reach the symbolic precondition check and the runtime."""
    sound = draw(st.integers(0, 3), label="sound") > 0
    ids = [f"s{i}" for i in range(draw(st.integers(1, 8), label="steps"))]
    steps, skills = [], {}
    for step_id in ids:
        name = draw(st.sampled_from(sorted(CATALOG.skills) if sound else SKILLS), label="skill")
        step_doc = {"id": step_id, "skill": name}
        where = step_doc if draw(st.booleans(), label="params on the step") else step_doc.setdefault("args", {})
        skill = CATALOG.skills.get(CATALOG.resolve(name) or "")
        if sound and skill is not None:
            skills[step_id] = skill
            keys = [k for k, spec in skill.params.items() if not spec.get("optional")]
            if skill.one_of:
                keys.append(draw(st.sampled_from(list(skill.one_of)), label="one of"))
            for key in keys:
                spec = skill.params[key]
                names = _fits(spec, TARGETS, CATALOG.target_type) if key == "target" else \
                    _fits(spec, OBJECTS, CATALOG.object_type)
                if spec.get("must_be") == "tool_of_object":
                    continue
                if names:
                    where[key] = draw(st.sampled_from(names), label=key)
        else:
            if draw(st.integers(0, 4), label="object?"):
                where["object"] = draw(st.sampled_from(OBJECTS), label="object")
            if draw(st.integers(0, 2), label="target?"):
                where["target"] = draw(st.sampled_from(TARGETS), label="target")
        steps.append(step_doc)
    transitions = {}
    inspectors = [i for i, skill in skills.items() if skill.observes]
    for index, step_id in enumerate(ids):
        skill = skills.get(step_id)
        if skill is None:
            events = draw(st.lists(st.sampled_from(EVENTS), max_size=4, unique=True), label=f"events of {step_id}")
            transitions[step_id] = {event: draw(st.sampled_from(ids + TERMINALS), label="next") for event in events}
            continue
        following = ids[index + 1] if index + 1 < len(ids) else "completed"
        extra = draw(st.lists(st.sampled_from(list(skill.outcomes)), max_size=2, unique=True), label="extra events")
        mapped = {}
        for event in list(skill.required) + [e for e in extra if e not in skill.required]:
            if event in ("success", "holding", "empty", "placed") and draw(st.integers(0, 7), label="loop?"):
                mapped[event] = following if event in ("success", "holding") else \
                    draw(st.sampled_from(ids + ["replan_required"]), label="back to")
            elif event in ("success", "holding"):
                mapped[event] = draw(st.sampled_from(ids + TERMINALS), label="anywhere")
            elif event in ("grasp_failed", "unknown") and inspectors and draw(st.booleans(), label="inspect?"):
                mapped[event] = draw(st.sampled_from(inspectors), label="inspector")
            else:
                mapped[event] = draw(st.sampled_from(TERMINALS[1:]), label="terminal")
        transitions[step_id] = mapped
    the_graph = graph(steps, transitions, entry=ids[0] if sound else draw(st.sampled_from(ids[:2]), label="entry"))
    the_scene = scene(vacuum=draw(st.sampled_from(["vacuum_socket", "patron", "unknown", "work"]), label="vacuum"),
                      cap=draw(st.sampled_from(["cap_storage", "hatch_seat", "unknown", "hand"]), label="cap"),
                      holding=draw(st.sampled_from([None, "cap"]), label="holding"))
    return the_graph, Scene.from_dict(the_scene)


@fuzz(200)
@given(drawn=random_graphs(), data=st.data())
def test_random_graphs_of_catalog_words(drawn, data):
    """Graphs that get past the loader: the checker's graph algorithms and symbolic state, and the runtime."""
    count("random_graphs")
    the_graph, the_scene = drawn
    source = render(data, the_graph)
    check_load_and_validate(source, the_graph, scene=the_scene, tally="random_graphs")
    check_load_and_validate(source, the_graph, scene=None)
    outcomes = ["success", "failure", "timeout", "grasp_failed", "collision", "not_found", "holding", "empty",
                "unknown"]
    script = {"default": {"outcome": data.draw(st.lists(st.sampled_from(outcomes), min_size=1, max_size=3),
                                               label="outcomes")}}
    from bt_exec.compilers.symbolic import World
    backend = bt_exec.SimBackend(script, world=World.from_scene(CATALOG, the_scene))
    executor = bt_exec.Executor(backend, scene=the_scene, skill_catalog=CATALOG, max_steps=30)
    events = EventLog()
    executor.subscribe(events)
    check_submit(executor, events, source)
    executor.close(wait_ms=0)


# --- regressions: inputs the fuzzing found, kept as plain tests ---------------------------------------------------


class TestFoundByFuzzing:
    """Each input made ``load`` or ``validate`` raise something other than PlanError, or say different
    things from one process to the next, before the fix in compilers/."""

    def test_a_key_that_is_no_string_is_a_type_issue(self):
        for doc in ({"op": "do", "op_id": 0, "description": "x", "cap": "a.b", 1: 2},
                    {**spec_example(), "plan": [{"id": "s1", "skill": "grab", "args": {1: "x"}}]},
                    {"nodes": [{"node_kind": 0, "children": [], "op_id": "1", "description": "d", 5: 1}],
                     "root_index": 0}):
            report = bt_exec.validate(doc)  # was AttributeError: 'int' object has no attribute 'replace'
            assert report.verdict == "invalid" and [i.code for i in report.issues] == ["type"]

    def test_an_integer_too_long_to_print_is_a_bad_value(self):
        huge = 10 ** 5000  # str(huge) raises ValueError: the messages quoting it raised
        cases = [({"nodes": [{"node_kind": 0, "children": [], "op_id": "1", "description": "d"}], "root_index": huge},
                  "root_index"),
                 ({"op": "cancel_all", "wait_ms": -huge}, "/wait_ms"),
                 ({**spec_example(), "scene_revision": huge}, "/scene_revision")]
        for doc, path in cases:
            report = bt_exec.validate(doc, scene=SCENE)
            assert [(i.code, i.path) for i in report.issues] == [("bad_value", path)]

    def test_deep_nesting_in_a_dict_is_too_deep_not_a_recursion_error(self):
        value = "x"
        for _ in range(5000):
            value = [value]
        the_graph = spec_example()
        the_graph["plan"][0]["object"] = value  # a message quoted it: RecursionError in repr
        assert [i.code for i in bt_exec.validate(the_graph).issues] == ["too_deep"]
        tree = seq(do(args={"a": value}))  # loaded, then beyond any JSON text a journal could write
        assert [i.code for i in bt_exec.validate(tree).issues] == ["too_deep"]

    def test_values_json_has_not_are_refused_in_a_dict(self):
        cyclic = seq(do())
        cyclic["children"].append(cyclic)
        shared = seq()
        for _ in range(40):  # 2**40 nodes when walked: refused by size, not walked
            shared = seq(shared, shared)
        cases = {"nan": do(args={"x": math.nan}), "tuple": do(args={"x": (1, 2)}), "set": seq(), "cyclic": cyclic}
        cases["set"]["children"] = {1, 2}
        for name, doc in cases.items():
            assert [i.code for i in bt_exec.validate(doc).issues] == ["type"], name
        limits = bt_exec.Limits(max_input_bytes=1_000_000)  # the default 16 MiB takes seconds to count up to
        assert [i.code for i in bt_exec.validate(shared, limits=limits).issues] == ["too_large"]

    def test_unknown_fields_are_reported_in_input_order_whatever_the_hash_seed(self):
        node = {"op": "do", "op_id": 0, "description": "x", "cap": "a.b", "zz": 1, "aa": 2, "mm": 3, "out": 4, "foo": 5}
        paths = [i.path for i in bt_exec.validate(node).issues]
        assert paths == ["/zz", "/aa", "/mm", "/out", "/foo"]  # was a set difference: string-hash order

    def test_a_param_key_with_a_slash_is_escaped_and_located_in_args(self):
        the_graph = spec_example()
        the_graph["plan"][0]["args"] = {"a/b": 3}  # the path was /plan/0/a/b: neither it nor its parent exists
        refused = bt_exec.validate(the_graph).issues  # then what the checks find in the graph as read
        assert (refused[0].code, refused[0].path) == ("type", "/plan/0/args/a~1b")
        assert all(pointer_resolves(the_graph, issue.path) for issue in refused)
        the_graph["plan"][0]["args"] = {"a/b": "x"}
        issues = bt_exec.validate(the_graph, scene=SCENE).issues
        assert [(i.code, i.path) for i in issues] == [("unknown_param", "/plan/0/args/a~1b")]
        assert pointer_resolves(the_graph, issues[0].path) and not pointer_resolves(the_graph, "/plan/0/a/b")
