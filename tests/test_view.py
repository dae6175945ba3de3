"""A compaction as the workspace keeps it (``_history/view.py``): every field read back
as written, the file's keys, damaged files named, the defaults of a minimal file, a
fork's renaming of the view and its refs, and the view a harness's own compaction makes.
Written after mutation testing found these read back by no test (issue 43)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import glyphpack
from glyphpack import Image, Message, Text, ToolCall, ToolResult
from glyphpack._errors import StoreError
from glyphpack._history.recall import image_ref, range_ref, recall_hint, renamed_refs
from glyphpack._history.view import (
    FORMAT,
    FORMAT_VERSION,
    StoredView,
    archived,
    harness_view,
    read_archive,
    read_view,
    renamed_view,
    write_view,
)

#: A 1x1 PNG: an image part a fork carries as it is.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)

EVERY_FIELD = StoredView(
    covers="m9",
    messages=(Message("system", "sys", id="m0"), Message("user", "[pages]", id="m1")),
    source=("m1", "m8"),
    shape="9x15-loose",
    page_size=(1560, 784),
    pages=3,
    tokens=4321,
    trigger="proactive",
    report="snapshot: messages 1-8 on 3 pages",
    page_text="the text the pages draw\n",
)


def test_every_field_reads_back_as_written_in_a_new_process(tmp_path):
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        write_view(workspace, "c", "main", EVERY_FIELD)
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        assert read_view(workspace, "c", "main") == EVERY_FIELD
        assert read_archive(workspace, "c", "main") == [EVERY_FIELD]


def test_the_file_names_each_field():
    document = EVERY_FIELD.to_json()
    assert {k: v for k, v in document.items() if k != "messages"} == {
        "format": FORMAT, "version": FORMAT_VERSION, "covers": "m9", "source": ["m1", "m8"], "shape": "9x15-loose",
        "page_size": [1560, 784], "pages": 3, "tokens": 4321, "trigger": "proactive",
        "report": "snapshot: messages 1-8 on 3 pages", "page_text": "the text the pages draw\n",
    }
    bare = StoredView("m1", ()).to_json()
    assert bare["source"] is None and bare["page_size"] is None and bare["shape"] is None


def _stored(tmp_path: Path, document: object) -> Path:
    """A workspace whose view in force is ``document`` as written; the file's path."""
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        write_view(workspace, "c", "main", StoredView("m1", ()))
        where, _ = workspace.backend.view("c", "main")
    Path(where).write_text(json.dumps(document))
    return Path(where)


def test_a_minimal_file_takes_the_defaults(tmp_path):
    _stored(tmp_path, {"format": FORMAT, "version": FORMAT_VERSION, "covers": "m1", "messages": []})
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        assert read_view(workspace, "c", "main") == StoredView("m1", ())


@pytest.mark.parametrize("document, why", [
    ({"format": "other", "version": FORMAT_VERSION, "covers": "m1", "messages": []}, f"not a {FORMAT} version {FORMAT_VERSION} file"),
    ({"format": FORMAT, "version": FORMAT_VERSION + 1, "covers": "m1", "messages": []}, f"not a {FORMAT} version {FORMAT_VERSION} file"),
    ({"format": FORMAT, "covers": "m1", "messages": []}, f"not a {FORMAT} version {FORMAT_VERSION} file"),
    (["a list"], f"not a {FORMAT} version {FORMAT_VERSION} file"),
    ({"format": FORMAT, "version": FORMAT_VERSION, "messages": []}, "'covers'"),
    ({"format": FORMAT, "version": FORMAT_VERSION, "covers": "m1", "messages": [], "page_size": [1560]}, "list index out of range"),
])
def test_a_damaged_file_is_named_with_what_is_wrong(tmp_path, document, why):
    where = _stored(tmp_path, document)
    with glyphpack.Workspace(tmp_path / "ws") as workspace, pytest.raises(StoreError) as raised:
        read_view(workspace, "c", "main")
    assert str(raised.value) == f"{where} is damaged ({why}); delete it to send the full transcript again"


def test_a_fork_renames_the_view_its_messages_and_the_refs_its_notes_name():
    png = Image("image/png", PNG)
    note = f"[results elided; {recall_hint(range_ref('old-1', 'old-4'))} and {recall_hint(image_ref('old-2', 1))}]"
    view = StoredView(
        covers="old-4",
        messages=(Message("user", (Text(note),), id="old-1"),
                  Message("assistant", (ToolCall("call-1", "read", {"path": "a"}),), id="old-2"),
                  Message("tool", (ToolResult("call-1", (Text(f"cut; {recall_hint('call-1')}"), png)),), id="old-3"),
                  Message("user", "kept as it is", id="untouched")),
        source=("old-1", "old-4"), shape="5x8", pages=2, trigger="/compact",
    )
    renamed = {"old-1": "new-1", "old-2": "new-2", "old-3": "new-3", "old-4": "new-4"}
    forked = renamed_view(view, renamed)
    assert forked.covers == "new-4" and forked.source == ("new-1", "new-4")
    assert [m.id for m in forked.messages] == ["new-1", "new-2", "new-3", "untouched"]
    assert forked.messages[0].text == f"[results elided; {recall_hint(range_ref('new-1', 'new-4'))} and {recall_hint(image_ref('new-2', 1))}]"
    assert forked.messages[1].content == view.messages[1].content and forked.messages[3] == view.messages[3]
    result = forked.messages[2].content[0]
    assert isinstance(result, ToolResult) and result.content == (Text("cut; " + recall_hint("call-1")), png)  # a call's id stays
    assert (forked.shape, forked.pages, forked.trigger) == ("5x8", 2, "/compact")
    # ids the fork did not rename stay, at both ends of a range and alone
    assert renamed_view(StoredView("x", (), source=("x", "y")), renamed) == StoredView("x", (), source=("x", "y"))


