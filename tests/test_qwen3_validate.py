"""Qwen3 step graphs before any motion: loading, every rule of the validator, and its four verdicts."""
import copy
import json

import pytest
from qwen3_graphs import (REVISION, cap_to_hatch, cap_without_vacuum, detect_chain, edge_list, envelope, graph,
                          inspect_edges, retry_loop, return_vacuum, scene, screw_to_hole, spec_example, step,
                          vacuum_released_at_work, vacuum_to_work)

import bt_exec
from bt_exec.compilers import Scene

SOCKET = scene()                  # the vacuum in its socket, the cap in storage
PATRON = scene(vacuum="patron")   # the vacuum on the flange


def issues(report):
    """The graph's own issues (not those of the graph its fixes give, listed after them)."""
    return [(i.code, i.path, list(i.steps)) for i in report.issues if not i.after_fixes]


def check(the_graph, at=SOCKET, **options):
    return bt_exec.validate(the_graph, scene=at, **options)


def changed(the_graph, edit):
    """A deep copy of ``the_graph`` after ``edit(copy)``."""
    out = copy.deepcopy(the_graph)
    edit(out)
    return out


# --- ok --------------------------------------------------------------------------------------------------


class TestOk:
    @pytest.mark.parametrize("name, make, at", [
        ("the spec's example", spec_example, SOCKET),
        ("grab(vacuum) -> transfer(vacuum, work) -> completed", vacuum_to_work, SOCKET),
        ("transfer(vacuum, vacuum_socket) -> dock_tool returns it", return_vacuum, PATRON),
        ("transfer(vacuum, vacuum_socket) -> release(vacuum, vacuum_socket)", lambda: return_vacuum("release"), PATRON),
        ("take the vacuum, then the cap to the hatch", cap_to_hatch, SOCKET),
        ("retry the grab after inspecting", retry_loop, SOCKET),
        ("a screw handed over at a hole", screw_to_hole, SOCKET),
        ("256 steps, the limit", lambda: detect_chain(256), SOCKET),
        ("ownership unknown in the scene: inspect first",
         lambda: changed(spec_example(), lambda g: (g.update(entry="s3"),
                                                    g["transitions"]["s3"].update(empty="s1", placed="s1"))),
         scene(vacuum="unknown")),
    ])
    def test_sound_graphs_are_ok(self, name, make, at):
        report = check(make(), at)
        assert (report.verdict, issues(report)) == ("ok", []), name
        assert report.ok and report.dialect == "qwen3"

    def test_stats_of_an_ok_graph(self):
        report = check(spec_example())
        assert report.stats == {"shape": "graph", "status": "ok", "steps": 3, "transitions": 9, "entry": "s1",
                                "scene_revision": REVISION}
        assert report.as_dict()["valid"] is True and report.as_dict()["verdict"] == "ok"

    def test_aliases_pick_and_inspect_resolve(self):
        the_graph = graph([step("s1", "pick", "vacuum"), step("s2", "inspect", "vacuum")],
                          {"s1": {"success": "completed", "grasp_failed": "s2"}, "s2": inspect_edges("completed")})
        assert issues(check(the_graph)) == []
        plan = bt_exec.load(the_graph)
        assert [op.cap for op in plan.ops.values()] == ["pick", "inspect"], "the graph is kept as written"

    def test_move_to_storage_is_its_own_entry_and_counts_as_the_transfer_before_docking(self):
        the_graph = graph([step("s1", "move_to_storage", "vacuum"), step("s2", "dock_tool", "vacuum", "vacuum_socket")],
                          {"s1": {"success": "s2"}, "s2": {"success": "completed"}})
        assert check(the_graph, PATRON).verdict == "ok"
        needs_target = changed(the_graph, lambda g: g["plan"][0].update(target="work"))
        assert issues(check(needs_target, PATRON)) == [("unknown_param", "/plan/0/target", ["s1"])]

    def test_collision_may_lead_to_inspection_and_terminals(self):
        the_graph = graph([step("s1", "grab", "vacuum"), step("s2", "inspect_state", "vacuum")],
                          {"s1": {"success": "completed", "grasp_failed": "s2", "collision": "s2"},
                           "s2": inspect_edges("operator_required", empty="stop", placed="stop")})
        assert check(the_graph).verdict == "ok"

    def test_without_a_scene_a_graph_is_refused_as_an_executor_refuses_it(self):
        # only the catalog is checked beside no_scene: the scene's checks need one
        report = bt_exec.validate(cap_without_vacuum())
        assert (report.verdict, issues(report)) == ("invalid", [("no_scene", "", [])])
        no_revision = changed(vacuum_to_work(), lambda g: g.pop("scene_revision"))
        assert issues(bt_exec.validate(no_revision)) == [("no_scene", "", [])]

    def test_scene_object_and_dict_agree(self):
        as_dict = check(cap_without_vacuum(), SOCKET)
        as_scene = check(cap_without_vacuum(), Scene.from_dict(SOCKET))
        assert (as_dict.verdict, issues(as_dict)) == (as_scene.verdict, issues(as_scene))


