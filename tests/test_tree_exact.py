"""The session tree's writes and lookups pinned exactly: counts returned, parent
pointers, titles, and each error's words (a mutmut run over ``_history/tree.py`` found
these guarded by "it raised" or by a second call only)."""

from __future__ import annotations

import re
import sqlite3

import pytest

from glyphpack import ConflictError, Message, StoreError, Workspace
from glyphpack._history.tree import SessionTree


@pytest.fixture
def tree(workspace_location):
    with Workspace(workspace_location) as workspace:
        yield workspace.tree


def _messages(*names: str) -> list[Message]:
    return [Message("user" if n % 2 == 0 else "assistant", name, id=name) for n, name in enumerate(names)]


def test_add_paths_counts_what_it_added_and_links_each_message_to_the_one_before(tree):
    tree.create("c", "a title")
    main, side = _messages("m1", "m2", "m3"), _messages("m1", "m2", "s3", "s4")
    assert tree.add_paths("c", [main, side], tip="m3") == 5  # the shared m1, m2 stored once
    assert [(n.message.id, n.parent) for n in tree.nodes("c")] == [
        ("m1", None), ("m2", "m1"), ("m3", "m2"), ("s3", "m2"), ("s4", "s3")]
    assert tree.tip("c") == "m3"
    assert tree.add_paths("c", [side], tip="s4") == 0 and tree.tip("c") == "s4"  # from any previous tip
    tree.create("d")
    with pytest.raises(StoreError, match=r"^message id 'm2' is already in conversation 'c'$"):
        tree.add_paths("d", [_messages("d1", "m2")], tip=None)
    assert tree.nodes("d") == []  # one transaction: d1 is not kept either


def test_record_counts_the_messages_it_added(tree):
    history = _messages("r1", "r2", "r3")
    assert tree.record("c", "main", history) == 3
    assert tree.record("c", "main", history) == 0
    assert tree.record("c", "main", [*history, *_messages("r4")[:0], Message("user", "more", id="r4")]) == 1
    assert [(n.message.id, n.parent) for n in tree.nodes("c")][-1] == ("r4", "r3")
    with pytest.raises(StoreError, match=r"^message id 'r2' is already in conversation 'c'; a copy needs new ids"):
        tree.record("e", "main", _messages("r1x", "r2"))


def test_fork_copies_with_the_source_title_unless_given_one(tree):
    tree.record("c", "main", _messages("f1", "f2", "f3"), title="the source")
    first = tree.fork("c", new_conversation="copy")
    assert tree.conversation(first).title == "the source"
    assert (tree.conversation(first).forked_from, tree.conversation(first).forked_at) == ("c", "f3")
    copies = tree.nodes(first)
    assert [n.message.text for n in copies] == ["f1", "f2", "f3"]
    assert [n.parent for n in copies] == [None, copies[0].message.id, copies[1].message.id]
    assert not {n.message.id for n in copies} & {"f1", "f2", "f3"}
    assert tree.conversation(tree.fork("c", "f2", title="mine")).title == "mine"
    with pytest.raises(StoreError, match=r"^conversation 'copy' already exists$"):
        tree.fork("c", new_conversation="copy")
    tree.record("other", "main", _messages("o1"))
    with pytest.raises(StoreError, match=r"^message 'o1' is not in conversation 'c'$"):
        tree.fork("c", "o1")
    with pytest.raises(StoreError, match=r"^conversation id 'a/b' is not allowed"):
        tree.fork("c", new_conversation="a/b")


def test_create_and_label_refuse_by_name(tree):
    assert tree.create("n", "t") == "n" and tree.conversation("n").title == "t"
    with pytest.raises(StoreError, match=r"^conversation 'n' already exists$"):
        tree.create("n")
    with pytest.raises(StoreError, match=r"^conversation id 'a/b' is not allowed"):
        tree.create("a/b")
    tree.record("c", "main", _messages("l1", "l2"))
    tree.label("c", "start", None)
    tree.label("c", "here", "l1")
    tree.label("c", "here", "l2")  # moved, not added
    assert tree.labels("c") == {"here": "l2", "start": None}
    with pytest.raises(StoreError, match=r"^message 'l1' is not in conversation 'n'$"):
        tree.label("n", "x", "l1")


def test_find_takes_an_id_a_scoped_id_or_a_unique_prefix(tree):
    tree.record("c", "main", [Message("user", "a", id="abc1"), Message("assistant", "b", id="abd2"),
                              Message("user", "c", id="c/xyz9")])
    assert tree.find("c", "abc1") == "abc1"
    assert tree.find("c", "xyz9") == "c/xyz9"  # as /tree shows an imported id
    assert tree.find("c", "xy") == "c/xyz9" and tree.find("c", "abd") == "abd2"
    with pytest.raises(StoreError, match=r"^2 messages in 'c' with an id starting 'ab'$"):
        tree.find("c", "ab")
    with pytest.raises(StoreError, match=r"^no message in 'c' with an id starting 'q'$"):
        tree.find("c", "q")


