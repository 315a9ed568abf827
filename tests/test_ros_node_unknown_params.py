"""The node's parameters a user gives by a wrong name are named back, without ROS (bt_exec/ros/params.py)."""
from bt_exec.ros import params


def test_parameters_of_the_node_and_of_every_ros_node_pass():
    assert params.unknown({"tick_rate_hz", "backend", "use_sim_time", "start_type_description_service",
                           "qos_overrides./status.publisher.depth"}) == []


def test_contract_names_the_iiwa_executable_and_launch_argument():
    (problem,) = params.unknown({"contract"})
    assert "bt_exec_iiwa_node" in problem and "bt_exec.launch.py contract:=iiwa" in problem


def test_a_near_miss_is_told_its_name_and_a_stranger_only_named():
    assert params.unknown({"scene", "zzz"}) == ["scene is not a parameter of bt_exec_node (did you mean scene_file?)",
                                               "zzz is not a parameter of bt_exec_node"]


def test_a_huge_name_is_named_without_comparing_it():
    (problem,) = params.unknown({"tick_rate_hz" * 10_000})
    assert "did you mean" not in problem
