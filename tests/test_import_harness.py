"""Sessions as their harnesses write them today: Claude Code's attachments, subagents
in progress lines and in their own files, compaction chains whose link is missing; the
harness's own compactions as compaction boundaries; every message's own time; titles."""

from __future__ import annotations

import base64
import datetime
import json
import re
from pathlib import Path

import pytest

import glyphpack
from glyphpack import Image, Opaque, RedactedThinking, Text, Thinking, ToolCall, import_file
from glyphpack._cli import main
from glyphpack._history.imported import Usage
from glyphpack._history.messages import first_task
from glyphpack._history.view import read_archive, read_view
from glyphpack._importers import claude_code_attachments
from glyphpack._importers.base import epoch_seconds
from tests.test_importers import assert_valid_for_every_provider, session_path


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _all_text(session: glyphpack.ImportedSession) -> str:
    return "\n".join(m.text for agent in session.agents for m in agent.messages)


def test_attachments_the_model_saw_are_kept_and_the_ones_it_did_not_see_are_counted():
    """Read off the raw file with no importer code: each hook context, memory file and
    listing the model was shown is in the history, once; hook errors shown only to the
    user are not, and each line left out is counted."""
    path = session_path("claude-code/ohmyposh-6beb436f6cd8-0.jsonl")
    records = [r for r in _lines(path) if r.get("type") == "attachment"]
    shown = []
    for record in records:
        attachment = record["attachment"]
        if attachment["type"] == "hook_additional_context":
            shown += attachment["content"]
        elif attachment["type"] == "nested_memory":
            shown.append(attachment["content"]["content"])
        elif attachment["type"] in ("skill_listing",) or (attachment["type"] == "hook_success" and attachment["content"]):
            shown.append(attachment["content"])
    hidden = [r["attachment"]["stderr"] for r in records if r["attachment"]["type"] == "hook_non_blocking_error"]
    session = import_file(path)
    reminders = [m for m in session.messages if m.id.endswith("-attachment")]
    assert len(shown) == 15 and len(hidden) == 16
    for text in shown:
        assert sum(text in m.text for m in reminders) >= 1, text[:60]
    assert not any(stderr in m.text for stderr in hidden for m in session.messages)
    assert all(m.role == "user" and m.text.startswith("<system-reminder>\n") for m in reminders)
    assert len(reminders) + session.report.skipped["attachment lines the model is not shown"] == len(records)
    # Claude Code's own wording for a hook's context (as its compaction summarizer's file records it)
    context = next(m.text for m in reminders if "hook additional context" in m.text)
    assert context.startswith("<system-reminder>\nUserPromptSubmit hook additional context: CAVEMAN MODE ACTIVE (full).")


def test_an_attachment_written_between_a_call_and_its_result_follows_the_result(tmp_path):
    lines = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": "go"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "message": {"id": "m1", "role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "x"}}]}},
        {"type": "attachment", "uuid": "h1", "parentUuid": "a1", "attachment": {
            "type": "hook_additional_context", "hookName": "PreToolUse:Read", "content": ["read carefully"]}},
        {"type": "user", "uuid": "r1", "parentUuid": "h1", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "file body"}]}},
        {"type": "assistant", "uuid": "a2", "parentUuid": "r1", "message": {"id": "m2", "role": "assistant", "content": [
            {"type": "text", "text": "done"}]}},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    session = import_file(path)
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "user", "assistant"]
    assert session.messages[3].text == "<system-reminder>\nPreToolUse:Read hook additional context: read carefully\n</system-reminder>"
    assert session.report.repaired == {}


def test_attachment_texts_follow_claude_codes_conversion():
    assert claude_code_attachments.shown({"type": "hook_non_blocking_error", "stderr": "x"}) is None
    assert claude_code_attachments.shown({"type": "hook_success", "hookEvent": "PostToolUse", "content": "ok"}) is None
    assert claude_code_attachments.shown({"type": "hook_success", "hookEvent": "SessionStart", "hookName": "SessionStart:startup",
                                          "content": "hi"}) == ("<system-reminder>\nSessionStart:startup hook success: hi\n</system-reminder>", False)
    assert claude_code_attachments.shown({"type": "queued_command", "prompt": "and the tests"}) == ("and the tests", True)
    assert claude_code_attachments.shown({"type": "nested_memory", "path": "a/CLAUDE.md", "content": {"path": "a/CLAUDE.md", "content": "rules"}}) == (
        "<system-reminder>\nContents of a/CLAUDE.md:\nrules\n</system-reminder>", False)
    assert claude_code_attachments.shown({"type": "task_reminder", "content": [], "itemCount": 0}) is None
    assert claude_code_attachments.shown({"type": "a_type_from_the_future", "content": "new words"}) == (
        "<system-reminder>\nnew words\n</system-reminder>", False)
    assert claude_code_attachments.shown({"type": "a_type_from_the_future", "flag": True}) is None


def _progress(path: Path) -> dict[str, list[dict]]:
    """Each subagent's messages as its ``agent_progress`` lines carry them, raw."""
    agents: dict[str, list[dict]] = {}
    for record in _lines(path):
        data = record.get("data") or {}
        if record.get("type") == "progress" and data.get("type") == "agent_progress":
            agents.setdefault(data["agentId"], []).append(data["message"])
    return agents


def test_a_subagent_in_progress_lines_is_an_agent_with_every_call_and_result():
    """Claude Code 2.1.38 writes a subagent's messages into the main file as
    ``agent_progress`` lines: every call and real result of theirs, counted from the raw
    lines, comes back in an agent of its own, and the main history is what it was."""
    path = session_path("claude-code/spotter-subagent.jsonl")
    (name, raw), = _progress(path).items()
    calls = {b["id"]: b["name"] for m in raw if m["type"] == "assistant" for b in m["message"]["content"] if b["type"] == "tool_use"}
    results = {b["tool_use_id"]: b["content"] if isinstance(b["content"], str) else "\n".join(p["text"] for p in b["content"])
               for m in raw if m["type"] == "user" and isinstance(m["message"]["content"], list)
               for b in m["message"]["content"] if b["type"] == "tool_result"}
    session = import_file(path)
    assert [a.name for a in session.agents] == ["main", name]
    sub = session.agents[1].messages
    assert {c.id: c.name for m in sub for c in m.tool_calls} == calls and len(calls) == 9
    assert {r.call_id: r.text for m in sub for r in m.tool_results} == results
    assert sub[0].role == "user" and sub[0].text.startswith("Draft bead content for setting up Credo")
    assert session.report.repaired == {} and "progress lines (no message)" in session.report.skipped
    assert session.report.skipped["progress lines (no message)"] == sum(
        1 for r in _lines(path) if r.get("type") == "progress" and r["data"]["type"] != "agent_progress")
    # the subagent's call in the main history keeps the subagent's report as its result
    task = next(c for m in session.messages for c in m.tool_calls if c.name == "Task")
    assert any(r.call_id == task.id for m in session.messages for r in m.tool_results)


def test_a_subagent_with_its_own_file_is_read_from_it_and_a_folder_import_does_not_take_it_twice(tmp_path, capsys):
    """Claude Code 2.1 also writes each subagent whole to SESSION/subagents/agent-ID.jsonl
    (its progress lines miss its plain text): that file is the agent, once."""
    source = session_path("claude-code/spotter-subagent.jsonl")
    session_file = tmp_path / "projects" / "491e126e.jsonl"
    session_file.parent.mkdir()
    session_file.write_bytes(source.read_bytes())
    (name, raw), = _progress(source).items()
    own = [{**m, "isSidechain": True, "agentId": name, "sessionId": "491e126e"} for m in raw]
    own.insert(2, {"type": "assistant", "uuid": "only-in-its-file", "isSidechain": True, "agentId": name,
                   "message": {"id": "msg-own", "role": "assistant", "content": [{"type": "text", "text": "Let me look around first."}]}})
    folder = tmp_path / "projects" / "491e126e" / "subagents"
    folder.mkdir(parents=True)
    (folder / f"agent-{name}.jsonl").write_text("\n".join(json.dumps(line) for line in own))
    session = import_file(session_file)
    assert [a.name for a in session.agents] == ["main", name]
    assert "Let me look around first." in _all_text(session)
    assert session.report.skipped["agent_progress lines of a subagent read from its own file"] == len(raw)
    assert main(["import", str(tmp_path / "projects"), "--workspace", str(tmp_path / "ws")]) == 0
    out = capsys.readouterr().out
    assert out.count("imported as conversation") == 1 and f"agent-{name}" not in out  # not a conversation of its own
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        assert {agent for _, agent in workspace.transcripts()} == {"main", name}


def _compacted(boundary_parent: str | None) -> list[dict]:
    def line(kind: str, uuid: str, parent: str | None, text: str, stamp: int, **extra: object) -> dict:
        role = "assistant" if kind == "assistant" else "user"
        message = {"role": role, "content": [{"type": "text", "text": text}]} | ({"id": f"m-{uuid}"} if role == "assistant" else {})
        return {"type": kind, "uuid": uuid, "parentUuid": parent, "timestamp": f"2026-02-12T16:0{stamp}:00Z", "message": message, **extra}

    return [
        line("user", "u1", None, "Fix the flaky login test", 0),
        line("assistant", "a1", "u1", "Looking.", 1),
        {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": None, "logicalParentUuid": boundary_parent,
         "timestamp": "2026-02-12T16:02:00Z", "compactMetadata": {"trigger": "auto", "preTokens": 170251}},
        line("user", "s1", "b1", "This session is being continued from a previous conversation.", 3, isCompactSummary=True),
        line("assistant", "a2", "s1", "Continuing.", 4),
    ]


def test_a_compaction_whose_link_is_not_in_the_file_is_joined_and_reported(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in _compacted("not-written")))
    session = import_file(path)
    assert [m.text for m in session.messages] == ["Fix the flaky login test", "Looking.",
                                                  "This session is being continued from a previous conversation.", "Continuing."]
    assert session.branches == () and session.report.compactions == 1
    assert session.report.repaired == {"compaction boundaries joined to the message written before them (the one they name is not in the file)": 1}
    assert session.agents[0].compactions == (session.messages[2].id,)
    # linked as Claude Code links it: the same, with nothing to repair
    path.write_text("\n".join(json.dumps(line) for line in _compacted("a1")))
    linked = import_file(path)
    assert linked.messages == session.messages and linked.report.repaired == {}
    # the boundary first in its file: the earlier part is in another file, and the report says so
    path.write_text("\n".join(json.dumps(line) for line in _compacted("not-written")[2:]))
    alone = import_file(path)
    assert [m.text for m in alone.messages][-1] == "Continuing."
    assert alone.report.assumed == ("the session continues another file: its first compaction's earlier messages are not in this one",)


def test_the_harness_compaction_is_in_force_in_the_workspace_and_context_counts_from_it(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in _compacted("a1")))
    ws = tmp_path / "ws"
    assert main(["import", str(path), "--workspace", str(ws)]) == 0
    capsys.readouterr()
    with glyphpack.Workspace(ws) as workspace:
        view = read_view(workspace, "s", "main")
        assert view is not None and view.trigger == "harness" and view.covers == "s/a1-1" and view.messages == ()
        session = glyphpack.Session(workspace, "s", "main", model="claude-sonnet-4-5")
        sent, _ = session.request_view()
        assert [m.text for m in sent] == ["This session is being continued from a previous conversation.", "Continuing."]
    assert main(["tree", str(ws)]) == 0
    tree = capsys.readouterr().out
    assert "[a1-1]  <- compacted up to here (main: the harness compacted here (in force): the 2 messages up to here are not sent)" in tree
    assert main(["context", str(path), "--model", "claude-sonnet-4-5"]) == 0
    from_file = capsys.readouterr().out
    assert "agent main: 4 messages (the harness compacted 1 time(s); its requests carry messages 3-4), ~" in from_file
    assert main(["context", str(ws), "s", "--model", "claude-sonnet-4-5"]) == 0
    from_workspace = capsys.readouterr().out
    assert "the next request carries 2 (" in from_workspace

    def rows(out: str) -> list[str]:
        return [line.split()[1] for line in out.splitlines() if line.split()[:1] in (["user"], ["assistant"])]
    assert rows(from_file) == rows(from_workspace) and rows(from_file)[0] != "0"  # the same messages counted
    # A sync that brings a second compaction adds it; the first stays in the archive.
    grown = _compacted("a1") + [
        {"type": "system", "subtype": "compact_boundary", "uuid": "b2", "parentUuid": None, "logicalParentUuid": "a2", "timestamp": "2026-02-12T16:05:00Z"},
        {"type": "user", "uuid": "s2", "parentUuid": "b2", "timestamp": "2026-02-12T16:06:00Z", "message": {"role": "user", "content": "Second summary."}},
    ]
    path.write_text("\n".join(json.dumps(line) for line in grown))
    assert main(["import", str(path), "--workspace", str(ws)]) == 0
    assert main(["import", str(path), "--workspace", str(ws)]) == 0  # unchanged: nothing added
    with glyphpack.Workspace(ws) as workspace:
        assert [v.covers for v in read_archive(workspace, "s", "main")] == ["s/a1-1", "s/a2-4"]


