"""Tests of the doors onto the physics cell (its video, its dry run): real MuJoCo, mink and ruckig.

The folder skips, with the reason, where one of them cannot be imported (pip install 'bt_exec[physics]'); with
BT_EXEC_REQUIRE_PHYSICS=1 (CI) it fails instead, as tests/physics does.
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
    # Each test module is replaced by one that skips (or, when required, fails) as it is collected, so that its
    # imports of the cell and of numpy never run.

    class _WithoutPhysics(pytest.Module):
        def collect(self):
            if REQUIRED:
                pytest.fail(f"BT_EXEC_REQUIRE_PHYSICS=1, but {MISSING}", pytrace=False)
            pytest.skip(MISSING)

    def pytest_pycollect_makemodule(module_path, parent):
        return _WithoutPhysics.from_parent(parent, path=module_path)