# --- blocked ---------------------------------------------------------------------------------------------


class TestBlocked:
    def test_blocked_is_decided_first_whatever_else_is_wrong(self):
        the_graph = graph([step("s1", "tighten", "screw_9"), step("s1", "fly")], {"s1": {"landed": "nowhere"}},
                          entry="s7", revision=REVISION - 1, status="blocked", reason="the cap is not in the scene")
        report = check(the_graph)
        assert (report.verdict, issues(report)) == ("blocked", [])
        assert not report.ok
        assert report.stats["status"] == "blocked" and report.stats["reason"] == "the cap is not in the scene"

    def test_blocked_without_a_plan_loads(self):
        report = check({"status": "blocked", "reason": "no vacuum in the cell"})
        assert (report.verdict, issues(report)) == ("blocked", [])
        assert bt_exec.load({"status": "blocked"}).meta["status"] == "blocked"

    def test_blocked_in_an_envelope(self):
        report = check(envelope(graph([], {}, entry="x", status="blocked"), fenced=True))
        assert report.verdict == "blocked" and report.stats["shape"] == "envelope"


# --- invalid: one case per rule ---------------------------------------------------------------------------


def _release_at(target):
    return changed(vacuum_released_at_work(), lambda g: g["plan"][2].update(target=target))


def _return_on_every_path():
    """The dock is reached after transfer(vacuum, vacuum_socket) and also straight from an inspection."""
    return graph([step("s1", "grab", "vacuum"), step("s2", "transfer", "vacuum", "vacuum_socket"),
                  step("s3", "dock_tool", "vacuum", "vacuum_socket"), step("s4", "inspect_state", "vacuum")],
                 {"s1": {"success": "s2", "grasp_failed": "s4"}, "s2": {"success": "s3"},
                  "s3": {"success": "completed"}, "s4": inspect_edges("s3")})


def _twice(skill, obj, target=None):
    return graph([step("s1", skill, obj, target), step("s2", skill, obj, target)],
                 {"s1": {"success": "s2", "grasp_failed": "stop"} if skill == "grab" else {"success": "s2"},
                  "s2": {"success": "completed", "grasp_failed": "stop"} if skill == "grab"
                  else {"success": "completed"}})


