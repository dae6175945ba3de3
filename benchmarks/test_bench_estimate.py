"""The token estimate against the input tokens providers measured, per real session.

pi and Claude Code record each request's measured input tokens (cached ones
included); imported, they are ``ImportedAgent.usage`` records naming the messages each
request carried. A request also carries the harness's system prompt and tool schemas,
which no file holds: that is the estimator's ``overhead``, learned by ``calibrate`` from
a reported count, never a per-character rate. Three readings per agent:

- no calibration: the messages' estimate alone (the overhead is unknown);
- calibrated once, on the first response: the error on every later request;
- calibrated on each response: the error on the next request, with the overhead alone
  learned (additive) and with a scale learned too (``Calibration``, what a ``Session``
  does), and the scale and overhead it ends with beside the additive overhead.

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
from glyphpack._compaction.calibration import Calibration
from glyphpack._compaction.cost import CostModel

SHARED = Path(__file__).resolve().parents[2] / "shared" / "sessions"
SESSIONS = ("pi/pimono-before-compaction.jsonl", "claude-code/ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")
ROWS: list[str] = []


def errors(agent, model: str = "claude-sonnet-4-5") -> dict[str, np.ndarray]:
    cost = CostModel.for_model(model)
    prefix = np.cumsum([0] + [cost.message(m) for m in agent.messages])
    estimate = np.array([prefix[u.end] - prefix[u.start] for u in agent.usage], dtype=float)
    measured = np.array([u.tokens for u in agent.usage], dtype=float)
    first = calibrate(agent.messages[agent.usage[0].start : agent.usage[0].end], model, int(measured[0])).overhead
    learned, calibration, priced = [], Calibration(base=cost.estimator), cost
    for k, usage in enumerate(agent.usage):
        tokens = usage.tokens
        priced = priced.with_estimator(calibration.estimator)
        view = agent.messages[usage.start : usage.end]
        if k:
            learned.append(abs(priced.history(view) + calibration.overhead - tokens) / tokens)
        calibration = calibration.learn(priced, view, tokens)
    return {
        "learned": np.array(learned),
        "final": np.array([calibration.scale, calibration.overhead, measured[-1] - estimate[-1]]),
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
            f"{pct(e['each'], 0.5)} / {pct(e['each'], 0.9)} / {pct(e['each'], 1.0)} | "
            f"{pct(e['learned'], 0.5)} / {pct(e['learned'], 0.9)} / {pct(e['learned'], 1.0)} | "
            f"{e['final'][0]:.2f}, {int(e['final'][1]):,} ({int(e['final'][2]):,}) |"
        )


@pytest.fixture(scope="module", autouse=True)
def table():
    yield
    TABLES["token estimate against measured input tokens (one run)"] = [
        "| session, agent | requests | overhead learned | error, no calibration (median) | calibrated once: median / p90 / max "
        "| each response, overhead only: median / p90 / max | each response, scale learned too: median / p90 / max "
        "| at the end: scale, overhead (overhead only) |",
        "|---|---|---|---|---|---|---|---|",
        *ROWS,
    ]


#: Real sessions with usage records, by the tokenizer family that counted them (SOURCES.md
#: and the files' own model fields): Anthropic (pi on Claude Opus 4.5, Claude Code on
#: Sonnet 4 and 4.5), OpenAI (Codex on GPT-5-codex), and two families glyphpack has no
#: reader for (mini-swe-agent on deepseek-chat, OpenHands on Llama 4 Maverick).
FAMILIES = {
    "anthropic": ("claude-sonnet-4-5", ("pi/pimono-before-compaction.jsonl", "pi/pimono-session.jsonl",
                                        "claude-code/ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl", "claude-code/pai-agent-dee347d2.jsonl")),
    "openai": ("gpt-5.4", ("codex/neurodata-rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl",)),
    "deepseek (no reader)": ("gpt-5.4", ("mini-swe-agent/miniswe-django__django-12470.traj.json",)),
    "llama (no reader)": ("gpt-5.4", ("openhands/openhands-multi_swe_bench-output.jsonl",)),
}
FAMILY_ROWS: list[str] = []


def pairs(model: str, files: tuple[str, ...], estimator) -> list[tuple[np.ndarray, np.ndarray]]:
    """(estimates, measured) per agent with at least five usage records."""
    cost = CostModel.for_model(model, estimator)
    out = []
    for name in files:
        for agent in import_file(SHARED / name).agents:
            if len(agent.usage) >= 5:
                prefix = np.cumsum([0] + [cost.message(m) for m in agent.messages])
                out.append((np.array([prefix[u.end] - prefix[u.start] for u in agent.usage], float), np.array([u.tokens for u in agent.usage], float)))
    return out


def fitted_scale(runs: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """The rate multiple that best explains each request's change from the first one
    (least squares on relative errors; the overhead, unknown, cancels)."""
    num = sum(float(np.sum((e[1:] - e[0]) * (m[1:] - m[0]) / m[1:] ** 2)) for e, m in runs)
    den = sum(float(np.sum((e[1:] - e[0]) ** 2 / m[1:] ** 2)) for e, m in runs)
    return num / den


def calibrated_errors(runs: list[tuple[np.ndarray, np.ndarray]], scale: float) -> tuple[np.ndarray, np.ndarray]:
    once = np.concatenate([np.abs(scale * (e[1:] - e[0]) + m[0] - m[1:]) / m[1:] for e, m in runs])
    each = np.concatenate([np.abs(scale * (e[1:] - e[:-1]) + m[:-1] - m[1:]) / m[1:] for e, m in runs])
    return once, each


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared/sessions is not beside the repository")
@pytest.mark.parametrize("family", FAMILIES)
def test_estimate_per_provider_family(family):
    from glyphpack._providers.text_tokens import DEFAULT_ESTIMATOR

    model, files = FAMILIES[family]
    runs = pairs(model, files, DEFAULT_ESTIMATOR.scaled(1.0))  # the rates before any family's scale
    shipped = CostModel.for_model(model).estimator.latin / DEFAULT_ESTIMATOR.latin if "no reader" not in family else 1.0
    fit = fitted_scale(runs)
    cells = []
    for scale in (shipped, fit):
        once, each = calibrated_errors(runs, scale)
        cells.append(f"{100 * np.median(once):.1f}% / {100 * np.quantile(once, 0.9):.1f}% | "
                     f"{100 * np.median(each):.1f}% / {100 * np.quantile(each, 0.9):.1f}%")
    FAMILY_ROWS.append(f"| {family} | {sum(len(m) for _, m in runs)} | {fit:.3f} | {shipped:.2f} | {cells[0]} | {cells[1]} |")


@pytest.fixture(scope="module", autouse=True)
def family_table():
    yield
    TABLES["text estimate per tokenizer family, calibrated from each file (one run)"] = [
        "| family | requests | fitted rate multiple | shipped | shipped rates: once median / p90 | each median / p90 "
        "| fitted rates: once median / p90 | each median / p90 |",
        "|---|---|---|---|---|---|---|---|",
        *FAMILY_ROWS,
    ]
