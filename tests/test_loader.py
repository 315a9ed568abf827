"""Loading RTDL: shapes, meta ops, op ids, located issues, limits, catalogs."""
import json
import pathlib

import pytest
from qwen3_graphs import envelope as graph_envelope
from qwen3_graphs import spec_example
from rtdl_plans import do, envelope, par, seq

import bt_exec
from bt_exec.compilers import ControlRequest, Plan


def issues_of(source, **kwargs):
    with pytest.raises(bt_exec.PlanError) as caught:
        bt_exec.load(source, **kwargs)
    return [(i.code, i.path) for i in caught.value.issues]


def arena(nodes, root_index=0, **extra):
    return {"plan_id": "p", "session_id": "s", "round": 1, "root_index": root_index, "nodes": nodes, **extra}


def arena_do(op_id, description="act", children=(), args_json="{}", contract="robonix/prim/act"):
    return {"node_kind": 2, "children": list(children), "op_id": op_id, "description": description,
            "call": {"call_id": f"c{op_id}", "provider_id": "prim", "contract_id": contract, "args_json": args_json}}


def arena_seq(op_id, children, kind=0):
    return {"node_kind": kind, "children": list(children), "op_id": op_id, "description": f"group {op_id}"}


class TestShapes:
    def test_envelope_tree_and_json_text_load_the_same_plan(self):
        tree = seq(do("a"), par(do("b"), do("c")), description="root")
        from_env = bt_exec.load(envelope(tree, "snapshot + battery"))
        from_tree = bt_exec.load(json.dumps(tree))
        from_bytes = bt_exec.load(json.dumps(envelope(tree)).encode())
        assert from_env.shape == "envelope" and from_tree.shape == "tree" and from_bytes.shape == "envelope"
        assert from_env.description == "snapshot + battery"
        assert from_tree.description == "root"
        assert [op.kind for op in from_env.ops.values()] == ["sequence", "do", "parallel", "do", "do"]
        assert [op.kind for op in from_tree.ops.values()] == ["sequence", "do", "parallel", "do", "do"]

    def test_tree_op_ids_are_assigned_in_pre_order_from_1(self):
        plan = bt_exec.load(seq(do("a"), par(do("b"), do("c")), do("d")))
        assert list(plan.ops) == ["1", "2", "3", "4", "5", "6"]
        assert [plan.ops[i].description for i in plan.ops] == ["in order", "a", "together", "b", "c", "d"]
        assert plan.ops["1"].children == ["2", "3", "6"]
        assert plan.ops["3"].children == ["4", "5"]

    def test_whatever_op_id_the_llm_wrote_is_ignored(self):
        tree = seq(do("a"))
        tree["op_id"] = 99
        tree["children"][0]["op_id"] = "x"
        assert list(bt_exec.load(tree).ops) == ["1", "2"]

    def test_arena_keeps_its_op_ids_and_child_order(self):
        plan = bt_exec.load(arena([arena_seq("4", [2, 1]), arena_do("5"),
                                   arena_do("6", args_json='{"command": "ls"}')]))
        assert plan.shape == "arena" and plan.root == "4"
        assert list(plan.ops) == ["4", "6", "5"]
        assert plan.ops["4"].children == ["6", "5"]
        assert plan.ops["6"].args == {"command": "ls"} and plan.ops["6"].cap == "robonix/prim/act"
        assert plan.meta == {"plan_id": "p", "session_id": "s", "round": 1}

    def test_empty_sequence_is_a_valid_no_op_plan_and_takes_root_description(self):
        plan = bt_exec.load(envelope(seq(description="nothing to do"), ""))
        assert plan.op_count == 1 and plan.description == "nothing to do"

    @pytest.mark.parametrize("meta, expected", [
        ({"op": "cancel_plan", "plan_id": "3", "wait_ms": 100}, ("cancel_plan", "3", None, None, 100)),
        ({"op": "cancel_all"}, ("cancel_all", None, None, None, 5000)),
        ({"op": "stop_plan_at", "plan_id": "2", "target_op_id": "7", "when": "on_enter"},
         ("stop_plan_at", "2", "7", "on_enter", 0)),
        ({"op": "stop_plan_at", "plan_id": "2", "target_op_id": "7"}, ("stop_plan_at", "2", "7", "on_complete", 0)),
    ])
    def test_root_meta_op_is_a_control_request_in_both_shapes(self, meta, expected):
        for source in (meta, envelope(meta, "")):
            request = bt_exec.load(source)
            assert isinstance(request, ControlRequest)
            assert (request.op, request.plan_id, request.target_op_id, request.when, request.wait_ms) == expected

    def test_a_str_is_json_text_never_a_file_name(self, tmp_path):
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(seq(do())))
        assert issues_of(str(path))[0][0] == "json_syntax"
        assert isinstance(bt_exec.load(pathlib.Path(path)), Plan)

    def test_unreadable_path_and_unknown_dialect_are_plan_errors(self, tmp_path):
        assert issues_of(tmp_path / "missing.json") == [("unreadable", "")]
        assert issues_of(seq(do()), dialect="yaml") == [("unknown_dialect", "")]
        assert issues_of(seq(do()), dialect="qwen3")[0] == ("required", "/status")

    def test_dialect_rtdl_forces_the_dialect_and_reports_shape_problems(self):
        assert issues_of({"steps": []}) == [("unknown_shape", "")]
        assert issues_of({"plan": []}, dialect="rtdl") == [("unknown_shape", "")]
        assert bt_exec.load(seq(do()), dialect="rtdl").dialect == "rtdl"


