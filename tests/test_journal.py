"""The JSONL journal: run headers, fresh lines after a torn one, one clear failure on a full disk, and
``bt-exec journal check``; through the Python API and the CLI, on real full disks (/dev/full, a file size
limit, a small tmpfs where this test may mount one)."""
import json
import logging
import os
import resource
import signal
import subprocess
import sys

import pytest
from rtdl_plans import do, seq
from test_cli import REPO, SNAPSHOT, bt_exec_cli

import bt_exec
from bt_exec.events.journal import check_journal

DEV_FULL = "/dev/full"
needs_dev_full = pytest.mark.skipif(not os.path.exists(DEV_FULL), reason="no /dev/full on this system")


def lines_of(path):
    return path.read_bytes().decode("ascii").split("\n")


def run_plan(journal, plan=None):
    executor = bt_exec.Executor(bt_exec.SimBackend())
    executor.subscribe_batches(journal.write_batch)
    plan_id = executor.submit(plan or seq(do("a"), do("b")))["plan_id"]
    record = executor.run_until_complete(plan_id)
    executor.close()
    journal.close()
    return record


def many_ops(count):
    return seq(*[do(f"step {index}") for index in range(count)])


class TestRuns:
    def test_each_run_begins_with_a_header_and_appended_runs_stay_apart(self, tmp_path):
        path = tmp_path / "events.jsonl"
        first = bt_exec.JsonlJournal(path)
        run_plan(first)
        second = bt_exec.JsonlJournal(path)
        run_plan(second)
        events = [json.loads(line) for line in path.read_text().splitlines()]
        headers = [index for index, event in enumerate(events) if event["event"] == "journal_run"]
        assert headers == [0, 9]  # a header, plan_started, three ops' running and succeeded, plan_complete
        assert [events[index]["journal_run_id"] for index in headers] == [first.run_id, second.run_id]
        assert first.run_id != second.run_id
        assert all(events[index]["bt_exec_version"] == bt_exec.__version__ for index in headers)
        assert [event["seq"] for event in events[10:]] == list(range(1, 9))  # seq starts again in each run
        report = check_journal(path)
        assert report.clean and report.run_count == 2 and report.events == 16
        assert [line for line, _ in report.runs] == [1, 10]

    def test_a_torn_last_line_is_closed_before_the_next_run(self, tmp_path, caplog):
        path = tmp_path / "events.jsonl"
        run_plan(bt_exec.JsonlJournal(path))
        with path.open("a") as file:  # what a run killed in the middle of a write leaves
            file.write('{"event": "node_state", "plan_id": "1", "op_')
        journal = bt_exec.JsonlJournal(path)
        run_plan(journal)
        assert journal.closed_torn_line and not journal.failed
        lines = lines_of(path)
        assert lines[9] == '{"event": "node_state", "plan_id": "1", "op_'
        assert json.loads(lines[10])["event"] == "journal_run"  # not glued onto the torn line
        assert json.loads(lines[11])["event"] == "plan_started" and lines[-1] == ""
        assert "last line was cut short" in caplog.text
        report = check_journal(path)
        assert (report.torn, report.malformed, report.run_count, report.events) == ([10], [], 2, 16)

    def test_a_whole_last_line_gets_no_newline(self, tmp_path):
        path = tmp_path / "events.jsonl"
        path.write_text('{"event": "plan_started"}\n')
        journal = bt_exec.JsonlJournal(path)
        run_plan(journal)
        assert not journal.closed_torn_line and "" not in lines_of(path)[:-1]


