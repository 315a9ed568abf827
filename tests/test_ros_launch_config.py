"""The launch file and config/bt_exec.yaml, checked statically (launch and launch_ros are not installable here)."""
import ast
import pathlib
import re

import pytest

from bt_exec.errors import ConfigError
from bt_exec.ros import launch_config, params

REPO = pathlib.Path(__file__).resolve().parents[1]
LAUNCH = REPO / "launch" / "bt_exec.launch.py"
FLEET_LAUNCH = REPO / "launch" / "fleet.launch.py"
IIWA_LAUNCH = REPO / "launch" / "iiwa.launch.py"
CONFIG = REPO / "config" / "bt_exec.yaml"


def launch_tree(path: pathlib.Path = LAUNCH) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def declared(tree: ast.Module) -> dict[str, ast.Call]:
    return {ast.literal_eval(call.args[0]): call for call in calls(tree, "DeclareLaunchArgument")}


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and (getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name)]


def keyword(call: ast.Call, name: str):
    for kw in call.keywords:
        if kw.arg == name:
            return ast.literal_eval(kw.value) if isinstance(kw.value, (ast.Constant, ast.List)) else kw.value
    return None


def test_launch_file_defines_generate_launch_description():
    tree = launch_tree()
    functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert "generate_launch_description" in functions
    compile(LAUNCH.read_text(), str(LAUNCH), "exec")


def test_launch_arguments():
    arguments = {ast.literal_eval(call.args[0]): call for call in calls(launch_tree(), "DeclareLaunchArgument")}
    assert {"namespace", "sim_robot", "viewer", "terminal", "backend", "params_file", "web_port", "web_host",
            "sim_script"} <= set(arguments)
    assert keyword(arguments["web_host"], "default_value") == params.DEFAULTS["web_host"]
    assert keyword(arguments["sim_robot"], "choices") == ["true", "false"]
    assert keyword(arguments["sim_robot"], "default_value") == "false"
    assert keyword(arguments["namespace"], "default_value") == ""
    assert launch_config.BACKENDS == params.BACKENDS
    assert set(launch_config.VIEWERS) == {"none", "web", "py_trees", "watcher"}
    text = LAUNCH.read_text()
    assert 'choices=list(launch_config.VIEWERS)' in text and 'choices=list(launch_config.BACKENDS)' in text


def test_launch_starts_the_node_and_the_sim_robot_in_the_namespace():
    tree = launch_tree()
    nodes = calls(tree, "Node")
    assert {keyword(call, "executable") for call in nodes} == {"bt_exec_node", "bt_exec_sim_robot"}
    for call in nodes:
        assert keyword(call, "package") == "bt_exec"
        assert isinstance(keyword(call, "namespace"), ast.Name) and keyword(call, "namespace").id == "namespace"
    (process,) = calls(tree, "ExecuteProcess")
    assert keyword(process, "cmd").id == "viewer" and keyword(process, "emulate_tty") is True
    (opaque,) = calls(tree, "OpaqueFunction")
    assert keyword(opaque, "function").id == "start"  # every choice made once the arguments are known
    text = LAUNCH.read_text()
    assert '"bt_exec.yaml"' in text and '"config"' in text


def test_contract_iiwa_starts_the_cells_launch_file_instead():
    tree = launch_tree()
    arguments = declared(tree)
    assert keyword(arguments["contract"], "default_value") == "bt_exec"
    assert launch_config.CONTRACTS == ("bt_exec", "iiwa")
    assert "choices=list(launch_config.CONTRACTS)" in LAUNCH.read_text()
    # experiment_id keeps the cell's launch file's default and is the one argument it is given
    assert keyword(arguments["experiment_id"], "default_value") == \
        keyword(declared(launch_tree(IIWA_LAUNCH))["experiment_id"], "default_value")
    (iiwa,) = calls(tree, "EqualsSubstitution")
    assert ast.literal_eval(iiwa.args[0].args[0]) == "contract" and ast.literal_eval(iiwa.args[1]) == "iiwa"
    groups = {keyword(group, "condition").func.id: group for group in calls(tree, "GroupAction")}
    assert set(groups) == {"UnlessCondition", "IfCondition"}
    for group in groups.values():
        assert keyword(group, "condition").args[0].id == "iiwa"
    (own,) = groups["UnlessCondition"].args[0].elts  # today's actions only without the cell's contract
    assert own.func.id == "OpaqueFunction" and keyword(own, "function").id == "start"
    cell = groups["IfCondition"]
    assert keyword(cell, "forwarding") is False  # this file's backend, params_file ... never reach it
    configurations = keyword(cell, "launch_configurations")
    assert [ast.literal_eval(key) for key in configurations.keys] == ["experiment_id"]
    assert ast.literal_eval(configurations.values[0].args[0]) == "experiment_id"
    (include,) = calls(cell, "IncludeLaunchDescription")
    path = include.args[0].args[0]
    assert [ast.literal_eval(part) for part in path.args[1:]] == ["launch", "iiwa.launch.py"]
    assert IIWA_LAUNCH.exists()


