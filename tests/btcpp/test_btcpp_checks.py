"""The static checks of BT.CPP trees: every code at its element path and line, all found at once, and the fixes they
carry, applied, giving a plan that passes."""
from __future__ import annotations

import pytest

import bt_exec
from bt_exec.compilers import apply_fixes, document_of, document_text, load, validate
from bt_exec.compilers.btcpp.catalog import NodeCatalog
from bt_exec.compilers.btcpp.patch import XmlPatchError, patch_xml

CATALOG = NodeCatalog.from_text("""<root><TreeNodesModel>
  <Action ID="MoveTo"><input_port name="goal"/><input_port name="speed" default="1.0" type="double"/></Action>
  <Action ID="Detect"><input_port name="object"/><output_port name="pose"/></Action>
  <Condition ID="IsClear"/>
  <Decorator ID="Twice"/>
</TreeNodesModel></root>""")
MAIN = "/root/BehaviorTree[@ID='Main']"
SEQ = f"{MAIN}/Sequence[1]"


def tree(body: str, trees: str = "") -> str:
    return (f'<root BTCPP_format="4" main_tree_to_execute="Main">\n<BehaviorTree ID="Main">\n{body}\n'
            f'</BehaviorTree>{trees}\n</root>')


def found(text: str, catalog=CATALOG) -> dict[str, object]:
    """(code, path) -> the issue, of the input's own issues (not those its repaired document would have)."""
    report = validate(text, catalog=catalog)
    assert report.verdict == "invalid"
    return {(issue.code, issue.path): issue for issue in report.issues if not issue.after_fixes}


@pytest.mark.parametrize("body, code, path, line", [
    ("<Sequence>\n<MoveTo goal='a'/>\n<Teleport/>\n</Sequence>", "unknown_node", f"{SEQ}/Teleport[1]/name()", 5),
    ("<Sequence>\n<Action ID='Detekt' object='a'/>\n</Sequence>", "unknown_node", f"{SEQ}/Action[1]/@ID", 4),
    ("<Sequnce>\n<IsClear/>\n</Sequnce>", "unknown_node", f"{MAIN}/Sequnce[1]/name()", 3),
    ("<MoveTo goal='a' sped='2'/>", "unknown_port", f"{MAIN}/MoveTo[1]/@sped", 3),
    ("<Repeat num_cycles='2' times='3'><IsClear/></Repeat>", "unknown_port", f"{MAIN}/Repeat[1]/@times", 3),
    ("<Sequence>\n<IsClear/>\n<MoveTo speed='2'/>\n</Sequence>", "missing_port", f"{SEQ}/MoveTo[1]/@goal", 5),
    ("<Repeat><IsClear/></Repeat>", "missing_port", f"{MAIN}/Repeat[1]/@num_cycles", 3),
    ("<Inverter>\n<IsClear/>\n<IsClear/>\n</Inverter>", "decorator_children", f"{MAIN}/Inverter[1]", 3),
    ("<Sequence>\n<Twice/>\n</Sequence>", "decorator_children", f"{SEQ}/Twice[1]", 4),
    ("<Sequence>\n<IsClear/>\n<Fallback/>\n</Sequence>", "control_children", f"{SEQ}/Fallback[1]", 5),
    ("<IfThenElse><IsClear/></IfThenElse>", "control_children", f"{MAIN}/IfThenElse[1]", 3),
    ("<Sequence><IsClear><MoveTo goal='a'/></IsClear></Sequence>", "leaf_children", f"{SEQ}/IsClear[1]", 3),
    ("<Sequence><AlwaysSuccess><IsClear/></AlwaysSuccess></Sequence>", "leaf_children",
     f"{SEQ}/AlwaysSuccess[1]", 3),
    ("<Sequence>\n<MoveTo goal='a'>fast please</MoveTo>\n</Sequence>", "text_in_element",
     f"{SEQ}/MoveTo[1]/text()", 4),
    ("<Repeat num_cycles='many'><IsClear/></Repeat>", "bad_port_value", f"{MAIN}/Repeat[1]", 3),
])
def test_each_check_names_its_element_and_line(body, code, path, line):
    issue = found(tree(body))[(code, path)]
    assert issue.message.startswith(f"line {line}: ")


@pytest.mark.parametrize("trees, code, path", [
    ('<BehaviorTree ID="Sub"><SubTree ID="Main"/></BehaviorTree>', "subtree_cycle",
     "/root/BehaviorTree[@ID='Sub']/SubTree[1]"),
    ('<BehaviorTree ID="Sub"><IsClear/></BehaviorTree><BehaviorTree ID="Sub"><IsClear/></BehaviorTree>',
     "duplicate_tree", "/root/BehaviorTree[3]"),
    ('<TreeNodesModel><Action/></TreeNodesModel>', "bad_model", "/root/TreeNodesModel[1]"),
])
def test_the_document_s_shape_is_checked_beside_the_nodes(trees, code, path):
    issues = found(tree('<Sequence><SubTree ID="Sub"/><MoveTo/></Sequence>', trees))
    assert (code, path) in issues
    assert ("missing_port", f"{SEQ}/MoveTo[1]/@goal") in issues, "the nodes are checked all the same"