def test_every_message_keeps_its_time_and_tree_and_exports_show_it(tmp_path, capsys):
    path = session_path("claude-code/ohmyposh-6beb436f6cd8-0.jsonl")
    first_user = next(r for r in _lines(path) if r.get("type") == "user")
    session = import_file(path)
    task = next(m for m in session.messages if m.id.startswith(first_user["uuid"]))
    assert task.time == datetime.datetime.fromisoformat(first_user["timestamp"].replace("Z", "+00:00")).timestamp()
    assert all(m.time is not None for m in session.messages if not m.id.endswith("-missing-results"))
    ws = tmp_path / "ws"
    assert main(["import", str(path), "--workspace", str(ws), "--conversation", "posh"]) == 0
    capsys.readouterr()
    assert main(["tree", str(ws)]) == 0
    header, first = capsys.readouterr().out.splitlines()[:2]
    assert header.endswith("(2026-08-01 09:13:34 to 2026-08-01 09:32:16 UTC)")
    assert "* 09:13 user: " in first
    out = tmp_path / "posh.md"
    assert main(["export", str(ws), "posh", "--out", str(out)]) == 0
    assert "### user `" in out.read_text() and " · 2026-08-01 09:13:" in out.read_text()
    exported = tmp_path / "posh.json"
    assert main(["export", str(ws), "posh", "--out", str(exported), "--format", "json"]) == 0
    assert json.loads(exported.read_text())["messages"][0]["time"] == session.messages[0].time


def test_times_are_read_from_every_shape_and_never_stop_an_import():
    assert epoch_seconds("2026-02-10T21:54:15.897Z") == 1770760455.897
    assert epoch_seconds("2026-02-10T21:54:15") == 1770760455.0  # no zone: UTC
    assert epoch_seconds(1770760455897) == 1770760455.897  # milliseconds
    assert epoch_seconds(1770760455) == 1770760455.0
    for bad in ("yesterday", "", None, True, float("nan"), -5, [1]):
        assert epoch_seconds(bad) is None
    timed, untimed = glyphpack.Message("user", "x", id="i", time=5.0), glyphpack.Message("user", "x", id="i")
    assert timed == untimed and timed.time == 5.0  # a time is not content: a sync compares content
    for bad in (float("inf"), True, "noon"):
        with pytest.raises(glyphpack.HistoryError, match="time"):
            glyphpack.Message("user", "x", time=bad)  # type: ignore[arg-type]


def test_a_title_is_the_first_task_without_its_wrapping():
    m = glyphpack.Message
    assert first_task([m("system", "you are"), m("user", "<system-reminder>\nhook output\n</system-reminder>"),
                       m("user", "<command-name>/fix</command-name>\n<command-args>the   login test</command-args>")]) == "/fix the login test"
    assert first_task([m("user", "[mini-swe-agent exit]")]) == ""
    # What harnesses put before the first prompt a person typed, each seen in real files.
    wrappers = [
        "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>",
        "<command-name>/mode</command-name>",
        "<command-message>init is analyzing your codebase…</command-message>\n<command-name>/init</command-name>",
        "<local-command-caveat>Caveat: The messages below were generated by the user while running local commands.</local-command-caveat>",
        "Caveat: The messages below were generated by the user while running local commands. DO NOT respond to these messages.",
        "<local-command-stdout>(no content)</local-command-stdout>",
        "# AGENTS.md instructions for /home/dev/project\n\n<INSTRUCTIONS>\nAlways run the tests.\n</INSTRUCTIONS>",
        "<environment_context>\n  <cwd>/home/dev/project</cwd>\n  <shell>zsh</shell>\n</environment_context>",
        "<session_context>\nThis is the Gemini CLI.\n- **Workspace Directories:**\n  - /home/dev/project\n</session_context>",
        "<state_snapshot>\n<overall_goal>Ship it</overall_goal>\n</state_snapshot>",
        "Base directory for this skill: /home/dev/.claude/skills/CORE\n\n# CORE",
        "This session is being continued from a previous conversation that ran out of context.",
    ]
    for wrapper in wrappers:
        assert first_task([m("user", wrapper), m("assistant", "ok"), m("user", "Fix the   login test")]) == "Fix the login test", wrapper
    ide = "# Context from my IDE setup:\n\n## Open tabs:\n- main.py\n\n## My request for Codex:\nrename the parser\n"
    assert first_task([m("user", ide)]) == "rename the parser"
    assert first_task([m("user", wrappers[0]), m("user", wrappers[2])]) == "/clear"  # commands only: the first one run
    assert first_task([m("user", "<command-message>The skill is running</command-message>\n<command-name>CORE</command-name>")]) == "/CORE"


@pytest.mark.parametrize(("path", "title"), [
    ("codex/simonw-sample_codex_session.jsonl", "can you analyse the MD files in this directory and determine if the info we have is clear"),
    ("codex/neurodata-rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl", "Hi I wanna use speckit /specify for my files"),
    ("gemini-cli/geminicli-trajectory.json", "agent teams shouldn't persist, I want it to ask me every boot"),
    ("claude-code/pai-agent-dee347d2.jsonl", "/CORE"),
])
def test_a_real_files_title_is_the_first_prompt_a_person_typed(path, title):
    assert import_file(session_path(path)).title.startswith(title)
    codex = import_file(session_path("codex/simonw-sample_codex_session.jsonl"))
    assert codex.title and codex.title == first_task(codex.messages)