class TestTreeIssues:
    def test_every_problem_is_reported_with_its_json_pointer(self):
        tree = seq(
            do("ok"),
            {"op": "do", "description": "", "cap": "nodot", "args": []},
            {"op": "loop", "description": "x", "children": []},
            par({"op": "do", "description": "d", "cap": "a.b", "out": "x"}),
            {"op": "cancel_all"},
            "not a node",
        )
        found = issues_of(envelope(tree))
        assert sorted(found) == sorted([
            ("empty_description", "/rtdl/children/1/description"),
            ("bad_cap", "/rtdl/children/1/cap"),
            ("type", "/rtdl/children/1/args"),
            ("bad_op", "/rtdl/children/2/op"),
            ("unknown_field", "/rtdl/children/3/children/0/out"),
            ("nested_meta_op", "/rtdl/children/4/op"),
            ("type", "/rtdl/children/5"),
        ])

    @pytest.mark.parametrize("cap", ["camera", "a. b", "a b.c", ".a", "a.", "a..b", 7, None])
    def test_cap_must_be_provider_qualified(self, cap):
        assert issues_of(seq(do(cap=cap))) == [("bad_cap", "/children/0/cap")]

    @pytest.mark.parametrize("cap", ["tiago_camera.camera_snapshot", "nav2.navigation_navigate", "a.b.c"])
    def test_provider_qualified_caps_load(self, cap):
        assert bt_exec.load(seq(do(cap=cap))).ops["2"].provider == cap.split(".")[0]

    def test_rtdl_given_as_a_string_is_rejected(self):
        found = issues_of({"rtdl": json.dumps(seq(do())), "rtdl_description": "x"})
        assert found == [("type", "/rtdl")]

    def test_envelope_description_may_be_empty_only_for_an_empty_sequence(self):
        assert issues_of(envelope(seq(do()), "  ")) == [("empty_description", "/rtdl_description")]

    def test_unknown_top_level_envelope_keys_are_ignored(self):
        doc = envelope(seq(do()))
        doc["model"] = "gpt"
        assert bt_exec.load(doc).op_count == 2

    def test_task_update_is_checked_and_kept(self):
        doc = envelope(seq(do()))
        doc["task_update"] = {"goal": "g", "success_criterion": "s", "status": "in_progress"}
        assert bt_exec.load(doc).meta["task_update"]["status"] == "in_progress"
        doc["task_update"]["status"] = "maybe"
        assert issues_of(doc) == [("bad_value", "/task_update/status")]

    def test_unknown_field_names_are_escaped_in_pointers(self):
        node = do()
        node["a/b~c"] = 1
        assert issues_of(seq(node)) == [("unknown_field", "/children/0/a~1b~0c")]

    @pytest.mark.parametrize("meta, code", [
        ({"op": "cancel_plan"}, "required"),
        ({"op": "cancel_plan", "plan_id": ""}, "bad_value"),
        ({"op": "cancel_plan", "plan_id": -3}, "bad_value"),
        ({"op": "cancel_all", "wait_ms": -1}, "bad_value"),
        ({"op": "cancel_all", "wait_ms": True}, "bad_value"),
        ({"op": "stop_plan_at", "plan_id": "1", "target_op_id": "2", "when": "halt"}, "bad_value"),
        ({"op": "cancel_all", "children": []}, "unknown_field"),
    ])
    def test_bad_meta_ops_are_refused(self, meta, code):
        assert issues_of(meta)[0][0] == code

    @pytest.mark.parametrize("text, code", [
        ("{", "json_syntax"), ('{"op": NaN}', "json_syntax"), ("[1, 2]", "type"), ("42", "type"),
        ('"a string"', "type"), ("", "json_syntax"),
    ])
    def test_malformed_documents(self, text, code):
        assert issues_of(text)[0][0] == code

    def test_non_utf8_bytes(self):
        assert issues_of(b"\xff\xfe{}")[0][0] == "encoding"


