"""Overrides of rclpy's internals: an ActionClient safe to use from any thread while its node spins in another.

rclpy's ActionClient (Jazzy, rclpy 7.1) is not safe against a goal sent from one thread while the executor takes
the response in another (ros2/rclpy#1123: the response can be dropped and the future never completes), nor against
being destroyed while an executor spins; ``LockedActionClient`` closes both with a lock.
"""
from __future__ import annotations

import threading

from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.waitable import NumberOfEntities
from unique_identifier_msgs.msg import UUID

WRITTEN_FOR = "7.1.5"
OVERRIDES = {
    "LockedActionClient": "rclpy.action.ActionClient's send_goal_async, _cancel_goal_async, _get_result_async, "
                          "server_is_ready, the Waitable calls (is_ready, take_data, add_to_wait_set, "
                          "get_num_entities) and destroy, and its _node, _client_handle and _action_name",
}


class LockedActionClient(ActionClient):
    """An ActionClient that can be used from any thread, and destroyed, while its node spins in another.

    * rclpy 7.1's ``send_goal_async`` (and the cancel and result requests) send
      the request and only then register its sequence number; an executor
      thread that takes the response in between drops it ("Ignoring unexpected
      goal response") and the future never completes (ros2/rclpy#1123).
      Sending and taking under one lock closes that window.
    * Destroying an ActionClient while an executor spins can make that executor
      touch the freed handle ("action client pointer is invalid") and end its
      spin with an exception. Here ``destroy`` first marks the client gone
      (under the same lock) so that the executor's calls into it do nothing.

    Harmless where rclpy has fixes of its own.
    """

    def __init__(self, *args, **kwargs):
        self._request_lock = threading.Lock()
        self._destroyed = False
        super().__init__(*args, **kwargs)

    def send_goal_async(self, goal, feedback_callback=None, goal_uuid=None):
        with self._request_lock:
            self._check_alive()
            return super().send_goal_async(goal, feedback_callback=feedback_callback, goal_uuid=goal_uuid)

    def _cancel_goal_async(self, goal_handle):
        with self._request_lock:
            self._check_alive()
            return super()._cancel_goal_async(goal_handle)

    def _get_result_async(self, goal_handle):
        with self._request_lock:
            self._check_alive()
            return super()._get_result_async(goal_handle)

    def cancel_goal_id_async(self, goal_id: UUID):
        """Cancel a goal known by its id alone (its acceptance never reached this client)."""
        return self._cancel_goal_async(ClientGoalHandle(self, goal_id, None))

    def server_is_ready(self):
        with self._request_lock:
            return not self._destroyed and super().server_is_ready()

    # Waitable API, called by the executor
    def is_ready(self, wait_set):
        with self._request_lock:
            return not self._destroyed and super().is_ready(wait_set)

    def take_data(self):
        with self._request_lock:
            return {} if self._destroyed else super().take_data()

    def add_to_wait_set(self, wait_set):
        with self._request_lock:
            if not self._destroyed:
                super().add_to_wait_set(wait_set)

    def get_num_entities(self):
        with self._request_lock:
            return NumberOfEntities() if self._destroyed else super().get_num_entities()

    def destroy(self):
        with self._request_lock:
            if self._destroyed:
                return
            self._destroyed = True
        self._node.remove_waitable(self)
        self._client_handle.destroy_when_not_in_use()

    @property
    def action_name(self) -> str:
        """The action's name, as the client was made for it."""
        return self._action_name

    def _check_alive(self) -> None:
        if self._destroyed:
            raise RuntimeError(f"the action client of {self._action_name} was destroyed")
