"""MuJoCo's offscreen renderer of a cell, alive in one thread of its own from its creation to its close.

A GL context (EGL, OSMesa) is current in one thread: a renderer made, used or freed in another logs
``EGL_BAD_ACCESS``, and the doors ask for frames from many threads (the web server's workers, a recorder's).
So every frame is rendered in the renderer's own thread, and only that thread holds the renderer: it is closed
there when its owner closes, is collected, or the process ends. The thread starts with the first frame asked for:
a cell that is never viewed (a dry run's) has none.
"""
from __future__ import annotations

import concurrent.futures
import queue
import threading
import warnings
import weakref

import mujoco
import numpy as np

#: How long a caller waits for one frame before it goes without (software rendering takes 0.1 to 0.4 s).
FRAME_WAIT_S = 10.0
#: How long closing waits for the render thread to free its renderer.
CLOSE_WAIT_S = 2.0


class CellRenderer:
    """Renders ``model`` in the state of ``data`` (read under ``lock``) from ``camera``, as PNG bytes."""

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, lock: threading.RLock, camera: mujoco.MjvCamera):
        self._scene = (model, data, lock, camera)
        self._requests: queue.SimpleQueue | None = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()
        self._closed = False

    def render(self, width: int, height: int) -> bytes | None:
        """A PNG of ``width`` x ``height`` pixels, or None where no GL context can be made (or the size is beyond
        the model's offscreen buffer), the renderer closed, or the frame not ready within FRAME_WAIT_S."""
        answer: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:  # asked under the lock closing takes: no frame is asked for after the thread was told to end
            if self._closed:
                return None
            self._started().put((width, height, answer))
        try:
            return answer.result(FRAME_WAIT_S)
        except concurrent.futures.TimeoutError:
            return None

    def close(self) -> None:
        """Free the renderer in its thread and end the thread (waiting CLOSE_WAIT_S at most); idempotent."""
        with self._lock:
            self._closed = True
        if self._finalizer is not None:
            self._finalizer()

    def _started(self) -> queue.SimpleQueue:
        """The render thread's requests, the thread started with the first frame asked for; ``_lock`` held."""
        if self._requests is None:
            self._requests = queue.SimpleQueue()
            thread = threading.Thread(target=_serve, args=(self._requests, *self._scene), name="cell-render",
                                      daemon=True)
            thread.start()
            # the thread holds no reference to self: collecting the cell (or the process ending) ends it too
            self._finalizer = weakref.finalize(self, _stop, self._requests, thread)
        return self._requests


def _stop(requests: queue.SimpleQueue, thread: threading.Thread) -> None:
    requests.put(None)
    if thread is not threading.current_thread():
        thread.join(CLOSE_WAIT_S)


def _serve(requests: queue.SimpleQueue, model, data, lock, camera) -> None:
    """The render thread: answers frame requests until it gets None, then frees the renderer here."""
    renderer, size = None, None
    try:
        while True:
            request = requests.get()
            if request is None:
                return
            width, height, answer = request
            try:
                if renderer is None or size != (width, height):
                    if renderer is not None:
                        renderer.close()
                        renderer = None
                    with warnings.catch_warnings():  # GLFW warns of a missing display before it fails
                        warnings.simplefilter("ignore")
                        try:
                            renderer = mujoco.Renderer(model, height, width)
                        except Exception:  # noqa: BLE001 - no GL context here, or a size beyond the buffer
                            size = None
                            answer.set_result(None)
                            continue
                    size = (width, height)
                with lock:
                    renderer.update_scene(data, camera=camera)
                answer.set_result(_png(renderer.render()))
            except Exception as exc:  # noqa: BLE001 - the caller learns why its frame failed
                answer.set_exception(exc)
    finally:
        if renderer is not None:
            renderer.close()


def _png(pixels: np.ndarray) -> bytes:
    """RGB pixels (h, w, 3) as PNG bytes (zlib, no filter)."""
    import struct
    import zlib

    height, width, _ = pixels.shape
    rows = b"".join(b"\x00" + pixels[row].tobytes() for row in range(height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 1)) + chunk(b"IEND", b"")
