"""Every symbol the console writes is one the machine's fonts draw (Debian's Chromium falls back on them): a
character no installed font has shows as an empty box (⏮ and ⏭ did, in the replay bar)."""
import shutil
import subprocess

import pytest
from console_page import REPO

STATIC = REPO / "bt_exec" / "web" / "static"


def installed_code_points() -> set[int]:
    """The characters some installed font has, from fontconfig's charsets ("20-7e a0-17f 192 ...", hex)."""
    listed = subprocess.run(["fc-list", "--format", "%{charset}\\n"], capture_output=True, text=True, check=True)
    points = set()
    for part in listed.stdout.split():
        first, _, last = part.partition("-")
        points.update(range(int(first, 16), int(last or first, 16) + 1))
    return points


def test_every_symbol_of_the_page_is_in_an_installed_font():
    if shutil.which("fc-list") is None:
        pytest.skip("fc-list (fontconfig) is not installed: the fonts cannot be asked")
    symbols = sorted({char for name in ("index.html", "app.js", "app.css")
                      for char in (STATIC / name).read_text(encoding="utf-8") if ord(char) > 127})
    assert symbols, "the page writes no symbol: this test checks nothing"
    drawn = installed_code_points()
    missing = [f"{char} (U+{ord(char):04X})" for char in symbols if ord(char) not in drawn]
    assert not missing, f"no installed font draws: {', '.join(missing)}"
