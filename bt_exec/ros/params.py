"""The ``bt_exec`` node's parameters: names, defaults and descriptions (no rclpy here).

Kept apart from the node so that config/bt_exec.yaml, the launch file and the
docs can be checked against it where ROS is not installed. Every parameter is
read-only: it is read once when the node starts.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from ..compilers import Limits
from ..web_token import TOKEN_ENV as WEB_TOKEN_ENV  # the web app's token, when the web_token parameter is empty

BACKENDS = ("sim", "ros", "moveit", "physics")
STATUS_QUEUE = 10_000  # the ~/status outbox: events waiting for the publisher before they are dropped
_LIMITS = Limits()


@dataclass(frozen=True)
class Param:
    name: str
    default: object  # its type is the parameter's type: float, int or str
    description: str
    constraints: str = ""


PARAMETERS: tuple[Param, ...] = (
    Param("tick_rate_hz", 100.0, "How often the executor ticks the running plans, per second (its own loop).",
          "a positive number"),
    Param("backend", "sim", "Capability backend: sim (the embedded simulator), ros (RunCapability action "
                            "clients, one server per provider: <namespace>/bt_exec/capabilities/<provider>), moveit "
                            "(Grant skills on the arm through MoveItPy; needs scene_file and cell_poses_file) or "
                            "physics (Grant skills on the KUKA iiwa 14 simulated in MuJoCo; needs the physics extra).",
          "sim | ros | moveit | physics"),
    Param("sim_script", "", "sim backend: a sim script file (outcomes and durations per cap or op); "
                            "empty: everything succeeds at once."),
    Param("catalog", "", "RTDL capability catalog file to check caps and args against; empty: none."),
    Param("node_catalog", "", "BehaviorTree.CPP node catalog (a TreeNodesModel XML file) BT XML trees are checked "
                              "against; empty: leaves unchecked, with a warning."),
    Param("call_guard_file", "", "Call guard rules file (JSON or YAML): allow/deny rules every capability call "
                                 "passes; plans with calls it denies are refused, and a call denied at run time "
                                 "fails its op. Empty: no guard."),
    Param("skill_catalog", "grant", "Qwen3 skill catalog: a shipped name (grant) or a file."),
    Param("scene_file", "", "Qwen3 scene file the step graphs are checked against and run in; empty: "
                            "step graphs are refused (no_scene)."),
    Param("max_active_runs", 1, "Most Qwen3 step graphs running at once (one robot: 1).", "an integer >= 1"),
    Param("max_steps", 1000, "Most steps one Qwen3 run may execute.", "an integer >= 1"),
    Param("op_timeout_s", 0.0, "Longest one capability call may run, in seconds; past it the call is cancelled "
                               "and its op ends timeout. 0.0: no limit.", "0.0 or a positive number"),
    Param("max_plans", 64, "Most plans (any dialect) in flight at once; more are refused (too_many_plans).",
          "an integer >= 1"),
    Param("journal_path", "", "Append every event as one JSON line to this file; empty: no journal."),
    Param("status_queue", STATUS_QUEUE, "Events waiting for the ~/status publisher; beyond, events are dropped "
                                        "and counted (status_dropped).", "an integer >= 1"),
    Param("max_input_bytes", _LIMITS.max_input_bytes, "Largest plan accepted, in bytes.", "an integer >= 1"),
    Param("max_ops", _LIMITS.max_ops, "Most ops in one RTDL plan.", "an integer >= 1"),
    Param("max_depth", _LIMITS.max_depth, "Deepest nesting of one RTDL plan.", "an integer >= 1"),
    Param("max_graph_steps", _LIMITS.max_graph_steps, "Most steps in one Qwen3 graph.", "an integer >= 1"),
    Param("max_string_chars", _LIMITS.max_string_chars, "Longest string or object key in a plan, in characters.",
          "an integer >= 1"),
    Param("capability_server_timeout_s", 5.0, "ros backend: how long a call waits for its action server "
                                              "(and for the goal's acceptance) before it fails.",
          "a positive number"),
    Param("shutdown_timeout_s", 5.0, "Longest the clean stop on SIGINT/SIGTERM may take (plans cancelled, action "
                                     "goals cancelled and answered by their servers, last events sent); past it the "
                                     "node exits at once, logging what was left running.", "a positive number"),
    Param("tree_linger_s", 3.0, "py-trees-tree-watcher: how long a finished plan stays in the tree with its final "
                                "states before it leaves.", "0.0 or a positive number"),
    Param("cell_poses_file", "", "moveit and physics backends: YAML file of the cell's named poses (position, "
                                 "optional orientation and approach_height per target); required with backend "
                                 "moveit; with physics, empty: the shipped config/grant_cell_poses.yaml."),
    Param("motion_limits_file", "", "moveit and physics backends: YAML file of the motion policy's limits "
                                    "(config/motion_limits.yaml); empty: the shipped defaults."),
    Param("moveit_group", "arm", "moveit backend: the MoveIt planning group of the arm.", "a group name"),
    Param("tcp_link", "tool0", "moveit backend: the link of the tool tip (TCP) the poses are for.", "a link name"),
    Param("physics_speed", 1.0, "physics backend: simulated time per real time (1.0: real time); 0.0: as fast as "
                                "the machine goes.", "0.0 or a positive number"),
    Param("joint_states_hz", 30.0, "physics backend: how often the arm's joints are published on /joint_states "
                                   "(sensor_msgs/JointState), per second.", "a positive number"),
    Param("web_port", 0, "Serve the web app (operator console, HTTP API, event stream) on this port; 0: off.",
          "0..65535"),
    Param("web_host", "127.0.0.1", "Address the web app binds to. Beyond loopback (0.0.0.0, a LAN address) "
                                   "web_token is required.", "an address or host name"),
    Param("web_token", "", "Bearer token the web app requires on every POST (all control); reads stay open. "
                           f"Required when web_host is not loopback. Empty: ${WEB_TOKEN_ENV} if set, else none. "
                           "Parameters are readable over ROS (ros2 param get): prefer the environment variable."),
    Param("groot2_port", 0, "Let Groot2 watch the newest plan: BehaviorTree.CPP's monitor protocol on this port "
                            "(request/reply) and the next (publisher); needs pyzmq. 0: off.", "0..65534"),
    Param("groot2_host", "127.0.0.1", "Address the Groot2 sockets bind to (* for every address; the protocol has "
                                      "no authentication).", "an address, host name or *"),
)

PARAMETER_NAMES = tuple(p.name for p in PARAMETERS)
DEFAULTS = {p.name: p.default for p in PARAMETERS}


# Parameters rclpy or ros2 launch may give any node: the node takes them as ROS nodes do.
ROS_PARAMETERS = ("use_sim_time", "start_type_description_service")
ROS_PARAMETER_PREFIXES = ("qos_overrides.",)
# Names a user may reach for that belong to another executable or to the launch file.
ELSEWHERE = {
    "contract": "the iiwa contract is its own node: ros2 run bt_exec bt_exec_iiwa_node, or ros2 launch bt_exec "
                "bt_exec.launch.py contract:=iiwa (a launch argument, not a node parameter)",
    "experiment_id": "it is a launch argument of the iiwa contract: ros2 launch bt_exec bt_exec.launch.py "
                     "contract:=iiwa experiment_id:=N",
}
_LONGEST_NAME = max(len(p.name) for p in PARAMETERS)


def unknown(given: set[str] | list[str]) -> list[str]:
    """What to say of each parameter given to the node that it does not have (and ROS does not give every
    node), in order; empty when there is none. A parameter nobody reads would be ignored silently."""
    problems = []
    for name in sorted(given):
        if name in DEFAULTS or name in ROS_PARAMETERS or name.startswith(ROS_PARAMETER_PREFIXES):
            continue
        if name in ELSEWHERE:
            problems.append(f"{name} is not a parameter of bt_exec_node: {ELSEWHERE[name]}")
            continue
        # nearest names only for names of a plausible length: the comparison is quadratic in it
        near = difflib.get_close_matches(name, PARAMETER_NAMES, n=1) if len(name) <= 2 * _LONGEST_NAME else []
        problems.append(f"{name} is not a parameter of bt_exec_node" + (f" (did you mean {near[0]}?)" if near else ""))
    return problems


def physics_problems(values: dict) -> list[str]:
    """What is wrong with the physics backend's parameters (``physics_speed``, ``joint_states_hz``), of this node
    and of the iiwa profile's."""
    problems = []
    if not 0 <= values["physics_speed"] < float("inf"):
        problems.append(f"physics_speed must be 0.0 (as fast as the machine goes) or a positive number, got "
                        f"{values['physics_speed']!r}")
    if not (values["joint_states_hz"] > 0 and values["joint_states_hz"] != float("inf")):
        problems.append(f"joint_states_hz must be a positive number, got {values['joint_states_hz']!r}")
    return problems


