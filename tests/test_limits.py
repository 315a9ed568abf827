"""Every input limit, just over it: a specific issue naming the place; and bounded memory for huge inputs.

Limits (``bt_exec.Limits``): max_input_bytes, max_ops, max_depth (and the JSON nesting it allows),
max_graph_steps, max_string_chars; plus the cap on listed issues (``bt_exec.errors.MAX_ISSUES``).
"""
import gc
import json
import tracemalloc

import pytest
from qwen3_graphs import detect_chain, graph, scene, spec_example, step
from qwen3_graphs import envelope as graph_envelope
from rtdl_plans import do, envelope, seq

import bt_exec
from bt_exec.errors import MAX_ISSUES, Issue, Issues


def issues_of(source, **kwargs):
    with pytest.raises(bt_exec.PlanError) as caught:
        bt_exec.load(source, **kwargs)
    return [(i.code, i.path) for i in caught.value.issues]


def chain(levels):
    """A tree ``levels`` deep: sequences down to one do."""
    node = do()
    for _ in range(levels - 1):
        node = seq(node)
    return node


def arena_do(op_id, args_json="{}", description="act"):
    return {"node_kind": 2, "children": [], "op_id": op_id, "description": description,
            "call": {"call_id": "c", "provider_id": "prim", "contract_id": "robonix/prim/act", "args_json": args_json}}


def arena(nodes):
    return {"root_index": 0, "nodes": nodes}


class TestEachLimitJustOver:
    def test_input_bytes(self, tmp_path):
        text = json.dumps(seq(do("x" * 50)))
        at_limit = bt_exec.Limits(max_input_bytes=len(text))
        over = bt_exec.Limits(max_input_bytes=len(text) - 1)
        assert bt_exec.load(text, limits=at_limit).op_count == 2
        file = tmp_path / "plan.json"
        file.write_text(text)
        for source in (text, text.encode(), file):
            assert issues_of(source, limits=over) == [("too_large", "")]
        assert issues_of(text.replace("x", "\u00e9"), limits=at_limit) == [("too_large", "")]  # bytes, not characters

    def test_input_bytes_of_a_dict_count_as_its_compact_json_text(self):
        plan = seq(do("x" * 50))
        size = len(json.dumps(plan, separators=(",", ":")))
        assert bt_exec.load(plan, limits=bt_exec.Limits(max_input_bytes=size)).op_count == 2
        assert issues_of(plan, limits=bt_exec.Limits(max_input_bytes=size - 60)) == [("too_large", "")]

    def test_ops(self):
        limits = bt_exec.Limits(max_ops=4)
        assert bt_exec.load(seq(do(), do(), do()), limits=limits).op_count == 4
        assert issues_of(seq(do(), do(), do(), do()), limits=limits) == [("too_many_ops", "/children/3")]
        nodes = [{"node_kind": 0, "children": [1, 2, 3, 4], "op_id": "r", "description": "root"}]
        nodes += [arena_do(str(i)) for i in range(1, 5)]
        assert issues_of(arena(nodes), limits=limits) == [("too_many_ops", "nodes")]
        within = [{**nodes[0], "children": [1, 2, 3]}] + nodes[1:4]
        assert bt_exec.load(arena(within), limits=limits).op_count == 4

    def test_depth(self):
        limits = bt_exec.Limits(max_depth=5)
        assert bt_exec.load(chain(5), limits=limits).depth == 5
        assert issues_of(chain(6), limits=limits) == [("too_deep", "/children/0" * 5)]
        nodes = [{"node_kind": 0, "children": [i + 1], "op_id": str(i), "description": "d"} for i in range(5)]
        nodes.append(arena_do("5"))
        assert issues_of(arena(nodes), limits=limits) == [("too_deep", "nodes[5]")]

    def test_json_nesting_follows_the_depth_limit(self):
        limits = bt_exec.Limits(max_depth=5)
        assert limits.max_json_nesting == 2 * 5 + 64
        args = "x"
        for _ in range(limits.max_json_nesting - 2):  # the tree node and args take two levels
            args = [args]
        assert bt_exec.load(do(args={"a": args}), limits=limits).op_count == 1
        code, path = issues_of(do(args={"a": [args]}), limits=limits)[0]
        assert code == "too_deep" and path.startswith("/args/a/0/0/")
        text = json.dumps(do(args={"a": [args]}))  # as text: the same
        assert [c for c, _ in issues_of(text, limits=limits)] == ["too_deep"]

    def test_graph_steps(self):
        limits = bt_exec.Limits(max_graph_steps=6)
        assert bt_exec.load(detect_chain(6), limits=limits).op_count == 6
        assert issues_of(detect_chain(7), limits=limits) == [("too_many_steps", "/plan")]
        assert issues_of(graph_envelope(detect_chain(7), as_text=True), limits=limits) == [
            ("too_many_steps", "/response/plan")]

    def test_limits_are_positive_integers(self):
        for name in ("max_input_bytes", "max_ops", "max_depth", "max_graph_steps", "max_string_chars"):
            with pytest.raises(ValueError):
                bt_exec.Limits(**{name: 0})
        assert bt_exec.Limits().max_string_chars == 65_536