class TestArenaIssues:
    def test_index_out_of_range_names_the_child_slot(self):
        assert issues_of(arena([arena_seq("1", [1, 5]), arena_do("2")])) == [
            ("index_out_of_range", "nodes[0].children[1]")]

    def test_root_index_out_of_range(self):
        assert issues_of(arena([arena_do("1")], root_index=3)) == [("index_out_of_range", "root_index")]

    def test_node_reached_twice(self):
        found = issues_of(arena([arena_seq("1", [1, 2]), arena_seq("2", [2]), arena_do("3")]))
        assert found == [("reached_twice", "nodes[1].children[0]")]

    def test_cycle_and_self_loop(self):
        assert ("cycle", "nodes[1]") in issues_of(arena([arena_seq("1", [1]), arena_seq("2", [2]),
                                                         arena_seq("3", [1])]))
        assert issues_of(arena([arena_seq("1", [0])])) == [("cycle", "nodes[0].children[0]")]

    def test_unreachable_node(self):
        assert issues_of(arena([arena_seq("1", [1]), arena_do("2"), arena_do("3")])) == [("unreachable", "nodes[2]")]

    def test_duplicate_op_ids(self):
        assert issues_of(arena([arena_seq("1", [1]), arena_do("1")])) == [("duplicate_op_id", "nodes[1].op_id")]

    def test_node_problems_are_all_reported(self):
        nodes = [arena_seq("1", [1, 2, 3]), {"node_kind": 5, "children": [], "op_id": "2", "description": "x"},
                 arena_do("3", args_json="[1]"), {**arena_do("4"), "children": [0]}]
        assert sorted(issues_of(arena(nodes))) == sorted([
            ("bad_value", "nodes[1].node_kind"), ("type", "nodes[2].call.args_json"),
            ("bad_value", "nodes[3].children"),
            ("cycle", "nodes[0]"),  # 0 -> 3 -> 0: named as a cycle beside the nodes' own faults
        ])

    def test_call_only_on_do_nodes(self):
        node = {**arena_seq("1", []), "call": arena_do("x")["call"]}
        assert issues_of(arena([node])) == [("unknown_field", "nodes[0].call")]


class TestLimits:
    def test_size_limit(self):
        limits = bt_exec.Limits(max_input_bytes=100)
        text = json.dumps(seq(do("x" * 200)))
        assert issues_of(text, limits=limits) == [("too_large", "")]
        assert issues_of(text.encode(), limits=limits) == [("too_large", "")]

    def test_op_limit(self):
        limits = bt_exec.Limits(max_ops=3)
        assert bt_exec.load(seq(do(), do()), limits=limits).op_count == 3
        assert issues_of(seq(do(), do(), do()), limits=limits)[0][0] == "too_many_ops"
        nodes = [arena_seq("1", [1, 2, 3])] + [arena_do(str(i)) for i in range(2, 5)]
        assert issues_of(arena(nodes), limits=limits) == [("too_many_ops", "nodes")]

    def test_depth_limit_in_both_shapes(self):
        limits = bt_exec.Limits(max_depth=3)
        assert bt_exec.load(seq(seq(do())), limits=limits).depth == 3
        assert issues_of(seq(seq(seq(do()))), limits=limits) == [("too_deep", "/children/0/children/0/children/0")]
        nodes = [arena_seq("1", [1]), arena_seq("2", [2]), arena_seq("3", [3]), arena_do("4")]
        assert issues_of(arena(nodes), limits=limits) == [("too_deep", "nodes[3]")]

    def test_absurd_nesting_is_a_depth_error_not_a_crash(self):
        assert issues_of("[" * 100_000 + "]" * 100_000) == [("too_deep", "")]
        node = seq()
        deep = node
        for _ in range(5000):
            deep["children"].append(seq())
            deep = deep["children"][0]
        assert issues_of(node)[0][0] == "too_deep"

    def test_limits_reject_nonsense(self):
        with pytest.raises(ValueError):
            bt_exec.Limits(max_ops=0)