INVALID = [
    # name, graph, scene, [(code, path, steps)]
    ("next names neither a step nor a terminal",
     changed(vacuum_to_work(), lambda g: g["transitions"]["s2"].update(success="s9")), SOCKET,
     [("unknown_step", "/transitions/s2/success", ["s2"])]),
    ("transitions of a step that does not exist",
     changed(vacuum_to_work(), lambda g: g["transitions"].update(s9={"success": "completed"})), SOCKET,
     [("unknown_step", "/transitions/s9/success", ["s9"])]),
    ("entry is not a step", changed(vacuum_to_work(), lambda g: g.update(entry="s0")), SOCKET,
     [("unknown_step", "/entry", [])]),
    ("no entry", changed(vacuum_to_work(), lambda g: g.pop("entry")), SOCKET, [("required", "/entry", [])]),
    ("a step id used twice",
     changed(vacuum_to_work(), lambda g: g["plan"].insert(1, step("s1", "detect", "cap"))), SOCKET,
     [("duplicate_step", "/plan/1/id", ["s1"])]),
    ("a step named like a terminal",
     changed(vacuum_to_work(), lambda g: g["plan"].append(step("completed", "detect", "cap"))), SOCKET,
     [("bad_value", "/plan/2/id", ["completed"])]),
    ("unknown skill", changed(vacuum_to_work(), lambda g: g["plan"][1].update(skill="fly")), SOCKET,
     [("unknown_skill", "/plan/1/skill", ["s2"])]),
    ("tighten is not in the Grant profile",
     graph([step("s1", "detect", "screw_1"), step("s2", "tighten", "screw_1", "hole_1")],
           {"s1": {"success": "s2", "not_found": "stop"}, "s2": {"success": "completed"}}), SOCKET,
     [("unsupported_skill", "/plan/1/skill", ["s2"])]),
    ("unknown object", changed(vacuum_to_work(), lambda g: g["plan"][0].update(object="wrench")), SOCKET,
     [("unknown_object", "/plan/0/object", ["s1"])]),
    ("unknown tool", changed(cap_to_hatch(), lambda g: g["plan"][1].update(tool="gripper")), SOCKET,
     [("unknown_object", "/plan/1/tool", ["t2"])]),
    ("a tool that is not the part's own", changed(vacuum_to_work(), lambda g: g["plan"][0].update(tool="vacuum")),
     SOCKET, [("wrong_tool", "/plan/0/tool", ["s1"])]),
    ("unknown target", changed(vacuum_to_work(), lambda g: g["plan"][1].update(target="moon")), SOCKET,
     [("unknown_target", "/plan/1/target", ["s2"])]),
    ("unknown parameter", changed(vacuum_to_work(), lambda g: g["plan"][1].update(speed="fast")), SOCKET,
     [("unknown_param", "/plan/1/speed", ["s2"])]),
    ("missing parameter", changed(vacuum_to_work(), lambda g: g["plan"][1].pop("target")), SOCKET,
     [("missing_param", "/plan/1", ["s2"])]),
    ("an object of the wrong kind", changed(vacuum_to_work(), lambda g: g["plan"][1].update(object="screw_1")),
     SOCKET, [("wrong_object_type", "/plan/1/object", ["s2"])]),
    ("an object the scene does not have", changed(screw_to_hole(), lambda g: [s.update(object="screw_3")
                                                                             for s in g["plan"]]), SOCKET,
     [("not_in_scene", "/plan/0/object", ["h1"]), ("not_in_scene", "/plan/1/object", ["h2"])]),
    ("a target the scene does not have", changed(screw_to_hole(), lambda g: g["plan"][1].update(target="hole_3")),
     SOCKET, [("not_in_scene", "/plan/1/target", ["h2"])]),
    ("an event the skill does not have",
     changed(screw_to_hole(), lambda g: g["transitions"]["h1"].update(grasp_failed="stop")), SOCKET,
     [("unknown_event", "/transitions/h1/grasp_failed", ["h1"])]),
    ("an unreachable step",
     changed(vacuum_to_work(), lambda g: (g["plan"].append(step("s3", "detect", "cap")),
                                          g["transitions"].update(s3={"success": "completed", "not_found": "stop"}))),
     SOCKET, [("unreachable", "/plan/2", ["s3"])]),
    ("a step without transitions", changed(vacuum_to_work(), lambda g: g["transitions"].pop("s2")), SOCKET,
     [("no_transitions", "/plan/1", ["s2"])]),
    ("a required transition missing", changed(vacuum_to_work(), lambda g: g["transitions"]["s1"].pop("grasp_failed")),
     SOCKET, [("missing_transition", "/plan/0", ["s1"])]),
    ("grasp_failed leads to completed",
     changed(vacuum_to_work(), lambda g: g["transitions"]["s1"].update(grasp_failed="completed")), SOCKET,
     [("failure_to_completed", "/transitions/s1/grasp_failed", ["s1"])]),
    ("collision leads to completed",
     changed(vacuum_to_work(), lambda g: g["transitions"]["s2"].update(collision="completed")), SOCKET,
     [("failure_to_completed", "/transitions/s2/collision", ["s2"])]),
    ("inspect_state's unknown leads to completed",
     changed(spec_example(), lambda g: g["transitions"]["s3"].update(unknown="completed")), SOCKET,
     [("failure_to_completed", "/transitions/s3/unknown", ["s3"])]),
    ("collision leads straight to motion",
     changed(spec_example(), lambda g: g["transitions"]["s1"].update(collision="s2")), SOCKET,
     [("motion_after_collision", "/transitions/s1/collision", ["s1", "s2"])]),
    ("collision leads to motion through an inspection",
     changed(spec_example(), lambda g: g["transitions"]["s2"].update(collision="s3")), SOCKET,
     [("motion_after_collision", "/transitions/s2/collision", ["s2"])]),
    ("every collision edge that leads to motion is reported, also into a shared inspection",
     changed(spec_example(), lambda g: (g["transitions"]["s1"].update(collision="s3"),
                                        g["transitions"]["s2"].update(collision="s3"))), SOCKET,
     [("motion_after_collision", "/transitions/s1/collision", ["s1", "s2"]),
      ("motion_after_collision", "/transitions/s2/collision", ["s2"])]),
    ("motion right after grasp_failed",
     changed(vacuum_to_work(), lambda g: g["transitions"]["s1"].update(grasp_failed="s2")), SOCKET,
     [("uncertain_ownership", "/transitions/s1/grasp_failed", ["s1", "s2"])]),
    ("motion right after inspect_state's unknown",
     changed(spec_example(), lambda g: g["transitions"]["s3"].update(unknown="s2")), SOCKET,
     [("uncertain_ownership", "/transitions/s3/unknown", ["s3", "s2"])]),
    ("a cycle with no way out",
     changed(vacuum_to_work(), lambda g: (g["plan"].append(step("s3", "transfer", "vacuum", "hatch_seat")),
                                          g["transitions"].update(s2={"success": "s3"}, s3={"success": "s2"}))), SOCKET,
     [("no_way_out", "/plan/1", ["s2", "s3"])]),
    ("a step looping on itself", changed(vacuum_to_work(), lambda g: g["transitions"]["s2"].update(success="s2")),
     SOCKET, [("no_way_out", "/plan/1", ["s2"])]),
    ("no scene_revision", changed(vacuum_to_work(), lambda g: g.pop("scene_revision")), SOCKET,
     [("revision_missing", "/scene_revision", [])]),
    ("another scene_revision", changed(vacuum_to_work(), lambda g: g.update(scene_revision=REVISION - 1)), SOCKET,
     [("stale_revision", "/scene_revision", [])]),
    ("257 steps, over the limit", detect_chain(257), SOCKET, [("too_many_steps", "/plan", [])]),
    ("release(vacuum) with no target", vacuum_released_at_work(), SOCKET,
     [("tool_not_in_socket", "/plan/2", ["s3"])]),
    ("release(vacuum, work)", _release_at("work"), SOCKET, [("tool_not_in_socket", "/plan/2", ["s3"])]),
    ("release(vacuum, vacuum_socket) right after transfer(vacuum, work)", _release_at("vacuum_socket"), SOCKET,
     [("no_transfer_before_return", "/plan/2", ["s3", "s2"])]),
    ("dock_tool right after grab",
     graph([step("s1", "grab", "vacuum"), step("s2", "dock_tool", "vacuum", "vacuum_socket")],
           {"s1": {"success": "s2", "grasp_failed": "stop"}, "s2": {"success": "completed"}}), SOCKET,
     [("no_transfer_before_return", "/plan/1", ["s2", "s1"])]),
    ("dock_tool as the entry",
     graph([step("s1", "dock_tool", "vacuum", "vacuum_socket")], {"s1": {"success": "completed"}}), PATRON,
     [("no_transfer_before_return", "/plan/0", ["s1"])]),
    ("dock_tool reached once without the transfer", _return_on_every_path(), SOCKET,
     [("no_transfer_before_return", "/plan/2", ["s3", "s4"])]),
    ("dock_tool into a place that is no socket",
     graph([step("s1", "transfer", "vacuum", "work"), step("s2", "dock_tool", "vacuum", "work")],
           {"s1": {"success": "s2"}, "s2": {"success": "completed"}}), PATRON,
     [("wrong_target_type", "/plan/1/target", ["s2"]), ("tool_not_in_socket", "/plan/1", ["s2"])]),
    ("a parameter on the step and in args with different values",
     changed(vacuum_to_work(), lambda g: g["plan"][0].update(args={"object": "cap"})), SOCKET,
     [("param_conflict", "/plan/0/args/object", ["s1"])]),
    ("grab(vacuum) twice: the patron is never free the second time", _twice("grab", "vacuum"), SOCKET,
     [("precondition_never_holds", "/plan/1", ["s2"])]),
    ("the same screw handed over twice", _twice("handoff_screw", "screw_1", "hole_1"), SOCKET,
     [("precondition_never_holds", "/plan/1", ["s2"])]),
    ("dispense with the cap in the hand",
     changed(cap_to_hatch(), lambda g: (g["plan"].append(step("t7", "dispense", target="hatch_seat")),
                                        g["transitions"]["t4"].update(success="t7"),
                                        g["transitions"].update(t7={"success": "t5"}))), SOCKET,
     [("precondition_never_holds", "/plan/6", ["t7"])]),
    ("after an inspection found it empty, transfer an object not held (whatever the scene)",
     changed(retry_loop(), lambda g: g["transitions"]["s2"].update(empty="s3")), SOCKET,
     [("precondition_never_holds", "/plan/2", ["s3"])]),
]


