"""Robonix door tests: the project's gRPC stubs on real gRPC, stand-in Atlas and providers as real processes.

The folder skips, with the reason, where gRPC, protobuf or the built stubs cannot be loaded (install the robonix
extra and run ``python -m bt_exec.robonix.stubs``); with BT_EXEC_REQUIRE_ROBONIX=1 (CI) it fails instead. The
``wire`` fixture is the package of generated stubs, ``bt_exec.robonix.wire``.
"""
import os

import pytest

from bt_exec.robonix.stubs import StubsMissing, load_wire

REQUIRED = os.environ.get("BT_EXEC_REQUIRE_ROBONIX") == "1"

try:
    WIRE = load_wire()
    MISSING = None
except StubsMissing as missing:
    WIRE, MISSING = None, str(missing)

if MISSING is not None:
    # Every test module of this folder is replaced by one that skips (or, when required, fails) as it is
    # collected, so that its imports of grpc and of the stubs never run.

    class _WithoutStubs(pytest.Module):
        def collect(self):
            if REQUIRED:
                pytest.fail(f"BT_EXEC_REQUIRE_ROBONIX=1, but {MISSING}", pytrace=False)
            pytest.skip(MISSING)

    def pytest_pycollect_makemodule(module_path, parent):
        return _WithoutStubs.from_parent(parent, path=module_path)


@pytest.fixture(scope="session")
def wire():
    """The generated stubs package (bt_exec.robonix.wire), every module loaded."""
    return WIRE
