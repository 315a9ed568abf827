"""The example BT XML plans run end to end on the sim backend: leaves are capability calls with their ports as
args (typed by the catalog), the blackboard carries one call's output to another's input, and the command line's
validate --fix writes repaired XML."""
from __future__ import annotations

import json
import pathlib

from command_line import bt_exec_cli

import bt_exec
from bt_exec.compilers.btcpp.catalog import NodeCatalog

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "btcpp"


def calls_of(executor: bt_exec.Executor) -> list[tuple[str, dict]]:
    return [(call.cap, call.args) for call in executor.backend.calls]


def test_the_fetch_example_runs_its_calls_in_order_with_the_detected_pose(make_executor):
    script = json.loads((EXAMPLES / "fetch_cup_sim.json").read_text())
    executor = make_executor(script)
    answer = executor.submit((EXAMPLES / "fetch_cup.xml").read_text())
    assert answer["accepted"], answer
    record = executor.run_until_complete(answer["plan_id"], timeout=10)
    assert record["outcome"] == "succeeded"
    assert calls_of(executor) == [
        ("ObjectVisible", {"object": "cup"}),
        ("MoveHead", {"pan": 0.8}),  # typed by the document's own TreeNodesModel
        ("DetectObject", {"object": "cup"}),
        ("MoveTo", {"pose": "0.42;0.10;0.75"}),  # read from the blackboard DetectObject wrote, through the SubTree
        ("Grasp", {"object": "cup", "force": 20.0}),
        ("MoveTo", {"location": "user"}),
        ("Say", {"text": "Here is your cup"}),
    ]


def test_the_nav2_example_runs_against_its_catalog(make_executor):
    script = json.loads((EXAMPLES / "nav2_sim.json").read_text())
    executor = make_executor(script, node_catalog=NodeCatalog.from_file(EXAMPLES / "nav2_nodes.xml"))
    answer = executor.submit((EXAMPLES / "nav2_navigate.xml").read_text())
    assert answer["accepted"] and "warnings" not in answer, answer
    record = executor.run_until_complete(answer["plan_id"], timeout=10)
    assert record["outcome"] == "succeeded"
    assert [cap for cap, _ in calls_of(executor)] == ["ComputePathToPose", "FollowPath"]
    assert calls_of(executor)[0][1] == {"goal": "kitchen", "planner_id": "GridBased"}
    assert calls_of(executor)[1][1]["path"] == "kitchen:0.0,0.0;2.5,1.0;4.0,3.0"


def test_bt_exec_run_and_validate_take_the_examples(tmp_path):
    done = bt_exec_cli("run", EXAMPLES / "fetch_cup.xml", "--sim-script", EXAMPLES / "fetch_cup_sim.json")
    assert done.returncode == 0, done.stdout + done.stderr
    done = bt_exec_cli("validate", EXAMPLES / "nav2_navigate.xml", "--catalog", EXAMPLES / "nav2_nodes.xml")
    assert done.returncode == 0 and "ok: btcpp tree NavigateToPose" in done.stdout


def test_validate_fix_writes_the_repaired_xml(tmp_path):
    broken = (EXAMPLES / "fetch_cup.xml").read_text().replace('<Action ID="Say" text=', '<Action ID="Sya" txt=')
    source, out = tmp_path / "broken.xml", tmp_path / "fixed.xml"
    source.write_text(broken)
    done = bt_exec_cli("validate", source, "--fix", out, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    repair = json.loads(done.stdout)["repair"]
    assert repair["written"] and repair["fixes_applied"] == 2 and repair["report"]["valid"]
    fixed = out.read_text()
    assert fixed.startswith("<?xml") and '<Action ID="Say" text="Here is your cup"/>' in fixed
    assert bt_exec_cli("validate", out).returncode == 0
    assert fixed.count("<!--") == broken.count("<!--") == 1 and "A tabletop fetch" in fixed


def test_validate_fix_keeps_every_comment_where_it_was(tmp_path):
    source, out = tmp_path / "commented.xml", tmp_path / "fixed.xml"
    source.write_text('<?xml version="1.0"?>\n<!-- before the root -->\n<root BTCPP_format="4">\n'
                      '  <BehaviorTree ID="Main">\n    <Sequence>\n      <!-- before Sya -->\n'
                      '      <Sya text="hi"/>\n      <MoveTo goal="a"><!-- inside MoveTo --></MoveTo>\n'
                      '      <!-- last in the Sequence -->\n    </Sequence>\n  </BehaviorTree>\n</root>\n'
                      '<!-- after the root -->\n')
    catalog = tmp_path / "nodes.xml"
    catalog.write_text('<TreeNodesModel><Action ID="Say"><input_port name="text"/></Action>'
                       '<Action ID="MoveTo"><input_port name="goal"/></Action></TreeNodesModel>')
    done = bt_exec_cli("validate", source, "--catalog", catalog, "--fix", out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.read_text() == ('<?xml version="1.0" encoding="UTF-8"?>\n<!-- before the root -->\n'
                               '<root BTCPP_format="4">\n  <BehaviorTree ID="Main">\n    <Sequence>\n'
                               '      <!-- before Sya -->\n      <Say text="hi"/>\n      <MoveTo goal="a">\n'
                               '        <!-- inside MoveTo -->\n      </MoveTo>\n      <!-- last in the Sequence -->\n'
                               '    </Sequence>\n  </BehaviorTree>\n</root>\n<!-- after the root -->\n')


def test_a_custom_control_of_the_catalog_runs_its_children_in_order_and_typed_args_reach_the_call(make_executor):
    catalog = NodeCatalog.from_text('<TreeNodesModel><Control ID="Twice"/><Action ID="Say"><input_port name="text"/>'
                                    '<input_port name="times" type="int" default="1"/>'
                                    '<input_port name="loud" type="bool" default="false"/>'
                                    '<input_port name="extra" default=""/></Action></TreeNodesModel>')
    executor = make_executor(None, node_catalog=catalog)
    answer = executor.submit('<root BTCPP_format="4"><BehaviorTree><Twice><Say text="a" times="2" loud="true"/>'
                             '<Say text="b" extra=\'json:{"x": [1, 2]}\'/></Twice></BehaviorTree></root>')
    assert answer["accepted"] and [w["code"] for w in answer["warnings"]] == ["custom_node"]
    assert executor.run_until_complete(answer["plan_id"], timeout=10)["outcome"] == "succeeded"
    assert calls_of(executor) == [("Say", {"text": "a", "times": 2, "loud": True}),
                                  ("Say", {"text": "b", "extra": {"x": [1, 2]}})]


def test_a_reactive_node_checks_again_while_a_call_runs_each_check_a_call_of_its_own(make_executor, events):
    executor = make_executor({"caps": {"MoveTo": {"duration_s": 0.1}}})
    answer = executor.submit('<root BTCPP_format="4"><BehaviorTree><ReactiveSequence><BatteryOk/>'
                             '<MoveTo goal="dock"/></ReactiveSequence></BehaviorTree></root>')
    assert executor.run_until_complete(answer["plan_id"], timeout=10)["outcome"] == "succeeded"
    checks = [call for call in executor.backend.calls if call.cap == "BatteryOk"]
    moves = [call for call in executor.backend.calls if call.cap == "MoveTo"]
    assert len(moves) == 1 and len(checks) > 1, "the check ran again while the move ran, the move never restarted"
    assert len({call.call_id for call in checks}) == len(checks)
    states = events.states(answer["plan_id"], "2")
    assert states == ["running", "succeeded"] * len(checks)
