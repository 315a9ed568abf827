"""Where bt_exec overrides the internals of a library it builds on: one module per library (``py_trees``,
``uvicorn``, ``rclpy``), each holding only its overrides, the version of the library they were written against
(``WRITTEN_FOR``) and what each one overrides (``OVERRIDES``).

A test per library (tests/test_compat.py; tests/ros/test_compat_rclpy.py under ROS) fails, naming the overrides,
when the installed version is another or an internal they override is gone, so an upgrade is looked at on
purpose. This package imports nothing: each module is imported by its users alone (the core by ``py_trees``, the
web door by ``uvicorn``, the ROS door by ``rclpy``), and an import contract keeps the core off the other two.
"""
