"""Motion policy: J7 range, TCP tilt, joint jumps, freshness, malformed input, limits file."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from bt_exec.errors import ConfigError
from bt_exec.motion.policy import (
    EPS,
    MotionCheck,
    MotionLimits,
    MotionPolicy,
    TrajectoryPoint,
    tcp_tilt_deg,
)

REPO = Path(__file__).resolve().parents[1]
LIMITS_FILE = REPO / "config" / "motion_limits.yaml"

FRESH = dict(joint_state_age_s=0.1, scene_age_s=0.2)


def quat_tilted(tilt_deg: float, yaw_deg: float = 0.0, axis: str = "x") -> tuple[float, float, float, float]:
    """TCP pointing straight down, then tilted by tilt_deg about world x (or y), then yawed about world z."""
    a = math.radians(180.0 - tilt_deg)  # a rotation of 180° about x points tool z straight down
    s, c = math.sin(a / 2), math.cos(a / 2)
    q = (s, 0.0, 0.0, c) if axis == "x" else (0.0, s, 0.0, c)
    h = math.radians(yaw_deg) / 2
    yz = (0.0, 0.0, math.sin(h), math.cos(h))
    return _qmul(yz, q)


def _qmul(p, q):
    px, py, pz, pw = p
    qx, qy, qz, qw = q
    return (
        pw * qx + px * qw + py * qz - pz * qy,
        pw * qy - px * qz + py * qw + pz * qx,
        pw * qz + px * qy - py * qx + pz * qw,
        pw * qw - px * qx - py * qy - pz * qz,
    )


DOWN = quat_tilted(0.0)


def pt(j7: float = 0.0, tilt: float = 0.0, base=(0.0, 0.5, 0.0, -1.2, 0.0, 1.0)) -> TrajectoryPoint:
    return TrajectoryPoint(positions=tuple(base) + (j7,), tcp_quat=quat_tilted(tilt))


def good_trajectory(n: int = 20) -> list[TrajectoryPoint]:
    out = []
    for i in range(n):
        f = i / max(n - 1, 1)
        base = (0.3 * f, 0.5 - 0.2 * f, 0.1 * f, -1.2 + 0.3 * f, 0.05 * f, 1.0 + 0.2 * f)
        out.append(pt(j7=-0.5 + 1.0 * f, tilt=5.0 * f, base=base))
    return out


def check(points, **ages) -> MotionCheck:
    return MotionPolicy().check(points, **{**FRESH, **ages})


# ---------------------------------------------------------------- tcp_tilt_deg


class TestTilt:
    def test_straight_down_is_zero(self):
        assert tcp_tilt_deg(DOWN) == pytest.approx(0.0, abs=1e-9)

    def test_identity_points_up(self):
        assert tcp_tilt_deg((0.0, 0.0, 0.0, 1.0)) == pytest.approx(180.0)

    @pytest.mark.parametrize("tilt", [1.0, 10.0, 25.0, 90.0, 135.0])
    @pytest.mark.parametrize("axis", ["x", "y"])
    def test_known_tilts(self, tilt, axis):
        assert tcp_tilt_deg(quat_tilted(tilt, axis=axis)) == pytest.approx(tilt, abs=1e-9)

    @pytest.mark.parametrize("yaw", [0.0, 45.0, 170.0, -120.0])
    def test_yaw_about_world_z_does_not_change_tilt(self, yaw):
        assert tcp_tilt_deg(quat_tilted(7.0, yaw_deg=yaw)) == pytest.approx(7.0, abs=1e-9)

    def test_sign_and_scale_do_not_matter(self):
        q = quat_tilted(12.0, yaw_deg=30.0)
        assert tcp_tilt_deg(tuple(-c for c in q)) == pytest.approx(12.0)
        assert tcp_tilt_deg(tuple(3 * c for c in q)) == pytest.approx(12.0)

    @pytest.mark.parametrize("bad", [(0, 0, 0, 0), (math.nan, 0, 0, 1), (1, 0, 0), "abcd", None])
    def test_bad_quaternion_raises_value_error(self, bad):
        with pytest.raises(ValueError):
            tcp_tilt_deg(bad)


# ---------------------------------------------------------------- good trajectories


class TestGood:
    def test_long_good_trajectory_passes(self):
        res = check(good_trajectory(500))
        assert res == MotionCheck(True, None, "", None)

    def test_single_point_passes(self):
        assert check([pt()]).ok

    def test_lists_accepted_as_sequences(self):
        p = TrajectoryPoint(positions=[0.0] * 7, tcp_quat=list(DOWN))
        assert check([p, p]).ok

    def test_default_policy_uses_default_limits(self):
        assert MotionPolicy().limits == MotionLimits()


# ---------------------------------------------------------------- J7 range


class TestJ7:
    @pytest.mark.parametrize("deg", [90.0, -90.0, 0.0, 45.0])
    def test_bounds_inclusive(self, deg):
        assert check([pt(j7=math.radians(deg))]).ok

    def test_exact_half_pi_passes(self):
        assert check([pt(j7=math.pi / 2)]).ok
        assert check([pt(j7=-math.pi / 2)]).ok

    @pytest.mark.parametrize("deg", [90.0001, -90.0001, 120.0, -170.0, 180.0])
    def test_beyond_fails(self, deg):
        res = check([pt(j7=math.radians(deg))])
        assert not res.ok and res.violation == "j7_range" and res.index == 0
        assert res.reason.startswith("point 0: joint 7 at ")
        assert "outside work 0.00 ± 1.57 rad" in res.reason

    def test_reason_format(self):
        res = check([pt()] * 12 + [pt(j7=1.62)])
        assert res.reason == "point 12: joint 7 at 1.62 rad is outside work 0.00 ± 1.57 rad"
        assert res.index == 12

    def test_bad_intermediate_point_under_good_end_pose(self):
        traj = good_trajectory(21)
        bad = dataclasses.replace(traj[10], positions=traj[10].positions[:6] + (math.radians(-170.0),))
        traj[10] = bad
        assert check([traj[0]]).ok and check([traj[-1]]).ok  # start and end poses are fine
        res = MotionPolicy(MotionLimits(max_joint_step_rad=10.0)).check(traj, **FRESH)
        assert not res.ok and res.index == 10 and res.violation == "j7_range"
        assert "point 10" in res.reason

    def test_work_value_shifts_the_window(self):
        pol = MotionPolicy(MotionLimits(j7_work_rad=1.0))
        assert pol.check([pt(j7=1.0 + math.pi / 2)], **FRESH).ok
        assert pol.check([pt(j7=1.0 - math.pi / 2)], **FRESH).ok
        res = pol.check([pt(j7=-0.6)], **FRESH)
        assert res.violation == "j7_range"
        assert "outside work 1.00 ± 1.57 rad" in res.reason


# ---------------------------------------------------------------- TCP tilt


class TestTcpTilt:
    def test_exactly_ten_degrees_passes(self):
        assert check([pt(tilt=10.0)]).ok

    @pytest.mark.parametrize("tilt", [10.01, 25.0, 90.0, 180.0])
    def test_beyond_fails(self, tilt):
        res = check([pt(tilt=tilt)])
        assert not res.ok and res.violation == "tcp_tilt" and res.index == 0
        assert "exceeds 10.00°" in res.reason

    def test_bad_intermediate_tilt_under_good_end_pose(self):
        traj = good_trajectory(15)
        traj[7] = TrajectoryPoint(positions=traj[7].positions, tcp_quat=quat_tilted(25.0, yaw_deg=40.0))
        assert check([traj[0]]).ok and check([traj[-1]]).ok
        res = check(traj)
        assert not res.ok and res.index == 7 and res.violation == "tcp_tilt"
        assert res.reason.startswith("point 7: TCP tilt 25.00°")

    def test_custom_limit(self):
        pol = MotionPolicy(MotionLimits(max_tilt_deg=30.0))
        assert pol.check([pt(tilt=25.0)], **FRESH).ok


# ---------------------------------------------------------------- joint jumps


class TestJointJump:
    def test_wrist_flip_detected(self):
        # joint 6 goes from just under +180° to just over -180° (the same pose, a 2π-ish swing)
        a = pt(base=(0.0, 0.5, 0.0, -1.2, 0.0, math.radians(179.0)))
        b = pt(base=(0.0, 0.5, 0.0, -1.2, 0.0, math.radians(-179.0)))
        res = check([pt(base=(0.0, 0.5, 0.0, -1.2, 0.0, math.radians(178.0))), a, b])
        assert not res.ok and res.violation == "joint_jump" and res.index == 2
        assert res.reason.startswith("point 2: joint 6 jumps 6.25 rad from point 1")

    def test_jump_on_joint_one(self):
        a = pt(base=(-1.3, 0.5, 0.0, -1.2, 0.0, 1.0))
        b = pt(base=(1.3, 0.5, 0.0, -1.2, 0.0, 1.0))
        res = check([a, b])
        assert res.violation == "joint_jump" and res.index == 1 and "joint 1 jumps 2.60 rad" in res.reason

    def test_step_exactly_at_limit_passes(self):
        a = pt(base=(-1.25, 0.5, 0.0, -1.2, 0.0, 1.0))
        b = pt(base=(1.25, 0.5, 0.0, -1.2, 0.0, 1.0))
        assert check([a, b]).ok

    def test_j7_jump_within_range_is_still_a_jump(self):
        pol = MotionPolicy(MotionLimits(j7_half_range_rad=math.pi, max_joint_step_rad=2.5))
        res = pol.check([pt(j7=-1.5), pt(j7=1.5)], **FRESH)
        assert res.violation == "joint_jump" and "joint 7" in res.reason

    def test_first_failure_wins(self):
        # point 3 has a jump, point 5 a bad J7: the earlier one is reported
        traj = [pt()] * 3 + [pt(base=(2.6, 0.5, 0.0, -1.2, 0.0, 1.0))] + [pt(base=(2.6, 0.5, 0.0, -1.2, 0.0, 1.0))]
        traj.append(pt(j7=2.0, base=(2.6, 0.5, 0.0, -1.2, 0.0, 1.0)))
        res = check(traj)
        assert res.index == 3 and res.violation == "joint_jump"

    def test_within_point_order_j7_before_tilt(self):
        res = check([pt(j7=3.0, tilt=30.0)])
        assert res.violation == "j7_range"


# ---------------------------------------------------------------- freshness


class TestFreshness:
    def test_stale_joint_states(self):
        res = check(good_trajectory(), joint_state_age_s=0.51)
        assert res == MotionCheck(False, None, res.reason, "stale_joint_states")
        assert "joint states are 0.51 s old (max 0.50 s)" == res.reason

    def test_stale_scene(self):
        res = check(good_trajectory(), scene_age_s=1.5)
        assert not res.ok and res.index is None and res.violation == "stale_scene"
        assert "planning scene" in res.reason

    def test_ages_on_the_bound_pass(self):
        assert check(good_trajectory(), joint_state_age_s=0.5, scene_age_s=1.0).ok

    def test_freshness_checked_before_points(self):
        res = check([pt(j7=3.0)], joint_state_age_s=2.0)
        assert res.violation == "stale_joint_states" and res.index is None
        res = check([], scene_age_s=2.0)
        assert res.violation == "stale_scene"

    def test_joint_states_before_scene(self):
        assert check([pt()], joint_state_age_s=9.0, scene_age_s=9.0).violation == "stale_joint_states"

    @pytest.mark.parametrize("age", [math.nan, math.inf, -0.1, None, "0.1", True])
    def test_unusable_age_counts_as_stale(self, age):
        res = check([pt()], joint_state_age_s=age)
        assert not res.ok and res.violation == "stale_joint_states" and res.index is None
        res = check([pt()], scene_age_s=age)
        assert not res.ok and res.violation == "stale_scene"

    def test_custom_limits(self):
        pol = MotionPolicy(MotionLimits(max_joint_state_age_s=2.0, max_scene_age_s=3.0))
        assert pol.check([pt()], joint_state_age_s=1.9, scene_age_s=2.9).ok


# ---------------------------------------------------------------- empty / malformed


class TestEmptyAndMalformed:
    def test_empty(self):
        res = check([])
        assert res == MotionCheck(False, None, "trajectory is empty", "empty")

    def test_empty_tuple_and_generator(self):
        assert check(()).violation == "empty"
        assert check(p for p in []).violation == "empty"

    @pytest.mark.parametrize("points", [None, 5, "abc"])
    def test_not_a_sequence(self, points):
        res = check(points)
        assert not res.ok and res.violation == "malformed"

    @pytest.mark.parametrize(
        "point, words",
        [
            (TrajectoryPoint((0.0,) * 6, DOWN), "expected 7 joint positions, got 6"),
            (TrajectoryPoint((0.0,) * 8, DOWN), "expected 7 joint positions, got 8"),
            (TrajectoryPoint((0.0,) * 6 + (math.nan,), DOWN), "joint 7 position nan"),
            (TrajectoryPoint((math.inf,) + (0.0,) * 6, DOWN), "joint 1 position inf"),
            (TrajectoryPoint((0.0,) * 6 + ("1",), DOWN), "joint 7 position '1'"),
            (TrajectoryPoint((0.0,) * 7, (1.0, 0.0, 0.0)), "4 components"),
            (TrajectoryPoint((0.0,) * 7, (1.0, 0.0, 0.0, math.nan)), "not a finite number"),
            (TrajectoryPoint((0.0,) * 7, (0.0, 0.0, 0.0, 0.0)), "not normalised"),
            (TrajectoryPoint((0.0,) * 7, (2.0, 0.0, 0.0, 0.0)), "not normalised"),
            (TrajectoryPoint(None, DOWN), "not a trajectory point"),
            (TrajectoryPoint(5, DOWN), "sequences of numbers"),
            ("not a point", "not a trajectory point"),
        ],
    )
    def test_malformed_point_reported_not_raised(self, point, words):
        res = check([pt(), pt(), point, pt()])
        assert not res.ok and res.index == 2 and res.violation == "malformed"
        assert res.reason.startswith("point 2: ") and words in res.reason

    def test_nearly_unit_quaternion_accepted(self):
        q = tuple(c * 1.0005 for c in DOWN)
        assert check([TrajectoryPoint((0.0,) * 7, q)]).ok


# ---------------------------------------------------------------- limits and the YAML file


class TestLimits:
    def test_defaults(self):
        lim = MotionLimits()
        assert lim.j7_work_rad == 0.0 and lim.j7_half_range_rad == math.pi / 2
        assert (lim.max_tilt_deg, lim.max_joint_step_rad) == (10.0, 2.5)
        assert (lim.max_joint_state_age_s, lim.max_scene_age_s) == (0.5, 1.0)

    def test_frozen(self):
        with pytest.raises(dataclasses.FrozenInstanceError):
            MotionLimits().max_tilt_deg = 20.0  # type: ignore[misc]

    def test_shipped_file_matches_defaults(self):
        assert MotionLimits.from_yaml(LIMITS_FILE) == MotionLimits()
        assert MotionLimits.from_yaml(str(LIMITS_FILE)) == MotionLimits()

    def test_round_trip(self, tmp_path):
        import yaml

        lim = MotionLimits(j7_work_rad=0.3, j7_half_range_rad=1.2, max_tilt_deg=15,
                           max_joint_step_rad=1.0, max_joint_state_age_s=0.25, max_scene_age_s=2)
        f = tmp_path / "limits.yaml"
        f.write_text(yaml.safe_dump(dataclasses.asdict(lim)))
        back = MotionLimits.from_yaml(f)
        assert back == lim and isinstance(back.max_tilt_deg, float)

    def test_missing_keys_keep_defaults(self, tmp_path):
        f = tmp_path / "limits.yaml"
        f.write_text("max_tilt_deg: 12\n")
        assert MotionLimits.from_yaml(f) == MotionLimits(max_tilt_deg=12.0)

    @pytest.mark.parametrize(
        "text, words",
        [
            ("", "mapping"),
            ("- 1\n- 2\n", "mapping"),
            ("max_tilt: 10\n", "unknown key(s) max_tilt"),
            ("max_tilt_deg: [1\n", "not valid YAML"),
            ("max_tilt_deg: ten\n", "max_tilt_deg must be a finite number"),
            ("max_tilt_deg: true\n", "max_tilt_deg must be a finite number"),
            ("max_tilt_deg: .nan\n", "max_tilt_deg must be a finite number"),
            ("max_tilt_deg: -1\n", "max_tilt_deg must be in [0, 180]"),
            ("max_joint_step_rad: 0\n", "max_joint_step_rad must be > 0"),
            ("max_joint_state_age_s: -0.5\n", "max_joint_state_age_s must be > 0"),
            ("max_scene_age_s: 0\n", "max_scene_age_s must be > 0"),
            ("j7_half_range_rad: 0\n", "j7_half_range_rad must be in (0, π]"),
            ("j7_half_range_rad: 4\n", "j7_half_range_rad must be in (0, π]"),
            ("j7_work_rad: 4\n", "j7_work_rad must be within ±π"),
        ],
    )
    def test_bad_files(self, tmp_path, text, words):
        f = tmp_path / "limits.yaml"
        f.write_text(text)
        with pytest.raises(ConfigError) as exc:
            MotionLimits.from_yaml(f)
        assert words in str(exc.value)

    def test_missing_file(self, tmp_path):
        with pytest.raises(ConfigError, match="cannot read"):
            MotionLimits.from_yaml(tmp_path / "nope.yaml")

    def test_constructor_validates(self):
        with pytest.raises(ConfigError):
            MotionLimits(max_tilt_deg=math.inf)

    def test_eps_is_tiny(self):
        assert 0 < EPS <= 1e-9