def test_an_untitled_conversation_is_named_by_its_first_task_and_its_reminders_show_as_such(tmp_path, capsys):
    """What a proxy records from Claude Code starts with the harness's reminders: the
    conversation is titled from the task, and the tree shows the reminders as reminders."""
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        session = glyphpack.Session(workspace, "proxy-20261204", "main", model="claude-sonnet-4-5")
        session.add_user([glyphpack.Text("<system-reminder>\nThe date is 2026-12-04.\n</system-reminder>")])
        session.add_user([glyphpack.Text("<system-reminder>\nCLAUDE.md says: be terse\n</system-reminder>"),
                          glyphpack.Text("Fix the   flaky login test")])
        assert workspace.tree.conversation("proxy-20261204").title == "Fix the flaky login test"
        session.add_user("a later message never renames it")
        assert workspace.tree.conversation("proxy-20261204").title == "Fix the flaky login test"
    assert main(["tree", str(tmp_path / "ws")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "proxy-20261204  Fix the flaky login test"
    assert lines[1].startswith("* user: (system reminder) The date is 2026-12-04.")
    assert lines[2].startswith("* user: Fix the flaky login test (+1 system reminder)")


def test_an_opencode_export_keeps_every_call_with_its_result_its_usage_and_times():
    """Read off the raw export with no importer code: each tool part's call and result,
    each step's measured tokens, each message's time and the title."""
    path = session_path("opencode/opencode-export.json")
    raw = json.loads(path.read_text())
    tools = [p for m in raw["messages"] for p in m["parts"] if p["type"] == "tool"]
    steps = [p["tokens"] for m in raw["messages"] for p in m["parts"] if p["type"] == "step-finish"]
    session = import_file(path)
    assert session.report.format == "opencode" and session.title == raw["info"]["title"] == "Auth failure in app logs"
    calls = {c.id: (c.name, c.arguments) for m in session.messages for c in m.tool_calls}
    assert calls == {p["callID"]: (p["tool"], p["state"]["input"]) for p in tools} and len(calls) == 4
    results = {r.call_id: r.text for m in session.messages for r in m.tool_results}
    assert results == {p["callID"]: p["state"]["output"] for p in tools}
    assert session.report.repaired == {} and session.report.skipped == {}
    usage = session.agents[0].usage
    assert [u.tokens for u in usage] == [s["input"] + s["cache"]["read"] + s["cache"]["write"] for s in steps]
    assert all(session.messages[u.end].role == "assistant" for u in usage)
    two = [m for m in session.messages if len(m.tool_calls) == 2]
    assert len(two) == 1 and [c.name for c in two[0].tool_calls] == ["read", "bash"]  # one step, two calls
    created = [m["info"]["time"]["created"] / 1000 for m in raw["messages"]]
    assert [m.time for m in session.messages if m.role != "tool"] == created
    assert_valid_for_every_provider(session.messages)


def test_an_opencode_step_in_flight_gets_the_stand_in_and_other_parts_are_counted(tmp_path):
    document = {"info": {"id": "ses_1", "title": ""}, "messages": [
        {"info": {"id": "msg_1", "role": "user", "time": {"created": 1_700_000_000_000}},
         "parts": [{"type": "text", "text": "fix it"}, {"type": "file", "mime": "text/plain", "filename": "a.py", "url": "file:///a.py"}]},
        {"info": {"id": "msg_2", "role": "assistant", "time": {"created": 1_700_000_001_000}}, "parts": [
            {"type": "step-start"}, {"type": "reasoning", "text": "look first"},
            {"type": "tool", "tool": "bash", "callID": "c1", "state": {"status": "error", "input": {"command": "make"}, "error": "exit 2"}},
            {"type": "tool", "tool": "bash", "callID": "c2", "state": {"status": "running", "input": {"command": "sleep 9"}}},
            {"type": "patch", "hash": "abc", "files": []}, {"type": "compaction", "auto": True}]},
    ]}
    path = tmp_path / "export.json"
    path.write_text(json.dumps(document))
    session = import_file(path)
    assert session.title == "fix it [file attached: a.py]" and session.report.compactions == 1
    assert session.messages[0].text == "fix it\n[file attached: a.py]"
    results = {r.call_id: (r.text, r.is_error) for m in session.messages for r in m.tool_results}
    assert results["c1"] == ("exit 2", True) and results["c2"][1] is True  # the one still running: the stand-in
    assert session.report.repaired == {"unanswered tool calls given an error result": 1}
    assert session.report.skipped == {"patch parts (not sent to the model)": 1}


def _last_model_in(path: Path) -> str | None:
    """The model a session file's newest model call names, read from the raw file with
    json alone: Claude Code and pi responses, Codex turn contexts, Gemini CLI answers,
    Copilot CLI answers, OpenCode assistant messages."""
    if path.suffix == ".json":
        entries = json.loads(path.read_text(encoding="utf-8"))["messages"]
        names = [e.get("model") for e in entries if e.get("type") == "gemini"]  # Gemini CLI
        names += [e["info"].get("modelID") for e in entries if isinstance(e.get("info"), dict) and e["info"].get("role") == "assistant"]  # OpenCode
    else:
        names = []
        for raw in path.read_text(encoding="utf-8").splitlines():
            try:
                line = json.loads(raw)
            except ValueError:  # a line cut short (the pi file has one): no call of its own
                continue
            message = line.get("message") if isinstance(line.get("message"), dict) else {}
            if line.get("type") in ("assistant", "message") and message.get("role", "assistant") == "assistant":
                names.append(message.get("model"))
            if line.get("type") == "turn_context":
                names.append(line["payload"].get("model"))
            if line.get("type") == "assistant.message":  # Copilot CLI
                names.append(line["data"].get("model"))
    names = [n for n in names if isinstance(n, str) and n and not n.startswith("<")]
    return names[-1] if names else None


@pytest.mark.parametrize("name, model", [
    ("claude-code/ohmyposh-6beb436f6cd8-0.jsonl", "claude-sonnet-5"),
    ("codex/simonw-sample_codex_session.jsonl", "gpt-5.2-codex"),
    ("gemini-cli/entirecli-gemini-9c53780d06b7-0.json", "gemini-2.5-flash"),
    ("claude-code/ccl-todowrite_examples.jsonl", "claude-sonnet-4"),
    ("pi/pimono-session.jsonl", "claude-opus-4-5"),  # in ../shared only
    ("claude-code/as-claude-small-schemadrift.jsonl", "claude-sonnet-5"),  # five models called in turn
    ("codex/as-codex-small-schemadrift.jsonl", "gpt-5.6-sol"),  # eight; in ../shared only
    ("copilot-cli/agentv-269e1b9e5502-0.jsonl", "claude-sonnet-4.6"),
    ("opencode-export.json", "gpt-5.4"),  # tests/data only
])
def test_the_workspace_remembers_the_model_the_harness_called(tmp_path, capsys, name, model):
    """``context`` on an imported session needs no ``--model``: the import keeps the
    model the file's newest call names (the file's own, read independently here); a
    session that runs on the transcript later sets its own, which a re-import keeps."""
    path = session_path(name)
    assert _last_model_in(path) == model
    assert import_file(path).agents[0].model == model
    ws = tmp_path / "ws"
    assert main(["import", str(path), "--workspace", str(ws)]) == 0
    conversation = Path(name).name.split(".")[0]  # the file's stem, as the import names it
    capsys.readouterr()
    assert main(["context", str(ws), conversation]) == 0
    assert f"for {model}," in capsys.readouterr().out


def test_a_model_a_session_set_outlasts_a_sync_of_the_grown_file(tmp_path, capsys):
    lines = session_path("claude-code/ohmyposh-6beb436f6cd8-0.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    path, ws = tmp_path / "grown.jsonl", tmp_path / "ws"
    path.write_text("".join(lines[:60]), encoding="utf-8")
    assert main(["import", str(path), "--workspace", str(ws)]) == 0
    with glyphpack.Workspace(ws) as workspace:
        assert workspace.settings("grown", "main") == {"model": "claude-sonnet-5"}
        workspace.save_calibration("grown", "main", {"overhead": 0}, {"model": "claude-opus-4-8"})
    path.write_text("".join(lines), encoding="utf-8")
    assert main(["import", str(path), "--workspace", str(ws)]) == 0
    assert "appended" in capsys.readouterr().out
    with glyphpack.Workspace(ws) as workspace:
        assert workspace.settings("grown", "main") == {"model": "claude-opus-4-8"}



def test_the_model_is_the_newest_calls_on_each_agents_own_path(tmp_path):
    """A Claude Code session that switched models (``/model``) keeps the newest; a
    subagent keeps its own; a line no model wrote (``<synthetic>``) names none."""
    def line(uuid, parent, kind, model=None, sidechain=False):
        message = {"role": kind, "content": f"{kind} {uuid}"}
        if model:
            message |= {"model": model, "id": f"msg-{uuid}"}
        return {"type": kind, "uuid": uuid, "parentUuid": parent, "isSidechain": sidechain, "message": message,
                "timestamp": "2026-02-12T16:00:00Z"}
    lines = [line("u1", None, "user"), line("a1", "u1", "assistant", "claude-opus-4-8"),
             line("u2", "a1", "user"), line("a2", "u2", "assistant", "claude-sonnet-4-5"),
             line("u3", "a2", "user"), line("a3", "u3", "assistant", "<synthetic>"),
             line("s1", None, "user", sidechain=True), line("s2", "s1", "assistant", "claude-haiku-4-5", sidechain=True)]
    path = tmp_path / "switched.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    assert [(a.name, a.model) for a in import_file(path).agents] == [("main", "claude-sonnet-4-5"), ("sidechain-1", "claude-haiku-4-5")]


def test_every_claude_code_block_kind_reads_exactly(tmp_path):
    """Each content block kind Claude Code writes, with the lenient cases its files hold:
    images by data, URL or file id; calls without an id or with a non-object input;
    thinking with and without a signature; results as lists of text, images and other blocks."""
    png = base64.b64encode(b"\x89PNG fake").decode()
    lines = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": [
            {"type": "text", "text": "see"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": png}},
            {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
            {"type": "image", "source": {"type": "file", "file_id": "file_1", "media_type": "image/webp"}},
            {"type": "image"}, "stray"]}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "message": {"id": "m1", "role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan", "signature": "sig"},
            {"type": "thinking", "thinking": None, "signature": 7},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "server_tool_use", "id": "s1", "name": "web_search"},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": "ls"},
            {"type": "tool_use", "id": "t2", "input": {"a": 1}}]}},
        {"type": "user", "uuid": "r1", "parentUuid": "a1", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": [
                {"type": "text", "text": "no"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
                {"type": "tool_use", "id": "x", "name": "n", "input": {}}, 5]},
            {"type": "tool_result", "tool_use_id": "t2"}]}},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    session = import_file(path)
    user, assistant, results = session.messages
    data = base64.b64decode(png)
    assert user.content == (Text("see"), Image("image/gif", data), Image("image/png", ref="https://x/a.png"),
                            Image("image/webp", ref="file_1"))
    assert session.report.skipped == {"images without data or a URL": 1, "content items that are not objects": 1}
    assert assistant.content[:3] == (Thinking("plan", "sig"), Thinking("", None), RedactedThinking("opaque"))
    assert assistant.content[3] == Opaque("server_tool_use", {"type": "server_tool_use", "id": "s1", "name": "web_search"})
    assert list(assistant.tool_calls) == [ToolCall("t1", "Bash", {"input": "ls"}), ToolCall("t2", "tool", {"a": 1})]
    first, second = results.tool_results
    assert first.is_error and first.content[:2] == (Text("no"), Image("image/png", data))
    assert all(isinstance(b, Text) for b in first.content[2:]) and first.content[3] == Text("5")
    assert json.loads(first.content[2].text) == {"type": "tool_use", "id": "x", "name": "n", "input": {}}
    assert not second.is_error and second.content == (Text(""),)


def test_every_pi_message_and_block_kind_reads_exactly(tmp_path):
    """pi's roles (tool results, the user's own shell commands, roles no API has) and
    block kinds (thinking signatures under either key, calls, images, unknown kinds)."""
    png = base64.b64encode(b"\x89PNG fake").decode()

    def line(n: int, message: dict[str, object]) -> dict[str, object]:
        return {"type": "message", "id": str(n), "parentId": str(n - 1) if n else None, "message": message}

    lines = [
        {"type": "session", "id": "s", "cwd": "/w"},
        line(0, {"role": "user", "content": [{"type": "text", "text": "go"}, "stray", {"type": "image", "mimeType": "image/gif", "data": png}]}),
        line(1, {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan", "thinkingSignature": "s1"},
            {"type": "thinking", "thinking": None, "signature": "s2"},
            {"type": "thinking", "thinking": "bare", "signature": ""},
            {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"cmd": "ls"}},
            {"type": "toolCall", "id": "c2", "name": "read", "arguments": "x"},
            {"type": "diagram", "body": 1}]}),
        line(2, {"role": "toolResult", "toolCallId": "c1", "isError": True, "content": [
            {"type": "text", "text": "denied"}, {"type": "thinking", "thinking": "dropped"}]}),
        line(3, {"role": "toolResult", "toolCallId": "c2", "content": "ok"}),
        line(4, {"role": "bashExecution", "command": "make", "exitCode": 2, "output": "fail"}),
        line(5, {"role": "bashExecution", "command": "ls", "exitCode": 0, "output": "a"}),
        line(6, {"role": "custom", "content": "x"}),
        line(7, {"role": "assistant", "content": [], "stopReason": "aborted"}),
        line(8, {"role": "assistant", "content": "fine"}),
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    session = import_file(path)
    user, assistant, tool, ran, ran_ok, answer = session.messages
    assert user.content == (Text("go"), Image("image/gif", base64.b64decode(png)))
    assert assistant.content[:3] == (Thinking("plan", "s1"), Thinking("", "s2"), Thinking("bare", None))
    assert list(assistant.tool_calls) == [ToolCall("c1", "bash", {"cmd": "ls"}), ToolCall("c2", "read", {})]
    assert assistant.content[5] == Opaque("diagram", {"type": "diagram", "body": 1})
    first, second = tool.tool_results
    assert (first.call_id, first.content, first.is_error) == ("c1", (Text("denied"),), True)
    assert (second.call_id, second.content, second.is_error) == ("c2", (Text("ok"),), False)
    assert ran.text == "[the user ran a shell command (exit code 2)] $ make\nfail"
    assert ran_ok.text == "[the user ran a shell command] $ ls\na"
    assert answer.text == "fine" and [m.id for m in session.messages] == ["pi-1", "pi-2", "pi-3", "pi-5", "pi-6", "pi-9"]
    assert session.report.skipped == {"session lines (no message)": 1, "content items that are not objects": 1, "messages of role 'custom'": 1,
                                      "assistant turns that ended in an aborted with nothing said": 1}


def test_every_opencode_part_kind_reads_exactly(tmp_path):
    """OpenCode's user parts (text, image files as data URLs, other files named, bad image
    data noted) and an assistant message's steps: ids per step, results per step, each
    step's measured input, a compaction, parts not sent to the model."""
    png = base64.b64encode(b"\x89PNG fake").decode()
    document = {"info": {"id": "ses", "title": "the title"}, "messages": [
        {"info": {"id": "u1", "role": "user", "time": {"created": 1_700_000_000_000}}, "parts": [
            {"type": "text", "text": "see"}, {"type": "text", "text": ""}, {"type": "text", "text": 5},
            {"type": "file", "mime": "image/png", "url": f"data:image/png;base64,{png}"},
            {"type": "file", "mime": "image/png", "url": "data:image/png;base64,@@@", "filename": "bad.png"},
            {"type": "file", "mime": "text/plain", "url": "file:///w/a.txt"},
            {"type": "file"}, {"type": "agent"}, {}]},
        {"info": {"id": "a1", "role": "assistant", "modelID": "claude-sonnet-4-5"}, "parts": [
            {"type": "step-start"}, {"type": "reasoning", "text": "hm"}, {"type": "reasoning", "text": ""},
            {"type": "text", "text": "looking"}, {"type": "text", "text": ""},
            {"type": "tool", "callID": "c1", "tool": "read", "state": {"status": "completed", "input": {"p": "a"}, "output": "body"}},
            {"type": "tool", "callID": "c2", "tool": "bash", "state": {"status": "error", "input": {}, "error": "denied"}},
            {"type": "step-finish", "tokens": {"input": 10, "cache": {"read": 100, "write": 5}}},
            {"type": "step-start"}, {"type": "text", "text": "done"},
            {"type": "step-finish", "tokens": {"input": 0, "cache": {"read": 0, "write": 0}}},
            {"type": "patch"}]},
        {"info": {"id": "s1", "role": "system"}, "parts": []},
    ]}
    path = tmp_path / "ses.json"
    path.write_text(json.dumps(document))
    session = import_file(path)
    assert session.title == "the title"
    user, step, results, second = session.messages
    assert user.id == "u1" and user.time == 1_700_000_000.0
    assert user.content == (Text("see"), Image("image/png", base64.b64decode(png)), Text("[file attached: bad.png]"),
                            Text("[file attached: file:///w/a.txt]"), Text("[file attached: unnamed]"))
    assert step.id == "a1" and step.content[:2] == (Thinking("hm"), Text("looking"))
    assert list(step.tool_calls) == [ToolCall("c1", "read", {"p": "a"}), ToolCall("c2", "bash", {})]
    assert results.id == "a1-results-1"
    assert [(r.call_id, r.text, r.is_error) for r in results.tool_results] == [("c1", "body", False), ("c2", "denied", True)]
    assert second.id == "a1-2" and second.text == "done"
    assert list(session.agents[0].usage) == [Usage(0, 1, 115, 100, 5)]
    assert session.report.repaired == {"images without valid data kept as a text stub": 1}
    assert session.report.skipped == {"agent parts (not sent to the model)": 1, "untyped parts (not sent to the model)": 1,
                                      "patch parts (not sent to the model)": 1, "messages of role 'system'": 1}


