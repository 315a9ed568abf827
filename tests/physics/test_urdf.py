"""The URDF of the simulated iiwa (robot_state_publisher, RViz) is the arm MuJoCo moves: its joints, their limits,
and its chain's forward kinematics against MuJoCo's flange and TCP, computed from the URDF's text alone."""
import math
import subprocess
import sys
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest

from bt_exec.motion.physics.model import JOINT_RANGE, JOINT_SPEED, JOINT_TORQUE, JOINTS, arm_xml
from bt_exec.motion.physics.urdf import iiwa_urdf

JOINT_VECTORS = [
    (0.0,) * 7,
    (0.0, 0.45, 0.0, -1.45, 0.0, 1.2, 0.0),
    (0.7, -0.9, 1.2, 1.6, -2.1, -1.5, 2.5),
    (-2.9, 2.0, -2.9, -2.0, 2.9, 2.0, -3.0),
    (1.1, 0.3, -0.6, -0.4, 0.8, 1.9, 0.2),
]


def _rotation(axis, angle) -> np.ndarray:
    x, y, z = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    c, s, t = math.cos(angle), math.sin(angle), 1 - math.cos(angle)
    return np.array([[t * x * x + c, t * x * y - s * z, t * x * z + s * y],
                     [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
                     [t * x * z - s * y, t * y * z + s * x, t * z * z + c]])


def _rpy(roll, pitch, yaw) -> np.ndarray:
    return _rotation((0, 0, 1), yaw) @ _rotation((0, 1, 0), pitch) @ _rotation((1, 0, 0), roll)


def _numbers(text) -> list[float]:
    return [float(v) for v in (text or "0 0 0").split()]


def urdf_pose(robot: ET.Element, link: str, joints: dict) -> tuple[np.ndarray, np.ndarray]:
    """``link``'s position and rotation in the root's frame, walking the URDF's joints from the root."""
    by_child = {joint.find("child").get("link"): joint for joint in robot.iter("joint")}
    chain = []
    while link in by_child:
        chain.append(by_child[link])
        link = by_child[link].find("parent").get("link")
    position, rotation = np.zeros(3), np.eye(3)
    for joint in reversed(chain):
        origin = joint.find("origin")
        position = position + rotation @ np.array(_numbers(origin.get("xyz")))
        rotation = rotation @ _rpy(*_numbers(origin.get("rpy")))
        if joint.get("type") == "revolute":
            rotation = rotation @ _rotation(_numbers(joint.find("axis").get("xyz")), joints[joint.get("name")])
    return position, rotation


@pytest.fixture(scope="module")
def robot():
    return ET.fromstring(iiwa_urdf())


def test_the_urdf_has_the_model_joints_and_their_limits(robot):
    revolute = [joint for joint in robot.iter("joint") if joint.get("type") == "revolute"]
    assert [joint.get("name") for joint in revolute] == list(JOINTS)
    model = mujoco.MjModel.from_xml_string(arm_xml())
    for joint, span, speed, torque in zip(revolute, JOINT_RANGE, JOINT_SPEED, JOINT_TORQUE):
        limit = joint.find("limit")
        lower, upper = float(limit.get("lower")), float(limit.get("upper"))
        assert (lower, upper) == pytest.approx((-span, span), abs=1e-9)
        assert (lower, upper) == pytest.approx(tuple(model.joint(joint.get("name")).range), abs=1e-5)  # MuJoCo's
        assert float(limit.get("velocity")) == pytest.approx(speed, abs=1e-9)
        assert float(limit.get("effort")) == pytest.approx(torque)
    links = {link.get("name") for link in robot.iter("link")}
    assert {f"link_{i}" for i in range(8)} | {"world", "flange", "tcp"} <= links
    masses = sum(float(mass.get("value")) for mass in robot.iter("mass"))
    assert masses == pytest.approx(float(model.body_mass.sum()))  # the MJCF's arm, link for link


@pytest.mark.parametrize("joints", JOINT_VECTORS)
def test_the_urdf_chain_puts_the_flange_and_tcp_where_mujoco_does(robot, joints):
    model = mujoco.MjModel.from_xml_string(arm_xml())
    data = mujoco.MjData(model)
    for name, value in zip(JOINTS, joints):
        data.qpos[model.jnt_qposadr[model.joint(name).id]] = value
    mujoco.mj_forward(model, data)
    named = dict(zip(JOINTS, joints))
    for frame in ("flange", "tcp"):
        position, rotation = urdf_pose(robot, frame, named)
        site = model.site(frame).id
        assert np.linalg.norm(position - data.site_xpos[site]) < 1e-3, frame
        assert np.abs(rotation - data.site_xmat[site].reshape(3, 3)).max() < 1e-6, frame


def test_the_module_writes_it_for_robot_state_publisher(tmp_path):
    out = tmp_path / "iiwa.urdf"
    written = subprocess.run([sys.executable, "-m", "bt_exec.motion.physics.urdf", str(out)], capture_output=True,
                             text=True, timeout=60)
    assert written.returncode == 0, written.stderr
    assert out.read_text() == iiwa_urdf()
    printed = subprocess.run([sys.executable, "-m", "bt_exec.motion.physics.urdf"], capture_output=True, text=True,
                             timeout=60)
    assert printed.returncode == 0 and printed.stdout == iiwa_urdf()
    refused = subprocess.run([sys.executable, "-m", "bt_exec.motion.physics.urdf", str(tmp_path / "no" / "x.urdf")],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "cannot write" in refused.stderr and "Traceback" not in refused.stderr
