"""The ladder on every real session in shared/sessions, for four readers at budgets of
50%, 20% and 5% of the session's tokens: fits or not, tokens after, pages, seconds per
million characters, and whether the view is a request each API accepts (glyphpack's
checks of what the servers enforce, and the SDKs' own request types)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import TABLES
from pydantic import TypeAdapter

import glyphpack
from glyphpack._compaction.cost import CostModel
from glyphpack._wire.anthropic import check_anthropic
from glyphpack._wire.openai_chat import check_openai_chat

SHARED = Path(__file__).resolve().parents[2] / "shared" / "sessions"
FILES = sorted(p for p in SHARED.glob("*/*") if p.parent.name != "licenses") if SHARED.is_dir() else []
MODELS = ("claude-sonnet-4-5", "claude-opus-4-7", "gpt-5.4", "gemini-3-pro")
SHARES = (0.5, 0.2, 0.05)
ROWS: list[str] = []
DENSE = glyphpack.CompactionPolicy(fidelity="dense")


def _adapters():
    from anthropic.types import MessageParam
    from openai.types.chat import ChatCompletionMessageParam

    return TypeAdapter(MessageParam), TypeAdapter(ChatCompletionMessageParam)


ANTHROPIC_MESSAGE, CHAT_MESSAGE = _adapters()


def accepted(view, profile) -> bool:
    try:
        glyphpack.validate_history(view, allow_pending=False)
        _, anthropic = glyphpack.to_anthropic(view)
        check_anthropic(anthropic, max_images=profile.max_images)
        chat = glyphpack.to_openai_chat(view)
        check_openai_chat(chat, max_images=profile.max_images)
        for entry in anthropic:
            ANTHROPIC_MESSAGE.validate_python(entry)
        for entry in chat:
            CHAT_MESSAGE.validate_python(entry)
    except Exception:
        return False
    return True


@pytest.mark.skipif(not FILES, reason="shared/sessions is not beside the repository")
@pytest.mark.parametrize("path", FILES, ids=[p.name[:30] for p in FILES])
def test_ladder_on_real_session(path):
    # a session's file or folder holds one session; a database (Crush's) several: each its rows
    sessions = glyphpack.import_sessions(path)
    for name, session in sessions:
        ladder(path.name if len(sessions) == 1 else f"{path.name[:14]}:{name[:13]}", list(session.messages))


def ladder(label: str, history: list) -> None:
    chars = sum(len(m.text) + sum(len(c.arguments_json) for c in m.tool_calls) for m in history)
    for model in MODELS:
        profile = glyphpack.resolve(model)
        tokens = CostModel(profile).history(history)
        for share in SHARES:
            budget = max(1, int(tokens * share))
            started = time.perf_counter()
            result = glyphpack.compact(history, profile, budget, policy=DENSE)  # as the README's table was measured
            seconds = time.perf_counter() - started
            valid = accepted(list(result.view), profile)
            ROWS.append(
                f"| {label[:28]} | {model} | {share:.0%} | {tokens:,} -> {result.report.tokens_after:,} | "
                f"{'yes' if result.report.fits else 'no'} | {len(result.pages)} | {seconds:.2f} | "
                f"{seconds / max(chars, 1) * 1e6:.2f} | {'yes' if valid else 'NO'} |"
            )
            assert valid, f"{label} {model} {share}"


@pytest.fixture(scope="module", autouse=True)
def table():
    yield
    TABLES["the ladder on real sessions, no summarizer (one run)"] = [
        "| session | model | budget | tokens before -> after | fits | pages | seconds | s per M chars | valid |",
        "|---|---|---|---|---|---|---|---|---|",
        *ROWS,
    ]