def test_the_namespace_is_checked_and_normalised():
    assert launch_config.node_namespace("") == "" and launch_config.node_namespace(" / ") == ""
    assert launch_config.node_namespace("robot1") == "/robot1"
    assert launch_config.node_namespace("/fleet/robot_2/") == "/fleet/robot_2"
    for bad in ("1robot", "robot-1", "a b", "x__y"):
        with pytest.raises(ConfigError, match="namespace:="):
            launch_config.node_namespace(bad)


def test_sim_script_reaches_the_simulator_the_backend_uses():
    assert launch_config.node_parameters("sim", "/s.json") == {"backend": "sim", "sim_script": "/s.json"}
    assert launch_config.node_parameters("sim", "") == {"backend": "sim"}  # the params file's stays
    assert launch_config.node_parameters("ros", "/s.json") == {"backend": "ros"}  # the sim robot's, not the node's
    assert launch_config.sim_robot_parameters("/s.json") == {"sim_script": "/s.json"}
    assert launch_config.sim_robot_wanted("true", "ros") == (True, None)
    assert launch_config.sim_robot_wanted("false", "ros") == (False, None)
    started, note = launch_config.sim_robot_wanted("true", "sim")
    assert started and "only backend:=ros" in note
    with pytest.raises(ConfigError, match="backend:="):
        launch_config.node_parameters("nope", "")
    assert launch_config.web_parameters("8081", "0.0.0.0") == {"web_port": 8081, "web_host": "0.0.0.0"}
    for bad in ("http", "70000"):
        with pytest.raises(ConfigError, match="web_port:="):
            launch_config.web_parameters(bad, "127.0.0.1")


def test_viewers():
    installed = {"py-trees-tree-watcher": "/usr/bin/py-trees-tree-watcher",
                 "py-trees-tree-viewer": "/usr/bin/py-trees-tree-viewer", "xterm": "/usr/bin/xterm"}
    which = installed.get
    assert launch_config.viewer_command("none", "/robot1", which=which) == (None, None)
    assert launch_config.viewer_command("web", "/robot1", which=which) == (None, None)
    attached = ["/usr/bin/python3", "-m", "bt_exec.ros.attached_watcher"]  # waits for the node, restarts
    assert launch_config.viewer_command("watcher", "/robot1", which=which, python="/usr/bin/python3") == (
        [*attached, "/robot1/bt_exec/snapshot_streams/", "py-trees-tree-watcher"], None)
    assert launch_config.viewer_command("watcher", "", "xterm -e", which=which, python="/usr/bin/python3") == (
        ["xterm", "-e", *attached, "/bt_exec/snapshot_streams/", "py-trees-tree-watcher"], None)
    assert launch_config.viewer_command("py_trees", "/robot1", which=which, python="/usr/bin/python3") == (
        ["/usr/bin/python3", "-m", "bt_exec.ros.attached_watcher", "/robot1/bt_exec/snapshot_streams/",
         "py-trees-tree-viewer"], None)
    for viewer, package in (("py_trees", "ros-jazzy-py-trees-ros-viewer"), ("watcher", "ros-jazzy-py-trees-ros")):
        command, message = launch_config.viewer_command(viewer, "", which=lambda _name: None)
        assert command is None and "is not installed here" in message and package in message
    with pytest.raises(ConfigError, match="terminal:="):
        launch_config.viewer_command("watcher", "", "konsole -e", which=which)
    with pytest.raises(ConfigError, match="viewer:="):
        launch_config.viewer_command("rviz", "", which=which)


def test_the_watcher_hint_picks_this_nodes_tree_only():
    services = ["/robot1/bt_exec/snapshot_streams/open", "/robot10/bt_exec/snapshot_streams/open"]
    hint = launch_config.snapshot_streams_hint(launch_config.node_namespace("robot1"))
    assert [name for name in services if hint in name] == services[:1]  # as the watcher matches it


def test_fleet_robots_by_name_or_count():
    assert launch_config.fleet_namespaces("", "3") == ["/robot1", "/robot2", "/robot3"]
    assert launch_config.fleet_namespaces("arm, /cart/", "3") == ["/arm", "/cart"]  # robots wins over count
    assert launch_config.fleet_namespaces("fleet/a,fleet/b", "") == ["/fleet/a", "/fleet/b"]
    for robots, count, where in (("", "0", "count:="), ("", "two", "count:="), ("", "65", "count:="),
                                 ("a,,b", "2", "an empty name"), ("a,/a/", "2", "named twice"),
                                 ("1robot", "2", "namespace:=")):
        with pytest.raises(ConfigError, match=where):
            launch_config.fleet_namespaces(robots, count)
    many = ",".join(f"r{index}" for index in range(launch_config.MAX_FLEET + 1))
    with pytest.raises(ConfigError, match="at most"):
        launch_config.fleet_namespaces(many, "")


