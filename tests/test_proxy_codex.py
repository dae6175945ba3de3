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


def _run_codex(tmp_path: Path, base_url: str, prompt: str, *, signed_in: bool = False) -> str:
    """``codex exec prompt`` against ``base_url``, in ``tmp_path / "project"``; its last
    message. ``signed_in``: signed in with ChatGPT (``_sign_in``) on the built-in OpenAI
    provider, its base URL set (``openai_base_url``), as most Codex users run it; else a
    provider of its own with an API key."""
    home = tmp_path / "codex-home"
    home.mkdir(exist_ok=True)
    if signed_in:
        _sign_in(home)
        # ChatGPT's own backend (plugins, usage) at the proxy too: nothing leaves this machine.
        (home / "config.toml").write_text(f'model = "gpt-5.4"\nopenai_base_url = "{base_url}/v1"\nchatgpt_base_url = "{base_url}/backend-api"\n')
    else:
        (home / "config.toml").write_text(
            'model = "gpt-5.4"\nmodel_provider = "glyphpack"\n\n[model_providers.glyphpack]\nname = "glyphpack"\n'
            f'base_url = "{base_url}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
        )
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "home"), "CODEX_HOME": str(home), "NO_COLOR": "1"}
    # Anything it would fetch from elsewhere fails here at once (no test reaches the network).
    env |= dict.fromkeys(("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"), "http://127.0.0.1:9") | {"NO_PROXY": "127.0.0.1,localhost"}
    if not signed_in:
        env["OPENAI_API_KEY"] = API_KEY
    last = tmp_path / "last.txt"
    command = [_codex(), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--color", "never",
               "--output-last-message", str(last), prompt]
    run = subprocess.run(command, cwd=tmp_path / "project", env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    if signed_in:  # its WebSocket refused with 426: over HTTP at once, no reconnects first
        assert "Reconnecting" not in run.stderr + run.stdout, run.stderr[-2000:]
    return last.read_text()


def _sign_in(home: Path) -> None:
    """A ChatGPT sign-in in ``home/auth.json`` as ``codex login`` leaves it: tokens whose
    claims Codex reads (a plan, an account) and that expire in a month (so nothing is
    refreshed); their signatures are never checked on this side."""
    import base64
    import datetime
    import time

    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = int(time.time())
    claims = {"exp": now + 30 * 86400, "iat": now, "email": "dev@example.com",
              "https://api.openai.com/auth": {"chatgpt_plan_type": "pro", "chatgpt_account_id": "account-test", "chatgpt_user_id": "user-test"}}  # fmt: skip
    token = f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.{part('signature')}"
    refreshed = datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
    tokens = {"id_token": token, "access_token": token, "refresh_token": "refresh-test", "account_id": "account-test"}
    (home / "auth.json").write_text(json.dumps({"auth_mode": "chatgpt", "OPENAI_API_KEY": None, "tokens": tokens, "last_refresh": refreshed}))


@pytest.mark.slow  # Codex CLI, two requests, after its WebSocket attempts: about 5 s
def test_codex_signed_in_with_chatgpt_sends_zstd_bodies_that_the_proxy_records_and_forwards_as_sent(tmp_path: Path) -> None:
    """Signed in with ChatGPT, Codex compresses each Responses request with zstd (its
    ``enable_request_compression``, on by default): the proxy records the session and
    the upstream gets Codex's own compressed bytes."""
    _codex()
    work = tmp_path / "project"
    work.mkdir()
    (work / "svc.log").write_text(_tool_output("svc") + "\n")
    agent = FakeModel([Turn(text="Reading.", calls=(("exec_command", {"cmd": "cat svc.log"}),)), Turn(text="DONE: auth failed first.")])
    with FakeUpstream(agent) as upstream, Workspace(tmp_path / "ws") as workspace, _serve(workspace, upstream) as proxy:
        answer = _run_codex(tmp_path, proxy.url, "Which service failed first? Read svc.log.", signed_in=True)
        stored = [workspace.load(*key).messages for key in workspace.transcripts()]
    assert answer.strip() == "DONE: auth failed first."
    assert set(agent.statuses) == {200} and len(agent.requests) == 2
    assert [coding for path, coding in upstream.encodings if path == "/v1/responses"] == ["zstd", "zstd"]  # as Codex sent them
    # Its calls to ChatGPT's backend (plugins, usage, events) came here through the proxy too.
    assert not [path for path in upstream.paths if not path.startswith(("/v1/", "/backend-api/"))]
    ((messages),) = stored
    assert any("Which service failed first? Read svc.log." in m.text for m in messages if m.role == "user")
    assert _tool_output("svc").splitlines()[-1] in messages[-2].tool_results[0].text  # the call's real output
    assert messages[-1].text == "DONE: auth failed first."


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