@pytest.mark.parametrize("name, the_graph, at, expected", INVALID, ids=[case[0] for case in INVALID])
def test_invalid(name, the_graph, at, expected):
    report = check(the_graph, at)
    assert report.verdict == "invalid" and not report.ok
    assert issues(report) == expected
    assert all(isinstance(i.as_dict()["steps"], list) for i in report.issues), "every issue names its steps"


def test_without_a_scene_a_precondition_that_never_holds_is_still_invalid():
    report = bt_exec.validate(_twice("grab", "vacuum"))
    assert issues(report) == [("no_scene", "", []), ("precondition_never_holds", "/plan/1", ["s2"])]


def test_loader_issues_name_the_dialect_when_it_is_given():
    the_graph = changed(vacuum_to_work(), lambda g: g["plan"][0].update(args={"object": "cap"}))
    assert check(the_graph).dialect is None
    assert check(the_graph, dialect="qwen3").dialect == "qwen3"


def test_a_parameter_given_twice_with_the_same_value_is_fine():
    the_graph = changed(vacuum_to_work(), lambda g: g["plan"][0].update(args={"object": "vacuum"}))
    assert check(the_graph).verdict == "ok"


def test_every_problem_is_reported_not_just_the_first():
    the_graph = changed(spec_example(), lambda g: (g["plan"][1].update(target="moon"),
                                                   g["transitions"]["s1"].update(collision="s2"),
                                                   g["transitions"]["s3"].update(unknown="completed")))
    assert issues(check(the_graph)) == [
        ("unknown_target", "/plan/1/target", ["s2"]),
        ("failure_to_completed", "/transitions/s3/unknown", ["s3"]),
        ("motion_after_collision", "/transitions/s1/collision", ["s1", "s2"]),
    ]


