"""BT.CPP XML loaded: what BT.CPP 4 accepts is accepted, BT.CPP 3 and a model's prose tolerated with warnings,
and what BT.CPP refuses refused, each at its element path and line."""
from __future__ import annotations

import pytest

import bt_exec
from bt_exec.compilers import load, validate
from bt_exec.errors import PlanError


def tree(body: str, root_attrs: str = 'BTCPP_format="4"', trees: str = "") -> str:
    return f'<root {root_attrs}>\n<BehaviorTree ID="Main">\n{body}\n</BehaviorTree>{trees}\n</root>'


def ops_of(text: str) -> list[tuple]:
    plan = load(text)
    return [(op.kind, op.node or op.cap, op.args, op.reads, op.writes) for op in plan.ops.values()]


def refusal(text: str, **options) -> list[tuple[str, str]]:
    report = validate(text, **options)
    assert report.verdict == "invalid"
    return [(issue.code, issue.path) for issue in report.issues]


def warning_codes(text: str, **options) -> list[str]:
    report = validate(text, **options)
    assert report.ok, report.issues
    return [warning["code"] for warning in report.warnings]


class TestAccepted:
    def test_compact_and_explicit_leaves_and_literal_and_blackboard_ports(self):
        text = tree('<Sequence><MoveTo x="1" goal="{pose}"/><Action ID="Say" text="hi"/>'
                    '<Condition ID="IsClear" zone="a"/><Repeat num_cycles="3"><Say text="{pose}"/></Repeat></Sequence>')
        assert ops_of(text) == [
            ("control", "Sequence", {}, None, None),
            ("do", "MoveTo", {"x": "1"}, None, {"goal": "pose"}),  # no catalog: the first naming of a key writes it
            ("do", "Say", {"text": "hi"}, None, None),
            ("do", "IsClear", {"zone": "a"}, None, None),
            ("control", "Repeat", {"num_cycles": "3"}, None, None),
            ("do", "Say", {}, {"text": "pose"}, None),
        ]
        plan = load(text)
        assert plan.dialect == plan.shape == "btcpp" and plan.meta == {"btcpp": {"main_tree": "Main", "format": "4"}}
        assert plan.ops["2"].path == "/root/BehaviorTree[@ID='Main']/Sequence[1]/MoveTo[1]"
        assert plan.ops["3"].path == "/root/BehaviorTree[@ID='Main']/Sequence[1]/Action[1]"

    def test_several_trees_with_main_tree_to_execute_and_subtrees_remapped(self):
        text = tree('<Sequence><Detect pose="{cup}"/><SubTree ID="Reach" name="reach it" target="{cup}" speed="2"/>'
                    '<SubTree ID="Log" _autoremap="true"/></Sequence>',
                    'BTCPP_format="4" main_tree_to_execute="Main"',
                    '<BehaviorTree ID="Reach"><Sequence><MoveTo goal="{target}" speed="{speed}" at="{here}"/>'
                    '<Note seen="{here}"/></Sequence></BehaviorTree>'
                    '<BehaviorTree ID="Log"><Say text="{cup}"/></BehaviorTree>')
        plan = load(text)
        reach, move, note, say = plan.ops["3"], plan.ops["4"], plan.ops["5"], plan.ops["6"]
        assert reach.node == "Sequence" and reach.description == "reach it / Sequence"
        assert reach.path == "/root/BehaviorTree[@ID='Reach']/Sequence[1]"
        assert move.args == {"speed": "2"} and move.reads == {"goal": "cup"}  # a literal remap is the literal
        assert move.writes == {"at": "Reach#1/here"} and note.reads == {"seen": "Reach#1/here"}  # its own key
        assert say.reads == {"text": "cup"}  # _autoremap: the parent's key of the same name

    def test_a_single_tree_without_an_id_runs_as_bt_cpp_names_it(self):
        plan = load('<root BTCPP_format="4"><BehaviorTree><AlwaysSuccess/></BehaviorTree></root>')
        assert plan.source.main == "BehaviorTree_0" and plan.ops["1"].node == "AlwaysSuccess"

    def test_metadata_attributes_are_no_ports_and_name_is_the_description(self):
        plan = load(tree('<MoveTo name="go home" _uid="3" _fullpath="Main/MoveTo" where="home"/>'))
        assert plan.ops["1"].args == {"where": "home"} and plan.ops["1"].description == "go home"

    def test_a_custom_control_of_the_catalog_loads_with_a_warning(self, tmp_path):
        catalog = tmp_path / "nodes.xml"
        catalog.write_text('<root><TreeNodesModel><Control ID="Twice"/><Action ID="Say">'
                           '<input_port name="text"/></Action></TreeNodesModel></root>')
        text = tree('<Twice><Say text="a"/><Say text="b"/></Twice>')
        assert "custom_node" in warning_codes(text, catalog=str(catalog))


