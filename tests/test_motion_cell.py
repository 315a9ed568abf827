"""The cell's named poses file (bt_exec.motion.cell) and the node's moveit settings read from it (no ROS)."""
import json
import math
import pathlib

import pytest

from bt_exec.errors import ConfigError
from bt_exec.motion.cell import missing_poses, read_cell_poses, read_motion_config
from bt_exec.motion.policy import MotionLimits
from bt_exec.motion.skills import TOOL_DOWN, Pose

REPO = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "config" / "grant_cell_poses.yaml"
SCENE = REPO / "examples" / "qwen3" / "scene.json"


def write(tmp_path, text: str) -> pathlib.Path:
    path = tmp_path / "poses.yaml"
    path.write_text(text)
    return path


def test_a_full_and_a_minimal_entry(tmp_path):
    path = write(tmp_path, """
work:
  position: [0.5, 0, 0.45]
hole_1:
  position: [0.6, 0.1, 0.12]
  orientation: [0, 1, 0, 0]
  approach_height: 0.2
socket:
  position: [1, 2, 3]
  approach_height: 0
""")
    poses = read_cell_poses(path)
    assert poses["work"] == Pose((0.5, 0.0, 0.45))
    assert poses["work"].orientation == TOOL_DOWN and poses["work"].approach_height == 0.15
    assert poses["hole_1"] == Pose((0.6, 0.1, 0.12), (0.0, 1.0, 0.0, 0.0), 0.2)
    assert poses["socket"].approach_height == 0.0
    assert all(isinstance(v, float) for v in poses["socket"].position)


def test_the_objects_section_is_the_physics_cells_not_a_place(tmp_path):
    # where parts really are (bt_exec.motion.physics): the MoveIt path reads the places alone
    path = write(tmp_path, "work:\n  position: [0.5, 0, 0.45]\nobjects:\n  cap: [0.6, -0.1, 0.02]\n")
    assert read_cell_poses(path) == {"work": Pose((0.5, 0.0, 0.45))}


def test_a_nearly_unit_quaternion_is_accepted(tmp_path):
    s = math.sqrt(0.5)
    path = write(tmp_path, f"work: {{position: [0, 0, 1], orientation: [{s:.5f}, {s:.5f}, 0, 0]}}\n")
    assert read_cell_poses(path)["work"].orientation[0] == pytest.approx(s, abs=1e-5)


@pytest.mark.parametrize("text, message", [
    ("", "must hold a mapping of place names to poses, got an empty mapping"),
    ("{}", "must hold a mapping of place names to poses, got an empty mapping"),
    ("- work\n", "must hold a mapping of place names to poses, got list"),
    ("work: [1, 2, 3]\n", "work: must be a mapping with position"),
    ("work: {}\n", "work: position [x, y, z] is required"),
    ("work: {orientation: [1, 0, 0, 0]}\n", "work: position [x, y, z] is required"),
    ("work: {position: [1, 2]}\n", "work.position must be 3 finite numbers"),
    ("work: {position: [1, 2, 3, 4]}\n", "work.position must be 3 finite numbers"),
    ("work: {position: [1, 2, x]}\n", "work.position must be 3 finite numbers"),
    ("work: {position: [1, 2, .nan]}\n", "work.position must be 3 finite numbers"),
    ("work: {position: [1, 2, .inf]}\n", "work.position must be 3 finite numbers"),
    ("work: {position: [1, 2, true]}\n", "work.position must be 3 finite numbers"),
    ("work: {position: 1}\n", "work.position must be 3 finite numbers"),
    ("work: {position: [1, 2, 3], orientation: [1, 0, 0]}\n", "work.orientation must be 4 finite numbers"),
    ("work: {position: [1, 2, 3], orientation: [1, 0, 0, .nan]}\n", "work.orientation must be 4 finite numbers"),
    ("work: {position: [1, 2, 3], orientation: down}\n", "work.orientation must be 4 finite numbers"),
    ("work: {position: [1, 2, 3], orientation: [1, 1, 0, 0]}\n", "work.orientation must be a unit quaternion"),
    ("work: {position: [1, 2, 3], orientation: [0, 0, 0, 0]}\n", "work.orientation must be a unit quaternion"),
    ("work: {position: [1, 2, 3], approach_height: -0.1}\n", "work.approach_height must be a number >= 0"),
    ("work: {position: [1, 2, 3], approach_height: high}\n", "work.approach_height must be a number >= 0"),
    ("work: {position: [1, 2, 3], approach_height: .inf}\n", "work.approach_height must be a number >= 0"),
    ("work: {position: [1, 2, 3], height: 0.1, frame: world}\n", "work: unknown key(s) frame, height"),
    ("1: {position: [1, 2, 3]}\n", "place names must be non-empty strings, got 1"),
    ("work: {position: [1, 2, 3]\n", "is not valid YAML"),
])
def test_every_bad_entry_names_the_file_and_the_key(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        read_cell_poses(path)
    assert message in str(caught.value)
    assert str(path) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_missing_or_unreadable_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read cell poses file .*no_such.yaml"):
        read_cell_poses(tmp_path / "no_such.yaml")
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="cannot read cell poses file"):
        read_cell_poses(path)


def test_the_shipped_example_covers_the_grant_scene():
    poses = read_cell_poses(EXAMPLE)
    scene = json.loads(SCENE.read_text())
    assert missing_poses(poses, scene["targets"]) == []
    assert {"work", "hatch_seat", "vacuum_socket", "cap_storage", "hole_1", "hole_2", "hole_3", "hole_4"} <= set(poses)
    assert "placeholder" in EXAMPLE.read_text().lower()


def test_missing_poses_are_listed_sorted():
    assert missing_poses({"work": Pose((0.0, 0.0, 0.0))}, frozenset({"work", "hole_2", "hole_1"})) == ["hole_1",
                                                                                                     "hole_2"]


def test_the_node_settings(tmp_path):
    settings = {"cell_poses_file": str(EXAMPLE), "motion_limits_file": ""}
    poses, limits = read_motion_config(settings)
    assert "work" in poses and limits == MotionLimits()
    limits_file = tmp_path / "limits.yaml"
    limits_file.write_text("max_tilt_deg: 5.0\n")
    _poses, limits = read_motion_config(dict(settings, motion_limits_file=str(limits_file)))
    assert limits.max_tilt_deg == 5.0
    shipped = REPO / "config" / "motion_limits.yaml"
    assert read_motion_config(dict(settings, motion_limits_file=str(shipped)))[1] == MotionLimits()


def test_the_node_settings_name_the_parameter(tmp_path):
    with pytest.raises(ConfigError, match="backend moveit needs cell_poses_file"):
        read_motion_config({"cell_poses_file": "", "motion_limits_file": ""})
    with pytest.raises(ConfigError, match="^motion_limits_file: motion limits: cannot read"):
        read_motion_config({"cell_poses_file": str(EXAMPLE), "motion_limits_file": str(tmp_path / "none.yaml")})
    bad = tmp_path / "limits.yaml"
    bad.write_text("max_tilt: 5\n")
    with pytest.raises(ConfigError, match="^motion_limits_file: .*unknown key"):
        read_motion_config({"cell_poses_file": str(EXAMPLE), "motion_limits_file": str(bad)})
