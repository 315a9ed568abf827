"""Physics cell tests: real MuJoCo, mink and ruckig (the physics extra), no fake at the Motion seam.

The folder skips, with the reason, where one of them cannot be imported (pip install 'bt_exec[physics]'); with
BT_EXEC_REQUIRE_PHYSICS=1 (CI) it fails instead.
"""
import os

import pytest

from bt_exec.motion.physics import PhysicsUnavailable, require_physics

REQUIRED = os.environ.get("BT_EXEC_REQUIRE_PHYSICS") == "1"

try:
    require_physics()
    MISSING = None
except PhysicsUnavailable as missing:
    MISSING = str(missing)

if MISSING is not None:
    # Every test module of this folder is replaced by one that skips (or, when required, fails) as it is collected,
    # so that its imports of the physics cell never run.

    class _WithoutPhysics(pytest.Module):
        def collect(self):
            if REQUIRED:
                pytest.fail(f"BT_EXEC_REQUIRE_PHYSICS=1, but {MISSING}", pytrace=False)
            pytest.skip(MISSING)

    def pytest_pycollect_makemodule(module_path, parent):
        return _WithoutPhysics.from_parent(parent, path=module_path)
