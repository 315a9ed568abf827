"""Repairs that cannot be turned against the host: ``validate --fix`` never destroys its input and says what it
did, a fix that drops data is lossy and applied only when asked, the nearest-name search is bounded, and a
fault of a graph's shape hides no other."""
import difflib
import json
import os
import pathlib
import stat

import pytest

import bt_exec
from bt_exec import cli
from bt_exec.cli.console import EXIT_FAILED, CommandError
from bt_exec.cli.plan_commands import _json_bytes
from bt_exec.compilers import fixes
from qwen3_graphs import graph, scene, step
from rtdl_plans import do, envelope, seq

SPEED_ON_THE_NODE = seq({**do("go", cap="nav.move"), "speed": 0.1}, description="move slowly")


@pytest.fixture
def ratios(monkeypatch) -> list:
    """Every full comparison of two names (difflib's ratio, quadratic in their lengths) made meanwhile."""
    made = []

    class Counted(difflib.SequenceMatcher):
        def ratio(self):
            made.append((len(self.a), len(self.b)))
            return super().ratio()

    monkeypatch.setattr(fixes.difflib, "SequenceMatcher", Counted)
    return made


def codes(report) -> list[str]:
    return [issue.code for issue in report.issues]


# --- the nearest-name search is bounded ----------------------------------------------------------------------

LONG = 60_000


def _long_op_kinds():
    return seq(*[{**do(f"op {index}"), "op": "k" * LONG + str(index)} for index in range(100)])


def _long_field_names():
    return seq(*[{**do(f"op {index}"), "f" * LONG + str(index): 1} for index in range(100)])


def _long_step_ids():
    ids = ["s" * 10_000 + str(index) for index in range(20)]
    steps = [step(step_id, "grab", "vacuum") for step_id in ids]
    edges = {step_id: {"success": "t" * 10_000 + step_id[-1], "grasp_failed": "replan_required",
                       "collision": "stop"} for step_id in ids}
    return graph(steps, edges, entry=ids[0])


def _long_skills():
    steps = [step(f"s{index}", "g" * LONG + str(index), "vacuum") for index in range(20)]
    return graph(steps, {f"s{index}": {"success": "completed"} for index in range(20)}, entry="s0")


@pytest.mark.parametrize("hostile, code, options", [
    (_long_op_kinds, "bad_op", {}),
    (_long_field_names, "unknown_field", {}),
    (_long_step_ids, "unknown_step", {"scene": scene()}),
    (_long_skills, "unknown_skill", {"scene": scene()}),
    (lambda: seq(*[do(f"op {index}", cap="c." + "x" * LONG + str(index)) for index in range(100)]), "unknown_cap",
     {"catalog": {"c.xyz": {}}}),
], ids=["op kinds", "fields", "step ids", "skills", "caps"])
def test_names_far_longer_than_any_known_one_are_never_compared(ratios, hostile, code, options):
    report = bt_exec.validate(json.dumps(hostile()), **options)
    assert code in codes(report)
    assert ratios == []  # was one quadratic comparison per name and known name: 30 s for 100 op kinds


def test_one_report_weighs_at_most_its_budget_of_characters(ratios, monkeypatch):
    monkeypatch.setattr(fixes, "MAX_COMPARED_PAIRS", 50 * 11 * 11)
    # every cap alike enough to every catalog name to be compared with it: 40 x 30 pairs, over the budget
    catalog = {f"arm.pick_{chr(97 + index)}{chr(97 + index)}": {} for index in range(30)}
    plan = bt_exec.load(seq(*[do(f"op {index}", cap=f"arm.pick_{index:02d}") for index in range(40)]))
    report = bt_exec.validate(plan, catalog=catalog)  # a loaded plan: one report, no rounds after fixes
    assert codes(report).count("unknown_cap") == 40
    assert 0 < sum(a * b for a, b in ratios) <= 50 * 11 * 11 and len(ratios) <= 50
    assert all(max(lengths) <= fixes.MAX_NAME_CHARS for lengths in ratios)


