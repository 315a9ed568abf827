"""The physics cell's refusals: each a ConfigError, so every door words it as one line."""
from __future__ import annotations

from bt_exec.errors import ConfigError

INSTALL = "pip install 'bt_exec[physics]'"


class PhysicsUnavailable(ConfigError):
    """MuJoCo, mink or ruckig cannot be imported: the physics extra is not installed."""


class CellRefused(ConfigError):
    """The cell cannot start as asked: a named place out of reach, a scene or ``objects`` contradicting the cell."""
