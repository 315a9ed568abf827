"""Drawing frames on a terminal: clear once, then redraw each frame over the last."""
from __future__ import annotations

import shutil
from typing import TextIO

# Home the cursor, then redraw over the old frame: clearing first would make the tree flicker.
_HOME = "\x1b[H"
_CLEAR_SCREEN = "\x1b[2J"
_CLEAR_LINE_END = "\x1b[K"
_CLEAR_BELOW = "\x1b[J"


def start_screen(stream: TextIO) -> None:
    """Clear the terminal once, before the first frame."""
    stream.write(_CLEAR_SCREEN)
    stream.flush()


def draw_frame(stream: TextIO, lines: list[str]) -> None:
    """Draw ``lines`` over the previous frame, cut to the terminal's size (the last line says how many are hidden)."""
    size = shutil.get_terminal_size()
    room = max(size.lines - 2, 2)
    if len(lines) > room:
        hidden = len(lines) - room + 1
        lines = lines[:room - 1] + [f"… {hidden} more ops"]
    width = max(size.columns - 1, 10)
    frame = "".join(line[:width] + _CLEAR_LINE_END + "\n" for line in lines)
    stream.write(_HOME + frame + _CLEAR_BELOW)
    stream.flush()
