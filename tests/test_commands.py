"""The slash commands, each exact: the text a harness shows and the figures beside it,
and every refusal word for word (``test_session.py`` drives them as a user would)."""

from __future__ import annotations

from typing import Any

import pytest

import glyphpack
from glyphpack import Image, Message, Text, ToolCall, ToolResult, UsageError
from glyphpack._session.commands import COMMANDS, HELP

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 24


def _session(tmp_path: Any, turns: int = 3, **options: Any) -> glyphpack.Session:
    s = glyphpack.open_session(tmp_path / "ws", "c", "a", model="claude-sonnet-4-5", **options)
    for n in range(turns):
        s.add_user(f"question {n}")
        s.add_response({"role": "assistant", "content": [{"type": "text", "text": f"answer {n} " + "detail " * 200}]}, "anthropic")
    return s


def _refused(s: glyphpack.Session, line: str) -> str:
    with pytest.raises(UsageError) as raised:
        s.command(line)
    return str(raised.value)


def test_every_command_refuses_what_it_cannot_take_word_for_word(tmp_path: Any) -> None:
    with _session(tmp_path) as s:
        assert _refused(s, "/bogus now") == f"unknown command '/bogus'; commands: {', '.join(COMMANDS)}"
        assert _refused(s, "") == f"unknown command ''; commands: {', '.join(COMMANDS)}"
        assert _refused(s, "compact") == f"unknown command 'compact'; commands: {', '.join(COMMANDS)}"
        assert _refused(s, '/checkpoint "open') == "cannot parse '/checkpoint \"open': No closing quotation"
        for line in ("/compact lots", "/compact 1 2", "/compact -5", "/compact 4.5"):
            assert _refused(s, line) == "usage: /compact [BUDGET] (a number of tokens)"
        assert _refused(s, "/shake now") == "/shake takes no arguments"
        assert _refused(s, "/context all") == "/context takes no arguments"
        assert _refused(s, "/tree everything") == "usage: /tree [all] (all: every message, long plain runs not counted on one line)"
        assert _refused(s, "/tree all more") == "usage: /tree [all] (all: every message, long plain runs not counted on one line)"
        for line in ("/branch", "/branch a b"):
            assert _refused(s, line) == "usage: /branch ID (a message id or a unique prefix, as /tree shows)"
        assert _refused(s, "/fork a b") == "usage: /fork [NEW_CONVERSATION_ID]"
        for line in ("/checkpoint", "/checkpoint a b"):
            assert _refused(s, line) == "usage: /checkpoint NAME"
        for line in ("/rewind", "/rewind name"):
            assert _refused(s, line) == "usage: /rewind NAME DIGEST (what was learned since the checkpoint)"
        for line in ("/recall", "/recall a 2 3", "/recall a two"):
            assert _refused(s, line) == "usage: /recall REF [PAGE] (REF as a compaction's note names it)"
        assert _refused(s, "/recall nowhere") == "glyphpack recall: nothing in this conversation has the ref 'nowhere'"
        assert s.command("/help") == glyphpack.CommandResult("/help", HELP)
        assert len(s.messages) == 6 and s.view is None  # nothing any refusal touched


def test_compact_and_shake_show_the_ladders_report_and_take_a_budget_with_separators(tmp_path: Any) -> None:
    with _session(tmp_path, turns=8) as s:
        for line in ("/compact 1,500", "/compact 1_500", "/compact 1500"):
            result = s.command(line)
            assert result.command == "/compact" and result.data["budget"] == 1500
            assert result.text == "\n".join(s.last_compaction.report.lines()) and result.data == s.last_compaction.report.as_dict()
        default = s.command("/compact")
        assert default.data["budget"] == s.target
        shaken = s.command("/shake")
        assert shaken.command == "/shake" and shaken.text == "\n".join(s.last_compaction.report.lines())
        assert shaken.data == s.last_compaction.report.as_dict()


