"""Jerk-limited trajectories with ruckig, within the arm's rated joint speeds, sampled every 10 ms.

A joint move goes along the straight line between its two joint vectors (phase-synchronised: every joint
starts, cruises and stops together). Between two IK solutions of the tool pointing down with A3 and A5 near 0
the arm stays in its plane and the tool keeps pointing down all the way. A Cartesian move (the axial moves
of lowering and lifting, and any joint move whose tool would tilt or whose line collides) follows IK waypoints
1 cm apart on the straight TCP line, timed by one jerk-limited profile of the path parameter, slow enough that
no joint exceeds its limits.

:func:`braking` is the stop: from the reference's current position, speed and acceleration to rest, with the
stop's harder (but still jerk-limited) deceleration.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import ruckig

from bt_exec.motion.physics.model import JOINT_SPEED

SAMPLE_S = 0.01  # spacing of the points planned, checked by the policy and for collisions
# Acceleration and jerk limits: the data sheet gives none, so multiples of the rated speed (per s, per s^2).
ACCELERATION_PER_SPEED, JERK_PER_SPEED = 3.0, 20.0
STOP_ACCELERATION_PER_SPEED, STOP_JERK_PER_SPEED = 16.0, 400.0
WAYPOINT_SPACING_M = 0.01

_SPEED = np.array(JOINT_SPEED)


class TrajectoryError(Exception):
    """No trajectory within the limits (ruckig refused the input)."""


@dataclass
class Trajectory:
    """Joint positions and speeds at ``times`` (s from its start, every SAMPLE_S and its end), followed between
    the samples by cubic Hermite interpolation (:meth:`dense`)."""

    times: np.ndarray       # (n,)
    positions: np.ndarray   # (n, 7) rad
    velocities: np.ndarray  # (n, 7) rad/s

    @property
    def duration(self) -> float:
        return float(self.times[-1])

    def dense(self, period: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Positions, speeds and accelerations every ``period`` from 0 to the end (as :meth:`at`, all at once)."""
        times = self.times
        t = np.append(np.arange(int(np.ceil(times[-1] / period - 1e-9))) * period, times[-1])
        k = np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(times) - 2)
        h = (times[k + 1] - times[k])[:, None]
        u = ((t - times[k])[:, None] / h)
        q0, q1 = self.positions[k], self.positions[k + 1]
        v0, v1 = self.velocities[k] * h, self.velocities[k + 1] * h
        u2, u3 = u * u, u * u * u
        position = (2 * u3 - 3 * u2 + 1) * q0 + (u3 - 2 * u2 + u) * v0 + (-2 * u3 + 3 * u2) * q1 + (u3 - u2) * v1
        speed = ((6 * u2 - 6 * u) * (q0 - q1) + (3 * u2 - 4 * u + 1) * v0 + (3 * u2 - 2 * u) * v1) / h
        acceleration = ((12 * u - 6) * (q0 - q1) + (6 * u - 4) * v0 + (6 * u - 2) * v1) / (h * h)
        speed[-1], acceleration[-1] = 0.0, 0.0
        return position, speed, acceleration


def _sample_times(duration: float) -> np.ndarray:
    count = max(int(math.ceil(duration / SAMPLE_S - 1e-9)), 1)
    return np.append(np.arange(count) * SAMPLE_S, duration)


def joint_move(start, goal, speed_scale: float = 1.0) -> Trajectory:
    """From rest at ``start`` to rest at ``goal`` along the joint-space line."""
    start, goal = np.asarray(start, dtype=float), np.asarray(goal, dtype=float)
    if np.max(np.abs(goal - start)) < 1e-9:
        return Trajectory(np.array([0.0, SAMPLE_S]), np.array([start, goal]), np.zeros((2, 7)))
    generator, inputs, result = ruckig.Ruckig(7), ruckig.InputParameter(7), ruckig.Trajectory(7)
    inputs.current_position, inputs.target_position = list(start), list(goal)
    inputs.max_velocity = list(_SPEED * speed_scale)
    inputs.max_acceleration = list(_SPEED * ACCELERATION_PER_SPEED)
    inputs.max_jerk = list(_SPEED * JERK_PER_SPEED)
    inputs.synchronization = ruckig.Synchronization.Phase
    if generator.calculate(inputs, result) not in (ruckig.Result.Working, ruckig.Result.Finished):
        raise TrajectoryError("ruckig found no trajectory between the joint vectors")
    return _sampled(result, _sample_times(result.duration))


