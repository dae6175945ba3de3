"""The importers of issue 24 read content, not just counts: the small synthetic files in
``tests/data/sessions`` (written from each format's schema) pin every quirk; the real
files in ``shared/sessions`` pin what they measured. JSONL as harnesses write it (a
byte order mark, CRLF, records glued on one line) is read whole."""

from __future__ import annotations

import base64
import datetime
import json
import shutil
from pathlib import Path

import pytest

import glyphpack
from glyphpack import HistoryError, Message, Opaque, RedactedThinking, Text, Thinking, ToolCall, import_file
from glyphpack._cli import main
from glyphpack._history.imported import Usage
from glyphpack._history.messages import title_from, validate_history

DATA = Path(__file__).parent / "data" / "sessions"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "sessions"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="shared/sessions is not beside the repository")


def sent_text(messages) -> str:
    """Everything a provider is sent, as one string (Anthropic and OpenAI Chat forms)."""
    system, converted = glyphpack.to_anthropic(messages)
    return json.dumps([system, converted, glyphpack.to_openai_chat(messages)], ensure_ascii=False)


def test_openhands_responses_calls_results_and_usage():
    session = import_file(DATA / "openhands-synthetic.jsonl")
    assert session.report.format == "openhands" and session.report.assumed == ()
    (agent,) = session.agents
    assert agent.name == session.title == "acme__app-17"
    roles = [m.role for m in agent.messages]
    assert roles == ["system", "user", "assistant", "tool", "user", "assistant", "tool"]
    system, task, first, results, error, finish, missing = agent.messages
    assert system.text == "You are OpenHands agent." and task.content[0] == Text("Fix the off-by-one bug in app.py.")
    # two action events of one model response: one message, the response's text and both calls
    assert first.content[0] == Text("Two looks at the repository first.")
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
        ("toolu_01", "execute_bash", {"command": "ls /workspace"}),
        ("toolu_02", "str_replace_editor", {"command": "view", "path": "/workspace/app.py"}),
    ]
    assert [(r.call_id, r.text) for r in results.tool_results] == [
        ("toolu_01", "app.py\ntest_app.py"),
        ("toolu_02", "     1\tdef last(xs):\n     2\t    return xs[len(xs)]"),
    ]
    # the recall events stay with the task, stored but never sent
    kept = [b for b in task.content if isinstance(b, Opaque)]
    assert [b.payload["action" if "action" in b.payload else "observation"] for b in kept] == ["recall", "recall"]
    assert "workspace_context" not in sent_text(agent.messages)
    assert error.text == "[OpenHands error] Parameter 'command' is expected to be one of ['view', 'create']."
    assert finish.tool_calls[0].arguments == {"message": "Fixed the off-by-one in app.py."}
    assert missing.tool_results[0].is_error and session.report.repaired == {"unanswered tool calls given an error result": 1}
    assert agent.usage == ((0, 2, 5920, 0, 0), (0, 5, 7012, 0, 0))


def test_openhands_event_lists_and_unknown_events(tmp_path):
    instance = json.loads((DATA / "openhands-synthetic.jsonl").read_text())
    events = instance["history"] + [{"id": 10, "source": "agent", "observation": "agent_state_changed", "content": ""}]
    (tmp_path / "events.json").write_text(json.dumps(events))
    as_list = import_file(tmp_path / "events.json")
    assert as_list.report.format == "openhands-events"
    assert [m.text for m in as_list.messages] == [m.text for m in import_file(DATA / "openhands-synthetic.jsonl").messages]
    assert as_list.report.skipped == {"agent_state_changed observations without a call": 1}


def test_two_instances_are_two_agents_and_the_report_says_so(tmp_path):
    line = (DATA / "openhands-synthetic.jsonl").read_text().strip()
    other = json.loads(line) | {"instance_id": "acme/app 18"}
    path = tmp_path / "output.jsonl"
    path.write_text(line + "\n" + json.dumps(other) + "\n" + line + "\n")  # the first instance run again
    session = import_file(path)
    assert [a.name for a in session.agents] == ["acme__app-17", "acme-app-18", "acme__app-17-2"]
    assert session.report.assumed == ("each of the 3 evaluation instances is an agent of its own, named by its instance id",)
    assert {m.id for m in session.agents[0].messages}.isdisjoint(m.id for m in session.agents[1].messages)


def test_mini_swe_agent_calls_usage_and_the_exit_record():
    session = import_file(DATA / "mini-swe-agent-synthetic.traj.json")
    assert session.report.format == "mini-swe-agent" and session.title == "django__django-12470"
    messages = session.messages
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert messages[2].tool_calls == [ToolCall("call_00_a", "bash", {"command": "pwd && ls -la"})]
    assert messages[3].tool_results[0].text == "<returncode>0</returncode>\n<output>/testbed</output>"
    # the submission is the result of the call that submitted it, nothing of it lost
    (submitted,) = messages[5].tool_results
    assert submitted.call_id == "call_00_b" and not submitted.is_error
    assert submitted.text == '[mini-swe-agent Submitted]\ndiff --git a/compiler.py b/compiler.py\n+    and not (field.primary_key and name == "pk")'
    assert session.report.repaired == {"exit records kept as the result of the call that ended the run": 1}
    assert session.agents[0].usage == ((0, 2, 1482, 0, 0), (0, 4, 2210, 0, 0))


@pytest.mark.parametrize(
    ("document", "detected"),
    [
        ({"trajectory_format": "mini-swe-agent-1", "messages": []}, True),
        ({"trajectory_format": "swe-agent", "messages": []}, False),
        ({"info": {"mini_version": "1.0"}, "messages": []}, True),
        ({"info": {"exit_status": "Submitted"}, "messages": []}, True),
        ({"info": {"model_stats": {}}, "messages": []}, True),
        ({"info": {"version": "1.0"}, "messages": []}, False),
        ({"info": ["mini_version"], "messages": []}, False),
        ({"info": {"mini_version": "1.0"}, "messages": {}}, False),
        ({"messages": []}, False),
    ],
)
def test_mini_swe_agent_is_told_by_its_format_or_by_one_of_its_info_keys(document, detected):
    from glyphpack._importers import mini_swe_agent

    assert mini_swe_agent.detect(document) is detected


def test_mini_swe_agent_exit_after_an_answered_call_is_a_last_user_message(tmp_path):
    document = json.loads((DATA / "mini-swe-agent-synthetic.traj.json").read_text())
    document["messages"][4:5] = []  # the exit now follows a tool result
    path = tmp_path / "t.traj.json"
    path.write_text(json.dumps(document))
    session = import_file(path)
    assert session.messages[-1].role == "user" and session.messages[-1].text.startswith("[mini-swe-agent Submitted]\ndiff --git")
    assert session.messages[-1].id == "mini-4" and session.report.repaired == {"exit records kept as a last user message": 1}
    validate_history(session.messages, allow_pending=False)


def test_mini_swe_agent_odd_records(tmp_path):
    """An exit with no content and nothing before it, a role no API has mid-run, no instance id."""
    path = tmp_path / "t.traj.json"
    path.write_text(json.dumps({"info": {"mini_version": "1.0"}, "messages": [{"role": "exit", "content": None}]}))
    alone = import_file(path)
    assert [(m.role, m.text) for m in alone.messages] == [("user", "[mini-swe-agent exit]")] and alone.title == ""
    document = json.loads((DATA / "mini-swe-agent-synthetic.traj.json").read_text())
    document["messages"].insert(2, {"role": "format_error", "content": "no bash block"})
    path.write_text(json.dumps(document))
    session = import_file(path)
    assert session.report.skipped == {"messages of role 'format_error'": 1}
    assert [m.role for m in session.messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]


def test_gemini_cli_pairs_calls_by_order_and_name_and_keeps_every_word():
    session = import_file(DATA / "gemini-cli-synthetic.json")
    user, model, results, answer, unpaired, last = session.messages
    thought, *calls = model.content
    assert thought == Thinking("**Searching** for the word first.")
    assert [(c.name, c.arguments, c.signature) for c in calls] == [
        ("grep", {"pattern": "hotkey"}, "c2lnbmF0dXJlLTE="),
        ("grep", {"pattern": "push-to-talk"}, None),
        ("read_file", {"path": "README.md"}, None),
    ]
    by_call = {r.call_id: r.text for r in results.tool_results}
    assert by_call == {
        calls[0].id: "src/hotkey.ts:3",  # the first grep response answers the first grep call
        calls[1].id: '{"output": "src/ptt.ts:9", "truncated": true}',  # more than output: all of it
        calls[2].id: "# Mozgoslav",
    }
    assert unpaired.role == "user" and unpaired.text == (
        "[tool result for call 'user-shell-1', which is not in this history]\nBacked up original state in git stash"
    )
    assert session.report.repaired == {"tool results without an open call kept as user text": 1}
    assert session.report.skipped == {}
    validate_history(session.messages, allow_pending=False)


def test_aider_chats_turns_reasoning_output_and_tokens():
    session = import_file(DATA / "aider-synthetic.chat.history.md")
    assert session.report.format == "aider"
    messages = session.messages
    assert [m.role for m in messages] == ["user", "user", "assistant"]
    first, second, answer = messages
    assert first.text == "hi" and second.text == "Why does push-to-talk paste the same text?\nIt worked yesterday."
    assert [b.payload for b in first.content if isinstance(b, Opaque) and b.kind == "aider-chat-start"] == [
        {"chat": 1, "started": "2026-04-22 22:40:12"}
    ]
    reasoning, said, *rest = answer.content
    assert reasoning == Thinking("The user reports stale text.")
    assert said == Text("Please add `src/ptt.ts` to the chat.")
    assert Text("The buffer is never cleared after a paste.") in rest
    shown = [b.payload["text"] for b in answer.content if isinstance(b, Opaque)]
    assert shown[0] == "Tokens: 1.8k sent, 653 received.\nsrc/ptt.ts"
    assert shown[1] == "[answered] Add file to the chat? (Y)es/(N)o/(A)ll/(S)kip all/(D)on't ask again [Yes]: y"
    sent = sent_text(messages)
    assert "Tokens:" not in sent and "AuthenticationError" not in sent and "(Y)es" not in sent
    # each call's input counts from the start of its chat; the answer holds two calls
    assert session.agents[0].usage == ((1, 2, 2400, 0, 0),)
    validate_history(messages, allow_pending=False)


AIDER_EDGES = """\
> Aider v0.80.0
#### before the header \x20
> shown between
####and a second line, no space after the hashes
# aider chat started at 2026-01-01 10:00:00

#### first question
    indented answer line
second answer line
> Tokens: 950 sent, 10 received.
> Applied edit to b.py
> \x20
>
#### second
<thinking-content-ab12>
  indented thought
</thinking-content-ab12>
  indented words
> Tokens: 12K sent, 5 received.
# aider chat started at 2026-01-02 10:00:00
#### third
answer three
> Tokens: 1.5M sent, 1 received.
#### fourth
answer four
> Tokens: 2m sent, 1 received.
#### fifth, unanswered
> Tokens: 3k sent, 0 received.
"""