def test_the_longest_names_compared_weigh_a_bounded_time(ratios):
    # names of the longest length compared, two letters only, each alike enough to be compared with every other
    ids = [format(index, "b").zfill(fixes.MAX_NAME_CHARS) for index in range(200)]
    steps = [step(step_id, "grab", "vacuum") for step_id in ids]
    edges = {step_id: {"success": step_id[::-1], "grasp_failed": "replan_required", "collision": "stop"}
             for step_id in ids}
    bt_exec.validate(graph(steps, edges, entry=ids[0]), scene=scene())
    reports = 1 + fixes.FIX_ROUNDS  # the input's, and one for each round of what its fixes uncover
    assert sum(a * b for a, b in ratios) <= reports * fixes.MAX_COMPARED_PAIRS


def test_a_slip_within_the_bounds_is_still_repaired():
    search = fixes.NameSearch()
    assert search.nearest("sequnce", ["sequence", "parallel", "do"]) == ["sequence"]
    assert search.nearest("x" * (fixes.MAX_NAME_CHARS + 1), ["x" * fixes.MAX_NAME_CHARS]) == []


# --- lossy fixes ----------------------------------------------------------------------------------------------

def test_a_fix_that_removes_a_field_is_lossy_and_a_rename_is_not():
    report = bt_exec.validate(SPEED_ON_THE_NODE)
    [issue] = report.issues
    assert issue.fix == [{"op": "remove", "path": "/children/0/speed"}] and issue.lossy
    assert issue.as_dict()["lossy"] is True
    renamed = bt_exec.validate(seq({"op": "do", "descripton": "go", "cap": "a.b"})).issues[0]
    assert renamed.fix[0]["op"] == "move" and not renamed.lossy and "lossy" not in renamed.as_dict()


def test_a_call_dropped_from_a_composite_arena_node_is_lossy():
    arena = {"root_index": 0, "nodes": [
        {"node_kind": 0, "children": [1], "op_id": "1", "description": "in order",
         "call": {"contract_id": "arm.move", "args_json": "{}"}},
        {"node_kind": 2, "children": [], "op_id": "2", "description": "move",
         "call": {"contract_id": "arm.move", "args_json": "{}"}}]}
    [issue] = bt_exec.validate(arena).issues
    assert issue.fix == [{"op": "replace", "path": "/nodes/0/call", "value": None}] and issue.lossy


def test_an_unknown_qwen3_parameter_removed_is_lossy():
    the_graph = graph([step("s1", "grab", "vacuum", speed="fast")],
                      {"s1": {"success": "completed", "grasp_failed": "replan_required", "collision": "stop"}})
    report = bt_exec.validate(the_graph, scene=scene())
    [issue] = [issue for issue in report.issues if issue.code == "unknown_param"]
    assert issue.fix == [{"op": "remove", "path": "/plan/0/speed"}] and issue.lossy


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = cli.main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_fix_applies_a_lossy_fix_only_with_fix_lossy(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(SPEED_ON_THE_NODE))
    before = plan.read_bytes()
    code, out, _err = run_cli(capsys, "validate", plan, "--fix", plan)
    assert code == 1 and plan.read_bytes() == before  # nothing else to repair: not written at all
    assert f"no fix applied (its lossy fixes need --fix-lossy); {plan} not written" in out
    assert "not applied (lossy; --fix-lossy applies it): /children/0/speed" in out
    code, out, _err = run_cli(capsys, "validate", plan, "--fix", plan, "--json")
    repair = json.loads(out)["repair"]
    assert (code, repair["written"], repair["fixes_applied"]) == (1, False, 0)
    assert [issue["path"] for issue in repair["fixes_skipped"]] == ["/children/0/speed"]
    code, out, _err = run_cli(capsys, "validate", plan, "--fix", plan, "--fix-lossy")
    assert code == 0 and "1 fix applied" in out
    assert "speed" not in json.loads(plan.read_text())["children"][0]
    code, _out, err = run_cli(capsys, "validate", plan, "--fix-lossy")
    assert code == 2 and "--fix-lossy goes with --fix OUT" in err


