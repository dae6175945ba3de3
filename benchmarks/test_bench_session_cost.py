"""What a session costs, replayed: the real pi session in shared/sessions/pi, turn by
turn through ``Session`` for Claude (200k window), under Anthropic's prompt-cache
pricing, three ways:

- none:       no compaction; the replay stops where a request no longer fits the window.
- summary:    summarization only, at 83% of the window (as Claude Code does), with a
              stub summarizer that returns a fixed-size summary.
- session:    ``Session``'s defaults (threshold 175k, target 87.5k, the same stub summarizer):
              pages in the reader's exact shape; for Sonnet 4.5, which has no reading
              evidence, 9x15 glyphs on 10x16 cells and the whole ladder.
- fable-5:    the same for a Claude reader known to read 5x8 (Fable 5): dense pages and
              no elision (old tool results go to pages whole). Same geometry and prices.

Billing, in input-token equivalents: uncached input 1x, cache writes 1.25x, cache reads
0.1x (5-minute cache; the replay is taken to run within it), images at their billed
tokens, the summarizer's prompts at 1x and its output at 5x (Sonnet's output/input price
ratio). Cache model: a breakpoint where ``Session.request`` puts one (end of a compaction,
newest message); a request reads the longest cached prefix ending at most 20 blocks
before one of its breakpoints, writes the rest up to its last breakpoint. Token counts
are glyphpack's estimates (no provider is called).

Held at the end: of the session's characters so far, the share the last request carries
as verbatim text, as snapshot pixels, and only as a summary or a stub.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path

import pytest
from conftest import TABLES

import glyphpack
from glyphpack import CompactionError, CompactionPolicy, Message, Summarizer, ToolResult
from glyphpack._history.apis.anthropic import anthropic_block
from glyphpack._history.codec import message_to_json

SHARED = Path(__file__).resolve().parents[2] / "shared" / "sessions"
PI = SHARED / "pi" / "pimono-before-compaction.jsonl"
MODEL = "claude-sonnet-4-5"
WINDOW = 200_000
SUMMARY_CHARS = 8_000
CACHE_WRITE, CACHE_READ, OUTPUT = 1.25, 0.1, 5.0
LOOKBACK_BLOCKS = 20


@dataclasses.dataclass
class Bill:
    uncached: int = 0
    written: int = 0
    read: int = 0
    summarizer_in: int = 0
    summarizer_out: int = 0
    requests: int = 0

    @property
    def total(self) -> float:
        return (self.uncached + CACHE_WRITE * self.written + CACHE_READ * self.read
                + self.summarizer_in + OUTPUT * self.summarizer_out)


class PromptCache:
    """Prefixes written at breakpoints, by hash of the messages before them."""

    def __init__(self) -> None:
        self.entries: set[str] = set()

    def charge(self, view: tuple[Message, ...], breakpoints: list[int], costs: list[int], bill: Bill) -> None:
        hashes, running = [], hashlib.sha256()
        hashes.append(running.hexdigest())
        for message in view:
            running.update(json.dumps(message_to_json(message), sort_keys=True).encode("utf-8", "surrogatepass"))
            hashes.append(running.hexdigest())
        prefix_tokens = [0]
        for c in costs:
            prefix_tokens.append(prefix_tokens[-1] + c)
        blocks = [0]
        for message in view:
            blocks.append(blocks[-1] + max(1, len(message.content)))
        read = 0
        for k in range(len(view), 0, -1):
            if hashes[k] in self.entries and any(b >= k and blocks[b] - blocks[k] <= LOOKBACK_BLOCKS for b in breakpoints):
                read = prefix_tokens[k]
                break
        last = max(breakpoints)
        bill.read += read
        bill.written += prefix_tokens[last] - read
        bill.uncached += prefix_tokens[len(view)] - prefix_tokens[last]
        bill.requests += 1
        self.entries.update(hashes[b] for b in breakpoints)


def stub_summarizer(bill: Bill, cost) -> Summarizer:
    def fn(prompt: str) -> str:
        summary = ("Summary of the work so far: files read, edits made, tests run, what is open. " * 200)[:SUMMARY_CHARS]
        bill.summarizer_in += cost.text(prompt)
        bill.summarizer_out += cost.text(summary)
        return summary

    return Summarizer(fn, window=WINDOW, output_reserve=8_000)


def chars_of(message: Message) -> int:
    return len(message.text) + sum(len(c.arguments_json) for c in message.tool_calls)


def provider_count(model: str, scale: float, overhead: int):
    """A provider whose tokenizer counts text at ``scale`` times glyphpack's estimate,
    images exactly, plus ``overhead`` tokens of system prompt and tools no message holds."""
    from glyphpack._compaction.cost import CostModel

    counted = CostModel.for_model(model, CostModel.for_model(model).estimator.scaled(scale))
    return lambda view: counted.history(view) + overhead


def response_with_count(message: Message, tokens: int) -> dict:
    """``message`` as an Anthropic response reporting ``tokens`` input tokens."""
    content = [block for block in map(anthropic_block, message.content) if block is not None]
    return {"type": "message", "role": "assistant", "content": content, "usage": {"input_tokens": tokens, "output_tokens": 1}}


def replay(history: list[Message], mode: str, workspace: Path, window: int = WINDOW, overhead: int = 0, scale: float = 1.0) -> dict:
    """One strategy over ``history``; with ``overhead``, every response reports what a
    provider counting ``scale`` times the estimate plus ``overhead`` would (calibration
    learns it) and the bill carries the overhead in every request's cached prefix."""
    bill = Bill()
    model = "claude-fable-5" if mode == "fable-5" else MODEL
    cost = glyphpack._compaction.cost.CostModel.for_model(model)
    count = provider_count(model, scale, overhead) if overhead else None
    options: dict = {"summarizer": stub_summarizer(bill, cost), "context_window": window}
    if mode == "none":
        options |= {"policy": CompactionPolicy(rungs=()), "threshold": window, "target": window - 1}
    elif mode == "summary":
        options |= {"policy": CompactionPolicy(rungs=("summarization",)), "threshold": int(window * 0.83)}
    cache = PromptCache()
    compactions, covers, turns, stopped = 0, None, 0, ""
    started = time.perf_counter()
    system = next((m.text for m in history if m.role == "system"), None)
    results: list[ToolResult] = []
    waiting: list[Message] = []  # user messages that came while calls were pending
    with glyphpack.open_session(workspace, f"pi-{mode}", "agent", model=model, system=system, **options) as s:
        for message in history:
            if message.role == "system":
                continue
            if message.role == "user" and not message.tool_results:
                if s.pending_calls:
                    waiting.append(message)
                else:
                    s.add_user(message.content)
                continue
            if message.role in ("tool", "user"):
                results.extend(message.tool_results)
                if {r.call_id for r in results} >= {c.id for c in s.pending_calls}:
                    s.add_tool_results([r for r in results if r.call_id in {c.id for c in s.pending_calls}])
                    results = []
                    for note in waiting:
                        s.add_user(note.content)
                    waiting = []
                continue
            try:
                s.request("anthropic")
            except CompactionError as exc:
                stopped = str(exc).split(";")[0]
                break
            view, prefix = s.request_view()
            if (s.view.covers if s.view else None) != covers:
                compactions += 1
                covers = s.view.covers if s.view else None
            breakpoints = sorted({b for b in (prefix, len(view)) if b > 0})
            costs = [s.cost().message(m) for m in view]
            costs[0] += overhead  # the system prompt and tools open every cached prefix
            cache.charge(view, breakpoints, costs, bill)
            s.add_response(response_with_count(message, count(view)) if count else message, "anthropic")
            turns += 1
        view, prefix = s.request_view()
        total_chars = sum(chars_of(m) for m in s.messages)
        originals = {m.id: m for m in s.messages}
        verbatim = sum(chars_of(m) for m in view if originals.get(m.id) == m)
        snapshot = s.last_compaction.report.rung("snapshot") if s.last_compaction and s.view else None
        pixels = snapshot.middle_chars if snapshot and snapshot.pages else 0
    held = {"verbatim": verbatim / total_chars, "pixels": min(pixels, total_chars - verbatim) / total_chars}
    rest = 1 - held["verbatim"] - held["pixels"]
    # glyphpack's notes name a ref for everything they put away (tests/test_recall.py);
    # the Claude Code-style baseline's summary stands for what it replaced, which is gone.
    recallable = rest if mode in ("session", "fable-5") else 0.0
    return {
        "mode": mode, "turns": turns, "requests": bill.requests, "compactions": compactions, "bill": bill,
        **held, "recallable": recallable, "lost": rest - recallable,
        "stopped": stopped, "seconds": time.perf_counter() - started,
    }


