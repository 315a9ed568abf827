"""Repairs: every issue with a clear remedy carries a JSON Patch ``fix``; applied in report order, the fixes
of a report give a valid plan for nine broken plans in ten of a corpus made from valid ones."""
import ast
import copy
import json
import pathlib
import random
import subprocess
import sys

import jsonpatch
import pytest

import bt_exec
from bt_exec.cli.plan_commands import FIX_ROUNDS
from bt_exec.compilers import apply_fixes, fixable
from bt_exec.compilers.dialects import DIALECTS
from bt_exec.compilers.fixes import PLACEHOLDER_DESCRIPTION, DialectFixes, NameSearch, document_fixes, pointer_of
from bt_exec.errors import Issue
from qwen3_graphs import (cap_to_hatch, cap_without_vacuum, edge_list, envelope as qwen3_envelope, graph, retry_loop,
                          scene, screw_to_hole, spec_example, step, vacuum_to_work)
from rtdl_plans import do, envelope, par, seq

REPO = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
CAPS = ("nav.move_to", "arm.grasp", "arm.release", "camera.capture", "speech.say", "gripper.open")
CATALOG = {cap: {} for cap in CAPS}
MIN_REPAIR_RATE = 0.9


def check(doc, **options):
    """The report of ``doc`` as a list of issue dicts, and whether it is valid."""
    report = bt_exec.validate(doc, **options)
    return report, [issue.as_dict() for issue in report.issues]


def repaired(doc, **options):
    """The document the report's fixes give, and the report of that document."""
    _report, issues = check(doc, **options)
    fixed = apply_fixes(doc, issues)
    return fixed, bt_exec.validate(fixed, **options)


def only_issue(doc, **options) -> dict:
    """The one issue of ``doc`` itself (those its repaired document still has, after_fixes, are not its own)."""
    _report, issues = check(doc, **options)
    own = [issue for issue in issues if not issue.get("after_fixes")]
    assert len(own) == 1, issues
    return own[0]


# --- the corpus ---------------------------------------------------------------------------------------------

def misspelt(word: str, rng: random.Random) -> str:
    """``word`` with one slip of the keyboard: two neighbours swapped, a letter dropped, doubled or changed."""
    index = rng.randrange(len(word) - 1) if len(word) > 2 else 0
    kind = rng.choice(("swap", "drop", "double", "change"))
    if kind == "swap" and word[index] != word[index + 1]:
        return word[:index] + word[index + 1] + word[index] + word[index + 2:]
    if kind == "drop" and len(word) > 3:
        return word[:index] + word[index + 1:]
    if kind == "double":
        return word[:index] + word[index] + word[index:]
    letters = [c for c in "aeiounrst" if c != word[index]]
    return word[:index] + rng.choice(letters) + word[index + 1:]


def tree_bases():
    return [
        envelope(seq(do("go to the table", "nav.move_to", {"x": 1.0}), do("take the cup", "arm.grasp"),
                     do("say done", "speech.say", {"text": "done"}))),
        envelope(par(do("look", "camera.capture"), seq(do("open", "gripper.open"), do("let go", "arm.release")))),
        seq(do("go", "nav.move_to"), par(do("look", "camera.capture"), do("speak", "speech.say")),
            do("take", "arm.grasp")),
        envelope(seq(seq(do("open", "gripper.open"), do("take", "arm.grasp")), do("drop", "arm.release"))),
    ]


def arena_bases():
    doc = json.loads((EXAMPLES / "rtdl" / "three_commands_arena.json").read_text())
    own = {"plan_id": "9", "root_index": 0, "nodes": [
        {"node_kind": 0, "children": [1, 2, 3], "op_id": "a", "description": "fetch", "call": None},
        {"node_kind": 2, "children": [], "op_id": "b", "description": "go",
         "call": {"contract_id": "nav.move_to", "args_json": "{\"x\": 1}", "provider_id": "nav"}},
        {"node_kind": 1, "children": [4, 5], "op_id": "c", "description": "both", "call": None},
        {"node_kind": 2, "children": [], "op_id": "d", "description": "say",
         "call": {"contract_id": "speech.say", "args_json": "{}"}},
        {"node_kind": 2, "children": [], "op_id": "e", "description": "look",
         "call": {"contract_id": "camera.capture", "args_json": "{}"}},
        {"node_kind": 2, "children": [], "op_id": "f", "description": "grab",
         "call": {"contract_id": "arm.grasp", "args_json": "{}"}},
    ]}
    return [doc, own]


