"""Exports and tree drawings, exact: a message's time as UTC text, a message as
Markdown, the one-line summary a drawing shows (a harness's reminders said as such),
a conversation as Markdown and as JSON with where it was forked from."""

from __future__ import annotations

from glyphpack import Message, SessionTree, Text, ToolCall, Workspace
from glyphpack._history.export import _summary, clock, draw_tree, export_json, export_markdown, message_markdown

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


def test_a_drawing_marks_times_branches_tips_checkpoints_notes_and_counts_a_long_run(tmp_path) -> None:
    with Workspace(tmp_path / "ws") as ws:
        tree = ws.tree
        tree.create("c", title="Logs")
        messages = [Message("user" if n % 2 == 0 else "assistant", (Text(f"m{n}"),), id=f"m{n}", time=NOON + 60 * n) for n in range(14)]
        ws.save("c", "main", messages, revision=0)
        ws.save("c", "helper", messages[:4], revision=0)
        ws.checkpoint("c", "main", "one")
        ws.checkpoint("c", "main", "two")
        for other in ("alt1", "alt2"):
            tree.branch("c", "m1")
            tree.append("c", Message("user", (Text(other),), id=f"b{other[-1]}", time=None))
        drawn = [
            "c  Logs  (2026-02-12 12:00:00 to 2026-02-12 12:13:00 UTC)",
            "* 12:00 user: m0 [m0]",
            "* 12:01 assistant: m1 [m1]",
            "├─* 12:02 user: m2 [m2]",
            "│ * 12:03 assistant: m3 [m3]  <- (helper)  (compaction ends here)",
            "│ * 12:04 user: m4 [m4]",
            "│ * 12:05 assistant: m5 [m5]",
            "│   … 5 messages …",
            "│ * 12:11 assistant: m11 [m11]",
            "│ * 12:12 user: m12 [m12]",
            "│ * 12:13 assistant: m13 [m13]  <- (main)  [checkpoint one]  [checkpoint two]",
            "├─* user: alt1 [b1]",
            "└─* user: alt2 [b2]  <- tip",
        ]
        assert draw_tree(tree, "c", notes={"m3": "(compaction ends here)"}) == drawn
        whole = draw_tree(tree, "c", collapse=False, notes={"m3": "(compaction ends here)"})
        assert len(whole) == len(drawn) + 4 and "│ * 12:08 user: m8 [m8]" in whole
        tree.create("empty")
        assert draw_tree(tree, "empty") == ["empty", "* (empty)  <- tip"]