def test_every_codex_item_kind_reads_exactly(tmp_path):
    """Codex rollout items: developer instructions as system, content part kinds, image
    URLs, reasoning summaries with encrypted content, calls named or not, outputs,
    unknown items kept, and lines that are not messages skipped by kind."""
    png = base64.b64encode(b"\x89PNG fake").decode()

    def item(payload: dict[str, object]) -> dict[str, object]:
        return {"type": "response_item", "timestamp": "2025-01-01T00:00:00Z", "payload": payload}

    lines = [
        {"type": "session_meta", "payload": {"instructions": "be brief"}},
        {"type": "turn_context", "payload": {"model": "gpt-5-codex"}},
        item({"type": "message", "role": "developer", "content": "rules"}),
        item({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "see"}, {"type": "input_image", "image_url": f"data:image/png;base64,{png}"},
            {"type": "input_image"}, {"type": "input_file", "file_id": "f"}, "stray"]}),
        item({"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}, "x"], "encrypted_content": "enc"}),
        item({"type": "reasoning", "summary": []}),
        item({"type": "function_call", "id": "fc1", "name": "shell", "arguments": "{\"cmd\": \"ls\"}"}),
        item({"type": "custom_tool_call", "call_id": "cc1", "input": "*** patch"}),
        item({"type": "function_call_output", "call_id": "fc1", "output": "a b"}),
        item({"type": "custom_tool_call_output", "call_id": "cc1", "output": "done"}),
        item({"type": "web_search_call", "status": "completed"}),
        {"type": "event_msg", "payload": {"type": "agent_message"}},
        {"type": "event_msg"},
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    session = import_file(path)
    system, developer, user, assistant, tool, after = session.messages
    assert (system.role, system.text, system.id) == ("system", "be brief", "codex-1")  # numbered by line
    assert (developer.role, developer.text) == ("system", "rules")
    assert user.content[:2] == (Text("see"), Image("image/png", base64.b64decode(png)))
    assert user.content[2] == Opaque("input_file", {"type": "input_file", "file_id": "f"})
    assert user.time == datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc).timestamp()
    assert assistant.content[:2] == (Thinking("plan"), Opaque("encrypted_reasoning", {"encrypted_content": "enc"}))
    assert list(assistant.tool_calls) == [ToolCall("fc1", "shell", {"cmd": "ls"}), ToolCall("cc1", "tool", {"input": "*** patch"})]
    assert [(r.call_id, r.text) for r in tool.tool_results] == [("fc1", "a b"), ("cc1", "done")]
    assert after.content == (Opaque("web_search_call", {"type": "web_search_call", "status": "completed"}),)
    assert session.agents[0].model == "gpt-5-codex"
    assert session.report.skipped == {"images without a URL": 1, "event_msg lines (no message)": 1, "turn_context lines (no message)": 1,
                                      "event_msg lines without a payload": 1}


def test_progress_lines_make_a_subagent_exactly(tmp_path):
    """``agent_progress`` lines: the agent is named by ``agentId``, else by the calling
    ``parentToolUseID``; a message written again is taken once; a line missing its own
    time takes the progress line's; the start prompt comes first when the first line is
    not it; a line without a message or a name is passed over; titles in the file's order
    of precedence."""

    def progress(uuid: str, data: dict[str, object], **extra: object) -> dict[str, object]:
        return {"type": "progress", "uuid": uuid, "parentUuid": None, "timestamp": "2025-01-01T00:00:09Z",
                "data": {"type": "agent_progress", **data}, **extra}

    said = {"type": "assistant", "uuid": "n1", "message": {"id": "m", "role": "assistant", "content": [{"type": "text", "text": "working"}]}}
    asked = {"type": "user", "uuid": "n2", "timestamp": "2025-01-01T00:00:05Z", "message": {"role": "user", "content": "first"}}
    lines = [
        {"type": "summary", "summary": "old title"}, {"type": "summary", "summary": "older"},
        {"type": "ai-title", "aiTitle": "ai title"},
        {"type": "user", "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": "go"}},
        progress("p1", {"agentId": "agent-a", "prompt": "explore", "message": said}),
        progress("p2", {"agentId": "agent-a", "prompt": "explore", "message": said}),
        progress("p3", {"prompt": "check", "message": asked}, parentToolUseID="toolu_9"),
        progress("p4", {"agentId": "agent-c", "message": "not an object"}),
        progress("p5", {"message": said}),
        {"type": "progress", "uuid": "p6", "data": {"type": "hook_progress"}},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    session = import_file(path)
    assert session.title == "ai title"
    main_agent, a, by_call = session.agents
    assert (main_agent.name, a.name, by_call.name) == ("main", "agent-a", "toolu_9")
    assert [(m.role, m.text) for m in a.messages] == [("user", "explore"), ("assistant", "working")]
    assert a.messages[1].time == datetime.datetime(2025, 1, 1, 0, 0, 9, tzinfo=datetime.timezone.utc).timestamp()
    assert (a.messages[0].id, a.messages[0].time) == ("agent-a-prompt-0", a.messages[1].time)  # the start prompt: its own id, the line's time
    assert [(m.role, m.text) for m in by_call.messages] == [("user", "first")]  # its first line is the prompt: not added twice
    assert by_call.messages[0].time == datetime.datetime(2025, 1, 1, 0, 0, 5, tzinfo=datetime.timezone.utc).timestamp()
    assert session.report.skipped == {"progress lines (no message)": 1}
    path.write_text("\n".join(json.dumps(x) for x in [*lines, {"type": "custom-title", "customTitle": "mine"}]))
    assert import_file(path).title == "mine"
    path.write_text("\n".join(json.dumps(x) for x in lines[:2] + lines[3:]))
    assert import_file(path).title == "old title"


def test_repair_makes_a_history_valid_and_counts_each_change_exactly():
    """``repair`` on a hand-built history holding each fault it mends, compared whole."""
    from glyphpack import Message, ToolResult
    from glyphpack._history.messages import validate_history
    from glyphpack._importers.base import MISSING_RESULT, Tally, repair

    png = Image("image/png", b"\x89PNG")
    tally = Tally()
    history = [
        Message("user", (Text("go"),), id="u"),
        Message("assistant", (ToolCall("a", "ls", {}), ToolCall("a", "ls", {"again": 1})), id="m1"),
        Message("user", (ToolResult("a", (Text("second"),)), ToolResult("zz", (Text("lost"), png), True), Text("and")), id="r1"),
        Message("assistant", (ToolCall("b", "cat", {}),), id="m2"),
        Message("user", (), id="empty"),
        Message("assistant", (ToolCall("a", "ls", {}),), id="m3"),
        Message("tool", (ToolResult("a", (Text("third"),)), ToolResult("q", (Text("stray"),))), id="t3"),
    ]
    repaired = repair(history, tally)
    missing = (Text(MISSING_RESULT),)
    assert repaired == [
        Message("user", (Text("go"),), id="u"),
        Message("assistant", (ToolCall("a", "ls", {}), ToolCall("a#2", "ls", {"again": 1})), id="m1"),
        # the same id again before its result: the first call answered, after the message that made both
        Message("tool", (ToolResult("a", missing, True),), id="m1-superseded-results"),
        Message("tool", (ToolResult("a#2", (Text("second"),)),), id="r1-results"),
        Message("user", (Text("[tool error for call 'zz', which is not in this history]\nlost"), png, Text("and")), id="r1"),
        Message("assistant", (ToolCall("b", "cat", {}),), id="m2"),
        Message("tool", (ToolResult("b", missing, True),), id="m2-missing-results"),
        Message("assistant", (ToolCall("a#3", "ls", {}),), id="m3"),
        Message("tool", (ToolResult("a#3", (Text("third"),)),), id="t3"),
        Message("user", (Text("[tool result for call 'q', which is not in this history]\nstray"),), id="t3-unpaired"),
    ]
    assert tally.made_unique == 2
    assert tally.repaired == {"unanswered tool calls given an error result": 2, "tool results without an open call kept as user text": 2}
    validate_history(repaired)
    assert repair([Message("assistant", (ToolCall("x", "f", {}),), id="only")], Tally())[-1].id == "only-missing-results"


def _reminder(text: str) -> tuple[str, bool]:
    return f"<system-reminder>\n{text}\n</system-reminder>", False


@pytest.mark.parametrize(("attachment", "expected"), [
    ({"type": "hook_success", "hookEvent": "UserPromptSubmit", "content": ["a", "b"]}, _reminder("hook hook success: a\nb")),
    ({"type": "hook_success", "hookEvent": "UserPromptExpansion", "hookName": "X", "content": {"text": "t"}}, _reminder("X hook success: t")),
    ({"type": "hook_success", "hookEvent": "SessionStart", "content": ""}, None),
    ({"type": "hook_success", "hookEvent": "Stop", "content": "no"}, None),
    ({"type": "hook_additional_context", "hookName": "H", "content": {"prompt": "p"}}, _reminder("H hook additional context: p")),
    ({"type": "hook_additional_context", "content": None}, None),
    ({"type": "hook_stopped_continuation", "message": "halt"}, _reminder("hook hook stopped continuation: halt")),
    ({"type": "hook_stopped_continuation", "hookName": "S", "message": {"snippet": "s"}}, _reminder("S hook stopped continuation: s")),
    ({"type": "hook_blocking_error", "hookName": "B", "blockingError": {"command": "lint", "blockingError": "bad"}},
     _reminder("B hook blocking error from command: \"lint\": bad")),
    ({"type": "hook_blocking_error", "blockingError": {}}, _reminder("hook hook blocking error from command: \"\": ")),
    ({"type": "hook_blocking_error"}, None),
    ({"type": "nested_memory", "content": {"content": "m"}}, _reminder("Contents of :\nm")),
    ({"type": "skill_listing", "content": "- a skill"},
     _reminder("The following skills are available for use with the Skill tool:\n- a skill")),
    ({"type": "skill_listing", "content": ""}, None),
    ({"type": "mcp_instructions_delta", "addedBlocks": ["one", 2]}, _reminder(
        "# MCP Server Instructions\nThe following MCP servers have provided instructions for how to use their tools"
        " and resources:\none\n2")),
    ({"type": "mcp_instructions_delta", "addedBlocks": []}, None),
    ({"type": "deferred_tools_delta", "addedNames": "Grep"},
     _reminder("The following deferred tools are now available (their schemas load on request):\nGrep")),
    ({"type": "agent_listing_delta", "addedTypes": ["Explore", "Plan"]},
     _reminder("The following agent types are now available:\nExplore\nPlan")),
    ({"type": "edited_text_file", "filename": "a.py", "snippet": "1: x"}, _reminder(
        "Note: a.py was modified, either by the user or by a linter. Here are the relevant changes:\n1: x")),
    ({"type": "edited_text_file", "snippet": "s"}, _reminder(
        "Note:  was modified, either by the user or by a linter. Here are the relevant changes:\ns")),
    ({"type": "file", "filename": "b.txt", "content": {"file": {"content": "body"}}}, _reminder("Contents of b.txt:\nbody")),
    ({"type": "file", "filename": "c.txt", "content": {"text": "flat"}}, _reminder("Contents of c.txt:\nflat")),
    ({"type": "file", "content": "plain words"}, _reminder("Contents of :\nplain words")),
    ({"type": "file", "filename": "d"}, _reminder("Contents of d:\n")),
    ({"type": "date_change", "newDate": "2026-12-05"}, _reminder("The date has changed. Today's date is now 2026-12-05.")),
    ({"type": "date_change"}, _reminder("The date has changed. Today's date is now .")),
    ({"type": "invoked_skills", "skills": [{"name": "n", "path": "p", "content": "c"}, "not a skill", {}]},
     _reminder("### Skill: n\nPath: p\nc\n### Skill: \nPath: \n")),
    ({"type": "invoked_skills", "skills": None}, None),
    ({"type": "task_reminder", "content": [{"id": 3, "status": "open", "subject": "s"}, "x"]}, _reminder("#3. [open] s")),
    ({"type": "todo_reminder", "content": [{"status": "done", "content": "c"}, {"status": "open", "content": "d"}]},
     _reminder("[done] c\n[open] d")),
    ({"type": "todo_reminder", "content": None}, None),
    ({"type": "budget_usd", "used": 1.5, "total": 10, "remaining": 8.5}, _reminder("USD budget: $1.5/$10; $8.5 remaining")),
    ({"type": "token_usage", "used": 5, "total": 9, "remaining": 4}, _reminder("Token usage: 5/9; 4 remaining")),
    ({"type": "queued_command", "prompt": ["go", "on"]}, ("go\non", True)),
    ({"type": "queued_command", "prompt": ""}, None),
    ({"type": "a_type_from_the_future", "text": {"number": 7}}, _reminder('{"number": 7}')),
    ({"type": "a_type_from_the_future", "prompt": "é"}, _reminder("é")),
    ({"type": "a_type_from_the_future", "content": ["x", None]}, _reminder("x\n")),
    ({"type": "a_type_from_the_future", "content": {"other": "ü"}}, _reminder('{"other": "ü"}')),
    *[({"type": kind, "content": "words"}, None) for kind in sorted(claude_code_attachments.SILENT)],
    ({"type": 3, "content": "words"}, None),
    ({"content": "words"}, None),
    ("an attachment that is not an object", None),
])
def test_every_attachment_kind_reads_exactly_as_claude_code_sends_it(attachment, expected):
    assert claude_code_attachments.shown(attachment) == expected


def _codex_item(payload: dict[str, object], timestamp: str = "2025-01-01T00:00:00Z") -> dict[str, object]:
    return {"type": "response_item", "timestamp": timestamp, "payload": payload}


def _codex_said(role: str, text: str) -> dict[str, object]:
    return _codex_item({"type": "message", "role": role, "content": [{"type": "input_text" if role == "user" else "output_text", "text": text}]})


def _codex_count(tokens: int, cached: int) -> dict[str, object]:
    return {"type": "event_msg", "payload": {"type": "token_count", "info": {"last_token_usage": {"input_tokens": tokens, "cached_input_tokens": cached}}}}


def test_codex_instructions_compactions_and_counts_read_exactly(tmp_path):
    """The first ``session_meta``'s instructions open the history wherever the line is;
    a compaction's summary is a user message of its own time, the first message later
    requests carry; each ``token_count`` (written after its response here) measures the
    response before it, carrying what follows the last compaction."""
    lines = [_codex_said("user", "hi"), {"type": "session_meta", "payload": {"instructions": "sys"}},
             {"type": "session_meta", "payload": {"instructions": "again"}}, {"payload": 5},
             _codex_said("assistant", "a1"), _codex_count(100, 40),
             {"type": "compacted", "timestamp": "2025-01-01T00:01:00Z", "payload": {"message": "sum"}},
             _codex_said("user", "next"), _codex_said("assistant", "a2"), _codex_count(50, 0),
             {"type": "compacted", "payload": {"message": ""}}]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    session = import_file(path)
    start = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc).timestamp()
    assert session.messages == (
        glyphpack.Message("system", (Text("sys"),), id="codex-2"),
        glyphpack.Message("user", (Text("hi"),), id="codex-1", time=start),
        glyphpack.Message("assistant", (Text("a1"),), id="codex-5", time=start),
        glyphpack.Message("user", (Text("[codex compaction summary]\nsum"),), id="codex-7", time=start + 60),
        glyphpack.Message("user", (Text("next"),), id="codex-8", time=start),
        glyphpack.Message("assistant", (Text("a2"),), id="codex-9", time=start),
    )
    assert [m.time for m in session.messages] == [None, start, start, start + 60, start, start]  # times are not compared by ==
    (agent,) = session.agents
    assert (agent.name, agent.model, agent.compactions) == ("main", None, ("codex-7",))
    assert agent.usage == (Usage(0, 2, 100, 40, 0), Usage(3, 5, 50, 0, 0))
    assert (session.title, session.report.compactions, session.report.skipped) == ("hi", 2, {"untyped lines without a payload": 1})
    # Events written before their response: each measures the response after it.
    lines = [_codex_said("user", "hi"), _codex_count(70, 7), _codex_said("assistant", "a1"), _codex_said("user", "more"),
             _codex_count(0, 0), _codex_said("assistant", "a2"), _codex_count(90, 0), _codex_said("user", "left")]
    path.write_text("\n".join(json.dumps(line) for line in lines))
    assert import_file(path).agents[0].usage == (Usage(0, 1, 70, 7, 0),)