def test_unknown_subtrees_and_cycles_are_found_with_every_other_issue_at_once():
    text = tree('<Sequence><SubTree ID="Plase"/><SubTree ID="Loop"/><MoveTo goal="a" sped="1"/></Sequence>',
                '<BehaviorTree ID="Loop"><Sequence><SubTree ID="Loop"/></Sequence></BehaviorTree>'
                '<BehaviorTree ID="Place"><IsClear/></BehaviorTree>')
    issues = found(text)
    assert set(issues) == {
        ("unknown_subtree", f"{SEQ}/SubTree[1]/@ID"),
        ("subtree_cycle", "/root/BehaviorTree[@ID='Loop']/Sequence[1]/SubTree[1]"),
        ("unknown_port", f"{SEQ}/MoveTo[1]/@sped"),
    }
    assert issues[("unknown_subtree", f"{SEQ}/SubTree[1]/@ID")].fix == [
        {"op": "replace", "path": f"{SEQ}/SubTree[1]/@ID", "value": "Place"}]
    assert "Loop -> Loop" in issues[("subtree_cycle", "/root/BehaviorTree[@ID='Loop']/Sequence[1]/SubTree[1]")].message


def test_an_issue_in_a_subtree_used_twice_is_listed_once():
    text = tree('<Sequence><SubTree ID="Go"/><SubTree ID="Go"/></Sequence>',
                '<BehaviorTree ID="Go"><MoveTo goal="a" sped="2"/></BehaviorTree>')
    assert list(found(text)) == [("unknown_port", "/root/BehaviorTree[@ID='Go']/MoveTo[1]/@sped")]


def test_without_a_catalog_leaves_are_taken_and_a_warning_says_so():
    report = validate(tree('<Sequence><Teleport to="moon"/><Repeat><IsClear/></Repeat></Sequence>'))
    assert [(issue.code, issue.path) for issue in report.issues] == [
        ("missing_port", f"{SEQ}/Repeat[1]/@num_cycles")]
    assert "leaves_unchecked" in [warning["code"] for warning in report.warnings]


def test_a_key_read_before_the_tree_writes_it_is_a_warning_and_keys_from_outside_are_not():
    report = validate(tree('<Sequence><MoveTo goal="{pose}"/><Detect object="cup" pose="{pose}"/>'
                           '<MoveTo goal="{home}"/></Sequence>'), catalog=CATALOG)
    assert report.ok
    flows = [warning["message"] for warning in report.warnings if warning["code"] == "read_before_write"]
    assert flows == [f"{SEQ}/MoveTo[1]: port 'goal' reads {{pose}} before any node of the tree writes it "
                     "(on this path it is set only if set from outside)"]


def test_the_fixes_applied_give_a_valid_plan_written_back_as_xml():
    text = tree('<Sequnce>\n<Detect objekt="cup" pose="{p}">look</Detect>\n<Action ID="MoveToo" goal="{p}"/>\n'
                '<SubTree ID="Relase"/>\n</Sequnce>',
                '<BehaviorTree ID="Release"><IsClear/></BehaviorTree>')
    report = validate(text, catalog=CATALOG)
    assert not report.ok
    repaired = apply_fixes(document_of(text), [issue for issue in report.issues if issue.fix])
    written = document_text(repaired)
    assert validate(written, catalog=CATALOG).ok, validate(written, catalog=CATALOG).issues
    assert '<Sequence>' in written and 'object="cup"' in written and 'ID="MoveTo"' in written
    assert 'ID="Release"' in written and "look" not in written
    assert [op.cap for op in load(written).ops.values() if op.kind == "do"] == ["Detect", "MoveTo", "IsClear"]


def test_a_fix_that_names_nothing_is_refused_as_a_patch_error():
    doc = document_of(tree("<IsClear/>"))
    with pytest.raises(XmlPatchError):
        patch_xml(doc, [{"fix": [{"op": "replace", "path": f"{MAIN}/Nothing[1]/@x", "value": "1"}]}])
    with pytest.raises(XmlPatchError):
        patch_xml(doc, [{"fix": [{"op": "copy", "from": f"{MAIN}/IsClear[1]", "path": f"{MAIN}/IsClear[2]"}]}])


def test_a_subtree_with_child_elements_is_refused_at_its_path():
    text = tree('<Sequence><SubTree ID="Sub"><IsClear/></SubTree><IsClear/></Sequence>',
                '<BehaviorTree ID="Sub"><IsClear/></BehaviorTree>')
    assert ("subtree_children", f"{SEQ}/SubTree[1]") in found(text)


def test_v3_shared_blackboards_and_unknown_root_elements_are_tolerated_with_warnings():
    text = ('<root main_tree_to_execute="Main"><Metadata/><BehaviorTree ID="Main"><Sequence>'
            '<Detect object="cup" pose="{p}"/><SubTree ID="Go" __shared_blackboard="true"/></Sequence></BehaviorTree>'
            '<BehaviorTree ID="Go"><MoveTo goal="{p}"/></BehaviorTree></root>')
    report = validate(text, catalog=CATALOG)
    assert report.ok, report.issues
    codes = [warning["code"] for warning in report.warnings]
    assert {"unknown_element", "v3_name", "no_format"} <= set(codes)
    assert load(text).ops["3"].reads == {"goal": "p"}  # shared: the SubTree reads the parent's key


def test_a_catalog_entry_for_a_library_node_overrides_its_ports():
    text = tree("<Repeat><IsClear/></Repeat>")
    assert ("missing_port", f"{MAIN}/Repeat[1]/@num_cycles") in found(text)
    catalog = NodeCatalog.from_text('<TreeNodesModel><Decorator ID="Repeat"><input_port name="num_cycles" default="2"/>'
                                    '</Decorator><Condition ID="IsClear"/></TreeNodesModel>')
    assert validate(text, catalog=catalog).ok
    executor = bt_exec.Executor(backend=bt_exec.SimBackend(), node_catalog=catalog)
    try:  # the node runs with the catalog's default, as BT.CPP would give it
        answer = executor.submit(text)
        assert executor.run_until_complete(answer["plan_id"], timeout=10)["outcome"] == "succeeded"
        assert [call.cap for call in executor.backend.calls] == ["IsClear", "IsClear"]
    finally:
        executor.close()
