"""Any plan written as BehaviorTree.CPP 4 XML: what the format says of the file (well-formed, IDs, ports, the
model of its leaves), a step graph's loop run by BT.CPP's rules with its transitions kept, and ``bt-exec compile
--to btcpp``."""
from __future__ import annotations

import json
import pathlib
import re

import defusedxml.ElementTree as SafeET
import pytest

import bt_exec
from bt_exec.compilers.btcpp.export import ExportError, btcpp_export, plan_to_btcpp, port_text, port_type
from bt_exec.compilers.dialects import CheckContext
from bt_exec.compilers.ir import Op, Plan
from command_line import REPO, bt_exec_cli
from rtdl_plans import do, envelope, par, seq

QWEN3_GRAPH = REPO / "examples" / "qwen3" / "cap_to_hatch.json"
QWEN3_SCENE = REPO / "examples" / "qwen3" / "scene.json"
# The example's graph (a submit envelope there), its params on the step or in args as a planner writes them.
GRAPH = {"status": "ok", "entry": "s0", "plan": [
    {"id": "s0", "skill": "grab", "object": "vacuum"}, {"id": "s1", "skill": "pick", "args": {"object": "cap"}},
    {"id": "s2", "skill": "transfer", "object": "cap", "target": "hatch_seat"},
    {"id": "s3", "skill": "release", "object": "cap", "args": {"target": "hatch_seat"}},
    {"id": "s4", "skill": "inspect_state", "object": "cap"},
    {"id": "s5", "skill": "inspect_state", "object": "vacuum"}],
    "transitions": {"s0": {"success": "s1", "grasp_failed": "s5", "collision": "stop"},
                    "s1": {"success": "s2", "grasp_failed": "s4", "collision": "stop"},
                    "s2": {"success": "s3", "collision": "stop"}, "s3": {"success": "completed", "collision": "stop"},
                    "s4": {"holding": "s2", "empty": "s1", "placed": "s1", "unknown": "operator_required"},
                    "s5": {"holding": "s1", "empty": "s0", "placed": "s0", "unknown": "operator_required"}}}
MODEL_ELEMENTS = {"Action", "Condition", "Control", "Decorator"}


def rtdl_plan():
    return bt_exec.load(envelope(seq(
        do("look at the table", "camera.capture", {"resolution": 3, "zoom": 1.5, "color": True}),
        par(do("left arm", "arm.move", {"side": "left", "joints": [1, 2, 3]}),
            do("right arm", "arm.move", {"side": "right", "pose": {"x": 0.1, "frame": None}})),
        seq(description="nothing to do"),
        description="look, then move both arms")))


def parsed(xml: str):
    """The document's root element, read by a parser that refuses DTDs and entities (BT.CPP files carry none)."""
    return SafeET.fromstring(xml.encode("utf-8"))


def tree_nodes(root):
    """Every node element of the main tree, in document order."""
    trees = root.findall("BehaviorTree")
    assert len(trees) == 1
    return [element for element in trees[0].iter() if element is not trees[0]]


def model_of(root) -> dict:
    """ID -> (element, {port: (direction element, attributes)}) of the TreeNodesModel."""
    [model] = root.findall("TreeNodesModel")
    return {entry.get("ID"): (entry.tag, {port.get("name"): (port.tag, dict(port.attrib)) for port in entry})
            for entry in model}


