"""A replay paused mid-batch keeps every event it took from the journal: its position and its plans stay of one
instant (the console shows both)."""
import threading

from bt_exec.events.replay import paced


def test_a_stop_hands_on_the_events_taken_before_it():
    stop = threading.Event()

    def events():  # all due at once (speed 0): the stop lands while a batch is being gathered
        for index in range(10):
            if index == 5:
                stop.set()
            yield {"event": "node_state", "index": index, "time": 1.0}

    handed = [event["index"] for batch in paced(events(), 0, stop) for event in batch]
    # Event 5 was taken when the stop was seen: the caller gives it back (the replay's cursor does).
    assert handed == [0, 1, 2, 3, 4]
