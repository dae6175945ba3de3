"""Importers on the real session files in ``shared/sessions`` (and the copies in
``tests/data/sessions``): concrete counts per file, histories every provider's SDK
types accept, the session tree as the file had it, and mutated lines that give only
``HistoryError`` or a valid import."""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

import glyphpack
from glyphpack import HistoryError, Message, Opaque, RedactedThinking, Text, Thinking, import_file
from glyphpack._cli import main
from glyphpack._history.codec import history_from_json, history_to_json
from glyphpack._history.messages import validate_history
from glyphpack._importers.base import MISSING_RESULT

SHARED = Path(__file__).resolve().parents[2] / "shared" / "sessions"
DATA = Path(__file__).parent / "data" / "sessions"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="shared/sessions is not beside the repository")
#: The small shared files copied into tests/data (with their licences): a bare checkout tests them too.
COPIED = Path(__file__).resolve().parent / "data" / "sessions"


def session_path(name: str) -> Path:
    """A shared session file: from ``../shared/sessions``, else its copy in tests/data
    (skipped when neither is here)."""
    for path in (SHARED / name, COPIED / Path(name).name):
        if path.exists():  # a file, or a session's own folder
            return path
    pytest.skip("shared/sessions is not beside the repository, and tests/data has no copy of this file")

# file, format, messages, tool calls, tool results, images, thinking blocks, agents,
# other branches, compaction points, skipped, repaired, call ids made unique
EXPECTED = [
    ("aider/mozgoslav-aider.chat.history.md", "aider", 21, 0, 0, 0, 16, 1, 0, 0, 0, 0, 0),
    ("claude-code/as-claude-small-schemadrift.jsonl", "claude-code", 16, 1, 1, 0, 4, 2, 11, 2, 35, 2, 0),
    ("claude-code/ccl-edge_cases.jsonl", "claude-code", 13, 3, 3, 0, 0, 1, 0, 0, 7, 2, 0),
    ("claude-code/ccl-representative_messages.jsonl", "claude-code", 11, 2, 2, 0, 0, 1, 0, 0, 0, 0, 0),
    ("claude-code/ccl-session_b.jsonl", "claude-code", 3, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0),
    ("claude-code/ccl-todowrite_examples.jsonl", "claude-code", 11, 3, 3, 0, 0, 1, 0, 0, 0, 0, 0),
    ("claude-code/ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl", "claude-code", 341, 167, 167, 0, 0, 6, 0, 0, 0, 0, 0),
    ("claude-code/ohmyposh-6beb436f6cd8-0.jsonl", "claude-code", 89, 28, 28, 0, 17, 1, 0, 0, 54, 0, 0),
    ("claude-code/pai-agent-dee347d2.jsonl", "claude-code", 41, 30, 30, 0, 0, 1, 0, 0, 0, 0, 0),
    ("codex/as-codex-small-schemadrift.jsonl", "codex", 21, 4, 4, 0, 1, 1, 0, 6, 82, 2, 1),
    ("codex/neurodata-rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl", "codex", 60, 17, 17, 0, 27, 1, 0, 0, 87, 0, 0),
    ("codex/simonw-sample_codex_session.jsonl", "codex", 4, 0, 0, 0, 0, 1, 0, 0, 7, 0, 0),
    ("copilot-cli/agentv-269e1b9e5502-0.jsonl", "copilot-cli", 110, 68, 68, 0, 22, 1, 0, 0, 426, 0, 0),
    ("copilot-cli/starcar-84e7f6fdba43-0.jsonl", "copilot-cli", 449, 246, 246, 0, 116, 3, 0, 0, 1364, 1, 0),
    ("gemini-cli/entirecli-gemini-9c53780d06b7-0.json", "gemini-cli", 10, 4, 4, 0, 5, 1, 0, 0, 1, 0, 0),
    ("gemini-cli/geminicli-trajectory.json", "gemini", 105, 45, 45, 0, 41, 1, 0, 0, 0, 1, 0),
    ("kimi-cli/kimicli-0b88d484-d8447fa8", "kimi-cli", 134, 65, 65, 0, 0, 2, 0, 0, 203, 0, 0),
    ("mini-swe-agent/miniswe-django__django-12470.traj.json", "mini-swe-agent", 264, 131, 131, 0, 0, 1, 0, 0, 0, 1, 0),
    ("openhands/openhands-multi_swe_bench-output.jsonl", "openhands", 218, 105, 105, 0, 0, 3, 0, 0, 0, 2, 0),
    ("pi/pimono-before-compaction.jsonl", "pi", 968, 454, 454, 0, 49, 1, 0, 2, 24, 6, 0),
    ("pi/pimono-session.jsonl", "pi", 438, 189, 189, 0, 182, 1, 0, 1, 15, 1, 0),
    ("roo-code/e73ea764-4971-4adb-9197-52c2f8ede8ef", "cline", 35, 11, 11, 0, 0, 1, 0, 1, 0, 22, 0),
    ("swe-agent/marshmallow-1867-fc-replace-from-source.traj", "swe-agent", 28, 13, 13, 0, 0, 1, 0, 0, 0, 0, 4),
]

#: Shared databases that hold several sessions: file -> each session's id and counts (as EXPECTED's).
DATABASES = {
    "crush/dbostransactgolang-38c4ff7f-crush.db": [
        ("a20c5ed5-41d4-45f7-88eb-7ba0645f1341", "crush", 75, 40, 40, 0, 0, 1, 0, 0, 3, 0, 0),
        ("f306c145-4c83-492c-b575-739c30bbced4", "crush", 4, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0),
    ],
}

#: Shared files of formats not read yet (issue "Every harness, round three"): each is refused with
#: a clear error today; when its importer lands it moves into EXPECTED with its counts.
PENDING = {
}


@pytest.mark.parametrize("name", sorted(DATABASES))
def test_every_shared_database_imports_each_session_with_these_counts_and_writes_nothing_beside_it(name):
    path = session_path(name)
    before = sorted(p.name for p in path.parent.iterdir())
    sessions = glyphpack.import_sessions(path)
    assert sorted(p.name for p in path.parent.iterdir()) == before  # no -wal or -shm beside it (read-only, even as root)
    got = []
    for session_id, session in sessions:
        r = session.report
        got.append((session_id, r.format, r.messages, r.tool_calls, r.tool_results, r.images, r.thinking, len(r.agents), r.branches,
                    r.compactions, sum(r.skipped.values()), sum(r.repaired.values()), r.made_unique))
        for agent in session.agents:
            assert_valid_for_every_provider(agent.messages)
    assert got == DATABASES[name]
    # Each session's usage and cost as the database holds them, read with sqlite3 alone.
    import sqlite3

    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)) as database:
        raw = {row[0]: row[1:] for row in database.execute("SELECT id, prompt_tokens, cost FROM sessions WHERE parent_session_id IS NULL")}
    for session_id, session in sessions:
        prompt_tokens, cost = raw[session_id]
        assert [u.tokens for u in session.agents[0].usage] == ([prompt_tokens] if prompt_tokens else [])
        assert session.report.cost == pytest.approx(cost)


