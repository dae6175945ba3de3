"""Gemini CLI itself through ``glyphpack proxy``, against the fake Gemini upstream on
127.0.0.1: configured offline as its own source reads it (``GOOGLE_GEMINI_BASE_URL`` for
the @google/genai client, ``GEMINI_API_KEY``, the API-key auth type chosen in
``~/.gemini/settings.json``, no folder-trust prompt, no telemetry or update checks)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from glyphpack import Workspace
from glyphpack._proxy.conversations import ProxySettings
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn, count_tokens, summary_prompt
from tests.harness_clients import installed
from tests.test_proxy import API_KEY, _serve, _tool_output

Json = dict[str, Any]


def _gemini_cli() -> str:
    return installed("gemini", "GLYPHPACK_GEMINI_CLI", "@google/gemini-cli")


def _run_gemini(tmp_path: Path, base_url: str, prompt: str) -> Json:
    """``gemini -p prompt`` against ``base_url``, in ``tmp_path / "project"``; its JSON result."""
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    env = {
        "PATH": os.environ.get("PATH", ""), "HOME": str(home), "NO_COLOR": "1", "CI": "true",
        "GEMINI_API_KEY": API_KEY, "GEMINI_DEFAULT_AUTH_TYPE": "gemini-api-key", "GOOGLE_GEMINI_BASE_URL": base_url,
        "GEMINI_CLI_NO_RELAUNCH": "true",
    }
    command = [_gemini_cli(), "-p", prompt, "-m", "gemini-2.5-flash", "--yolo", "--output-format", "json"]
    run = subprocess.run(command, cwd=tmp_path / "project", env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    result: Json = json.loads(run.stdout)
    return result


@pytest.mark.slow  # Gemini CLI (Node.js) for a 17-request session: about 3 s
def test_gemini_cli_through_the_proxy_is_compacted_and_never_sees_an_error(tmp_path: Path) -> None:
    _gemini_cli()
    work = tmp_path / "project"
    work.mkdir()
    calls = 16
    for i in range(calls):
        (work / f"svc{i}.log").write_text(_tool_output(f"svc{i}") + "\n")
    script = [
        Turn(text=f"Checking log {i}.", calls=(("run_shell_command", {"command": f"cat svc{i}.log", "description": f"show log {i}"}),))
        for i in range(calls)
    ] + [Turn(text="DONE: auth failed first.")]
    agent, side = FakeModel(script), FakeModel([Turn(text="ok")])

    def route(body: Json) -> FakeModel:
        # The agent's requests carry its tools; a summary is the proxy's; anything else
        # Gemini CLI asks on the side must not take the script's turns.
        return agent if summary_prompt(body) is not None or "run_shell_command" in json.dumps(body.get("tools") or ()) else side

    prompt = "Find which service failed first: read every svc*.log here."
    settings = ProxySettings(context_window=60_000, threshold=20_000)
    with FakeUpstream(agent, route=route) as upstream, Workspace(tmp_path / "ws") as workspace, _serve(workspace, upstream, settings) as proxy:
        result = _run_gemini(tmp_path, proxy.url, prompt)
        stored = {key: workspace.load(*key).messages for key in workspace.transcripts()}
    assert result["response"].endswith("DONE: auth failed first.")
    assert set(agent.statuses) == {200} and set(side.statuses) <= {200}  # every request accepted, the client saw no error
    requests = [body for body in agent.requests if summary_prompt(body) is None]
    assert len(requests) == calls + 1
    assert all(prompt in json.dumps(body["contents"][0]) for body in requests)  # the task, verbatim, first
    assert not [body for body in agent.requests if "model" in body]  # Gemini names the model in the path only
    tokens = [count_tokens(body) for body in requests]
    compacted = [i for i in range(1, len(tokens)) if tokens[i] < tokens[i - 1]]
    assert len(compacted) == 1 and max(tokens) < settings.threshold, tokens  # type: ignore[operator]
    # One conversation holds all of it: the task, every call with its real result, the answer.
    ((messages),) = stored.values()
    assert any(prompt in m.text for m in messages if m.role == "user")
    results = {r.call_id: r.text for m in messages for r in m.tool_results}
    assert sum(len(m.tool_calls) for m in messages) == calls and len(results) == calls
    for i in range(calls):  # each call's real output (the log's lines), never a stand-in
        assert sum(_tool_output(f"svc{i}").splitlines()[-1] in text for text in results.values()) == 1
    assert messages[-1].text == "DONE: auth failed first."