class TestCatalog:
    CATALOG = {
        "tiago_camera.camera_snapshot": {"args_schema": {"type": "object", "additionalProperties": False},
                                         "async": False},
        "nav2.navigation_navigate": {"args_schema": {"type": "object", "required": ["x", "y"],
                                                     "properties": {"x": {"type": "number"}, "y": {"type": "number"}}},
                                     "async": True},
    }

    def test_unknown_caps_and_bad_args_are_invalid_only_with_a_catalog(self):
        tree = seq(do(cap="tiago_camera.camera_snapshot"), do(cap="arm.wave"),
                   do(cap="nav2.navigation_navigate", args={"x": "1"}))
        assert bt_exec.validate(tree).verdict == "ok"
        report = bt_exec.validate(tree, catalog=self.CATALOG)
        assert report.verdict == "invalid"
        assert sorted((i.code, i.path) for i in report.issues) == [
            ("bad_args", "/children/2/args"), ("bad_args", "/children/2/args/x"), ("unknown_cap", "/children/1/cap")]

    def test_catalog_paths_in_an_arena_name_the_node(self):
        nodes = [arena_seq("1", [1]), arena_do("2", contract="nav2.navigation_navigate", args_json='{"x": 1}')]
        report = bt_exec.validate(arena(nodes), catalog=self.CATALOG)
        assert [(i.code, i.path) for i in report.issues] == [("bad_args", "nodes[1].call.args_json")]

    def test_builtin_args_are_always_checked(self):
        report = bt_exec.validate(seq(do(cap="executor.builtin_stop_plan_at", args={"plan_id": "1", "when": "later"})))
        assert report.verdict == "invalid"
        assert {i.path for i in report.issues} == {"/children/0/args", "/children/0/args/when"}

    def test_a_broken_catalog_is_a_config_error(self):
        with pytest.raises(bt_exec.ConfigError):
            bt_exec.CapabilityCatalog({"a.b": {"args_schema": {"type": 7}}})
        with pytest.raises(bt_exec.ConfigError):
            bt_exec.CapabilityCatalog({"a.b": {"unexpected": 1}})


class TestValidate:
    def test_validate_never_raises_and_reports_verdicts(self):
        assert bt_exec.validate("{oops").as_dict()["verdict"] == "invalid"
        assert bt_exec.validate({"op": "cancel_all"}).verdict == "control"
        report = bt_exec.validate(bt_exec.load(seq(do(), par(do()))))
        assert report.ok and report.stats["ops"] == 4 and report.stats["parallel"] == 1 and report.stats["depth"] == 3


def test_overflowing_numbers_are_refused():
    assert issues_of('{"op": "do", "description": "d", "cap": "a.b", "args": {"x": 1e999999}}')[0][0] == "json_syntax"


def test_behaviour_names_carry_no_control_characters():
    compiled = bt_exec.compile_plan(bt_exec.load(seq(do("bad \x1b[2J\nname"))))
    assert compiled.ops["2"].name == "[2] bad [2J name"


# --- text and numbers at the boundary -------------------------------------------------------------------------

def answer_as_utf8(answer: dict) -> bytes:
    """What a door sends: an answer's JSON as UTF-8 (raises UnicodeEncodeError if some text has no UTF-8 form)."""
    return json.dumps(answer, ensure_ascii=False).encode("utf-8")


