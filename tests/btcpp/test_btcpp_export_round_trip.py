"""Exported and read back: any plan written as BehaviorTree.CPP XML and loaded by the btcpp dialect makes the same
calls in the same order as the plan itself, on the sim (its args back to their JSON types through the model)."""
from __future__ import annotations

import json

import pytest

import bt_exec
from bt_exec.compilers.btcpp.export import plan_to_btcpp
from bt_exec.compilers.dialects import CheckContext
from command_line import REPO
from rtdl_plans import do, envelope, par, seq

EXAMPLES = REPO / "examples"
SCENE = EXAMPLES / "qwen3" / "scene.json"


def calls(source, script: dict | None = None, scene=None) -> tuple[list[tuple[str, dict]], str]:
    """The calls ``source`` makes on the sim (cap and args, in the order they started), and its outcome."""
    sim = bt_exec.SimBackend.in_scene(script, None, scene)
    executor = bt_exec.Executor(backend=sim, scene=scene)
    try:
        answer = executor.submit(source)
        assert answer["accepted"], answer
        record = executor.run_until_complete(answer["plan_id"], timeout=30)
    finally:
        executor.close()
    return [(call.cap, call.args) for call in sim.calls], record["outcome"]


def exported(source, **options) -> str:
    xml = plan_to_btcpp(bt_exec.load(source), **options)
    assert bt_exec.load(xml, dialect="btcpp").dialect == "btcpp"
    return xml


RTDL = envelope(seq(
    do("look", "camera.capture", {"resolution": 3, "zoom": 1.5, "color": True, "tags": ["a", "b"],
                                  "region": {"x": [0, 1], "frame": None}, "label": "json:kept as text"}),
    par(do("left", "arm.move", {"side": "left", "speed": 2 ** 40}), do("right", "arm.move", {"side": "right"}),
        seq(description="nothing")),
    do("report", "speaker.say", {"text": "done; all {fine}"}), description="look, move, report"))


@pytest.mark.parametrize("script", [None, {"caps": {"arm.move": {"outcome": ["failure", "success"]}}}],
                         ids=["all succeed", "an arm fails"])
def test_an_rtdl_plan_read_back_makes_the_same_calls(script):
    original = calls(RTDL, script)
    assert calls(exported(RTDL), script) == original
    assert len(original[0]) == (4 if script is None else 3)  # a failed parallel stops the sequence


@pytest.mark.parametrize("script", [
    None,
    {"caps": {"grab": {"outcome": ["grasp_failed", "success"]}, "inspect_state": {"outcome": "empty"}}},
    {"caps": {"transfer": {"outcome": "collision"}}},
    {"caps": {"grab": {"outcome": ["success", "grasp_failed"]}, "inspect_state": {"outcome": "unknown"}}},
], ids=["straight", "retried after an inspection", "collision stops", "to the operator"])
def test_a_step_graph_read_back_makes_the_same_calls_along_its_transitions(script):
    scene = bt_exec.Scene.from_file(SCENE)
    graph = (EXAMPLES / "qwen3" / "cap_to_hatch.json").read_bytes()
    original = calls(graph, {"default": {"duration_s": 0.0}, **(script or {})}, scene)
    xml = exported(graph, context=CheckContext())  # grant, the default skill catalog: pick is grab
    assert calls(xml, {"default": {"duration_s": 0.0}, **(script or {})}) == original
    assert original[1] == ("succeeded" if script is None or "empty" in json.dumps(script) else "failed")


@pytest.mark.parametrize("name, script_name", [("fetch_cup", "fetch_cup_sim"), ("btgenbot_v3", None),
                                               ("nav2_navigate", "nav2_sim")])
def test_a_bt_xml_plan_read_back_makes_the_same_calls(name, script_name):
    source = (EXAMPLES / "btcpp" / f"{name}.xml").read_bytes()
    script = json.loads((EXAMPLES / "btcpp" / f"{script_name}.json").read_text()) if script_name else None
    original = calls(source, script)
    assert original[0]
    assert calls(exported(source), script) == original