#: The replay's scenarios: (label, window, harness overhead, the provider's count as a
#: multiple of the estimate). The second is the one a 100k-window replay of Claude Code
#: sessions stopped on (38-43k of system prompt and tools, Opus counting 1.22x).
SCENARIOS = (("200k window", WINDOW, 0, 1.0), ("100k window, 40k overhead, counted 1.22x", 100_000, 40_000, 1.22))


@pytest.mark.skipif(not PI.is_file(), reason="shared/sessions is not beside the repository")
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_session_cost_replay(tmp_path, scenario):
    label, window, overhead, scale = scenario
    history = list(glyphpack.import_file(PI).messages)
    modes = ("none", "summary", "session", "fable-5") if not overhead else ("none", "summary", "session")
    rows = [replay(history, mode, tmp_path / mode, window, overhead, scale) for mode in modes]
    assistant_turns = sum(1 for m in history if m.role == "assistant")
    lines = [
        f"pi session, {assistant_turns} model calls, replayed for {MODEL} ({label}); "
        "billed input-token equivalents (write 1.25x, read 0.1x, summarizer output 5x)",
        "",
        "| strategy | calls replayed | compactions | uncached | cache writes | cache reads | summarizer in / out | billed | per call "
        "| held verbatim | as pixels | recallable | lost |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        bill: Bill = row["bill"]
        lines.append(
            f"| {row['mode']} | {row['turns']:,}{' (stopped: window)' if row['stopped'] else ''} | {row['compactions']} "
            f"| {bill.uncached:,} | {bill.written:,} | {bill.read:,} | {bill.summarizer_in:,} / {bill.summarizer_out:,} "
            f"| {bill.total:,.0f} | {bill.total / max(1, row['turns']):,.0f} | {row['verbatim']:.0%} | {row['pixels']:.0%} "
            f"| {row['recallable']:.0%} | {row['lost']:.0%} |"
        )
    lines.append("")
    lines.append("seconds per replay: " + ", ".join(f"{r['mode']} {r['seconds']:.1f}" for r in rows))
    TABLES[f"session cost replay, {label} (benchmarks/test_bench_session_cost.py)"] = lines
    assert all(row["turns"] == assistant_turns for row in rows[1:])
