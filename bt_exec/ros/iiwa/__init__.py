"""The KUKA iiwa cell's contract (``contract:=iiwa``): bt_exec as the cell's ``/iiwa_llm_plan_executor``.

``node`` (rclpy and the cell's interface packages) serves the cell's names and types; ``convert``,
``params`` and ``gate`` are pure Python. See docs/iiwa.md.
"""