def _pi_said(entry: str, parent: str | None, role: str, text: str, **fields: object) -> dict[str, object]:
    return {"type": "message", "id": entry, "parentId": parent, "timestamp": "2025-01-01T00:00:00Z",
            "message": {"role": role, "content": [{"type": "text", "text": text}], **fields}}


def test_pi_tree_compaction_and_counts_read_exactly(tmp_path):
    """pi's tree form: the path to the last entry, not the branch left behind; a
    compaction's summary is a user message of its own time, and later requests carry
    the entries from ``firstKeptEntryIndex`` on (an index into the path's entries);
    each answer's usage counts input, cache reads and cache writes; the model is the
    last one an answer names."""
    lines = [{"type": "session", "id": "s", "cwd": "/w"},
             _pi_said("a", None, "user", "one"),
             _pi_said("b", "a", "assistant", "two", model="m1", usage={"input": 10, "cacheRead": 5, "cacheWrite": 2}),
             _pi_said("x", "b", "user", "abandoned"),
             _pi_said("c", "b", "user", "three"),
             {"type": "compaction", "id": "k", "parentId": "c", "summary": "sum", "firstKeptEntryIndex": 3,
              "timestamp": "2025-01-01T00:02:00Z"},
             _pi_said("d", "k", "assistant", "four", model=" ", usage={"input": 3}),
             {"type": "model_change", "id": "e", "parentId": "d"}]
    path = tmp_path / "pi.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    session = import_file(path)
    start = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc).timestamp()
    assert session.messages == (
        glyphpack.Message("user", (Text("one"),), id="pi-1", time=start),
        glyphpack.Message("assistant", (Text("two"),), id="pi-2", time=start),
        glyphpack.Message("user", (Text("three"),), id="pi-3", time=start),
        glyphpack.Message("user", (Text("[pi compaction summary]\nsum"),), id="pi-4", time=start + 120),
        glyphpack.Message("assistant", (Text("four"),), id="pi-5", time=start),
    )
    assert [m.time for m in session.messages] == [start, start, start, start + 120, start]  # times are not compared by ==
    (agent,) = session.agents
    assert (agent.name, agent.model, agent.compactions) == ("main", "m1", ("pi-3",))
    assert agent.usage == (Usage(0, 1, 17, 5, 2), Usage(2, 4, 3, 0, 0))
    assert session.report.compactions == 1
    assert session.report.skipped == {"session lines (no message)": 1, "model_change lines (no message)": 1}
    # A first kept entry past every message: later requests start at the summary; a
    # compaction without a usable index or summary is counted and adds nothing.
    lines[5] = {**lines[5], "firstKeptEntryIndex": 99}
    lines.insert(6, {"type": "compaction", "id": "k2", "parentId": "k", "summary": "", "firstKeptEntryIndex": True})
    lines[7] = {**lines[7], "parentId": "k2"}
    path.write_text("\n".join(json.dumps(line) for line in lines))
    session = import_file(path)
    assert [m.id for m in session.messages] == ["pi-1", "pi-2", "pi-3", "pi-4", "pi-6"]
    assert session.agents[0].compactions == ("pi-4",) and session.report.compactions == 2
    assert session.agents[0].usage[1] == Usage(3, 4, 3, 0, 0)


@pytest.mark.parametrize(("records", "expected"), [
    ([{"type": "session", "cwd": "/w"}], True),
    ([{"type": "session", "modelId": "m"}], True),
    ([{"type": "session"}], False),
    ([{"type": "sessions", "cwd": "/w"}], False),
    ([{}, {}, {"type": "session", "cwd": "/w"}], True),
    ([{}, {}, {}, {"type": "session", "cwd": "/w"}], False),
    ([{}, {}, {}, {"type": "message", "message": {"role": "toolResult"}}], True),
    ([{"type": "message", "message": {"role": "user"}, "uuid": "u"}], False),
    ([{"type": "message", "message": {"role": "system"}}], False),
    ([{"type": "message", "message": "user"}], False),
    ([{"type": "note", "message": {"role": "user"}}], False),
])
def test_pi_is_told_by_its_header_or_its_messages(records, expected):
    from glyphpack._importers import pi

    assert pi.detect(records) is expected


@pytest.mark.parametrize(("records", "expected"), [
    ([{"type": kind, "payload": {}}], True) for kind in ("session_meta", "response_item", "turn_context")
] + [
    ([{"type": "session_meta"}], False),
    ([{"type": "event_msg", "payload": {}}], False),
    ([{"payload": {}}], False),
])
def test_codex_is_told_by_its_typed_payload_lines(records, expected):
    from glyphpack._importers import codex

    assert codex.detect(records) is expected


def test_a_glyphpack_transcript_or_message_list_imports_with_its_own_ids(tmp_path):
    """What glyphpack itself saved reads back exactly: a workspace transcript file, or
    its messages as a list (or under ``messages``), keeping their ids; a damaged
    transcript is refused by name."""
    from glyphpack._history.codec import history_to_json

    history = [glyphpack.Message("user", (Text("go"),), id="u1"),
               glyphpack.Message("assistant", (ToolCall("c1", "ls", {}),), id="a1"),
               glyphpack.Message("tool", (glyphpack.ToolResult("c1", (Text("x"),)),), id="t1"),
               glyphpack.Message("assistant", (Text("done"),), id="a2")]
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        ws.save("conv", "main", history, revision=0)
    stored = tmp_path / "ws" / "transcripts" / "conv" / "main.json"
    for path in (stored, tmp_path / "list.json", tmp_path / "object.json"):
        if path.name == "list.json":
            path.write_text(json.dumps(history_to_json(history)))
        elif path.name == "object.json":
            path.write_text(json.dumps({"messages": history_to_json(history)}))
        session = import_file(path)
        assert (session.report.format, session.agents[0].name, session.title) == ("glyphpack", "main", "go")
        assert session.messages == tuple(history)
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps({"format": "glyphpack-transcript", "version": 1, "revision": -1, "checkpoints": {}, "messages": []}))
    with pytest.raises(glyphpack.GlyphpackError, match=r"damaged\.json is damaged: 'revision' must be a non-negative integer"):
        import_file(damaged)


def test_a_responses_input_file_reads_exactly(tmp_path):
    """Items without a type are messages; an item that gives nothing is passed over; an
    answer's items (reasoning, text, calls) join one assistant message; instructions
    open the history; each message numbered by position."""
    items = [{"role": "user", "content": "hi"}, {"role": "user", "content": "again"}, {"type": "reasoning", "summary": []},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
             {"type": "function_call", "call_id": "f1", "name": "ls", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "f1", "output": "a"},
             {"type": "function_call_output", "call_id": "f0", "output": "lost"},
             {"type": "function_call", "call_id": "f2", "name": "ls", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "f2", "output": "b"}]
    path = tmp_path / "responses.json"
    path.write_text(json.dumps({"input": items, "instructions": "be kind"}))
    session = import_file(path)
    result = glyphpack.ToolResult
    assert session.messages == (
        glyphpack.Message("system", (Text("be kind"),), id="openai-responses-0"),
        glyphpack.Message("user", (Text("hi"),), id="openai-responses-1"),
        glyphpack.Message("user", (Text("again"),), id="openai-responses-2"),
        glyphpack.Message("assistant", (Text("ok"), ToolCall("f1", "ls", {})), id="openai-responses-3"),
        glyphpack.Message("tool", (result("f1", (Text("a"),)),), id="openai-responses-4"),
        glyphpack.Message("user", (Text("[tool result for call 'f0', which is not in this history]\nlost"),), id="openai-responses-4-unpaired"),
        glyphpack.Message("assistant", (ToolCall("f2", "ls", {}),), id="openai-responses-5"),
        glyphpack.Message("tool", (result("f2", (Text("b"),)),), id="openai-responses-6"),
    )
    assert session.report.format == "openai-responses"
    path.write_text(json.dumps({"input": [items[4], 3]}))
    with pytest.raises(glyphpack.HistoryError) as refused:
        import_file(path, format="openai-responses")
    assert str(refused.value) == f"{path}: item 1: not an object"


