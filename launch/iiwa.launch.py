"""Launch bt_exec as the KUKA iiwa cell's graph executor, ``/iiwa_llm_plan_executor`` (contract iiwa).

    ros2 launch bt_exec iiwa.launch.py experiment_id:=20 [backend:=auto|sim|moveit|physics] [use_sim_time:=true]
        [params_file:=FILE] [sim_script:=FILE] [cell_poses_file:=FILE] [motion_limits_file:=FILE]

One node, ``bt_exec_iiwa_node``, with the Grant skill catalog and its parameters from config/iiwa.yaml (or
``params_file``): the ready delay, the timeouts and the cell's topic and service names. ``backend:=auto`` runs
the skills on the arm through MoveItPy where it is installed (the Python module ``moveit``), else on the arm
simulated in MuJoCo where the physics extra is installed (mujoco, mink, ruckig), else in the embedded
simulator. No web server is started: the cell's own ``iiwa_web`` serves HTTP and MCP and calls this
node's services. The cell's interface packages (webots_ros2_msgs, iiwa_msgs) must be built and sourced.
See docs/iiwa.md.
"""
import importlib.util
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription


def moveit_installed() -> bool:
    return importlib.util.find_spec("moveit") is not None


def physics_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("mujoco", "mink", "ruckig"))


def executor_node(context):
    def value(name: str) -> str:
        return LaunchConfiguration(name).perform(context)

    experiment = value("experiment_id")
    if not experiment.isdigit() or not 0 <= int(experiment) <= 20:
        raise ValueError(f"experiment_id must be 1..20 (0: any), got {experiment!r}")
    backend = value("backend")
    if backend == "auto":
        backend = "moveit" if moveit_installed() else "physics" if physics_installed() else "sim"
    overrides = {"experiment_id": int(experiment), "backend": backend, "skill_catalog": "grant",
                 "use_sim_time": value("use_sim_time") == "true"}
    if backend == "sim":
        overrides["sim_script"] = value("sim_script")
    else:
        overrides.update(cell_poses_file=value("cell_poses_file"), motion_limits_file=value("motion_limits_file"))
    return [Node(package="bt_exec", executable="bt_exec_iiwa_node", name="iiwa_llm_plan_executor", output="screen",
                 parameters=[value("params_file"), overrides])]


def generate_launch_description():
    config = os.path.join(get_package_share_directory("bt_exec"), "config")
    return LaunchDescription([
        DeclareLaunchArgument("experiment_id", default_value="0",
                              description="the cell's experiment (1..20) whose scene is taken; 0: any"),
        DeclareLaunchArgument("params_file", default_value=os.path.join(config, "iiwa.yaml"),
                              description="parameters of iiwa_llm_plan_executor (YAML)"),
        DeclareLaunchArgument("backend", default_value="auto", choices=["auto", "sim", "moveit", "physics"],
                              description="auto: moveit where MoveItPy is installed, else physics where the physics "
                                          "extra is, else sim"),
        DeclareLaunchArgument("use_sim_time", default_value="false", choices=["true", "false"],
                              description="true in Webots: ready_delay_s is then simulation time (/clock)"),
        DeclareLaunchArgument("sim_script", default_value="",
                              description="sim backend: a sim script (empty: every skill succeeds at once)"),
        DeclareLaunchArgument("cell_poses_file", default_value=os.path.join(config, "grant_cell_poses.yaml"),
                              description="moveit and physics backends: the cell's named poses"),
        DeclareLaunchArgument("motion_limits_file", default_value=os.path.join(config, "motion_limits.yaml"),
                              description="moveit backend: the motion policy's limits"),
        OpaqueFunction(function=executor_node),
    ])
