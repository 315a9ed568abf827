"""Physics cell tests, the cell and its doors (its video, its dry run): real MuJoCo, mink and ruckig (the physics
extra), no fake at the Motion seam.

The folder skips, with the reason, where one of them cannot be imported (pip install 'bt_exec[physics]'); with
BT_EXEC_REQUIRE_PHYSICS=1 (CI) it fails instead.
"""

from folder_requires import modules_without

from bt_exec.motion.physics import PhysicsUnavailable, require_physics

try:
    require_physics()
    MISSING = None
except PhysicsUnavailable as missing:
    MISSING = str(missing)

if MISSING is not None:
    pytest_pycollect_makemodule = modules_without(MISSING, "BT_EXEC_REQUIRE_PHYSICS")