def test_short_refs_are_renamed_to_the_same_start_of_the_new_id():
    renamed = {"conv/aaaaaaaa-1111": "fork/bbbbbbbb-1111", "conv/aaaaaaaa-2222": "fork/bbbbbbbb-2222", "conv/cccccccc-3333": "fork/dddddddd-3333"}
    # a unique start (at least SHORT_ID characters) renamed to the new id's start, longer where the new ids share it
    assert renamed_refs(recall_hint(range_ref("conv/ccc", "conv/aaaaaaaa-2")), renamed) == recall_hint(range_ref("fork/ddd", "fork/bbbbbbbb-2"))
    # a start two old ids share names neither: left as it is
    assert renamed_refs(recall_hint(range_ref("conv/aaaaaaaa", "conv/ccc")), renamed) == recall_hint(range_ref("conv/aaaaaaaa", "fork/ddd"))
    # shorter than a short id: not a ref to rename
    assert renamed_refs(recall_hint(image_ref("conv/cc", 2)), renamed) == recall_hint(image_ref("conv/cc", 2))
    assert renamed_refs(recall_hint(image_ref("conv/cccccccc-3333", 12)), renamed) == recall_hint(image_ref("fork/dddddddd-3333", 12))
    # not a ref form, or a hint whose JSON is not a string: unchanged
    for text in ('ref "conv/cccccccc-3333:image:x"', "ref 12", 'no hint "conv/cccccccc-3333"'):
        assert renamed_refs(text, renamed) == text


def test_a_harness_compaction_stands_for_everything_before_its_summary():
    messages = (Message("system", "sys", id="s"), Message("user", "task", id="u1"), Message("assistant", "done", id="a1"),
                Message("user", "[summary]", id="sum"), Message("assistant", "go on", id="a2"))
    view = harness_view(messages, "sum", "Claude Code")
    assert view == StoredView(
        covers="a1", messages=(messages[0],), source=("s", "a1"), trigger="harness",
        report="Claude Code compacted here: the 2 messages before its summary are not sent (recallable)",
    )
    assert harness_view(messages, "s", "pi") is None  # nothing before it
    assert harness_view(messages, "gone", "pi") is None
    assert harness_view(messages[1:], "a2", "Codex").report.startswith("Codex compacted here: the 3 messages")


def test_the_view_counts_and_reads_the_archive_of_each_transcript_alone(tmp_path):
    second = StoredView("m12", (), trigger="/compact")
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        write_view(workspace, "c", "main", EVERY_FIELD)
        write_view(workspace, "c", "main", second)
        write_view(workspace, "c", "helper", StoredView("h1", ()))
        assert archived(workspace, "c", "main") == 2 and archived(workspace, "c", "helper") == 1 and archived(workspace, "d", "main") == 0
        assert read_archive(workspace, "c", "main") == [EVERY_FIELD, second] and read_view(workspace, "c", "main") == second
        older = workspace.backend.views("c", "main")[0][0]
    Path(older).write_text("{}")
    with glyphpack.Workspace(tmp_path / "ws") as workspace, pytest.raises(StoreError, match=f"^{re.escape(older)} is damaged"):
        read_archive(workspace, "c", "main")


def test_a_fork_renames_refs_inside_tool_results_too():
    result = ToolResult("call-1", (Text(f"elided: {recall_hint(range_ref('old-1', 'old-2'))}"),))
    view = StoredView("old-2", (Message("tool", (result,), id="old-2"),))
    forked = renamed_view(view, {"old-1": "new-1", "old-2": "new-2"})
    assert forked.messages[0].content == (ToolResult("call-1", (Text(f"elided: {recall_hint(range_ref('new-1', 'new-2'))}"),)),)


def test_a_short_ref_grows_where_the_new_ids_share_its_start():
    renamed = {"a/xxxxxxxx-1": "forked/zzzz-1", "a/yyyyyyyy-2": "forked/zzzz-2", "a/wwwwwwww-3": "other/vvvv-3"}
    assert renamed_refs(recall_hint(image_ref("a/xxxxxxxx", 1)), renamed) == recall_hint(image_ref("forked/zzzz-1", 1))
    assert renamed_refs(recall_hint(image_ref("a/wwwwwwww", 1)), renamed) == recall_hint(image_ref("other/vvvv", 1))
    # a call id with the range separator in it is not a range: a fork keeps call ids
    assert renamed_refs('ref "a/xxxxxxxx-1..a/yyyyyyyy-2"', renamed) == 'ref "a/xxxxxxxx-1..a/yyyyyyyy-2"'


def test_a_hint_writes_its_ref_as_it_is():
    assert recall_hint("toolu_café") == 'ref "toolu_café"'  # not \\u00e9: the model copies what it reads


def test_a_short_ref_grows_one_character_at_a_time():
    renamed = {"a/xxxxxxxx-1": "forked/zzz1xx", "a/yyyyyyyy-2": "forked/zzz2xx"}
    assert renamed_refs(recall_hint(image_ref("a/xxxxxxxx", 1)), renamed) == recall_hint(image_ref("forked/zzz1", 1))