def test_an_rtdl_plan_is_a_bt_cpp_4_tree_with_the_model_of_its_leaves():
    root = parsed(plan_to_btcpp(rtdl_plan()))
    assert root.tag == "root" and root.get("BTCPP_format") == "4"
    [tree] = root.findall("BehaviorTree")
    assert root.get("main_tree_to_execute") == tree.get("ID")
    nodes = tree_nodes(root)
    assert [(node.tag, node.get("name")) for node in nodes] == [
        ("Sequence", "look, then move both arms"), ("camera.capture", "look at the table"),
        ("ParallelAll", "together"), ("arm.move", "left arm"), ("arm.move", "right arm"),
        ("AlwaysSuccess", "nothing to do")]
    sequence, capture, parallel, left, right, nothing = nodes
    assert [child.tag for child in sequence] == ["camera.capture", "ParallelAll", "AlwaysSuccess"]
    # RTDL's parallel waits for every child and fails once one failed: ParallelAll, one failure enough
    assert parallel.get("max_failures") == "1"
    assert [child.get("name") for child in parallel] == ["left arm", "right arm"]
    assert {key: capture.get(key) for key in ("resolution", "zoom", "color")} == {
        "resolution": "3", "zoom": "1.5", "color": "true"}
    assert left.get("joints") == "1;2;3" and left.get("side") == "left"
    assert json.loads(right.get("pose").removeprefix("json:")) == {"x": 0.1, "frame": None}
    assert not list(nothing) and not any(node.get("_uid") for node in nodes)

    model = model_of(root)
    assert set(model) == {"arm.move", "camera.capture"}  # built-ins are Groot2's own, as BT.CPP writes its model
    kind, ports = model["camera.capture"]
    assert kind == "Action" and ports == {
        "resolution": ("input_port", {"name": "resolution", "type": "int"}),
        "zoom": ("input_port", {"name": "zoom", "type": "double"}),
        "color": ("input_port", {"name": "color", "type": "bool"})}
    kind, ports = model["arm.move"]
    # side on both calls: required; joints and pose on one each: optional (a default), pose untyped (json:)
    assert ports["side"] == ("input_port", {"name": "side", "type": "std::string"})
    assert ports["joints"] == ("input_port", {"name": "joints", "type": "std::vector<int>", "default": ""})
    assert ports["pose"] == ("input_port", {"name": "pose", "default": ""})


@pytest.mark.parametrize("value, text, kind", [
    ("over there", "over there", "std::string"), ("", "", "std::string"), (3, "3", "int"), (-7, "-7", "int"),
    (2 ** 40, "1099511627776", "long"), (0.25, "0.25", "double"), (True, "true", "bool"), (False, "false", "bool"),
    ([1, 2, 3], "1;2;3", "std::vector<int>"), ([1, 2.5], "1;2.5", "std::vector<double>"),
    (["a", "b"], "a;b", "std::vector<std::string>"), ([True, False], "true;false", "std::vector<bool>"),
    (None, "json:null", None), ([], "json:[]", None), (["a;b"], 'json:["a;b"]', None),
    ({"k": [1, {"x": "é"}]}, 'json:{"k":[1,{"x":"é"}]}', None), ([1, "a"], 'json:[1,"a"]', None),
])
def test_json_values_become_port_strings_as_bt_cpp_holds_them(value, text, kind):
    assert port_text(value) == text and port_type(value) == kind


def test_with_uids_every_node_is_numbered_in_document_order_and_built_ins_join_the_model():
    plan = rtdl_plan()
    export = btcpp_export(plan, uids=True)
    root = parsed(export.xml)
    nodes = tree_nodes(root)
    assert [int(node.get("_uid")) for node in nodes] == list(range(1, len(nodes) + 1)) == list(
        range(1, export.node_count + 1))
    assert root.find("BehaviorTree").get("_fullpath") == ""
    # each node shows its op, and its parent is the element it sits in
    parent_of = {int(child.get("_uid")): int(node.get("_uid")) for node in nodes for child in node}
    assert [export.parent[uid] for uid in range(1, export.node_count + 1)] == [
        parent_of.get(uid, 0) for uid in range(1, export.node_count + 1)]
    assert export.op_of[1:] == list(plan.ops)
    model = model_of(root)
    assert {"Sequence", "ParallelAll", "AlwaysSuccess"} <= set(model)
    assert model["ParallelAll"] == ("Control", {"max_failures": ("input_port", {"name": "max_failures",
                                                                                 "default": "1"})})
    assert model["AlwaysSuccess"][0] == "Action"