def test_aider_edges_read_whole(tmp_path):
    """What comes before the first chat header, a line typed without a space after the
    hashes, indentation kept in answers and reasoning, a bare or blank ``>`` line, token
    counts in every unit aider writes (and none for output after a question no answer
    followed, or after a line that counts nothing), and two chats numbered."""
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(AIDER_EDGES)
    session = import_file(path)

    def shown(text: str) -> Opaque:
        return Opaque("aider-output", {"text": text})

    def chat(number: int, started: str) -> Opaque:
        return Opaque("aider-chat-start", {"chat": number, "started": started})

    assert session.messages == (
        Message("user", (shown("Aider v0.80.0"), Text("before the header"), shown("shown between"),
                         Text("and a second line, no space after the hashes")), id="aider-0"),
        Message("user", (chat(1, "2026-01-01 10:00:00"), Text("first question")), id="aider-1"),
        Message("assistant", (Text("    indented answer line\nsecond answer line"),
                              shown("Tokens: 950 sent, 10 received.\nApplied edit to b.py\n \n")), id="aider-2"),
        Message("user", (Text("second"),), id="aider-3"),
        Message("assistant", (Thinking("  indented thought"), Text("  indented words"), shown("Tokens: 12K sent, 5 received.")), id="aider-4"),
        Message("user", (chat(2, "2026-01-02 10:00:00"), Text("third")), id="aider-5"),
        Message("assistant", (Text("answer three"), shown("Tokens: 1.5M sent, 1 received.")), id="aider-6"),
        Message("user", (Text("fourth"),), id="aider-7"),
        Message("assistant", (Text("answer four"), shown("Tokens: 2m sent, 1 received.")), id="aider-8"),
        Message("user", (Text("fifth, unanswered"), shown("Tokens: 3k sent, 0 received.")), id="aider-9"),
    )  # fmt: skip
    # each call's input counts from the start of its chat
    assert [tuple(u) for u in session.agents[0].usage] == [(1, 2, 950, 0, 0), (1, 4, 12_000, 0, 0), (5, 6, 1_500_000, 0, 0), (5, 8, 2_000_000, 0, 0)]
    assert [a.name for a in session.agents] == ["main"] and session.title == "before the header and a second line, no space after the hashes"
    assert session.report.assumed == (
        "chats are joined into one history, as aider's --restore-chat-history reads them back",
        "aider writes each call's input rounded (1.8k sent): that rounding is the measured input",
    )
    only_shown = tmp_path / "shown.chat.history.md"
    only_shown.write_text("# aider chat started at 2026-01-03 09:00:00\n> Aider v0.80.0\n")
    assert import_file(only_shown, format="aider").messages == (
        Message("user", (chat(1, "2026-01-03 09:00:00"), shown("Aider v0.80.0")), id="aider-0"),
    )
    assert import_file(only_shown, format="aider").report.assumed == (
        "chats are joined into one history, as aider's --restore-chat-history reads them back",
    )


def test_aider_answer_cut_off_keeps_its_reasoning(tmp_path):
    path = tmp_path / ".aider.chat.history.md"
    path.write_text("# aider chat started at 2026-01-01 10:00:00\n\n#### go  \n\n<thinking-content-ab12>\n\nhalf a thought\n")
    (user, answer) = import_file(path).messages
    assert answer.content == (Thinking("half a thought"),)


def test_jsonl_as_harnesses_write_it(tmp_path):
    """A byte order mark, CRLF and two records on one line (pi wrote such a line) are
    read whole and counted; a line that is neither is skipped and counted."""
    lines = (DATA / "ccl-representative_messages.jsonl").read_text().splitlines()
    whole = import_file(DATA / "ccl-representative_messages.jsonl")
    glued = [lines[0] + lines[1], *lines[2:]]  # glued after the byte order mark
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(glued).encode() + b"\r\n{\"type\": \"user\", trunc\r\n")
    session = import_file(path)
    assert session.messages == whole.messages
    assert session.report.repaired == {"byte order marks removed": 1, "CRLF line ends read as LF": 1, "records glued on one line read apart": 1}
    assert session.report.skipped == {"lines that are not JSON": 1}


def test_a_file_no_format_reads_names_the_file(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("# my notes\n\nnothing here\n")
    with pytest.raises(HistoryError, match=r"notes\.md: no session format recognized"):
        import_file(path)
    with pytest.raises(HistoryError, match=r"not UTF-8"):
        (tmp_path / "bad.md").write_bytes(b"\xff\xfe# aider chat started at x\n")
        import_file(tmp_path / "bad.md", format="aider")


# ------------------------------------------------------------------ the real files


@needs_shared
def test_real_openhands_mini_swe_agent_aider_and_gemini_files():
    openhands = import_file(SHARED / "openhands/openhands-multi_swe_bench-output.jsonl")
    assert [len(a.usage) for a in openhands.agents] == [23, 33, 49]
    assert openhands.agents[0].usage[0] == (0, 2, 5920, 0, 0)  # no cached count recorded
    first_call = openhands.agents[0].messages[2].tool_calls[0]
    assert (first_call.id, first_call.arguments) == ("toolu_01", {"command": "ls -l /workspace/ponylang__ponyc__0.1"})

    mini = import_file(SHARED / "mini-swe-agent/miniswe-django__django-12470.traj.json")
    assert len(mini.agents[0].usage) == 131 and mini.agents[0].usage[0] == (0, 2, 1482, 320, 0)  # DeepSeek's cache hits
    assert mini.messages[-1].tool_results[0].text.startswith("[mini-swe-agent Submitted]\ndiff --git a/django/db/models/sql/compiler.py")

    aider = import_file(SHARED / "aider/mozgoslav-aider.chat.history.md")
    users = [m.text for m in aider.messages if m.role == "user"]
    assert users[:3] == ["hi", "hi", "Про что проект мозгослав и на каком этапе сейчас RAG?"]
    assert aider.agents[0].usage[0] == (1, 2, 1800, 0, 0)

    gemini = import_file(SHARED / "gemini-cli/geminicli-trajectory.json")
    signed = [c for m in gemini.messages for c in m.tool_calls if c.signature]
    assert len(signed) == 10
    assert any("Backed up original state in git stash" in m.text for m in gemini.messages if m.role == "user")


@needs_shared
def test_real_codex_token_counts_and_pi_glued_line():
    codex = import_file(SHARED / "codex/neurodata-rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl")
    usage = codex.agents[0].usage
    assert len(usage) == 27 and usage[0][2:] == (2816, 2560, 0) and usage[1][2:] == (3908, 2560, 0)
    assert codex.messages[usage[0][1]].role == "assistant"
    pi = import_file(SHARED / "pi/pimono-session.jsonl")
    # pi records Anthropic's cache reads and writes apart; the total counts both.
    assert pi.agents[0].usage[:2] == ((0, 1, 4445, 0, 4442), (0, 3, 12515, 4442, 8072))
    claude = import_file(SHARED / "claude-code/pai-agent-dee347d2.jsonl").agents[0].usage
    assert claude[:2] == ((0, 0, 27218, 0, 27216), (0, 4, 30032, 27216, 2815))
    assert pi.report.repaired == {"records glued on one line read apart": 1}
    assert "lines that are not JSON" not in pi.report.skipped


@pytest.mark.parametrize("name", ["mini-swe-agent-synthetic.traj.json", "gemini-cli-synthetic.json",
                                  pytest.param("openhands-synthetic.jsonl", marks=pytest.mark.slow)])  # 0.8 s: in CI
def test_every_key_of_the_json_fixtures_dropped_or_retyped(name, tmp_path):
    """Each key of each object in a fixture dropped, then set to a number: a
    ``HistoryError`` or histories valid for every provider, never another exception."""
    from test_importers import every_key_dropped_or_retyped, import_is_valid_or_refused

    path = tmp_path / name
    cases = 0
    for mutated in every_key_dropped_or_retyped((DATA / name).read_text()):
        path.write_text(mutated)
        import_is_valid_or_refused(path)
        cases += 1
    assert cases > 60


def test_every_cut_of_the_aider_fixture_imports(tmp_path):
    """The file cut after any line (aider appends as it runs): a valid history."""
    from test_importers import import_is_valid_or_refused

    lines = (DATA / "aider-synthetic.chat.history.md").read_text().splitlines(keepends=True)
    path = tmp_path / ".aider.chat.history.md"
    for end in range(2, len(lines) + 1):
        path.write_text("".join(lines[:end]))
        assert import_is_valid_or_refused(path)


@pytest.mark.parametrize("name", ["openhands-synthetic.jsonl", "mini-swe-agent-synthetic.traj.json", "gemini-cli-synthetic.json",
                                  "aider-synthetic.chat.history.md"])
def test_imports_are_deterministic_with_unique_ids(name):
    """The same file imports to the same messages, ids included (a workspace import is
    keyed by them), and no two messages share an id."""
    first, second = import_file(DATA / name), import_file(DATA / name)
    assert first.agents == second.agents
    ids = [m.id for agent in first.agents for m in agent.messages]
    assert len(ids) == len(set(ids))


def test_openhands_events_without_responses_errors_and_one_instance_as_json(tmp_path):
    instance = json.loads((DATA / "openhands-synthetic.jsonl").read_text())
    run = {"function_name": "execute_bash", "tool_call_id": "toolu_09"}  # no model_response recorded
    events = [
        {"id": 0, "source": "user", "observation": "recall", "content": "context before anything"},
        "not an event",
        {"id": 1, "source": "user", "action": "message", "args": {"content": "Run the tests."}},
        {"id": 2, "source": "agent", "action": "message", "args": {"content": "Running them now."}},
        {"id": 3, "source": "agent", "action": "run", "args": {"command": "pytest -q", "thought": "Tests first."}, "tool_call_metadata": run},
        {"id": 4, "source": "agent", "observation": "error", "content": "pytest: not found", "tool_call_metadata": run},
    ]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(events))
    session = import_file(path)
    user, said, call, result = session.messages
    assert (user.role, user.text, said.role, said.text) == ("user", "Run the tests.", "assistant", "Running them now.")
    assert call.content == (Text("Tests first."), ToolCall("toolu_09", "execute_bash", {"command": "pytest -q"}))
    assert result.tool_results[0].is_error and result.tool_results[0].text == "pytest: not found"
    assert session.report.skipped == {"recall events before any message": 1, "history entries that are not events": 1}
    assert session.report.assumed == ("actions without their model response: the call is rebuilt from the action's arguments",)
    (tmp_path / "one.json").write_text(json.dumps(instance))
    one = import_file(tmp_path / "one.json")
    assert one.report.format == "openhands" and one.title == one.agents[0].name == "acme__app-17"
    assert [m.text for m in one.messages] == [m.text for m in import_file(DATA / "openhands-synthetic.jsonl").messages]


def test_mini_swe_agent_without_an_exit_status_and_with_stray_entries(tmp_path):
    document = json.loads((DATA / "mini-swe-agent-synthetic.traj.json").read_text())
    del document["messages"][-1]["extra"]
    document["messages"].insert(2, "stray")
    path = tmp_path / "t.traj.json"
    path.write_text(json.dumps(document))
    session = import_file(path)
    assert session.agents[0].name == "main" and session.report.skipped == {"messages that are not objects": 1}
    assert session.messages[-1].tool_results[0].text.startswith("[mini-swe-agent exit]\ndiff --git")


