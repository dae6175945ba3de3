"""The summarizer that ships: a model asked through its official SDK (anthropic, openai,
google-genai) against the local fake provider, with what it was billed in the report;
a prompt its provider still calls too long is halved, never lost; no key, no model or a
wrong type is a clear error; and the example agent runs the whole loop offline."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import glyphpack
from glyphpack import Message, Text, ToolCall, ToolResult
from glyphpack._cli import main
from glyphpack.testing import FakeModel, Turn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import agent

MODELS = {"anthropic": "claude-haiku-4-5", "openai-chat": "gpt-5.4", "openai-responses": "gpt-5.4", "gemini": "gemini-2.5-flash"}
#: Anthropic runs by default; the other SDKs in CI (and with --run-slow).
APIS = ["anthropic", *(pytest.param(api, marks=pytest.mark.slow) for api in list(MODELS)[1:])]


def history(reads: int) -> list[Message]:
    """A task, then ``reads`` file reads of about 6,000 characters each, then an answer."""
    out = [Message("system", (Text("be brief"),)), Message("user", (Text("find the parser"),))]
    for n in range(reads):
        out.append(Message("assistant", (ToolCall(f"c{n}", "read_file", {"path": f"mod_{n}.py"}),)))
        out.append(Message("tool", (ToolResult(f"c{n}", (Text(f"# mod_{n}\n" + "value = parse(token)\n" * 300),)),)))
    out.append(Message("assistant", (Text("the parser is in mod_3.py"),)))
    return out


@pytest.mark.parametrize("api", APIS)
def test_the_last_rung_summarizes_through_each_sdk_and_reports_the_bill(api):
    fake = FakeModel([Turn(text="unused")])
    summarizer = glyphpack.sdk_summarizer(fake.client(api), MODELS[api], api=api)
    source = history(12)
    result = glyphpack.compact(source, "claude-sonnet-4-5", 3_000, summarizer=summarizer,
                               policy=glyphpack.CompactionPolicy(rungs=("elision", "summarization")))
    rung = result.report.rung("summarization")
    assert result.report.fits and rung is not None and rung.summarizer_calls == len(fake.requests) >= 1
    assert set(fake.statuses) == {200}
    summary = next(m.text for m in result.view if m.id.startswith("summary-"))
    # The fake's summary names every call it read: what the middle held survives as words.
    middle = [c for m in source[rung.first_message - 1 : rung.last_message] for c in m.tool_calls]
    assert len(middle) >= 8 and all(f"read_file (path: {c.arguments['path']})" in summary for c in middle)
    assert rung.summarizer_input_tokens > 0 and rung.summarizer_output_tokens == 50 * len(fake.requests)  # the fake bills 50 out
    assert summarizer.fn.calls == rung.summarizer_calls  # type: ignore[attr-defined]


def test_a_prompt_the_provider_calls_too_long_is_halved_and_every_half_summarized():
    fake = FakeModel([Turn(text="unused")], limit=4_000)
    summarizer = glyphpack.sdk_summarizer(fake.client("anthropic"), "claude-haiku-4-5", window=200_000)
    prompt = summarizer.instructions + "".join(f"[tool call read_file #c{n}]\npath: mod_{n}.py\n" + "x" * 1_500 + "\n" for n in range(12))
    summary = summarizer.fn(prompt)
    assert 400 in fake.statuses and fake.statuses[-1] == 200
    assert all(f"read_file (path: mod_{n}.py)" in summary for n in range(12))  # no half was lost
    with pytest.raises(glyphpack.CompactionError, match="still calls a summary prompt of"):
        glyphpack.sdk_summarizer(FakeModel([Turn()], limit=1_000).client("anthropic"), "claude-haiku-4-5").fn(
            summarizer.instructions + "y " * 40_000)


def test_a_summarizer_needs_a_model_and_a_key_and_a_session_a_summarizer(tmp_path, monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(glyphpack.UsageError, match="needs the model id that summarizes"):
        glyphpack.sdk_summarizer(object())
    with pytest.raises(glyphpack.UsageError, match="summarizing with claude-haiku-4-5 needs your key in ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN"):
        glyphpack.open_session(tmp_path / "ws", "c", "a", model="claude-sonnet-4-5", summarizer="claude-haiku-4-5")
    with pytest.raises(glyphpack.UsageError, match=r"summarizer must be a glyphpack.Summarizer, a function .* \(or, for a session, a model id\), not int"):
        glyphpack.open_session(tmp_path / "ws", "c", "a", model="claude-sonnet-4-5", summarizer=3)  # type: ignore[arg-type]
    with pytest.raises(glyphpack.UsageError, match="not an anthropic, openai or google-genai client"):
        glyphpack.sdk_summarizer(object(), "claude-haiku-4-5")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    with glyphpack.open_session(tmp_path / "ws", "c", "a", model="claude-sonnet-4-5", summarizer="claude-haiku-4-5") as s:
        assert s.summarizer is not None and s.summarizer.fn.model == "claude-haiku-4-5"  # type: ignore[attr-defined]


def test_the_cli_compacts_with_a_summarizer_model_or_says_what_is_missing(tmp_path, monkeypatch, capsys):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "find the parser"}, {"role": "assistant", "content": "found"}]}))
    assert main(["compact", str(path), "--model", "claude-sonnet-4-5", "--budget", "2000", "--summarizer", "claude-haiku-4-5"]) == 2
    assert "needs your key in ANTHROPIC_API_KEY" in capsys.readouterr().err


def test_the_example_agent_runs_offline_with_compaction(tmp_path, capsys):
    project = tmp_path / "project"
    project.mkdir()
    for n in range(12):
        (project / f"mod_{n:02d}.py").write_text("".join(f"def f_{n}_{k}(value):\n    return parse(value, {k})\n" for k in range(150)))
    code = agent.main(["--fake", "--root", str(project), "--workspace", str(tmp_path / "ws"), "what is here?"])
    out, err = capsys.readouterr()
    assert code == 0 and out.startswith("I read 12 files: mod_00.py")
    assert "compacted" in err and "summarization" in err
    with glyphpack.open_session(tmp_path / "ws", "task-1", "coder", model="claude-sonnet-4-5") as resumed:
        assert resumed.state == "answered" and resumed.messages[-1].text == out.strip()
    with pytest.raises(SystemExit) as refused:
        agent.main(["--fake", "--root", str(tmp_path / "nowhere"), "--workspace", str(tmp_path / "ws"), "x"])
    assert refused.value.code == 2 and "no such directory" in capsys.readouterr().err


@pytest.mark.slow  # the SDK retries a refused connection with backoff: CI runs it
def test_the_example_agent_reports_an_unreachable_provider_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    code = agent.main(["--root", str(tmp_path), "--workspace", str(tmp_path / "ws"), "hello"])
    err = capsys.readouterr().err
    # The SDK's own words for it ("Connection error.", or since anthropic 2.17 the refused
    # address and its errno), on one line.
    assert code == 1 and err.splitlines()[-1].startswith("error: APIConnectionError: Connection") and "Traceback" not in err