def test_malformed_codex_and_pi_records_are_counted_and_their_words_kept(tmp_path):
    """A text part without text, a call without an id or a name, an output without a
    call id, a pi result without one: each counted, and every word a result carried
    kept (as the user's text where no call can be paired)."""
    lines = [_codex_item({"type": "message", "role": "system", "content": "sys rules"}),
             _codex_item({"type": "message", "role": "user", "content": [
                 "stray", {"type": "text", "text": "t1"}, {"type": "text"}, {"type": "output_text", "text": "t2"}]}),
             _codex_item({"type": "message", "role": "user", "content": {"a": 1}}),
             _codex_item({"type": "function_call", "name": "ls", "arguments": "{}"}),
             _codex_item({"type": "function_call", "call_id": "ok", "arguments": "{}"}),
             _codex_item({"type": "function_call_output", "output": "no id"}),
             _codex_item({"type": "function_call_output", "call_id": "ok", "output": "fine"})]
    path = tmp_path / "codex.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    session = import_file(path)
    start = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc).timestamp()
    missing = glyphpack.ToolResult("", (Text("[no result: the session ended this turn before the tool returned]"),), True)
    assert session.messages == (
        glyphpack.Message("system", (Text("sys rules"),), id="codex-1", time=start),
        glyphpack.Message("user", (Text("t1"), Text("t2")), id="codex-2", time=start),
        glyphpack.Message("assistant", (ToolCall("", "ls", {}), ToolCall("ok", "tool", {})), id="codex-4", time=start),
        glyphpack.Message("tool", (glyphpack.ToolResult("ok", (Text("fine"),)),), id="codex-7", time=start),
        glyphpack.Message("tool", (missing,), id="codex-7-missing-results"),
    )
    assert session.report.skipped == {"malformed text parts": 1, "malformed tool outputs": 1}

    def said(role: str, **fields: object) -> dict[str, object]:
        return {"type": "message", "message": {"role": role, **fields}}

    lines = [{"type": "session", "cwd": "/w"}, said("user", content="go"),
             said("assistant", content=[{"type": "toolCall", "id": "t1", "name": "ls", "arguments": {}}]),
             said("toolResult", content=[{"type": "text", "text": "r"}, {"type": "thinking", "thinking": "hidden"}], toolCallId="t1", isError=1),
             said("toolResult", content="x"), said("bashExecution", output="out", exitCode=None),
             said("bashExecution", command="false", output="", exitCode=1), said("bashExecution", command="true", exitCode=0),
             said("assistant", content=[], stopReason="aborted"), said("assistant", content=[], stopReason="stop")]
    path = tmp_path / "pi.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    session = import_file(path)
    assert session.messages == (
        glyphpack.Message("user", (Text("go"),), id="pi-1"),
        glyphpack.Message("assistant", (ToolCall("t1", "ls", {}),), id="pi-2"),
        glyphpack.Message("tool", (glyphpack.ToolResult("t1", (Text("r"),), True),), id="pi-3"),
        glyphpack.Message("user", (Text("[tool result without a call id]\nx"),), id="pi-3-unpaired"),
        glyphpack.Message("user", (Text("[the user ran a shell command] $ \nout"),), id="pi-5"),
        glyphpack.Message("user", (Text("[the user ran a shell command (exit code 1)] $ false\n"),), id="pi-6"),
        glyphpack.Message("user", (Text("[the user ran a shell command] $ true\n"),), id="pi-7"),
    )
    assert session.report.skipped == {"session lines (no message)": 1, "assistant turns that ended in an aborted with nothing said": 1}
    assert session.report.repaired == {"tool results without an open call kept as user text": 1}
    lines = [{"type": "user", "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": "go"}},
             {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "ok"}]}},
             {"type": "user", "uuid": "u2", "parentUuid": "a1", "message": {"role": "user", "content": [{"type": "tool_result", "content": "stray output"}]}}]
    path = tmp_path / "claude.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    session = import_file(path)  # Claude Code: a result without an id and no id-less call before it
    assert session.messages[-1].text == "[tool result without a call id]\nstray output"
    assert session.report.repaired == {"tool results without an open call kept as user text": 1} and session.report.skipped == {}


def test_claude_code_edges_one_line_sidechains_only_and_lines_without_messages(tmp_path):
    """A file of one message line is that message; a file of sidechain lines alone
    gives each sidechain root an agent (named by ``agentId``, else ``sidechain-N``);
    lines without a uuid or a message are counted by type; the title's precedence."""
    path = tmp_path / "s.jsonl"

    def imported(lines: list[dict[str, object]]) -> glyphpack.ImportedSession:
        path.write_text("\n".join(json.dumps(line) for line in lines))
        return import_file(path)

    one = imported([{"type": "user", "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": "only"}}])
    assert [(m.id, m.text) for m in one.messages] == [("u1-0", "only")] and one.report.agents == ("main",)

    def side(uuid: str, parent: str | None, role: str, text: str, **fields: object) -> dict[str, object]:
        message = {"role": "user", "content": text} if role == "user" else {
            "id": f"m{uuid}", "role": "assistant", "content": [{"type": "text", "text": text}]}
        return {"type": role, "uuid": uuid, "parentUuid": parent, "isSidechain": True, "message": message, **fields}

    session = imported([side("s1", None, "user", "sub task", agentId="abc"), side("s2", "s1", "assistant", "sub done", agentId="abc"),
                        side("t1", None, "user", "other task"), side("t2", "t1", "assistant", "other done"),
                        {"uuid": "x1", "parentUuid": None}, {"note": "no uuid"}, {"type": "custom-title", "customTitle": 5},
                        {"type": "summary", "summary": ""}, {"type": "ai-title", "aiTitle": "AI"}])
    assert session.report.agents == ("abc", "sidechain-2")
    assert [[m.text for m in a.messages] for a in session.agents] == [["sub task", "sub done"], ["other task", "other done"]]
    assert session.report.skipped == {"untyped lines (no message)": 2, "custom-title lines (no message)": 1}
    assert session.title == "AI"


def test_claude_code_calls_and_results_without_ids_pair_in_order(tmp_path):
    """Older files write calls and results without ids: each call gets one from its
    message and place, the results answer them in order, one more is kept as the
    user's text; a queued prompt is the user's own message under its line's id."""
    lines = [{"type": "user", "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": "go"}},
             {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "message": {"id": "m1", "role": "assistant", "content": [
                 {"type": "text", "text": "running"}, {"type": "tool_use", "name": "ls", "input": {}}, {"type": "tool_use", "name": "pwd", "input": {}}]}},
             {"type": "user", "uuid": "u2", "parentUuid": "a1", "message": {"role": "user", "content": [
                 {"type": "tool_result", "content": "a b"}, {"type": "tool_result", "content": "/w"}, {"type": "tool_result", "content": "extra"}]}},
             {"type": "attachment", "uuid": "q1", "parentUuid": "u2", "attachment": {"type": "queued_command", "prompt": "and then"}},
             {"type": "assistant", "uuid": "a2", "parentUuid": "q1", "message": {"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "done"}]}}]
    path = tmp_path / "old.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    session = import_file(path)
    result = glyphpack.ToolResult
    assert session.messages == (
        glyphpack.Message("user", (Text("go"),), id="u1-0"),
        glyphpack.Message("assistant", (Text("running"), ToolCall("anonymous-a1-1-1", "ls", {}), ToolCall("anonymous-a1-1-2", "pwd", {})), id="a1-1"),
        glyphpack.Message("tool", (result("anonymous-a1-1-1", (Text("a b"),)), result("anonymous-a1-1-2", (Text("/w"),))), id="u2-2-results"),
        glyphpack.Message("user", (Text("[tool result without a call id]\nextra"),), id="u2-2-results-unpaired"),
        glyphpack.Message("user", (Text("and then"),), id="q1-3"),
        glyphpack.Message("assistant", (Text("done"),), id="a2-4"),
    )
    assert session.report.repaired == {"tool calls without an id given one": 2, "tool results without a call id paired with the call before them": 2,
                                       "tool results without an open call kept as user text": 1}
    assert session.report.skipped == {}


def test_malformed_claude_code_blocks_are_counted_by_kind(tmp_path):
    lines = [{"type": "user", "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": [{"type": "text"}, {"type": "text", "text": "go"}]}},
             {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "message": {"id": "m1", "role": "assistant", "content": [
                 {"type": "thinking", "thinking": "hm", "signature": 5}, {"type": "redacted_thinking"},
                 {"type": "tool_use", "id": 7, "name": "ls", "input": {}}, {"type": "tool_use", "id": "ok", "name": "ls", "input": {}}]}},
             {"type": "user", "uuid": "u2", "parentUuid": "a1", "message": {"role": "user", "content": [
                 {"type": "tool_result", "tool_use_id": ["x"], "content": "bad"},
                 {"type": "tool_result", "tool_use_id": "ok", "content": [
                     {"type": "text", "text": "fine"}, {"type": "text"},
                     {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "@@"}}]}]}},
             {"type": "assistant", "uuid": "a2", "parentUuid": "u2", "message": {"id": "m2", "role": "assistant", "content": 7}}]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    session = import_file(path)
    assert session.messages == (
        glyphpack.Message("user", (Text("go"),), id="u1-0"),
        glyphpack.Message("assistant", (Thinking("hm"), ToolCall("ok", "ls", {})), id="a1-1"),
        glyphpack.Message("tool", (glyphpack.ToolResult("ok", (Text("fine"), Text("[image image/png: its data was not valid base64]"))),), id="u2-2-results"),
        glyphpack.Message("user", (Text("[tool result without a call id]\nbad"),), id="u2-2-results-unpaired"),
    )
    assert session.report.skipped == {"malformed text blocks": 2, "malformed redacted thinking": 1, "malformed tool calls": 1,
                                      "message contents that are neither text nor blocks": 1}
    assert session.report.repaired == {"images without valid data kept as a text stub": 1, "tool results without an open call kept as user text": 1}


@pytest.mark.parametrize(("records", "expected"), [
    ([{"uuid": "u", "parentUuid": None}], True),
    ([{"uuid": "u"}], False),
    ([{"parentUuid": None}], False),
    ([{"type": "summary", "leafUuid": "u"}], True),
    ([{"type": "summary"}], False),
    ([{"type": "note", "leafUuid": "u"}], False),
])
def test_claude_code_is_told_by_linked_lines_or_a_summary_of_a_leaf(records, expected):
    from glyphpack._importers import claude_code

    assert claude_code.detect(records) is expected