def test_cycle_checks_are_linear_not_cycle_enumeration():
    """A complete mesh of 200 inspections has astronomically many cycles; it is checked at once."""
    ids = [f"i{n}" for n in range(200)]
    transitions = {i: {"holding": ids[(k + 1) % 200], "empty": ids[(k + 7) % 200], "placed": ids[(k + 13) % 200],
                       "unknown": ids[(k + 1) % 200]} for k, i in enumerate(ids)}
    mesh = graph([step(i, "inspect_state", "cap") for i in ids], transitions)
    report = check(mesh)
    assert [i.code for i in report.issues] == ["no_way_out"]
    assert report.issues[0].steps == tuple(ids)
    transitions["i199"]["unknown"] = "operator_required"
    assert check(mesh).verdict == "ok"


# --- replan_required --------------------------------------------------------------------------------------


REPLAN = [
    ("grab(cap) with the vacuum in its socket", cap_without_vacuum(), SOCKET,
     [("precondition_fails_in_scene", "/plan/0", ["s1"])]),
    ("the path from the entry to the failing step",
     changed(cap_without_vacuum(), lambda g: (g["plan"].insert(0, step("s0", "detect", "cap")),
                                              g.update(entry="s0"),
                                              g["transitions"].update(s0={"success": "s1", "not_found": "stop"}))),
     SOCKET, [("precondition_fails_in_scene", "/plan/1", ["s0", "s1"])]),
    ("grab(vacuum) while it is already on the flange", vacuum_to_work(), PATRON,
     [("precondition_fails_in_scene", "/plan/0", ["s1"])]),
    ("returning a vacuum that is in its socket", return_vacuum(), SOCKET,
     [("precondition_fails_in_scene", "/plan/0", ["s1"]), ("precondition_fails_in_scene", "/plan/1", ["s1", "s2"])]),
    ("dispense while the scene's hand holds the cap",
     graph([step("s1", "dispense", target="hatch_seat")], {"s1": {"success": "completed"}}),
     scene(vacuum="patron", cap="hatch_seat", holding="cap"), [("precondition_fails_in_scene", "/plan/0", ["s1"])]),
    ("grab(vacuum) when the scene does not know whether it is on the flange", vacuum_to_work(),
     scene(vacuum="unknown"), [("precondition_fails_in_scene", "/plan/0", ["s1"])]),
    ("dispense when the scene does not know whether the cap is in the hand",
     graph([step("s1", "dispense", target="hatch_seat")], {"s1": {"success": "completed"}}),
     scene(vacuum="patron", cap="unknown"), [("precondition_fails_in_scene", "/plan/0", ["s1"])]),
    ("the path shown is one on which it fails, not merely the first found",
     graph([step("s1", "grab", "vacuum"), step("s2", "detect", "vacuum"), step("s3", "transfer", "vacuum", "work")],
           {"s1": {"success": "s3", "grasp_failed": "stop", "failed": "s2"},
            "s2": {"success": "s3", "not_found": "stop"}, "s3": {"success": "completed"}}), SOCKET,
     [("precondition_fails_in_scene", "/plan/2", ["s1", "s2", "s3"])]),
]


