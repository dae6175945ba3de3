"""A fleet on one store: turns saved per second by 1, 8 and 32 agents, each a process
of its own (a host) saving a conversation of its own, on the folder workspace and on
PostgreSQL; save latency p50/p99; the size a thousand turns take; and the time a fresh
process takes to resume a 1,000-message session and build its next request.

The folder workspace is the baseline, measured in the same run on the same machine;
the PostgreSQL server is a throwaway cluster (tests/postgres_server.py) with fsync on,
as a production server runs, on 127.0.0.1: what a network between hosts adds is not in
these figures. A turn is four messages (a request, a tool call, its ~2 KB result, an
answer) saved at its end.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TABLES

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from postgres_server import Server, Unavailable  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(HERE.parent)]))
#: Turns each run saves in all, split between its agents.
TURNS = 640
AGENTS = (1, 8, 32)
RESUME_MESSAGES = 1_000
RESUME_RUNS = 5


@pytest.fixture(scope="module")
def server():
    try:
        started = Server(durable=True)
    except (ImportError, Unavailable) as exc:
        pytest.skip(f"no PostgreSQL server could be started here: {exc}")
    yield started
    started.stop()


def run_fleet(location: str, agents: int, tmp: Path) -> dict[str, float]:
    """``agents`` processes saving ``TURNS / agents`` turns each, released at once."""
    go = tmp / f"go-{agents}"
    per_agent = TURNS // agents
    children = [
        subprocess.Popen(
            [sys.executable, str(HERE / "fleet_agent.py"), location, f"agent{agents}x{n}", str(per_agent), str(go)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True,
        )
        for n in range(agents)
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    go.write_text("")
    reports = []
    for child in children:
        out = child.stdout.read()  # not communicate(timeout=...): it would skip what readline buffered
        assert child.wait(timeout=900) == 0, child.stderr.read()
        reports.append(json.loads(out))
    latencies = sorted(x for report in reports for x in report["latencies"])
    wall = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    return {
        "turns_per_second": len(latencies) / wall,
        "p50": latencies[len(latencies) // 2],
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
    }


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def postgres_bytes(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CHECKPOINT")
        return int(connection.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'm')"
        ).fetchone()[0])


def plot(figures: dict[str, list[dict[str, float]]], out: Path) -> None:
    """Turns saved per second and the p99 save latency, per store and fleet size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rate, tail) = plt.subplots(1, 2, figsize=(9, 3.4))
    width = 0.38
    for offset, (store, runs) in zip((-width / 2, width / 2), figures.items()):
        positions = [n + offset for n in range(len(AGENTS))]
        rate.bar(positions, [r["turns_per_second"] for r in runs], width, label=store)
        tail.bar(positions, [r["p99"] * 1000 for r in runs], width, label=store)
    for axis, title in ((rate, "turns saved per second"), (tail, "save latency p99 (ms)")):
        axis.set_xticks(range(len(AGENTS)), [f"{n} agent{'s' if n > 1 else ''}" for n in AGENTS])
        axis.set_title(title, fontsize=10)
        axis.legend(fontsize=8)
    fig.suptitle("processes saving at once, each its own conversation; one machine, 2 cores", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def resume(location: str, conversation: str) -> dict[str, float]:
    runs = []
    for _ in range(RESUME_RUNS):
        done = subprocess.run([sys.executable, str(HERE / "fleet_resume.py"), location, conversation],
                              capture_output=True, text=True, env=ENV, timeout=300, check=True)
        runs.append(json.loads(done.stdout))
    assert all(r["messages"] == RESUME_MESSAGES for r in runs)
    return {key: statistics.median(r[key] for r in runs) for key in ("import", "driver", "open", "request")}


def test_a_fleet_on_one_store(server, tmp_path):
    stores = {"folder": lambda n: str(tmp_path / f"ws-{n}"), "PostgreSQL": lambda n: server.create()}
    rows = [
        "| store | agents (processes) | turns/s | against the folder | save p50 (ms) | save p99 (ms) |",
        "|---|---|---|---|---|---|",
    ]
    sizes: dict[str, float] = {}
    baseline: dict[int, float] = {}
    figures: dict[str, list[dict[str, float]]] = {store: [] for store in stores}
    for store, location_for in stores.items():
        for agents in AGENTS:
            location = location_for(agents)
            measured = run_fleet(location, agents, tmp_path)
            figures[store].append(measured)
            if store == "folder":
                baseline[agents] = measured["turns_per_second"]
            ratio = measured["turns_per_second"] / baseline[agents]
            rows.append(
                f"| {store} | {agents} | {measured['turns_per_second']:,.0f} | {ratio:.2f}x | "
                f"{measured['p50'] * 1000:.1f} | {measured['p99'] * 1000:.1f} |"
            )
            if agents == AGENTS[-1]:  # the size of what 32 conversations of 20 turns left
                used = folder_bytes(Path(location)) if store == "folder" else postgres_bytes(location)
                sizes[store] = used / TURNS * 1000
    TABLES["A fleet on one store: saves (benchmarks/test_bench_fleet.py)"] = rows
    plot(figures, HERE.parent / "docs" / "fleet.png")
    TABLES["Size on disk per 1,000 turns"] = [
        "| store | MB per 1,000 turns | against the folder |",
        "|---|---|---|",
        *(f"| {store} | {size / 1e6:.1f} | {size / sizes['folder']:.2f}x |" for store, size in sizes.items()),
    ]
    # Resume: one conversation of 1,000 messages (250 turns) in each store.
    resumed = {}
    for store, location_for in stores.items():
        location = location_for("resume")
        go = tmp_path / "go-resume"
        go.write_text("")
        subprocess.run([sys.executable, str(HERE / "fleet_agent.py"), location, "long", str(RESUME_MESSAGES // 4), str(go)],
                       capture_output=True, env=ENV, timeout=900, check=True)
        resumed[store] = resume(location, "long")
    TABLES["Resuming a 1,000-message session on a fresh process (median of 5)"] = [
        "| store | import psycopg (s) | open the session (s) | build the next request (s) | open against the folder |",
        "|---|---|---|---|---|",
        *(
            f"| {store} | {r['driver']:.3f} | {r['open']:.3f} | {r['request']:.3f} | {r['open'] / resumed['folder']['open']:.2f}x |"
            for store, r in resumed.items()
        ),
    ]