def check(values: dict) -> list[str]:
    """What is wrong with a set of parameter values (already of the right types); empty when all is well."""
    problems = []
    for name in ("tick_rate_hz", "capability_server_timeout_s", "shutdown_timeout_s"):
        value = values[name]
        if not (value > 0 and value != float("inf")):
            problems.append(f"{name} must be a positive number, got {value!r}")
    if values["backend"] not in BACKENDS:
        problems.append(f"backend must be one of {', '.join(BACKENDS)}, got {values['backend']!r}")
    problems += physics_problems(values)
    if not 0 <= values["tree_linger_s"] < float("inf"):
        problems.append(f"tree_linger_s must be 0.0 or a positive number of seconds, got {values['tree_linger_s']!r}")
    op_timeout = values["op_timeout_s"]
    if not (op_timeout == 0 or 0 < op_timeout < float("inf")):
        problems.append(f"op_timeout_s must be 0.0 (no limit) or a positive number of seconds, got {op_timeout!r}")
    for name in ("max_active_runs", "max_steps", "max_plans", "status_queue", "max_input_bytes", "max_ops",
                 "max_depth", "max_graph_steps", "max_string_chars"):
        if values[name] < 1:
            problems.append(f"{name} must be an integer >= 1, got {values[name]!r}")
    if not 0 <= values["web_port"] <= 65535:
        problems.append(f"web_port must be 0..65535, got {values['web_port']!r}")
    if not 0 <= values["groot2_port"] <= 65534:
        problems.append(f"groot2_port must be 0..65534 (it and the next port are served), got "
                        f"{values['groot2_port']!r}")
    for name in ("moveit_group", "tcp_link"):
        if not values[name].strip():
            problems.append(f"{name} must not be empty")
    for name in ("web_host", "groot2_host"):
        if not values[name].strip():
            problems.append(f"{name} must be an address or host name (127.0.0.1, 0.0.0.0, ...), got ''")
    return problems
