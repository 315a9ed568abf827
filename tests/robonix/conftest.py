"""Robonix door tests: the project's gRPC stubs on real gRPC, stand-in Atlas and providers as real processes.

The folder skips, with the reason, where gRPC, protobuf or the built stubs cannot be loaded (install the robonix
extra and run ``python -m bt_exec.robonix.stubs``); with BT_EXEC_REQUIRE_ROBONIX=1 (CI) it fails instead. The
``wire`` fixture is the package of generated stubs, ``bt_exec.robonix.wire``.
"""

import pytest
from folder_requires import modules_without

from bt_exec.robonix.stubs import StubsMissing, load_wire

try:
    WIRE = load_wire()
    MISSING = None
except StubsMissing as missing:
    WIRE, MISSING = None, str(missing)

if MISSING is not None:
    pytest_pycollect_makemodule = modules_without(MISSING, "BT_EXEC_REQUIRE_ROBONIX")


@pytest.fixture(scope="session")
def wire():
    """The generated stubs package (bt_exec.robonix.wire), every module loaded."""
    return WIRE
