"""Launch the bt_exec node, optionally a simulated robot and a tree viewer, in a namespace.

    ros2 launch bt_exec bt_exec.launch.py [contract:=bt_exec|iiwa] [experiment_id:=N] [namespace:=robot1]
        [backend:=sim|ros|moveit|physics] [sim_robot:=true|false]
        [sim_script:=FILE] [viewer:=none|web|py_trees|watcher] [terminal:='xterm -e']
        [web_port:=8080] [web_host:=127.0.0.1] [params_file:=FILE]

The node's parameters come from config/bt_exec.yaml (or ``params_file``);
``backend`` (and ``sim_script`` with ``backend:=sim``) override the file's.
``namespace`` puts every node, service, topic and capability server under it
(``/robot1/bt_exec/submit``, ``/robot1/bt_exec/capabilities/sim``).
``backend:=moveit`` runs the Grant skills on the arm through MoveItPy: give a
``params_file`` that sets ``scene_file`` and ``cell_poses_file`` (and
``motion_limits_file``), see docs/moveit.md. ``backend:=physics`` runs them on the
KUKA iiwa 14 simulated in MuJoCo (the physics extra), its joints on
``/joint_states``, see docs/physics.md. ``sim_robot:=true`` also starts
``bt_exec_sim_robot``, which serves RunCapability in the same namespace (use
it with ``backend:=ros``). ``sim_script`` goes to whichever simulator runs the
calls: the node's own with ``backend:=sim``, the sim robot's with
``backend:=ros``. ``viewer:=watcher`` runs ``py-trees-tree-watcher`` on this
node's tree, in the launch's terminal or, with ``terminal:='xterm -e'`` (any
command prefix), in a terminal of its own; ``viewer:=py_trees`` starts
``py-trees-tree-viewer``; either one, when not installed, is said so in one
line and the rest runs. ``viewer:=web`` has the node serve its web app
(operator console, HTTP API) on ``web_host``:``web_port``; bound beyond
loopback it needs a token (``BT_EXEC_WEB_TOKEN`` in the environment, or
``web_token`` in the params file), else the node will not start. The choices
are made in bt_exec/ros/launch_config.py. See docs/ros.md, section 8.

``contract:=iiwa`` starts instead the KUKA iiwa cell's executor, launch/iiwa.launch.py, with
``experiment_id`` and that file's own defaults for the rest (none of the arguments above reach it); see
docs/iiwa.md.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import (DeclareLaunchArgument, ExecuteProcess, GroupAction, IncludeLaunchDescription, LogInfo,
                            OpaqueFunction, Shutdown)
from launch.conditions import IfCondition, UnlessCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import EqualsSubstitution, LaunchConfiguration
from launch_ros.actions import Node

from bt_exec.errors import ConfigError
from bt_exec.ros import launch_config
from launch import LaunchDescription


def start(context):
    """The actions for the arguments given: each argument read once, every choice made by launch_config."""
    def arg(name: str) -> str:
        return LaunchConfiguration(name).perform(context)

    try:
        namespace = launch_config.node_namespace(arg("namespace"))
        backend = arg("backend")
        sim_script = arg("sim_script")
        parameters = [arg("params_file"), launch_config.node_parameters(backend, sim_script)]
        viewer_choice = arg("viewer")
        if viewer_choice == "web":
            parameters.append(launch_config.web_parameters(arg("web_port"), arg("web_host")))
        with_sim_robot, note = launch_config.sim_robot_wanted(arg("sim_robot"), backend)
        viewer, viewer_note = launch_config.viewer_command(viewer_choice, namespace, arg("terminal"))
    except ConfigError as exc:
        return [LogInfo(msg=f"bt_exec launch: {exc}"), Shutdown(reason=str(exc))]
    actions = [Node(package="bt_exec", executable="bt_exec_node", name="bt_exec", namespace=namespace,
                    output="screen", parameters=parameters)]
    if with_sim_robot:
        actions.append(Node(package="bt_exec", executable="bt_exec_sim_robot", name="bt_exec_sim_robot",
                            namespace=namespace, output="screen",
                            parameters=[launch_config.sim_robot_parameters(sim_script)]))
    for message in (note, viewer_note):
        if message:
            actions.append(LogInfo(msg=f"bt_exec launch: {message}"))
    if viewer is not None:
        # Named after the program, else launch names it after the interpreter of bt_exec.ros.attached_watcher.
        actions.append(ExecuteProcess(cmd=viewer, name=launch_config.VIEWER_PROGRAMS[viewer_choice][0],
                                      output="screen", emulate_tty=True))
    return actions


def generate_launch_description():
    share = get_package_share_directory("bt_exec")
    config = os.path.join(share, "config", "bt_exec.yaml")
    iiwa = EqualsSubstitution(LaunchConfiguration("contract"), "iiwa")
    return LaunchDescription([
        DeclareLaunchArgument("contract", default_value="bt_exec", choices=list(launch_config.CONTRACTS),
                              description="bt_exec: this node and its API; iiwa: the KUKA iiwa cell's executor "
                                          "(iiwa.launch.py, docs/iiwa.md)"),
        DeclareLaunchArgument("experiment_id", default_value="0",
                              description="contract:=iiwa: the cell's experiment (1..20) whose scene is taken; "
                                          "0: any"),
        DeclareLaunchArgument("namespace", default_value="",
                              description="namespace of every node, service, topic and capability server "
                                          "(e.g. robot1: /robot1/bt_exec); empty: the root"),
        DeclareLaunchArgument("params_file", default_value=config,
                              description="parameters of the bt_exec node (YAML)"),
        DeclareLaunchArgument("backend", default_value="sim", choices=list(launch_config.BACKENDS),
                              description="capability backend: sim (embedded), ros (RunCapability actions), "
                                          "moveit (the arm through MoveItPy; params_file sets scene_file, "
                                          "cell_poses_file) or physics (the arm simulated in MuJoCo)"),
        DeclareLaunchArgument("sim_robot", default_value="false", choices=["true", "false"],
                              description="also start the simulated robot (RunCapability servers; with "
                                          "backend:=ros)"),
        DeclareLaunchArgument("sim_script", default_value="",
                              description="sim script of the simulator that runs the calls: the node's own "
                                          "(backend:=sim) or the sim robot's (backend:=ros); empty: every call "
                                          "succeeds at once"),
        DeclareLaunchArgument("viewer", default_value="none", choices=list(launch_config.VIEWERS),
                              description="none; web: the node's web app; py_trees: py-trees-tree-viewer; "
                                          "watcher: py-trees-tree-watcher on this node's tree"),
        DeclareLaunchArgument("terminal", default_value="",
                              description="viewer:=watcher: a command prefix that opens a terminal for it "
                                          "(e.g. 'xterm -e'); empty: the launch's own terminal"),
        DeclareLaunchArgument("web_port", default_value="8080", description="port of the web app (viewer:=web)"),
        DeclareLaunchArgument("web_host", default_value="127.0.0.1",
                              description="address the web app binds to (viewer:=web); beyond loopback it needs "
                                          "a token: BT_EXEC_WEB_TOKEN, or web_token in params_file"),
        GroupAction([OpaqueFunction(function=start)], condition=UnlessCondition(iiwa)),
        # Not forwarded: this file's backend, params_file and sim_script would override iiwa.launch.py's
        # own defaults, which differ (backend auto, config/iiwa.yaml).
        GroupAction([IncludeLaunchDescription(PythonLaunchDescriptionSource(
                         os.path.join(share, "launch", "iiwa.launch.py")))],
                    condition=IfCondition(iiwa), forwarding=False,
                    launch_configurations={"experiment_id": LaunchConfiguration("experiment_id")}),
    ])
