"""The console script ``bt_exec_iiwa_node`` (``ros2 run bt_exec bt_exec_iiwa_node --ros-args ...``).

Imports the node only when run, so that where ROS 2 is missing it says so in one line (exit 2).
"""
from __future__ import annotations

import importlib
import sys

PROG = "bt_exec_iiwa_node"


def iiwa_node_main() -> int:
    try:
        node = importlib.import_module("bt_exec.ros.iiwa.node")
    except Exception as exc:  # ImportError, or a broken ROS install failing as it loads
        print(f"{PROG}: ROS 2 is not set up here ({type(exc).__name__}: {exc}); source a ROS 2 Jazzy install "
              "(docs/ros.md)", file=sys.stderr)
        return 2
    return node.main(sys.argv, prog=PROG)
