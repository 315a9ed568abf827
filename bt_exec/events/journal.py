"""A JSONL journal sink: every event, one compact JSON object a line, encoded a batch at a time as it is handed
over and written off the ticking thread; and its check.

Each run of a journal (one ``JsonlJournal``, from open to close) appends a run
header first, ``{"event": "journal_run", "journal_run_id", "bt_exec_version",
"time"}``, so runs appended to one file stay apart (``seq`` and plan ids start
again in each). A run begins on a fresh line: a last line left cut short by an
earlier run (a crash, a full disk) is closed with a newline first.
"""
from __future__ import annotations

import json
import logging
import math
import os
import pathlib
import queue
import stat
import threading
import time
import uuid
from dataclasses import dataclass, field

import orjson

from ..version import VERSION

log = logging.getLogger(__name__)

RUN_HEADER = "journal_run"
_CLOSE = object()
# What orjson cannot write as the journal promises goes through json, written alike (compact, ASCII).
_ENCODER = json.JSONEncoder(default=str, separators=(",", ":"))


class JsonlJournal:
    """Subscriber that appends events to a file. A call encodes its events (one encoder call a batch) and
    queues their lines; a thread of its own writes them.

    Subscribe it per event (``executor.subscribe(journal)``) or, cheaper, per tick
    (``executor.subscribe_batches(journal.write_batch)``). At most ``max_queued``
    events wait for the writer; events beyond that are dropped and counted in
    ``dropped``, never allowed to grow memory without bound.

    The first write that fails (a full disk, an I/O error) ends the writing: it is
    logged once, ``error`` says why (``failed`` is then true), and every event from
    the one that failed on is counted in ``unwritten``, not written. Opening the
    file raises OSError; nothing after that raises.
    """

    def __init__(self, path: str | pathlib.Path, max_queued: int = 100_000):
        self.path = pathlib.Path(path)
        self.max_queued = max_queued
        self.run_id = uuid.uuid4().hex  # this run's id in its header line
        self.dropped = 0
        self.unwritten = 0
        self.error: str | None = None
        self.closed_torn_line = False  # whether the file ended mid-line when this run began
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._queued = 0  # events in the queue, counted by the callers and the writer
        self._count_lock = threading.Lock()
        self._closed = False
        self._writer = threading.Thread(target=self._write_loop, name="bt_exec-journal", daemon=True)
        self._writer.start()

    @property
    def failed(self) -> bool:
        return self.error is not None

    def __call__(self, event: dict) -> None:
        self.write_batch((event,))

    def write_batch(self, events) -> None:
        """Encode a batch of events and queue their lines. They are encoded now, in the caller's thread: the
        writer shares the interpreter with it anyway, and lines need no copy of events that subscribers after
        this one may change."""
        count = len(events)
        with self._count_lock:
            if self.error is not None:
                self.unwritten += count
                return
            if self._queued + count > self.max_queued:
                self.dropped += count
                return
            self._queued += count
        self._queue.put((_lines(events), count))

    def close(self, timeout_s: float | None = None) -> None:
        """Write what is queued, then close the file. Never raises; ``failed`` says whether all was written.

        ``timeout_s``: the longest to wait for the writer (a pipe nobody reads blocks it for good); past it,
        ``error`` says so and the file is left to the writer, which writes nothing more.
        """
        if self._closed:
            return
        self._closed = True
        self._queue.put(_CLOSE)
        self._writer.join(timeout_s)
        if self._writer.is_alive():  # what it still holds is counted unwritten as it gets to it
            with self._count_lock:
                if self.error is None:
                    self.error = f"still writing after {timeout_s:g} s (a reader that does not read?)"
                queued = self._queued
            log.error("journal %s: %s; %d events were still queued", self.path, self.error, queued)
            return
        try:
            os.close(self._fd)
        except OSError as exc:  # some file systems report a failed write only now
            self._fail(exc, 0)
        if self.dropped:
            log.warning("journal %s dropped %d events (queue full)", self.path, self.dropped)

    def _write_loop(self) -> None:
        self._write(self._opening(), 0)
        while True:
            batches = [self._queue.get()]
            while batches[-1] is not _CLOSE:  # whatever else waits goes out in the same write
                try:
                    batches.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            closing = batches[-1] is _CLOSE
            if closing:
                batches.pop()
            count = sum(batch[1] for batch in batches)
            if count:
                if self.error is None:
                    self._write(b"".join([piece for batch in batches for piece in batch[0]]), count)
                else:
                    with self._count_lock:
                        self.unwritten += count
                with self._count_lock:
                    self._queued -= count
            if closing:
                return

    def _opening(self) -> bytes:
        """The run header, after a newline if the file ends mid-line."""
        header = _each_line([{"event": RUN_HEADER, "journal_run_id": self.run_id, "bt_exec_version": VERSION,
                              "time": time.time()}])
        if not self._ends_mid_line():
            return header
        self.closed_torn_line = True
        log.warning("journal %s: its last line was cut short by an earlier run; it is closed, and this run "
                    "starts on a new line", self.path)
        return b"\n" + header

    def _ends_mid_line(self) -> bool:
        try:
            status = os.fstat(self._fd)
            size = status.st_size if stat.S_ISREG(status.st_mode) else 0  # a pipe or a device has no last line
            if not size:
                return False
            with open(self.path, "rb") as file:
                file.seek(size - 1)
                return file.read(1) != b"\n"
        except OSError:  # not readable (write-only): nothing to tell, the run is appended as it is
            return False

    def _write(self, text: bytes, count: int) -> None:
        """Write ``text`` (``count`` events) whole, or fail for good at the first error."""
        data = memoryview(text)
        try:
            while data:
                data = data[os.write(self._fd, data):]
        except OSError as exc:
            self._fail(exc, count)

    def _fail(self, exc: OSError, count: int) -> None:
        with self._count_lock:
            if self.error is not None:
                return
            self.error = exc.strerror or str(exc)
            self.unwritten += count
        log.error("journal %s: cannot write (%s); no more events are written to it", self.path, self.error)