class TestWriteFailure:
    @needs_dev_full
    def test_a_full_disk_stops_the_journal_with_one_message(self, caplog):
        journal = bt_exec.JsonlJournal(DEV_FULL)
        with caplog.at_level(logging.WARNING, logger="bt_exec.events.journal"):
            record = run_plan(journal, many_ops(50))
        assert record["outcome"] == "succeeded"  # the plan does not care
        assert journal.failed and journal.error == "No space left on device"
        assert journal.unwritten == 1 + 2 * 51 + 1  # every event: plan_started, running and final states, complete
        messages = [r.getMessage() for r in caplog.records if r.name == "bt_exec.events.journal"]
        assert messages == [f"journal {DEV_FULL}: cannot write (No space left on device); no more events are "
                            "written to it"]
        journal.write_batch([{"event": "late"}])  # after the failure: counted, not queued
        journal.close()  # again: nothing raises
        assert journal.unwritten == 1 + 2 * 51 + 1 + 1

    @needs_dev_full
    def test_run_reports_the_failure_in_its_summary_and_exit_status(self):
        result = bt_exec_cli("run", SNAPSHOT, "--events", DEV_FULL)
        assert result.returncode == 1
        summary = result.stdout.splitlines()[-1]
        assert summary.startswith("plan 1 succeeded after ")  # the plan's own outcome is kept
        assert summary.endswith(f"; journal {DEV_FULL} failed: No space left on device, 12 events not written")
        assert "Traceback" not in result.stderr
        assert result.stderr.splitlines() == [f"bt-exec: error: journal {DEV_FULL}: cannot write (No space left on "
                                              "device); no more events are written to it"]

    def test_a_write_cut_short_by_a_file_size_limit_leaves_a_torn_line_that_the_next_run_closes(self, tmp_path):
        path = tmp_path / "events.jsonl"

        def limit_file_size():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
            resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))  # the header fits, the first event does not

        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(many_ops(20)))
        result = subprocess.run([sys.executable, "-m", "bt_exec.cli", "run", str(plan), "--events", str(path)],
                                capture_output=True, text=True, cwd=REPO, timeout=60, preexec_fn=limit_file_size)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert "; journal " in result.stdout and "failed: File too large, 44 events not written" in result.stdout
        assert path.stat().st_size == 200 and not path.read_bytes().endswith(b"\n")
        checked = bt_exec_cli("journal", "check", path)
        assert checked.returncode == 1
        assert checked.stdout.splitlines()[:3] == [f"{path}: 1 run, 0 events, 1 torn line, 0 malformed lines",
                                                   checked.stdout.splitlines()[1], "  line 2: torn (cut short: the "
                                                   "run writing it ended mid-line)"]
        again = bt_exec_cli("run", plan, "--events", path)
        assert again.returncode == 0 and "last line was cut short" in again.stderr
        report = check_journal(path)
        assert (report.run_count, report.torn, report.malformed, report.events) == (2, [2], [], 44)


