"""The iiwa profile without ROS: its conversions on messages made from the stand-in .srv files, the
readiness gate, the parameters against config/iiwa.yaml and docs/iiwa.md, and launch/iiwa.launch.py
checked statically (launch and launch_ros are not installable here)."""
import ast
import json
import pathlib
import subprocess
import sys
from types import SimpleNamespace

import pytest
from interface_messages import String, message_class

from bt_exec.errors import ConfigError, ControlError, PlanError
from bt_exec.ros.iiwa import convert, params
from bt_exec.ros.iiwa.gate import ReadinessGate

REPO = pathlib.Path(__file__).resolve().parents[1]
STANDINS = REPO / "tests" / "ros" / "iiwa_interfaces"
LAUNCH = REPO / "launch" / "iiwa.launch.py"


def service(package: str, name: str) -> SimpleNamespace:
    request, response = (STANDINS / package / "srv" / f"{name}.srv").read_text().split("\n---\n")
    return SimpleNamespace(Request=message_class(f"{name}.Request", request),
                           Response=message_class(f"{name}.Response", response))


SetString = service("webots_ros2_msgs", "SetString")
GetRunStatus = service("iiwa_msgs", "GetRunStatus")
SCENE = {"objects": ["cap", "vacuum"], "targets": ["work", "vacuum_socket", "cap_storage"],
         "state": {"vacuum": "vacuum_socket", "cap": "cap_storage"}, "holding": None}


def test_the_stand_ins_have_the_cells_service_shapes():
    assert SetString.Request.FIELDS == {"value": ("string", "")}
    assert SetString.Response.FIELDS == {"success": ("bool", False)}
    assert GetRunStatus.Request.FIELDS == {"run_id": ("string", "")}
    assert GetRunStatus.Response.FIELDS == {"found": ("bool", False), "status_json": ("string", "")}


# --- submit and cancel ---------------------------------------------------------------

def test_a_submit_envelope_is_read_and_kept_as_text():
    text = json.dumps({"run_id": "r1", "scene_revision": 3, "response": "{\"status\": \"ok\"}"})
    submitted = convert.msg_to_submit(SetString.Request(value=text), 1000)
    assert (submitted.run_id, submitted.scene_revision, submitted.text) == ("r1", 3, text)


@pytest.mark.parametrize("value, code, path", [
    ("not json", "bad_envelope", ""),
    ("[1, 2]", "bad_envelope", ""),
    ("[" * 100_000, "bad_envelope", ""),
    (json.dumps({"scene_revision": 1, "response": {}}), "bad_run_id", "/run_id"),
    (json.dumps({"run_id": "x" * 300, "scene_revision": 1, "response": {}}), "bad_run_id", "/run_id"),
    (json.dumps({"run_id": "r", "response": {}}), "revision_missing", "/scene_revision"),
    (json.dumps({"run_id": "r", "scene_revision": "7", "response": {}}), "type", "/scene_revision"),
    (json.dumps({"run_id": "r", "scene_revision": -1, "response": {}}), "type", "/scene_revision"),
    (json.dumps({"run_id": "r", "scene_revision": 1}), "missing", "/response"),
])
def test_a_bad_submit_envelope_names_where_it_is_wrong(value, code, path):
    with pytest.raises(PlanError) as caught:
        convert.msg_to_submit(SetString.Request(value=value), 1_000_000)
    assert (caught.value.issues[0].code, caught.value.issues[0].path) == (code, path)


def test_a_submit_over_max_input_bytes_is_refused_before_it_is_parsed():
    value = json.dumps({"run_id": "r", "scene_revision": 1, "response": "é" * 600})
    with pytest.raises(PlanError, match="larger than 1000 bytes"):
        convert.msg_to_submit(SetString.Request(value=value), 1000)


def test_cancel_takes_a_run_id():
    assert convert.msg_to_run_id(SetString.Request(value=" r1 ")) == "r1"
    with pytest.raises(ControlError, match="run_id must be a non-empty string"):
        convert.msg_to_run_id(SetString.Request(value="  "))
    assert convert.success_to_msg(True, SetString.Response()).success is True


# --- the scene -------------------------------------------------------------------------

def envelope(**changes) -> str:
    doc = {"experiment_id": 20, "state_version": 5, "scene_revision": 7, "timestamp": 1.5,
           "scene_json": json.dumps(SCENE)}
    doc.update(changes)
    return json.dumps(doc)


def test_a_scene_envelope_gives_the_scene_at_its_revision():
    for scene_json in (json.dumps(SCENE), SCENE, {**SCENE, "scene_revision": 7}):
        taken = convert.text_to_scene_envelope(envelope(scene_json=scene_json), 10_000, experiment_id=20)
        assert taken.revision == 7 and taken.scene.objects == {"cap", "vacuum"}
        assert taken.scene.state == SCENE["state"] and (taken.experiment_id, taken.state_version) == (20, 5)