def test_parallel_calls_take_in_only_their_own_results(tmp_path):
    """Claude Code writes a response's parallel calls one line each, chained, and hangs
    each result off its call's line: those results are taken into the path, after the
    response. A side part that is not only this response's lines and results (a result
    of another call, the user's words, a call answered twice) stays a branch."""

    def user(uuid: str, parent: str | None, content: object) -> dict[str, object]:
        return {"type": "user", "uuid": uuid, "parentUuid": parent, "message": {"role": "user", "content": content}}

    def call(uuid: str, parent: str, call_id: str) -> dict[str, object]:
        return {"type": "assistant", "uuid": uuid, "parentUuid": parent,
                "message": {"id": "m1", "role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "ls", "input": {}}]}}

    def result(uuid: str, parent: str, call_id: str, text: str) -> dict[str, object]:
        return user(uuid, parent, [{"type": "tool_result", "tool_use_id": call_id, "content": text}])

    lines = [user("u1", None, "go"), call("a1", "u1", "c1"), call("a2", "a1", "c2"), call("a3", "a2", "c3"),
             result("r1", "a1", "c1", "one"), result("r3", "a3", "c3", "three"), result("r2", "a2", "c2", "two"),
             result("x1", "a2", "c9", "stray"), user("x2", "a1", "a side question"), result("x3", "a3", "c3", "again"),
             {"type": "assistant", "uuid": "f1", "parentUuid": "r3", "message": {"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "done"}]}}]
    path = tmp_path / "parallel.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    session = import_file(path)
    results = (glyphpack.ToolResult("c1", (Text("one"),)), glyphpack.ToolResult("c2", (Text("two"),)), glyphpack.ToolResult("c3", (Text("three"),)))
    assert session.messages == (
        glyphpack.Message("user", (Text("go"),), id="u1-0"),
        glyphpack.Message("assistant", (ToolCall("c1", "ls", {}), ToolCall("c2", "ls", {}), ToolCall("c3", "ls", {})), id="a1-1"),
        glyphpack.Message("tool", results, id="r1-4-results"),
        glyphpack.Message("assistant", (Text("done"),), id="f1-10"),
    )
    assert session.report.branches == 3 and session.report.repaired == {} and session.report.skipped == {}
    assert [[m.id for m in branch] for branch in session.branches] == [
        ["u1-0", "a1-1", "r1-4-results", "r1-4-results-unpaired"], ["u1-0", "a1-1", "r1-4-results", "x2-8"], ["u1-0", "a1-1", "r1-4-results"]]
    assert session.branches[0][3].text == "[tool result for call 'c9', which is not in this history]\nstray"
    assert [r.text for r in session.branches[2][2].tool_results] == ["one", "two", "again"]


def _long_compacted_session(turns_before: int, turns_after: int) -> list[dict]:
    """A Claude Code session as it writes a long one: a task, ``turns_before`` rounds of
    a tool call and a 6,000-character result, its auto-compaction (boundary and summary),
    then ``turns_after`` rounds more."""
    lines: list[dict] = []
    parent: str | None = None

    def add(record: dict) -> None:
        nonlocal parent
        lines.append({"parentUuid": parent, "timestamp": "2026-03-01T10:00:00Z", **record})
        parent = record["uuid"]

    def rounds(prefix: str, count: int) -> None:
        for n in range(count):
            call = f"toolu_{prefix}{n}"
            add({"type": "assistant", "uuid": f"{prefix}a{n}", "message": {"id": f"msg_{prefix}{n}", "role": "assistant", "content": [
                {"type": "text", "text": f"Reading part {prefix}{n}."},
                {"type": "tool_use", "id": call, "name": "Read", "input": {"file_path": f"/src/{prefix}{n}.py"}}]}})
            add({"type": "user", "uuid": f"{prefix}r{n}", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call, "content": f"# {prefix}{n}\n" + f"line of {prefix}{n} source code\n" * 240}]}})

    add({"type": "user", "uuid": "task", "message": {"role": "user", "content": "Port the parser to the new AST."}})
    rounds("early", turns_before)
    lines.append({"type": "system", "subtype": "compact_boundary", "uuid": "boundary", "parentUuid": None, "logicalParentUuid": parent,
                  "timestamp": "2026-03-01T11:00:00Z", "compactMetadata": {"trigger": "auto", "preTokens": 170000}})
    parent = "boundary"
    add({"type": "user", "uuid": "summary", "isCompactSummary": True, "message": {"role": "user", "content":
         "This session is being continued from a previous conversation. The parser port is half done."}})
    rounds("late", turns_after)
    add({"type": "assistant", "uuid": "last", "message": {"id": "msg_last", "role": "assistant", "content": [{"type": "text", "text": "Done."}]}})
    return lines


@pytest.mark.parametrize("command", ["compact", "shake"])
def test_a_compaction_of_an_imported_conversation_starts_from_the_harness_compaction_in_force(tmp_path, capsys, command):
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in _long_compacted_session(120, 14)))
    ws = tmp_path / "ws"
    assert main(["import", str(path), "--workspace", str(ws)]) == 0
    with glyphpack.Workspace(ws) as workspace:
        session = glyphpack.Session(workspace, "long", "main", model="claude-sonnet-4-5")
        whole = session.cost().history(session.messages)
        in_force = session.estimate()
        assert whole > 5 * in_force  # the summarized rounds are most of the transcript
    capsys.readouterr()
    budget = in_force * 2 // 3
    args = [command, str(ws), "long", "--model", "claude-sonnet-4-5"] + (["--budget", str(budget)] if command == "compact" else [])
    assert main(args) == 0, capsys.readouterr().out
    with glyphpack.Workspace(ws) as workspace:
        session = glyphpack.Session(workspace, "long", "main", model="claude-sonnet-4-5")
        sent = session.request_view()[0]
        after = session.estimate()
        view = read_view(workspace, "long", "main")
    assert view is not None and view.trigger == f"/{command}"
    assert after < in_force and (command == "shake" or after <= budget)
    text = "\n".join(m.text for m in sent)
    assert "earlyr" not in "".join(m.id for m in sent) and "line of early" not in text  # nothing the harness summarized comes back
    assert sent[0].text.startswith("This session is being continued") and text.endswith("Done.")


@pytest.mark.parametrize("command", ["compact", "shake"])
def test_a_compaction_of_a_harness_compacted_file_starts_where_its_context_does(tmp_path, capsys, command):
    """``compact FILE`` and ``shake FILE`` work on what the harness's next request carries,
    as ``context FILE`` counts it (they took the whole file: 120 rounds the harness had
    already summarized came back into the view)."""
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in _long_compacted_session(120, 14)))
    assert main(["context", str(path), "--model", "claude-sonnet-4-5"]) == 0
    context = capsys.readouterr()
    carried = int(re.search(r"~([\d,]+) tokens for", context.out).group(1).replace(",", ""))
    out = tmp_path / "view"
    args = [command, str(path), "--model", "claude-sonnet-4-5", "--out", str(out)] + (["--budget", str(carried * 2 // 3)] if command == "compact" else [])
    assert main(args) == 0
    done = capsys.readouterr()
    assert "its requests carry messages" in done.err
    before = int(re.search(r"^\S+ +([\d,]+) +", done.out.splitlines()[1]).group(1).replace(",", ""))
    assert before == carried  # the first rung starts from what the requests carry, not the whole file
    view = json.loads((out / "view.json").read_text())
    text = json.dumps(view)
    assert "line of early" not in text and "This session is being continued" in text


def test_a_compaction_that_does_not_fit_leaves_the_one_in_force(tmp_path, capsys):
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in _long_compacted_session(40, 6)))
    ws = tmp_path / "ws"
    assert main(["import", str(path), "--workspace", str(ws)]) == 0
    with glyphpack.Workspace(ws) as workspace:
        before = read_view(workspace, "long", "main")
        session = glyphpack.Session(workspace, "long", "main", model="claude-sonnet-4-5")
        estimate, overhead = session.estimate(), session.estimator.overhead
    capsys.readouterr()
    budget = overhead + 4  # below the task alone
    assert main(["compact", str(ws), "long", "--model", "claude-sonnet-4-5", "--budget", str(budget)]) == 1
    out = capsys.readouterr().out
    assert "not kept, it does not fit: the compaction in force stays" in out
    with glyphpack.Workspace(ws) as workspace:
        assert read_view(workspace, "long", "main") == before and before is not None and before.trigger == "harness"
        assert glyphpack.Session(workspace, "long", "main", model="claude-sonnet-4-5").estimate() == estimate


def test_a_compaction_larger_than_the_request_in_force_is_not_kept(tmp_path):
    """A workspace imported before the harness's compaction start was kept: the ladder
    reads the whole transcript, and what it makes from it, larger than the harness's
    request in force, is not kept."""
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in _long_compacted_session(60, 4)))
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        workspace.import_session(import_file(path), "long")
        workspace._store.put_measured("long", "main", b'{"format": "glyphpack-measured"}')  # as older versions kept it
        assert workspace.harness_start("long", "main") is None
        before = read_view(workspace, "long", "main")
        session = glyphpack.Session(workspace, "long", "main", model="claude-sonnet-4-5")
        in_force = session.estimate()
        result = session.compact(in_force * 3)  # the whole transcript is ~5 times the request in force
        assert result.report.fits and result.report.tokens_after > in_force
        assert result.report.message.endswith(f"not kept, the request in force is smaller (~{in_force:,} tokens): the compaction in force stays")
        assert read_view(workspace, "long", "main") == before and session.estimate() == in_force


def _one_task_session(task: str, answers: int = 1) -> str:
    lines = [{"type": "user", "uuid": "u1", "parentUuid": None, "timestamp": "2026-02-12T16:00:00Z", "message": {"role": "user", "content": task}}]
    for n in range(answers):
        lines.append({"type": "assistant", "uuid": f"a{n}", "parentUuid": lines[-1]["uuid"], "timestamp": "2026-02-12T16:01:00Z",
                      "message": {"id": f"m{n}", "role": "assistant", "content": [{"type": "text", "text": f"answer {n} to {task}"}]}})
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def test_files_named_alike_in_two_folders_are_two_conversations_each_found_again(tmp_path, capsys, monkeypatch):
    for project in ("projA", "projB", "other/projB"):
        (tmp_path / project).mkdir(parents=True)
        (tmp_path / project / "session.jsonl").write_text(_one_task_session(f"task of {project}"))
    ws = tmp_path / "ws"
    assert main(["import", str(tmp_path / "projA"), str(tmp_path / "projB"), str(tmp_path / "other"), "--workspace", str(ws)]) == 0
    out = capsys.readouterr().out
    assert "imported as conversation session (task of projA)" in out and "imported as conversation projB-session (task of projB)" in out
    assert "imported as conversation other-projB-session (task of other/projB)" in out
    # Each file grows; each is appended to its own conversation, found by where it is (a relative path too).
    for project in ("projA", "projB", "other/projB"):
        (tmp_path / project / "session.jsonl").write_text(_one_task_session(f"task of {project}", answers=2))
    monkeypatch.chdir(tmp_path)
    assert main(["import", "other/projB/session.jsonl", "projB/session.jsonl", "projA", "--workspace", str(ws)]) == 0
    out = capsys.readouterr().out
    assert out.count("appended to conversation") == 3 and "rewrote the past" not in out
    with glyphpack.Workspace(ws) as workspace:
        for name, project in (("session", "projA"), ("projB-session", "projB"), ("other-projB-session", "other/projB")):
            assert [m.text for m in workspace.load(name, "main").messages][0] == f"task of {project}"
            assert workspace.source(name) == str((tmp_path / project / "session.jsonl").resolve())
        with pytest.raises(glyphpack.StoreError, match="every name it could be imported as"):
            workspace.name_for("/elsewhere/session.jsonl", ["session", "projB-session"])
        assert workspace.name_for("/elsewhere/session.jsonl", ["session", "elsewhere-session"]) == "elsewhere-session"


def test_a_conversation_imported_before_sources_were_kept_is_found_by_its_name(tmp_path, capsys):
    path = tmp_path / "proj" / "s.jsonl"
    path.parent.mkdir()
    path.write_text(_one_task_session("legacy"))
    ws = tmp_path / "ws"
    with glyphpack.Workspace(ws) as workspace:
        workspace.sync_session(import_file(path), "s")  # no source: as older versions kept it
        assert workspace.source("s") is None
    path.write_text(_one_task_session("legacy", answers=3))
    assert main(["import", str(path), "--workspace", str(ws)]) == 0
    assert "appended to conversation s " in capsys.readouterr().out
    with glyphpack.Workspace(ws) as workspace:
        assert workspace.source("s") == str(path.resolve())  # kept from now on


def test_a_fork_of_an_imported_conversation_compacts_from_where_the_harness_did(tmp_path):
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in _long_compacted_session(30, 6)))
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        workspace.sync_session(import_file(path), "long")
        forked = workspace.fork("long", "main").conversation
        by_id = {m.id: m for m in workspace.load(forked, "main").messages}
        start = workspace.harness_start(forked, "main")
        assert start in by_id and by_id[start].text.startswith("This session is being continued")
        session = glyphpack.Session(workspace, forked, "main", model="claude-sonnet-4-5")
        assert "line of early" not in "".join(m.text for m in session.shake().view)


