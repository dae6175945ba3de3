"""OpenCode itself through ``glyphpack proxy`` as an OpenAI-compatible provider, against
the fake Chat Completions upstream on 127.0.0.1: configured offline as its documentation
reads it (a provider in ``opencode.json`` on ``@ai-sdk/openai-compatible`` with the
proxy's ``baseURL``; its plugins, model catalog, LSP downloads and own compaction off,
and the npm registry pointed nowhere, so nothing reaches the network)."""

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
#: Words of OpenCode's own system prompt.
OPENCODE_PROMPT = "You are OpenCode"
#: Nowhere: a registry OpenCode might install from at run time.
NO_REGISTRY = "http://127.0.0.1:9"


def _opencode() -> str:
    return installed("opencode", "GLYPHPACK_OPENCODE", "opencode-ai")


def _run_opencode(tmp_path: Path, base_url: str, prompt: str) -> str:
    """``opencode run prompt`` with the proxy as its provider, in ``tmp_path / "project"``; what it printed."""
    work = tmp_path / "project"
    config = {
        "provider": {"glyphpack": {
            "npm": "@ai-sdk/openai-compatible", "name": "glyphpack",
            "options": {"baseURL": f"{base_url}/v1", "apiKey": API_KEY}, "models": {"gpt-5.4": {"name": "gpt-5.4"}},
        }},
        "model": "glyphpack/gpt-5.4", "autoupdate": False, "share": "disabled", "permission": {"bash": "allow", "edit": "allow"},
    }
    (work / "opencode.json").write_text(json.dumps(config))
    offline = {name: "1" for name in ("OPENCODE_PURE", "OPENCODE_DISABLE_DEFAULT_PLUGINS", "OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_LSP_DOWNLOAD",
                                      "OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_AUTOCOMPACT", "OPENCODE_DISABLE_CLAUDE_CODE", "OPENCODE_DISABLE_SHARE")}
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "home"), "NO_COLOR": "1", **offline,
           "npm_config_registry": NO_REGISTRY, "BUN_CONFIG_REGISTRY": NO_REGISTRY}
    run = subprocess.run([_opencode(), "run", prompt, "--model", "glyphpack/gpt-5.4"], cwd=work, env=env, capture_output=True, text=True,
                         timeout=300, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    return run.stdout


@pytest.mark.slow  # OpenCode for a 17-request session: about 5 s
def test_opencode_through_the_proxy_is_compacted_and_never_sees_an_error(tmp_path: Path) -> None:
    _opencode()
    work = tmp_path / "project"
    work.mkdir()
    calls = 16
    for i in range(calls):
        (work / f"svc{i}.log").write_text(_tool_output(f"svc{i}") + "\n")
    script = [Turn(text=f"Checking log {i}.", calls=(("bash", {"command": f"cat svc{i}.log", "description": f"show log {i}"}),)) for i in range(calls)]
    agent, side = FakeModel([*script, Turn(text="DONE: auth failed first.")]), FakeModel([Turn(text="Service logs")])

    def route(body: Json) -> FakeModel:
        # The agent's requests carry its tools; its side requests (a title) must not take the script's turns.
        names = [t.get("function", {}).get("name") for t in body.get("tools") or ()]
        return agent if summary_prompt(body) is not None or "bash" in names else side

    prompt = "Find which service failed first: read every svc*.log here."
    settings = ProxySettings(context_window=60_000, threshold=15_000)
    with FakeUpstream(agent, route=route) as upstream, Workspace(tmp_path / "ws") as workspace, _serve(workspace, upstream, settings) as proxy:
        printed = _run_opencode(tmp_path, proxy.url, prompt)
        stored = {key: workspace.load(*key).messages for key in workspace.transcripts()}
    assert printed.rstrip().endswith("DONE: auth failed first.")
    assert set(agent.statuses) == {200} and set(side.statuses) == {200}  # every request accepted
    requests = [body for body in agent.requests if summary_prompt(body) is None]
    assert len(requests) == calls + 1
    assert all(json.dumps(body).count(OPENCODE_PROMPT) == 1 for body in requests)  # its system prompt, always, once
    tokens = [count_tokens(body) for body in requests]
    compacted = [i for i in range(1, len(tokens)) if tokens[i] < tokens[i - 1]]
    # Compacted once, when the calibrated estimate reached the threshold (the provider's
    # count may pass it by the estimate's error: here within 1%).
    assert len(compacted) == 1 and max(tokens) < settings.threshold * 1.01, tokens  # type: ignore[operator]
    agents = [messages for messages in stored.values() if any(prompt in m.text for m in messages if m.role == "user")]
    (messages,) = [m for m in agents if any(m2.tool_calls for m2 in m)]
    assert sum(len(m.tool_calls) for m in messages) == calls
    outputs = [r.text for m in messages for r in m.tool_results]
    for i in range(calls):  # each call's real output, never a stand-in
        assert sum(_tool_output(f"svc{i}").splitlines()[-1] in text for text in outputs) == 1
    assert messages[-1].text == "DONE: auth failed first."
    assert not (tmp_path / "home" / ".npm").exists()  # nothing fetched from a registry