@functools.cache
def _sdk_types() -> tuple[TypeAdapter, TypeAdapter]:
    """The SDKs' message types as validators, built once (each takes a while to build)."""
    from anthropic.types import MessageParam
    from openai.types.chat import ChatCompletionMessageParam

    return TypeAdapter(MessageParam), TypeAdapter(ChatCompletionMessageParam)


def assert_valid_for_every_provider(messages):
    validate_history(messages, allow_pending=False)
    anthropic_message, chat_message = _sdk_types()
    system, converted = glyphpack.to_anthropic(messages)
    for entry in converted:
        anthropic_message.validate_python(entry)
    roles = [m["role"] for m in converted]
    assert all(a != b for a, b in zip(roles, roles[1:]))
    for entry in glyphpack.to_openai_chat(messages):
        chat_message.validate_python(entry)


@pytest.mark.parametrize("expected", EXPECTED, ids=[e[0].split("/")[-1] for e in EXPECTED])
def test_every_shared_session_imports_with_these_counts(expected):
    name, *counts = expected
    session = import_file(session_path(name))
    r = session.report
    assert [r.format, r.messages, r.tool_calls, r.tool_results, r.images, r.thinking, len(r.agents), r.branches,
            r.compactions, sum(r.skipped.values()), sum(r.repaired.values()), r.made_unique] == counts
    for agent in session.agents:
        assert_valid_for_every_provider(agent.messages)
    for branch in session.branches:
        validate_history(branch, allow_pending=False)


def test_every_file_in_shared_is_covered():
    if not SHARED.is_dir():
        pytest.skip("shared/sessions is not beside the repository")
    files = {str(p.relative_to(SHARED)) for p in SHARED.glob("*/*") if p.parent.name != "licenses"}
    assert files == {e[0] for e in EXPECTED} | set(DATABASES) | set(PENDING)
    assert not {e[0] for e in EXPECTED} & set(PENDING)


#: Stand-in results for calls whose result the file names elsewhere but does not hold,
#: each read by hand: file -> {call id: why}.
STAND_INS_WITHOUT_A_RESULT = {
    # a tool_result whose record spells its content key "contenst" (a fixture of broken lines)
    "claude-code/ccl-edge_cases.jsonl": {"tool_edge_002": "its result's record has no content key"},
    # the call started (hook.start, tool.execution_start) and the log ends before it completed
    "copilot-cli/starcar-84e7f6fdba43-0.jsonl": {"toolu_01WM63tMaHt5vzHSvvYSaCca": "started, never completed"},
    # the finish action has no observation; the same ids recur in the file's other instances
    "openhands/openhands-multi_swe_bench-output.jsonl": {"toolu_23": "a finish action", "toolu_33": "a finish action"},
}
#: Results kept as user text because the file holds no call for them, each read by hand.
RESULTS_WITHOUT_A_CALL = {
    "codex/as-codex-small-schemadrift.jsonl": 1,  # an output whose call id the fixture trimmed away
    "gemini-cli/geminicli-trajectory.json": 1,  # a run_shell_command response (nlcjynug) whose call the file does not hold
}


@pytest.mark.parametrize("name", sorted({e[0] for e in EXPECTED} | set(DATABASES)))
def test_no_result_is_kept_apart_from_its_call_and_no_stand_in_answers_a_call_the_file_answers(name):
    """Every format: a result the file holds answers its call (never user text beside it,
    never an error stand-in in its place). A stand-in is only for a call whose id the file
    holds once (the call alone) or one read by hand above; results kept apart only where
    the file holds no call for them."""
    path = session_path(name)
    raw = path.read_bytes() if path.is_file() else b"".join(p.read_bytes() for p in sorted(path.iterdir()) if p.is_file())
    sessions = glyphpack.import_sessions(path)
    apart = sum(s.report.repaired.get("tool results without an open call kept as user text", 0) for _, s in sessions)
    assert apart == RESULTS_WITHOUT_A_CALL.get(name, 0)
    stand_ins = {r.call_id for _, s in sessions for a in s.agents for m in a.messages if m.id.endswith("-missing-results") for r in m.tool_results}
    named_again = {call for call in stand_ins if raw.count(call.encode()) > 1}
    assert named_again == set(STAND_INS_WITHOUT_A_RESULT.get(name, {}))


