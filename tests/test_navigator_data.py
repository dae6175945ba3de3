"""The navigator's data, exact (the browser tests read it through Chromium, which a
mutation run's copy cannot start): every block kind as the page's script gets it, each
image once and only of an image type, the conversations with their forks, agents and
labels, and each compaction with what it sends, what its pages draw and what it covers."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

import glyphpack
from glyphpack import Image, Message, Opaque, RedactedThinking, Text, Thinking, ToolCall, ToolResult
from glyphpack._history.recall import range_ref
from glyphpack._session.navigator import _script_json, export_html, workspace_data

PNG = b"\x89PNG\r\n\x1a\n" + b"\1" * 20
OTHER = b"\x89PNG\r\n\x1a\n" + b"\2" * 20


def _key(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:20]


def _history() -> list[Message]:
    return [
        Message("system", "be brief", id="m0", time=1.5),
        Message("user", (Text("look"), Image("image/png", PNG), Image("image/png", PNG), Image("image/jpeg", ref="https://x.example/y.jpg"),
                         Image("image/png", ref="file-1"), Image("image/svg+xml<", PNG)), id="m1"),
        Message("assistant", (Thinking("hmm", signature="s"), RedactedThinking("xx"),
                              ToolCall("c1", "Task", {"description": "look around", "prompt": "find the bug"}),
                              ToolCall("c2", "Bash", {"command": "ls\n  -la", "timeout": 5}), ToolCall("c3", "Agent", {"prompt": ["not", "text"]})), id="m2"),
        Message("tool", (ToolResult("c1", (Text("found"), Image("image/png", OTHER), Image("image/png", PNG))),
                         ToolResult("c2", (Text("boom"),), is_error=True), ToolResult("c3")), id="m3"),
        Message("assistant", (Opaque("reasoning", {"id": "rs_1"}), Text("fixed")), id="m4"),
    ]


def test_every_block_is_given_to_the_page_as_its_kind_and_each_image_once(tmp_path) -> None:
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        ws.save("c", "a", _history(), revision=0)
        data = workspace_data(ws)
    assert data["workspace"] == "ws"
    assert data["images"] == {_key(PNG): {"m": "image/png", "d": base64.b64encode(PNG).decode()},
                              _key(OTHER): {"m": "image/png", "d": base64.b64encode(OTHER).decode()}}
    nodes = {n["id"]: n for n in data["nodes"]}
    assert [(n["id"], n["p"], n["c"], n["r"]) for n in data["nodes"]] == [
        ("m0", None, "c", "system"), ("m1", "m0", "c", "user"), ("m2", "m1", "c", "assistant"), ("m3", "m2", "c", "tool"), ("m4", "m3", "c", "assistant")]
    assert nodes["m0"]["t"] == 1.5 and nodes["m1"]["t"] is None
    assert nodes["m1"]["b"] == [{"k": "text", "x": "look"}, {"k": "image", "i": _key(PNG)}, {"k": "image", "i": _key(PNG)},
                                {"k": "image", "ref": "https://x.example/y.jpg"}, {"k": "image", "ref": "file-1"},
                                {"k": "image", "ref": "image/svg+xml<"}]
    assert nodes["m2"]["b"] == [
        {"k": "thinking", "x": "hmm"}, {"k": "thinking", "x": "[redacted thinking]"},
        {"k": "call", "n": "Task", "id": "c1", "label": "Task look around", "a": "description: look around\nprompt: find the bug", "p": "find the bug",
         "d": "look around"},  # the subagent is named by its caller's description (and kind)
        {"k": "call", "n": "Bash", "id": "c2", "label": "$ ls -la", "a": "command:\n    ls\n      -la\ntimeout: 5"},
        {"k": "call", "n": "Agent", "id": "c3", "label": "Agent", "a": 'prompt: [\n  "not",\n  "text"\n]'},  # a prompt that is no text: no nesting
    ]
    assert nodes["m3"]["b"] == [{"k": "result", "id": "c1", "e": False, "x": "found", "imgs": [_key(OTHER), _key(PNG)]},
                                {"k": "result", "id": "c2", "e": True, "x": "boom", "imgs": []}, {"k": "result", "id": "c3", "e": False, "x": "", "imgs": []}]
    assert nodes["m4"]["b"] == [{"k": "opaque", "n": "reasoning"}, {"k": "text", "x": "fixed"}]


def test_conversations_carry_their_agents_labels_and_where_each_fork_came_from(tmp_path) -> None:
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        ws.save("c", "a", _history(), revision=0)
        ws.save("c", "helper", [Message("user", "help", id="h0"), Message("assistant", "helped", id="h1")], revision=0)
        ws.checkpoint("c", "a", "start")
        ws.fork("c", "a", at="m1", new_conversation="d")
        ws.save("e", "a", [Message("user", "other", id="e0"), Message("assistant", "ok", id="e1")], revision=0)
        everything = workspace_data(ws)
        chosen = workspace_data(ws, "c")
        with pytest.raises(glyphpack.StoreError) as raised:
            workspace_data(ws, "nope")
        assert str(raised.value) == f"no conversation 'nope' in {ws.location} (conversations: c, d, e)"
        forked = ws.tree.conversations()[1]
    assert [c["id"] for c in everything["conversations"]] == ["c", "d", "e"]
    c, d, _ = everything["conversations"]
    assert c == {"id": "c", "title": c["title"], "tip": "m4", "agents": {"a": "m4", "helper": "h1"}, "labels": {"start": "m4"},
                 "forked_from": None, "forked_at": None, "first_prompt": "m1"}  # the page opens at the first prompt typed, past the system prompt
    assert everything["conversations"][2]["first_prompt"] is None  # typed first: the page opens at its top
    assert (d["forked_from"], d["forked_at"], d["tip"]) == ("c", forked.forked_at, forked.tip) and d["forked_at"] is not None
    assert [c["id"] for c in chosen["conversations"]] == ["c", "d"]  # a conversation and its forks
    assert {n["c"] for n in chosen["nodes"]} == {"c", "d"}


def test_each_compaction_says_what_it_sends_what_its_pages_draw_and_what_it_covers(tmp_path) -> None:
    from glyphpack._compaction.rungs import ELIDED_MARK

    with glyphpack.Workspace(tmp_path / "ws") as ws:
        s = glyphpack.open_session(ws, "c", "a", model="claude-sonnet-4-5", summarizer=lambda prompt: "Summary: files were read.",
                                   policy=glyphpack.CompactionPolicy(rungs=("elision",), protect_turns=1))
        for n in range(6):
            s.add_user(f"step {n}")
            s.add_response({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"file_path": f"m{n}.py"}}]}, "anthropic")
            s.add_tool_results({f"t{n}": f"line {n}\n" * 400})
            s.add_response({"role": "assistant", "content": [{"type": "text", "text": f"done {n}"}]}, "anthropic")
        elided = s.compact(1_500)
        view = s.view
        assert view is not None and elided.report.rung("elision").changed > 0  # type: ignore[union-attr]
        (compaction,) = workspace_data(ws)["compactions"]
    changed = [m.id for m in view.messages if m != next(o for o in s.messages if o.id == m.id)]
    sent_text = [m.text for m in view.messages if m.id in changed] + [c.arguments_json for m in view.messages if m.id in changed for c in m.tool_calls]
    assert compaction == {
        "n": 1, "conv": "c", "agent": "a", "covers": view.covers, "trigger": "/compact", "report": view.report, "shape": None,
        "pages": [], "notes": [], "elided": changed, "source": list(view.source) if view.source else None, "page_text": view.page_text,
        "stubs_sent": {"elided": sum(t.count(ELIDED_MARK) for t in sent_text), "dropped": 0}, "stubs_on_pages": {"elided": 0, "dropped": 0},
        "verbatim": len(view.messages) - len(changed),
        "refs": list(dict.fromkeys(re.findall(r'ref "([^"]+)"', "\n".join(m.text for m in view.messages))))
        + ([range_ref(*view.source)] if view.source else []),
    }
    assert compaction["stubs_sent"]["elided"] > 0 and changed and len(compaction["refs"]) >= 2


def test_the_data_cannot_close_its_script_element_and_every_marker_is_filled_once(tmp_path) -> None:
    assert _script_json({"x": "</script><!--&"}) == '{"x":"\\u003c/script\\u003e\\u003c!--\\u0026"}'
    assert json.loads(_script_json({"x": "</script><!--&é"})) == {"x": "</script><!--&é"}
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        ws.save("c", "a", [Message("user", "@@SCRIPT@@ @@DATA@@"), Message("assistant", "ok")], revision=0)
        page = export_html(ws, "c")
    # the message's markers stay in the data (as its text and the conversation's title), filled nowhere
    assert "@@STYLE@@" not in page and "@@TITLE@@" not in page and page.count("@@SCRIPT@@") == page.count("@@DATA@@") == 2
    assert re.search(r"<title>(.*?)</title>", page).group(1) == "glyphpack: ws / c"  # type: ignore[union-attr]
