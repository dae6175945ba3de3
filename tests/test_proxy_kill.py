"""``glyphpack proxy`` SIGKILLed at every point between receiving a request and
finishing its record (``proxy_killed.py`` names them), with a client that does what the
SDKs do: it sends the same request again once a proxy answers (here: one started anew
on the same workspace), and goes on. Nothing the client holds is lost: the workspace
ends with one conversation, exactly the client's history, whatever the point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
import httpx

from glyphpack import Workspace
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn

Json = dict[str, Any]
TESTS = Path(__file__).resolve().parent
POINTS = ("received", "held", "read", "forwarded", "streaming", "answered", "transcript", "recorded")
#: The request the proxy dies in: the third, with two turns stored before it.
KILLED_REQUEST = 3
SCRIPT = [
    Turn(text="Which logs?"),
    Turn(calls=(("read", {"path": "auth.log"}),)),
    Turn(text="The auth service failed first."),
    Turn(calls=(("read", {"path": "db.log"}),)),
    Turn(text="Then the database."),
    Turn(text="Done."),
]


READ = {"name": "read", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}


def _started(workspace: Path, upstream: str, kill: tuple[str, int] | None = None) -> tuple[subprocess.Popen[str], str]:
    """``glyphpack proxy`` on ``workspace`` (a free port): its process and URL; with
    ``kill``, one that SIGKILLs itself there."""
    args = ["--upstream", upstream, "--workspace", str(workspace), "--port", "0", "--quiet"]
    command = [sys.executable, str(TESTS / "proxy_killed.py"), kill[0], str(kill[1]), "--", *args] if kill else [sys.executable, "-m", "glyphpack", "proxy", *args]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    return process, process.stderr.readline().split()[3]


def _answer(stream: bytes) -> list[Json]:
    """The content blocks of a whole streamed Messages answer; ValueError if it is cut."""
    blocks: list[Json] = []
    stopped = False
    for line in stream.decode().splitlines():
        if not line.startswith("data:"):
            continue
        event = json.loads(line[5:])
        kind = event.get("type")
        if kind == "content_block_start":
            blocks.append(dict(event["content_block"]))
            blocks[-1].pop("citations", None)
        elif kind == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                blocks[-1]["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                blocks[-1]["partial"] = blocks[-1].get("partial", "") + delta["partial_json"]
        elif kind == "message_stop":
            stopped = True
    if not stopped:
        raise ValueError("the answer was cut")
    for block in blocks:
        if block["type"] == "tool_use":
            block["input"] = json.loads(block.pop("partial", "") or "{}")
    return blocks


def _without_citations(block: Json) -> Json:
    return {k: v for k, v in block.items() if k != "citations"}


def _shape(role: str, content: Any) -> tuple[str, ...]:
    """A message as both sides can say it: its role and each block's words or call."""
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    parts = []
    for block in content:
        kind = block["type"]
        parts.append(block["text"] if kind == "text" else f"call {block['name']}" if kind == "tool_use" else f"result {block['content']}")
    return (role, *parts)


#: Each point with streamed answers, and with whole ones (recorded after the client has
#: them, the conversation being stored by then) where a whole answer passes it.
CASES = [pytest.param(point, True, id=f"{point}-streamed") for point in POINTS] + [
    pytest.param(point, False, id=f"{point}-whole") for point in POINTS if point != "streaming"
]


@pytest.mark.slow
@pytest.mark.parametrize(("point", "stream"), CASES)
def test_a_proxy_killed_anywhere_between_a_request_and_its_record_loses_nothing_the_client_holds(tmp_path: Path, point: str, stream: bool) -> None:
    workspace = tmp_path / "ws"
    with FakeUpstream(FakeModel(list(SCRIPT))) as upstream:
        process, url = _started(workspace, upstream.url, (point, KILLED_REQUEST))
        history: list[Json] = [{"role": "user", "content": "Read the logs: which service failed first?"}]
        killed = False
        try:
            for _ in range(5):
                while True:
                    try:
                        with httpx.Client(base_url=url, timeout=30, headers={"x-api-key": "sk-kill"}) as client:
                            response = client.post("/v1/messages", json={"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": stream, "tools": [READ], "messages": history})
                        assert response.status_code == 200, response.text
                        content = _answer(response.content) if stream else [_without_citations(b) for b in response.json()["content"]]
                        break
                    except (httpx.TransportError, ValueError):
                        # The proxy died mid-request: the client sends it again to a proxy started anew.
                        assert process.wait(timeout=30) == -9 and not killed
                        killed = True
                        process, url = _started(workspace, upstream.url)
                history.append({"role": "assistant", "content": content})
                calls = [b for b in content if b["type"] == "tool_use"]
                results = [{"type": "tool_result", "tool_use_id": c["id"], "content": f"{c['input']['path']}: ok"} for c in calls]
                history.append({"role": "user", "content": results or "Go on."})
        finally:
            process.terminate()
            process.communicate(timeout=30)
    assert killed  # the point was reached
    stored = Workspace(workspace)
    ((conversation, agent),) = stored.transcripts()  # found again after the restart: one conversation
    kept = [_shape("user" if m.role == "tool" else m.role, [_block(b) for b in m.content]) for m in stored.load(conversation, agent).messages]
    assert kept == [_shape(m["role"], m["content"]) for m in history[:-1]]  # all but the words never sent


def _block(block: Any) -> Json:
    """A stored block in the client's shape, as far as ``_shape`` reads it."""
    from glyphpack import Text, ToolCall, ToolResult

    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolCall):
        return {"type": "tool_use", "name": block.name}
    assert isinstance(block, ToolResult)
    return {"type": "tool_result", "content": "".join(part.text for part in block.content if isinstance(part, Text))}