def tree_nodes(doc):
    """Every node of a tree document (bare or in an envelope), parents before children."""
    stack, out = [doc.get("rtdl", doc)], []
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node.get("children", [])))
    return out


def break_tree(doc, rng: random.Random, faults: int):
    doc = copy.deepcopy(doc)
    nodes = tree_nodes(doc)
    for node in rng.sample(nodes, min(faults, len(nodes))):
        choices = ["field", "kind", "description_missing", "description_empty", "description_type"]
        if node["op"] == "do":
            choices += ["cap", "cap", "args_text", "args_field"]
        fault = rng.choice(choices)
        if fault == "cap":
            node["cap"] = misspelt(node["cap"], rng)
        elif fault == "args_text":
            node["args"] = json.dumps(node["args"] or {"speed": 0.5})
        elif fault == "args_field":
            node["arg"] = node.pop("args")
        elif fault == "field":
            key = "cap" if node["op"] == "do" else "children"
            node[misspelt(key, rng)] = node.pop(key)
        elif fault == "kind":
            node["op"] = misspelt(node["op"], rng)
        elif fault == "description_missing":
            del node["description"]
        elif fault == "description_empty":
            node["description"] = "  "
        else:
            node["description"] = 7
    return doc


def break_arena(doc, rng: random.Random, faults: int):
    doc = copy.deepcopy(doc)
    nodes = doc["nodes"]
    for index in rng.sample(range(len(nodes)), min(faults, len(nodes))):
        node = nodes[index]
        choices = ["field", "kind_name", "description_missing", "op_id_missing", "child_text"]
        if node["node_kind"] == 2:
            choices += ["cap", "args_object", "call_field"]
        fault = rng.choice(choices)
        if fault == "cap":
            node["call"]["contract_id"] = misspelt(node["call"]["contract_id"], rng)
        elif fault == "args_object":
            node["call"]["args_json"] = json.loads(node["call"].get("args_json") or "{}")
        elif fault == "call_field":
            node["call"]["contract"] = node["call"].pop("contract_id")
        elif fault == "field":
            key = rng.choice(["description", "children"])
            node[misspelt(key, rng)] = node.pop(key)
        elif fault == "kind_name":
            node["node_kind"] = {0: "sequence", 1: "parallel", 2: "do"}[node["node_kind"]]
        elif fault == "description_missing":
            del node["description"]
        elif fault == "op_id_missing":
            del node["op_id"]
        elif node["children"]:
            node["children"][0] = str(node["children"][0])
        else:
            node["description"] = ""
    return doc


def qwen3_bases():
    example = json.loads((EXAMPLES / "qwen3" / "cap_to_hatch.json").read_text())
    return [spec_example(), cap_to_hatch(), retry_loop(), screw_to_hole(), vacuum_to_work(), example]


def outcomes_of(graph_doc, step_id) -> dict:
    transitions = graph_doc["transitions"]
    if isinstance(transitions, dict):
        return transitions[step_id]
    return {edge["event"]: edge["to"] for edge in transitions if edge["from"] == step_id}


def set_outcome(graph_doc, step_id, event, target):
    """Point a step's outcome at ``target``; None: take the transition away."""
    transitions = graph_doc["transitions"]
    if isinstance(transitions, dict):
        if target is None:
            del transitions[step_id][event]
        else:
            transitions[step_id][event] = target
        return
    for index, edge in enumerate(transitions):
        if edge["from"] == step_id and edge["event"] == event:
            if target is None:
                del transitions[index]
            else:
                edge["to"] = target
            return


