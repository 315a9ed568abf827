"""One verdict for one input on every entry point: ``bt_exec.validate``, ``Executor.validate_plan``,
``Executor.submit``, ``bt-exec validate`` and ``bt-exec compile`` agree, for the same input and options; and
the shipped examples agree with each other and with the docs."""
import json
import pathlib

import pytest

import bt_exec
from bt_exec import cli
from qwen3_graphs import cap_to_hatch, cap_without_vacuum, envelope as qwen3_envelope, graph, scene, step
from rtdl_plans import do, envelope, seq

REPO = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

INPUTS = {
    "qwen3 ok": qwen3_envelope(cap_to_hatch()),
    "qwen3 replan_required": cap_without_vacuum(),
    "qwen3 broken shape": graph([step("s1", "grabb", "vacuum")],
                                {"s1": {"success": "nowhere", "grasp_failed": "replan_required"}}),
    "qwen3 blocked": graph([], {}, entry="s1", status="blocked", reason="no cap in the scene"),
    "rtdl ok": envelope(seq(do())),
    "rtdl invalid": seq({"op": "do", "cap": "nav.stop"}),
    "rtdl control": {"op": "cancel_all"},
}


def cli_code(capsys, *args) -> tuple[int, str]:
    code = cli.main([str(arg) for arg in args])
    out, _err = capsys.readouterr()
    return code, out


@pytest.mark.parametrize("with_scene", [True, False], ids=["scene", "no scene"])
@pytest.mark.parametrize("name", INPUTS)
def test_every_entry_point_gives_one_verdict(tmp_path, capsys, name, with_scene):
    path, scene_file = tmp_path / "input.json", tmp_path / "scene.json"
    path.write_text(json.dumps(INPUTS[name]))
    scene_file.write_text(json.dumps(scene()))
    the_scene = bt_exec.Scene.from_file(scene_file) if with_scene else None
    verdict = bt_exec.validate(path, scene=the_scene).verdict
    executor = bt_exec.Executor(backend=bt_exec.SimBackend(), scene=the_scene)
    try:
        assert executor.validate_plan(path)["verdict"] == verdict
        answer = executor.submit(path)
        assert answer["verdict"] == verdict and answer["accepted"] == (verdict in ("ok", "control"))
    finally:
        executor.close()
    options = ["--scene", scene_file] if with_scene else []
    code, out = cli_code(capsys, "validate", path, "--json", *options)
    assert json.loads(out)["verdict"] == verdict
    assert code == (0 if verdict in ("ok", "control") else 1)
    code, _out = cli_code(capsys, "compile", path, *options)
    assert code == (0 if verdict == "ok" else 1)  # a control request is not a plan to compile either


def test_a_broken_input_read_as_the_other_dialect_is_refused_not_a_catalog_error():
    """The fuzzer's find: an RTDL catalog, and an input that load reads in part as a step graph. The step
    graph's checks cannot take that catalog; the input is still refused with its own issues."""
    catalog = bt_exec.CapabilityCatalog({"nav.go": {}})
    report = bt_exec.validate({"status": None}, catalog=catalog)
    assert report.verdict == "invalid"
    assert {issue.path for issue in report.issues} >= {"/status", "/plan", "/transitions", "/entry"}


def test_a_qwen3_graph_needs_a_scene_everywhere():
    report = bt_exec.validate(qwen3_envelope(cap_to_hatch()))
    assert (report.verdict, [issue.code for issue in report.issues]) == ("invalid", ["no_scene"])


# --- the shipped examples -----------------------------------------------------------------------------------

RTDL_PLANS = sorted(path for path in (EXAMPLES / "rtdl").iterdir()
                    if path.name not in ("catalog.json", "bad.json"))  # bad.json: the docs' refused plan


@pytest.mark.parametrize("path", RTDL_PLANS, ids=lambda path: path.name)
def test_every_shipped_rtdl_plan_keeps_to_the_shipped_catalog(path):
    catalog = bt_exec.CapabilityCatalog.from_file(EXAMPLES / "rtdl" / "catalog.json")
    report = bt_exec.validate(path, catalog=catalog)
    assert report.ok, [str(issue) for issue in report.issues]


def test_the_shipped_bad_plan_is_refused():
    assert bt_exec.validate(EXAMPLES / "rtdl" / "bad.json").verdict == "invalid"


def test_the_shipped_qwen3_graphs_get_the_verdicts_the_docs_give_them():
    the_scene = EXAMPLES / "qwen3" / "scene.json"
    assert bt_exec.validate(EXAMPLES / "qwen3" / "cap_to_hatch.json", scene=the_scene).verdict == "ok"
    assert bt_exec.validate(EXAMPLES / "qwen3" / "cap_without_vacuum.json", scene=the_scene).verdict == \
        "replan_required"


@pytest.mark.parametrize("path", sorted((EXAMPLES / "sim").iterdir()), ids=lambda path: path.name)
def test_every_shipped_sim_script_loads(path):
    assert isinstance(bt_exec.SimBackend(script=path), bt_exec.SimBackend)  # ConfigError if it did not
