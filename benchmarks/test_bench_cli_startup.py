"""Wall time of the CLI's commands that draw nothing, each in a fresh process, against
``python -c "import glyphpack"`` in the same run (the interpreter's and the package's
own start): listing commands must not import numba or compile a kernel. Median of five
runs each; numba's cache is warm (as after ``glyphpack warm``)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from conftest import TABLES

COMMANDS = (["--version"], ["--help"], ["profiles"], ["profiles", "--shape", "all"], ["fonts"], ["render", "--help"])
RUNS = 5


def wall(argv: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, timeout=300)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def test_listing_commands_start_fast():
    baseline = wall([sys.executable, "-c", "import glyphpack"])
    rows = [
        "| command | seconds (median of 5) | against `import glyphpack` |",
        "|---|---|---|",
        f"| `python -c \"import glyphpack\"` | {baseline:.2f} | 1.0x |",
    ]
    for command in COMMANDS:
        seconds = wall([sys.executable, "-m", "glyphpack", *command])
        rows.append(f"| `glyphpack {' '.join(command)}` | {seconds:.2f} | {seconds / baseline:.1f}x |")
    TABLES["CLI start-up, fresh processes (benchmarks/test_bench_cli_startup.py)"] = rows
