"""A BT XML plan's control ops are shown by the BehaviorTree.CPP node they run as, in the terminal's tree."""
import bt_exec
from bt_exec.terminal.render import tree_lines

TREE = ('<root BTCPP_format="4"><BehaviorTree ID="Main"><ReactiveFallback>'
        '<AlwaysFailure/><Sequence><MoveTo x="1"/></Sequence></ReactiveFallback></BehaviorTree></root>')


def test_the_tree_view_names_each_control_op_by_its_node():
    executor = bt_exec.Executor(bt_exec.SimBackend())
    answer = executor.submit(TREE)
    assert answer["accepted"], answer
    executor.run_until_complete(answer["plan_id"], timeout=10)
    lines = tree_lines(executor.get_plan_tree(answer["plan_id"]))
    assert lines[0].startswith("✔ 1 ReactiveFallback succeeded"), lines
    assert any(" Sequence succeeded" in line for line in lines[1:]), lines
    assert any(" AlwaysFailure " in line for line in lines[1:]), lines