def break_graph(doc, rng: random.Random, faults: int):
    doc = copy.deepcopy(doc)
    as_text = isinstance(doc.get("response"), str)
    inner = fixable(doc)["response"] if as_text else doc.get("response", doc)  # fenced JSON text, read
    for _ in range(faults):
        fault = rng.choice(["skill", "object", "param", "transition_target", "failure_missing", "status_missing",
                            "args_text"])
        at = rng.choice(inner["plan"])
        if fault == "skill":
            at["skill"] = misspelt(at["skill"], rng)
        elif fault == "object" and "object" in at:
            at["object"] = misspelt(at["object"], rng)
        elif fault == "param" and "target" in at:
            at[misspelt("target", rng)] = at.pop("target")
        elif fault == "transition_target":
            edges = outcomes_of(inner, at["id"])
            event = rng.choice(list(edges))
            if edges[event] in {step["id"] for step in inner["plan"]}:
                set_outcome(inner, at["id"], event, misspelt(edges[event], rng))
        elif fault == "failure_missing":
            if outcomes_of(inner, at["id"]).get("grasp_failed") in ("stop", "replan_required"):
                set_outcome(inner, at["id"], "grasp_failed", None)
        elif fault == "status_missing":
            inner.pop("status", None)
        elif fault == "args_text" and "object" in at:
            at["args"] = json.dumps({"object": at.pop("object")})
    if as_text:
        doc["response"] = json.dumps(inner)
    return doc


def corpus():
    """(name, broken document, validate options, faults) made from valid plans with one to three faults each."""
    rng = random.Random(20261201)
    out = []
    for number, base in enumerate(tree_bases()):
        assert bt_exec.validate(base, catalog=CATALOG).ok
        for copy_number in range(30):
            faults = rng.randint(1, 3)
            out.append((f"tree{number}.{copy_number}", break_tree(base, rng, faults), {"catalog": CATALOG}, faults))
    for number, base in enumerate(arena_bases()):
        catalog = {**CATALOG, "robonix/system/executor/builtin/run_command": {}}
        assert bt_exec.validate(base, catalog=catalog).ok
        for copy_number in range(40):
            faults = rng.randint(1, 3)
            out.append((f"arena{number}.{copy_number}", break_arena(base, rng, faults), {"catalog": catalog}, faults))
    for number, base in enumerate(qwen3_bases()):
        # the scene each graph is planned for: the vacuum in its socket, or on the flange already
        scenes = (scene(), scene(vacuum="patron"), json.loads((EXAMPLES / "qwen3" / "scene.json").read_text()))
        the_scene = next(each for each in scenes if bt_exec.validate(base, scene=each).ok)
        for copy_number in range(25):
            faults = rng.randint(1, 3)
            out.append((f"graph{number}.{copy_number}", break_graph(base, rng, faults), {"scene": the_scene}, faults))
    # the broken ones only: some slips (a doubled letter of a missing key) leave a plan valid
    return [entry for entry in out if not bt_exec.validate(entry[1], **entry[2]).ok]


CORPUS = corpus()


def repaired_in_rounds(doc, **options):
    """What ``bt-exec validate --fix`` does: apply the report's fixes, check again, and again while the new
    report has fixes (a fix can uncover a fault the check did not reach: an unknown op hides the node's cap)."""
    for _round in range(FIX_ROUNDS):
        report, issues = check(doc, **options)
        if report.ok or not any("fix" in issue for issue in issues):
            return report
        doc = apply_fixes(doc, issues)
    return bt_exec.validate(doc, **options)