@pytest.mark.parametrize("changes, words", [
    ({"scene_revision": None}, "scene_revision must be an integer"),
    ({"scene_json": 5}, "scene_json must be the scene"),
    ({"scene_json": "{oops"}, "scene_json is not JSON"),
    ({"scene_json": {**SCENE, "scene_revision": 6}}, "scene_json says scene_revision 6, its envelope 7"),
    ({"scene_json": {"objects": ["cap"]}}, "targets"),
    ({"experiment_id": 3}, "this node takes experiment 20"),
])
def test_a_bad_scene_envelope_says_what_is_wrong(changes, words):
    with pytest.raises(ConfigError, match="scene envelope") as caught:
        convert.text_to_scene_envelope(envelope(**changes), 10_000, experiment_id=20)
    assert words in str(caught.value)


def test_get_scene_answers():
    ok = SimpleNamespace(success=True, message=envelope())
    assert convert.trigger_to_scene_text(ok) == envelope()
    assert convert.trigger_to_scene_text(SimpleNamespace(success=False, message="not fresh")) is None


# --- status ----------------------------------------------------------------------------

def test_run_status_of_a_refusal_a_live_run_and_a_finished_one():
    refused = {"accepted": False, "verdict": "invalid", "message": "no", "plan_id": None,
               "issues": [{"code": "stale_revision"}]}
    assert convert.run_status("r", refused)["issues"] == [{"code": "stale_revision"}]
    accepted = {"accepted": True, "verdict": "ok", "message": "yes", "plan_id": "4", "issues": []}
    state = {"holding": "cap", "patron": ["vacuum"], "locations": {}}
    live = {"ops": [{"op_id": "s1", "state": "succeeded"}, {"op_id": "s2", "state": "running"}],
            "path": ["s1"], "state": state}
    status = convert.run_status("r", accepted, live=live)
    assert (status["running"], status["current_step"], status["holding"], status["patron"]) == \
        (True, "s2", "cap", ["vacuum"])
    final = {"ops": [], "path": ["s1", "stop"], "terminal": "stop", "terminal_reason": "cancelled",
             "outcome": "cancelled", "state": state}
    status = convert.run_status("r", accepted, result=final)
    assert (status["running"], status["terminal"], status["terminal_reason"], status["path"]) == \
        (False, "stop", "cancelled", ["s1", "stop"])
    response = convert.run_status_to_msg(status, GetRunStatus.Response())
    assert response.found is True and json.loads(response.status_json)["run_id"] == "r"
    response = convert.run_status_to_msg(None, GetRunStatus.Response())
    assert response.found is False and json.loads(response.status_json) == {"error": "unknown run_id"}


def test_status_messages_are_ascii_json_with_the_run_id():
    msg = convert.status_to_msg(convert.event_with_run_id({"event": "node_state", "plan_id": "1",
                                                           "description": "grab(\ud800)"}, "r1"), String())
    assert msg.data.isascii() and json.loads(msg.data)["run_id"] == "r1"
    assert convert.event_with_run_id({"event": "plan_started", "run_id": "r2"}, None)["run_id"] == "r2"


# --- readiness ---------------------------------------------------------------------------

def test_ready_after_the_delay_since_both_flag_and_scene():
    gate = ReadinessGate(delay_s=3.0)
    assert "scene_ready" in gate.not_ready_reason(0.0)
    gate.set_flag(True, 1.0)
    assert "no scene" in gate.not_ready_reason(5.0)
    gate.scene_received(6.0)
    assert "ready_delay_s" in gate.not_ready_reason(8.9)
    assert gate.not_ready_reason(9.0) is None and gate.stop_reason(9.0) is None
    gate.scene_received(9.5)  # a newer scene does not restart the wait
    assert gate.not_ready_reason(9.6) is None
    gate.set_flag(False, 10.0)
    assert gate.stop_reason(10.0) == "the cell's scene_ready turned false"
    gate.set_flag(True, 11.0)  # the wait starts again
    assert gate.not_ready_reason(13.0) is not None and gate.not_ready_reason(14.0) is None


def test_a_scene_goes_stale_by_age_only_when_asked():
    gate = ReadinessGate(delay_s=0.0, max_age_s=2.0)
    gate.set_flag(True, 0.0)
    gate.scene_received(0.0)
    assert gate.not_ready_reason(2.0) is None
    assert "stale" in gate.not_ready_reason(2.5) and "stale" in gate.stop_reason(2.5)
    gate.scene_received(3.0)
    assert gate.not_ready_reason(3.0) is None
    never = ReadinessGate(delay_s=0.0)
    never.set_flag(True, 0.0)
    never.scene_received(0.0)
    assert never.not_ready_reason(1e6) is None


# --- parameters, config, docs ------------------------------------------------------------

