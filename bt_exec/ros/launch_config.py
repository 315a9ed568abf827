"""What launch/bt_exec.launch.py and launch/fleet.launch.py start, decided from their arguments (no ROS and no
launch import here).

Kept apart from the launch files so that every choice they make (namespace,
where ``sim_script`` goes, which viewer runs and how, which contract, the
fleet's robots) is tested where ``launch`` is not installed. Each function raises ConfigError with a message
naming the argument that is wrong.
"""
from __future__ import annotations

import re
import shlex
import shutil
import sys

from ..errors import ConfigError

BACKENDS = ("sim", "ros", "moveit", "physics")
VIEWERS = ("none", "web", "py_trees", "watcher")
CONTRACTS = ("bt_exec", "iiwa")  # bt_exec's own node and API, or the KUKA iiwa cell's (launch/iiwa.launch.py)
MAX_FLEET = 64  # robots one fleet launch starts: each is a process pair on one machine
# viewer -> (program, the apt package that has it)
VIEWER_PROGRAMS = {"py_trees": ("py-trees-tree-viewer", "ros-jazzy-py-trees-ros-viewer"),
                   "watcher": ("py-trees-tree-watcher", "ros-jazzy-py-trees-ros")}
_NAME_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def node_namespace(text: str) -> str:
    """``namespace:=`` as a node namespace: '' (the root), or ``/robot1`` for ``robot1``, ``/robot1`` or
    ``/fleet/robot1/``."""
    tokens = [token for token in text.strip().split("/") if token]
    bad = [token for token in tokens if not _NAME_TOKEN.fullmatch(token) or "__" in token]
    if bad:
        raise ConfigError(f"namespace:={text!r} is not a ROS namespace: {bad[0]!r} must be letters, digits and "
                          "single underscores, not starting with a digit (e.g. namespace:=robot1)")
    return "/" + "/".join(tokens) if tokens else ""


