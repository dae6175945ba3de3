"""What an agent framework's own history strategy bills against the same framework with
glyphpack's adapter, on one long real session replayed turn by turn (the replay of
``test_bench_session_cost.py``: its billing model, checked against the recorded bills,
its prompt cache, the session's own provider and prices).

Out of the box, the OpenAI Agents SDK (``SQLiteSession`` and the other stores), Pydantic
AI (no history processor) and Google ADK (no events compaction) send the whole history
every turn: the "none" row, which stops where a request no longer fits the window.
LangChain's ``SummarizationMiddleware`` is the "langchain summary" row (its defaults, see
``LangChainSummary``). The Agents SDK's ``OpenAIResponsesCompactionSession`` compacts on
OpenAI's servers (opaque, OpenAI only): no offline replay can price it, so it has no row.

Each glyphpack adapter sends exactly ``Session.next_view`` (tests/test_adapter_*.py
check the requests the real frameworks send), so one "default" row stands for all four.
"""

from __future__ import annotations

import pytest
from conftest import TABLES
from test_bench_session_cost import (
    PRICES,
    SHARED,
    _main_agent,
    recorded_provider,
    replay,
)

SESSION = ("pi, 471 calls", "pi/pimono-before-compaction.jsonl", "anthropic", "claude-sonnet-4-5")
WINDOW = 200_000
ROWS = (
    ("OpenAI Agents SDK, Pydantic AI, Google ADK, LangChain as shipped", "none"),
    ("LangChain with SummarizationMiddleware", "langchain summary"),
    ("any of the four with its glyphpack adapter", "default"),
)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared/sessions is not beside the repository")
def test_framework_strategies_replayed(tmp_path):
    label, name, provider_name, model = SESSION
    agent = _main_agent(SHARED / name)
    prices = PRICES[provider_name]
    provider = recorded_provider(agent, prices, model)
    calls = sum(m.role == "assistant" for m in agent.messages)
    rows = [(who, replay(agent.messages, strategy, provider, prices, tmp_path / strategy, WINDOW)) for who, strategy in ROWS]
    glyphpack_row = rows[-1][1]
    assert not glyphpack_row["stopped"] and glyphpack_row["calls"] == calls
    lines = [
        f"{label}, {WINDOW:,}-token window, {provider_name} prices (billed input-token equivalents, prompt cache included)",
        "",
        "| framework | strategy | calls replayed | compactions | billed | per call | against glyphpack per call | held verbatim | as pixels | recallable | lost |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ours = glyphpack_row["bill"].total / glyphpack_row["calls"]
    for who, row in rows:
        bill = row["bill"]
        stopped = f" (stopped: {row['stopped']})" if row["stopped"] else ""
        per_call = bill.total / max(1, row["calls"])
        lines.append(
            f"| {who} | {row['strategy']} | {row['calls']:,} of {calls:,}{stopped} | {row['compactions']} | {bill.total:,.0f} | {per_call:,.0f} "
            f"| {per_call / ours:.2f}x | {row['verbatim']:.0%} | {row['pixels']:.0%} | {row['recallable']:.0%} | {row['lost']:.0%} |"
        )
    TABLES["framework strategies replayed (benchmarks/test_bench_frameworks.py)"] = lines
