"""Importing the real session files in shared/sessions and pricing them (the work of
``glyphpack context FILE``): time and peak memory per file, messages per second, and
the ratio to only parsing the file's JSON (the baseline, measured in the same run)."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import pytest
from conftest import TABLES

from glyphpack import import_file
from glyphpack._compaction.cost import CostModel

SHARED = Path(__file__).resolve().parents[2] / "shared" / "sessions"
#: Real files the tests hold that shared/ does not (a Claude Code 2.1 subagent in progress
#: lines; an export OpenCode wrote itself).
EXTRA = [Path(__file__).resolve().parents[1] / "tests" / "data" / "sessions" / name for name in ("spotter-subagent.jsonl", "opencode-export.json")]
FILES = sorted(p for p in SHARED.glob("*/*") if p.parent.name != "licenses") + EXTRA if SHARED.is_dir() else []
ROWS: list[str] = []


def parse_only(path: Path) -> int:
    """Records in the file, only parsed: JSON lines (two records glued on one line, as
    pi writes them, both counted), a JSON document, or the lines of a text history."""
    data = path.read_bytes()
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
    session = import_file(path)
    cost = CostModel.for_model("claude-sonnet-4-5")
    every = [m for agent in session.agents for m in agent.messages]
    return len(every), sum(cost.breakdown(every).values())


def kept(path: Path) -> str:
    """What the import kept, as table cells: agents, tool calls (all answered by a real
    result, or how many got the stand-in), the harness's compactions, messages with their time."""
    session = import_file(path)
    r = session.report
    every = [m for agent in session.agents for m in agent.messages]
    stand_ins = r.repaired.get("unanswered tool calls given an error result", 0)
    timed = sum(m.time is not None for m in every) / len(every)
    return (f"{len(r.agents)} | {r.tool_calls:,}" + (f" ({stand_ins} stand-in)" if stand_ins else "")
            + f" | {sum(len(a.compactions) for a in session.agents)} of {r.compactions} | {timed:.0%}")


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
    size = path.stat().st_size
    ROWS.append(
        f"| {path.parent.name}/{path.name[:40]} | {size / 1e6:.2f} MB | {messages:,} | {kept(path)} | {tokens:,} | {seconds * 1000:.1f} ms | "
        f"{messages / seconds:,.0f} | {peak / 1e6:.1f} MB | {seconds / baseline:.1f}x |"
    )
    assert messages > 0


@pytest.fixture(scope="module", autouse=True)
def table():
    yield
    TABLES["importing real sessions and pricing them (one run)"] = [
        "| file | size | messages (all agents) | agents | tool calls | harness compactions kept | with their time | tokens (claude) | import + price | messages/s | peak memory | / JSON parse only |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *ROWS,
    ]
