"""``bt-exec run --backend physics --record``: a video of the run, its frames drawn from the links (or rendered),
and the one-line refusals."""
import subprocess
import sys

import numpy as np
from command_line import REPO, bt_exec_cli

import bt_exec
from bt_exec.motion.cell_recording import _ARM, _TARGET, raster
from bt_exec.motion.cell_view import CellView

EXAMPLES = REPO / "examples" / "qwen3"
RUN = ("run", EXAMPLES / "cap_to_hatch.json", "--scene", EXAMPLES / "scene.json", "--backend", "physics",
       "--physics-speed", "max")


def _frames(path):
    import imageio.v3 as iio
    return [frame[..., :3] for frame in iio.imiter(path)]


def test_a_gif_of_the_run_shows_the_arm_moving(tmp_path):
    video = tmp_path / "run.gif"
    done = bt_exec_cli(*RUN, "--physics-speed", "4", "--record", video)
    assert done.returncode == 0, done.stderr
    assert "terminal: completed" in done.stdout
    assert f"to {video}" in done.stderr and "frames (" in done.stderr
    frames = _frames(video)
    assert len(frames) >= 5  # 10 a second of a run of a second or more
    assert not np.array_equal(frames[0], frames[-1])  # the arm went from home to the hatch
    # every frame shows the arm (a drawing: its orange links; a rendering: MuJoCo's orange links too)
    assert all((np.abs(frame.astype(int) - _ARM).sum(axis=2) < 60).sum() > 200 for frame in frames)


def test_an_mp4_of_the_run_is_written(tmp_path):
    video = tmp_path / "run.mp4"
    done = bt_exec_cli(*RUN, "--record", video)
    assert done.returncode == 0, done.stderr
    assert len(_frames(video)) >= 1


def test_the_drawing_marks_the_target_where_the_cell_says_it_is():
    cell = bt_exec.PhysicsCell(speed="max")
    view = CellView(cell).view()
    view["target"] = [0.6, 0.25, 0.12]  # the hatch seat
    image = raster(view)
    # the side view's ring is centred at x = 0.6, z = 0.12: its centre is background, its ring the target's colour
    column, row = round(4 + (0.6 + 0.35) * 170), round(image.shape[0] - 4 - (0.12 + 0.08) * 170)
    ring = image[row - 9:row + 10, column - 9:column + 10]
    assert (np.abs(ring.astype(int) - _TARGET).sum(axis=2) < 30).sum() > 40
    assert not (np.abs(raster({**view, "target": None})[row - 9:row + 10, column - 9:column + 10].astype(int)
                       - _TARGET).sum(axis=2) < 30).any()


def test_record_is_refused_in_one_line_without_physics_with_a_bad_name_or_without_imageio(tmp_path):
    sim = bt_exec_cli("run", EXAMPLES / "cap_to_hatch.json", "--scene", EXAMPLES / "scene.json", "--record",
                      tmp_path / "run.gif")
    assert sim.returncode == 2 and "--record goes with --backend physics" in sim.stderr
    avi = bt_exec_cli(*RUN, "--record", tmp_path / "run.avi")
    assert avi.returncode == 2 and "the video must be .mp4 or .gif" in avi.stderr
    nowhere = bt_exec_cli(*RUN, "--record", tmp_path / "no" / "run.gif")
    assert nowhere.returncode == 2 and "no folder" in nowhere.stderr
    code = "import sys\nsys.modules['imageio'] = None\nfrom bt_exec.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    done = subprocess.run([sys.executable, "-c", code, *map(str, RUN), "--record", str(tmp_path / "run.gif")],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert "--record needs imageio" in done.stderr and "pip install 'bt_exec[record]'" in done.stderr
    assert not (tmp_path / "run.gif").exists()


def test_a_video_that_cannot_be_written_is_said_in_one_line_and_the_run_keeps_its_exit_status(tmp_path):
    taken = tmp_path / "run.gif"
    taken.mkdir()  # a folder where the video should go: opening it fails once the run started
    done = bt_exec_cli(*RUN, "--record", taken)
    assert done.returncode == 0, done.stderr  # the graph reached its terminal
    assert "terminal: completed" in done.stdout
    (line,) = [line for line in done.stderr.splitlines() if "--record" in line]
    assert line.startswith(f"bt-exec: --record {taken}: ") and "Traceback" not in done.stderr