def test_a_port_name_bt_cpp_allows_is_kept():
    [leaf] = tree_nodes(parsed(plan_to_btcpp(bt_exec.load(envelope(do("x", "sim.act", {"max-speed": 2, "x_1": 3}))))))
    assert (leaf.get("max-speed"), leaf.get("x_1")) == ("2", "3")


def test_descriptions_and_texts_survive_any_character_xml_can_hold():
    description = 'say "hi" & <wave>\n\ttwice'
    plan = bt_exec.load(envelope(do(description, "speaker.say", {"text": "a < b & 'c'\r\n", "lang": "日本語"})))
    [leaf] = tree_nodes(parsed(plan_to_btcpp(plan)))
    assert leaf.get("name") == description
    assert leaf.get("text") == "a < b & 'c'\r\n" and leaf.get("lang") == "日本語"


def leaf_plan(cap: str, args: dict | None = None) -> Plan:
    """A plan of one leaf, as a BT.CPP file may give one (an ID RTDL's caps could not be)."""
    return Plan("btcpp", "btcpp", "1", {"1": Op("1", "do", "x", cap=cap, args=args or {})}, "x", 1, False)


@pytest.mark.parametrize("cap", ["Sequence", "SubTree", "Script", "BehaviorTree", "Action"])
def test_a_leaf_named_as_a_built_in_is_refused(cap):
    with pytest.raises(ExportError, match=f"op '1': cap '{cap}' is the name of a BT.CPP built-in node or element"):
        plan_to_btcpp(leaf_plan(cap))


@pytest.mark.parametrize("tree, message", [
    (do("x", "sim.act", {"name": "cup"}), "arg 'name' cannot be a BT.CPP port"),
    (do("x", "sim.act", {"_private": 1}), "arg '_private' cannot be a BT.CPP port"),
    (do("x", "sim.act", {"9lives": 1}), "arg '9lives' cannot be a BT.CPP port"),
    (do("x", "sim.act", {"a.b": 1}), "arg 'a.b' cannot be a BT.CPP port"),
    (do("x", "sim.act", {"where": "{goal}"}), "which BT.CPP would read as the blackboard key"),
    (do("bell \x07", "sim.act"), "XML cannot carry"),
    (do("x", "sim.act", {"text": "nul \x00"}), "XML cannot carry"),
])
def test_what_bt_cpp_cannot_hold_is_refused_naming_the_op(tree, message):
    plan = bt_exec.load(envelope(tree))
    with pytest.raises(ExportError, match=re.escape(message)) as refused:
        plan_to_btcpp(plan)
    assert "op '1'" in str(refused.value)


def test_a_custom_node_no_element_can_be_named_is_an_explicit_control():
    ops = {"1": Op("1", "control", "guarded", ["2"], node="my guard"), "2": Op("2", "do", "go", cap="move base")}
    root = parsed(plan_to_btcpp(Plan("btcpp", "btcpp", "1", ops, "guarded", 2, False)))
    guard, leaf = tree_nodes(root)
    assert (guard.tag, guard.get("ID"), list(guard)) == ("Control", "my guard", [leaf])
    assert model_of(root)["my guard"] == ("Control", {})


@pytest.mark.parametrize("cap", ["move base", "xml.parse", "9th", "ns:act", "dé.placer"])
def test_an_id_no_element_can_be_named_is_written_in_the_explicit_form(cap):
    [leaf] = tree_nodes(parsed(plan_to_btcpp(leaf_plan(cap, {"speed": 1}))))
    assert (leaf.tag, leaf.get("ID"), leaf.get("speed")) == ("Action", cap, "1")