def test_the_fixes_after_a_lossy_one_left_out_are_still_applied(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(seq({**do("go"), "speed": 0.1}, {"op": "do", "cap": "nav.stop"})))
    code, out, _err = run_cli(capsys, "validate", plan, "--fix", plan)
    assert code == 1 and "1 fix applied" in out
    written = json.loads(plan.read_text())
    assert written["children"][0]["speed"] == 0.1 and written["children"][1]["description"] == "TODO: describe"


# --- --fix writes atomically, and never an unrepaired input -----------------------------------------------------

def test_fix_in_place_replaces_the_file_whole_and_keeps_its_permissions(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(seq({"op": "do", "cap": "nav.stop"})))
    plan.chmod(0o640)
    code, out, _err = run_cli(capsys, "validate", plan, "--fix", plan)
    assert code == 0 and f"1 fix applied, the repaired document written to {plan}" in out
    assert bt_exec.validate(plan.read_text()).ok
    assert stat.S_IMODE(plan.stat().st_mode) == 0o640
    assert sorted(path.name for path in tmp_path.iterdir()) == ["plan.json"]  # no temporary file left


def test_a_plan_with_text_no_file_can_hold_is_never_truncated(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_bytes(b'{"op": "sequence", "description": "bad \\ud800 text", "children": [{"op": "do", "cap": "a.b"}]}')
    before = plan.read_bytes()
    code, out, err = run_cli(capsys, "validate", plan, "--fix", plan)
    assert code == 1 and "Traceback" not in err  # was exit 3 and a 0-byte plan file
    assert "[bad_text]" in out and "not written" in out
    assert plan.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["plan.json"]


def test_a_repaired_document_with_text_no_file_can_hold_is_refused_before_writing():
    with pytest.raises(CommandError) as refused:
        _json_bytes({"description": "bad \ud800 text"}, "out.json")
    assert refused.value.exit_code == EXIT_FAILED and "out.json not written" in str(refused.value)


def test_a_write_that_fails_leaves_the_input_as_it_was(tmp_path, capsys, monkeypatch):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(seq({"op": "do", "cap": "nav.stop"})))
    before = plan.read_bytes()

    def disk_full(_fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    code, _out, err = run_cli(capsys, "validate", plan, "--fix", plan)
    assert code == 2 and f"cannot write {plan}: No space left on device" in err
    assert plan.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["plan.json"]


def test_fix_into_a_missing_folder_is_a_usage_error(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(seq({"op": "do", "cap": "nav.stop"})))
    code, _out, err = run_cli(capsys, "validate", plan, "--fix", tmp_path / "no" / "such" / "out.json")
    assert code == 2 and "cannot write" in err


# --- one structural fault hides no other; --fix says what it did ---------------------------------------------

def six_faults() -> dict:
    """A transition to a missing step, and five faults the shape does not decide."""
    return graph([step("s1", "grabb", "vacuum"), step("s2", "grab", "capp", speed="fast"),
                  step("s3", "release", "cap", "hatch_seet")],
                 {"s1": {"success": "s2", "grasp_failed": "s9", "collision": "stop"},
                  "s2": {"success": "s3", "grasp_failed": "completed", "collision": "stop"},
                  "s3": {"success": "completed", "collision": "stop"}})


SIX_CODES = ["unknown_step", "unknown_skill", "unknown_object", "unknown_param", "failure_to_completed",
             "unknown_target"]


def test_faults_after_a_structural_one_are_still_reported_on_every_entry_point():
    the_scene = scene()
    assert sorted(codes(bt_exec.validate(six_faults(), scene=the_scene))) == sorted(SIX_CODES)
    executor = bt_exec.Executor(backend=bt_exec.SimBackend(), scene=the_scene)
    try:
        for answer in (executor.validate_plan(json.dumps(six_faults())), executor.submit(json.dumps(six_faults()))):
            assert answer["verdict"] == "invalid"
            assert sorted(issue["code"] for issue in answer["issues"]) == sorted(SIX_CODES)
    finally:
        executor.close()


def test_fix_of_a_broken_graph_counts_the_fixes_it_applied(tmp_path, capsys):
    plan, scene_file = tmp_path / "graph.json", tmp_path / "scene.json"
    plan.write_text(json.dumps(six_faults()))
    scene_file.write_text(json.dumps(scene()))
    code, out, _err = run_cli(capsys, "validate", plan, "--scene", scene_file, "--fix", plan, "--json")
    repair = json.loads(out)["repair"]
    assert code == 1 and repair["written"] and repair["fixes_applied"] >= 4
    written = json.loads(plan.read_text())
    assert written["plan"][0]["skill"] == "grab" and written["plan"][1]["object"] == "cap"
    assert written["transitions"]["s2"]["grasp_failed"] == "replan_required"
    assert written["plan"][1]["speed"] == "fast"  # lossy: left
    left = [issue["code"] for issue in repair["report"]["issues"]]
    assert "unknown_step" in left and "unknown_param" in left


# --- a str is JSON text, never a file name ------------------------------------------------------------------

def test_a_str_naming_a_file_is_told_to_come_as_a_path(tmp_path, monkeypatch):
    (tmp_path / "plan.json").write_text(json.dumps(envelope(seq(do()))))
    monkeypatch.chdir(tmp_path)
    executor = bt_exec.Executor(backend=bt_exec.SimBackend())
    try:
        for answer in (executor.submit("plan.json"), executor.validate_plan("plan.json"),
                       executor.validate_plan(b"plan.json")):  # text as a door sends it
            [issue] = answer["issues"]
            assert issue["code"] == "json_syntax" and "never as a file name" in issue["message"]
            assert "pathlib.Path('plan.json') reads the file" in issue["message"]
        assert executor.validate_plan(pathlib.Path("plan.json"))["verdict"] == "ok"
    finally:
        executor.close()
    assert "file name" not in bt_exec.validate("hello world").issues[0].message  # prose: no file name


# --- a broken fenced block is located in the reply -------------------------------------------------------------

def test_truncated_json_in_a_fenced_reply_is_located_in_the_reply():
    reply = ("Here is the plan you asked for.\n\n```json\n{\"op\": \"sequence\", \"description\": \"go\",\n"
             " \"children\": [\n  {\"op\": \"do\", \"description\": \"a\", \"cap\": \"a.b\"}\n```\nHope it helps.")
    [issue] = bt_exec.validate(reply).issues
    assert issue.code == "json_syntax"
    assert issue.message == "malformed JSON in the fenced code block, at line 7 column 1: Expecting ',' delimiter"


def test_truncated_json_in_a_fenced_response_is_located_in_the_response():
    response = "```json\n{\"status\": \"ok\",\n \"plan\": [\n```"
    [issue] = bt_exec.validate({"response": response, "scene_revision": 12}).issues
    assert issue.path == "/response" and issue.message.endswith("Expecting value at line 3 column 11")


def test_a_faulty_rtdl_node_hides_no_misspelt_cap_in_another():
    catalog = {"arm.grasp": {}, "nav.move_to": {}}
    tree = seq({"op": "wander", "description": "w"}, do("go", cap="nav.mvoe_to"))
    arena = {"root_index": 0, "nodes": [
        {"node_kind": 0, "children": [1, 2], "op_id": "1", "description": "in order"},
        {"node_kind": 2, "children": [], "op_id": "2", "description": "", "call": {"contract_id": "arm.grasp"}},
        {"node_kind": 2, "children": [], "op_id": "3", "description": "go", "call": {"contract_id": "nav.mvoe_to"}}]}
    for doc, shape_fault, cap_path in ((tree, "bad_op", "/children/1/cap"),
                                       (envelope(tree), "bad_op", "/rtdl/children/1/cap"),
                                       (arena, "empty_description", "nodes[2].call.contract_id")):
        own = [issue for issue in bt_exec.validate(doc, catalog=catalog).issues if not issue.after_fixes]
        assert [issue.code for issue in own] == [shape_fault, "unknown_cap"]
        assert own[1].path == cap_path and own[1].fix[0]["value"] == "nav.move_to"