def test_a_gemini_contents_file_keeps_an_image_given_by_uri(tmp_path):
    path = tmp_path / "contents.json"
    path.write_text(json.dumps({"contents": [{"role": "user", "parts": [
        {"text": "what is this?"}, {"fileData": {"mimeType": "image/png", "fileUri": "gs://b/shot.png"}},
        {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/paper.pdf"}}]}]}))
    blocks = import_file(path).messages[0].content
    assert blocks[1] == glyphpack.Image("image/png", ref="gs://b/shot.png")
    assert blocks[2].kind == "gemini-part"  # not an image: kept as it came, never sent


def test_codex_custom_tool_calls_keep_their_body_and_output(tmp_path):
    """A Codex ``custom_tool_call`` (apply_patch) carries its body as free text, not JSON
    arguments: it must arrive whole, paired with its output (it once imported as ``{}``)."""
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** End Patch\n"
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "bump x"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "a one-line patch"}], "encrypted_content": "gAAA"},
        {"type": "function_call", "name": "shell", "arguments": "{\"command\": [\"cat\", \"a.py\"]}", "call_id": "call_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "x = 1\n"},
        {"type": "custom_tool_call", "name": "apply_patch", "input": patch, "call_id": "call_2", "status": "completed"},
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Success. Updated the following files:\nM a.py\n"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x is 2 now"}]},
    ]
    lines = [{"timestamp": "2025-12-28T12:18:30.533Z", "type": "session_meta", "payload": {"id": "s1", "cwd": "/p", "originator": "codex_cli_rs"}}]
    lines += [{"timestamp": "2025-12-28T12:18:31.000Z", "type": "response_item", "payload": item} for item in items]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    messages = import_file(path).messages
    calls = {c.id: c for m in messages for c in m.tool_calls}
    results = {r.call_id: r.text for m in messages for r in m.tool_results}
    assert calls["call_1"].name == "shell" and calls["call_1"].arguments == {"command": ["cat", "a.py"]}
    assert calls["call_2"].name == "apply_patch" and calls["call_2"].arguments == {"input": patch}
    assert results == {"call_1": "x = 1\n", "call_2": "Success. Updated the following files:\nM a.py\n"}
    assert any(isinstance(b, Thinking) and b.text == "a one-line patch" for m in messages for b in m.content)
    validate_history(messages, allow_pending=False)


def test_a_codex_output_written_after_the_next_turn_began_answers_its_call_in_place(tmp_path):
    """Codex runs calls in parallel and writes each output when it ends: a custom tool's
    output came after another call's and a search (the next answer begun), and was kept
    as user text beside an error stand-in for its own call. A later sync of a file still
    being written puts it in the stand-in's place."""
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list"}]},
        {"type": "custom_tool_call", "name": "shell", "input": "ls", "call_id": "call-1", "status": "completed"},
        {"type": "function_call", "name": "shell", "arguments": "{\"command\": [\"pwd\"]}", "call_id": "call-2"},
        {"type": "function_call_output", "call_id": "call-2", "output": "/p\n"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "pwd is /p; waiting on ls"}]},
        {"type": "custom_tool_call_output", "call_id": "call-1", "output": "a.txt\nb.txt\n"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "two files"}]},
    ]
    lines = [{"timestamp": "2025-12-28T12:18:30.533Z", "type": "session_meta", "payload": {"id": "s1", "cwd": "/p", "originator": "codex_cli_rs"}}]
    lines += [{"timestamp": "2025-12-28T12:18:31.000Z", "type": "response_item", "payload": item} for item in items]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines[:5]) + "\n")  # before call-1's output is written
    workspace = glyphpack.Workspace(tmp_path / "ws")
    assert workspace.sync_session(import_file(path), "s")[0] == "new"
    assert [r.text for m in workspace.load("s", "main").messages for r in m.tool_results][-1].startswith("[no result")
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    session = import_file(path)
    results = {r.call_id: (r.text, r.is_error) for m in session.messages for r in m.tool_results}
    assert results == {"call-1": ("a.txt\nb.txt\n", False), "call-2": ("/p\n", False)}
    assert not any("which is not in this history" in m.text for m in session.messages)
    assert session.report.repaired == {"tool results written after their call's turn put in place of the stand-in": 1}
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "tool", "assistant", "assistant"]
    validate_history(session.messages, allow_pending=False)
    assert workspace.sync_session(session, "s")[0] == "appended"  # the stand-in gives way to the output
    assert {r.call_id: r.text for m in workspace.load("s", "main").messages for r in m.tool_results}["call-1"] == "a.txt\nb.txt\n"
    workspace.close()


def test_a_gemini_cli_recording_keeps_every_part_and_says_what_it_left_out():
    """``gemini-cli-recording-synthetic.json`` (written from the recording's schema):
    parts of every kind in a user message, thought summaries of every shape, calls with
    results inside them (an error, a cancelled one with no id, one still pending, one
    without a name), a text-only answer split in two, and lines never sent."""
    session = import_file(DATA / "gemini-cli-recording-synthetic.json")
    report = session.report
    assert report.format == "gemini-cli" and session.title == "Why does the build fail? and see the log"
    assert report.skipped == {
        "compression messages": 1, "content parts that are neither text nor images": 1, "malformed tool calls": 1,
        "messages that are not objects": 1, "warning lines shown to the user, never sent to the model": 1,
    }
    assert report.repaired == {"unanswered tool calls given an error result": 1}
    user, answer, results, stand_in, final = session.messages
    assert (user.id, answer.id, final.id) == ("u1", "g1", "g2")
    assert [b.text if isinstance(b, Text) else b.media_type for b in user.content] == ["Why does the build fail?", "image/png", "and see the log"]
    thinking, said, *calls = answer.content
    assert isinstance(thinking, Thinking) and thinking.text == "Reading the log: The error is in CI.\nOnly a subject\nOnly a description"
    assert said == Text("Let me look.")
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("read-1", "read_file", {"path": "ci.log"}), ("shell-1", "run_shell_command", {"input": "ls -la"}),
        ("gemini-cli-call-3-2", "glob", {"pattern": "*.py"}), ("pending-1", "write_file", {"path": "fix.py"}),
    ]
    assert [(r.call_id, r.text, r.is_error) for r in results.tool_results] == [
        ("read-1", "error: missing dep", False), ("shell-1", "permission denied\n(stderr shown above)", True),
        ("gemini-cli-call-3-2", "a.py", True),
    ]
    assert results.id == "g1-results" and stand_in.tool_results[0].call_id == "pending-1" and stand_in.tool_results[0].is_error
    assert [b.text for b in final.content] == ["The dependency is missing.", "Add it to requirements.txt."]  # one turn, split
    assert session.agents[0].usage == (Usage(0, 1, 1200, 300, 0),)  # the empty answer's zero counts calibrate nothing


def test_a_copilot_cli_event_log_keeps_every_message_and_counts_the_bookkeeping():
    """``copilot-cli-synthetic.jsonl`` (written from the event schema the real file
    shows): two system messages, the user's words as typed, reasoning, calls with JSON
    and string arguments, a failed call, a result and requests without a call id, a
    notification the CLI hands the model, and events that are bookkeeping."""
    session = import_file(DATA / "copilot-cli-synthetic.jsonl")
    report = session.report
    assert report.format == "copilot-cli" and session.title == "Fix the flaky test"
    assert report.skipped == {
        "assistant.turn_end events (no message)": 1, "hook.start events (no message)": 1, "malformed tool calls": 2,
        "session.start events (no message)": 1, "user.message events (no message)": 1,
    }
    assert report.repaired == {"tool results without an open call kept as user text": 1}
    assert [(m.role, m.id, m.text) for m in session.messages if m.role in ("system", "user")] == [
        ("system", "e2", "You are the GitHub Copilot CLI."), ("system", "e2b", "A second system message, kept where it came."),
        ("user", "e3", "  Fix the\nflaky test  "), ("user", "e6-unpaired", "[tool result without a call id]\norphan"),
        ("user", "e9", "<system_notification>shell 3 finished</system_notification>"),
    ]
    asked = session.messages[3]
    assert isinstance(asked.content[0], Thinking) and asked.content[0].text == "Run it first."
    assert [(c.id, c.name, c.arguments) for c in asked.tool_calls] == [("t1", "bash", {"command": "pytest -x"}), ("t2", "view", {"path": "test_x.py"})]
    assert [(r.call_id, r.text, r.is_error) for r in session.messages[4].tool_results] == [("t1", "1 failed", False), ("t2", "no such file", True)]
    assert session.messages[-1].text == "Fixed: the test now waits." and session.agents[0].usage == ()


def _raw_times(path: Path) -> dict[str, float]:
    """Each entry's id and its own timestamp, read from the raw file with json and
    datetime alone (Gemini CLI's messages, Copilot CLI's events)."""
    import datetime

    if path.suffix == ".json":
        entries = [e for e in json.loads(path.read_text(encoding="utf-8"))["messages"] if isinstance(e, dict)]
    else:
        entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {str(e["id"]): datetime.datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()
            for e in entries if isinstance(e.get("timestamp"), str) and e.get("id")}


@pytest.mark.parametrize("name, title, timed_messages", [
    ("entirecli-gemini-9c53780d06b7-0.json", None, 10),
    ("agentv-269e1b9e5502-0.jsonl", None, 110),
    ("gemini-cli-recording-synthetic.json", "Why does the build fail? and see the log", 1),
    ("copilot-cli-synthetic.jsonl", "Fix the flaky test", 0),
])
def test_gemini_and_copilot_sessions_keep_each_messages_own_time_one_agent_and_a_title(name, title, timed_messages):
    """Every message (a call's results too) carries its entry's own time; the one agent
    is ``main``; the title is the file's summary, else the first thing the user typed."""
    path = DATA / name
    session = import_file(path)
    raw = _raw_times(path)
    assert [a.name for a in session.agents] == ["main"]
    timed = [m for m in session.messages if m.id.removesuffix("-results") in raw]
    assert len(timed) >= timed_messages and all(m.time == raw[m.id.removesuffix("-results")] for m in timed)
    assert {m.id for m in timed} >= {m.id for m in session.messages if m.time is not None}
    first_typed = next(m.text for m in session.messages if m.role == "user" and not m.text.startswith("<"))
    assert session.title == (title or title_from(first_typed))


def test_gemini_cli_and_copilot_cli_are_told_from_lookalikes():
    """What makes a file each harness's, both sides of each rule: a Gemini CLI recording
    names its session or project and holds a user or model message; a Copilot CLI log
    holds a conversation event, or starts a session written by ``copilot-agent``."""
    from glyphpack._importers import copilot_cli, gemini_cli

    said = [{"type": "user", "content": "hi"}]
    for document in ({"sessionId": "s", "messages": said}, {"projectHash": "p", "messages": said},
                     {"sessionId": "s", "messages": [{"type": "gemini", "content": "hello"}]}):
        assert gemini_cli.detect(document), document
    for document in ({"messages": said}, {"sessionId": "s", "messages": [{"type": "info", "content": "x"}]},
                     {"sessionId": "s", "messages": ["user"]}, {"sessionId": "s", "messages": {}}, [said]):
        assert not gemini_cli.detect(document), document
    for kind in ("user.message", "assistant.message", "tool.execution_complete", "system.message", "system.notification"):
        assert copilot_cli.detect([{"type": kind, "data": {}}]), kind
    assert copilot_cli.detect([{"type": "session.start", "data": {"producer": "copilot-agent"}}])
    for records in ([{"type": "session.start", "data": {"producer": "another-agent"}}], [{"type": "hook.start", "data": {}}],
                    [{"type": "user.message", "data": "text"}], [{"type": ["user.message"], "data": {}}], []):
        assert not copilot_cli.detect(records), records


def test_a_copilot_cli_result_in_every_shape_it_is_written():
    from glyphpack._importers.copilot_cli import _result

    def text(event):
        result = _result(event)
        return result.text, result.is_error

    assert text({"toolCallId": "t", "success": True, "result": {"content": "out"}}) == ("out", False)
    assert text({"toolCallId": "t", "success": True, "result": "plain"}) == ("plain", False)  # not an object: itself
    assert text({"toolCallId": "t", "success": True, "result": {"content": 42}}) == ("42", False)
    assert text({"toolCallId": "t", "success": True, "result": {"content": None}}) == ("", False)
    assert text({"toolCallId": "t", "success": True}) == ("", False)
    assert text({"toolCallId": "t", "success": False, "error": {"message": "boom", "content": "not this"}}) == ("boom", True)
    assert text({"toolCallId": "t", "result": {"content": "no success field"}}) == ("no success field", False)
    assert _result({"toolCallId": "", "result": {"content": "x"}}) == glyphpack.ToolResult("", (Text("x"),))  # repair keeps it as user text
    assert _result({"toolCallId": 7, "result": {}}).call_id == ""