def test_the_fixes_repair_nine_broken_plans_in_ten():
    one_report = in_rounds = single_fault = single_fault_repaired = 0
    by_kind = {}
    for name, doc, options, faults in CORPUS:
        at_once = repaired(doc, **options)[1].ok
        fully = repaired_in_rounds(doc, **options).ok
        one_report += at_once
        in_rounds += fully
        if faults == 1:
            single_fault += 1
            single_fault_repaired += at_once
        kind = name.rstrip("0123456789.")
        done, count = by_kind.get(kind, (0, 0))
        by_kind[kind] = (done + fully, count + 1)
    total = len(CORPUS)
    print(f"\n{total} broken plans: the fixes of the first report alone repair {one_report} ({one_report / total:.1%});"
          f" of the {single_fault} with one fault, {single_fault_repaired} "
          f"({single_fault_repaired / single_fault:.1%}); as --fix applies them, report after report, {in_rounds} "
          f"({in_rounds / total:.1%}: " + ", ".join(f"{kind} {done}/{count}" for kind, (done, count)
                                                  in sorted(by_kind.items())) + ")")
    assert total >= 300
    assert one_report / total >= MIN_REPAIR_RATE
    assert in_rounds / total >= MIN_REPAIR_RATE
    assert single_fault_repaired / single_fault >= MIN_REPAIR_RATE


def test_the_fixes_of_a_report_apply_in_order_without_conflict():
    for name, doc, options, _faults in CORPUS:
        before = copy.deepcopy(doc)
        _report, issues = check(doc, **options)
        assert doc == before  # working the fixes out changes nothing of the input
        patched = copy.deepcopy(fixable(doc))
        changed = set()
        for issue in issues:
            if "fix" not in issue:
                continue
            patched = jsonpatch.apply_patch(patched, issue["fix"])  # raises on a fix that does not fit
            paths = {operation["path"] for operation in issue["fix"] if not operation["path"].endswith("/-")}
            assert not paths & changed, (name, issue)  # no place is fixed twice
            changed |= paths


ODD_VALUES = [None, 1, -3, 2.5, True, "", " ", "x", "do", "{}", "[]", '{"a": 1}', [], {}, [1, "2"], {"op": "do"},
              "s1", "completed", "~a/b"]


def places(value, path=()):
    """Every object and array in ``value``, with its path."""
    if isinstance(value, (dict, list)):
        yield path, value
        for key, inner in (value.items() if isinstance(value, dict) else enumerate(value)):
            yield from places(inner, path + (key,))


def test_working_out_fixes_never_fails_whatever_the_values():
    rng = random.Random(7)
    for _ in range(600):
        _name, doc, options, _faults = rng.choice(CORPUS)
        doc = copy.deepcopy(doc)
        for _change in range(rng.randint(1, 4)):
            _path, container = rng.choice(list(places(doc)))
            if isinstance(container, dict):
                key = rng.choice([*container, "extra", "op", "children", "description", "op_id", "~a/b"])
                container[key] = copy.deepcopy(rng.choice(ODD_VALUES))
            elif container:
                container[rng.randrange(len(container))] = copy.deepcopy(rng.choice(ODD_VALUES))
        _report, issues = check(doc, **options)
        apply_fixes(doc, issues)


# --- each kind of fix ---------------------------------------------------------------------------------------

def test_a_misspelt_cap_becomes_the_nearest_known_cap():
    issue = only_issue(envelope(seq(do(cap="nav.move_ot"), do(cap="arm.grasp"))), catalog=CATALOG)
    assert issue["code"] == "unknown_cap"
    assert issue["fix"] == [{"op": "replace", "path": "/rtdl/children/0/cap", "value": "nav.move_to"}]


def test_a_misspelt_arena_contract_is_replaced_where_it_is():
    doc = arena_bases()[1]
    doc["nodes"][3]["call"]["contract_id"] = "speech.sya"
    issue = only_issue(doc, catalog=CATALOG)
    assert issue["fix"] == [{"op": "replace", "path": "/nodes/3/call/contract_id", "value": "speech.say"}]


def test_a_misspelt_field_moves_to_the_field_it_stands_for_and_the_missing_field_is_fixed_by_it():
    node = do(cap="arm.grasp")
    node["descriptoin"] = node.pop("description")
    _report, issues = check(envelope(seq(node)))
    assert [issue["code"] for issue in issues] == ["unknown_field", "required"]
    assert issues[0]["fix"] == [{"op": "move", "from": "/rtdl/children/0/descriptoin",
                                 "path": "/rtdl/children/0/description"}]
    assert "fix" not in issues[1] and issues[1]["fixed_by"] == 0