def test_import_with_no_path_finds_every_harness_home_and_syncs_them_all(tmp_path, capsys, monkeypatch):
    """A new user's one command: each harness's sessions where the harness keeps them
    (a home moved by its variable too), each imported once, subagents and companions
    with their sessions, a line of progress each; run again, all in step."""
    import shutil

    from tests.test_import_formats import _crush_database

    home, project = tmp_path / "home", tmp_path / "project"
    data = Path(__file__).parent / "data" / "sessions"

    def put(source: Path, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, target) if source.is_dir() else shutil.copyfile(source, target)

    put(data / "ohmyposh-6beb436f6cd8-0.jsonl", home / ".claude/projects/-home-dev-posh/6beb436f.jsonl")
    put(data / "simonw-sample_codex_session.jsonl", tmp_path / "codex-home/sessions/2026/01/02/rollout-2026-01-02T10-00-00-abc.jsonl")
    put(data / "entirecli-gemini-9c53780d06b7-0.json", home / ".gemini/tmp/5f3a/chats/session-2026-01-02T10-00-9c53.json")
    put(data / "agentv-269e1b9e5502-0.jsonl", home / ".copilot/session-state/269e1b9e/events.jsonl")
    kimi = data / "kimicli-0b88d484-d8447fa8"
    put(kimi, home / ".kimi/sessions/00d5060a")  # a context file of its own, its subagent's beside it
    put(kimi / "d8447fa8-9d8e-41af-9fc6-a12e4a196b6c.jsonl", home / ".kimi/sessions/7e1b/4c2f/context.jsonl")  # in its own folder
    (home / ".kimi/sessions/7e1b/4c2f/wire.jsonl").write_text('{"type": "metadata", "protocol_version": "1"}\n')
    put(data / "cline-task", home / ".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/tasks")
    (project / ".crush").mkdir(parents=True)
    _crush_database(project / ".crush" / "crush.db")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.chdir(project)
    ws = tmp_path / "ws"
    assert main(["import", "--workspace", str(ws)]) == 0
    out = capsys.readouterr().out
    for line in ("Claude Code: 1 session file(s)", "Codex: 1 session file(s)", "Gemini CLI: 1 session file(s)", "Copilot CLI: 1 session file(s)",
                 "Kimi CLI: 2 session file(s)", "rooveterinaryinc.roo-cline in Code: 1 session file(s)", "Crush: 1 session file(s)"):
        assert line in out, line
    assert "[1/8] " in out and "[8/8] " in out and "8 files: 8 imported or in step, 0 not" in out
    with glyphpack.Workspace(ws) as workspace:
        conversations = {c.id for c in workspace.tree.conversations()}
        agents = {agent for conversation, agent in workspace.transcripts() if conversation == "d8447fa8-9d8e-41af-9fc6-a12e4a196b6c"}
    assert {"6beb436f", "4c2f", "d8447fa8-9d8e-41af-9fc6-a12e4a196b6c", "1767001000000", "s1"} <= conversations and len(conversations) == 8
    assert agents == {"main", "read-1"}  # the subagent's context is an agent of its session, not a conversation
    assert main(["import", "--workspace", str(ws)]) == 0
    assert capsys.readouterr().out.count(": unchanged") == 8
    monkeypatch.setenv("HOME", str(tmp_path / "nobody"))
    monkeypatch.delenv("CODEX_HOME")
    monkeypatch.chdir(tmp_path)
    assert main(["import", "--workspace", str(ws)]) == 2
    assert "no harness sessions found in this machine's harness homes" in capsys.readouterr().err


def test_ctrl_c_stops_an_import_between_files_saying_how_many_were_done(tmp_path, capsys, monkeypatch):
    """Ctrl-C printed a 45-line traceback and died by the signal; now the files done are
    kept, the line says how many, and the exit status is 130; run again, the import goes on."""
    from glyphpack._importers import registry

    for n in range(3):
        (tmp_path / "s" / f"p{n}").mkdir(parents=True)
        (tmp_path / "s" / f"p{n}" / f"session{n}.jsonl").write_text(_one_task_session(f"task {n}"))
    real = registry.import_sessions
    calls = []

    def interrupted_on_the_second(path, **options):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(path, **options)

    monkeypatch.setattr(registry, "import_sessions", interrupted_on_the_second)
    ws = tmp_path / "ws"
    assert main(["import", str(tmp_path / "s"), "--workspace", str(ws)]) == 130
    captured = capsys.readouterr()
    assert "glyphpack: import interrupted after 1 of 3 files (each one done is kept; run the same import again to go on)" in captured.err
    assert "Traceback" not in captured.err + captured.out
    with glyphpack.Workspace(ws) as workspace:
        assert [c.id for c in workspace.tree.conversations()] == ["session0"]
    monkeypatch.setattr(registry, "import_sessions", real)
    assert main(["import", str(tmp_path / "s"), "--workspace", str(ws)]) == 0
    assert "3 files: 3 imported or in step, 0 not" in capsys.readouterr().out
    monkeypatch.setattr("glyphpack._cli.history._tree", lambda *args, **kwargs: (_ for _ in ()).throw(KeyboardInterrupt()))  # any command
    assert main(["tree", str(ws)]) == 130 and capsys.readouterr().err.strip() == "glyphpack: interrupted"


def test_refs_lists_what_the_next_request_can_bring_back_and_recall_brings_it_exactly(tmp_path, capsys):
    """Recall had no command (only the session shell's /recall), and no command listed the
    refs a conversation's stubs and compactions carry: a harness compaction said
    "recallable" and showed no ref."""
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in _long_compacted_session(20, 12)))
    ws = tmp_path / "ws"
    assert main(["import", str(path), "--workspace", str(ws)]) == 0
    capsys.readouterr()
    assert main(["refs", str(ws), "long"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("long/main: 0 ref(s) in the next request")
    ranged = re.search(r"stands for (\"messages:[^\"]+\")", out)
    assert ranged is not None and "(harness)" in out
    assert main(["recall", str(ws), "long", json.loads(ranged.group(1))]) == 0
    first = capsys.readouterr().out
    assert first.startswith("[glyphpack recall of messages:long/task-0..") and "line of early0 source code" in first
    pages = int(re.search(r"page 1 of (\d+)", first).group(1))
    assert main(["recall", str(ws), "long", json.loads(ranged.group(1)), "--page", str(pages)]) == 0
    last = capsys.readouterr().out
    assert "line of early19 source code" in last and "late0" not in first + last
    # A compaction of glyphpack's: each stub's ref listed, each brought back exactly.
    assert main(["compact", str(ws), "long", "--budget", "9000", "--model", "claude-sonnet-4-5"]) == 0
    capsys.readouterr()
    assert main(["refs", str(ws), "long"]) == 0
    listed = capsys.readouterr().out
    refs = re.findall(r'^  "([^"]+)"  message \d+ \((?:tool|user|assistant)\): (.*)$', listed, flags=re.M)
    assert refs, listed
    with glyphpack.Workspace(ws) as workspace:
        results = {r.call_id: r.text for m in workspace.load("long", "main").messages for r in m.tool_results}
    assert sum(ref in results for ref, _ in refs) >= 3  # elided results among them
    for ref, _ in refs:
        if ref in results:
            assert main(["recall", str(ws), "long", ref]) == 0
            assert capsys.readouterr().out == results[ref] + "\n"
    assert main(["recall", str(ws), "long", "toolu_nothing"]) == 2
    assert "nothing in this conversation has the ref 'toolu_nothing'" in capsys.readouterr().err
    assert main(["recall", str(ws), "long", refs[0][0], "--page", "9"]) == 2


def test_a_branch_keeps_what_the_imported_requests_taught_and_a_fork_keeps_the_model(tmp_path, capsys):
    """``branch`` back past the requests an import measured dropped the system prompt and
    tools' share of the estimate (62,899 tokens became 2,993); ``fork`` dropped the model
    (its /recall then asked for --model)."""
    path = session_path("claude-code/ohmyposh-6beb436f6cd8-0.jsonl")
    ws = tmp_path / "ws"
    assert main(["import", str(path), "--workspace", str(ws), "--conversation", "posh"]) == 0
    with glyphpack.Workspace(ws) as workspace:
        model = workspace.settings("posh", "main")["model"]
        session = glyphpack.Session(workspace, "posh", "main", model=model)
        overhead = session.estimator.overhead
        assert overhead > 5_000  # what the file's measured requests carried beyond its messages
        early = next(m for m in session.messages if m.role == "assistant" and not m.tool_calls)
        workspace.branch("posh", "main", early.id)
        assert glyphpack.Session(workspace, "posh", "main", model=model).estimator.overhead == overhead
        forked = workspace.fork("posh", "main").conversation
        assert workspace.settings(forked, "main")["model"] == model
        assert glyphpack.Session(workspace, forked, "main", model=model).estimator.overhead == overhead
    capsys.readouterr()
    assert main(["context", str(ws), forked]) == 0  # no --model asked
    assert f"for {model}" in capsys.readouterr().out


def test_harness_homes_are_found_where_each_harness_and_its_variables_put_them(tmp_path):
    """``find_sessions`` on a given home, environment and current folder (none of this
    process's): each home's root said, hidden files and folders named like sessions
    left out, and Crush's databases from the folder's ``.crush`` and its projects list
    (in ``$XDG_DATA_HOME``), whatever else that list holds."""
    from glyphpack._importers.homes import find_sessions

    home, here, data = tmp_path / "home", tmp_path / "here", tmp_path / "xdg"
    sessions = home / ".claude" / "projects" / "-p"
    sessions.mkdir(parents=True)
    (sessions / "a.jsonl").write_text("{}\n")
    (sessions / ".hidden.jsonl").write_text("{}\n")
    (sessions / "folder.jsonl").mkdir()
    codex = tmp_path / "codex" / "sessions" / "2026" / "01" / "02"
    codex.mkdir(parents=True)
    (codex / "rollout-1.jsonl").write_text("{}\n")
    for folder in (here / ".crush", tmp_path / "p1" / ".crush", tmp_path / "p2" / ".crush"):
        folder.mkdir(parents=True)
    for folder in (here / ".crush", tmp_path / "p1" / ".crush"):
        (folder / "crush.db").write_bytes(b"SQLite format 3\0")
    (data / "crush").mkdir(parents=True)
    listed = [{"path": "p1", "data_dir": str(tmp_path / "p1" / ".crush")}, {"path": "p2", "data_dir": str(tmp_path / "p2" / ".crush")},
              {"path": "p3", "data_dir": 7}, "not an object"]
    (data / "crush" / "projects.json").write_text(json.dumps({"projects": listed}))
    found = {f.harness: f for f in find_sessions(home, {"CODEX_HOME": str(tmp_path / "codex"), "XDG_DATA_HOME": str(data)}, here)}
    assert set(found) == {"Claude Code", "Codex", "Crush"}
    assert found["Claude Code"].home == home / ".claude" and found["Claude Code"].files == (sessions / "a.jsonl",)
    assert found["Codex"].home == tmp_path / "codex" and found["Codex"].files == (codex / "rollout-1.jsonl",)
    assert found["Crush"].files == tuple(sorted([(here / ".crush" / "crush.db").resolve(), (tmp_path / "p1" / ".crush" / "crush.db").resolve()]))
    assert found["Crush"].home == found["Crush"].files[0].parent
    # A variable that names a home moves it; without one, the home's own folder is read.
    moved = find_sessions(home, {"CLAUDE_CONFIG_DIR": str(tmp_path / "nowhere")}, tmp_path)
    assert "Claude Code" not in {f.harness for f in moved}
    for broken in ("not json", json.dumps({"projects": "p1"}), json.dumps(["p1"])):
        (data / "crush" / "projects.json").write_text(broken)
        assert [f.files for f in find_sessions(home, {"XDG_DATA_HOME": str(data)}, tmp_path) if f.harness == "Crush"] == []
    (home / ".local" / "share" / "crush").mkdir(parents=True)  # without $XDG_DATA_HOME: its default
    (home / ".local" / "share" / "crush" / "projects.json").write_text(json.dumps({"projects": listed[:1]}))
    assert [f.files for f in find_sessions(home, {}, tmp_path) if f.harness == "Crush"] == [((tmp_path / "p1" / ".crush" / "crush.db").resolve(),)]


def test_the_session_shells_tree_shows_the_compactions_the_cli_tree_shows(tmp_path, capsys):
    """The shell's /tree hid the harness's compactions that ``glyphpack tree`` showed:
    both draw the same now."""
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in _compacted("a1")))
    ws = tmp_path / "ws"
    assert main(["import", str(path), "--workspace", str(ws)]) == 0
    capsys.readouterr()
    assert main(["tree", str(ws), "s"]) == 0
    drawn = capsys.readouterr().out.strip()
    with glyphpack.Workspace(ws) as workspace:
        shell = glyphpack.Session(workspace, "s", "main", model="claude-sonnet-4-5").command("/tree").text
    assert "the harness compacted here (in force)" in shell and shell.strip() == drawn
