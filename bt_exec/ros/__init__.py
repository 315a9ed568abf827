"""bt_exec on ROS 2: the ``bt_exec`` node, its conversions and the capability action backend.

A thin layer over the ROS-free core. Importing this package imports no rclpy:
the modules that need it (``node``, ``convert``, ``action_backend``,
``sim_robot``, ``tree_watcher``) import it themselves, so ``import bt_exec``
and ``import bt_exec.ros`` work where ROS 2 is not installed.

Set up here: ``bash scripts/setup-ros.sh && . build/ros/env.sh``. See docs/ros.md.
"""

SETUP_HINT = ("ROS 2 (rclpy and bt_exec_interfaces) is not available in this environment; set it up with "
              "`bash scripts/setup-ros.sh && . build/ros/env.sh` (see docs/ros.md)")