def test_a_btcpp_plan_is_written_back_node_for_node_with_its_blackboard_ports():
    ops = {
        "1": Op("1", "control", "watch and fetch", ["2", "4"], node="ReactiveSequence"),
        "2": Op("2", "control", "three tries", ["3"], args={"num_attempts": "3"}, node="RetryUntilSuccessful"),
        "3": Op("3", "do", "find the cup", cap="Detect", args={"object": "cup"}, writes={"pose": "cup_pose"}),
        "4": Op("4", "do", "go there", cap="MoveTo", reads={"goal": "cup_pose", "state": "arm"},
                writes={"state": "arm"}),
    }
    plan = Plan("btcpp", "btcpp", "1", ops, "watch and fetch", 3, False, meta={"btcpp": {"main_tree": "Fetch"}})
    root = parsed(plan_to_btcpp(plan))
    assert root.get("main_tree_to_execute") == "Fetch" and root.find("BehaviorTree").get("ID") == "Fetch"
    reactive, retry, detect, move = tree_nodes(root)
    assert (reactive.tag, retry.tag, retry.get("num_attempts")) == ("ReactiveSequence", "RetryUntilSuccessful", "3")
    assert list(retry) == [detect] and list(reactive) == [retry, move]
    assert (detect.get("object"), detect.get("pose")) == ("cup", "{cup_pose}")
    assert (move.get("goal"), move.get("state")) == ("{cup_pose}", "{arm}")
    model = model_of(root)
    assert set(model) == {"Detect", "MoveTo"}
    assert model["Detect"][1]["pose"] == ("output_port", {"name": "pose"})
    assert model["MoveTo"][1] == {"goal": ("input_port", {"name": "goal"}),
                                  "state": ("inout_port", {"name": "state"})}
    export = btcpp_export(plan, uids=True)
    assert model_of(parsed(export.xml))["RetryUntilSuccessful"][0] == "Decorator"


def test_a_btcpp_plan_s_own_model_is_written_back_as_it_was_read():
    from bt_exec.behaviours.bt_library import PortSpec
    from bt_exec.compilers.btcpp.catalog import CatalogEntry, NodeCatalog

    model = NodeCatalog({"Seen": CatalogEntry("Seen", "condition", {"object": PortSpec("in", None, ""),
                                                                     "pose": PortSpec("out", None, "")}),
                         "Grasp": CatalogEntry("Grasp", "action", {"force": PortSpec("in", "10", "double")})})
    ops = {"1": Op("1", "control", "try", ["2", "3"], node="Fallback"),
           "2": Op("2", "do", "seen?", cap="Seen", args={"object": "cup"}, writes={"pose": "p"}),
           "3": Op("3", "do", "grasp", cap="Grasp", args={"force": "20"})}
    plan = Plan("btcpp", "btcpp", "1", ops, "try", 2, False, source=type("Source", (), {"model": model})())
    root = parsed(plan_to_btcpp(plan))
    assert [(node.tag, node.get("force")) for node in tree_nodes(root)][2] == ("Grasp", "20")
    # the args are the port strings as written; their types, kinds and defaults are the model's, not guessed
    assert model_of(root) == {
        "Seen": ("Condition", {"object": ("input_port", {"name": "object"}),
                               "pose": ("output_port", {"name": "pose"})}),
        "Grasp": ("Action", {"force": ("input_port", {"name": "force", "type": "double", "default": "10"})})}


# --- a step graph: the loop, run by BehaviorTree.CPP's rules for the nodes it uses --------------------------------