def test_a_field_like_no_allowed_one_is_removed():
    node = do(cap="arm.grasp")
    node["priority"] = 3
    issue = only_issue(envelope(seq(node)))
    assert issue["fix"] == [{"op": "remove", "path": "/rtdl/children/0/priority"}]


def test_a_misspelt_op_kind_becomes_the_kind():
    node = do(cap="arm.grasp")
    node["op"] = "sequnce"
    node.pop("cap"), node.pop("args")
    node["children"] = [do()]
    issue = only_issue(envelope(seq(node)))
    assert issue["fix"] == [{"op": "replace", "path": "/rtdl/children/0/op", "value": "sequence"}]


def test_args_written_as_json_text_become_the_object():
    issue = only_issue(envelope(seq(do(cap="arm.grasp", args='{"force": 2}'))))
    assert issue["code"] == "type"
    assert issue["fix"] == [{"op": "replace", "path": "/rtdl/children/0/args", "value": {"force": 2}}]


def test_args_json_written_as_an_object_becomes_json_text():
    doc = arena_bases()[1]
    doc["nodes"][1]["call"]["args_json"] = {"x": 1}
    issue = only_issue(doc)
    assert issue["fix"] == [{"op": "replace", "path": "/nodes/1/call/args_json", "value": '{"x":1}'}]


def test_a_number_where_a_string_belongs_becomes_its_text_and_text_where_a_number_belongs_the_number():
    doc = arena_bases()[1]
    doc["nodes"][2]["children"][1] = "5"
    doc["nodes"][4]["description"] = 12
    _report, issues = check(doc)
    fixes = [issue["fix"] for issue in issues]
    assert [{"op": "replace", "path": "/nodes/2/children/1", "value": 5}] in fixes
    assert repaired(doc)[1].ok


def test_a_missing_description_gets_a_placeholder():
    node = do(cap="arm.grasp")
    del node["description"]
    issue = only_issue(envelope(seq(node)))
    assert issue["fix"] == [{"op": "add", "path": "/rtdl/children/0/description", "value": PLACEHOLDER_DESCRIPTION}]


def test_a_missing_arena_op_id_gets_one_no_node_uses():
    doc = arena_bases()[1]
    del doc["nodes"][2]["op_id"]
    issue = only_issue(doc)
    assert issue["fix"] == [{"op": "add", "path": "/nodes/2/op_id", "value": "n2"}]


def test_an_arena_kind_written_as_its_name_becomes_its_number():
    doc = arena_bases()[1]
    doc["nodes"][1]["node_kind"] = "do"
    issue = only_issue(doc)
    assert issue["fix"] == [{"op": "replace", "path": "/nodes/1/node_kind", "value": 2}]


def test_an_unhandled_outcome_gets_its_transition():
    doc = screw_to_hole()
    del doc["transitions"]["h1"]["not_found"]
    issue = only_issue(doc, scene=scene())
    assert issue["code"] == "missing_transition"
    assert issue["fix"] == [{"op": "add", "path": "/transitions/h1/not_found", "value": "replan_required"}]
    edges = copy.deepcopy(doc)
    edges["transitions"] = edge_list(doc["transitions"])
    assert only_issue(edges, scene=scene())["fix"] == [
        {"op": "add", "path": "/transitions/-", "value": {"from": "h1", "event": "not_found", "to": "replan_required"}}]


def test_an_unhandled_failure_goes_to_the_inspection_it_cut_off():
    doc = spec_example()
    del doc["transitions"]["s1"]["grasp_failed"]
    fixed, report = repaired(doc, scene=scene())
    assert fixed["transitions"]["s1"]["grasp_failed"] == "s3"
    assert report.ok