@pytest.mark.parametrize("name, the_graph, at, expected", REPLAN, ids=[case[0] for case in REPLAN])
def test_replan_required(name, the_graph, at, expected):
    report = check(the_graph, at)
    assert report.verdict == "replan_required" and not report.ok
    assert issues(report) == expected


def test_replan_message_names_the_precondition_and_the_path():
    (issue,) = check(cap_without_vacuum()).issues
    assert issue.message == ("step 's1' (grab): its tool vacuum must be on the flange (patron), but from the current "
                             "scene it is not on the path s1: plan again from this scene")


def test_invalid_wins_over_replan_required():
    """Preconditions are followed only once every step's meaning is known: the verdict is invalid."""
    the_graph = changed(cap_without_vacuum(), lambda g: g["plan"][1].update(target="moon"))
    report = check(the_graph)
    assert (report.verdict, issues(report)) == ("invalid", [("unknown_target", "/plan/1/target", ["s2"])])


# --- the two transitions forms, parameters in args ---------------------------------------------------------


@pytest.mark.parametrize("make, at", [(spec_example, SOCKET), (cap_without_vacuum, SOCKET),
                                      (vacuum_released_at_work, SOCKET), (retry_loop, SOCKET)])
def test_edge_list_form_gives_the_same_verdict(make, at):
    as_map = check(make(), at)
    as_edges = check(changed(make(), lambda g: g.update(transitions=edge_list(g["transitions"]))), at)
    assert (as_edges.verdict, issues(as_edges)) == (as_map.verdict, issues(as_map))


def test_edge_list_issue_paths_point_at_the_edge():
    the_graph = changed(vacuum_to_work(), lambda g: g["transitions"]["s1"].update(grasp_failed="completed"))
    the_graph["transitions"] = edge_list(the_graph["transitions"])
    assert issues(check(the_graph)) == [("failure_to_completed", "/transitions/1", ["s1"])]


