"""Every benchmark script still starts: its imports and arguments load (``--help``), so a change elsewhere
cannot leave a script broken until the next benchmark run finds it."""
import pathlib
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(path.name for path in BENCH.glob("bench_*.py"))


def test_the_bench_folder_has_scripts():
    assert "bench_all.py" in SCRIPTS and len(SCRIPTS) > 3


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bench_script_loads_and_shows_its_usage(script):
    done = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True,
                          timeout=120, cwd=BENCH)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