def path_move(waypoints: np.ndarray, speed_scale: float = 1.0) -> Trajectory:
    """Through joint ``waypoints`` (k, 7) evenly spaced along a TCP line, from rest to rest, one jerk-limited
    profile of the path parameter s in [0, 1] kept slow enough for every joint's speed and acceleration."""
    segments = len(waypoints) - 1
    slope = np.max(np.abs(np.diff(waypoints, axis=0)), axis=0) * segments  # max |dq/ds| per joint
    slope = np.maximum(slope, 1e-9)
    max_speed = float(np.min(_SPEED * speed_scale / slope))
    max_acceleration = float(np.min(_SPEED * ACCELERATION_PER_SPEED / slope))
    max_jerk = float(np.min(_SPEED * JERK_PER_SPEED / slope))
    generator, inputs, profile = ruckig.Ruckig(1), ruckig.InputParameter(1), ruckig.Trajectory(1)
    inputs.current_position, inputs.target_position = [0.0], [1.0]
    inputs.max_velocity, inputs.max_acceleration, inputs.max_jerk = [max_speed], [max_acceleration], [max_jerk]
    if generator.calculate(inputs, profile) not in (ruckig.Result.Working, ruckig.Result.Finished):
        raise TrajectoryError("ruckig found no timing for the Cartesian path")
    times = _sample_times(profile.duration)
    positions, velocities = np.empty((len(times), 7)), np.empty((len(times), 7))
    for i, t in enumerate(times):
        (s,), (s_speed,), _ = profile.at_time(float(t))
        where = min(max(s, 0.0), 1.0) * segments
        k = min(int(where), segments - 1)
        fraction = where - k
        step = waypoints[k + 1] - waypoints[k]
        positions[i] = waypoints[k] + fraction * step
        velocities[i] = step * segments * s_speed
    positions[-1], velocities[-1] = waypoints[-1], 0.0
    return Trajectory(times, positions, velocities)


def braking(position, velocity, acceleration, control_period: float) -> Trajectory:
    """From the reference's state to rest as fast as the stop's limits allow, sampled every control period."""
    generator, inputs, result = ruckig.Ruckig(7), ruckig.InputParameter(7), ruckig.Trajectory(7)
    inputs.control_interface = ruckig.ControlInterface.Velocity
    inputs.current_position, inputs.current_velocity = list(position), list(velocity)
    limit_acceleration = _SPEED * STOP_ACCELERATION_PER_SPEED
    inputs.current_acceleration = list(np.clip(acceleration, -limit_acceleration, limit_acceleration))
    inputs.target_velocity, inputs.target_acceleration = [0.0] * 7, [0.0] * 7
    inputs.max_velocity = list(np.maximum(_SPEED, np.abs(velocity)))
    inputs.max_acceleration = list(limit_acceleration)
    inputs.max_jerk = list(_SPEED * STOP_JERK_PER_SPEED)
    inputs.synchronization = ruckig.Synchronization.No
    if generator.calculate(inputs, result) not in (ruckig.Result.Working, ruckig.Result.Finished):
        raise TrajectoryError("ruckig found no stop from the reference's state")
    count = max(int(math.ceil(result.duration / control_period)), 1)
    return _sampled(result, np.append(np.arange(count) * control_period, result.duration))


def _sampled(result, times) -> Trajectory:
    """A ruckig trajectory at ``times``, at rest at its end."""
    positions, velocities = np.empty((len(times), 7)), np.empty((len(times), 7))
    for i, t in enumerate(times):
        position, velocity, _acceleration = result.at_time(float(t))
        positions[i], velocities[i] = position, velocity
    velocities[-1] = 0.0
    return Trajectory(times, positions, velocities)
