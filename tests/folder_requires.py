"""A test folder that needs an optional part (ROS 2, the Robonix stubs, the physics extra): where the part cannot be
loaded, every module of the folder is replaced, as it is collected, by one that skips with the reason, or fails when
the environment variable requiring the part is 1 (CI), so that the modules' own imports of the part never run."""
from __future__ import annotations

import os

import pytest


def modules_without(missing: str, required_by: str):
    """The ``pytest_pycollect_makemodule`` hook for the folder's conftest: every module skips saying ``missing``,
    or fails saying it when the environment variable ``required_by`` is ``1``."""
    required = os.environ.get(required_by) == "1"

    class ModuleWithoutPart(pytest.Module):
        def collect(self):
            if required:
                pytest.fail(f"{required_by}=1, but {missing}", pytrace=False)
            pytest.skip(missing)

    def pytest_pycollect_makemodule(module_path, parent):
        return ModuleWithoutPart.from_parent(parent, path=module_path)

    return pytest_pycollect_makemodule
