"""The token estimate against the input tokens providers measured, per real session.

pi and Claude Code record each request's measured input tokens (cached ones
included); imported, they are ``ImportedAgent.usage`` records naming the messages each
request carried. A request also carries the harness's system prompt and tool schemas,
which no file holds: that is the estimator's ``overhead``, learned by ``calibrate`` from
a reported count, never a per-character rate. Three readings per agent:

- no calibration: the messages' estimate alone (the overhead is unknown);
- calibrated once, on the first response: the error on every later request;
- calibrated on each response: the error on the next request (how a harness uses it).

Only agents with at least five records are shown. The Claude Code fixture's file
paths were rewritten by its publisher ("/path/to/Demo"), so its requests carried text
the file no longer holds; pi's content is as it was sent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import TABLES

from glyphpack import calibrate, import_file
from glyphpack._compaction.cost import CostModel

SHARED = Path(__file__).resolve().parents[2] / "shared" / "sessions"
SESSIONS = ("pi/pimono-before-compaction.jsonl", "claude-code/ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")
ROWS: list[str] = []


def errors(agent, model: str = "claude-sonnet-4-5") -> dict[str, np.ndarray]:
    cost = CostModel.for_model(model)
    prefix = np.cumsum([0] + [cost.message(m) for m in agent.messages])
    estimate = np.array([prefix[end] - prefix[start] for start, end, _ in agent.usage], dtype=float)
    measured = np.array([tokens for *_, tokens in agent.usage], dtype=float)
    first = calibrate(agent.messages[agent.usage[0][0] : agent.usage[0][1]], model, int(measured[0])).overhead
    return {
        "none": np.abs(estimate - measured) / measured,
        "first": (np.abs(estimate + first - measured) / measured)[1:],
        "each": (np.abs(estimate[1:] + (measured[:-1] - estimate[:-1]) - measured[1:]) / measured[1:]),
        "overhead": np.array([first]),
    }


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared/sessions is not beside the repository")
@pytest.mark.parametrize("name", SESSIONS)
def test_estimate_against_measured(name):
    session = import_file(SHARED / name)
    for agent in session.agents:
        if len(agent.usage) < 5:
            continue
        e = errors(agent)

        def pct(values: np.ndarray, q: float) -> str:
            return f"{100 * np.quantile(values, q):.1f}%"

        ROWS.append(
            f"| {name.split('/')[0]} {agent.name} | {len(agent.usage)} | {int(e['overhead'][0]):,} | {pct(e['none'], 0.5)} | "
            f"{pct(e['first'], 0.5)} / {pct(e['first'], 0.9)} / {pct(e['first'], 1.0)} | "
            f"{pct(e['each'], 0.5)} / {pct(e['each'], 0.9)} / {pct(e['each'], 1.0)} |"
        )


@pytest.fixture(scope="module", autouse=True)
def table():
    yield
    TABLES["token estimate against measured input tokens (one run)"] = [
        "| session, agent | requests | overhead learned | error, no calibration (median) | calibrated once: median / p90 / max | calibrated each response: median / p90 / max |",
        "|---|---|---|---|---|---|",
        *ROWS,
    ]