def node_parameters(backend: str, sim_script: str) -> dict:
    """The bt_exec node's parameters that the launch arguments override: ``backend``, and ``sim_script``
    where the embedded simulator (backend sim) is what runs it."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend:={backend!r}: expected one of {', '.join(BACKENDS)}")
    overrides = {"backend": backend}
    if backend == "sim" and sim_script:
        overrides["sim_script"] = sim_script
    return overrides


def web_parameters(port: str, host: str) -> dict:
    """``viewer:=web``: the node serves its web app on ``web_host``:``web_port``."""
    try:
        value = int(port)
    except ValueError:
        raise ConfigError(f"web_port:={port!r} is not a port number (0..65535)") from None
    if not 0 <= value <= 65535:
        raise ConfigError(f"web_port:={port!r} is not a port number (0..65535)")
    return {"web_port": value, "web_host": host}


def sim_robot_wanted(sim_robot: str, backend: str) -> tuple[bool, str | None]:
    """Whether to start the sim robot, and a note for the user when the choice looks wrong."""
    if sim_robot != "true":
        return False, None
    if backend != "ros":
        return True, (f"sim_robot:=true with backend:={backend}: the node does not call the sim robot (only "
                      "backend:=ros does); sim_script goes to the node's embedded simulator")
    return True, None


def sim_robot_parameters(sim_script: str) -> dict:
    return {"sim_script": sim_script}


def snapshot_streams_hint(namespace: str) -> str:
    """The part of the snapshot-stream services' names that picks this node's tree (py-trees-tree-watcher
    --namespace-hint matches it as a substring)."""
    return f"{namespace}/bt_exec/snapshot_streams/"


def viewer_command(viewer: str, namespace: str, terminal: str = "", which=shutil.which,
                   python: str = sys.executable) -> tuple[list | None, str | None]:
    """(the command to run, or None; a message for the user, or None) for ``viewer:=``.

    ``watcher``: ``py-trees-tree-watcher`` on this node's snapshot streams, started by
    ``bt_exec.ros.attached_watcher`` (run by ``python``) once the node serves them and again should it fail
    to attach, in the launch's terminal, or in a terminal of its own when ``terminal`` is a command prefix
    such as ``xterm -e``. ``py_trees``: the Qt viewer (``py-trees-tree-viewer``), in a window of its own,
    started by the same module once the node serves its tree. A program that is not installed is said so,
    with the package to install, and nothing runs.
    """
    if viewer not in VIEWERS:
        raise ConfigError(f"viewer:={viewer!r}: expected one of {', '.join(VIEWERS)}")
    if viewer not in VIEWER_PROGRAMS:
        return None, None
    program, package = VIEWER_PROGRAMS[viewer]
    if which(program) is None:
        return None, (f"viewer:={viewer} needs {program}, which is not installed here (sudo apt install {package}); "
                      "no viewer started, the rest runs")
    attached = [python, "-m", "bt_exec.ros.attached_watcher", snapshot_streams_hint(namespace), program]
    if viewer == "py_trees":  # a window of its own
        return attached, None
    try:
        prefix = shlex.split(terminal)
    except ValueError as exc:
        raise ConfigError(f"terminal:={terminal!r} is not a command: {exc}") from None
    if prefix and which(prefix[0]) is None:
        raise ConfigError(f"terminal:={terminal!r}: {prefix[0]} is not installed here")
    return [*prefix, *attached], None


def fleet_namespaces(robots: str, count: str) -> list[str]:
    """The fleet's robot namespaces: ``robots:=robot1,robot2`` as given (``/robot1``, ``/robot2``), else
    ``count:=N`` robots named ``/robot1`` .. ``/robotN``."""
    if robots.strip():
        names = [node_namespace(name) for name in robots.split(",")]
        if "" in names:
            raise ConfigError(f"robots:={robots!r}: an empty name; give comma-separated namespaces, "
                              "e.g. robots:=robot1,robot2")
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ConfigError(f"robots:={robots!r}: {repeated[0]} is named twice; each robot needs its own "
                              "namespace")
    else:
        if not count.strip().isdigit() or not 1 <= int(count) <= MAX_FLEET:
            raise ConfigError(f"count:={count!r}: expected a number of robots, 1 to {MAX_FLEET}")
        names = [f"/robot{index}" for index in range(1, int(count) + 1)]
    if len(names) > MAX_FLEET:
        raise ConfigError(f"robots:=...: {len(names)} robots, at most {MAX_FLEET}")
    return names


def fleet_nodes(namespaces: list[str], backend: str, sim_script: str, params_file: str) -> list[dict]:
    """Each robot's processes as ``launch_ros`` ``Node`` arguments (package bt_exec): its bt_exec node and,
    with ``backend:=ros``, its sim robot serving the node's capability actions in the same namespace. With
    ``backend:=sim`` each node runs ``sim_script`` in its embedded simulator and no sim robot is started."""
    if backend not in ("sim", "ros"):
        raise ConfigError(f"backend:={backend!r}: a fleet runs on sim or ros (moveit drives one arm: use "
                          "bt_exec.launch.py with namespace:=)")
    nodes = []
    for namespace in namespaces:
        nodes.append({"executable": "bt_exec_node", "name": "bt_exec", "namespace": namespace,
                      "parameters": [params_file, node_parameters(backend, sim_script)]})
        if backend == "ros":
            nodes.append({"executable": "bt_exec_sim_robot", "name": "bt_exec_sim_robot", "namespace": namespace,
                          "parameters": [sim_robot_parameters(sim_script)]})
    return nodes


def fleet_console_node(port: str, host: str) -> dict | None:
    """``console_port:=N``: ``bt-exec fleet --web N`` (one console and MCP for every robot) as ``launch_ros``
    ``Node`` arguments (``bt-exec`` is installed beside the package's other executables), or None for an empty
    port. A token for a console bound beyond loopback comes from ``$BT_EXEC_WEB_TOKEN``."""
    if not port.strip():
        return None
    web_parameters(port, host)  # checks the port
    return {"executable": "bt-exec", "arguments": ["fleet", "--web", str(int(port)), "--web-host", host]}
