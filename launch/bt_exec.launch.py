"""Launch the bt_exec node, optionally a simulated robot and a tree viewer.

    ros2 launch bt_exec bt_exec.launch.py [backend:=sim|ros|moveit] [sim_robot:=true|false]
        [viewer:=py_trees|web|none] [web_port:=8080] [web_host:=127.0.0.1] [params_file:=FILE] [sim_script:=FILE]

The node's parameters come from config/bt_exec.yaml (or ``params_file``);
``backend`` overrides the file's. ``backend:=moveit`` runs the Grant skills on the arm
through MoveItPy: give a ``params_file`` that sets ``scene_file`` and ``cell_poses_file``
(and ``motion_limits_file``), see docs/moveit.md. ``sim_robot:=true`` also starts
``bt_exec_sim_robot``, which serves RunCapability at
/bt_exec/capabilities/<provider> from ``sim_script`` (use it with
``backend:=ros``). ``viewer:=py_trees`` starts ``py-trees-tree-viewer``
(package py_trees_ros_viewer); ``viewer:=web`` has the node serve its web app
(operator console, HTTP API) on ``web_host``:``web_port``, http://127.0.0.1:8080/
by default; bound beyond loopback it needs a token (``BT_EXEC_WEB_TOKEN`` in the
environment, or ``web_token`` in the params file), else the node will not start.
See docs/ros.md, section 5.1.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.conditions import IfCondition, UnlessCondition
from launch.substitutions import EqualsSubstitution, LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from launch import LaunchDescription


def generate_launch_description():
    config = os.path.join(get_package_share_directory("bt_exec"), "config", "bt_exec.yaml")
    params_file = LaunchConfiguration("params_file")
    backend = LaunchConfiguration("backend")
    viewer = LaunchConfiguration("viewer")
    web = EqualsSubstitution(viewer, "web")

    def executor_node(extra_parameters, condition):
        return Node(package="bt_exec", executable="bt_exec_node", name="bt_exec", output="screen",
                    parameters=[params_file, {"backend": ParameterValue(backend, value_type=str)}, *extra_parameters],
                    condition=condition)

    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=config,
                              description="parameters of the bt_exec node (YAML)"),
        DeclareLaunchArgument("backend", default_value="sim", choices=["sim", "ros", "moveit"],
                              description="capability backend: sim (embedded), ros (RunCapability actions) or "
                                          "moveit (the arm through MoveItPy; params_file sets scene_file, "
                                          "cell_poses_file)"),
        DeclareLaunchArgument("sim_robot", default_value="false", choices=["true", "false"],
                              description="also start the simulated robot (RunCapability servers)"),
        DeclareLaunchArgument("sim_script", default_value="",
                              description="the simulated robot's sim script (empty: every call succeeds at once)"),
        DeclareLaunchArgument("viewer", default_value="none", choices=["py_trees", "web", "none"],
                              description="tree viewer: py-trees-tree-viewer, the node's web app, or none"),
        DeclareLaunchArgument("web_port", default_value="8080", description="port of the web app (viewer:=web)"),
        DeclareLaunchArgument("web_host", default_value="127.0.0.1",
                              description="address the web app binds to (viewer:=web); beyond loopback it needs "
                                          "a token: BT_EXEC_WEB_TOKEN, or web_token in params_file"),
        executor_node([], UnlessCondition(web)),
        executor_node([{"web_port": ParameterValue(LaunchConfiguration("web_port"), value_type=int),
                        "web_host": ParameterValue(LaunchConfiguration("web_host"), value_type=str)}],
                      IfCondition(web)),
        Node(package="bt_exec", executable="bt_exec_sim_robot", name="bt_exec_sim_robot", output="screen",
             parameters=[{"sim_script": ParameterValue(LaunchConfiguration("sim_script"), value_type=str)}],
             condition=IfCondition(LaunchConfiguration("sim_robot"))),
        ExecuteProcess(cmd=["py-trees-tree-viewer"], output="screen",
                       condition=IfCondition(EqualsSubstitution(viewer, "py_trees"))),
    ])
