"""Exports and tree drawings, exact: a message's time as UTC text, a message as
Markdown, the one-line summary a drawing shows (a harness's reminders said as such),
a conversation as Markdown and as JSON with where it was forked from."""

from __future__ import annotations

from glyphpack import Message, SessionTree, Text, ToolCall, Workspace
from glyphpack._history.export import _summary, clock, export_json, export_markdown, message_markdown

NOON = 1_770_897_600.0  # 2026-02-12 12:00:00 UTC


def test_a_time_is_utc_text_with_or_without_the_date() -> None:
    assert clock(None) == "" and clock(None, date=False) == ""
    assert clock(NOON + 3_723.9) == "2026-02-12 13:02:03"
    assert clock(NOON + 3_723.9, date=False) == "13:02"


def test_a_message_as_markdown_names_its_role_short_id_and_time() -> None:
    message = Message("assistant", (Text("first"), ToolCall("t1", "read", {"path": "a.py"})), id="conv/abcdef1234567890", time=NOON)
    assert message_markdown(message) == (
        "### assistant `abcdef12` · 2026-02-12 12:00:00 UTC\n\nfirst\n\n" + message.content[1].markdown() + "\n")
    untimed = Message("user", (Text("hi"),), id="u1")
    assert message_markdown(untimed) == "### user `u1`\n\nhi\n"


def test_a_drawings_summary_says_a_harnesss_reminders_as_such_and_cuts_at_its_width() -> None:
    wrapped = Message("user", (Text("<system-reminder>cwd is /src</system-reminder>\nfix the   failing test"),))
    assert _summary(wrapped) == "fix the failing test (+1 system reminder)"
    twice = Message("user", (Text("<system-reminder>a</system-reminder> do it <system-reminder>b</system-reminder>"),))
    assert _summary(twice) == "do it (+2 system reminders)"
    alone = Message("user", (Text("<system-reminder>only this</system-reminder>"),))
    assert _summary(alone) == "(system reminder) only this</system-reminder>"
    said = Message("assistant", (Text("<system-reminder> quoted by the model"),))
    assert _summary(said) == "<system-reminder> quoted by the model"  # only a user message is wrapped by a harness
    long = Message("assistant", (Text("x" * 70),))
    assert _summary(long) == "x" * 57 + "..." and _summary(long, width=70) == "x" * 70
    assert _summary(Message("assistant", (Text("a"), Text("b")))) == "a b"


def test_a_conversation_exports_as_markdown_and_json_with_its_fork(tmp_path) -> None:
    with Workspace(tmp_path / "ws") as ws:
        ws.save("c", "a", [Message("user", (Text("question"),), id="q1", time=NOON), Message("assistant", (Text("answer"),), id="a1")], revision=0)
        tree: SessionTree = ws.tree
        path = export_markdown(tree, "c")
        assert path == "# question\n\n" + message_markdown(tree.path("c")[0]) + "\n" + message_markdown(tree.path("c")[1])
        whole = export_markdown(tree, "c", whole_tree=True)
        assert "### user `q1` · 2026-02-12 12:00:00 UTC (root)\n" in whole and "### assistant `a1` (after `q1`)\n" in whole
        ws.fork("c", "a", new_conversation="d")
        forked = export_json(tree, "d")
        assert forked["forked_from"] == {"conversation": "c", "message": "a1"} and "forked_from" not in export_json(tree, "c")
        assert [m["role"] for m in forked["messages"]] == ["user", "assistant"]