class TestTolerated:
    def test_no_format_and_v3_names_warn_and_map_to_their_successors(self):
        text = ('<root main_tree_to_execute="T"><BehaviorTree ID="T"><SequenceStar><FallbackStar>'
                '<RetryUntilSuccesful num_attempts="2"><A/></RetryUntilSuccesful></FallbackStar>'
                '<Parallel success_threshold="1" failure_threshold="1"><B/></Parallel></SequenceStar>'
                '</BehaviorTree></root>')
        nodes = [op.node for op in load(text).ops.values() if op.kind == "control"]
        assert nodes == ["SequenceWithMemory", "Fallback", "RetryUntilSuccessful", "Parallel"]
        assert load(text).ops["5"].args == {"success_count": "1", "failure_count": "1"}
        codes = warning_codes(text)
        assert codes.count("v3_name") == 5 and "no_format" in codes

    def test_a_v3_file_remaps_subtree_ports_written_without_braces(self):
        text = ('<root BTCPP_format="3" main_tree_to_execute="T"><BehaviorTree ID="T"><Sequence><Find out="{p}"/>'
                '<SubTree ID="S" goal="p"/></Sequence></BehaviorTree>'
                '<BehaviorTree ID="S"><Go to="{goal}"/></BehaviorTree></root>')
        assert load(text).ops["3"].reads == {"to": "p"}
        assert "v3_format" in warning_codes(text)

    def test_unknown_root_attributes_warn(self):
        assert "unknown_root_attribute" in warning_codes(tree("<A/>", 'BTCPP_format="4" author="me"'))

    @pytest.mark.parametrize("reply", [
        "Here is the tree:\n```xml\n{xml}\n```\nIt fetches the cup.",
        "Sure. {xml} That is all.",
    ])
    def test_prose_or_a_markdown_fence_around_the_xml(self, reply):
        text = reply.format(xml=tree('<Sequence><A/><B/></Sequence>'))
        assert "text_skipped" in warning_codes(text)
        assert [op.cap for op in load(text).ops.values() if op.kind == "do"] == ["A", "B"]

    def test_an_xml_declaration_and_comments_before_root_are_read(self):
        text = '<?xml version="1.0" encoding="UTF-8"?>\n<!-- a plan -->\n' + tree("<A/>")
        assert load(text).ops["1"].cap == "A"