def test_a_tool_change_is_inserted_before_a_grab_that_needs_the_tool():
    issue = only_issue(cap_without_vacuum(), scene=scene())
    assert issue["code"] == "precondition_fails_in_scene"
    assert issue["fix"][0] == {"op": "add", "path": "/plan/-",
                               "value": {"id": "s1_grab", "skill": "grab", "object": "vacuum"}}
    assert issue["fix"][-1] == {"op": "replace", "path": "/entry", "value": "s1_grab"}
    assert repaired(cap_without_vacuum(), scene=scene())[1].ok


def test_a_tool_change_on_a_later_step_takes_the_edge_that_reaches_it():
    doc = graph([step("d1", "detect", "cap"), step("s1", "grab", "cap"), step("s2", "transfer", "cap", "hatch_seat")],
                {"d1": {"success": "s1", "not_found": "replan_required"},
                 "s1": {"success": "s2", "grasp_failed": "stop"}, "s2": {"success": "completed"}})
    issue = only_issue(doc, scene=scene())
    assert issue["fix"][-1] == {"op": "replace", "path": "/transitions/d1/success", "value": "s1_grab"}
    assert repaired(doc, scene=scene())[1].ok


def test_a_misspelt_skill_object_and_param_in_a_qwen3_envelope_of_text_are_repaired():
    broken = spec_example()
    broken["plan"][0]["skill"] = "garb"
    broken["plan"][1]["object"] = "vacum"
    broken["plan"][1]["trget"] = broken["plan"][1].pop("target")
    doc = qwen3_envelope(broken, as_text=True)
    _report, issues = check(doc, scene=scene())
    assert all("fix" in issue or "fixed_by" in issue for issue in issues), issues
    assert [issue["code"] for issue in issues if "fixed_by" in issue] == ["missing_param"]  # trget is target
    assert {operation["path"] for issue in issues for operation in issue.get("fix", ())} >= {
        "/response/plan/0/skill", "/response/plan/1/object"}
    fixed, report = repaired(doc, scene=scene())
    assert report.ok and isinstance(fixed["response"], dict)


def test_a_transition_to_a_misspelt_step_goes_to_the_step():
    doc = spec_example()
    doc["transitions"]["s1"]["success"] = "s22"
    issue = only_issue(doc, scene=scene(vacuum="patron"))
    assert issue["fix"] == [{"op": "replace", "path": "/transitions/s1/success", "value": "s2"}]


# --- what the fixes read ------------------------------------------------------------------------------------

def test_the_fixes_read_what_the_check_said_of_the_fault_not_its_words():
    """A fixer works from the issue's fields (allowed, expected, missing, unknown): issues saying the same in no
    words at all are fixed as the loader's own are."""
    doc = envelope(seq(do(cap="arm.grasp", args={"speed": 1})))
    node = doc["rtdl"]["children"][0]
    node["descripton"] = node.pop("description")
    node["args"] = json.dumps(node["args"])
    at = "/rtdl/children/0"
    worded = bt_exec.validate(doc).issues
    unworded = [Issue("unknown_field", f"{at}/descripton", "", allowed=("args", "cap", "description", "op", "op_id")),
                Issue("required", at, "", missing="description"), Issue("type", f"{at}/args", "", expected="object")]
    fixed = document_fixes(doc, unworded, DIALECTS["rtdl"].fixes)
    assert [(issue.fix, issue.fixed_by) for issue in fixed] == [(issue.fix, issue.fixed_by) for issue in worded] == [
        ([{"op": "move", "from": f"{at}/descripton", "path": f"{at}/description"}], None), (None, 0),
        ([{"op": "replace", "path": f"{at}/args", "value": {"speed": 1}}], None)]
    graph_doc = spec_example()
    graph_doc["transitions"]["s22"] = graph_doc["transitions"].pop("s2")
    source = "/transitions/s22/success"
    qwen3 = DIALECTS["qwen3"].fixes
    renamed = [{"op": "move", "from": "/transitions/s22", "path": "/transitions/s2"}]
    assert document_fixes(graph_doc, [Issue("unknown_step", source, "", unknown="s22")], qwen3)[0].fix == renamed
    assert document_fixes(graph_doc, [Issue("unknown_step", source, "there is no step 's22'")], qwen3)[0].fix \
        != renamed  # the words alone say nothing to the fixer


