"""Launch a fleet on one DDS domain: one bt_exec node per robot, each in its own namespace, with its sim robot.

    ros2 launch bt_exec fleet.launch.py [count:=2] [robots:=robot1,robot2,...] [backend:=ros|sim]
        [sim_script:=FILE] [params_file:=FILE] [console_port:=PORT] [console_host:=HOST]

``robots`` names the namespaces (``/robot1/bt_exec``, ``/robot2/bt_exec``, ...); without it ``count``
robots are named ``robot1`` .. ``robotN``. With ``backend:=ros`` (the default) each robot also gets
``bt_exec_sim_robot`` in its namespace, serving its node's capability actions
(``/robot1/bt_exec/capabilities/<provider>``) from ``sim_script``; with ``backend:=sim`` each node runs
``sim_script`` in its embedded simulator. Nothing is shared but the domain: ``bt-exec robots`` lists
them, ``--robot robot2`` addresses one. ``console_port:=8080`` also starts ``bt-exec fleet --web 8080``:
one operator console, and MCP at its ``/mcp``, for every robot. The choices are made in
bt_exec/ros/launch_config.py. See docs/ros.md, section 7.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from bt_exec.errors import ConfigError
from bt_exec.ros import launch_config
from launch import LaunchDescription


def start(context):
    """Every robot's nodes, from the arguments read once; a bad argument stops the launch with one line."""
    def arg(name: str) -> str:
        return LaunchConfiguration(name).perform(context)

    try:
        namespaces = launch_config.fleet_namespaces(arg("robots"), arg("count"))
        nodes = launch_config.fleet_nodes(namespaces, arg("backend"), arg("sim_script"), arg("params_file"))
        console = launch_config.fleet_console_node(arg("console_port"), arg("console_host"))
    except ConfigError as exc:
        return [LogInfo(msg=f"bt_exec fleet launch: {exc}"), Shutdown(reason=str(exc))]
    if console is not None:
        nodes.append(console)
    return [LogInfo(msg=f"bt_exec fleet: {len(namespaces)} robot(s): {', '.join(namespaces)}"),
            *(Node(package="bt_exec", output="screen", **node) for node in nodes)]


def generate_launch_description():
    config = os.path.join(get_package_share_directory("bt_exec"), "config", "bt_exec.yaml")
    return LaunchDescription([
        DeclareLaunchArgument("count", default_value="2",
                              description=f"number of robots, robot1..robotN (1..{launch_config.MAX_FLEET}); "
                                          "not used when robots is given"),
        DeclareLaunchArgument("robots", default_value="",
                              description="comma-separated robot namespaces (e.g. robot1,robot2); empty: count"),
        DeclareLaunchArgument("backend", default_value="ros", choices=["ros", "sim"],
                              description="ros: each node calls its own sim robot's RunCapability servers; "
                                          "sim: each node's embedded simulator, no sim robots"),
        DeclareLaunchArgument("sim_script", default_value="",
                              description="sim script of every robot's simulator; empty: every call succeeds "
                                          "at once"),
        DeclareLaunchArgument("params_file", default_value=config,
                              description="parameters of every bt_exec node (YAML)"),
        DeclareLaunchArgument("console_port", default_value="",
                              description="serve one console (and MCP at /mcp) for the whole fleet on this port "
                                          "(bt-exec fleet --web); empty: none"),
        DeclareLaunchArgument("console_host", default_value="127.0.0.1",
                              description="address the fleet console binds to; beyond loopback it needs "
                                          "$BT_EXEC_WEB_TOKEN"),
        OpaqueFunction(function=start),
    ])
