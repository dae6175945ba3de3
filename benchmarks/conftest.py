import os
import tempfile

import pytest

os.environ.setdefault("GLYPHPACK_CACHE_DIR", os.path.join(tempfile.gettempdir(), "glyphpack-bench-cache"))

from corpus import stdlib_corpus

#: name -> (value, unit): filled by the benchmarks, printed as one table at the end.
RESULTS: dict[str, tuple[float, str]] = {}
#: Whole tables (lists of Markdown lines) other benchmarks print at the end.
TABLES: dict[str, list[str]] = {}


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Benchmarks run one at a time, in one process (pyproject's ``-n auto`` is for the
    tests): two at once would time each other."""
    return 0


@pytest.fixture(scope="session")
def corpus() -> str:
    return stdlib_corpus()


@pytest.fixture(scope="session")
def results():
    return RESULTS


def pytest_terminal_summary(terminalreporter):
    for title, lines in TABLES.items():
        terminalreporter.write_sep("=", title)
        for line in lines:
            terminalreporter.write_line(line)
    if not RESULTS:
        return
    terminalreporter.write_sep("=", "glyphpack benchmark summary (one run)")
    terminalreporter.write_line("| measure | value |")
    terminalreporter.write_line("|---|---|")
    for name, (value, unit) in RESULTS.items():
        terminalreporter.write_line(f"| {name} | {value:,.2f} {unit} |")
