"""The overrides of rclpy's internals (bt_exec/compat/rclpy.py): written against the installed rclpy, and the
internals they override still there. An upgrade fails here, naming the overrides to look at again."""
from compat_pins import assert_internals, assert_written_for
from rclpy.action import ActionClient

from bt_exec.compat import rclpy as rclpy_overrides


def test_the_rclpy_overrides_are_for_the_installed_rclpy():
    assert_written_for("rclpy", rclpy_overrides)


def test_what_the_locked_action_client_overrides_is_still_rclpys_own():
    assert_internals(ActionClient, "LockedActionClient",
                     methods=("send_goal_async", "_cancel_goal_async", "_get_result_async", "server_is_ready",
                              "is_ready", "take_data", "add_to_wait_set", "get_num_entities", "destroy"),
                     attributes=("_node", "_client_handle", "_action_name"))