def test_edge_list_same_event_twice():
    edges = edge_list(vacuum_to_work()["transitions"])
    repeated = changed(vacuum_to_work(), lambda g: g.update(transitions=edges + [dict(edges[0])]))
    assert check(repeated).verdict == "ok", "the same edge twice is one edge"
    clash = changed(vacuum_to_work(), lambda g: g.update(transitions=edges + [{**edges[0], "to": "stop"}]))
    assert issues(check(clash)) == [("duplicate_transition", "/transitions/3", ["s1"])]


def test_edge_list_malformed_edge():
    the_graph = changed(vacuum_to_work(),
                        lambda g: g.update(transitions=edge_list(g["transitions"]) + [{"from": "s1"}]))
    assert issues(check(the_graph)) == [("type", "/transitions/3", [])]


def test_params_in_args_are_the_same_as_on_the_step():
    def into_args(g):
        for s in g["plan"]:
            s["args"] = {k: s.pop(k) for k in ("object", "target") if k in s}
    for make, verdict in [(cap_to_hatch, "ok"), (cap_without_vacuum, "replan_required"),
                          (vacuum_released_at_work, "invalid")]:
        on_step, in_args = check(make()), check(changed(make(), into_args))
        assert (in_args.verdict, issues(in_args)) == (on_step.verdict, issues(on_step))
        assert in_args.verdict == verdict
    plan = bt_exec.load(changed(vacuum_to_work(), into_args))
    assert plan.ops["s2"].args == {"object": "vacuum", "target": "work"}


def test_skill_contracts_are_ignored():
    contracts = {"tighten": {"outcomes": ["success"], "required": ["success"]},
                 "grab": {"outcomes": ["success", "dropped"], "required": ["success"]}}
    assert check(changed(vacuum_to_work(), lambda g: g.update(skill_contracts=contracts))).verdict == "ok"
    the_graph = changed(vacuum_to_work(), lambda g: (g.update(skill_contracts=contracts),
                                                     g["transitions"]["s1"].update(dropped="stop")))
    assert issues(check(the_graph)) == [("unknown_event", "/transitions/s1/dropped", ["s1"])]
    tighten = graph([step("s1", "tighten", "screw_1", "hole_1")], {"s1": {"success": "completed"}},
                    skill_contracts=contracts)
    assert issues(check(tighten)) == [("unsupported_skill", "/plan/0/skill", ["s1"])]


# --- the submit envelope ----------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["object", "text", "fenced"])
def test_envelope_forms(form):
    wrapped = envelope(cap_to_hatch(), run_id="hatch-1", as_text=form == "text", fenced=form == "fenced")
    report = check(wrapped)
    assert (report.verdict, issues(report)) == ("ok", [])
    assert report.stats["shape"] == "envelope" and report.stats["scene_revision"] == REVISION
    plan = bt_exec.load(wrapped)
    assert plan.meta == {"run_id": "hatch-1", "scene_revision": REVISION, "status": "ok", "reason": None}
    assert list(plan.ops) == ["t1", "t2", "t3", "t4", "t5", "t6"] and plan.shape == "envelope"


@pytest.mark.parametrize("form", ["object", "text", "fenced"])
def test_envelope_issue_paths_point_into_the_response(form):
    wrapped = envelope(cap_without_vacuum(), as_text=form == "text", fenced=form == "fenced")
    assert issues(check(wrapped)) == [("precondition_fails_in_scene", "/response/plan/0", ["s1"])]


def test_envelope_revision_paths():
    stale = envelope(vacuum_to_work(), revision=REVISION + 1)
    assert issues(check(stale)) == [("stale_revision", "/scene_revision", [])]
    missing = envelope(vacuum_to_work(), revision=None)
    assert issues(check(missing)) == [("revision_missing", "/scene_revision", [])]
    inside = envelope(vacuum_to_work(), revision=None)
    inside["response"]["scene_revision"] = REVISION + 1
    assert issues(check(inside)) == [("stale_revision", "/response/scene_revision", [])]
    inside["response"]["scene_revision"] = REVISION
    assert check(inside).verdict == "ok"