class TestStringLength:
    limits = bt_exec.Limits(max_string_chars=40)  # every builder's own strings are shorter

    def test_any_string_value_of_a_tree_or_envelope(self):
        assert bt_exec.load(seq(do("x" * 40)), limits=self.limits).op_count == 2
        assert issues_of(seq(do("x" * 41)), limits=self.limits) == [("string_too_long", "/children/0/description")]
        assert issues_of(envelope(seq(do(args={"text": ["ok", "y" * 41]}))), limits=self.limits) == [
            ("string_too_long", "/rtdl/children/0/args/text/1")]
        assert issues_of(envelope(seq(), description="z" * 41), limits=self.limits) == [
            ("string_too_long", "/rtdl_description")]

    def test_characters_not_bytes(self):
        assert bt_exec.load(seq(do("\u00e9" * 40)), limits=self.limits).op_count == 2
        assert bt_exec.load(json.dumps(seq(do("\U0001f600" * 40))), limits=self.limits).op_count == 2

    def test_object_keys(self):
        assert issues_of(seq(do(args={"k" * 41: 1})), limits=self.limits) == [
            ("string_too_long", f"/children/0/args/{'k' * 41}")]

    def test_every_string_over_is_named_and_nothing_else_is_said(self):
        tree = seq(do("x" * 41, cap="bad cap"), do("y" * 42, args=[]))  # bad cap and args: not reached
        assert issues_of(tree, limits=self.limits) == [("string_too_long", "/children/0/description"),
                                                       ("string_too_long", "/children/1/description")]

    def test_arena_fields_and_args_json(self):
        ok = arena([arena_do("1", args_json=json.dumps({"text": "short", "n": [1, 2, 3, 4, 5, 6, 7]}))])
        assert bt_exec.load(ok, limits=self.limits).ops["1"].args["text"] == "short"  # args_json itself is longer
        assert issues_of(arena([arena_do("1" * 41)]), limits=self.limits) == [("string_too_long", "nodes[0].op_id")]
        long_arg = arena([arena_do("1", args_json=json.dumps({"text": ["x" * 41]}))])
        assert issues_of(long_arg, limits=self.limits) == [("string_too_long", "nodes[0].call.args_json at /text/0")]

    def test_step_graphs_and_their_response_text(self):
        the_graph = spec_example()
        the_graph["plan"][2]["id"] = "s" * 41
        assert issues_of(the_graph, limits=self.limits) == [("string_too_long", "/plan/2/id")]
        limits = self.limits
        text_envelope = graph_envelope(spec_example(), as_text=True, fenced=True)
        assert len(text_envelope["response"]) > 40
        assert bt_exec.load(text_envelope, limits=limits).op_count == 3  # the text's strings are short
        the_graph = spec_example()
        the_graph["plan"][0]["object"] = "v" * 41
        for source in (graph_envelope(the_graph, as_text=True), graph_envelope(the_graph)):
            assert issues_of(source, limits=limits) == [("string_too_long", "/response/plan/0/object")]

    def test_a_blocked_graph_is_refused_too(self):
        blocked = graph([step("s1", "tighten", "screw_1")], {}, status="blocked", reason="r" * 41)
        assert issues_of(blocked, limits=self.limits) == [("string_too_long", "/reason")]
        report = bt_exec.validate(blocked, limits=self.limits)
        assert report.verdict == "invalid" and report.issues[0].code == "string_too_long"

    def test_submit_refuses_with_the_executors_limits(self):
        executor = bt_exec.Executor(bt_exec.SimBackend(), limits=self.limits)
        answer = executor.submit(json.dumps(seq(do("x" * 41))))
        assert not answer["accepted"] and answer["verdict"] == "invalid"
        assert [(i["code"], i["path"]) for i in answer["issues"]] == [("string_too_long", "/children/0/description")]
        graph_executor = bt_exec.Executor(scene=scene(), limits=self.limits)
        the_graph = spec_example()
        the_graph["plan"][0]["object"] = "v" * 41
        answer = graph_executor.submit(graph_envelope(the_graph, run_id="r" * 5))
        assert [(i["code"], i["path"]) for i in answer["issues"]] == [("string_too_long", "/response/plan/0/object")]


