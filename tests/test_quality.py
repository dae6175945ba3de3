"""The code stays clean: ruff and mypy as configured in pyproject.toml."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean():
    """Through this interpreter's ruff, which the test extra installs: a missing ruff
    fails here rather than skipping (a skip once hid a dirty tree)."""
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "glyphpack", "tests", "benchmarks", "examples"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_is_clean():
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]' brings it)")
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow  # a new process (1.5-2 s of imports): CI runs it
def test_the_installed_command_runs_from_another_directory(tmp_path):
    """The console script of this environment, run where no checkout is: catches a
    package shadowed by leftovers of an earlier install (numba's cache once was one)."""
    script = Path(sys.executable).with_name("glyphpack")
    if not script.exists():
        pytest.skip("glyphpack is not installed in this environment")
    version = subprocess.run([str(script), "--version"], cwd=tmp_path, capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("glyphpack "), version.stderr
    (tmp_path / "note.txt").write_text("hello from elsewhere")
    rendered = subprocess.run([str(script), "render", "note.txt", "--out", "pages"], cwd=tmp_path, capture_output=True, text=True)
    assert rendered.returncode == 0, rendered.stderr
    assert (tmp_path / "pages" / "page-0001.png").stat().st_size > 0


def test_the_wheel_ships_every_subpackage():
    """Catches a subpackage missing from pyproject's list (the wheel would lack it while
    the checkout works)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    listed = set(re.findall(r'"(glyphpack[\w.]*)"', text.split("packages = [", 1)[1].split("]", 1)[0]))
    on_disk = {
        ".".join(path.parent.relative_to(ROOT).parts) for path in (ROOT / "glyphpack").rglob("__init__.py")
    }
    assert on_disk | {"glyphpack.fonts"} == listed


#: The longest a module may grow before it is split by the jobs it mixes (the navigator's
#: script, one browser file, aside).
MODULE_LINES = 800


def test_no_module_is_over_its_length():
    package = Path(__file__).resolve().parent.parent / "glyphpack"
    long = {str(p.relative_to(package)): n for p in package.rglob("*.py") if (n := len(p.read_text().splitlines())) > MODULE_LINES}
    assert long == {}, f"split these by the jobs they mix: {long}"