class TestRefused:
    def test_several_trees_and_no_main_one_offer_each_as_the_main_tree(self):
        text = tree("<A/>", trees='<BehaviorTree ID="Other"><B/></BehaviorTree>')
        report = validate(text)
        first = report.issues[0]
        assert (first.code, first.path) == ("no_main_tree", "/root")
        assert first.alternatives == [[{"op": "add", "path": "/root/@main_tree_to_execute", "value": "Main"}],
                                      [{"op": "add", "path": "/root/@main_tree_to_execute", "value": "Other"}]]

    def test_main_tree_to_execute_naming_no_tree(self):
        issues = validate(tree("<A/>", 'BTCPP_format="4" main_tree_to_execute="Mian"')).issues
        assert (issues[0].code, issues[0].path) == ("unknown_main_tree", "/root/@main_tree_to_execute")
        assert issues[0].fix == [{"op": "replace", "path": "/root/@main_tree_to_execute", "value": "Main"}]

    @pytest.mark.parametrize("text, code", [
        ('<root BTCPP_format="4"><BehaviorTree><A/></BehaviorTree>', "xml_syntax"),
        ("<root><BehaviorTree><A></BehaviorTree></root>", "xml_syntax"),  # one line, no quote: XML, no file name
        ('<root BTCPP_format="4"><BehaviorTree><A x="1" x="2"/></BehaviorTree></root>', "xml_syntax"),
        ('<plan><BehaviorTree><A/></BehaviorTree></plan>', "bad_root"),
        ('<root BTCPP_format="4"/>', "no_tree"),
        ('<root BTCPP_format="5"><BehaviorTree><A/></BehaviorTree></root>', "bad_value"),
        ('<root BTCPP_format="4"><include path="other.xml"/><BehaviorTree><A/></BehaviorTree></root>',
         "include_refused"),
        ('<root BTCPP_format="4"><BehaviorTree><A/><B/></BehaviorTree></root>', "tree_children"),
        ('<root BTCPP_format="4"><BehaviorTree><A _skipIf="x==1"/></BehaviorTree></root>', "unsupported_script"),
        ('<root BTCPP_format="4"><BehaviorTree><Action name="no id"/></BehaviorTree></root>', "required"),
    ])
    def test_xml_bt_cpp_refuses_is_refused(self, text, code):
        assert code in [found for found, _ in refusal(text)]

    def test_a_json_document_named_btcpp_and_xml_named_rtdl_are_refused_saying_why(self):
        with pytest.raises(PlanError) as json_named:
            load('{"op": "do", "cap": "a.b", "description": "x"}', dialect="btcpp")
        assert json_named.value.issues[0].code == "type"
        with pytest.raises(PlanError) as xml_named:
            load(tree("<A/>"), dialect="rtdl")
        assert xml_named.value.issues[0].code == "wrong_dialect"

    @pytest.mark.parametrize("text", ["<root><BehaviorTree><" + "A" * 200 + "/></BehaviorTree></root>",
                                      '<root><BehaviorTree><A ' + "x" * 200 + '="1"/></BehaviorTree></root>',
                                      '<root><BehaviorTree><A x="' + "v" * 200 + '"/></BehaviorTree></root>',
                                      '<root><BehaviorTree><Sequence><A x="' + "v" * 200 + '"/><B/></Sequence>'
                                      '</BehaviorTree></root>',
                                      '<root><BehaviorTree><Sequence><A x="' + "é" * 101 + '"/><B/></Sequence>'
                                      '</BehaviorTree></root>'])
    def test_a_tag_or_attribute_over_the_string_limit_is_refused(self, text):
        assert refusal(text, limits=bt_exec.Limits(max_string_chars=100)) == [("string_too_long", "")]

    def test_comments_are_held_to_the_element_budget(self):
        comments = "<!-- c -->" * 41  # four per op of max_ops, as elements are
        text = f'<root BTCPP_format="4"><BehaviorTree><A/>{comments}</BehaviorTree></root>'
        assert refusal(text, limits=bt_exec.Limits(max_ops=10)) == [("too_large", "")]
        assert load(text.replace("<!-- c -->", "", 1), limits=bt_exec.Limits(max_ops=10)).op_count == 1

    def test_the_string_limit_counts_characters_not_bytes(self):
        # 100 two-byte characters: 200 bytes of UTF-8, within a limit of 100 characters
        text = '<root><BehaviorTree><Sequence><A x="' + "é" * 100 + '"/><B/></Sequence></BehaviorTree></root>'
        plan = load(text, limits=bt_exec.Limits(max_string_chars=100))
        assert plan.ops["2"].args == {"x": "é" * 100}

    def test_the_limits_hold_after_subtrees_are_expanded(self):
        # 12 levels of SubTrees, each used twice: 4,096 leaves from a few lines
        trees = "".join(f'<BehaviorTree ID="T{level}"><Sequence><SubTree ID="T{level + 1}"/>'
                        f'<SubTree ID="T{level + 1}"/></Sequence></BehaviorTree>' for level in range(12))
        text = (f'<root BTCPP_format="4" main_tree_to_execute="T0">{trees}'
                '<BehaviorTree ID="T12"><A/></BehaviorTree></root>')
        codes = refusal(text, limits=bt_exec.Limits(max_ops=1000))
        assert codes[0][0] == "too_many_ops"