def test_the_fixes_every_document_shares_name_no_dialect():
    """Each dialect offers its own repairs as its Dialect.fixes; the shared module imports none of its modules."""
    tree = ast.parse((REPO / "compilers" / "fixes.py").read_text())
    imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    assert imported and not [name for name in imported if name.startswith(("rtdl", "qwen3", "skill_catalog"))]
    assert all(isinstance(dialect.fixes, DialectFixes) for dialect in DIALECTS.values())


def test_what_the_fixes_read_is_no_part_of_an_answer():
    plain = Issue("unknown_field", "/x", "field 'x' is not allowed")
    known = Issue("unknown_field", "/x", "field 'x' is not allowed", allowed=("y",))
    assert known == plain and known.as_dict() == plain.as_dict() == {"code": "unknown_field", "path": "/x",
                                                                     "message": "field 'x' is not allowed"}


# --- alternatives, and well-formed answers unchanged -------------------------------------------------------

def test_a_name_as_near_to_two_known_names_gets_alternatives_and_no_fix():
    catalog = {"arm.pick_a": {}, "arm.pick_b": {}}
    issue = only_issue(envelope(seq(do(cap="arm.pick_c"))), catalog=catalog)
    assert "fix" not in issue
    assert issue["alternatives"] == [[{"op": "replace", "path": "/rtdl/children/0/cap", "value": "arm.pick_a"}],
                                     [{"op": "replace", "path": "/rtdl/children/0/cap", "value": "arm.pick_b"}]]
    fixed = apply_fixes(envelope(seq(do(cap="arm.pick_c"))), [issue])
    assert fixed["rtdl"]["children"][0]["cap"] == "arm.pick_c"  # nothing applied


def test_a_node_with_children_and_no_op_may_be_either_composite():
    node = seq(do(cap="arm.grasp"))
    del node["op"]
    issue = only_issue(envelope(seq(node)))
    assert [patch[0]["value"] for patch in issue["alternatives"]] == ["sequence", "parallel"]


def test_nearness_needs_one_clear_candidate():
    nearest = NameSearch().nearest
    assert nearest("sequnce", ["sequence", "parallel", "do"]) == ["sequence"]
    assert nearest("od", ["sequence", "parallel", "do"]) == ["do"]
    assert nearest("zzz", ["sequence", "parallel", "do"]) == []
    assert pointer_of("nodes[3].call.contract_id") == "/nodes/3/call/contract_id"
    assert pointer_of("nodes[3].call.args_json at /speed") is None


def test_issues_without_a_fix_keep_their_three_keys():
    assert Issue("cycle", "nodes[0]", "a cycle").as_dict() == {"code": "cycle", "path": "nodes[0]",
                                                                "message": "a cycle"}
    answer = bt_exec.Executor(backend=bt_exec.SimBackend()).validate_plan(envelope(seq(do())))
    assert answer["issues"] == [] and "repair" not in answer


def test_the_executor_answer_carries_the_fix():
    executor = bt_exec.Executor(backend=bt_exec.SimBackend())
    try:
        answer = executor.validate_plan(json.dumps(envelope(seq(do(cap="arm.grasp", args='{"a": 1}')))))
        refusal = executor.submit(envelope(seq(do(cap="arm.grasp", args='{"a": 1}'))))
    finally:
        executor.close()
    assert answer["issues"][0]["fix"] == [{"op": "replace", "path": "/rtdl/children/0/args", "value": {"a": 1}}]
    assert refusal["issues"][0]["fix"] == answer["issues"][0]["fix"]


# --- bt-exec validate --fix ------------------------------------------------------------------------------------

def bt_exec_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bt_exec.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