class TestTextHygiene:
    """Text with no UTF-8 form (a lone surrogate, valid in JSON as "\\ud800") is refused at load, located."""

    def test_a_lone_surrogate_anywhere_is_refused_where_it_is(self):
        assert issues_of('{"op": "do", "description": "bad \\ud800 text", "cap": "a.b"}') == [
            ("bad_text", "/description")]
        tree = seq(do(args={"list": ["ok", "x\udfff"]}), description="fine")
        for source in (tree, json.dumps(tree), json.dumps(envelope(tree))):
            assert issues_of(source)[0][0] == "bad_text"
        assert issues_of(tree) == [("bad_text", "/children/0/args/list/1")]
        assert issues_of(envelope(seq(), description="\ud800")) == [("bad_text", "/rtdl_description")]
        assert issues_of({"op": "cancel_plan", "plan_id": "\udc00"}) == [("bad_text", "/plan_id")]
        assert issues_of(arena([arena_do("\ud800")])) == [("bad_text", "nodes[0].op_id"),
                                                           ("bad_text", "nodes[0].call.call_id")]

    def test_a_key_is_named_at_its_object_and_what_it_holds_is_not_walked(self):
        [issue] = pytest.raises(bt_exec.PlanError, bt_exec.load, do(args={"k\ud800": "x" * 70_000})).value.issues
        assert (issue.code, issue.path) == ("bad_text", "/args")
        assert issue.message.startswith("an object key ('k\\ud800') with a lone surrogate (U+D800 at character 1)")

    def test_a_surrogate_escaped_in_embedded_json_text_is_refused_at_that_field(self):
        escaped = arena([arena_do("1", args_json='{"text": "a\\ud800"}')])
        for source in (escaped, json.dumps(escaped)):
            assert issues_of(source) == [("bad_text", "nodes[0].call.args_json")]
        graph_text = json.dumps({"status": "ok", "plan": [{"id": "s\udfff", "skill": "grab"}], "transitions": {},
                                 "entry": "s"})  # json.dumps writes the surrogate as an escape
        assert issues_of({"run_id": "r", "scene_revision": 1, "response": graph_text}) == [("bad_text", "/response")]

    def test_what_is_text_loads(self):
        pair = arena([arena_do("1", description="smile \U0001f600", args_json=json.dumps({"e": "\U0001f600"}))])
        assert bt_exec.load(json.dumps(pair)).ops["1"].args == {"e": "\U0001f600"}  # a pair, written as two escapes
        literal = arena([arena_do("1", args_json=json.dumps({"path": "C:\\ud800"}))])  # a backslash, then "ud800"
        assert bt_exec.load(json.dumps(literal)).ops["1"].args == {"path": "C:\\ud800"}
        assert bt_exec.load(seq(do("caf\u00e9 \u202e \x00"))).ops["2"].description == "caf\u00e9 \u202e \x00"

    def test_submit_refuses_it_with_an_answer_every_door_can_send(self):
        executor = bt_exec.Executor(bt_exec.SimBackend())
        try:
            for source in ('{"op": "do", "description": "\\ud800", "cap": "a.b"}', do(args={"\udfff": 1})):
                answer = executor.submit(source)
                assert not answer["accepted"] and answer["issues"][0]["code"] == "bad_text"
                answer_as_utf8(answer)
                assert executor.validate_plan(source)["verdict"] == "invalid"
            assert executor.get_all_plans()["count"] == 0
        finally:
            executor.close()