class TestIssueCap:
    def test_thousands_of_faults_list_the_first_hundred_and_say_how_many_more(self):
        nodes = [{"node_kind": 0, "children": ["x"] * 5000, "op_id": "1", "description": "d"}]
        issues = bt_exec.validate(arena(nodes)).issues
        assert len(issues) == MAX_ISSUES + 1
        assert [i.code for i in issues[:-1]] == ["type"] * MAX_ISSUES
        assert issues[-1].code == "too_many_issues" and issues[-1].message.startswith("1 more issues at least")
        tree = seq(*[{"op": "bogus"} for _ in range(300)])
        issues = bt_exec.validate(tree).issues
        assert len(issues) == MAX_ISSUES + 1 and issues[-1].code == "too_many_issues"

    def test_a_part_s_summary_merged_into_more_issues_keeps_its_count(self):
        part = Issues(Issue("type", f"/{n}", "bad") for n in range(MAX_ISSUES + 50)).listed()
        assert part[-1].unlisted == 50
        merged = (Issues([Issue("type", "", "first")]) + part).listed()
        # one of the part's listed hundred no longer fits, and its summary stood for fifty
        assert len(merged) == MAX_ISSUES + 1 and merged[-1].unlisted == 51
        assert merged[-1].message.startswith("51 more issues at least")


def traced_peak(call) -> int:
    """Peak bytes traced while ``call()`` runs (its input was allocated before)."""
    gc.collect()
    tracemalloc.start()
    try:
        call()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def refused(source, code, limits=None):
    def call():
        with pytest.raises(bt_exec.PlanError) as caught:
            bt_exec.load(source, limits=limits)
        assert {i.code for i in caught.value.issues} == {code}
    return call


class TestMemoryStaysBounded:
    """Refusing a huge input costs a small fraction of its size; refusing a parsed one, about its size."""

    limit = bt_exec.Limits().max_input_bytes

    def test_an_input_one_byte_over_the_size_limit(self):
        head = '{"op": "do", "description": "'
        text = head + "x" * (self.limit - len(head) - 1) + '"}'
        assert len(text) == self.limit + 1
        for source in (text, text.encode()):
            assert traced_peak(refused(source, "too_large")) < len(text) / 100
        wide = head + "\u00e9" * (self.limit // 2) + '"}'  # fewer characters than the limit, more bytes
        assert len(wide) < self.limit
        assert traced_peak(refused(wide, "too_large")) < len(wide) / 20

    def test_a_dict_over_the_size_limit_is_refused_without_a_copy(self):
        chunk = self.limit // 400
        plan = seq(*[do("y" * chunk) for _ in range(401)])
        assert traced_peak(refused(plan, "too_large")) < self.limit / 100

    def test_a_string_over_its_limit_costs_the_parse_and_no_more(self):
        text = json.dumps(do("z" * (self.limit - 100)))
        assert traced_peak(refused(text, "string_too_long")) < 1.5 * len(text)

    def test_an_input_made_of_faults(self):
        nodes = [{"node_kind": 7, "children": "x", "op_id": 5, "description": "", "extra": 1} for _ in range(10_000)]
        text = json.dumps(arena(nodes))
        children = json.dumps(arena([{"node_kind": 0, "children": [0] * 300_000, "op_id": "1", "description": "d"}]))
        for source in (text, children):
            assert traced_peak(refused_with_cap(source)) < 4 * len(source)


def refused_with_cap(source):
    def call():
        with pytest.raises(bt_exec.PlanError) as caught:
            bt_exec.load(source)
        assert len(caught.value.issues) == MAX_ISSUES + 1
    return call


class TestText:
    limit = bt_exec.Limits().max_input_bytes

    def test_a_long_string_with_a_lone_surrogate_is_refused_without_a_copy(self):
        text = json.dumps(do("\u00e9" * (self.limit // 8) + "\ud800"))  # escaped: 6 bytes a character
        assert len(text) < self.limit

        def call():
            with pytest.raises(bt_exec.PlanError) as caught:
                bt_exec.load(text)
            assert [(i.code, i.path) for i in caught.value.issues] == [("string_too_long", "/description"),
                                                                        ("bad_text", "/description")]
        parse = traced_peak(lambda: json.loads(text))
        assert traced_peak(call) < 1.2 * parse  # the parse and no more: no encoded copy of the string

    def test_a_surrogate_pair_given_as_two_code_points_is_refused_too(self):
        assert issues_of(do("\ud83d\ude00")) == [("bad_text", "/description")]  # Python text, not JSON's pair
        assert bt_exec.load(json.dumps(do("\U0001f600"))).description == "\U0001f600"