class Bt:
    """The BT.CPP 4 semantics of the nodes a step graph's export uses, for a tree whose leaves end at once (each
    a skill call answering the next scripted outcome). Enough to run the loop; every other node is an error."""

    def __init__(self, outcomes: list[str]):
        self.outcomes = list(outcomes)
        self.blackboard: dict[str, str] = {}
        self.calls: list[tuple[str, dict]] = []

    def tick(self, node) -> str:
        tag = node.tag
        if tag == "Sequence":
            return "FAILURE" if any(self.tick(child) == "FAILURE" for child in node) else "SUCCESS"
        if tag == "Fallback":
            return "SUCCESS" if any(self.tick(child) == "SUCCESS" for child in node) else "FAILURE"
        if tag == "ForceSuccess":
            self.tick(node[0])
            return "SUCCESS"
        if tag == "KeepRunningUntilFailure":
            while self.tick(node[0]) == "SUCCESS":
                assert len(self.calls) < 100, "the loop never ends"
            return "FAILURE"
        if tag == "AlwaysFailure":
            return "FAILURE"
        if tag == "Script":
            for statement in node.get("code").split(";"):
                key, value = re.fullmatch(r"\s*(\w+):='([^']*)'\s*", statement).groups()
                self.blackboard[key] = value
            return "SUCCESS"
        if tag == "ScriptCondition":
            key, value = re.fullmatch(r"(\w+)=='([^']*)'", node.get("code")).groups()
            return "SUCCESS" if self.blackboard.get(key) == value else "FAILURE"
        assert not list(node), f"unexpected node {tag}"
        ports = {k: v for k, v in node.attrib.items() if k not in ("name", "_uid")}
        event = self.outcomes.pop(0)
        self.calls.append((tag, {k: v for k, v in ports.items() if k != "event"}))
        assert ports["event"] == "{event}"
        self.blackboard["event"] = event
        return "SUCCESS" if event == "success" else "FAILURE"


def routed(graph: dict, outcomes: list[str]) -> tuple[list[str], str]:
    """The steps a step graph runs for these outcomes, and the terminal it reaches, by the spec's rules."""
    terminals = ("completed", "replan_required", "operator_required", "stop")
    current, path, outcomes = graph["entry"], [], list(outcomes)
    while current not in terminals:
        path.append(current)
        current = graph["transitions"].get(current, {}).get(outcomes.pop(0), "stop")
    return path, current


@pytest.mark.parametrize("outcomes", [
    ["success"] * 6,                                           # the straight path
    ["success", "grasp_failed", "holding", "success", "success"],  # a recovery through inspect_state
    ["success", "grasp_failed", "unknown"],                     # to operator_required
    ["success", "collision"],                                   # a collision stops it
    ["success", "slipped"],                                     # an outcome with no transition stops the run
    ["grasp_failed", "empty", "success", "success", "success", "failed"],  # round the loop, then a failure
])
def test_a_step_graph_runs_as_a_loop_over_its_steps_with_its_transitions_kept(outcomes):
    root = parsed(plan_to_btcpp(bt_exec.load(GRAPH)))
    path, terminal = routed(GRAPH, outcomes)
    machine = Bt(outcomes)
    result = machine.tick(root.find("BehaviorTree")[0])
    steps = {step["id"]: step for step in GRAPH["plan"]}
    params = {step_id: {key: value for key, value in {**step, **step.get("args", {})}.items()
                        if key not in ("id", "skill", "args")} for step_id, step in steps.items()}
    assert machine.calls == [(steps[step]["skill"], params[step]) for step in path]
    assert machine.blackboard["step"] == terminal
    assert result == ("SUCCESS" if terminal == "completed" else "FAILURE")


def test_a_step_graph_s_aliases_are_written_as_the_skills_they_call():
    plan = bt_exec.load(GRAPH)
    as_written = {node.get("name"): node.tag for node in tree_nodes(parsed(plan_to_btcpp(plan)))
                  if node.get("event")}
    resolved = {node.get("name"): node.tag for node in tree_nodes(parsed(plan_to_btcpp(
        plan, context=CheckContext(skill_catalog=bt_exec.SkillCatalog.named("grant"))))) if node.get("event")}
    assert as_written["pick(cap)"] == "pick" and resolved["pick(cap)"] == "grab"  # grant: pick is grab
    assert {name: tag for name, tag in resolved.items() if name != "pick(cap)"} == {
        name: tag for name, tag in as_written.items() if name != "pick(cap)"}


