"""Claude Code, Codex CLI and Gemini CLI themselves, each for a 30-call session through
``glyphpack proxy`` against a fake upstream whose window is 60k tokens and which refuses
the proxy's first summary request with a 429 (a side request refused as readily as any
other): every client exits 0 with the right answer, sees no error, and no request it
made goes over the window. Codex's upstream would report "too long" inside the stream,
as the Responses API may. (Gemini CLI's session needs no summary: its pages are cheap.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from glyphpack import Workspace
from glyphpack._proxy.conversations import ProxySettings
from glyphpack._session.compactor import Thresholds
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn, count_tokens, summary_prompt
from tests.test_proxy import _claude, _claude_code_route, _run_claude, _serve
from tests.test_proxy_codex import _codex, _run_codex
from tests.test_proxy_gemini_cli import _gemini_cli, _run_gemini

Json = dict[str, Any]
WINDOW = 60_000
CALLS = 30
PROMPT = "Find which service failed first: read every svc*.log here."
ANSWER = "DONE: auth failed first."


def _log(i: int) -> str:
    """About 2,500 tokens (as the fake counts) of a service's log, different per service."""
    return "\n".join(f"10:{i:02d}:{n:02d} svc{i} worker {n} handled request {n * 7 + i} in {n % 13} ms status ok" for n in range(110))


def _script(call: Callable[[int, Path], tuple[str, Json]], work: Path) -> list[Turn]:
    return [Turn(text=f"Checking log {i}.", calls=(call(i, work),)) for i in range(CALLS)] + [Turn(text=ANSWER)]


def _claude_code(tmp_path: Path, work: Path, agent: FakeModel, settings: ProxySettings) -> str:
    _claude()
    side = FakeModel([Turn(text="ok")])
    with FakeUpstream(agent, route=_claude_code_route(agent, side)) as upstream, Workspace(tmp_path / "ws") as workspace, _serve(workspace, upstream, settings) as proxy:
        return str(_run_claude(tmp_path, proxy, PROMPT, CALLS + 5)["result"])


def _codex_cli(tmp_path: Path, work: Path, agent: FakeModel, settings: ProxySettings) -> str:
    _codex()
    with FakeUpstream(agent, refusals_in_stream=True) as upstream, Workspace(tmp_path / "ws") as workspace, _serve(workspace, upstream, settings) as proxy:
        return _run_codex(tmp_path, proxy.url, PROMPT)


def _gemini(tmp_path: Path, work: Path, agent: FakeModel, settings: ProxySettings) -> str:
    _gemini_cli()
    side = FakeModel([Turn(text="ok")])

    def route(body: Json) -> FakeModel:
        return agent if summary_prompt(body) is not None or "run_shell_command" in json.dumps(body.get("tools") or ()) else side

    with FakeUpstream(agent, route=route) as upstream, Workspace(tmp_path / "ws") as workspace, _serve(workspace, upstream, settings) as proxy:
        return str(_run_gemini(tmp_path, proxy.url, PROMPT)["response"])


CLIENTS = {
    "claude-code": (_claude_code, lambda i, work: ("Bash", {"command": f"cat svc{i}.log", "description": f"show log {i}"})),
    "codex": (_codex_cli, lambda i, work: ("exec_command", {"cmd": f"cat svc{i}.log"})),
    "gemini-cli": (_gemini, lambda i, work: ("run_shell_command", {"command": f"cat svc{i}.log", "description": f"show log {i}"})),
}


@pytest.mark.slow  # each client for 31 requests and a summary: 5-15 s
@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_thirty_call_session_through_the_proxy_stays_in_a_60k_window_when_a_summary_is_refused(
    tmp_path: Path, client: str, capfd: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "project"
    work.mkdir()
    for i in range(CALLS):
        (work / f"svc{i}.log").write_text(_log(i) + "\n")
    run, call = CLIENTS[client]
    agent = FakeModel(_script(call, work), limit=WINDOW, summary_faults={1: "429"})
    answer = run(tmp_path, work, agent, ProxySettings(context_window=WINDOW))
    assert answer.strip().endswith(ANSWER)
    seen = [(status, body) for status, body in zip(agent.statuses, agent.requests) if summary_prompt(body) is None]
    summaries = [status for status, body in zip(agent.statuses, agent.requests) if summary_prompt(body) is not None]
    assert len(seen) == CALLS + 1 and {status for status, _ in seen} == {200}  # no request the client made was refused
    assert max(count_tokens(body) for _, body in seen) <= WINDOW
    tokens = [count_tokens(body) for _, body in seen]
    assert any(after < before for before, after in zip(tokens, tokens[1:]))  # compacted on the way
    # ... every time at the threshold, the refused summary's request too (the proxy let it
    # through whole, unrecorded, when its summarizer raised)
    threshold = Thresholds.for_window(WINDOW).threshold
    assert max(tokens) < threshold * 1.02, (tokens, threshold)
    err = capfd.readouterr().err
    # (Gemini CLI's own side requests may carry a call without its result: left unrecorded)
    assert "Traceback" not in err and "not compacted" not in err and "not recorded: the" not in err, err[-2000:]
    # The first summary was refused, and the session went on. Gemini's pages are cheap
    # enough (258 tokens a tile) that no summary is asked for.
    assert summaries[:1] == ([] if client == "gemini-cli" else [429])
