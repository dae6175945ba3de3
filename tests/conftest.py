import os
import ssl
import tempfile
from pathlib import Path

import pytest

# Keep compiled atlases and kernels of the test run out of the user's cache; a fixed
# directory per machine still lets later runs load them without compiling.
os.environ.setdefault("GLYPHPACK_CACHE_DIR", os.path.join(tempfile.gettempdir(), "glyphpack-test-cache"))

from hypothesis import settings

# No test opens a TLS connection (none reaches the network), yet every httpx client a
# test or an SDK makes reads a CA bundle when it is built (certifi's, or SSL_CERT_FILE's:
# 20-40 ms each, hundreds of times a run). A CA directory is read only when a
# certificate is checked, so with one named instead (httpx takes SSL_CERT_DIR when no
# SSL_CERT_FILE is set) clients start at once, here and in the proxies and CLIs the
# tests start.
_capath = ssl.get_default_verify_paths().openssl_capath
if os.path.isdir(_capath):
    os.environ.pop("SSL_CERT_FILE", None)
    os.environ["SSL_CERT_DIR"] = _capath

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=60, deadline=None)
# A longer hunt for rare failures: pytest --hypothesis-profile=deep
settings.register_profile("deep", max_examples=600, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="also run tests marked slow (CI always does)")


def run_slow(config: pytest.Config) -> bool:
    """Slow tests run in CI (``CI`` set, as ``.ci/run`` has it) or with ``--run-slow``."""
    return bool(config.getoption("--run-slow") or os.environ.get("CI"))


#: At most this many processes share a default run (each collects every test first,
#: about 10 s of work).
TEST_WORKERS = 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many processes ``-n auto`` (pyproject's addopts) runs the tests in: the
    default run over the machine's cores, up to ``TEST_WORKERS`` (two cores: 54 s against
    85-107 s in one process). A run with the slow tests stays in one process: their
    crash, concurrency and real-client tests are proven there, in CI."""
    if run_slow(config):
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(TEST_WORKERS, cores) if cores > 1 else 0


#: Test modules that drive an agent framework (each imports its package, seconds apiece):
#: all slow, so the default run does not even import them.
FRAMEWORK_MODULES = ("test_adapter_", "test_docs_frameworks")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name.startswith(FRAMEWORK_MODULES) and not run_slow(config):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if run_slow(config):
        return
    skip = pytest.mark.skip(reason="slow: runs in CI, or locally with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server for the workspace tests' second store (``tests/postgres_server.py``).
    Skipped, saying why, only where none can be started; ``GLYPHPACK_REQUIRE_POSTGRES``
    (set by ``.ci/run``) makes that a failure."""
    try:
        from postgres_server import Server, Unavailable

        server = Server()
    except (ImportError, Unavailable) as exc:
        reason = f"no PostgreSQL server could be started here: {exc}"
        if os.environ.get("GLYPHPACK_REQUIRE_POSTGRES"):
            pytest.fail(reason)
        pytest.skip(reason)
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server):
    """The URL of a new, empty PostgreSQL workspace, dropped after the test."""
    url = postgres_server.create()
    yield url
    postgres_server.drop(url)


@pytest.fixture(params=["folder", "postgres"])
def workspace_location(request, tmp_path):
    """Where a workspace test keeps its workspace: a folder, then a PostgreSQL database."""
    if request.param == "folder":
        return str(tmp_path / "ws")
    return request.getfixturevalue("postgres_url")