@pytest.mark.parametrize("response, code", [
    ("not json at all", "json_syntax"),
    ("```json\n{\"status\": \"ok\"}\n```\n```json\n{}\n```", "json_syntax"),
    ("[1, 2]", "type"),
    (42, "type"),
])
def test_envelope_with_a_bad_response(response, code):
    report = check({"run_id": "r", "scene_revision": REVISION, "response": response})
    assert report.verdict == "invalid"
    assert [(i.code, i.path) for i in report.issues] == [(code, "/response")]


def test_envelope_bad_run_id():
    report = check({**envelope(vacuum_to_work()), "run_id": ""})
    assert [(i.code, i.path) for i in report.issues] == [("type", "/run_id")]


# --- bt_exec.load ------------------------------------------------------------------------------------------


def test_load_a_graph():
    plan = bt_exec.load(json.dumps(spec_example()))
    assert (plan.dialect, plan.shape, plan.root, plan.description) == ("qwen3", "graph", "s1", "3-step graph from s1")
    assert [(op.op_id, op.kind, op.cap, op.description) for op in plan.ops.values()] == [
        ("s1", "step", "grab", "grab(vacuum)"), ("s2", "step", "transfer", "transfer(vacuum, work)"),
        ("s3", "step", "inspect_state", "inspect_state(vacuum)")]
    assert plan.steps.transitions["s3"] == inspect_edges("s2")
    assert plan.meta == {"run_id": None, "scene_revision": REVISION, "status": "ok", "reason": None}


def test_load_refuses_a_broken_graph_with_every_issue():
    broken = {"status": "maybe", "entry": 3, "plan": [{"id": "s1"}, "x"], "transitions": {"s1": []}}
    with pytest.raises(bt_exec.PlanError) as caught:
        bt_exec.load(broken)
    assert [(i.code, i.path) for i in caught.value.issues] == [
        ("bad_value", "/status"), ("bad_value", "/plan/0/skill"), ("type", "/plan/1"), ("type", "/transitions/s1"),
        ("unknown_step", "/entry")]


def test_load_with_the_qwen3_dialect_and_limits():
    with pytest.raises(bt_exec.PlanError) as caught:
        bt_exec.load(detect_chain(11), dialect="qwen3", limits=bt_exec.Limits(max_graph_steps=10))
    assert [(i.code, i.path) for i in caught.value.issues] == [("too_many_steps", "/plan")]
    assert bt_exec.load(detect_chain(10), dialect="qwen3", limits=bt_exec.Limits(max_graph_steps=10)).op_count == 10


def test_envelope_and_graph_revisions_must_agree():
    graph = {"status": "ok", "entry": "s1", "scene_revision": 6,
             "plan": [{"id": "s1", "skill": "detect", "object": "cap"}],
             "transitions": {"s1": {"success": "completed", "not_found": "replan_required"}}}
    with pytest.raises(bt_exec.PlanError) as refused:
        bt_exec.load({"run_id": "r", "scene_revision": 7, "response": graph})
    assert [(i.code, i.path) for i in refused.value.issues] == [("revision_conflict", "/response/scene_revision")]


def test_validate_takes_a_scene_file(tmp_path):
    scene = tmp_path / "scene.json"
    scene.write_text(json.dumps({"scene_revision": 3, "objects": ["cap"], "targets": ["work"]}))
    graph = {"status": "ok", "entry": "s1", "scene_revision": 3,
             "plan": [{"id": "s1", "skill": "detect", "object": "cap"}],
             "transitions": {"s1": {"success": "completed", "not_found": "replan_required"}}}
    assert bt_exec.validate(graph, scene=str(scene)).verdict == "ok"


# --- a graph refused for a value, still checked -------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, None, 2.5, ["cap"], {"name": "cap"}, "  "])
def test_a_param_refused_for_its_type_is_reported_once_and_breaks_no_later_check(bad):
    # The checks that run on a refused graph read its names only: the refused value is neither read (a crash on
    # a number) nor reported missing as well.
    broken = changed(cap_to_hatch(), lambda g: g["plan"][2].update(object=bad))
    assert [(code, path) for code, path, _ in issues(check(broken))] == [("type", "/plan/2/object")]
