"""Tests of the doors onto the physics cell (its view, its video, its dry run): real MuJoCo, mink and ruckig.

The folder skips, with the reason, where one of them cannot be imported (pip install 'bt_exec[physics]'); with
BT_EXEC_REQUIRE_PHYSICS=1 (CI) it fails instead, as tests/physics does.
"""
import os

import pytest

from bt_exec.motion.physics import PhysicsUnavailable, require_physics

try:
    require_physics()
    MISSING = None
except PhysicsUnavailable as missing:
    MISSING = str(missing)


def pytest_collection_modifyitems(config, items):
    if MISSING is None:
        return
    if os.environ.get("BT_EXEC_REQUIRE_PHYSICS") == "1":
        raise pytest.UsageError(f"BT_EXEC_REQUIRE_PHYSICS=1, but {MISSING}")
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.skip(reason=MISSING))
