"""The physics cell's viewing option of ``run``: ``--record out.mp4|out.gif`` writes a video of the run."""
from __future__ import annotations

import argparse
import sys

from ..motion.cell_recording import FPS, CellRecorder, checked_video_path
from ..errors import ConfigError
from .console import CommandError, error


def add_record(run: argparse.ArgumentParser) -> None:
    run.add_argument("--record", metavar="OUT.mp4|OUT.gif",
                     help=f"with --backend physics: write a video of the run, {FPS} frames a second (MuJoCo's "
                          "picture where MUJOCO_GL=egl or osmesa gives a GL context, else the links drawn from the "
                          "side and from above); needs imageio (pip install 'bt_exec[record]')")


def check_record(args: argparse.Namespace) -> None:
    """Refuse ``--record`` without the physics backend, to a path it cannot write, or without imageio: before the
    cell is made and anything moves."""
    if args.record is None:
        return
    if args.backend != "physics":
        raise CommandError("--record goes with --backend physics: only a simulated cell can be filmed")
    checked_video_path(args.record)


def start_recording(cell, args: argparse.Namespace) -> CellRecorder | None:
    """The recorder of ``cell`` to ``--record``, started; None without ``--record``."""
    if args.record is None:
        return None
    recorder = CellRecorder(cell, args.record)
    recorder.start()
    return recorder


def stop_recording(recorder: CellRecorder | None) -> None:
    """Close the video and say on stderr what it holds, or why it could not be written (the run's own exit status
    stands: this runs as the command ends, whatever ended it)."""
    if recorder is None:
        return
    try:
        recorder.stop()
    except ConfigError as exc:
        error(str(exc))
        return
    how = "rendered by MuJoCo" if recorder.rendered else "the links drawn"
    print(f"bt-exec: recorded {recorder.frames_written} frames ({how}, {recorder.fps} a second) to {recorder.path}",
          file=sys.stderr)
