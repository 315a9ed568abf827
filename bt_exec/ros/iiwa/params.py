"""The iiwa profile's parameters: names, defaults and descriptions (no rclpy here).

Kept apart from the node so that config/iiwa.yaml, the launch file and docs/iiwa.md are checked
against it where ROS is not installed. Every parameter is read-only: read once when the node starts.
"""
from __future__ import annotations

from ...compilers import Limits
from ..params import STATUS_QUEUE, Param, physics_problems

NODE_NAME = "iiwa_llm_plan_executor"
BACKENDS = ("sim", "moveit", "physics")
DURABILITIES = ("transient_local", "volatile")
_LIMITS = Limits()

PARAMETERS: tuple[Param, ...] = (
    Param("experiment_id", 0, "The cell's experiment (1..20) whose scene envelopes are taken; an envelope "
                              "naming another experiment is refused. 0: any.", "0..20"),
    Param("ready_delay_s", 3.0, "Seconds (node clock: simulation time with use_sim_time) that scene_ready must "
                                "be true and a scene received before a submit is accepted.", "0.0 or more"),
    Param("scene_topic", "/iiwa_scene_context/scene_json", "std_msgs/String topic of the scene envelopes "
                                                           "(transient local)."),
    Param("scene_service", "/iiwa_scene_context/get_scene", "std_srvs/Trigger service asked for the scene "
                                                            "envelope at start, until one is received."),
    Param("get_scene_wait_s", 10.0, "How long after start the node keeps asking scene_service while no "
                                    "envelope came on scene_topic. 0.0: never asks.", "0.0 or more"),
    Param("scene_ready_topic", "/iiwa_experement/scene_ready", "std_msgs/Bool topic saying the cell's scene is "
                                                               "ready."),
    Param("scene_ready_durability", "transient_local", "Durability the scene_ready subscription asks for: "
                                                       "transient_local (the publisher latches it) or volatile.",
          "transient_local | volatile"),
    Param("scene_max_age_s", 0.0, "A scene envelope older than this (node clock, since it was received) is "
                                  "stale: the active run stops and submits are refused until a fresh one comes. "
                                  "0.0: envelopes never go stale by age.", "0.0 or more"),
    Param("backend", "sim", "sim (the embedded simulator, in the first scene received), moveit (Grant skills "
                            "on the arm through MoveItPy; needs cell_poses_file) or physics (Grant skills on the "
                            "KUKA iiwa 14 simulated in MuJoCo, in the first scene received; needs the physics "
                            "extra).", "sim | moveit | physics"),
    Param("sim_script", "", "sim backend: a sim script file; empty: every skill succeeds at once."),
    Param("skill_catalog", "grant", "Qwen3 skill catalog: a shipped name (grant) or a file."),
    Param("tick_rate_hz", 100.0, "How often the executor ticks the running graph, per second.", "a positive number"),
    Param("max_steps", 1000, "Most steps one run may execute.", "an integer >= 1"),
    Param("op_timeout_s", 0.0, "Longest one skill call may run, in seconds; 0.0: no limit.",
          "0.0 or a positive number"),
    Param("status_queue", STATUS_QUEUE, "Messages waiting for the ~/status publisher; beyond, they are dropped "
                                        "and counted.", "an integer >= 1"),
    Param("max_input_bytes", _LIMITS.max_input_bytes, "Largest submit value or scene envelope, in bytes.",
          "an integer >= 1"),
    Param("max_graph_steps", _LIMITS.max_graph_steps, "Most steps in one graph.", "an integer >= 1"),
    Param("max_string_chars", _LIMITS.max_string_chars, "Longest string in a graph, in characters.",
          "an integer >= 1"),
    Param("cell_poses_file", "", "moveit backend, required, and physics backend (empty: the shipped poses): YAML "
                                 "file of the cell's named poses."),
    Param("motion_limits_file", "", "moveit and physics backends: YAML file of the motion policy's limits; empty: "
                                    "defaults."),
    Param("moveit_group", "arm", "moveit backend: the MoveIt planning group of the arm.", "a group name"),
    Param("tcp_link", "tool0", "moveit backend: the link of the tool tip (TCP).", "a link name"),
    Param("physics_speed", 1.0, "physics backend: simulated time per real time (1.0: real time); 0.0: as fast as "
                                "the machine goes.", "0.0 or a positive number"),
    Param("joint_states_hz", 30.0, "physics backend: how often the arm's joints are published on /joint_states "
                                   "(sensor_msgs/JointState), per second.", "a positive number"),
)

PARAMETER_NAMES = tuple(p.name for p in PARAMETERS)
DEFAULTS = {p.name: p.default for p in PARAMETERS}


def check(values: dict) -> list[str]:
    """What is wrong with a set of parameter values (already of the right types); empty when all is well."""
    problems = []
    if not 0 <= values["experiment_id"] <= 20:
        problems.append(f"experiment_id must be 0 (any) or 1..20, got {values['experiment_id']!r}")
    for name in ("ready_delay_s", "get_scene_wait_s", "scene_max_age_s", "op_timeout_s"):
        if not 0 <= values[name] < float("inf"):
            problems.append(f"{name} must be 0.0 or a positive number of seconds, got {values[name]!r}")
    if not (values["tick_rate_hz"] > 0 and values["tick_rate_hz"] != float("inf")):
        problems.append(f"tick_rate_hz must be a positive number, got {values['tick_rate_hz']!r}")
    if values["backend"] not in BACKENDS:
        problems.append(f"backend must be one of {', '.join(BACKENDS)}, got {values['backend']!r}")
    problems += physics_problems(values)
    if values["scene_ready_durability"] not in DURABILITIES:
        problems.append(f"scene_ready_durability must be one of {', '.join(DURABILITIES)}, "
                        f"got {values['scene_ready_durability']!r}")
    for name in ("max_steps", "status_queue", "max_input_bytes", "max_graph_steps", "max_string_chars"):
        if values[name] < 1:
            problems.append(f"{name} must be an integer >= 1, got {values[name]!r}")
    for name in ("scene_topic", "scene_service", "scene_ready_topic", "moveit_group", "tcp_link"):
        if not values[name].strip():
            problems.append(f"{name} must not be empty")
    return problems