def test_fleet_nodes_each_robot_with_its_sim_robot():
    nodes = launch_config.fleet_nodes(["/robot1", "/robot2"], "ros", "/s.json", "/p.yaml")
    assert nodes == [
        {"executable": "bt_exec_node", "name": "bt_exec", "namespace": "/robot1",
         "parameters": ["/p.yaml", {"backend": "ros"}]},
        {"executable": "bt_exec_sim_robot", "name": "bt_exec_sim_robot", "namespace": "/robot1",
         "parameters": [{"sim_script": "/s.json"}]},
        {"executable": "bt_exec_node", "name": "bt_exec", "namespace": "/robot2",
         "parameters": ["/p.yaml", {"backend": "ros"}]},
        {"executable": "bt_exec_sim_robot", "name": "bt_exec_sim_robot", "namespace": "/robot2",
         "parameters": [{"sim_script": "/s.json"}]}]
    embedded = launch_config.fleet_nodes(["/a"], "sim", "/s.json", "/p.yaml")
    assert embedded == [{"executable": "bt_exec_node", "name": "bt_exec", "namespace": "/a",
                         "parameters": ["/p.yaml", {"backend": "sim", "sim_script": "/s.json"}]}]
    with pytest.raises(ConfigError, match="backend:='moveit'"):
        launch_config.fleet_nodes(["/a"], "moveit", "", "/p.yaml")


def test_fleet_launch_file():
    tree = launch_tree(FLEET_LAUNCH)
    compile(FLEET_LAUNCH.read_text(), str(FLEET_LAUNCH), "exec")
    assert "generate_launch_description" in [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    arguments = declared(tree)
    assert set(arguments) == {"count", "robots", "backend", "sim_script", "params_file", "console_port",
                              "console_host"}
    assert keyword(arguments["console_port"], "default_value") == ""  # no console unless asked
    assert keyword(arguments["backend"], "choices") == ["ros", "sim"]
    assert keyword(arguments["backend"], "default_value") == "ros"
    launch_config.fleet_namespaces(keyword(arguments["robots"], "default_value"),
                                   keyword(arguments["count"], "default_value"))  # the defaults are a fleet
    (opaque,) = calls(tree, "OpaqueFunction")
    assert keyword(opaque, "function").id == "start"
    (node,) = calls(tree, "Node")  # every robot's nodes as launch_config.fleet_nodes describes them
    assert keyword(node, "package") == "bt_exec" and [kw.arg for kw in node.keywords][-1] is None
    text = FLEET_LAUNCH.read_text()
    assert "launch_config.fleet_namespaces(arg(\"robots\"), arg(\"count\"))" in text
    assert "launch_config.fleet_console_node(arg(\"console_port\"), arg(\"console_host\"))" in text
    assert "except ConfigError" in text and "Shutdown(" in text


def test_setup_installs_the_launch_file_config_and_executables():
    setup = (REPO / "setup.py").read_text()
    assert 'share("launch", "*.launch.py")' in setup and 'share("config", "*.yaml")' in setup
    assert '"bt_exec_node = bt_exec.cli.ros_commands:node_main"' in setup
    assert '"bt_exec_sim_robot = bt_exec.cli.ros_commands:sim_robot_main"' in setup
    assert 'f"{PACKAGE}.ros"' in setup
    assert "install_scripts=$base/lib/bt_exec" in (REPO / "setup.cfg").read_text()


def test_config_matches_the_node_parameters():
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    document = yaml.safe_load(CONFIG.read_text())
    assert list(document) == ["/**"] and list(document["/**"]) == ["ros__parameters"]
    values = document["/**"]["ros__parameters"]
    assert list(values) == list(params.PARAMETER_NAMES)
    for param in params.PARAMETERS:
        assert values[param.name] == param.default and type(values[param.name]) is type(param.default), param.name
    assert params.check(values) == []


@pytest.mark.parametrize("name, value, words", [
    ("physics_speed", float("inf"), "physics_speed must be 0.0 (as fast as the machine goes) or a positive number"),
    ("joint_states_hz", -30.0, "joint_states_hz must be a positive number"),
])
def test_bad_physics_parameters_are_named(name, value, words):
    assert any(words in problem for problem in params.check({**params.DEFAULTS, name: value}))
    assert params.check({**params.DEFAULTS, "backend": "physics", "physics_speed": 0.0}) == []


def test_docs_list_every_parameter():
    docs = (REPO / "docs" / "ros.md").read_text()
    for name in params.PARAMETER_NAMES:
        assert re.search(rf"`{name}`", docs), name


def test_fleet_console_is_one_bt_exec_fleet_process_when_asked():
    assert launch_config.fleet_console_node("", "127.0.0.1") is None
    assert launch_config.fleet_console_node("8080", "127.0.0.1") == {
        "executable": "bt-exec", "arguments": ["fleet", "--web", "8080", "--web-host", "127.0.0.1"]}
    for port in ("http", "70000", "-1"):
        with pytest.raises(ConfigError, match="web_port:="):
            launch_config.fleet_console_node(port, "127.0.0.1")