def test_a_step_graph_s_leaves_are_its_skills_with_their_params_and_an_event_output():
    plan = bt_exec.load(GRAPH)
    export = btcpp_export(plan, uids=True)
    root = parsed(export.xml)
    model = model_of(root)
    skills = {op.cap for op in plan.ops.values()}
    for skill in skills:
        kind, ports = model[skill]
        assert kind == "Action" and ports["event"] == ("output_port", {"name": "event"})
    assert {"Script", "ScriptCondition", "KeepRunningUntilFailure"} <= set(model)
    # each step is shown by its leaf; the loop's nodes show the plan
    by_uid = {int(node.get("_uid")): node for node in tree_nodes(root)}
    shown = {export.op_of[uid]: by_uid[uid] for uid in range(1, export.node_count + 1) if export.op_of[uid]}
    assert set(shown) == set(plan.ops)
    assert all(shown[step].tag == plan.ops[step].cap for step in plan.ops)
    assert [by_uid[uid].tag for uid in export.plan_nodes] == ["Sequence", "ForceSuccess", "KeepRunningUntilFailure",
                                                              "Fallback"]


# --- the command ----------------------------------------------------------------------------------------------

def test_compile_to_btcpp_writes_the_xml_to_stdout_or_a_file(tmp_path):
    source = tmp_path / "plan.json"
    source.write_text(json.dumps(envelope(seq(do("look", "camera.capture", {"resolution": 3}), do("go", "base.move")))))
    printed = bt_exec_cli("compile", source, "--to", "btcpp")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == plan_to_btcpp(bt_exec.load(source))
    out = tmp_path / "plan.xml"
    written = bt_exec_cli("compile", source, "--to", "btcpp", "-o", out)
    assert written.returncode == 0 and written.stdout == ""
    assert out.read_text(encoding="utf-8") == printed.stdout

    graph = bt_exec_cli("compile", QWEN3_GRAPH, "--scene", QWEN3_SCENE, "--to", "btcpp")
    assert graph.returncode == 0 and parsed(graph.stdout).find("BehaviorTree") is not None


def test_compile_to_btcpp_refuses_what_it_cannot_write_and_an_output_without_it(tmp_path):
    source = tmp_path / "plan.json"
    source.write_text(json.dumps(envelope(do("x", "sim.act", {"name": "cup"}))))
    refused = bt_exec_cli("compile", source, "--to", "btcpp", "-o", tmp_path / "out.xml")
    assert refused.returncode == 1 and "arg 'name' cannot be a BT.CPP port" in refused.stderr
    assert not (tmp_path / "out.xml").exists()
    alone = bt_exec_cli("compile", source, "-o", tmp_path / "out.xml")
    assert alone.returncode == 2 and "-o/--output goes with --to btcpp" in alone.stderr
    unwritable = bt_exec_cli("compile", QWEN3_GRAPH, "--scene", QWEN3_SCENE, "--to", "btcpp",
                             "-o", tmp_path / "no" / "such" / "dir.xml")
    assert unwritable.returncode == 2 and "cannot write" in unwritable.stderr


def test_compile_to_btcpp_writes_the_model_a_bt_xml_plan_was_checked_against(tmp_path):
    catalog = tmp_path / "catalog.xml"
    catalog.write_text('<root BTCPP_format="4"><TreeNodesModel><Action ID="Say">'
                       '<input_port name="text" default="hello"/></Action></TreeNodesModel></root>')
    fetch = REPO / "examples" / "btcpp" / "fetch_cup.xml"
    given = bt_exec_cli("compile", fetch, "--to", "btcpp", "--catalog", catalog)
    assert given.returncode == 0, given.stderr
    model = model_of(parsed(given.stdout))
    # --catalog's entry wins over the file's own, as in the check; the file's others are kept as read
    assert model["Say"] == ("Action", {"text": ("input_port", {"name": "text", "default": "hello"})})
    assert model["ObjectVisible"][0] == "Condition"
    assert model["MoveHead"][1]["pan"] == ("input_port", {"name": "pan", "type": "double"})


def test_an_invalid_plan_is_refused_before_anything_is_written(tmp_path):
    bad = pathlib.Path(REPO / "examples" / "rtdl" / "bad.json")
    refused = bt_exec_cli("compile", bad, "--to", "btcpp")
    assert refused.returncode == 1 and refused.stdout == "" and "plan refused" in refused.stderr