def test_an_openhands_event_list_keeps_times_fallback_texts_recall_events_and_a_rebuilt_call(tmp_path):
    """A conversation's events as one JSON list: each message keeps its event's time; a
    message action without ``args.content`` takes its ``message``; a recall event is
    kept unsent on the message before it; an action whose model response is missing
    gets its call rebuilt from its arguments (the thought as text); a response's cached
    prompt tokens are read; the one agent is ``main``."""
    from glyphpack._importers.openhands import _clean

    events = [
        {"id": 0, "timestamp": "2026-03-01T10:00:00", "source": "agent", "action": "system", "args": {}, "message": "You are OpenHands."},
        {"id": 1, "timestamp": "2026-03-01T10:00:01", "source": "user", "action": "message", "args": {}, "message": "Fix the bug"},
        {"id": 2, "timestamp": "2026-03-01T10:00:02", "source": "agent", "action": "recall", "args": {"query": "Fix the bug"}},
        {"id": 3, "timestamp": "2026-03-01T10:00:03", "source": "agent", "action": "run", "args": {"command": "ls", "thought": "Look first."},
         "tool_call_metadata": {"tool_call_id": "c1", "function_name": "execute_bash", "model_response": {"id": "r1", "usage": {"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 400}}}}},
        {"id": 4, "timestamp": "2026-03-01T10:00:04", "source": "agent", "observation": "run", "content": "a.py",
         "tool_call_metadata": {"tool_call_id": "c1", "function_name": "execute_bash"}},
        {"id": 5, "timestamp": "2026-03-01T10:00:05", "source": "agent", "action": "message", "args": {"content": "Done."}, "message": "not this"},
    ]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(events))
    session = import_file(path)
    (agent,) = session.agents
    assert agent.name == "main" and session.title == "Fix the bug"
    stamps = {f"main-{e['id']}": datetime.datetime.fromisoformat(e["timestamp"]).replace(tzinfo=datetime.timezone.utc).timestamp() for e in events}
    assert [(m.role, m.id, m.time) for m in agent.messages] == [(m.role, m.id, stamps[m.id]) for m in agent.messages]
    assert [(m.role, m.id) for m in agent.messages] == [("system", "main-0"), ("user", "main-1"), ("assistant", "main-3"), ("tool", "main-4"), ("assistant", "main-5")]
    assert agent.messages[0].text == "You are OpenHands." and agent.messages[-1].text == "Done."
    kept = agent.messages[1].content[-1]
    assert isinstance(kept, Opaque) and kept.kind == "openhands-recall" and kept.payload["id"] == 2
    thought, call = agent.messages[2].content
    assert thought == Text("Look first.") and (call.id, call.name, call.arguments) == ("c1", "execute_bash", {"command": "ls"})
    assert [(u.tokens, u.cache_read) for u in agent.usage] == [(900, 400)]
    assert [_clean(n) for n in ("django__django-123", "astropy/astropy#7 ", "...", "")] == ["django__django-123", "astropy-astropy-7", "instance", "instance"]


CLINE_TASK = DATA / "cline-task" / "1767001000000"


def _cline_requests(folder: Path) -> list[tuple[float, float, int, int, int]]:
    """Per request in ``ui_messages.json``, read with json alone: (sent, answer began,
    tokensIn, cacheWrites, cacheReads), times in seconds."""
    shown = json.loads((folder / "ui_messages.json").read_text(encoding="utf-8"))
    out = []
    for n, entry in enumerate(shown):
        if entry.get("say") == "api_req_started":
            counts = json.loads(entry["text"])
            began = next(e["ts"] for e in shown[n + 1:] if e.get("say") != "api_req_started")
            out.append((entry["ts"] / 1000, began / 1000, counts["tokensIn"], counts["cacheWrites"], counts["cacheReads"]))
    return out


def test_a_cline_task_reads_each_result_from_its_text_block_and_its_times_and_counts_from_what_it_showed():
    """Cline answers a call with a text block (``[read_file for 'x'] Result:``, or ``Tool
    [name] was not executed``), not a ``tool_result``: the plain Anthropic reader gave
    every such call a stand-in error (37 of 38 on a real task) and sent the real output
    as user text. Each is now its call's result; a result block with no call open stays
    text; the times and measured input are the paired ``api_req_started`` entries'."""
    session = import_file(CLINE_TASK / "api_conversation_history.json")
    assert session.report.format == "cline" and session.title == "Add a --verbose flag to cli.py"
    assert session.report.repaired == {"tool results read from their text blocks": 3, "unanswered tool calls given an error result": 1}
    messages = session.messages
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user", "assistant", "tool", "user", "assistant", "tool", "user", "assistant", "tool"]
    results = [(r.call_id, r.is_error, r.text.split("\n")[0]) for m in messages for r in m.tool_results]
    assert results == [
        ("toolu_c1", False, "[read_file for 'cli.py'] Result:"),
        ("toolu_c2", True, "Tool [read_file] was not executed because a tool has already been used in this message. "
                           "Only one tool may be used per message. You must assess the first tool's result before proceeding to use the next tool."),
        ("toolu_c3", True, "[replace_in_file for 'cli.py'] Result:"),
        ("toolu_c4", False, "verbose on"),
        ("toolu_c5", True, "[no result: the session ended this turn before the tool returned]"),
    ]
    assert messages[5].tool_results[0].text.endswith("<error>\nThe SEARCH block does not match.\n</error>")
    assert messages[6].text.startswith("[read_file for 'cli.py'] Result:\na result block with no call open")
    assert len(messages[9].images) == 1 and messages[9].text.startswith("[TASK RESUMPTION]")
    assert isinstance(messages[1].content[0], Thinking) and messages[1].content[0].signature == "c2lnLTE="
    requests = _cline_requests(CLINE_TASK)
    answers = [n for n, m in enumerate(messages) if m.role == "assistant"]
    assert [messages[n].time for n in answers] == [began for _, began, *_ in requests]
    asked = [next(m for m in messages[:n][::-1] if m.role == "user") for n in answers]
    assert [m.time for m in asked] == [sent for sent, *_ in requests]
    assert session.agents[0].usage == tuple(Usage(0, n, fresh + written + read, read, written)
                                             for n, (_, _, fresh, written, read) in zip(answers, requests))
    assert session.agents[0].model == "claude-opus-4-5-20251101"  # the newest answer that names one


def test_a_cline_history_alone_counts_from_its_answers_metrics_and_names_its_model_from_the_task_metadata(tmp_path):
    history = json.loads((CLINE_TASK / "api_conversation_history.json").read_text(encoding="utf-8"))
    (tmp_path / "api_conversation_history.json").write_text(json.dumps(history))
    alone = import_file(tmp_path / "api_conversation_history.json")
    assert all(m.time is None for m in alone.messages) and alone.report.assumed == ()
    answers = [n for n, m in enumerate(alone.messages) if m.role == "assistant"]
    metrics = [m["metrics"]["tokens"] for m in history if m["role"] == "assistant"]
    assert alone.agents[0].usage == tuple(Usage(0, n, t["prompt"] + t["cached"], t["cached"]) for n, t in zip(answers, metrics))
    for message in history:
        message.pop("modelInfo", None)
    (tmp_path / "api_conversation_history.json").write_text(json.dumps(history))
    assert import_file(tmp_path / "api_conversation_history.json").agents[0].model is None
    (tmp_path / "task_metadata.json").write_bytes((CLINE_TASK / "task_metadata.json").read_bytes())
    assert import_file(tmp_path / "api_conversation_history.json").agents[0].model == "claude-sonnet-4-5-20250929"
    shown = json.loads((CLINE_TASK / "ui_messages.json").read_text(encoding="utf-8"))
    (tmp_path / "ui_messages.json").write_text(json.dumps([e for e in shown if e["ts"] != shown[-4]["ts"]]))  # a request lost
    uneven = import_file(tmp_path / "api_conversation_history.json")
    assert uneven.report.assumed == ("times and counts not taken from ui_messages.json: 3 requests there for 4 answers here",)
    assert all(m.time is None for m in uneven.messages) and uneven.agents[0].usage == alone.agents[0].usage


def test_a_roo_code_task_keeps_each_messages_time_and_its_condensing_as_a_compaction():
    path = DATA / "roo-code-synthetic.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    session = import_file(path)
    assert session.report.format == "cline" and session.title == "Rename foo to bar everywhere"
    (agent,) = session.agents
    summary = next(n for n, m in enumerate(raw) if m.get("isSummary"))
    assert agent.compactions == (f"cline-{summary}",) and session.report.compactions == 1
    own = {f"cline-{n}": m["ts"] / 1000 for n, m in enumerate(raw)}
    assert all(m.time == own[m.id.split(".")[0]] for m in agent.messages)
    assert [(r.call_id, r.text, r.is_error) for m in agent.messages for r in m.tool_results] == [
        ("call_r1", "Found 2 results.\n\n# app.py\n  1 | foo = 1", False), ("call_r2", "Changes applied.", False)]
    assert agent.messages[-1].text == "Renamed foo to bar in app.py." and session.report.repaired == {}


def test_a_plain_anthropic_list_is_not_taken_for_a_cline_task_nor_a_cline_task_for_anything_else(tmp_path):
    from glyphpack._importers import cline

    history = json.loads((CLINE_TASK / "api_conversation_history.json").read_text(encoding="utf-8"))
    plain = [{"role": m["role"], "content": m["content"]} for m in history[1:]]
    assert not cline.detect(plain) and cline.detect(history) and cline.detect(plain[:0] + history[:1])
    assert cline.detect([{"role": "user", "content": "hi", "ts": 1}]) and not cline.detect([{"role": "user", "content": "hi", "ts": True}])
    assert not cline.detect([{"role": "system", "content": "x", "ts": 1}]) and not cline.detect([{"role": "user", "ts": 1}])
    assert not cline.detect([]) and not cline.detect({"messages": history}) and not cline.detect([*history, "text"])
    (tmp_path / "plain.json").write_text(json.dumps(plain))
    assert import_file(tmp_path / "plain.json").report.format == "anthropic"
    with pytest.raises(HistoryError, match="is not in the cline format: its JSON does not have that format's shape"):
        import_file(tmp_path / "plain.json", format="cline")


def goose_database(folder: Path) -> Path:
    """A Goose ``sessions.db`` built from ``goose-sessions.sql`` (two sessions)."""
    import sqlite3

    path = folder / "sessions.db"
    with sqlite3.connect(path) as connection:
        connection.executescript((DATA / "goose-sessions.sql").read_text(encoding="utf-8"))
    connection.close()
    return path


def _goose_rows(path: Path) -> dict[str, list[tuple[str, str, list, dict, int]]]:
    """Each session's messages read with sqlite3 and json alone: (message id, role,
    content, metadata, created)."""
    import sqlite3

    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT session_id, message_id, role, content_json, metadata_json, created_timestamp FROM messages ORDER BY id").fetchall()
    connection.close()
    out: dict[str, list[tuple[str, str, list, dict, int]]] = {}
    for session, message, role, content, metadata, created in rows:
        out.setdefault(session, []).append((message, role, json.loads(content), json.loads(metadata or "{}"), created))
    return out


def test_a_goose_database_gives_each_session_with_its_calls_results_times_and_compaction(tmp_path):
    path = goose_database(tmp_path)
    sessions = glyphpack.import_sessions(path)
    assert [name for name, _ in sessions] == ["20261201_1", "20261202_1"]
    raw = _goose_rows(path)
    for name, session in sessions:
        rows = raw[name]
        calls = {c["id"]: c["toolCall"]["value"]["name"] for _, _, content, _, _ in rows for c in content
                 if c["type"] in ("toolRequest", "frontendToolRequest") and c["toolCall"]["status"] == "success"}
        answered = {c["id"] for _, _, content, _, _ in rows for c in content if c["type"] == "toolResponse"}
        assert {c.id: c.name for m in session.messages for c in m.tool_calls} == calls
        assert {r.call_id for m in session.messages for r in m.tool_results} == answered & set(calls)
        created = {message: float(at) for message, *_, at in rows}
        assert all(m.time == created[m.id.removesuffix("-results")] for m in session.messages)
    (_, first), (_, second) = sessions
    assert first.title == "Failing cargo test" and second.title == "Take a screenshot of the page"
    assert first.agents[0].model == "claude-sonnet-4-5" and second.agents[0].model is None  # its model config is not JSON
    # what Goose's compaction put away stays, and its summary is where the compaction starts
    hidden = [m for m, _, _, meta, _ in raw["20261201_1"] if meta.get("agentVisible") is False]
    assert hidden == ["m1", "m2", "m3", "m4", "m5"] and first.agents[0].compactions == ("m6",) and first.report.compactions == 1
    assert [(r.call_id, r.text, r.is_error) for m in first.messages for r in m.tool_results] == [
        ("toolu_g1", "test result: FAILED. 41 passed; 1 failed", False), ("toolu_g2", "-32603: File not found: src/lib.rs", True),
        ("toolu_g4", "test result: ok. 42 passed\n0 failed", False), ("toolu_g6", "error: could not compile", True)]
    assert first.report.skipped == {
        "messages with nothing the model reads": 1, "systemNotification items shown to the user, never sent to the model": 1,
        "tool calls Goose could not read": 1, "toolConfirmationRequest items shown to the user, never sent to the model": 1}
    assert first.messages[1].content == (Thinking("Run the suite first.", "c2ln"), Text("Running the suite."),
                                         ToolCall("toolu_g1", "developer__shell", {"command": "cargo test"}))
    assert first.messages[3].content == (ToolCall("toolu_g2", "developer__text_editor", {"command": "view", "path": "src/lib.rs"}),)
    assert second.messages[0].images[0].media_type == "image/png" and second.report.skipped == {"mystery content items": 1}
    assert second.messages[1].content == (ToolCall("fe_1", "screenshot", {}),)
    shot = second.messages[2].tool_results[0]
    assert [type(b).__name__ for b in shot.content] == ["Image", "Text"] and shot.content[1].text == "<html>page</html>"
    assert second.messages[3].content == (RedactedThinking("ZW5j"), Text("Here it is."))
    with pytest.raises(HistoryError, match=r"sessions.db holds 2 sessions, not one: import_sessions reads each"):
        import_file(path)


def test_goose_before_its_database_wrote_a_jsonl_file_per_session():
    session = import_file(DATA / "goose-legacy-synthetic.jsonl")
    assert session.report.format == "goose" and session.title == "Debug memory leak in worker"
    assert [(m.role, m.time) for m in session.messages] == [
        ("user", 1747178328.0), ("assistant", 1747178334.0), ("tool", 1747178334.0), ("assistant", 1747178340.0)]
    assert [(r.call_id, r.text) for r in session.messages[2].tool_results] == [("toolu_l1", "dev 1234 2.5 8.5 node worker.js")]
    assert [(name, s.messages) for name, s in glyphpack.import_sessions(DATA / "goose-legacy-synthetic.jsonl")] == [
        ("goose-legacy-synthetic", session.messages)]


def _folder_state(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_a_database_is_read_without_writing_beside_it_its_newest_writes_in_the_wal_included(tmp_path):
    """SQLite's mode=ro alone creates -shm/-wal files next to a WAL database: in the user's
    folder, or in a read-only one when the reader is root. The newest rows, still in the
    -wal file the harness left, are read too."""
    import sqlite3

    (tmp_path / "plain").mkdir()
    plain = goose_database(tmp_path / "plain")
    with sqlite3.connect(plain) as closed_cleanly:  # in WAL mode, as Crush and Goose leave theirs, with no -wal left
        closed_cleanly.execute("PRAGMA journal_mode=WAL")
    closed_cleanly.close()
    assert sorted(p.name for p in plain.parent.iterdir()) == ["sessions.db"]
    before = _folder_state(plain.parent)
    assert [name for name, _ in glyphpack.import_sessions(plain)] == ["20261201_1", "20261202_1"]
    assert _folder_state(plain.parent) == before
    # a harness mid-session: WAL mode, a checkpoint never run, the connection left open while we read
    (tmp_path / "wal").mkdir()
    path = goose_database(tmp_path / "wal")
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE sessions SET description = 'renamed in the WAL' WHERE id = '20261202_1'")
    writer.commit()
    assert (tmp_path / "wal" / "sessions.db-wal").stat().st_size > 0
    before = _folder_state(path.parent)
    sessions = dict(glyphpack.import_sessions(path))
    assert sessions["20261202_1"].title == "renamed in the WAL"
    assert _folder_state(path.parent) == before
    writer.close()


def test_a_database_goose_did_not_write_is_refused_naming_the_file(tmp_path):
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE notes (id INTEGER)")
    connection.close()
    with pytest.raises(HistoryError, match=rf"^{path}: not a Goose sessions database \(no such table: sessions\)$"):
        glyphpack.import_sessions(path)


def test_goose_jsonl_is_told_from_other_harnesses_by_its_metadata_line_or_its_content_types():
    from glyphpack._importers import goose

    request = {"type": "toolRequest", "id": "t", "toolCall": {"status": "success", "value": {"name": "x", "arguments": {}}}}
    assert goose.detect([{"working_dir": "/w", "description": "d"}]) and not goose.detect([{"working_dir": "/w", "role": "user"}])
    assert goose.detect([{"role": "assistant", "created": 1, "content": [request]}])
    assert goose.detect([{"role": "user", "created": 1, "content": [{"type": "toolResponse", "id": "t"}]}])
    assert not goose.detect([{"role": "assistant", "created": "1", "content": [request]}])
    assert not goose.detect([{"role": "assistant", "created": 1, "content": [{"type": "text", "text": "hi"}]}])
    assert not goose.detect([{"role": "assistant", "created": 1, "content": "hi"}]) and not goose.detect([])


def test_cline_results_in_a_string_message_or_beside_result_blocks_answer_their_calls(tmp_path):
    history = [
        {"role": "user", "content": "<task>\nList files\n</task>"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "list_files", "input": {"path": "."}}]},
        {"role": "user", "content": "[list_files for '.'] Result:\napp.py"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "b", "name": "read_file", "input": {"path": "app.py"}},
                                          {"type": "tool_use", "id": "c", "name": "read_file", "input": {"path": "b.py"}}]},
        {"role": "user", "content": [{"type": "text", "text": "[read_file for 'b.py'] Result:\nnot this one's"},
                                     {"type": "tool_result", "tool_use_id": "b", "content": "print(1)"},
                                     {"type": "text", "text": "[read_file for 'b.py'] Result:\nb = 2"}]},
    ]
    (tmp_path / "api_conversation_history.json").write_text(json.dumps(history))
    session = import_file(tmp_path / "api_conversation_history.json")
    assert session.report.format == "cline" and session.title == "List files"
    assert [(r.call_id, r.text) for m in session.messages for r in m.tool_results] == [
        ("a", "[list_files for '.'] Result:\napp.py"), ("c", "[read_file for 'b.py'] Result:\nnot this one's"), ("b", "print(1)")]
    assert session.messages[-1].role == "user" and session.messages[-1].text == "[read_file for 'b.py'] Result:\nb = 2"