@pytest.fixture(scope="module")
def catalog_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("catalog") / "caps.json"
    path.write_text(json.dumps(CATALOG))
    return path


def test_cli_fix_writes_the_repaired_json_of_a_reply_and_exits_0(tmp_path, catalog_file):
    node = do("take", "arm.grasp", '{"force": 1}')
    node["op"] = "dp"  # hides the args until it is fixed: a second round finds them
    reply = tmp_path / "reply.txt"
    reply.write_text("Here is the plan:\n" + json.dumps(envelope(seq(node, do("go", "nav.mvoe_to")))) + "\nDone.")
    out = tmp_path / "fixed.json"
    result = bt_exec_cli("validate", reply, "--catalog", catalog_file, "--fix", out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fix: " in result.stdout and f"{out}: ok" in result.stdout
    fixed = json.loads(out.read_text())
    assert fixed["rtdl"]["children"][0] == {**node, "op": "do", "args": {"force": 1}}
    assert fixed["rtdl"]["children"][1]["cap"] == "nav.move_to"


def test_cli_fix_reports_what_is_left_and_exits_1(tmp_path):
    doc = envelope(seq(do(cap="arm.pick_c"), do(cap="arm.grasp", args='{"a": 1}')))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    catalog = tmp_path / "caps.json"
    catalog.write_text(json.dumps({"arm.pick_a": {}, "arm.pick_b": {}, "arm.grasp": {}}))
    out = tmp_path / "fixed.json"
    result = bt_exec_cli("validate", plan, "--catalog", catalog, "--fix", out, "--json")
    assert result.returncode == 1, result.stderr
    answer = json.loads(result.stdout)
    assert answer["repair"]["fixes_applied"] == 1
    assert [issue["code"] for issue in answer["repair"]["report"]["issues"]] == ["unknown_cap"]
    assert "alternatives" in answer["repair"]["report"]["issues"][0]
    assert json.loads(out.read_text())["rtdl"]["children"][1]["args"] == {"a": 1}


def test_cli_fix_of_a_valid_plan_writes_it_unchanged_and_of_no_json_writes_nothing(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(envelope(seq(do()))))
    out = tmp_path / "same.json"
    assert bt_exec_cli("validate", plan, "--fix", out).returncode == 0
    assert json.loads(out.read_text()) == envelope(seq(do()))
    prose = tmp_path / "prose.txt"
    prose.write_text("I cannot make a plan for that.")
    result = bt_exec_cli("validate", prose, "--fix", tmp_path / "none.json")
    assert result.returncode == 1 and "not written" in result.stderr
    assert not (tmp_path / "none.json").exists()


def test_cli_fix_repairs_a_qwen3_graph_against_the_scene(tmp_path):
    scene_file = tmp_path / "scene.json"
    scene_file.write_text(json.dumps(scene()))
    plan = tmp_path / "graph.json"
    plan.write_text(json.dumps(cap_without_vacuum()))
    out = tmp_path / "fixed.json"
    result = bt_exec_cli("validate", plan, "--scene", scene_file, "--fix", out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(out.read_text())["entry"] == "s1_grab"


def test_one_report_carries_the_fixes_of_faults_that_only_a_repaired_plan_shows(make_executor):
    """A misspelt op kind hides the node's cap from the catalog check: the report goes on with the repaired
    document and lists the misspelt cap after the first fix, so one report's fixes repair both."""
    cap = sorted(CAPS)[0]
    broken = envelope(seq(do("first", cap=cap), {**do("second", cap=cap[:-1] + "x"), "op": "dho"}))
    _report, issues = check(broken, catalog=CATALOG)
    assert [(issue["code"], issue.get("after_fixes", False)) for issue in issues] == [
        ("bad_op", False), ("unknown_cap", True)]
    assert bt_exec.validate(apply_fixes(broken, issues), catalog=CATALOG).ok
    answer = make_executor(catalog=CATALOG).validate_plan(broken)
    assert answer["issues"] == issues, "the executor's doors answer alike"
