"""Importing the real session files in shared/sessions and pricing them (the work of
``glyphpack context FILE``): time and peak memory per file, messages per second, and
the ratio to only parsing the file's JSON (the baseline, measured in the same run)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
import tracemalloc
from pathlib import Path

import pytest
from conftest import TABLES

from glyphpack import import_sessions
from glyphpack._compaction.cost import CostModel

SHARED = Path(__file__).resolve().parents[2] / "shared" / "sessions"
#: Real files the tests hold that shared/ does not (a Claude Code 2.1 subagent in progress
#: lines; an export OpenCode wrote itself).
EXTRA = [Path(__file__).resolve().parents[1] / "tests" / "data" / "sessions" / name for name in ("spotter-subagent.jsonl", "opencode-export.json")]
FILES = sorted(p for p in SHARED.glob("*/*") if p.parent.name != "licenses") + EXTRA if SHARED.is_dir() else []
ROWS: list[str] = []
#: format -> (messages, import seconds, parse-only seconds) of each of its files.
BY_FORMAT: dict[str, list[tuple[int, float, float]]] = {}


def parse_only(path: Path) -> int:
    """Records in the file, only parsed: JSON lines (two records glued on one line, as
    pi writes them, both counted), a JSON document, the lines of a text history, the
    rows of a database; a session's folder, each of its files."""
    if path.is_dir():
        return sum(parse_only(p) for p in sorted(path.iterdir()) if p.is_file())
    data = path.read_bytes()
    if data.startswith(b"SQLite format 3\0"):
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)) as database:
            tables = [row[0] for row in database.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            return sum(len(database.execute(f'SELECT * FROM "{table}"').fetchall()) for table in tables)
    if path.suffix == ".jsonl":
        decoder, records = json.JSONDecoder(), 0
        for line in data.decode("utf-8", "replace").splitlines():
            at = 0
            while line[at:].strip():
                _, end = decoder.raw_decode(line, at + len(line[at:]) - len(line[at:].lstrip()))
                at, records = end, records + 1
        return records
    if path.suffix == ".json" or data.lstrip()[:1] in (b"[", b"{"):
        return len(json.loads(data))
    return len(data.decode("utf-8", "replace").splitlines())  # a text history (aider's Markdown)


def import_and_price(path: Path) -> tuple[int, int]:
    cost = CostModel.for_model("claude-sonnet-4-5")
    every = [m for _, session in import_sessions(path) for agent in session.agents for m in agent.messages]
    return len(every), sum(cost.breakdown(every).values())


def kept(path: Path) -> tuple[str, str]:
    """The format, and what the import kept as table cells: agents, tool calls (all
    answered by a real result, or how many got the stand-in), the harness's compactions,
    messages with their time."""
    sessions = [session for _, session in import_sessions(path)]
    reports = [s.report for s in sessions]
    every = [m for s in sessions for agent in s.agents for m in agent.messages]
    stand_ins = sum(r.repaired.get("unanswered tool calls given an error result", 0) for r in reports)
    timed = sum(m.time is not None for m in every) / len(every)
    sessions_said = f"{len(sessions)} sessions, " if len(sessions) > 1 else ""
    cells = (f"{sessions_said}{sum(len(r.agents) for r in reports)} | {sum(r.tool_calls for r in reports):,}"
             + (f" ({stand_ins} stand-in)" if stand_ins else "")
             + f" | {sum(len(a.compactions) for s in sessions for a in s.agents)} of {sum(r.compactions for r in reports)} | {timed:.0%}")
    return reports[0].format, cells


def best_of(fn, path: Path, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn(path)
        times.append(time.perf_counter() - started)
    return min(times)


@pytest.mark.skipif(not FILES, reason="shared/sessions is not beside the repository")
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_import_and_context(path):
    baseline = best_of(parse_only, path)
    seconds = best_of(import_and_price, path)
    tracemalloc.start()
    messages, tokens = import_and_price(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    size = sum(p.stat().st_size for p in path.iterdir()) if path.is_dir() else path.stat().st_size
    format, cells = kept(path)
    ROWS.append(
        f"| {path.parent.name}/{path.name[:40]} | {format} | {size / 1e6:.2f} MB | {messages:,} | {cells} | {tokens:,} | {seconds * 1000:.1f} ms | "
        f"{messages / seconds:,.0f} | {peak / 1e6:.1f} MB | {seconds / baseline:.1f}x |"
    )
    BY_FORMAT.setdefault(format, []).append((messages, seconds, baseline))
    assert messages > 0


@pytest.fixture(scope="module", autouse=True)
def table():
    yield
    TABLES["importing real sessions and pricing them (one run)"] = [
        "| file | format | size | messages (all agents) | agents | tool calls | harness compactions kept | with their time | tokens (claude) | import + price | messages/s | peak memory | / parse only |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *ROWS,
    ]
    TABLES["each format, over its real files (one run)"] = [
        "| format | real files | messages | import + price | messages/s | / parse only |",
        "|---|---|---|---|---|---|",
        *(
            f"| {format} | {len(runs)} | {sum(m for m, _, _ in runs):,} | {sum(s for _, s, _ in runs) * 1000:.1f} ms | "
            f"{sum(m for m, _, _ in runs) / sum(s for _, s, _ in runs):,.0f} | {sum(s for _, s, _ in runs) / sum(b for _, _, b in runs):.1f}x |"
            for format, runs in sorted(BY_FORMAT.items())
        ),
    ]