class TestNumbers:
    """Every integer field has a range; a float where an integer is due is refused naming the field."""

    @pytest.mark.parametrize("wait_ms", [-1, 1.0, 1e13, True, "5000", None])
    def test_a_wait_is_a_non_negative_integer(self, wait_ms):
        meta = {"op": "cancel_all", "wait_ms": wait_ms}
        for source in (meta, envelope(meta, ""), json.dumps(meta)):
            assert issues_of(source) == [("bad_value", "/rtdl/wait_ms" if "rtdl" in source else "/wait_ms")]

    @pytest.mark.parametrize("wait_ms", [30_001, 10 ** 13, 2 ** 64])
    def test_a_cancel_waits_at_most_30_seconds(self, wait_ms):
        meta = {"op": "cancel_all", "wait_ms": wait_ms}
        for source in (meta, envelope(meta, ""), json.dumps(meta)):
            assert bt_exec.load(source).wait_ms == 30_000

    def test_the_wait_range_itself_loads(self):
        for wait_ms in (0, 30_000):
            assert bt_exec.load({"op": "cancel_plan", "plan_id": "1", "wait_ms": wait_ms}).wait_ms == wait_ms

    def test_submit_answers_a_fractional_wait_with_the_field_not_an_error(self):
        executor = bt_exec.Executor(bt_exec.SimBackend())
        try:
            answer = executor.submit('{"op": "cancel_all", "wait_ms": 1.0}')
            assert not answer["accepted"] and answer["verdict"] == "invalid"
            assert [(i["code"], i["path"]) for i in answer["issues"]] == [("bad_value", "/wait_ms")]
        finally:
            executor.close()

    def test_arena_integers(self):
        assert bt_exec.load(arena([arena_do("1")], round=2 ** 63 - 1)).meta["round"] == 2 ** 63 - 1
        assert bt_exec.load(arena([arena_do("1")], round=-2 ** 63)).meta["round"] == -2 ** 63
        assert issues_of(arena([arena_do("1")], round=2 ** 63)) == [("bad_value", "round")]
        assert issues_of(arena([arena_do("1")], round=1.0)) == [("type", "round")]
        assert issues_of(arena([arena_do("1")], root_index=0.0)) == [("type", "root_index")]
        assert issues_of(arena([arena_do("1")], root_index=10 ** 30)) == [("index_out_of_range", "root_index")]
        assert issues_of(arena([arena_seq("1", [1.0]), arena_do("2")])) == [("type", "nodes[0].children[0]")]
        assert issues_of(arena([arena_seq("1", [2 ** 70]), arena_do("2")]))[0] == (
            "index_out_of_range", "nodes[0].children[0]")

    def test_a_number_is_quoted_short(self):
        meta = {"op": "cancel_all", "wait_ms": -10 ** 300}
        [issue] = pytest.raises(bt_exec.PlanError, bt_exec.load, meta).value.issues
        assert issue.message == ("wait_ms must be a non-negative integer (milliseconds, at most 30000 are waited), "
                                 "got an integer of 997 bits")

    def test_no_integer_beyond_a_double_loads_anywhere(self):
        """Mixed with a float (an args schema's multipleOf, a division) such an integer would overflow."""
        big = 2 ** 1023
        for tree in (do(args={"n": big}), do(args={"n": [-big]})):
            for source in (tree, json.dumps(tree)):
                assert [code for code, _ in issues_of(source)] == ["bad_value"]
        assert bt_exec.load(do(args={"n": big - 1, "m": -(big - 1)})).ops["1"].args == {"n": big - 1, "m": -(big - 1)}
        hidden = arena([arena_do("1", args_json=json.dumps({"n": big, "s": "9" * 400, "f": float("1." + "0" * 400)}))])
        for source in (hidden, json.dumps(hidden)):
            assert issues_of(source) == [("bad_value", "nodes[0].call.args_json")]
        digits_in_a_string = arena([arena_do("1", args_json=json.dumps({"s": "9" * 400, "x": 1.5e300}))])
        assert bt_exec.load(digits_in_a_string).ops["1"].args["s"] == "9" * 400

    def test_a_catalog_schema_never_meets_an_overflowing_integer(self):
        catalog = {"a.b": {"async": False, "description": "d",
                           "args_schema": {"type": "object", "properties": {"n": {"multipleOf": 0.5}}}}}
        executor = bt_exec.Executor(bt_exec.SimBackend(), catalog=catalog)
        try:
            for source in (do(cap="a.b", args={"n": 10 ** 400}),
                           arena([arena_do("1", contract="a.b", args_json='{"n": 1%s}' % ("0" * 400))])):
                answer = executor.submit(source)
                assert [i["code"] for i in answer["issues"]] == ["bad_value"]  # was internal: OverflowError
                assert bt_exec.validate(source, catalog=catalog).verdict == "invalid"
        finally:
            executor.close()

    def test_scene_revisions_are_64_bit_integers(self):
        for revision, expected in ((2 ** 63, [("bad_value", "/scene_revision")]), (3.0, [("type", "/scene_revision")]),
                                   (-2 ** 63 - 1, [("bad_value", "/scene_revision")])):
            assert issues_of({**spec_example(), "scene_revision": revision}) == expected
            assert issues_of(graph_envelope(spec_example(), revision=revision)) == expected
        assert bt_exec.load({**spec_example(), "scene_revision": 2 ** 63 - 1}).meta["scene_revision"] == 2 ** 63 - 1
