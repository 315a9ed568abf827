"""bt_exec on ROS 2: the ``bt_exec`` node, its conversions and the capability action backend.

A thin layer over the ROS-free core. Importing this package imports no rclpy:
the modules that need it (``node``, ``client``, ``action_backend``,
``sim_robot``, and for the moveit backend ``moveit_wiring`` and
``moveit_seam``) import it themselves, so ``import bt_exec`` and
``import bt_exec.ros`` work where ROS 2 is not installed.

Set up here: ``bash scripts/setup-ros.sh && . build/ros/env.sh``. See docs/ros.md.
"""