def _line(event: dict) -> bytes:
    """``event``'s line as json writes it; an event it cannot encode is written as ``journal_unencodable``."""
    try:
        return _ENCODER.encode(event).encode("ascii")
    except (TypeError, ValueError, RecursionError) as exc:  # a value JSON cannot hold: say so in its place
        return _ENCODER.encode({"event": "journal_unencodable", "of": str(event.get("event")), "seq": event.get("seq"),
                                "reason": f"{type(exc).__name__}: {exc}"}).encode("ascii")


# Put between a batch's events so that one orjson call encodes the batch, its text then cut into lines where it
# stands. An event holding the same text (the string in a list) shows in the length the cut leaves: the batch then
# goes event by event.
_BREAK = "\x00\n"
_BREAK_TEXT = b',"\\u0000\\n",'
_NEWLINE = b"\n"


def _lines(events) -> list:
    """The lines of ``events``, each ended by a newline, as bytes-like pieces to write one after the other, from
    one orjson call for the whole batch (one call per event costs several times the encoding). orjson writes an
    event in a tenth of json's time; it writes text as UTF-8 and a non-finite float as null, so a line that is not
    ASCII goes to json (which escapes), and so does one with a null that does not read back as its event (a NaN it
    wrote as null); a batch orjson refuses (an integer past 64 bits, a key that is no string, deep nesting) goes
    event by event, as ``_each_line``."""
    count = len(events)
    if count < 2:
        return [_each_line(events)]
    spaced = [_BREAK] * (2 * count - 1)
    spaced[::2] = events
    try:
        text = orjson.dumps(spaced, default=str)
    except TypeError:  # orjson.JSONEncodeError
        return [_each_line(events)]
    if text.isascii() and b"null" not in text:
        cut = text.replace(_BREAK_TEXT, _NEWLINE)
        if len(text) - len(cut) == (len(_BREAK_TEXT) - 1) * (count - 1):  # cut only between the events
            return [memoryview(cut)[1:-1], _NEWLINE]  # without the list's brackets
        return [_each_line(events)]
    lines = text[1:-1].split(_BREAK_TEXT)
    if len(lines) != count:
        return [_each_line(events)]
    for index, line in enumerate(lines):
        if not line.isascii() or (b"null" in line and not _reads_back(events[index], line)):
            lines[index] = _line(events[index])
    lines.append(b"")  # the last line's newline
    return [_NEWLINE.join(lines)]


def _each_line(events) -> bytes:
    """The lines of ``events``, one orjson call per event."""
    dumps = orjson.dumps
    lines: list[bytes] = []
    for event in events:
        try:
            line = dumps(event, default=str)
        except TypeError:  # orjson.JSONEncodeError
            line = _line(event)
        else:
            if not line.isascii() or (b"null" in line and not _reads_back(event, line)):
                line = _line(event)
        lines.append(line)
    lines.append(b"")  # the last line's newline
    return _NEWLINE.join(lines)