@pytest.fixture
def small_disk(tmp_path):
    """A 8 KiB tmpfs: two pages. Mounting needs root; elsewhere the file size limit test above stands in."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield where
    subprocess.run(["umount", str(where)], check=True)


def test_a_full_tmpfs_tears_one_line_and_the_next_run_starts_clean(small_disk, tmp_path):
    filler = small_disk / "filler"
    filler.write_bytes(b"x" * 4096)  # one page left for the journal
    path = small_disk / "events.jsonl"
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(many_ops(40)))  # about 17 KB of events
    full = bt_exec_cli("run", plan, "--events", path)
    assert full.returncode == 1 and "Traceback" not in full.stderr
    assert "failed: No space left on device" in full.stdout.splitlines()[-1]
    assert path.stat().st_size == 4096 and not path.read_bytes().endswith(b"\n")
    filler.unlink()
    assert bt_exec_cli("run", SNAPSHOT, "--events", path).returncode == 0
    report = check_journal(path)
    assert report.run_count == 2 and len(report.torn) == 1 and report.malformed == []
    assert json.loads(lines_of(path)[report.torn[0]])["event"] == "journal_run"


class TestCheckCommand:
    def test_a_clean_journal_exits_0(self, tmp_path):
        path = tmp_path / "events.jsonl"
        run_plan(bt_exec.JsonlJournal(path))
        result = bt_exec_cli("journal", "check", path)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == f"{path}: 1 run, 8 events, 0 torn lines, 0 malformed lines"
        assert lines[1].startswith("  run 1 at line 1: ") and f"bt_exec {bt_exec.__version__}, started 20" in lines[1]
        assert len(lines) == 2

    def test_malformed_and_torn_lines_are_listed_by_number(self, tmp_path):
        path = tmp_path / "events.jsonl"
        path.write_bytes(b'{"event": "plan_started"}\n'  # before run headers existed
                         b'not json\n'
                         b'\n'
                         b'[1, 2]\n'
                         b'{"event": "node_st\n'  # closed by the header after it: torn
                         b'{"event": "journal_run", "journal_run_id": "r2", "bt_exec_version": "9", "time": 1e300}\n'
                         b'\xff\xfe\n'
                         b'{"event": "plan_complete"}\n'
                         b'{"event": "plan_compl')  # the last line, never finished
        result = bt_exec_cli("journal", "check", path)
        assert result.returncode == 1
        assert result.stdout.splitlines() == [
            f"{path}: 1 run, 2 events, 2 torn lines, 4 malformed lines",
            "  1 event before the first run header (written by a bt_exec that wrote none)",
            "  run 1 at line 6: r2, bt_exec 9, started 1e+300",
            "  line 5: torn (cut short: the run writing it ended mid-line)",
            "  line 9: torn (cut short: the run writing it ended mid-line)",
            "  line 2: malformed: not JSON (column 1: Expecting value)",
            "  line 3: malformed: an empty line",
            "  line 4: malformed: not an event (a JSON object with an 'event' key)",
            "  line 7: malformed: not UTF-8 text (byte 1)"]

    def test_an_unreadable_journal_is_a_usage_error(self, tmp_path):
        result = bt_exec_cli("journal", "check", tmp_path / "none.jsonl")
        assert result.returncode == 2 and "cannot read" in result.stderr and "Traceback" not in result.stderr
        assert bt_exec_cli("journal", "check", tmp_path).returncode == 2  # a directory

    def test_thousands_of_bad_lines_list_a_hundred(self, tmp_path):
        path = tmp_path / "events.jsonl"
        path.write_bytes(b"x\n" * 5000)
        report = check_journal(path)
        assert report.malformed_count == 5000 and len(report.malformed) == 100
        assert bt_exec_cli("journal", "check", path).stdout.splitlines()[-1] == "  ... and 4900 malformed lines more"


def test_an_event_json_cannot_hold_is_written_as_a_note_in_its_place(tmp_path):
    path = tmp_path / "events.jsonl"
    journal = bt_exec.JsonlJournal(path)
    journal.write_batch([{"event": "node_state", "seq": 7, "result": {(1, 2): "a tuple key"}}, {"event": "next"}])
    journal.close()
    _, note, following = [json.loads(line) for line in path.read_text().splitlines()]
    assert note["event"] == "journal_unencodable" and (note["of"], note["seq"]) == ("node_state", 7)
    assert following == {"event": "next"} and not journal.failed


def test_every_line_is_compact_ascii_json_that_reads_back_as_its_event(tmp_path):
    """What the fast encoder would write otherwise (UTF-8 text, NaN as null, or nothing for an integer past 64
    bits, an int key or a tuple) is written as json writes it: escaped, bare NaN and Infinity, keys as text."""
    path = tmp_path / "events.jsonl"
    events = [{"event": "node_state", "result": {"output": {"name": "café ✓"}}, "seq": 1},
              {"event": "node_state", "run_id": None, "result": {"output": {"reading": float("nan"), "none": None}},
               "seq": 2},
              {"event": "node_state", "run_id": None, "time": float("-inf"), "seq": 3},
              {"event": "node_state", "result": {"output": {"big": 2 ** 70, "by_id": {7: "seven"}}}, "seq": 4},
              {"event": "node_state", "result": {"pose": (1.5, 2), "error": None}, "seq": 5},
              {"event": "plan_started", "run_id": None, "plan": {"ops": [{"op_id": "1", "args": {"x": 1e-05}}]},
               "seq": 6}]
    journal = bt_exec.JsonlJournal(path)
    journal.write_batch(events)
    journal.close()
    lines = lines_of(path)[1:-1]  # ASCII, or lines_of raises
    assert all(", " not in line and '": ' not in line for line in lines)
    read = [json.loads(line) for line in lines]
    assert read[0] == events[0] and "\\u00e9" in lines[0]
    assert '"reading":NaN' in lines[1] and read[1]["result"]["output"]["none"] is None
    assert '"time":-Infinity' in lines[2]
    assert read[3]["result"]["output"] == {"big": 2 ** 70, "by_id": {"7": "seven"}}
    assert read[4]["result"] == {"pose": [1.5, 2], "error": None}
    assert read[5] == events[5] and check_journal(path).clean


def test_a_batch_encoded_at_once_gives_the_lines_its_events_give_one_by_one(tmp_path):
    """A batch is encoded in one call and cut into lines: what it writes is what the same events write one at a
    time, whatever they hold (a NaN, text beyond ASCII, a null, the text the batch is cut at, in a list)."""
    events = [{"event": "node_state", "op_id": str(index), "time": 1.5 + index, "seq": index} for index in range(5)]
    events[1]["result"] = {"output": {"reading": float("nan")}}
    events[2]["description"] = "café ✓"
    events[3]["detail"] = None
    events[4]["result"] = {"output": ["\x00\n", "\x00\n"]}
    ordinary = [{"event": "node_state", "op_id": str(index), "seq": index} for index in range(5, 9)]
    batched, one_by_one = bt_exec.JsonlJournal(tmp_path / "batched.jsonl"), bt_exec.JsonlJournal(tmp_path / "one.jsonl")
    for batch in (events, events[:4], ordinary):
        batched.write_batch(batch)
        for event in batch:
            one_by_one(event)
    batched.close()
    one_by_one.close()
    written = lines_of(batched.path)[1:]  # after the run header
    assert written == lines_of(one_by_one.path)[1:]
    op_ids = [json.loads(line)["op_id"] for line in written[:-1]]
    assert op_ids == [str(n) for n in [*range(5), *range(4), *range(5, 9)]]
    assert '"reading":NaN' in written[1] and "\\u00e9" in written[2] and '"detail":null' in written[3]


def test_a_journal_on_a_pipe_nobody_reads_closes_within_its_bound(tmp_path):
    """A writer blocked for good (a FIFO whose reader never reads) does not hold the closing thread."""
    import threading

    from bt_exec.events.journal import JsonlJournal

    fifo = tmp_path / "journal.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # opened, never read: the pipe fills and blocks
    try:
        journal = JsonlJournal(fifo)
        journal.write_batch([{"event": "node_state", "padding": "x" * 4096} for _ in range(64)])
        closing = threading.Thread(target=journal.close, kwargs={"timeout_s": 0.5}, daemon=True)
        closing.start()
        closing.join(60)  # a deadline for "it returns", not a measure of how fast
        assert not closing.is_alive(), "close() is held by the blocked writer"
        assert journal.failed and "still writing after 0.5 s" in journal.error
    finally:
        os.close(reader)


def test_a_journal_records_what_ran_so_a_replay_needs_nothing_else(tmp_path):
    from bt_exec.events.journal import JsonlJournal

    path = tmp_path / "run.jsonl"
    run_plan(JsonlJournal(path), seq(do("a", cap="arm.reach", args={"x": 1}), do("b")))
    [started] = [json.loads(line) for line in lines_of(path) if '"plan_started"' in line]
    assert started["plan"] == {"root": "1", "ops": [
        {"op_id": "1", "kind": "sequence", "description": "in order", "children": ["2", "3"]},
        {"op_id": "2", "kind": "do", "description": "a", "children": [], "cap": "arm.reach", "args": {"x": 1},
         "provider": "arm"},
        {"op_id": "3", "kind": "do", "description": "b", "children": [], "cap": "sim.act", "args": {},
         "provider": "sim"}]}


def test_the_user_guides_journal_example_prints_what_it_shows(tmp_path):
    """docs/user-guide.md's JSONL journal example, run as written: it prints the batch sizes the guide shows."""
    guide = (REPO / "docs" / "user-guide.md").read_text(encoding="utf-8")
    section = guide[guide.index("**JSONL journal.**"):]
    code = section[section.index("```python\n") + len("```python\n"):]
    code, shown = code.split("```\n```\n", 1)
    expected = shown[:shown.index("```")]
    printed = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == expected
