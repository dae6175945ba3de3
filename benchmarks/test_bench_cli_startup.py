"""Wall time of the CLI's commands that draw nothing, each in a fresh process, against
``python -c "import glyphpack"`` in the same run (the interpreter's and the package's
own start): listing commands must not import numba or compile a kernel, and those that
read a workspace nothing numeric. Median of five runs each; numba's cache is warm (as
after ``glyphpack warm``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from conftest import TABLES

COMMANDS = (["--version"], ["--help"], ["profiles"], ["profiles", "--shape", "all"], ["fonts"], ["render", "--help"])
RUNS = 5
ROOT = Path(__file__).resolve().parent.parent


def wall(argv: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, timeout=300)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def test_listing_commands_start_fast(tmp_path):
    """Also the commands that read a workspace (one real Claude Code session imported):
    ``tree``, ``context`` and ``export``, against importing numpy and Pillow."""
    workspace = tmp_path / "ws"
    session = ROOT / "tests" / "data" / "sessions" / "ohmyposh-6beb436f6cd8-0.jsonl"
    subprocess.run([sys.executable, "-m", "glyphpack", "import", "--workspace", str(workspace), str(session)], check=True, capture_output=True, timeout=300)
    conversation = session.stem
    baseline = wall([sys.executable, "-c", "import glyphpack"])
    numeric = wall([sys.executable, "-c", "import numpy, PIL.Image"])
    rows = [
        "| command | seconds (median of 5) | against `import glyphpack` |",
        "|---|---|---|",
        f"| `python -c \"import glyphpack\"` | {baseline:.2f} | 1.0x |",
        f"| `python -c \"import numpy, PIL.Image\"` | {numeric:.2f} | {numeric / baseline:.1f}x |",
    ]
    workspace_commands = (["tree", "WS"], ["context", "WS", conversation], ["export", "WS", conversation])
    for command in (*COMMANDS, *workspace_commands):
        argv = [str(workspace) if part == "WS" else part for part in command]
        seconds = wall([sys.executable, "-m", "glyphpack", *argv])
        rows.append(f"| `glyphpack {' '.join(command)}` | {seconds:.2f} | {seconds / baseline:.1f}x |")
    TABLES["CLI start-up, fresh processes (benchmarks/test_bench_cli_startup.py)"] = rows


def _first_render(site: str, scratch: Path) -> float:
    """One ``glyphpack render`` of this repository's README for Sonnet, in a fresh process
    with an empty user cache, the package imported from ``site``."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "GLYPHPACK_CACHE_DIR")}
    env |= {"PYTHONPATH": site, "GLYPHPACK_CACHE_DIR": str(scratch / "cache")}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "glyphpack", "render", str(ROOT / "README.md"), "--model", "claude-sonnet-4-5", "--out", str(scratch / "pages")],
        capture_output=True, check=True, timeout=300, env=env, cwd=scratch,
    )
    return time.perf_counter() - started


@contextlib.contextmanager
def busy() -> Iterator[None]:
    """Every core kept busy (one spinning process per core) while the block runs: a
    machine running other jobs, as a newcomer's often is."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.5)  # spinning before the timing starts
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def test_a_fresh_installs_first_render(tmp_path):
    """A fresh install's first render: the wheel ``pip install .`` builds (its build step
    compiles the kernels into the package, setup.py), against the same wheel without them
    (they compile on first use) and against importing numpy and Pillow, in the same run,
    on an idle machine and with every core busy; each first render with an empty user
    cache, median of three."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)], check=True, timeout=900, capture_output=True)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), *map(str, wheels.glob("*.whl"))], check=True, timeout=300, capture_output=True)
    prebuilt = site / "glyphpack" / "_render" / "_prebuilt" / "numba"
    assert any(prebuilt.glob("*.nbi")), "the build step prebuilt no kernels"
    bare = tmp_path / "bare"
    shutil.copytree(site, bare)
    shutil.rmtree(bare / "glyphpack" / "_render" / "_prebuilt")
    rows = ["| first render of a fresh install | idle: seconds (median of 3) | against importing numpy + Pillow | every core busy: seconds | against importing |",
            "|---|---|---|---|---|"]
    measured: dict[str, list[float]] = {}
    for load in (contextlib.nullcontext, busy):
        with load():
            imports = statistics.median(wall_once([sys.executable, "-c", "import numpy, PIL.Image"]) for _ in range(RUNS))
            measured.setdefault("`python -c \"import numpy, PIL.Image\"`", []).extend([imports, imports])
            for label, where in (("kernels prebuilt by the build (`pip install .`)", site), ("kernels compiled on first use", bare)):
                seconds = statistics.median(_first_render(str(where), Path(tempfile.mkdtemp(dir=tmp_path))) for _ in range(3))
                measured.setdefault(label, []).extend([seconds, imports])
    for label, (idle, idle_imports, loaded, loaded_imports) in measured.items():
        rows.append(f"| {label} | {idle:.2f} | {idle / idle_imports:.1f}x | {loaded:.2f} | {loaded / loaded_imports:.1f}x |")
    TABLES["A fresh install's first render (benchmarks/test_bench_cli_startup.py)"] = rows


def wall_once(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, timeout=300)
    return time.perf_counter() - started