def test_lookups_name_what_is_missing_and_where(tree):
    where = re.escape(str(tree.name))
    with pytest.raises(StoreError, match=rf"^no message 'nope' in {where}$"):
        tree.node("nope")
    with pytest.raises(StoreError, match=rf"^no message 'nope' in {where}$"):
        tree.path_to("nope")
    with pytest.raises(StoreError, match=rf"^no conversation 'nope' in {where}$"):
        tree.conversation("nope")
    assert tree.path_to(None) == []
    tree.record("c", "main", _messages("p1", "p2"))
    node = tree.node("p2")
    assert (node.message.text, node.parent, node.conversation) == ("p2", "p1", "c")
    assert tree.agent_tip("c", "main") == "p2" and tree.agent_tip("c", "nobody") is None
    assert tree.agent_tips("c") == {"main": "p2"}
    assert [m.id for m in tree.children("p1")] == ["p2"] and tree.children("p2") == []


def test_a_tip_that_moved_underneath_is_a_conflict_that_writes_nothing(tree):
    tree.record("c", "main", _messages("t1", "t2"))
    with pytest.raises(ConflictError, match=r"^conversation 'c' has moved to tip 't2', not 't1': reload it and retry$"):
        tree.append("c", Message("user", "late"), expected_tip="t1")
    assert [n.message.id for n in tree.nodes("c")] == ["t1", "t2"]
    with pytest.raises(ConflictError, match=r"^conversation 'c': the tip moved underneath this write$"):
        with tree._write("c") as db:
            tree._move_tip(db, "c", "t1", None)
    assert tree.tip("c") == "t2"


def test_a_busy_database_and_a_damaged_one_are_told_apart(tmp_path):
    with SessionTree(tmp_path / "tree.sqlite") as tree:
        busy = tree._db.damaged(sqlite3.OperationalError("database is locked"))
        assert str(busy) == f"{tree.name} is busy: another process holds it (database is locked); try again"
        assert "is busy" in str(tree._db.damaged(sqlite3.OperationalError("database busy")))
        damaged = tree._db.damaged(sqlite3.OperationalError("disk I/O error"))
        assert str(damaged) == f"{tree.name} is damaged (disk I/O error); it was left as it is: restore it from a copy"
        assert "is damaged" in str(tree._db.damaged("locked out"))  # only SQLite's own busy errors are "busy"


def test_a_long_plain_run_is_counted_on_one_line_and_what_is_marked_stays(tree):
    from glyphpack._history.export import draw_tree

    history = _messages(*(f"m{n:02d}" for n in range(20)))
    tree.record("c", "main", history)
    tree.label("c", "here", "m06")
    tree.label("c", "there", "m12")
    tree.add_paths("c", [[*history[:17], Message("user", "another way", id="b17")]], tip="m19")
    lines = draw_tree(tree, "c")
    assert lines == [
        "c  m00",  # untitled: named by its first task
        "* user: m00 [m00]",  # m00-m05: six, two kept at each end
        "* assistant: m01 [m01]",
        "  … 2 messages …",
        "* user: m04 [m04]",
        "* assistant: m05 [m05]",
        "* user: m06 [m06]  [checkpoint here]",
        "* assistant: m07 [m07]",  # m07-m11: five, all shown
        "* user: m08 [m08]",
        "* assistant: m09 [m09]",
        "* user: m10 [m10]",
        "* assistant: m11 [m11]",
        "* user: m12 [m12]  [checkpoint there]",
        "* assistant: m13 [m13]",
        "* user: m14 [m14]",
        "* assistant: m15 [m15]",
        "* user: m16 [m16]",
        "├─* assistant: m17 [m17]",
        "│ * user: m18 [m18]",
        "│ * assistant: m19 [m19]  <- tip",
        "└─* user: another way [b17]",
    ]
    assert len(draw_tree(tree, "c", collapse=False)) == 22


def test_a_call_is_drawn_by_what_it_does():
    from glyphpack import ToolCall

    assert ToolCall("a", "Bash", {"description": "list", "command": "ls -la\n  /tmp"}).outline() == "Bash(ls -la /tmp)"
    assert ToolCall("a", "Read", {"file_path": "/src/a.py", "limit": 5}).outline() == "Read(/src/a.py)"
    assert ToolCall("a", "fetch", {"n": 1, "target": "x" * 50}).outline() == f"fetch({'x' * 40}...)"
    assert ToolCall("a", "ls", {"depth": 2}).outline() == "ls()"
