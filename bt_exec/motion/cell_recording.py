"""A video of a simulated cell's run: ``CellRecorder`` writes what a viewer sees, a frame every 1/fps s of wall time.

Each frame is MuJoCo's rendered picture where a GL context can be made (``MUJOCO_GL=egl`` or ``osmesa``), else
the links drawn from their positions (``raster``: side and top view, the target marked, numpy only). A frame
that takes longer than a period to make is shown again for the periods it missed, so the video lasts as long as
the run did (at ``--physics-speed 1``, the motion's own time). Writing needs imageio (the ``record`` extra; MP4
also imageio-ffmpeg): without it, ``RecordingUnavailable`` names the extra.
"""
from __future__ import annotations

import base64
import io
import threading
import time
from pathlib import Path

from bt_exec.errors import ConfigError
from bt_exec.motion.cell_view import CellView

INSTALL = "pip install 'bt_exec[record]'"
FORMATS = (".mp4", ".gif")
FPS = 10
# Video frames: a multiple of 16 a side, what H.264 encoders take without resizing.
WIDTH, HEIGHT = 480, 272
# Each view: x (forward) from X0 to the right; the side view's z up from Z0, the top view's y up to Y_TOP.
_SCALE = 170.0  # px per metre
_X0, _Z0, _Y_TOP = -0.35, -0.08, 0.75
_BACKGROUND, _GROUND, _PLACE = (243, 245, 248), (150, 158, 170), (93, 103, 120)
_ARM, _JOINT, _TOOL, _TARGET = (224, 112, 32), (160, 72, 16), (31, 95, 191), (180, 35, 24)


class RecordingUnavailable(ConfigError):
    """imageio (or, for MP4, imageio-ffmpeg) cannot be imported: the record extra is not installed."""


def checked_video_path(path: str | Path) -> Path:
    """``path`` once it names an MP4 or GIF in a folder that exists and imageio can write it; ConfigError (one
    line) otherwise."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ConfigError(f"--record {path}: the video must be .mp4 or .gif")
    if not path.parent.is_dir():
        raise ConfigError(f"--record {path}: no folder {path.parent}")
    _require("imageio")
    if path.suffix.lower() == ".mp4":
        _require("imageio_ffmpeg")
    return path


def _require(library: str) -> None:
    try:
        __import__(library)
    except ImportError:
        raise RecordingUnavailable(f"--record needs {library}, which cannot be imported: {INSTALL}") from None


class CellRecorder:
    """Records ``cell`` (a simulated cell, see ``cell_view``) to ``path`` (.mp4 or .gif) from ``start`` to ``stop``,
    in a thread of its own."""

    def __init__(self, cell, path: str | Path, fps: int = FPS):
        self.path = checked_video_path(path)
        self.fps = fps
        self.view = CellView(cell)
        self.frames_written = 0
        self.rendered = False
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._record, name="cell recorder", daemon=True)

    def start(self) -> None:
        """Begin recording (the first frame at once)."""
        self.rendered = self.view.frames_available()
        self._thread.start()

    def stop(self) -> None:
        """End the video with a last frame and close the file; ConfigError naming the file when it could not be
        written."""
        self._stop.set()
        self._thread.join()
        if self.error is not None:
            raise ConfigError(f"--record {self.path}: {self.error}")

    def frame(self):
        """The cell now, as an RGB image (h, w, 3) of uint8."""
        if self.rendered:
            import imageio.v3 as iio

            answer = self.view.view(WIDTH, HEIGHT)
            if "frame" in answer:
                return iio.imread(io.BytesIO(base64.b64decode(answer["frame"])), extension=".png")[..., :3]
            return raster(answer)
        return raster(self.view.view())

    def _record(self) -> None:
        import imageio.v2 as imageio

        options = {"fps": self.fps, "macro_block_size": 16} if self.path.suffix.lower() == ".mp4" else \
            {"duration": 1000 / self.fps, "loop": 0}
        try:
            with imageio.get_writer(self.path, **options) as writer:
                period = 1.0 / self.fps
                began = time.perf_counter()
                while True:
                    stopping = self._stop.is_set()
                    image = self.frame()
                    due = int((time.perf_counter() - began) / period) + 1  # frames the video should hold by now
                    for _ in range(max(due - self.frames_written, 1)):
                        writer.append_data(image)
                        self.frames_written += 1
                    if stopping:
                        return
                    self._stop.wait(max(began + self.frames_written * period - time.perf_counter(), 0.0))
        except Exception as exc:  # noqa: BLE001 - the run goes on; stop() reports the video lost, in one line
            self.error = f"{type(exc).__name__}: {exc}"


def raster(view: dict, width: int = WIDTH, height: int = HEIGHT):
    """The links of ``view`` (a ``CellView.view``) drawn into an RGB image: the side view (x, z) on the left, the
    top view (x, y) on the right, each link a line, the tool tip a dot, the target a ring, the named places dots."""
    import numpy as np

    image = np.empty((height, width, 3), dtype=np.uint8)
    image[:] = _BACKGROUND
    half = width // 2
    ground = height - 4 - (0 - _Z0) * _SCALE
    image[int(round(ground)), 2:half - 4] = _GROUND
    image[4:height - 4, half] = _GROUND

    def side(position):
        x, _, z = position
        return 4 + (x - _X0) * _SCALE, height - 4 - (z - _Z0) * _SCALE

    def top(position):
        x, y, _ = position
        return half + 4 + (x - _X0) * _SCALE, 4 + (_Y_TOP - y) * _SCALE

    def window(xs, ys, margin):
        """The pixels' rows and columns around the points (within the image), and that part of the image."""
        left, right = max(int(min(xs) - margin), 0), min(int(max(xs) + margin) + 2, width)
        low, high = max(int(min(ys) - margin), 0), min(int(max(ys) + margin) + 2, height)
        if left >= right or low >= high:
            return None
        rows, cols = np.mgrid[low:high, left:right].astype(np.float32)
        return rows, cols, image[low:high, left:right]

    def disc(centre, radius, colour, ring=False):
        part = window((centre[0],), (centre[1],), radius + 2)
        if part is not None:
            rows, cols, pixels = part
            distance = np.hypot(cols - centre[0], rows - centre[1])
            pixels[(np.abs(distance - radius) < 1.2) if ring else (distance <= radius)] = colour

    def line(a, b, thickness, colour):
        part = window((a[0], b[0]), (a[1], b[1]), thickness)
        if part is None:
            return
        rows, cols, pixels = part
        ax, ay = a
        dx, dy = b[0] - ax, b[1] - ay
        length2 = dx * dx + dy * dy
        t = np.zeros_like(cols) if length2 == 0 else np.clip(((cols - ax) * dx + (rows - ay) * dy) / length2, 0, 1)
        pixels[np.hypot(cols - ax - t * dx, rows - ay - t * dy) <= thickness / 2] = colour

    for project in (side, top):
        for position in view.get("places", {}).values():
            disc(project(position), 2.0, _PLACE)
        points = [project(link["position"]) for link in view["links"]]
        for a, b in zip(points, points[1:]):
            line(a, b, 7, _ARM)
        for point in points[:-1]:
            disc(point, 2.5, _JOINT)
        if points:
            disc(points[-1], 4.5, _TOOL)
        if view.get("target") is not None:
            centre = project(view["target"])
            disc(centre, 8, _TARGET, ring=True)
            line((centre[0] - 11, centre[1]), (centre[0] + 11, centre[1]), 2, _TARGET)
            line((centre[0], centre[1] - 11), (centre[0], centre[1] + 11), 2, _TARGET)
    return image
