"""What a viewer of a simulated cell sees: the arm's links, the current skill's target and, where GL works, frames.

``CellView`` reads a cell through its public readings (``PhysicsCell``: ``link_positions``, ``target``,
``joint_speeds``, ``current_joints``, ``render``) and answers the plain dict the control route ``get_cell_view``
serves to every door (``cell_recording`` draws the same links into a video's frames where no GL context can be
made). The cell renders each frame in its renderer's own thread, whichever thread asks. Nothing here imports MuJoCo.
"""
from __future__ import annotations

import base64
import logging
import threading

log = logging.getLogger(__name__)

#: Largest frame a viewer may ask for, pixels a side.
MAX_FRAME_SIDE = 1280
MIN_FRAME_SIDE = 16


def is_cell(backend) -> bool:
    """Whether ``backend`` simulates a cell a viewer can draw (it reads its links and target)."""
    return all(callable(getattr(backend, name, None))
               for name in ("link_positions", "target", "joint_speeds", "current_joints", "render"))


def no_cell(backend) -> dict:
    """The view of a backend that simulates no cell: a viewer shows none (an answer, not a refusal: a console asks
    every executor, and most have no cell)."""
    return {"cell": False, "reason": f"the executor's backend is a {type(backend).__name__}, not a simulated cell "
                                     "(run with --backend physics)"}


# Whether MuJoCo could render, found once per process: a GL context either can be made here or not, and MuJoCo 4
# aborts the process when asked for a renderer again after its GLFW backend failed to start.
_frames_here: bool | None = None
_frames_lock = threading.Lock()


def _render(cell, width: int, height: int) -> bytes | None:
    """``cell.render(width, height)``; None when it failed (logged), as where GL is missing."""
    try:
        return cell.render(width, height)
    except Exception as exc:  # noqa: BLE001 - a frame that cannot be had is no frame; the view goes on
        log.warning("rendering the cell failed: %s: %s", type(exc).__name__, exc)
        return None


class CellView:
    """The views of one simulated cell; see the module docstring."""

    def __init__(self, cell):
        self.cell = cell

    def frames_available(self) -> bool:
        """Whether ``render`` gives pictures here (MuJoCo's offscreen rendering found a GL context)."""
        global _frames_here
        with _frames_lock:
            if _frames_here is None:
                _frames_here = _render(self.cell, MIN_FRAME_SIDE, MIN_FRAME_SIDE) is not None
            return _frames_here

    def view(self, frame_width: int | None = None, frame_height: int | None = None) -> dict:
        """``{cell: true, links: [{name, position}], tool, target, joints, joint_speeds, places, frames}`` (metres,
        radians, in the world frame, the table top at z = 0), plus ``frame`` (a PNG, base64) when a frame size is
        given and frames are available."""
        cell = self.cell
        links = [{"name": name, "position": _rounded(position)} for name, position in cell.link_positions()]
        target = cell.target()
        answer = {"cell": True, "links": links, "tool": links[-1]["position"] if links else None,
                  "target": None if target is None else _rounded(target),
                  "joints": _rounded(cell.current_joints()), "joint_speeds": _rounded(cell.joint_speeds()),
                  "places": self.places(), "frames": self.frames_available()}
        if frame_width is not None and frame_height is not None and answer["frames"]:
            png = _render(cell, frame_width, frame_height)
            if png is not None:
                answer["frame"] = base64.b64encode(png).decode("ascii")
        return answer

    def places(self) -> dict[str, list[float]]:
        """The cell's named poses (where the TCP works at each), by name."""
        skills = getattr(self.cell, "skills", None)
        poses = getattr(skills, "poses", None) or {}
        return {name: _rounded(pose.position) for name, pose in sorted(poses.items())}


def _rounded(values) -> list[float]:
    return [round(float(value), 5) for value in values]
