"""The Grant cell in physics: a MuJoCo simulation of the KUKA LBR iiwa 14 R820 cell behind the Motion seam.

``PhysicsCell`` (also ``bt_exec.PhysicsCell``) is a capability backend serving Qwen3 Grant skill calls with
the same ``GrantMotionSkills`` and ``MotionPolicy`` as the MoveItPy path; ``MujocoMotion`` is the Motion
implementation under it. Both need the ``physics`` extra (mujoco, mink, ruckig): asking for either without
it raises :class:`PhysicsUnavailable`, one line naming ``pip install 'bt_exec[physics]'``. The errors of
this package import without the extra.
"""
import os
from importlib import import_module

from bt_exec.motion.physics.errors import INSTALL, CellRefused, PhysicsUnavailable

_NEEDS_EXTRA = {"PhysicsCell": ".backend", "MujocoMotion": ".cell"}
__all__ = ["CellRefused", "MujocoMotion", "PhysicsCell", "PhysicsUnavailable"]


def require_physics() -> None:
    """PhysicsUnavailable naming the extra when mujoco, mink or ruckig cannot be imported."""
    for library in ("mujoco", "mink", "ruckig"):
        try:
            import_module(library)
        except ImportError as exc:
            raise PhysicsUnavailable(f"the physics cell needs {library}, which cannot be imported ({exc}): "
                                     f"{INSTALL}") from None
        except Exception as exc:  # noqa: BLE001 - mujoco loads the GL library MUJOCO_GL names as it is imported
            gl = os.environ.get("MUJOCO_GL")
            hint = f"; MUJOCO_GL={gl}: is its GL library installed?" if gl else ""
            raise PhysicsUnavailable(f"{library} fails to import: {type(exc).__name__}: {exc}{hint}") from None


def __getattr__(name: str):
    module = _NEEDS_EXTRA.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    require_physics()
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value