def _raw_calls_and_results(path: Path) -> tuple[dict[str, str], dict[str, tuple[str, bool]]]:
    """Each tool call's name and each real result's (text, is_error), by call id, read
    straight from the raw file with no importer code: the counts an import must keep."""
    calls: dict[str, str] = {}
    results: dict[str, tuple[str, bool]] = {}
    if path.suffix == ".json":  # Gemini CLI chat recording: results ride inside their calls
        for message in json.loads(path.read_text())["messages"]:
            for call in message.get("toolCalls") or []:
                calls[call["id"]] = call["name"]
                output = call["result"][0]["functionResponse"]["response"]["output"]
                results[call["id"]] = (output, call["status"] != "success")
        return calls, results
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("type") == "assistant" and not record.get("isSidechain"):  # Claude Code
            for block in record["message"]["content"]:
                if block.get("type") == "tool_use":
                    calls[block["id"]] = block["name"]
        elif record.get("type") == "user" and isinstance(record["message"]["content"], list):
            for block in record["message"]["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    text = content if isinstance(content, str) else "\n".join(part["text"] for part in content)
                    results[block["tool_use_id"]] = (text, bool(block.get("is_error")))
        elif record.get("type") == "assistant.message":  # Copilot CLI
            for request in record["data"]["toolRequests"]:
                calls[request["toolCallId"]] = request["name"]
        elif record.get("type") == "tool.execution_complete":
            data = record["data"]
            text = data["result"]["content"] if data["success"] else data["error"]["message"]
            results[data["toolCallId"]] = (text, not data["success"])
    return calls, results


@pytest.mark.parametrize("name", ["claude-code/ohmyposh-6beb436f6cd8-0.jsonl", "gemini-cli/entirecli-gemini-9c53780d06b7-0.json",
                                  "copilot-cli/agentv-269e1b9e5502-0.jsonl"])
def test_current_harness_files_keep_every_call_with_its_real_result(name):
    """Claude Code 2.1.219 writes parallel calls one line per call, each result hanging
    off its own call; Gemini CLI keeps results inside calls; Copilot CLI in events. Every
    call must come back once, answered by its real result, never the stand-in error."""
    path = session_path(name)
    raw_calls, raw_results = _raw_calls_and_results(path)
    session = import_file(path)
    calls = {c.id: c.name for m in session.messages for c in m.tool_calls}
    results = {r.call_id: (r.text, r.is_error) for m in session.messages for r in m.tool_results}
    assert calls == raw_calls and len(raw_calls) > 0
    assert results == raw_results
    assert session.report.repaired == {} and session.branches == ()
    # each call's result comes before the next assistant message (one turn's results together)
    for index, message in enumerate(session.messages):
        if message.tool_calls:
            answered = {r.call_id for r in session.messages[index + 1].tool_results}
            assert {c.id for c in message.tool_calls} <= answered


def test_claude_code_parallel_calls_are_one_response_followed_by_both_results():
    session = import_file(session_path("claude-code/ohmyposh-6beb436f6cd8-0.jsonl"))
    assert session.title == "Security advisories analysis and fixes"
    parallel = [m for m in session.messages if len(m.tool_calls) > 1]
    assert [[c.id[-6:] for c in m.tool_calls] for m in parallel] == [["euHjxw", "aTtaro"], ["Y1KDAM", "SbUWxN"]]


def test_gemini_cli_recording_keeps_usage_thoughts_and_drops_what_only_the_user_saw():
    session = import_file(session_path("gemini-cli/entirecli-gemini-9c53780d06b7-0.json"))
    assert session.title == "run an agent that creates a color file inside docs, choose your color"
    assert session.report.skipped == {"info lines shown to the user, never sent to the model": 1}
    assert not any("update available" in m.text for m in session.messages)
    usage = session.agents[0].usage
    assert [(u.tokens, u.cache_read) for u in usage] == [(12207, 2558), (12350, 11820), (12499, 11785), (12849, 11804), (12990, 12504)]
    assert all(session.messages[u.end].role == "assistant" for u in usage)
    thinking = [b for m in session.messages for b in m.content if isinstance(b, Thinking)]
    assert thinking[0].text.startswith("Considering Color Documentation Format: I'm leaning towards")


def test_copilot_cli_keeps_the_system_prompt_notifications_and_failed_calls():
    session = import_file(session_path("copilot-cli/agentv-269e1b9e5502-0.jsonl"))
    first, second = session.messages[:2]
    assert first.role == "system" and first.text.startswith("You are the GitHub Copilot CLI")
    assert second.role == "user" and second.text.startswith("investigate why i get")
    assert any(m.role == "user" and "<system_notification>" in m.text for m in session.messages)
    failed = [r for m in session.messages for r in m.tool_results if r.is_error]
    assert len(failed) == 1 and failed[0].text.startswith("shellId: 30 was already stopped")
    assert session.messages[-1].role == "assistant" and session.messages[-1].text.startswith("**Root cause & fix summary:**")


@needs_shared
def test_claude_code_merges_responses_and_keeps_subagents_apart():
    session = import_file(SHARED / "claude-code/ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")
    assert session.title == "Empty Repo Setup: CLAUDE.md Foundation Created"
    main_agent, *subagents = session.agents
    assert [a.name for a in subagents] == [f"sidechain-{n}" for n in range(1, 6)]
    # one API response written as several lines is one assistant message
    lines = [json.loads(line) for line in (SHARED / "claude-code/ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl").read_text().splitlines()]
    response_ids = {r["message"].get("id") for r in lines if r.get("type") == "assistant" and not r.get("isSidechain")}
    assistant_messages = [m for m in main_agent.messages if m.role == "assistant"]
    assert len(assistant_messages) <= len(response_ids)
    assert all(m.role != "assistant" or b.tag != "tool_result" for m in main_agent.messages for b in m.content)
    assert main_agent.usage and all(u.tokens > 0 and 0 <= u.start <= u.end for u in main_agent.usage)


@needs_shared
def test_pi_repairs_unanswered_calls_and_keeps_usage():
    session = import_file(SHARED / "pi/pimono-before-compaction.jsonl")
    missing = [b for m in session.messages for b in m.tool_results if "no result: the session ended" in b.text]
    assert len(missing) == session.report.repaired["unanswered tool calls given an error result"] == 6
    assert all(b.is_error for b in missing)
    assert len(session.agents[0].usage) == 471
    summaries = [m for m in session.messages if m.text.startswith("[pi compaction summary]")]
    assert len(summaries) == session.report.compactions == 2


@needs_shared
def test_swe_agent_reused_call_ids_are_made_unique_and_stay_paired():
    session = import_file(SHARED / "swe-agent/marshmallow-1867-fc-replace-from-source.traj")
    calls = [c.id for m in session.messages for c in m.tool_calls]
    assert len(calls) == len(set(calls)) == 13
    assert sum("#" in c for c in calls) == 4
    # each result follows its own call
    for index, message in enumerate(session.messages):
        for call in message.tool_calls:
            assert any(r.call_id == call.id for r in session.messages[index + 1].tool_results)
    assert session.messages[1].text.startswith("We're currently solving the following issue")


def test_plain_provider_lists():
    openai = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    anthropic = {"system": "be brief", "messages": [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]},
        {"role": "assistant", "content": [{"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}, {"type": "text", "text": "done"}]},
    ]}
    gemini = {"contents": [
        {"role": "user", "parts": [{"text": "weather?"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Oslo"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"sky": "grey"}}}]},
        {"role": "model", "parts": [{"text": "grey"}]},
    ]}
    responses = [
        {"role": "user", "content": [{"type": "input_text", "text": "run ls"}]},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\": \"ls\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "one file"}]},
    ]
    own = history_to_json([Message("user", "hi"), Message("assistant", (Opaque("fallback", {"to": "x"}), Text("ok")))])
    for document, kind, count in ((openai, "openai-chat", 3), (anthropic, "anthropic", 5), (gemini, "gemini", 4),
                                  (responses, "openai-responses", 4), (own, "glyphpack", 2)):
        path = Path(__file__).parent / "data" / f"tmp-{kind}.json"
        path.write_text(json.dumps(document))
        try:
            session = import_file(path)
        finally:
            path.unlink()
        assert (session.report.format, len(session.messages)) == (kind, count)
        assert_valid_for_every_provider(session.messages)
        if kind == "gemini":  # a function response without an id answers the call of its name
            (call,) = [c for m in session.messages for c in m.tool_calls]
            (result,) = [r for m in session.messages for r in m.tool_results]
            assert result.call_id == call.id and "grey" in result.text and not result.is_error


def test_blocks_no_provider_takes_are_never_sent():
    history = [
        Message("user", "q"),
        Message("assistant", (Thinking("unsigned musing"), RedactedThinking("ENCRYPTED"), Opaque("fallback", {"to": "m"}), Text("a"))),
    ]
    assert history_from_json(history_to_json(history)) == history  # round-trip safe
    system, converted = glyphpack.to_anthropic(history)
    assert converted[1]["content"] == [{"type": "redacted_thinking", "data": "ENCRYPTED"}, {"type": "text", "text": "a"}]
    chat = glyphpack.to_openai_chat(history)
    assert chat[1] == {"role": "assistant", "content": "a"}


@pytest.mark.parametrize(
    "convert, messages, expected",
    [
        (glyphpack.from_anthropic, [{"role": "user", "content": "x"}, {"role": "assistant"}], "message 1: no 'content' key"),
        (glyphpack.from_anthropic, [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "%%"}}]}], "message 0: .*not valid base64"),
        (glyphpack.from_anthropic, [{"role": "user", "content": [7]}], "message 0: .*must be an object"),
        (glyphpack.from_openai_chat, [{"role": "user", "content": "x"}, {"content": "no role"}], "message 1: no 'role' key"),
        (glyphpack.from_openai_chat, [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{"}}]}], "message 0: .*not JSON"),
        (glyphpack.from_openai_chat, [{"role": "user", "content": "x"}, {"role": "user", "content": [5]}], "message 1: malformed \\(AttributeError"),
    ],
)
def test_converters_name_the_malformed_message(convert, messages, expected):
    with pytest.raises(HistoryError, match=expected):
        convert(messages)


@needs_shared
def test_import_into_a_workspace_keeps_the_tree_and_one_transcript_per_agent(tmp_path):
    session = import_file(SHARED / "claude-code/ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        saved = ws.import_session(session, "ccv")
        assert [t.agent for t in saved] == ["main", *(f"sidechain-{n}" for n in range(1, 6))]
        assert [m.id.split("/", 1)[1] for m in ws.tree.path("ccv")] == [m.id for m in session.messages]
        assert len(ws.tree.nodes("ccv")) == sum(len(a.messages) for a in session.agents)
        stored = ws.load("ccv", "sidechain-2").messages
        assert [m.id for m in stored] == [f"ccv/{m.id}" for m in session.agents[2].messages]
        with pytest.raises(glyphpack.StoreError, match="already in"):
            ws.import_session(session, "ccv")


@needs_shared
def test_branches_share_their_prefix_in_the_tree(tmp_path):
    session = import_file(SHARED / "claude-code/as-claude-small-schemadrift.jsonl")
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        ws.import_session(session, "drift")
        nodes = ws.tree.nodes("drift")
        ids = [n.message.id for n in nodes]
        assert len(ids) == len(set(ids))
        leaves = {n.message.id for n in nodes} - {n.parent for n in nodes}
        assert ws.tree.tip("drift") in leaves and len(leaves) >= 2


def _big_files_in_ci(expected):
    """The files over 300 KB run in CI (slow); the rest in every run."""
    big = SHARED.is_dir() and (SHARED / expected[0]).stat().st_size > 300_000
    return pytest.param(expected, id=expected[0].split("/")[-1], marks=[pytest.mark.slow] if big else [])


@pytest.mark.parametrize("expected", [_big_files_in_ci(e) for e in EXPECTED])
def test_the_cli_takes_each_file_as_it_is(expected, tmp_path, capsys):
    path = session_path(expected[0])
    assert main(["context", str(path), "--model", "claude-sonnet-4-5"]) == 0
    out, err = capsys.readouterr()
    assert f"{len(import_file(path).messages):,} messages" in out and f"as {expected[1]}" in err
    code = main(["compact", str(path), "--model", "claude-sonnet-4-5", "--budget", "20000", "--out", str(tmp_path / "view")])
    assert code in (0, 1)  # 1: the ladder could not fit it without a summarizer
    view = history_from_json(json.loads((tmp_path / "view" / "view.json").read_text()))
    validate_history(view, allow_pending=False)
    assert main(["import", str(path), "--workspace", str(tmp_path / "ws")]) == 0


# ---------------------------------------------------------------------------- mutations

# The OpenHands fixture is one large line: test_import_formats drops and retypes its every key.
LINES = [line for path in sorted(DATA.glob("*.jsonl")) if not path.name.startswith("openhands")
         for line in path.read_text().splitlines() if line.strip()]


def mutated(line: str, data: st.DataObject) -> str:
    try:
        value = json.loads(line)
    except ValueError:  # already truncated by an earlier mutation
        return line[: data.draw(st.integers(0, len(line)))]
    target = value
    for _ in range(data.draw(st.integers(0, 5))):
        if isinstance(target, dict) and target:
            # Walk mostly into what carries messages, where the readers do their work.
            inner = sorted(k for k in target if k in ("message", "content", "payload", "source", "output", "summary"))
            key = data.draw(st.sampled_from(inner if inner and data.draw(st.integers(0, 9)) < 8 else sorted(target)))
            if isinstance(target[key], (dict, list)) and target[key]:
                target = target[key]
                continue
        elif isinstance(target, list) and target and isinstance(target[0], (dict, list)):
            target = target[data.draw(st.integers(0, len(target) - 1))]
            continue
        break
    action = data.draw(st.sampled_from(["drop", "type", "base64", "block", "truncate"]))
    if action == "truncate":
        return line[: data.draw(st.integers(0, len(line)))]
    if isinstance(target, dict) and target:
        key = data.draw(st.sampled_from(sorted(target)))
        if action == "drop":
            del target[key]
        elif action == "type":
            target[key] = data.draw(st.sampled_from([None, 7, "x", [], {}, True, [1], {"type": 3}]))
        elif action == "base64":
            target[key] = "%%%not base64" if data.draw(st.booleans()) else base64.b64encode(b"\x89PNG").decode()
        else:
            target[key] = [{"type": data.draw(st.sampled_from(["video", "server_tool_use", "fallback", "tool_use", "image"]))}]
    elif isinstance(target, list):
        target.append({"type": "mystery", "payload": 1})
    return json.dumps(value)


@pytest.mark.slow  # 150 fuzzed files: CI runs it
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_real_lines_give_history_errors_or_valid_imports(tmp_path, data):
    lines = list(LINES)
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(lines) - 1))
        lines[index] = mutated(lines[index], data)
    start = data.draw(st.integers(0, len(lines) - 1))
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(lines[start : start + data.draw(st.integers(1, 40))]))
    import_is_valid_or_refused(path)


def import_is_valid_or_refused(path: Path) -> bool:
    """Import ``path``: a ``HistoryError`` (False), or histories valid for every
    provider (True); any other exception fails the test."""
    try:
        session = import_file(path)
    except HistoryError:
        return False
    for agent in session.agents:
        validate_history(agent.messages, allow_pending=False)
        glyphpack.to_anthropic(agent.messages)
        glyphpack.to_openai_chat(agent.messages)
    return True


def _nodes(value, path=()):
    """(path, dict) for every object inside a JSON value."""
    if isinstance(value, dict):
        yield path, value
        for key, inner in value.items():
            yield from _nodes(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _nodes(inner, (*path, index))


def every_key_dropped_or_retyped(text: str):
    """JSON ``text`` again with each key of each object in it dropped, then set to 7."""
    for where, node in list(_nodes(json.loads(text))):
        for key in list(node):
            for change in ("drop", "number"):
                copy = json.loads(text)
                target = copy
                for step in where:
                    target = target[step]
                if change == "drop":
                    del target[key]
                else:
                    target[key] = 7
                yield json.dumps(copy)


@pytest.mark.slow  # 3 s of mutated lines: CI runs it
def test_every_key_of_every_real_line_dropped_or_retyped(tmp_path):
    """Exhaustive where the property test samples: each line of the real files, alone,
    with each key of each object in it dropped, then set to a number. Catches a reader
    that indexes a key without checking (a KeyError or TypeError escaping)."""
    path = tmp_path / "one.jsonl"
    cases = 0
    for line in LINES:
        for mutated_line in every_key_dropped_or_retyped(line):
            path.write_text(mutated_line)
            cases += 1
            import_is_valid_or_refused(path)
    assert cases > 1000


@needs_shared
def test_estimate_tracks_the_providers_counts_once_calibrated():
    """On the real sessions' measured input tokens: calibrated on each response (the
    harness's path), the next request's estimate is within 2% at the 90th percentile;
    calibrated once on pi (content as it was sent), within 5%. Seen failing with the
    Latin rate at 0.30 instead of 0.25, and with 40 tokens per message instead of 4
    (dropping the tool-id price, a smaller drift, still passes)."""
    import numpy as np

    from glyphpack import calibrate
    from glyphpack._compaction.cost import CostModel

    cost = CostModel.for_model("claude-sonnet-4-5")
    for name in ("pi/pimono-before-compaction.jsonl", "claude-code/ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"):
        for agent in import_file(SHARED / name).agents:
            if len(agent.usage) < 5:
                continue
            prefix = np.cumsum([0] + [cost.message(m) for m in agent.messages])
            estimate = np.array([prefix[u.end] - prefix[u.start] for u in agent.usage], dtype=float)
            measured = np.array([u.tokens for u in agent.usage], dtype=float)
            each = np.abs(estimate[1:] + measured[:-1] - estimate[:-1] - measured[1:]) / measured[1:]
            assert np.quantile(each, 0.9) <= 0.02, (name, agent.name)
            if name.startswith("pi/"):
                start, end, first, *_ = agent.usage[0]
                overhead = calibrate(agent.messages[start:end], "claude-sonnet-4-5", first).overhead
                once = np.abs(estimate + overhead - measured)[1:] / measured[1:]
                assert np.quantile(once, 0.9) <= 0.05


@needs_shared
@pytest.mark.parametrize("name, task", [
    ("codex/simonw-sample_codex_session.jsonl", "can you analyse the MD files in this directory"),
    ("claude-code/ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl", "Split complex tasks into independent subtasks"),
    ("swe-agent/marshmallow-1867-fc-replace-from-source.traj", "We're currently solving the following issue"),
])
def test_the_task_stays_verbatim_in_every_view_that_fits(name, task):
    """The verbatim head is the task, not the harness's preamble before it (Codex writes
    AGENTS.md and the environment first, Claude Code a slash command's marker). Fails
    with a head that ends at the first user message."""
    from glyphpack._compaction.cost import CostModel

    history = list(import_file(SHARED / name).messages)
    task_message = next(m for m in history if m.role == "user" and m.text.startswith(task))
    for model in ("claude-sonnet-4-5", "gpt-5.4"):
        tokens = CostModel(glyphpack.resolve(model)).history(history)
        for share in (0.5, 0.2, 0.05):
            result = glyphpack.compact(history, model, max(1, int(tokens * share)))
            if result.report.fits:
                assert task_message in result.view, (model, share)


@pytest.mark.slow
@needs_shared
def test_ten_passes_over_a_growing_real_session_keep_the_cached_prefix():
    """Ten compactions of the real pi session as it grows, the page geometry carried
    from pass to pass (``Compaction.keep_geometry``): each pass's pages are identical to
    the last pass's up to the page holding the first changed character, and the
    Anthropic request's unchanged prefix covers all of them (the header before the pages
    does not change). Fails with the old header, which carried the message range."""
    from glyphpack import CompactionPolicy, read_pages
    from glyphpack._history.messages import turn_boundaries

    history = list(import_file(SHARED / "pi/pimono-before-compaction.jsonl").messages)
    boundaries = [t for t in turn_boundaries(history) if t >= 300 and history[t - 1].role == "assistant"]
    ends = boundaries[:: max(1, len(boundaries) // 10)][:10]
    policy = CompactionPolicy(fidelity="dense")  # dense pages: the mechanics of a growing snapshot
    previous = None
    shared_pages = 0
    for end in ends:
        result = glyphpack.compact(history[:end], "claude-sonnet-4-5", 30_000, policy=policy)  # under what elision alone reaches
        assert result.report.fits and result.pages
        policy = result.keep_geometry(policy)
        blocks = [json.dumps(b, sort_keys=True) for m in glyphpack.to_anthropic(result.view)[1] for b in m["content"]]
        if previous is not None:
            old_result, old_blocks = previous
            old_text, new_text = read_pages(old_result.pages), read_pages(result.pages)
            first_change = next((i for i, (a, b) in enumerate(zip(old_text, new_text)) if a != b), min(len(old_text), len(new_text)))
            before_change, chars = 0, 0
            for page in old_result.pages:
                chars += page.chars  # one decoded character per glyph drawn
                if chars > first_change or page.height < page.full_height:  # a last, short page grows
                    break
                before_change += 1
            same = 0
            while same < min(len(old_result.pages), len(result.pages)) and old_result.pages[same].png == result.pages[same].png:
                same += 1
            assert same >= before_change
            common = next((i for i, (a, b) in enumerate(zip(old_blocks, blocks)) if a != b), len(blocks))
            page_blocks = [i for i, b in enumerate(blocks) if '"type": "image"' in b]
            covered = page_blocks[before_change - 1] if before_change else -1
            assert common > covered
            shared_pages += before_change
        previous = (result, blocks)
    assert shared_pages > 0


@needs_shared
def test_codex_encrypted_reasoning_costs_a_request_nothing():
    """Opaque blocks are never sent, but were priced as their text: on the real Codex
    rollout the estimate grew 2.33x as fast as OpenAI's count, and calibrated on each
    response it was off by 19.4% at the 90th percentile. Measured now: 1.29x, 8.2%."""
    import numpy as np

    from glyphpack._compaction.cost import CostModel

    agent = import_file(SHARED / "codex/neurodata-rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl").agents[0]
    assert any(isinstance(b, Opaque) and b.kind == "encrypted_reasoning" for m in agent.messages for b in m.content)
    cost = CostModel.for_model("gpt-5.4")
    prefix = np.cumsum([0] + [cost.message(m) for m in agent.messages])
    estimate = np.array([prefix[u.end] - prefix[u.start] for u in agent.usage], dtype=float)
    measured = np.array([u.tokens for u in agent.usage], dtype=float)
    assert (estimate[-1] - estimate[0]) / (measured[-1] - measured[0]) < 1.35
    each = np.abs(estimate[1:] + measured[:-1] - estimate[:-1] - measured[1:]) / measured[1:]
    assert np.quantile(each, 0.9) < 0.09


def test_context_shows_what_the_file_measured(capsys):
    """Claude Code files hold neither the system prompt nor the tool schemas: ``context``
    said ~7k tokens for a real session whose last request measured 21,552. It shows the
    measured count now, split into the messages' part and the overhead."""
    path = DATA / "ccl-representative_messages.jsonl"  # a Claude Code file with usage records
    session = import_file(path)
    start, end, measured, *_ = session.agents[0].usage[-1]
    assert main(["context", str(path), "--model", "claude-sonnet-4-5"]) == 0
    out = capsys.readouterr().out
    from glyphpack._compaction.cost import CostModel

    carried = CostModel.for_model("claude-sonnet-4-5").history(session.agents[0].messages[start:end])
    assert f"measured {measured:,} input tokens: ~{carried:,} from its messages, {measured - carried:+,} the file does not hold" in out
    assert "overhead" in out


def test_a_session_opened_on_an_import_is_calibrated_before_its_first_request(tmp_path):
    """``/context`` said 4% of the threshold for an imported Claude Code session whose
    last request measured several times its estimate: the session now starts from the
    file's counts (every request's, the last matched exactly)."""
    from glyphpack._compaction.calibration import Calibration
    from glyphpack._compaction.cost import CostModel

    session = import_file(DATA / "ccl-representative_messages.jsonl")
    usage = session.agents[0].usage
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        ws.import_session(session, "imported")
        agent = ws.transcripts()[0][1]
        kept = ws.measured("imported", agent)
        assert [(len(messages), tokens) for messages, tokens in kept] == [(u.end - u.start, u.tokens) for u in usage]
        expected = Calibration(base=CostModel.for_model("claude-sonnet-4-5").estimator)
        for messages, tokens in kept:
            expected = expected.learn(CostModel.for_model("claude-sonnet-4-5", expected.estimator), messages, tokens)
        with glyphpack.open_session(ws, "imported", agent, model="claude-sonnet-4-5") as s:
            assert s.calibration == expected and len(s.calibration.counts) == len(usage) > 1
            assert s.estimator.overhead == expected.overhead != 0
            assert f"{'overhead':<13} {expected.overhead:>10,}" in s.command("/context").text
        with glyphpack.open_session(ws, "imported", agent, model="claude-sonnet-4-5", policy=glyphpack.CompactionPolicy(
                estimator=glyphpack.TextEstimator())) as given:
            assert given.estimator.overhead == 0  # an estimator the caller gives is kept
        assert ws.measured("imported", "nobody") == []


@pytest.mark.parametrize(
    ("name", "forced", "why", "reads_as"),
    [
        ("claude-code/ccl-session_b.jsonl", "pi", "its first records are not that harness's", "claude-code"),
        ("codex/simonw-sample_codex_session.jsonl", "claude-code", "its first records are not that harness's", "codex"),
        ("codex/simonw-sample_codex_session.jsonl", "aider", "its text is not laid out as that harness writes it", "codex"),
        ("gemini-cli/entirecli-gemini-9c53780d06b7-0.json", "openai-chat", None, "gemini-cli"),
        ("gemini-cli/entirecli-gemini-9c53780d06b7-0.json", "mini-swe-agent", "its JSON does not have that format's shape", "gemini-cli"),
        ("copilot-cli/agentv-269e1b9e5502-0.jsonl", "codex", "its first records are not that harness's", "copilot-cli"),
    ],
)
def test_a_forced_format_that_does_not_fit_is_refused_with_the_reason(name, forced, why, reads_as, tmp_path, capsys):
    """``--format`` forced onto the wrong file imported garbage silently (13 messages and
    0 calls, or 0 messages): now it is refused, saying why and what the file reads as,
    and nothing is stored."""
    path = session_path(name)
    with pytest.raises(HistoryError) as refused:
        import_file(path, format=forced)
    message = str(refused.value)
    assert message.startswith(f"{path} is not in the {forced} format: ") or message.startswith(f"{path}: ")
    if why is not None:
        assert why in message
    if message.startswith(f"{path} is not in the"):
        assert message.endswith(f"it reads as {reads_as}: pass --format {reads_as}, or leave --format out")
    assert import_file(path, format=reads_as).report.format == reads_as  # the right one still imports
    assert main(["import", str(path), "--workspace", str(tmp_path / "ws"), "--format", forced]) != 0
    assert "Traceback" not in capsys.readouterr().err
    assert not (tmp_path / "ws" / "transcripts").exists() or not any((tmp_path / "ws" / "transcripts").iterdir())


def _grown(tmp_path: Path, lines: int) -> Path:
    """The first ``lines`` lines of the Claude Code 2.1.219 file, as its harness had
    written them at that moment (same folder, same name: the same conversation)."""
    source = session_path("claude-code/ohmyposh-6beb436f6cd8-0.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    folder = tmp_path / "projects"
    folder.mkdir(exist_ok=True)
    path = folder / "6beb436f6cd8.jsonl"
    path.write_text("".join(source[:lines]), encoding="utf-8")
    return path


def test_a_grown_claude_code_file_appends_exactly_its_new_turns(tmp_path, capsys):
    """A harness keeps writing: importing the file again appends what is new (same ids,
    same tree), leaves an unchanged file as it is, and a stand-in made up for a call the
    file had not answered yet gives way to the real result."""
    total = len(session_path("claude-code/ohmyposh-6beb436f6cd8-0.jsonl").read_text(encoding="utf-8").splitlines())
    ws = tmp_path / "ws"
    # Cut right after a tool call, before its result: the import answers it with a stand-in.
    lines = session_path("claude-code/ohmyposh-6beb436f6cd8-0.jsonl").read_text(encoding="utf-8").splitlines()
    cut = next(n for n, line in enumerate(lines, 1) if n > 60 and '"tool_use"' in line and '"tool_result"' in lines[n])
    path = _grown(tmp_path, cut)
    assert main(["import", str(path.parent), "--workspace", str(ws)]) == 0
    assert "imported as conversation 6beb436f6cd8" in capsys.readouterr().out
    with glyphpack.Workspace(ws) as workspace:
        first = workspace.load("6beb436f6cd8", "main").messages
        nodes_before = {n.message.id for n in workspace.tree.nodes("6beb436f6cd8")}
    assert first[-1].id.endswith("-missing-results")
    _grown(tmp_path, total)
    assert main(["import", str(path.parent), "--workspace", str(ws)]) == 0
    out = capsys.readouterr().out
    assert "appended to conversation 6beb436f6cd8 (Security advisories analysis and fixes)" in out
    whole = import_file(path)
    with glyphpack.Workspace(ws) as workspace:
        stored = workspace.load("6beb436f6cd8", "main").messages
        nodes_after = {n.message.id for n in workspace.tree.nodes("6beb436f6cd8")}
        tip = workspace.tree.tip("6beb436f6cd8")
    assert [m.id for m in stored] == [f"6beb436f6cd8/{m.id}" for m in whole.messages]
    assert [m.content for m in stored] == [m.content for m in whole.messages]
    assert stored[: len(first) - 1] == first[:-1]  # the past, as it was stored: same ids and content
    assert nodes_before <= nodes_after and tip == stored[-1].id  # the stand-in stays in the tree, off the path
    assert not any(MISSING in b.text for m in stored for b in m.tool_results)
    assert main(["import", str(path), "--workspace", str(ws)]) == 0
    assert capsys.readouterr().out.strip().endswith("conversation 6beb436f6cd8: unchanged")


MISSING = "[no result: the session ended this turn before the tool returned]"


def test_a_changed_past_is_refused_for_that_file_and_the_rest_of_the_folder_goes_on(tmp_path, capsys):
    ws = tmp_path / "ws"
    path = _grown(tmp_path, 40)
    assert main(["import", str(path), "--workspace", str(ws)]) == 0
    with glyphpack.Workspace(ws) as workspace:
        before = workspace.load("6beb436f6cd8", "main")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    task = next(n for n, line in enumerate(lines) if '"type":"user"' in line and "security advisories" in line)
    lines[task] = lines[task].replace("security advisories", "SECURITY ADVISORIES")  # the harness rewrote the task
    path.write_text("".join(lines), encoding="utf-8")
    other = path.parent / "nested" / "session_b.jsonl"
    other.parent.mkdir()
    other.write_bytes(session_path("claude-code/ccl-session_b.jsonl").read_bytes())
    (path.parent / "notes.txt").write_text("not a session")  # not a session file's suffix: passed over
    assert main(["import", str(path.parent), "--workspace", str(ws)]) == 1
    out = capsys.readouterr().out
    changed = next(n for n, m in enumerate(before.messages, 1) if "security advisories" in m.text)
    assert f"{path}: not imported: conversation '6beb436f6cd8', agent 'main': the file's history differs from the stored one at message {changed} (its harness rewrote the past)" in out
    assert f"{other} -> " in out and "imported as conversation session_b" in out
    assert out.strip().endswith("2 files: 1 imported or in step, 1 not")
    with glyphpack.Workspace(ws) as workspace:
        assert workspace.load("6beb436f6cd8", "main") == before  # nothing of the changed file written
    assert main(["import", str(tmp_path / "nowhere"), "--workspace", str(ws)]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_sessions_in_folders_of_their_own_are_named_by_their_folder_and_their_companions_are_not_sessions(tmp_path, capsys):
    """Cline keeps each task as ``tasks/<id>/api_conversation_history.json`` beside
    ``ui_messages.json`` and ``task_metadata.json``; Copilot CLI keeps each session as
    ``session-state/<id>/events.jsonl``. A folder import named every one of them after
    the file (all ``api_conversation_history``, all ``events``: the second refused as a
    changed past) and tried the companions as sessions of their own."""
    tasks = tmp_path / "tasks"
    cline_task = Path(__file__).parent / "data" / "sessions" / "cline-task" / "1767001000000"
    for task in ("1767001000000", "1767002000000"):
        (tasks / task).mkdir(parents=True)
        for part in cline_task.iterdir():
            (tasks / task / part.name).write_bytes(part.read_bytes())
        (tasks / task / "focus_chain_taskid_1.md").write_text("- [x] read cli.py")  # a Markdown companion, not aider's
    copilot = Path(__file__).parent / "data" / "sessions" / "copilot-cli-synthetic.jsonl"
    for session in ("a1", "b2"):
        (tmp_path / "session-state" / session / "checkpoints").mkdir(parents=True)
        (tmp_path / "session-state" / session / "events.jsonl").write_bytes(copilot.read_bytes())
        (tmp_path / "session-state" / session / "checkpoints" / "index.md").write_text("# checkpoints")
    ws = str(tmp_path / "ws")
    assert main(["import", str(tasks), str(tmp_path / "session-state"), "--workspace", ws]) == 0
    out = capsys.readouterr().out
    assert out.strip().endswith("4 files: 4 imported or in step, 0 not") and "ui_messages" not in out and "focus_chain" not in out
    with glyphpack.Workspace(ws) as workspace:
        assert sorted(c for c, _ in workspace.transcripts()) == ["1767001000000", "1767002000000", "a1", "b2"]
    assert main(["import", str(tasks / "1767001000000" / "ui_messages.json"), "--workspace", ws]) == 1  # named alone, it is tried
    assert "not imported" in capsys.readouterr().out


def _raw_codex_and_pi(path: Path) -> tuple[dict[str, str], set[str]]:
    """Each tool call's name by id, and the ids of the calls that have a real result,
    read straight from a Codex rollout or a pi session with no importer code."""
    calls: dict[str, str] = {}
    answered: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        payload = record.get("payload") if isinstance(record, dict) else None
        if record.get("type") == "response_item" and isinstance(payload, dict):  # Codex
            if payload.get("type") in ("function_call", "custom_tool_call"):
                calls[payload["call_id"]] = payload["name"]
            elif payload.get("type") in ("function_call_output", "custom_tool_call_output"):
                answered.add(payload["call_id"])
        message = record.get("message") if isinstance(record, dict) else None
        if isinstance(message, dict) and message.get("role") == "assistant":  # pi
            calls.update({b["id"]: b["name"] for b in message.get("content") or () if isinstance(b, dict) and b.get("type") == "toolCall"})
        elif isinstance(message, dict) and message.get("role") == "toolResult":
            answered.add(message["toolCallId"])
    return calls, answered


@pytest.mark.parametrize(("name", "calls", "stand_ins"), [
    ("codex/neurodata-rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl", 17, 0),
    ("pi/pimono-session.jsonl", 189, 0),
    ("pi/pimono-before-compaction.jsonl", 454, 6),
])
def test_codex_and_pi_keep_every_call_and_every_real_result(name, calls, stand_ins):
    """Counted from the raw file: every call comes back once under its name, every real
    result answers its call, and only the calls the file never answered get the stand-in."""
    path = session_path(name)
    raw_calls, answered = _raw_codex_and_pi(path)
    session = import_file(path)
    assert {c.id: c.name for m in session.messages for c in m.tool_calls} == raw_calls and len(raw_calls) == calls
    results = [r for m in session.messages for r in m.tool_results]
    real = {r.call_id for r in results if r.text != MISSING_RESULT}
    assert real == answered and len(results) - len(real) == stand_ins == len(raw_calls) - len(answered)


def test_every_session_file_imports_the_same_twice_and_a_second_folder_import_changes_nothing(tmp_path, capsys):
    """An old Claude Code file's calls without ids were named by object address: a second
    import of the unchanged file was refused as "its harness rewrote the past"."""
    folder = Path(__file__).parent / "data" / "sessions"
    for path in sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl", ".md") and p.name != "SOURCES.md"):
        first, second = glyphpack.import_file(path), glyphpack.import_file(path)
        assert [a.messages for a in first.agents] == [a.messages for a in second.agents], path.name
        (tmp_path / "sessions").mkdir(exist_ok=True)
        (tmp_path / "sessions" / path.name).write_bytes(path.read_bytes())
    ws = str(tmp_path / "ws")
    assert main(["import", str(tmp_path / "sessions"), "--workspace", ws]) == 0
    capsys.readouterr()
    assert main(["import", str(tmp_path / "sessions"), "--workspace", ws]) == 0
    out = capsys.readouterr().out
    assert "not imported" not in out and out.strip().endswith(", 0 not")


def _raw_openai_style(path: Path) -> list[tuple[list[tuple[str, str]], list[str]]]:
    """(call id -> name, answered call ids) per agent of a mini-swe-agent or SWE-agent
    trajectory (OpenAI-style messages with ``tool_calls``) or an OpenHands output file
    (per instance: action events with ``tool_call_metadata``, observations answering
    them), read with json alone: the calls (id, name) and the answered ids, in file order
    (SWE-agent reuses a call id in later turns)."""
    if path.suffix == ".jsonl":
        agents = []
        for line in path.read_text(encoding="utf-8").splitlines():
            events = json.loads(line)["history"]
            calls = [(e["tool_call_metadata"]["tool_call_id"], e["tool_call_metadata"]["function_name"]) for e in events if e.get("action") and e.get("tool_call_metadata")]
            answered = [e["tool_call_metadata"]["tool_call_id"] for e in events if e.get("observation") and e.get("tool_call_metadata")]
            agents.append((calls, answered))
        return agents
    document = json.loads(path.read_text(encoding="utf-8"))
    messages = document.get("messages") or document["history"]
    calls = [(c["id"], c["function"]["name"]) for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or ()]
    # A tool message names its call (mini-swe-agent: tool_call_id; SWE-agent: tool_call_ids);
    # mini-swe-agent's closing "exit" record answers the submission call before it.
    answered = []
    for before, message in zip([{}, *messages], messages):
        if message.get("role") == "tool":
            answered += [message["tool_call_id"]] if "tool_call_id" in message else message["tool_call_ids"]
        elif message.get("role") == "exit":
            answered += [c["id"] for c in before.get("tool_calls") or ()]
    return [(calls, answered)]


@pytest.mark.parametrize(("name", "calls", "stand_ins"), [
    ("mini-swe-agent/miniswe-django__django-12470.traj.json", [131], [0]),
    ("swe-agent/marshmallow-1867-fc-replace-from-source.traj", [13], [0]),
    ("openhands/openhands-multi_swe_bench-output.jsonl", [23, 33, 49], [1, 1, 0]),
])
def test_mini_swe_agent_swe_agent_and_openhands_keep_every_call_and_every_real_result(name, calls, stand_ins):
    """Counted from the raw file with json alone (issue 40): every call comes back once
    under its id and name, every real result answers its call, and only the calls the
    file never answered (an instance stopped mid-call) get the stand-in."""
    path = session_path(name)
    raw = _raw_openai_style(path)
    session = import_file(path)
    assert [len(c) for c, _ in raw] == calls and len(session.agents) == len(raw)
    for agent, (raw_calls, answered), missing in zip(session.agents, raw, stand_ins):
        imported = [(c.id, c.name) for m in agent.messages for c in m.tool_calls]
        # In file order, under the file's id (one reused in a later turn made unique: id#2, ...).
        assert [n for _, n in imported] == [n for _, n in raw_calls]
        assert all(new == old or re.fullmatch(re.escape(old) + r"#[0-9]+", new) for (new, _), (old, _) in zip(imported, raw_calls))
        unique = dict(zip((i for i, _ in imported), (i for i, _ in raw_calls)))  # imported id -> the file's
        results = [r for m in agent.messages for r in m.tool_results]
        real = [unique[r.call_id] for r in results if r.text != MISSING_RESULT]
        assert sorted(real) == sorted(answered) and len(results) - len(real) == missing == len(raw_calls) - len(answered)


def test_aider_keeps_every_exchange_of_its_chat_history():
    """aider's chat history has no tool calls: each ``#### `` prompt is a user message
    and the text after it the answer; counted from the raw lines (issue 40)."""
    path = session_path("aider/mozgoslav-aider.chat.history.md")
    lines = [line[5:].strip() for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#### ")]
    # The answers to aider's own confirmations ("Add file to the chat? ... [Yes]: all") are
    # not sent to the model and are not messages.
    prompts = [line for line in lines if not re.search(r"\[(Yes|No)\]: \S*$", line)]
    session = import_file(path)
    users = "\n".join(m.text for m in session.messages if m.role == "user")
    assert len(prompts) == 295 and len(lines) - len(prompts) == 10 and not any(m.tool_calls for m in session.messages)
    assert [line for line in prompts if line not in users] == []


def test_glyphpack_import_makes_each_session_of_a_goose_database_a_conversation_and_syncs_it(tmp_path, capsys):
    from test_import_formats import goose_database

    (tmp_path / "goose" / "sessions").mkdir(parents=True)
    path = goose_database(tmp_path / "goose" / "sessions")
    ws = str(tmp_path / "ws")
    assert main(["import", str(tmp_path / "goose"), "--workspace", ws]) == 0
    out = capsys.readouterr().out
    assert f"{path} [20261201_1] -> {ws}: imported as conversation 20261201_1 (Failing cargo test)" in out
    assert f"{path} [20261202_1] -> {ws}: imported as conversation 20261202_1 (Take a screenshot of the page)" in out
    with glyphpack.Workspace(ws) as workspace:
        assert workspace.settings("20261201_1", "main").get("model") == "claude-sonnet-4-5"
    assert main(["import", str(path), "--workspace", ws]) == 0
    assert capsys.readouterr().out.count(": unchanged") == 2
    assert main(["import", str(path), "--workspace", ws, "--conversation", "one"]) == 1
    assert f"{path}: not imported: --conversation names one conversation, and {path} holds 2 sessions" in capsys.readouterr().out


def test_copilot_cli_subagents_are_agents_of_their_own_and_every_result_stays_with_its_call():
    """Copilot CLI 1.0.74 writes its subagents' events into the session's file, each with
    the ``agentId`` of the call that dispatched it: read as one history, 8 of 206 and 5 of
    246 results were kept apart from their calls, which got error results."""
    path = session_path("copilot-cli/starcar-84e7f6fdba43-0.jsonl")
    raw_calls, raw_results = _raw_calls_and_results(path)
    session = import_file(path)
    assert [a.name for a in session.agents] == ["main", "car-qP6L5B5o", "car-h6X2mDZz"]
    calls = {c.id: c.name for a in session.agents for m in a.messages for c in m.tool_calls}
    results = {r.call_id: (r.text, r.is_error) for a in session.agents for m in a.messages for r in m.tool_results}
    assert calls == raw_calls and len(calls) == 246
    (unfinished,) = set(raw_calls) - set(raw_results)  # started, never completed: the one stand-in error
    assert {k: v for k, v in results.items() if k != unfinished} == raw_results and results[unfinished] == (MISSING_RESULT, True)
    assert session.report.repaired == {"unanswered tool calls given an error result": 1}
    for agent in session.agents:  # each call's result in the message right after it
        for index, message in enumerate(agent.messages):
            if message.tool_calls:
                assert {c.id for c in message.tool_calls} <= {r.call_id for r in agent.messages[index + 1].tool_results}
    assert session.agents[1].messages[0].role == "user" and session.agents[0].model and session.agents[1].model