def test_context_says_what_the_next_request_holds_and_where_it_compacts(tmp_path: Any) -> None:
    with _session(tmp_path, turns=3, context_window=20_000, summarizer=lambda prompt: "Summary.") as s:
        result = s.command("/context")
        view, prefix = s.request_view()
        total = s.estimate()
        lines = result.text.split("\n")
        assert lines[:3] == [
            f"c/a: 6 stored messages; the next request carries 6 (~{total:,} tokens for claude-sonnet-4-5, {s.cost().profile.name})",
            f"window 20,000 ({20_000 - total:,} free); compacts at {s.threshold:,} down to {s.target:,} ({total / s.threshold:.0%} of the threshold)",
            "no compaction: the full transcript is sent",
        ]
        parts = s.cost().breakdown(view)
        assert result.data == {"messages": 6, "request_messages": 6, "prefix": 0, "tokens": total, "threshold": s.threshold,
                               "target": s.target, "window": 20_000, "categories": dict(parts)}
        assert len(lines) == 3 + len(parts) + (1 if s.estimator.overhead else 0)
        s.command("/compact 1200")
        stored = s.view
        assert stored is not None
        compacted = s.command("/context").text.split("\n")
        _, prefix = s.request_view()
        from glyphpack._history.export import short_id

        assert compacted[2] == (f"compaction in force (/compact): {prefix:,} messages stand for the transcript up to {short_id(stored.covers)}; "
                                f"{stored.pages} page(s)" + (f" in {stored.shape}" if stored.shape else "") + "; byte-identical until the next compaction")


def test_context_names_the_windows_threshold_when_the_session_compacts_sooner(tmp_path: Any) -> None:
    summarizer = glyphpack.Summarizer(lambda prompt: "Summary.")
    with glyphpack.open_session(tmp_path / "ws", "c", "a", model="claude-sonnet-4-5", context_window=200_000, summarizer=summarizer) as s:
        s.add_user("read the files")
        for n in range(4):
            s.request("anthropic")
            s.add_response({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "read", "input": {"n": n}}]}, "anthropic")
            s.add_tool_results({f"t{n}": f"{n} " + "x" * 2_000})
        assert s.threshold < s.thresholds.threshold
        second = s.command("/context").text.split("\n")[1]
        assert second.endswith(f" of the threshold, where it bills least (the window's threshold: {s.thresholds.threshold:,}))")


def test_the_tree_branch_fork_checkpoint_and_rewind_say_where_the_session_is(tmp_path: Any) -> None:
    with _session(tmp_path) as s:
        tree = s.command("/tree")
        assert tree.data == {"nodes": 6} and tree.text.split("\n")[0].startswith("c")
        assert s.command("/tree all").data == {"nodes": 6}
        assert s.command("/checkpoint before") == glyphpack.CommandResult("/checkpoint", "checkpoint 'before' at message 6", {"name": "before"})
        s.add_user("question 3")
        s.add_response({"role": "assistant", "content": [{"type": "text", "text": "answer 3"}]}, "anthropic")
        rewound = s.command("/rewind before it was the cache, not the disk")
        assert rewound == glyphpack.CommandResult("/rewind", "rewound to 'before': 7 messages; the explored path stays in /tree", {"name": "before"})
        assert "it was the cache, not the disk" in s.messages[-1].text
        target = s.messages[1].id
        assert s.command(f"/branch {target}") == glyphpack.CommandResult("/branch", f"a is now at {target} (2 messages)", {"tip": target})
        forked = s.command("/fork other")
        assert forked == glyphpack.CommandResult("/fork", "forked c into other (with no compaction in force); this session continues in other", {"conversation": "other"})
    with _session(tmp_path / "two", turns=8, summarizer=lambda prompt: "Summary.") as s:
        s.command("/compact 1500")
        forked = s.command("/fork")
        new = forked.data["conversation"]
        assert forked.text == f"forked c into {new} (with the compaction in force); this session continues in {new}" and new != "c"


def test_recall_shows_text_and_names_images_by_type_and_size(tmp_path: Any) -> None:
    with glyphpack.open_session(tmp_path / "ws", "c", "a", model="claude-sonnet-4-5") as s:
        s.add_user("look")
        s.add_response({"role": "assistant", "content": [{"type": "tool_use", "id": "shot", "name": "screenshot", "input": {}}]}, "anthropic")
        s.add_tool_results([ToolResult("shot", (Text("the screen:"), Image("image/png", PNG)))])
        shown = s.command("/recall shot")
        assert shown == glyphpack.CommandResult("/recall", f"the screen:\n[image image/png, {len(PNG):,} bytes]", {"ref": "shot", "blocks": 2})
        assert s.command("/recall shot 1") == shown
        assert isinstance(s.messages[1].content[0], ToolCall) and isinstance(s.messages[0], Message)
