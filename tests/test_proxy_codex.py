"""Codex CLI itself through ``glyphpack proxy``, against the fake Responses upstream on
127.0.0.1: configured offline as its own documentation reads it (a ``model_providers``
entry in ``$CODEX_HOME/config.toml`` with the proxy's ``base_url``, ``wire_api =
"responses"`` and the key's variable; ``codex exec`` with approvals and the sandbox off,
in a throwaway folder)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from glyphpack import Workspace
from glyphpack._proxy.conversations import ProxySettings
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn, count_tokens, summary_prompt
from tests.harness_clients import installed
from tests.test_proxy import API_KEY, _serve, _tool_output

#: Words of Codex's own system prompt (a developer item in every request's ``input``).
CODEX_PROMPT = "You are a coding agent running in the Codex CLI"


def _codex() -> str:
    return installed("codex", "GLYPHPACK_CODEX", "@openai/codex")


def _run_codex(tmp_path: Path, base_url: str, prompt: str) -> str:
    """``codex exec prompt`` against ``base_url``, in ``tmp_path / "project"``; its last message."""
    home = tmp_path / "codex-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        'model = "gpt-5.4"\nmodel_provider = "glyphpack"\n\n[model_providers.glyphpack]\nname = "glyphpack"\n'
        f'base_url = "{base_url}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
    )
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "home"), "CODEX_HOME": str(home), "OPENAI_API_KEY": API_KEY, "NO_COLOR": "1"}
    last = tmp_path / "last.txt"
    command = [_codex(), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--color", "never",
               "--output-last-message", str(last), prompt]
    run = subprocess.run(command, cwd=tmp_path / "project", env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    return last.read_text()


@pytest.mark.slow  # Codex CLI for a 17-request session: about 3 s
def test_codex_through_the_proxy_is_compacted_and_keeps_its_system_prompt(tmp_path: Path) -> None:
    _codex()
    work = tmp_path / "project"
    work.mkdir()
    calls = 16
    for i in range(calls):
        (work / f"svc{i}.log").write_text(_tool_output(f"svc{i}") + "\n")
    script = [Turn(text=f"Checking log {i}.", calls=(("exec_command", {"cmd": f"cat svc{i}.log"}),)) for i in range(calls)]
    agent = FakeModel([*script, Turn(text="DONE: auth failed first.")])
    prompt = "Find which service failed first: read every svc*.log here."
    settings = ProxySettings(context_window=60_000, threshold=20_000)
    with FakeUpstream(agent) as upstream, Workspace(tmp_path / "ws") as workspace, _serve(workspace, upstream, settings) as proxy:
        answer = _run_codex(tmp_path, proxy.url, prompt)
        stored = {key: workspace.load(*key).messages for key in workspace.transcripts()}
    assert answer.strip() == "DONE: auth failed first."
    assert set(agent.statuses) == {200}  # every request Codex made was accepted
    requests = [body for body in agent.requests if summary_prompt(body) is None]
    assert len(requests) == calls + 1
    tokens = [count_tokens(body) for body in requests]
    compacted = [i for i in range(1, len(tokens)) if tokens[i] < tokens[i - 1]]
    # Compacted once, when the calibrated estimate reached the threshold (the provider's
    # count may pass it by the estimate's error: here within 1%).
    assert len(compacted) == 1 and max(tokens) < settings.threshold * 1.01, tokens  # type: ignore[operator]
    # Codex's system prompt (developer items in input) is in every request, the compacted ones included.
    assert all(json.dumps(body).count(CODEX_PROMPT) == 1 for body in requests)
    assert tokens[compacted[0]] > tokens[0]  # what was compacted was the conversation, never the prompt
    ((messages),) = stored.values()
    assert sum(len(m.tool_calls) for m in messages) == calls
    outputs = [r.text for m in messages for r in m.tool_results]
    for i in range(calls):  # each call's real output, never a stand-in
        assert sum(_tool_output(f"svc{i}").splitlines()[-1] in text for text in outputs) == 1
    assert messages[-1].text == "DONE: auth failed first."
