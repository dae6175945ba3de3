"""Refusals per 100 requests: a 30-turn tool loop of 5-8k-token outputs through each
API's real SDK against a fake with a 40k window (and one with a base64 blob in the
newest output, which the estimate prices far under the provider's count), no
summarizer, with and without the two changes that make recovery converge: the window a
refusal states (or the refused size) learned and kept, and the tail cut (the newest
results cut to their ends behind their refs when nothing else fits). The baseline is
this code with those two switched off, in the same process.

    python -m pytest benchmarks/test_bench_rejections.py -s
"""

from __future__ import annotations

import base64
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import TABLES

import glyphpack
from glyphpack import CompactionPolicy
from glyphpack._types import RUNGS
from glyphpack.testing.fake import FakeModel, Turn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import agent

MODELS = {"anthropic": "claude-sonnet-4-5", "openai-chat": "gpt-5.4", "openai-responses": "gpt-5.4", "gemini": "gemini-2.5-flash"}
WINDOW = 40_000
ROWS: list[str] = []


def outputs(turns: int, blob: bool) -> list[str]:
    rng = random.Random(3)
    words = ["error", "warning", "line", "file", "value", "index", "failed", "ok", "retry", "path", "/usr/lib", "=", "->"]
    out = [" ".join(rng.choice(words) for _ in range(rng.randint(15_000, 24_000) // 5)) for _ in range(turns)]
    if blob:  # 5 short outputs, then 80,000 characters of base64 (53k tokens as the provider counts it)
        out = [o[:6_000] for o in out[:5]] + [base64.b64encode(random.Random(1).randbytes(60_000)).decode()]
    return out


def run(tmp_path: Path, api: str, told: int | None, texts: list[str], converging: bool) -> tuple[int, int, str]:
    """(requests, refusals, how it ended) for one loop."""
    script = [Turn(text=f"step {n}", calls=(("read_file", {"path": f"out_{n}.txt"}),)) for n in range(len(texts))] + [Turn(text="done")]
    fake = FakeModel(script, limit=WINDOW)
    policy = None if converging else CompactionPolicy(rungs=tuple(r for r in RUNGS if r != "tail cut"))
    ended = "finished"
    with glyphpack.open_session(tmp_path / f"{api}-{converging}", "t", "a", model=MODELS[api], context_window=told, policy=policy) as session:
        if not converging:
            session._learn_window = lambda window: None  # type: ignore[method-assign]
        session.add_user("Read every output and say when you are done.")
        client = fake.client(api)
        try:
            while True:
                session.call(client, api=api, **agent.tool_schemas(api), **({"max_tokens": 1000} if api == "anthropic" else {}))
                if not session.pending_calls:
                    break
                session.add_tool_results({c.id: texts[int(c.arguments["path"][4:-4])] for c in session.pending_calls})
        except glyphpack.CompactionError as error:
            ended = f"CompactionError at request {len(fake.requests)}" + (": no rung left" if "no rung left" in str(error) else "")
    return len(fake.requests), fake.statuses.count(400), ended


SCENARIOS: dict[str, tuple[int | None, bool]] = {
    "told the 40k window": (WINDOW, False),
    "left to learn it": (None, False),
    "base64 blob, left to learn": (None, True),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("api", list(MODELS))
def test_refusals_per_100_requests(tmp_path: Path, api: str, scenario: str) -> None:
    told, blob = SCENARIOS[scenario]
    texts = outputs(30, blob)
    cells: list[Any] = []
    for converging in (False, True):
        requests, refused, ended = run(tmp_path, api, told, texts, converging)
        cells.append((requests, refused, ended))
    (b_requests, b_refused, b_ended), (a_requests, a_refused, a_ended) = cells
    if not ROWS:
        ROWS.extend(["| scenario | API | before: requests, refusals per 100, end | after: requests, refusals per 100, end |", "|---|---|---|---|"])
    ROWS.append(
        f"| {scenario} | {api} | {b_requests}, {100 * b_refused / b_requests:.0f}, {b_ended} | {a_requests}, {100 * a_refused / a_requests:.0f}, {a_ended} |"
    )
    TABLES["refusals per 100 requests, 40k window, no summarizer (one run)"] = ROWS
    assert a_ended == "finished"