def test_config_matches_the_parameters():
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    document = yaml.safe_load((REPO / "config" / "iiwa.yaml").read_text())
    values = document["/**"]["ros__parameters"]
    assert list(values) == list(params.PARAMETER_NAMES)
    for param in params.PARAMETERS:
        assert values[param.name] == param.default and type(values[param.name]) is type(param.default), param.name
    assert params.check(values) == []
    assert values["ready_delay_s"] == 3.0 and values["skill_catalog"] == "grant"
    assert values["scene_topic"] == "/iiwa_scene_context/scene_json"
    assert values["scene_service"] == "/iiwa_scene_context/get_scene"
    assert values["scene_ready_topic"] == "/iiwa_experement/scene_ready"


@pytest.mark.parametrize("name, value, words", [
    ("experiment_id", 21, "experiment_id must be 0 (any) or 1..20"),
    ("ready_delay_s", -1.0, "ready_delay_s must be 0.0 or a positive number"),
    ("backend", "ros", "backend must be one of sim, moveit, physics"),
    ("scene_ready_durability", "latched", "scene_ready_durability must be one of"),
    ("scene_topic", " ", "scene_topic must not be empty"),
    ("max_steps", 0, "max_steps must be an integer >= 1"),
    ("physics_speed", -1.0, "physics_speed must be 0.0 (as fast as the machine goes) or a positive number"),
    ("joint_states_hz", 0.0, "joint_states_hz must be a positive number"),
])
def test_bad_parameters_are_named(name, value, words):
    assert any(words in problem for problem in params.check({**params.DEFAULTS, name: value}))


def test_docs_list_every_parameter_and_the_cells_names():
    text = (REPO / "docs" / "iiwa.md").read_text()
    for name in params.PARAMETER_NAMES:
        assert f"`{name}`" in text, name
    for name in ("webots_ros2_msgs/srv/SetString", "iiwa_msgs/srv/GetRunStatus", "/iiwa_scene_context/scene_json",
                 "/iiwa_scene_context/get_scene", "/iiwa_experement/scene_ready", "~/plan", "~/status"):
        assert name in text, name


# --- the launch file ---------------------------------------------------------------------

def launch_tree() -> ast.Module:
    return ast.parse(LAUNCH.read_text(), filename=str(LAUNCH))


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and (getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name)]


def keyword(call: ast.Call, name: str):
    for kw in call.keywords:
        if kw.arg == name:
            return ast.literal_eval(kw.value) if isinstance(kw.value, (ast.Constant, ast.List)) else kw.value
    return None


def test_launch_starts_the_cells_node_alone_with_its_config():
    tree = launch_tree()
    compile(LAUNCH.read_text(), str(LAUNCH), "exec")
    assert "generate_launch_description" in [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    nodes = calls(tree, "Node")
    assert len(nodes) == 1
    assert (keyword(nodes[0], "package"), keyword(nodes[0], "executable"), keyword(nodes[0], "name")) == \
        ("bt_exec", "bt_exec_iiwa_node", params.NODE_NAME)
    assert not calls(tree, "ExecuteProcess") and "web_port" not in LAUNCH.read_text()  # no second web server
    arguments = {ast.literal_eval(call.args[0]): call for call in calls(tree, "DeclareLaunchArgument")}
    assert {"experiment_id", "params_file", "backend", "use_sim_time", "sim_script"} <= set(arguments)
    assert keyword(arguments["backend"], "choices") == ["auto", "sim", "moveit", "physics"]
    assert keyword(arguments["use_sim_time"], "choices") == ["true", "false"]
    text = LAUNCH.read_text()
    assert '"iiwa.yaml"' in text and '"skill_catalog": "grant"' in text and 'find_spec("moveit")' in text


def test_setup_installs_the_node_and_the_package():
    setup = (REPO / "setup.py").read_text()
    assert '"bt_exec_iiwa_node = bt_exec.ros.iiwa.entry:iiwa_node_main"' in setup
    assert 'f"{PACKAGE}.ros.iiwa"' in setup


# --- without ROS -------------------------------------------------------------------------

def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)


def test_the_pure_parts_import_no_ros():
    result = run_python("import sys, bt_exec.ros.iiwa.convert, bt_exec.ros.iiwa.params, bt_exec.ros.iiwa.gate, "
                        "bt_exec.ros.iiwa.entry; print(sorted(m for m in sys.modules if m.split('.')[0] in "
                        "('rclpy', 'std_msgs', 'webots_ros2_msgs', 'iiwa_msgs')))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_console_script_without_ros_says_so_in_one_line():
    result = run_python("import sys; sys.modules['rclpy'] = None; sys.argv = ['bt_exec_iiwa_node']\n"
                        "from bt_exec.ros.iiwa.entry import iiwa_node_main\nsys.exit(iiwa_node_main())")
    assert result.returncode == 2
    assert result.stderr.startswith("bt_exec_iiwa_node: ROS 2 is not set up here")
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
