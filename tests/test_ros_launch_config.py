"""The launch file and config/bt_exec.yaml, checked statically (launch and launch_ros are not installable here)."""
import ast
import pathlib
import re

import pytest

from bt_exec.ros import params

REPO = pathlib.Path(__file__).resolve().parents[1]
LAUNCH = REPO / "launch" / "bt_exec.launch.py"
CONFIG = REPO / "config" / "bt_exec.yaml"


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


def test_launch_file_defines_generate_launch_description():
    tree = launch_tree()
    functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert "generate_launch_description" in functions
    compile(LAUNCH.read_text(), str(LAUNCH), "exec")


def test_launch_arguments():
    arguments = {ast.literal_eval(call.args[0]): call for call in calls(launch_tree(), "DeclareLaunchArgument")}
    assert {"sim_robot", "viewer", "backend", "params_file", "web_port", "web_host", "sim_script"} <= set(arguments)
    assert keyword(arguments["web_host"], "default_value") == params.DEFAULTS["web_host"]
    assert keyword(arguments["sim_robot"], "choices") == ["true", "false"]
    assert keyword(arguments["sim_robot"], "default_value") == "false"
    assert keyword(arguments["viewer"], "choices") == ["py_trees", "web", "none"]
    assert keyword(arguments["backend"], "choices") == list(params.BACKENDS)


def test_launch_starts_the_node_the_sim_robot_and_the_viewer():
    tree = launch_tree()
    nodes = calls(tree, "Node")
    executables = {keyword(call, "executable") for call in nodes if isinstance(keyword(call, "executable"), str)}
    assert {"bt_exec_node", "bt_exec_sim_robot"} <= executables
    assert all(keyword(call, "package") == "bt_exec" for call in nodes if keyword(call, "package") is not None)
    processes = calls(tree, "ExecuteProcess")
    assert [keyword(call, "cmd") for call in processes] == [["py-trees-tree-viewer"]]
    text = LAUNCH.read_text()
    assert '"web_port"' in text and '"web_host"' in text and '"bt_exec.yaml"' in text and '"config"' in text


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


def test_docs_list_every_parameter():
    docs = (REPO / "docs" / "ros.md").read_text()
    for name in params.PARAMETER_NAMES:
        assert re.search(rf"`{name}`", docs), name