def _reads_back(event: dict, line: bytes) -> bool:
    """Whether ``line``, orjson's text of ``event``, reads back as ``event``: false where it wrote a NaN as null.
    Every null it writes is a None or a non-finite float, so a line with no more "null" in it than the event has
    None values at its top (a plan_started's run_id) reads back; otherwise each value is looked at, a container
    encoded alone."""
    nones = 0
    for value in event.values():
        if value is None:
            nones += 1
        elif isinstance(value, float) and not math.isfinite(value):
            return False
    if line.count(b"null") == nones:
        return True
    for value in event.values():
        if isinstance(value, float):
            if not math.isfinite(value):
                return False
        elif isinstance(value, (dict, list, tuple)):
            text = orjson.dumps(value, default=str)
            if b"null" in text and orjson.loads(text) != value:
                return False
    return True


# --- checking a journal ---------------------------------------------------------------------------------

MAX_LINE_BYTES = 64 * 1024 * 1024  # longer lines are not read whole: malformed whatever they hold
LISTED = 100  # torn and malformed lines listed by line number; beyond, only counted


@dataclass
class JournalCheck:
    """What ``check_journal`` found. Line numbers count from 1.

    ``runs``: (line, header) of each run header, the first ``LISTED`` (``run_count``:
    all of them). ``events``: event lines, headers
    excluded. ``torn``: lines cut short (the last line, with no newline; or a line
    that does not parse followed by a run header: the next run closed it).
    ``malformed``: (line, why) of any other line that is not one JSON object with an
    ``event``. Both lists keep the first ``LISTED``; ``torn_count`` and
    ``malformed_count`` count them all.
    """

    path: str
    lines: int = 0
    events: int = 0
    events_before_first_run: int = 0  # written by a bt_exec older than run headers
    runs: list = field(default_factory=list)
    run_count: int = 0
    torn: list = field(default_factory=list)
    malformed: list = field(default_factory=list)
    torn_count: int = 0
    malformed_count: int = 0

    @property
    def clean(self) -> bool:
        return not (self.torn_count or self.malformed_count)


def check_journal(path: str | pathlib.Path) -> JournalCheck:
    """Read a JSONL journal line by line (memory: one line at most); raise OSError if it cannot be read."""
    report = JournalCheck(str(path))
    unparsed = None  # (line number, why) of the line before, if it did not parse: torn if a run header follows
    with open(path, "rb") as file:
        while True:
            line = file.readline(MAX_LINE_BYTES)
            if not line:
                break
            report.lines += 1
            number = report.lines
            if not line.endswith(b"\n"):
                if len(line) == MAX_LINE_BYTES:
                    while line and not line.endswith(b"\n"):  # skip the rest of it
                        line = file.readline(MAX_LINE_BYTES)
                    why = f"longer than {MAX_LINE_BYTES} bytes"
                else:  # the last line, never finished
                    _flush(report, unparsed)
                    unparsed = None
                    _note(report.torn, number, report, "torn_count")
                    break
            else:
                why, event = _parse(line)
                if why is None:
                    if event.get("event") == RUN_HEADER:
                        if unparsed is not None:
                            _note(report.torn, unparsed[0], report, "torn_count")
                            unparsed = None
                        _note(report.runs, (number, event), report, "run_count")
                    else:
                        report.events += 1
                        if not report.runs:
                            report.events_before_first_run += 1
                    _flush(report, unparsed)
                    unparsed = None
                    continue
            _flush(report, unparsed)
            unparsed = (number, why)
    _flush(report, unparsed)
    return report


def _parse(line: bytes) -> tuple[str | None, dict | None]:
    """(why the line is no event, None), or (None, the event)."""
    if line.isspace():
        return "an empty line", None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte {exc.start + 1})", None
    try:
        event = json.loads(text)
    except RecursionError:
        return "nested too deep to read", None
    except json.JSONDecodeError as exc:
        return f"not JSON (column {exc.colno}: {exc.msg})", None
    except ValueError as exc:  # an integer too long to read
        return f"not JSON ({exc})", None
    if not isinstance(event, dict) or "event" not in event:
        return "not an event (a JSON object with an 'event' key)", None
    return None, event


def _flush(report: JournalCheck, unparsed: tuple[int, str] | None) -> None:
    """A line that did not parse and is not followed by a run header: malformed."""
    if unparsed is not None:
        _note(report.malformed, unparsed, report, "malformed_count")


def _note(found: list, item, report: JournalCheck, counter: str) -> None:
    setattr(report, counter, getattr(report, counter) + 1)
    if len(found) < LISTED:
        found.append(item)