def test_a_goose_database_with_odd_rows_keeps_what_it_can_and_counts_the_rest(tmp_path):
    import sqlite3

    path = goose_database(tmp_path)
    with sqlite3.connect(path) as connection:
        connection.execute("INSERT INTO sessions (id, description, working_dir, created_at) VALUES ('odd', 'Described only', '/w', '2026-12-03')")
        rows = [
            (None, "user", json.dumps([{"type": "text", "text": "go"}]), None),
            ("o2", "user", "{not json", None),
            ("o3", "assistant", json.dumps([{"type": "toolRequest", "id": "t1", "toolCall": {"status": "success", "value": {"name": "read", "arguments": {}}}},
                                            {"type": "toolRequest", "id": "t2", "toolCall": {"status": "success", "value": {"name": "blob", "arguments": "x"}}},
                                            {"type": "toolRequest", "id": "t3", "toolCall": {"status": "success", "value": {"arguments": {}}}}]), None),
            ("o4", "user", json.dumps([{"type": "toolResponse", "id": "t1", "toolResult": {"status": "error"}},
                                       {"type": "toolResponse", "id": "t2", "toolResult": {"status": "success", "value": {"content": [
                                           {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA"}}]}}},
                                       {"type": "toolResponse", "id": "t3", "toolResult": {"status": "success", "value": {"content": []}}}]), "not json"),
        ]
        connection.executemany("INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp, metadata_json) "
                               "VALUES (?, 'odd', ?, ?, 1764800000, ?)", rows)
    connection.close()
    name, odd = glyphpack.import_sessions(path)[-1]
    assert name == "odd" and odd.title == "Described only" and odd.report.skipped == {"messages whose content is not JSON": 1}
    assert odd.report.assumed == ("messages whose metadata is not JSON read as seen by the model",)
    first_id = next(m.id for m in odd.messages)
    assert first_id.startswith("goose-") and first_id[len("goose-"):].isdigit()
    assert [m.role for m in odd.messages] == ["user", "assistant", "tool"]
    assert [(c.id, c.name, c.arguments) for c in odd.messages[1].tool_calls] == [("t1", "read", {}), ("t2", "blob", {}), ("t3", "tool", {})]
    assert [(r.call_id, r.text, r.is_error) for r in odd.messages[2].tool_results] == [
        ("t1", "the tool failed", True), ("t2", "[resource file:///b.bin]", False), ("t3", "", False)]
    (_, first), _, _ = glyphpack.import_sessions(path)
    assert [m.role for m in first.messages] == ["user", "assistant", "tool", "assistant", "tool", "user", "assistant", "tool", "assistant"]


def test_a_goose_database_under_a_path_holding_uri_characters_is_read(tmp_path):
    """The database is opened read-only by URI: a folder named ``a?b#c`` was read as a
    query and a fragment, and the file was not found."""
    folder = tmp_path / "a?b#c"
    folder.mkdir()
    assert [name for name, _ in glyphpack.import_sessions(goose_database(folder))] == ["20261201_1", "20261202_1"]


def test_a_gemini_contents_file_in_either_key_spelling_reads_exactly(tmp_path):
    """Both key spellings (camelCase as the REST API writes, snake_case as the Python SDK
    dumps), calls without ids answered in order by name, an error response, bad image
    data kept as a note, a thought with its signature, and a part no reader knows."""
    png = base64.b64encode(b"\x89PNG fake").decode()
    contents = [
        {"role": "user", "parts": [{"text": "look"}, {"inline_data": {"mime_type": "image/jpeg", "data": png}},
                                   {"inlineData": {"data": "not base64!"}}]},
        {"role": "model", "parts": [
            {"text": "hmm", "thought": True, "thought_signature": "sig-t"},
            {"function_call": {"name": "ls", "args": {"d": "/"}}, "thoughtSignature": "sig-c"},
            {"functionCall": {"name": "ls", "args": "not a dict"}},
            {"functionCall": {"id": "own", "name": "cat"}}]},
        {"role": "user", "parts": [
            {"function_response": {"name": "ls", "response": {"output": "a b"}}},
            {"functionResponse": {"name": "ls", "response": {"error": "denied"}}},
            {"functionResponse": {"id": "own", "name": "cat", "response": {"output": "meow"}}},
            "stray", {"executableCode": {"code": "1"}}]},
    ]
    path = tmp_path / "contents.json"
    path.write_text(json.dumps({"systemInstruction": {"parts": [{"text": "be"}, {"text": "brief"}]}, "contents": contents}))
    session = import_file(path, format="gemini")
    system, user, model, results, after = session.messages
    assert system.role == "system" and system.text == "be brief"
    assert user.content[1] == glyphpack.Image("image/jpeg", base64.b64decode(png))
    assert user.content[2] == glyphpack.Text("[image image/png: its data was not valid base64]")
    assert session.report.repaired == {"images without valid data kept as a text stub": 1}
    assert model.role == "assistant" and model.content[0] == glyphpack.Thinking("hmm", "sig-t")
    assert [(c.id, c.name, c.arguments, c.signature) for c in model.tool_calls] == [
        ("gemini-1-1", "ls", {"d": "/"}, "sig-c"), ("gemini-1-2", "ls", {}, None), ("own", "cat", {}, None)]
    assert results.role == "tool"
    assert [(r.call_id, r.text, r.is_error) for r in results.tool_results] == [
        ("gemini-1-1", "a b", False), ("gemini-1-2", "denied", True), ("own", "meow", False)]
    assert after.role == "user" and after.content[0].kind == "gemini-part"
    assert [m.id for m in session.messages] == [f"gemini-{n}" for n in range(5)]


def test_a_gemini_contents_file_names_a_bad_content_and_keeps_nameless_calls(tmp_path):
    path = tmp_path / "contents.json"
    path.write_text(json.dumps({"contents": [{"role": "user", "parts": "text"}]}))
    with pytest.raises(HistoryError, match=r"contents.json: content 0: needs a role and a list of parts"):
        import_file(path, format="gemini")
    path.write_text(json.dumps({"contents": [
        {"role": "user", "parts": [{"text": "go"}, {"file_data": {"file_uri": "gs://b/a.png"}}]},
        {"role": "model", "parts": [{"functionCall": {"args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "other", "response": {"output": "x"}}}]}]}))
    session = import_file(path, format="gemini")
    assert session.messages[0].content[1] == glyphpack.Image("image/png", ref="gs://b/a.png")
    assert session.messages[1].tool_calls[0].name == "tool"
    # A response no open call of that name waits for pairs with nothing: its words stay
    # as user text, and the open call is answered with the missing-result note.
    assert session.messages[2].text == "[tool result without a call id]\nx"
    assert session.messages[3].tool_results[0].call_id == "gemini-1-0"
    assert session.report.repaired == {"tool results without an open call kept as user text": 1,
                                       "unanswered tool calls given an error result": 1}


@pytest.mark.parametrize(("document", "kind", "system"), [
    ({"history": [{"role": "user", "content": "hi"}], "system": [{"type": "text", "text": "be"}, "x", {"type": "text", "text": "brief"}]},
     "anthropic", "be brief"),
    ({"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}], "instructions": "be brief"}, "openai-responses", "be brief"),
    ({"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "systemInstruction": {"parts": [{"text": "be"}, "x", {"no": 1}]}}, "gemini", "be "),
    ({"messages": [{"role": "user", "content": "hi"}], "system": 5}, "anthropic", None),
    ({"messages": "not a list", "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}, "openai-responses", None),
])
def test_a_plain_file_finds_its_list_and_system_prompt_under_each_key(tmp_path, document, kind, system):
    """The keys a provider list sits under (messages, input, contents, history: the first
    that holds a list) and the system prompt in each API's shape, read or left out."""
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(document))
    session = import_file(path, format=kind)
    if system is None:
        assert [m.role for m in session.messages] == ["user"]
    else:
        assert [(m.role, m.text) for m in session.messages] == [("system", system), ("user", "hi")]
    assert [m.id for m in session.messages] == [f"{kind}-{n}" for n in range(len(session.messages))]


def test_a_plain_file_without_a_list_is_refused_by_name(tmp_path):
    path = tmp_path / "plain.json"
    path.write_text(json.dumps({"messages": {"role": "user"}}))
    with pytest.raises(HistoryError, match="plain.json"):
        import_file(path)
    path.write_text(json.dumps([{"type": "function_call"}, "x"]))
    with pytest.raises(HistoryError, match="plain.json"):
        import_file(path, format="openai-responses")


def test_a_swe_agent_trajectory_reads_exactly(tmp_path):
    """Each history entry one message: a tool message answers its ``tool_call_ids`` (or a
    lone ``tool_call_id``), ``agent`` splits the agents, a replayed call id is made
    unique in call and result, and what no API carries is counted by kind."""
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    history = [
        {"role": "system", "content": "You are SWE-agent.", "agent": "main"},
        {"role": "user", "content": [{"type": "text", "text": "Fix it."}]},
        {"role": "assistant", "content": "Looking.", "tool_calls": [call, {"id": "c2", "type": "function",
                                                                          "function": {"name": "open", "arguments": "{}"}}]},
        {"role": "tool", "content": "a.py", "tool_call_ids": ["c1"]},
        {"role": "tool", "content": "opened", "tool_call_id": "c2", "tool_call_ids": []},
        {"role": "tool", "content": "orphan"},
        "not an entry",
        {"role": "observation", "content": "x"},
        {"role": "assistant", "content": "Again.", "tool_calls": [{**call, "function": {"name": "bash", "arguments": '{"command": "pwd"}'}}]},
        {"role": "tool", "content": "/repo", "tool_call_ids": ["c1"]},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "sub task", "agent": "helper"},
        {"role": "assistant", "content": "done", "agent": "helper"},
    ]
    path = tmp_path / "run.traj"
    path.write_text(json.dumps({"info": {}, "history": history}))
    session = import_file(path)
    main_agent, helper = session.agents
    assert (main_agent.name, helper.name) == ("main", "helper")
    assert main_agent.messages == (
        glyphpack.Message("system", (Text("You are SWE-agent."),), id="swe-0"),
        glyphpack.Message("user", (Text("Fix it."),), id="swe-1"),
        glyphpack.Message("assistant", (Text("Looking."), ToolCall("c1", "bash", {"command": "ls"}), ToolCall("c2", "open", {})), id="swe-2"),
        glyphpack.Message("tool", (glyphpack.ToolResult("c1", (Text("a.py"),)), glyphpack.ToolResult("c2", (Text("opened"),))), id="swe-3"),
        glyphpack.Message("user", (Text("[tool result without a call id]\norphan"),), id="swe-3-unpaired"),
        glyphpack.Message("assistant", (Text("Again."), ToolCall("c1#2", "bash", {"command": "pwd"})), id="swe-8"),
        glyphpack.Message("tool", (glyphpack.ToolResult("c1#2", (Text("/repo"),)),), id="swe-9"),
    )
    assert helper.messages == (glyphpack.Message("user", (Text("sub task"),), id="swe-11"),
                               glyphpack.Message("assistant", (Text("done"),), id="swe-12"))
    report = session.report
    assert (report.format, report.messages, report.tool_calls, report.tool_results, report.made_unique) == ("swe-agent", 9, 3, 3, 1)
    assert report.skipped == {"history entries that are not objects": 1, "messages of role 'observation'": 1}
    assert report.repaired == {"tool results without an open call kept as user text": 1}
    assert session.title == "Fix it."
    for shape in ({"history": history}, {"history": "not a list", "info": {}}):  # neither a trajectory nor its info: not SWE-agent
        path.write_text(json.dumps(shape))
        with pytest.raises(HistoryError, match="is not in the swe-agent format: its JSON does not have that format's shape"):
            import_file(path, format="swe-agent")


def test_the_registry_refuses_each_misfit_by_name(tmp_path):
    from glyphpack._importers.registry import FORMATS

    listed = ", ".join(FORMATS)
    with pytest.raises(HistoryError) as refused:
        import_file(tmp_path / "a.json", format="no-such-format")
    assert str(refused.value) == f"unknown format 'no-such-format'; choose one of {listed}"
    with pytest.raises(HistoryError) as refused:
        import_file(tmp_path / "missing.json")
    assert str(refused.value) == f"cannot read {tmp_path / 'missing.json'}: No such file or directory"
    text = tmp_path / "notes.txt"
    text.write_text("plain words, no session\n")
    for forced in ("swe-agent", "openai-chat"):
        with pytest.raises(HistoryError) as refused:
            import_file(text, format=forced)
        assert str(refused.value) == f"{text} is not JSON, so it cannot be {forced}"
    with pytest.raises(HistoryError) as refused:
        import_file(text)
    assert str(refused.value) == f"{text}: no session format recognized (read: {listed}); pass --format to say which it is"
    anthropic = tmp_path / "anthropic.json"
    anthropic.write_text(json.dumps([{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                                     {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}]))
    with pytest.raises(HistoryError) as refused:
        import_file(anthropic, format="openai-chat")
    assert str(refused.value) == (f"{anthropic} is not in the openai-chat format: its messages have the anthropic shape; "
                                  "it reads as anthropic: pass --format anthropic, or leave --format out")
    with pytest.raises(HistoryError, match="message 1: unknown content block type 'tool_use'"):
        import_file(anthropic, format="glyphpack")  # glyphpack's own reader is tried on any shape, and says what it cannot read
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"neither": "a session"}))
    with pytest.raises(HistoryError) as refused:
        import_file(unknown)
    assert str(refused.value) == f"{unknown}: no session format recognized (read: {listed}); pass --format to say which it is"
    with pytest.raises(HistoryError) as refused:
        import_file(unknown, format="swe-agent")
    assert str(refused.value) == f"{unknown} is not in the swe-agent format: its JSON does not have that format's shape"


def test_the_registry_reads_a_byte_order_mark_a_one_record_file_and_text_without_records(tmp_path):
    plain = tmp_path / "bom.json"
    plain.write_bytes(b"\xef\xbb\xbf" + json.dumps([{"role": "user", "content": "hi"}]).encode())
    assert import_file(plain).report.format == "openai-chat"
    one = tmp_path / "one.jsonl"
    record = {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "only"}]}}
    one.write_text(json.dumps(record))  # the whole file is one JSON object: read as the JSONL it is
    session = import_file(one)
    assert session.report.format == "codex" and [m.text for m in session.messages] == ["only"]
    chat = tmp_path / "chat.md"
    chat.write_bytes(b"\xef\xbb\xbf" + (DATA / "aider-synthetic.chat.history.md").read_bytes())
    assert import_file(chat).report.format == "aider"
    assert import_file(chat).messages == import_file(DATA / "aider-synthetic.chat.history.md").messages
    assert import_file(chat, format="aider").messages == import_file(chat).messages  # forced: the same reading
    binary = tmp_path / "binary.log"
    binary.write_bytes(b"\xff\xfe not text \x80\n")  # neither records nor UTF-8: no format, said so (no decode error)
    with pytest.raises(HistoryError, match=r"binary\.log: no session format recognized"):
        import_file(binary)


@pytest.mark.parametrize("filler", [49, 50])
def test_jsonl_detection_reads_the_first_fifty_records(tmp_path, filler):
    """The format is told from the first 50 records: a Codex record at the 50th is found,
    one at the 51st is not (the file is then no format)."""
    record = {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}}
    path = tmp_path / "late.jsonl"
    path.write_text("".join(json.dumps({"filler": n}) + "\n" for n in range(filler)) + json.dumps(record) + "\n")
    if filler == 49:
        assert import_file(path).report.format == "codex"
    else:
        with pytest.raises(HistoryError, match="no session format recognized"):
            import_file(path)


def test_conversation_names_and_companion_files(tmp_path):
    from glyphpack._importers.registry import conversation_name, read_with_its_session

    assert conversation_name(Path("tasks/1712/api_conversation_history.json")) == "1712"
    assert conversation_name(Path("state/abc/events.jsonl")) == "abc"
    assert conversation_name(Path("api_conversation_history.json")) == "api_conversation_history"
    assert conversation_name(Path("runs/a.b.jsonl")) == "a"
    (tmp_path / "s1" / "subagents").mkdir(parents=True)
    (tmp_path / "s1.jsonl").write_text("")
    (tmp_path / "s2" / "subagents").mkdir(parents=True)
    assert read_with_its_session(tmp_path / "s1" / "subagents" / "agent-1.jsonl", set())
    assert not read_with_its_session(tmp_path / "s2" / "subagents" / "agent-1.jsonl", set())
    task = tmp_path / "task"
    files = {task / "api_conversation_history.json", task / "ui_messages.json", tmp_path / "other.json"}
    assert read_with_its_session(task / "ui_messages.json", files)
    assert not read_with_its_session(task / "api_conversation_history.json", files)
    assert not read_with_its_session(tmp_path / "other.json", files)
    assert read_with_its_session(task / "checkpoints" / "1.json", {task / "events.jsonl"})


def test_jsonl_records_reads_lines_as_harnesses_write_them_exactly():
    """Where each record is (line, line.second record), and each repair and skip counted."""
    from glyphpack._importers.base import Tally, jsonl_records

    tally = Tally()
    data = (b'\xef\xbb\xbf{"a": 1}\r\n\r\n{"b": 2} \t{"c": 3}\r\n[1, 2]\r\n{"d": 4}[5]\r\n{"trunc\r\n'
            b'\xff{"x":1}{"y":2}\r\n  \r\n{"e": "\xc3\xa9"}')
    assert list(jsonl_records(data, tally)) == [
        ("1", {"a": 1}), ("3", {"b": 2}), ("3.2", {"c": 3}), ("5", {"d": 4}), ("9", {"e": "é"})]
    assert dict(tally.skipped) == {"lines that are not JSON objects": 2, "lines that are not JSON": 2}
    assert dict(tally.repaired) == {"byte order marks removed": 1, "CRLF line ends read as LF": 1, "records glued on one line read apart": 2}
    plain = Tally()
    assert list(jsonl_records(b'{"a": 1}\n{"b": [1]}{"c": 2}x\n', plain)) == [("1", {"a": 1})]
    assert dict(plain.skipped) == {"lines that are not JSON": 1} and not plain.repaired
    assert list(jsonl_records(b'{"only": true}')) == [("1", {"only": True})]  # no tally given: none needed


def test_text_of_reads_every_shape_of_text_exactly():
    from glyphpack._importers.base import text_of

    assert text_of("plain") == "plain"
    assert text_of(None) == ""
    assert text_of(7) == "7" and text_of(True) == "true"
    assert text_of([{"type": "text", "text": "a"}, "b", 3, None, {"text": ""}, {"content": [{"output": "c"}]}]) == "a\nb\nc"
    assert text_of({"text": "t", "content": "not this"}) == "t"
    assert text_of({"content": "c", "output": "not this"}) == "c"
    assert text_of({"output": "o"}) == "o"
    assert text_of({"other": "ü"}) == '{"other": "ü"}'
    assert text_of({"when": datetime.date(2026, 12, 5)}) == '{"when": "2026-12-05"}'


def test_an_import_report_prints_each_count():
    from glyphpack._history.imported import ImportReport

    report = ImportReport(format="pi", messages=1200, tool_calls=3, tool_results=2, images=1, thinking=4,
                          agents=("main", "helper"), branches=2, compactions=1,
                          skipped={"b reason": 1500, "a reason": 1}, repaired={"fixed": 2}, made_unique=1001,
                          assumed=("one", "two"))
    assert report.lines() == [
        "format pi: 1,200 messages, 3 tool calls, 2 tool results, 1 images, 4 thinking blocks",
        "agents: main, helper; other branches: 2; compaction points: 1",
        "skipped: 1 a reason, 1,500 b reason",
        "repaired: 2 fixed",
        "made unique: 1,001 reused tool call ids",
        "assumed: one",
        "assumed: two",
    ]
    assert ImportReport(format="x").lines() == [
        "format x: 0 messages, 0 tool calls, 0 tool results, 0 images, 0 thinking blocks",
        "agents: -; other branches: 0; compaction points: 0",
    ]


def test_the_small_readers_of_base_exactly():
    from glyphpack._importers import base

    assert base.named_model(" claude-x ") == "claude-x"
    assert [base.named_model(v) for v in ("<synthetic>", "  ", "", 3, None)] == [None] * 5
    assert base.count_at({"a": {"b": 5}}, ("a", "b")) == 5
    assert [base.count_at(v, ("a", "b")) for v in ({"a": {"b": True}}, {"a": {"b": -1}}, {"a": {"b": 0}}, {"a": 3}, [])] == [0] * 5
    assert base.count_at(4, ()) == 4
    assert base.input_tokens({"i": 3, "c": 4, "x": 9, "n": "5"}, "i", "c", "n") == 7
    assert base.input_tokens([3], "i") == 0
    assert base.measured_usage(1, 2, {"i": 10, "d": {"r": 4}, "w": 2}, ("i",), ("d", "r"), ("w",)) == base.Usage(1, 2, 10, 4, 2)
    assert base.measured_usage(1, 2, {"i": 0, "d": {"r": 4}}, ("i",), ("d", "r")) is None
    assert base.measured_usage(0, 3, {"i": 6}, ("i",)) == base.Usage(0, 3, 6, 0, 0)
    tally = base.Tally()
    tally.skip("none", 0)
    tally.skip("two", 2)
    tally.assume("b")
    tally.assume("a")
    tally.assume("b")
    assert dict(tally.skipped) == {"two": 2} and tuple(tally.assumed) == ("b", "a")
    assert base.tool_call_arguments('{"k": 1}', "c") == {"k": 1}
    assert base.tool_call_arguments("free text", "c") == {"input": "free text"}
    assert base.tool_call_arguments({"k": 2}, 3) == {"k": 2}
    chat = base.Tally()
    calls = base.chat_tool_calls([{"id": "a", "function": {"name": 5, "arguments": "{}"}}, {"function": {"name": "x"}}, "junk",
                                  {"id": "b", "function": "not an object"}, {"id": "c", "function": {"name": "y", "arguments": "[1]"}}], chat)
    assert calls == [ToolCall("a", "5", {}), ToolCall("c", "y", {"input": "[1]"})]
    assert dict(chat.skipped) == {"malformed tool calls": 3}
    assert base.chat_tool_calls("not a list", chat) == []
    images = base.Tally()
    assert base.image_or_stub("image/png", base64.b64encode(b"\x89PNG").decode(), images) == glyphpack.Image("image/png", b"\x89PNG")
    assert base.image_or_stub("image/png", "not base64!", images) == Text("[image image/png: its data was not valid base64]")
    assert base.image_or_stub(None, "aGk=", images) == Text("[image None: its data was not valid base64]")
    assert dict(images.repaired) == {"images without valid data kept as a text stub": 2}
    assert base.epoch_seconds("2026-02-10T21:54:15.5Z") == datetime.datetime(2026, 2, 10, 21, 54, 15, 500000, datetime.timezone.utc).timestamp()
    assert base.epoch_seconds("2026-02-10T21:54:15") == base.epoch_seconds("2026-02-10t21:54:15z")
    assert base.epoch_seconds("2026-02-10T22:54:15+01:00") == base.epoch_seconds("2026-02-10T21:54:15Z")
    assert base.epoch_seconds(99_999_999_999) == 99_999_999_999.0 and base.epoch_seconds(100_000_000_000) == 100_000_000.0
    assert base.epoch_seconds(-100_000_000_000) is None
    assert [base.epoch_seconds(v) for v in (True, 0, -5, float("nan"), float("inf"), "", "  ", "yesterday", None, [1])] == [None] * 10
    assert base.epoch_seconds(" 1970-01-01T00:00:01Z ") == 1.0


def test_results_in_a_user_message_become_a_tool_message_before_the_users_words():
    from glyphpack._importers.base import _split_mixed_tool_messages

    result = glyphpack.ToolResult("c", (Text("r"),))
    user = glyphpack.Message("user", (result, Text("and now")), id="u")
    only = glyphpack.Message("user", (result,), id="v")
    tool = glyphpack.Message("tool", (result,), id="t")
    said = glyphpack.Message("user", (Text("hi"),), id="w")
    assert _split_mixed_tool_messages([user, only, tool, said]) == [
        glyphpack.Message("tool", (result,), id="u-results"), glyphpack.Message("user", (Text("and now"),), id="u"),
        glyphpack.Message("tool", (result,), id="v-results"), tool, said]


def test_gemini_parts_read_their_media_types_under_either_spelling(tmp_path):
    """Inline data and file data name their type as ``mimeType`` or ``mime_type`` (PNG
    when neither does); a linked file that is not an image stays an opaque part; data
    that is not strict base64 becomes a counted stub; a thought's signature is kept
    only when it is a string."""
    path = tmp_path / "gemini.json"
    parts = [{"text": "see"}, {"inlineData": {"mimeType": "image/jpeg", "data": "aGk="}}, {"inline_data": {"mime_type": "image/gif", "data": "aGk="}},
             {"inlineData": {"data": "aGk="}}, {"inlineData": {"mimeType": "image/png", "data": "aG\nk="}},
             {"fileData": {"mimeType": "video/mp4", "fileUri": "gs://v"}}, {"file_data": {"mime_type": "image/webp", "file_uri": "gs://w"}},
             {"fileData": {"fileUri": "gs://x"}}, {"text": "plan", "thought": True, "thoughtSignature": "s1"},
             {"text": "plan2", "thought": True, "thoughtSignature": 5}]
    path.write_text(json.dumps({"contents": [{"role": "user", "parts": parts}]}))
    session = import_file(path)
    assert session.messages[0].content == (
        Text("see"), glyphpack.Image("image/jpeg", b"hi"), glyphpack.Image("image/gif", b"hi"), glyphpack.Image("image/png", b"hi"),
        Text("[image image/png: its data was not valid base64]"),
        Opaque("gemini-part", {"fileData": {"mimeType": "video/mp4", "fileUri": "gs://v"}}),
        glyphpack.Image("image/webp", ref="gs://w"), glyphpack.Image("image/png", ref="gs://x"), Thinking("plan", "s1"), Thinking("plan2"))
    assert session.report.repaired == {"images without valid data kept as a text stub": 1}


def test_a_kimi_cli_session_reads_with_its_subagent_and_every_call_keeps_its_result(tmp_path):
    """Kimi CLI's context files (one message per line, OpenAI tool calls, _checkpoint and
    _usage marker lines) were "no session format recognized"; its ReadContext subagent's
    context lies beside the session's as ``<id>_read_1.jsonl``."""
    folder = DATA / "kimicli-0b88d484-d8447fa8"
    main_file = folder / "d8447fa8-9d8e-41af-9fc6-a12e4a196b6c.jsonl"
    session = import_file(main_file)
    assert session.report.format == "kimi-cli" and [a.name for a in session.agents] == ["main", "read-1"]
    assert session.report.skipped == {"_checkpoint lines (no message)": 69, "_usage lines (no message)": 134}
    assert import_file(folder).report == session.report  # the session's folder reads as its file
    for agent, path in zip(session.agents, (main_file, folder / "d8447fa8-9d8e-41af-9fc6-a12e4a196b6c_read_1.jsonl")):
        raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        calls = [c["id"] for r in raw if r.get("role") == "assistant" for c in r.get("tool_calls") or ()]
        results = {r["tool_call_id"]: "\n".join(p["text"] for p in r["content"]) for r in raw if r.get("role") == "tool"}
        assert [c.id for m in agent.messages for c in m.tool_calls] == calls
        assert {r.call_id: r.text for m in agent.messages for r in m.tool_results} == results
        assert len(agent.messages) == sum(r.get("role") in ("user", "assistant", "tool") for r in raw)
    assert session.agents[1].messages[0].text.startswith("You are assisting the main agent by gathering project context.")
    # a folder of Kimi sessions: the subagent's file goes with its session, not as one of its own
    sessions = tmp_path / "sessions"
    shutil.copytree(folder, sessions / "work")
    assert main(["import", str(sessions), "--workspace", str(tmp_path / "ws")]) == 0
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        assert sorted(workspace.transcripts()) == [("d8447fa8-9d8e-41af-9fc6-a12e4a196b6c", "main"), ("d8447fa8-9d8e-41af-9fc6-a12e4a196b6c", "read-1")]


def _crush_database(path: Path) -> Path:
    """A Crush project database as Crush writes it (its goose migration table included):
    a session with a reasoning answer, a call and its error result, an image, an answer
    ended by an API error, a summary that compacted it; a session an agent tool started
    under it; times in milliseconds, as newer Crush writes them."""
    import sqlite3

    part = lambda kind, **data: {"type": kind, "data": data}
    with sqlite3.connect(path) as db:
        db.executescript("""
            CREATE TABLE goose_db_version (id INTEGER PRIMARY KEY AUTOINCREMENT, version_id INTEGER NOT NULL, is_applied INTEGER NOT NULL);
            CREATE TABLE sessions (id TEXT PRIMARY KEY, parent_session_id TEXT, title TEXT NOT NULL, message_count INTEGER NOT NULL DEFAULT 0,
                prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0.0,
                updated_at INTEGER NOT NULL, created_at INTEGER NOT NULL, summary_message_id TEXT);
            CREATE TABLE messages (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL, parts TEXT NOT NULL default '[]',
                model TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, finished_at INTEGER, provider TEXT);
        """)
        # Usage as Crush sets it: the last request's prompt, zeroed by a summary; the cost summed.
        db.execute("INSERT INTO sessions VALUES ('s1', NULL, 'Fix the build', 6, 0, 120, 0.5, 1754709100000, 1754709000000, 'm6')")
        db.execute("INSERT INTO sessions VALUES ('s2', 's1', 'Look at the logs', 2, 900, 40, 0.004, 1754709050000, 1754709040000, NULL)")
        png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 24).decode()
        rows = [
            ("m1", "s1", "user", [part("text", text="fix the build"), part("binary", path="shot.png", mime_type="image/png", data=png)], None),
            ("m2", "s1", "assistant", [part("finish", reason="error", message="API Error", details="400")], "gpt-5"),
            ("m3", "s1", "assistant", [part("reasoning", thinking="look first"), part("text", text="Reading."),
                                       part("tool_call", id="call_1", name="view", input='{"file_path": "go.mod"}', type="function", finished=True),
                                       part("finish", reason="tool_use")], "gpt-5"),
            ("m4", "s1", "tool", [part("tool_result", tool_call_id="call_1", name="", content="File not found: go.mod", metadata="", is_error=True)], None),
            ("m5", "s1", "assistant", [part("text", text="No go.mod."), part("finish", reason="stop")], "claude-sonnet-4-5"),
            ("m6", "s1", "assistant", [part("text", text="Summary: the build has no go.mod.")], "claude-sonnet-4-5"),
            ("m7", "s2", "user", [part("text", text="read the logs")], None),
            ("m8", "s2", "assistant", [part("text", text="auth failed")], "gpt-5"),
        ]
        for n, (message_id, session, role, parts, model) in enumerate(rows):
            db.execute("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
                       (message_id, session, role, json.dumps(parts), model, 1754709000000 + n * 1000, 1754709000000 + n * 1000))
    db.close()
    return path


def test_a_crush_database_is_read_as_crush_not_taken_for_goose_and_each_part_lands_where_it_belongs(tmp_path):
    """Crush keeps a goose_db_version table (its migration tool): it was refused as "not a
    Goose sessions database"."""
    path = _crush_database(tmp_path / "crush.db")
    ((name, session),) = glyphpack.import_sessions(path)
    assert name == "s1" and session.title == "Fix the build" and session.report.format == "crush"
    main_agent, sub = session.agents
    assert (main_agent.name, sub.name, main_agent.model, main_agent.compactions) == ("main", "agent-1", "claude-sonnet-4-5", ("m6",))
    assert [m.id for m in main_agent.messages] == ["m1", "m3", "m4", "m5", "m6"]  # the answer the API error ended holds nothing
    assert main_agent.messages[0].images[0].media_type == "image/png" and main_agent.messages[0].time == 1754709000.0
    assert main_agent.messages[1].content == (Thinking("look first"), Text("Reading."), ToolCall("call_1", "view", {"file_path": "go.mod"}))
    ((result),) = main_agent.messages[2].tool_results
    assert (result.call_id, result.text, result.is_error) == ("call_1", "File not found: go.mod", True)
    assert [m.text for m in sub.messages] == ["read the logs", "auth failed"]
    assert (main_agent.usage, main_agent.cost, sub.usage, sub.cost) == ((), 0.5, (Usage(0, 1, 900),), 0.004)
    assert session.report.cost == 0.504 and session.report.lines()[-1] == "cost the harness recorded: $0.5040"
    assert session.report.skipped == {"answers that ended in an error with nothing said": 1} and session.report.compactions == 1
    assert glyphpack.import_sessions(path, format="crush") == glyphpack.import_sessions(path)
    with pytest.raises(HistoryError, match="is not in the goose format: it is a crush database"):
        glyphpack.import_sessions(path, format="goose")
    with pytest.raises(HistoryError, match="is not in the crush format: it is no SQLite database"):
        glyphpack.import_sessions(DATA / "goose-legacy-synthetic.jsonl", format="crush")


def test_tool_calls_a_roo_code_answer_makes_in_xml_are_read_as_calls_with_their_results():
    """Roo Code up to 3.28 calls its tools in XML in the answer's text; the shared task's 11
    calls were read as text and their 10 results as the user's."""
    from glyphpack._importers.cline import _xml_parameters

    page = "<html><path>kept</path><content>its own</content></html>"  # a file's content holds tags, its own </content> too
    body = f"\n<path>site/index.html</path>\n<content>\n{page}\n</content>\n<line_count>3</line_count>\n"
    assert _xml_parameters(body) == {"path": "site/index.html", "content": page, "line_count": "3"}
    document = [
        {"role": "user", "ts": 1, "content": [{"type": "text", "text": "<task>\nmake the page\n</task>"}]},
        {"role": "assistant", "ts": 2, "content": [{"type": "text", "text": f"Writing it.\n\n<write_to_file>{body}</write_to_file>"}]},
        {"role": "user", "ts": 3, "content": [{"type": "text", "text": "[write_to_file for 'site/index.html'] Result:"},
                                               {"type": "text", "text": "<file_write_result>created</file_write_result>"}]},
        {"role": "assistant", "ts": 4, "content": "<thinking>done?</thinking>\nNo tool here: <read_file> is only named."},
        {"role": "user", "ts": 5, "content": [{"type": "text", "text": "go on"}]},
        {"role": "assistant", "ts": 6, "content": [{"type": "text", "text": "<execute_command>\n<command>ls</command>\n</execute_command>"}]},
    ]
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "api_conversation_history.json")
        path.write_text(json.dumps(document))
        session = import_file(path)
    calls = [c for m in session.messages for c in m.tool_calls]
    assert [(c.name, c.arguments) for c in calls] == [
        ("write_to_file", {"path": "site/index.html", "content": page, "line_count": "3"}),
        ("execute_command", {"command": "ls"}),  # the task's last answer: its call kept, the stand-in its result
    ]
    assert session.messages[1].content[0] == Text("Writing it.")
    results = [r for m in session.messages for r in m.tool_results]
    assert results[0].text.startswith("[write_to_file for 'site/index.html'] Result:") and not results[0].is_error
    named = next(m for m in session.messages if "<thinking>done?" in m.text)
    assert named.role == "assistant" and not named.tool_calls  # a tool only named stays text
    assert session.report.repaired == {"tool calls read from the XML in the answer's text": 2, "tool results read from their text blocks": 1,
                                       "unanswered tool calls given an error result": 1}


def test_gemini_content_calls_without_ids_are_answered_by_responses_with_ids_of_their_own_by_name_and_order(tmp_path):
    """Gemini CLI wrote ids on its function responses (``run_shell_command-1768861006340-…``)
    and none on the calls: all 56 calls of a real file got error results and the 56
    outputs became user text, though they pair one to one by name and order."""
    contents = [
        {"role": "user", "parts": [{"text": "list and show"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}},
                                    {"functionCall": {"name": "read_file", "args": {"path": "a"}}},
                                    {"functionCall": {"name": "run_shell_command", "args": {"command": "pwd"}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"id": "run_shell_command-1768861006340-aa", "name": "run_shell_command", "response": {"output": "a.py"}}},
            {"functionResponse": {"id": "read_file-1768861006341-bb", "name": "read_file", "response": {"output": "text of a"}}},
            {"functionResponse": {"id": "run_shell_command-1768861006342-cc", "name": "run_shell_command", "response": {"output": "/w"}}}]},
        {"role": "model", "parts": [{"text": "done"}]},
    ]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(contents))
    session = import_file(path)
    calls = {c.id: c.arguments for m in session.messages for c in m.tool_calls}
    answers = [(calls[r.call_id], r.text) for m in session.messages for r in m.tool_results]
    assert answers == [({"command": "ls"}, "a.py"), ({"path": "a"}, "text of a"), ({"command": "pwd"}, "/w")]
    assert session.report.repaired == {}


def test_the_cost_a_crush_database_recorded_is_kept_with_the_conversation_and_renewed_by_a_sync(tmp_path):
    """What Crush summed (its sessions' ``cost``) is the conversation's, every agent's, in
    the workspace (``Workspace.harness_cost``: the index of ``glyphpack serve`` shows it);
    a sync after Crush went on renews it; a harness that records none has None."""
    import sqlite3

    from glyphpack._session.serve import Index

    path = _crush_database(tmp_path / "crush.db")
    assert main(["import", str(path), "--workspace", str(tmp_path / "ws")]) == 0
    assert main(["import", str(DATA / "simonw-sample_codex_session.jsonl"), "--workspace", str(tmp_path / "ws")]) == 0
    with sqlite3.connect(path) as db:
        db.execute("UPDATE sessions SET cost = 0.75 WHERE id = 's1'")
        db.execute("INSERT INTO messages VALUES ('m9', 's1', 'user', ?, NULL, 1754709100000, 1754709100000, NULL, NULL)",
                   (json.dumps([{"type": "text", "data": {"text": "and the tests?"}}]),))
    db.close()
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        assert workspace.harness_cost("s1") == 0.504
        assert workspace.harness_cost("simonw-sample_codex_session") is None
    assert main(["import", str(path), "--workspace", str(tmp_path / "ws")]) == 0  # a sync: what Crush added
    with glyphpack.Workspace(tmp_path / "ws", read_only=True) as workspace:
        assert workspace.harness_cost("s1") == 0.754
        listed = {c["id"]: c["cost"] for c in Index(workspace).conversations()}
    assert listed == {"s1": 0.754, "simonw-sample_codex_session": None}
