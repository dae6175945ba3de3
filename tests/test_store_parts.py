"""The workspace's parts a proxy and the CLI lean on, each exact: who holds a
conversation (``owner``), deleting one, the compaction archive's order and its older
layout, and the in-memory store's contract."""

from __future__ import annotations

import copy
import json

import pytest
from histories import histories
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from glyphpack import ConflictError, MemoryStore, Message, StoreError, Text, Workspace


def history(turns: int) -> list[Message]:
    """``turns`` exchanges with fresh ids (two agents of a conversation share its tree)."""
    out = [Message("system", (Text("be brief"),))]
    for n in range(turns):
        out += [Message("user", (Text(f"ask {n}"),)), Message("assistant", (Text(f"answer {n}"),))]
    return out


@pytest.fixture
def workspace(workspace_location):
    with Workspace(workspace_location) as ws:
        yield ws


def test_a_conversations_owner_is_kept_as_its_salt_and_digest_only(workspace):
    assert workspace.owner("c1") is None
    workspace.set_owner("c1", {"salt": "s1", "digest": "d1"})
    assert workspace.owner("c1") == {"salt": "s1", "digest": "d1"}
    assert workspace.owner("c2") is None  # each conversation its own
    workspace.set_owner("c1", {"salt": "s2", "digest": "d2", "extra": "x"})
    assert workspace.owner("c1") == {"salt": "s2", "digest": "d2"}
    with pytest.raises(StoreError):
        workspace.set_owner("../escape", {"salt": "s", "digest": "d"})


def test_an_owner_record_that_is_not_one_is_no_owner(tmp_path):
    from glyphpack._history.store import OWNER_AGENT

    with Workspace(tmp_path / "ws") as ws:
        ws.set_owner("c1", {"salt": "s", "digest": "d"})
        for record in ({"owner": {"salt": 1, "digest": "d"}}, {"owner": {"salt": "s"}}, {"owner": "s:d"}, [1, 2], "text"):
            ws.backend.put_measured("c1", OWNER_AGENT, json.dumps(record).encode())
            assert ws.owner("c1") is None
        ws.backend.put_measured("c1", OWNER_AGENT, b"not json")
        assert ws.owner("c1") is None
        ws.set_owner("c1", {"salt": "s", "digest": "d"})  # over a broken record: written afresh
        assert ws.owner("c1") == {"salt": "s", "digest": "d"}


def test_an_owner_is_kept_beside_what_was_measured(tmp_path):
    from glyphpack._history.store import OWNER_AGENT

    with Workspace(tmp_path / "ws") as ws:
        ws.backend.put_measured("c1", OWNER_AGENT, json.dumps({"format": 1, "model": "m"}).encode())
        ws.set_owner("c1", {"salt": "s", "digest": "d"})
        kept = json.loads(ws.backend.measured("c1", OWNER_AGENT)[1])
        assert kept == {"format": 1, "model": "m", "owner": {"salt": "s", "digest": "d"}}


def test_deleting_a_conversation_removes_it_whole_and_leaves_the_others(workspace):
    workspace.save("gone", "main", history(2), revision=0)
    workspace.save("gone", "helper", history(1), revision=0)
    workspace.save("kept", "main", history(1), revision=0)
    workspace.delete("gone")
    assert [c for c, _ in workspace.transcripts()] == ["kept"]
    assert workspace.load("gone", "main").state == "empty" and workspace.load("kept", "main").state == "answered"
    assert "gone" not in {c.id for c in workspace.tree.conversations()}
    with pytest.raises(StoreError, match=r"^no conversation 'gone' in "):
        workspace.delete("gone")


def test_a_deleted_folder_conversation_leaves_no_files_and_can_start_again(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        ws.save("gone", "main", history(2), revision=0)
        folder = ws.backend.transcript_path("gone", "main").parent
        ws.delete("gone")
        assert not folder.exists() and not list(folder.parent.glob(".deleting-*"))
        fresh = history(1)
        again = ws.save("gone", "main", fresh, revision=0)  # what it knew of the old file is forgotten
        assert again.revision == 1 and ws.load("gone", "main").messages == tuple(fresh)


def test_the_archive_is_read_in_number_order_from_either_layout(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        ws.save("c1", "main", history(1), revision=0)
        folder = ws.backend.transcript_path("c1", "main").parent
        legacy = folder / "main.views"
        legacy.mkdir()
        for number in (10, 2, 9):  # numbers, not names: 9 before 10
            (legacy / f"{number}.json").write_bytes(json.dumps({"n": number}).encode())
        (legacy / "0003.json.tmp").write_bytes(b"{}")
        (legacy / "notes.json").write_bytes(b"{}")
        assert [json.loads(raw)["n"] for _, raw in ws.backend.views("c1", "main")] == [2, 9, 10]
        assert ws.backend.count_views("c1", "main") == 3
        ws.backend.put_view("c1", "main", json.dumps({"n": 11}).encode())  # the current layout from now on
        assert [json.loads(raw)["n"] for _, raw in ws.backend.views("c1", "main")] == [11]
        archive = folder / "_archive" / "main"
        (archive / "0100.json").write_bytes(json.dumps({"n": 100}).encode())
        (archive / "0020.json").write_bytes(json.dumps({"n": 20}).encode())
        assert [json.loads(raw)["n"] for _, raw in ws.backend.views("c1", "main")] == [11, 20, 100]
        ws.backend.put_view("c1", "main", json.dumps({"n": 101}).encode())
        assert (archive / "0101.json").is_file()  # numbered after the highest


def test_the_memory_store_keeps_the_folder_stores_contract():
    store = MemoryStore()
    assert store.load("c1", "main").state == "empty" and store.transcripts() == []
    first = store.save("c1", "main", history(1), revision=0, checkpoints={"start": None})
    assert (first.revision, first.state, first.checkpoints) == (1, "answered", {"start": None})
    loaded = store.load("c1", "main")
    assert loaded.messages == first.messages and loaded.revision == 1 and loaded.checkpoints == {"start": None}
    grown = store.save("c1", "main", [*first.messages, *history(1)[1:]], revision=1)
    assert grown.revision == 2
    with pytest.raises(ConflictError):
        store.save("c1", "main", list(grown.messages), revision=1)  # a stale revision
    with pytest.raises(StoreError, match=r"^c1/main: this save would drop 2 stored messages"):
        store.save("c1", "main", list(first.messages), revision=2)  # a shorter history without replace
    replaced = store.save("c1", "main", list(first.messages), revision=2, replace=True, error="stopped")
    assert (replaced.revision, replaced.error, store.load("c1", "main").error) == (3, "stopped", "stopped")
    assert store.transcripts() == [("c1", "main")] and "1 transcripts" in repr(store)
    kept = store.load("c1", "main", keep=1)
    assert len(kept.messages) <= len(first.messages)
    with pytest.raises(StoreError):
        store.load("../x", "main")


def test_reconcile_brings_a_tree_left_behind_by_a_crash_to_the_transcript(workspace, monkeypatch):
    from glyphpack._history.tree import SessionTree

    first = history(1)
    workspace.save("c", "a", first, revision=0)
    real_record = SessionTree.record
    monkeypatch.setattr(SessionTree, "record", lambda *args, **kwargs: 0)
    grown = [*first, *history(2)[1:]]
    workspace.save("c", "a", grown, revision=1)  # a crash between the transcript and the tree
    monkeypatch.setattr(SessionTree, "record", real_record)
    assert workspace.tree.agent_tip("c", "a") == first[-1].id
    assert workspace.reconcile("c", "a") == len(grown) - len(first)
    assert workspace.tree.agent_tip("c", "a") == grown[-1].id
    assert list(workspace.tree.path_to(grown[-1].id)) == grown
    assert workspace.reconcile("c", "a") == 0  # they agree: nothing written
    assert workspace.reconcile("never", "a") == 0


# ---------------------------------------------------------------------- trimming, exactly


def _trimmable() -> list[Message]:
    """system | u1 a1 | u2 a2(call) result a3 | u3 a4: the turns start at 1, 3 and 7
    (the result, a user message, is not a start: its call would be cut from it)."""
    from glyphpack import ToolCall, ToolResult

    return [
        Message("system", (Text("be brief"),)),
        Message("user", (Text("first question " * 10),)),
        Message("assistant", (Text("first answer " * 10),)),
        Message("user", (Text("second question"),)),
        Message("assistant", (ToolCall("call_1", "read", {"path": "a.py"}),)),
        Message("user", (ToolResult("call_1", (Text("print(1)\n" * 20),)),)),
        Message("assistant", (Text("second answer"),)),
        Message("user", (Text("third question"),)),
        Message("assistant", (Text("third answer"),)),
    ]


def test_trimming_by_count_keeps_the_longest_suffix_within_it_on_both_sides_of_each_start():
    from glyphpack._history.store import trim_start

    messages = _trimmable()
    assert trim_start(messages) == 1  # no limit: only the system messages are "cut"
    assert [trim_start(messages, keep=k) for k in range(10)] == [7, 7, 7, 7, 7, 7, 3, 3, 1, 1]
    assert trim_start(messages[:1], keep=1) == 1  # no turn to keep: the system message only
    assert trim_start([], keep=1) == 0


def test_trimming_by_budget_counts_each_kept_message_and_takes_the_stricter_of_two_limits():
    from glyphpack._history.pricing import EstimatePricer, message_tokens
    from glyphpack._history.store import trim_start

    messages = _trimmable()
    pricer = EstimatePricer()
    tokens = [message_tokens(m, pricer) for m in messages]
    from_3, from_1, from_7 = sum(tokens[3:]), sum(tokens[1:]), sum(tokens[7:])
    assert trim_start(messages, budget=from_1) == 1
    assert trim_start(messages, budget=from_1 - 1) == 3
    assert trim_start(messages, budget=from_3) == 3
    assert trim_start(messages, budget=from_3 - 1) == 7
    assert trim_start(messages, budget=from_7 - 1) == 7  # nothing fits: the shortest valid history
    assert trim_start(messages, keep=8, budget=from_3) == 3 and trim_start(messages, keep=6, budget=from_1) == 3
    assert trim_start(messages, keep=2, budget=from_1) == 7


# ---------------------------------------------------------------------- locations


@pytest.mark.parametrize(
    "location, database",
    [
        ("postgresql://user@host/db", True),
        ("postgres://host/db", True),
        ("POSTGRESQL://host/db", True),
        ("PostGres://host/db", True),
        ("/var/lib/glyphpack", False),
        ("relative/folder", False),
        ("c:\\glyphpack", False),
        ("1abc://x", False),  # not a URL scheme: a folder of that name
        ("a_b://x", False),
        ("postgresql:/host/db", False),
    ],
)
def test_a_location_is_a_database_only_when_its_scheme_says_postgresql(location, database):
    from pathlib import Path

    from glyphpack._history.store import is_database_location

    assert is_database_location(location) is database
    assert is_database_location(Path(location)) is False  # a path object is always a folder


@pytest.mark.parametrize("url", ["http://user:s3cret@host/x", "s3://bucket/key", "a+b.c-d://x", "SQLITE://x.db"])
def test_any_other_url_is_refused_without_its_credentials(url):
    from glyphpack._history.store import is_database_location

    with pytest.raises(StoreError) as raised:
        is_database_location(url)
    assert str(raised.value).endswith(" is not a workspace: a workspace is a folder or a postgresql:// URL")
    assert "s3cret" not in str(raised.value)
    assert str(raised.value).startswith(url.replace("user:s3cret@", "user:***@") if "s3cret" in url else url)


# ---------------------------------------------------------------------- folder files


def test_a_write_failure_names_the_transcript_and_its_reason(tmp_path, monkeypatch):
    import errno

    import glyphpack._history.folder as store

    with Workspace(tmp_path) as ws:
        first = history(1)
        ws.save("c", "a", first, revision=0)
        path = ws.transcript_path("c", "a")

        def disk_full(*args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(store, "atomic_write", disk_full)
        rewritten = [*copy.deepcopy(first), *history(1)[1:]]  # equal messages, not the stored objects: written whole
        with pytest.raises(StoreError) as raised:
            ws.save("c", "a", rewritten, revision=1)
        assert str(raised.value) == f"could not write {path}: No space left on device; the previous file is intact"
        monkeypatch.setattr(store, "atomic_write", lambda *a, **k: (_ for _ in ()).throw(OSError("bare")))
        with pytest.raises(StoreError) as raised:
            ws.save("c", "a", rewritten, revision=1)
        assert str(raised.value) == f"could not write {path}: bare; the previous file is intact"
        assert ws.load("c", "a").revision == 1


def test_a_crashed_writers_temporaries_are_removed_by_the_next_save_and_only_this_transcripts(tmp_path):
    with Workspace(tmp_path) as ws:
        first = history(1)
        ws.save("c", "a", first, revision=0)
        ws.save("c", "b", history(1), revision=0)
        path = ws.transcript_path("c", "a")
        mine = path.parent / f".{path.name}.k3j_x9zq.tmp"
        theirs = path.parent / ".b.json.ab12cd34.tmp"
        mine.write_bytes(b"half")
        theirs.write_bytes(b"half")
        ws.save("c", "a", [*copy.deepcopy(first), *history(1)[1:]], revision=1)  # not the stored objects: written whole
        assert not mine.exists() and theirs.exists()


def test_a_transcript_rewritten_by_another_process_is_read_again(tmp_path):
    """The folder store keeps what it last read, by the file's identity: another
    process's save (an atomic rename: a new inode) is read, an untouched file is not."""
    with Workspace(tmp_path) as one, Workspace(tmp_path) as other:
        first = history(1)
        one.save("c", "a", first, revision=0)
        stored = one.backend.read("c", "a")
        assert one.backend.read("c", "a") is stored  # unchanged: not read again
        other.save("c", "a", [*first, *history(1)[1:]], revision=1)
        again = one.backend.read("c", "a")
        assert again is not None and again.revision == 2 and len(again.messages) == 5


# ---------------------------------------------------------------------- import and sync, exactly


def _imported(main: list[Message], *, sub: list[Message] | None = None, branches: tuple[tuple[Message, ...], ...] = (), title: str = "A title"):
    from glyphpack._history.imported import ImportedAgent, ImportedSession, ImportReport

    agents = (ImportedAgent("main", tuple(main)), *((ImportedAgent("sub/1", tuple(sub)),) if sub is not None else ()))
    return ImportedSession(title, agents, branches, ImportReport(format="test"))


def _file_turns(count: int, start: int = 0) -> list[Message]:
    return [m for n in range(start, start + count) for m in (Message("user", (Text(f"q{n}"),), id=f"u{n}"), Message("assistant", (Text(f"a{n}"),), id=f"a{n}"))]


def _scoped(conversation: str, messages: list[Message]) -> list[str]:
    return [f"{conversation}/{m.id}" for m in messages]


def test_an_import_scopes_ids_names_agents_and_refuses_a_second_import_under_one_name(workspace):
    main, sub = _file_turns(2), [Message("user", (Text("look"),), id="s0"), Message("assistant", (Text("seen"),), id="s1")]
    branch = (*_file_turns(1), Message("user", (Text("other way"),), id="b0"), Message("assistant", (Text("ok"),), id="b1"))
    saved = workspace.import_session(_imported(main, sub=sub, branches=(branch,)), "conv")
    assert [(t.conversation, t.agent, [m.id for m in t.messages]) for t in saved] == [
        ("conv", "main", _scoped("conv", main)),
        ("conv", "sub-1", _scoped("conv", sub)),
    ]
    assert workspace.load("conv", "sub-1").messages == saved[1].messages
    assert workspace.tree.tip("conv") == "conv/a1"
    assert {n.message.id for n in workspace.tree.nodes("conv")} == {*_scoped("conv", main), *_scoped("conv", sub), "conv/b0", "conv/b1"}
    assert [c.title for c in workspace.tree.conversations() if c.id == "conv"] == ["A title"]
    with pytest.raises(StoreError) as raised:
        workspace.import_session(_imported(main), "conv")
    assert str(raised.value) == f"conversation 'conv' is already in {workspace.location}; import it under another name"
    again = workspace.import_session(_imported([*main, *_file_turns(1, start=2)]), "conv", replace=True)
    assert [m.id for m in again[0].messages] == _scoped("conv", [*main, *_file_turns(1, start=2)])
    assert workspace.tree.tip("conv") == "conv/a2"


def test_a_sync_appends_to_each_agent_only_what_its_file_added(workspace):
    main, sub = _file_turns(2), _file_turns(1, start=10)
    assert workspace.sync_session(_imported(main, sub=sub), "conv")[0] == "new"
    assert workspace.sync_session(_imported(main, sub=sub), "conv") == ("unchanged", [])
    state, saved = workspace.sync_session(_imported(main, sub=[*sub, *_file_turns(1, start=11)]), "conv")
    assert state == "appended" and [(t.agent, t.revision, len(t.messages)) for t in saved] == [("sub-1", 2, 4)]
    assert workspace.load("conv", "main").revision == 1  # the unchanged agent is not saved again
    state, saved = workspace.sync_session(_imported([*main, *_file_turns(1, start=2)], sub=[*sub, *_file_turns(1, start=11)]), "conv")
    assert state == "appended" and [(t.agent, [m.id for m in t.messages]) for t in saved] == [("main", _scoped("conv", [*main, *_file_turns(1, start=2)]))]
    assert workspace.tree.tip("conv") == "conv/a2"


def test_a_sync_adds_a_new_branch_alone_and_keeps_the_tip(workspace):
    main = _file_turns(2)
    workspace.sync_session(_imported(main), "conv")
    branch = (*_file_turns(1), Message("user", (Text("other way"),), id="b0"), Message("assistant", (Text("ok"),), id="b1"))
    assert workspace.sync_session(_imported(main, branches=(branch,)), "conv") == ("appended", [])
    assert {"conv/b0", "conv/b1"} <= {n.message.id for n in workspace.tree.nodes("conv")}
    assert workspace.tree.tip("conv") == "conv/a1" and workspace.load("conv", "main").revision == 1
    assert workspace.sync_session(_imported(main, branches=(branch,)), "conv") == ("unchanged", [])  # known: nothing to add


def test_a_sync_refuses_a_rewritten_or_shortened_past_naming_the_message_and_writes_nothing(workspace):
    main = _file_turns(3)
    workspace.sync_session(_imported(main), "conv")
    rewritten = [*main[:3], Message("assistant", (Text("a1, edited"),), id="a1"), *main[4:]]
    for file, where in ((rewritten, 4), (main[:4], 5), (main[:1], 2)):
        with pytest.raises(StoreError) as raised:
            workspace.sync_session(_imported([*file, *_file_turns(1, start=5)] if where == 4 else file), "conv")
        assert str(raised.value) == (
            f"conversation 'conv', agent 'main': the file's history differs from the stored one at message {where} "
            "(its harness rewrote the past); nothing synced: import it under another name to keep both"
        )
    assert workspace.load("conv", "main").revision == 1 and [m.id for m in workspace.load("conv", "main").messages] == _scoped("conv", main)


def test_a_stand_in_result_gives_way_to_the_files_own_and_stays_while_the_file_has_none(workspace):
    from glyphpack import ToolCall, ToolResult

    call = Message("assistant", (ToolCall("t1", "read", {"path": "a.py"}),), id="a0")
    stand_in = Message("tool", (ToolResult("t1", (Text("[no result yet]"),), True),), id="a0-missing-results")
    real = Message("tool", (ToolResult("t1", (Text("print(1)"),)),), id="r0")
    task = Message("user", (Text("read a.py"),), id="u0")
    workspace.sync_session(_imported([task, call, stand_in]), "conv")
    assert workspace.sync_session(_imported([task, call, stand_in]), "conv") == ("unchanged", [])
    state, saved = workspace.sync_session(_imported([task, call, real, Message("assistant", (Text("done"),), id="a1")]), "conv")
    assert state == "appended" and [m.id for m in saved[0].messages] == ["conv/u0", "conv/a0", "conv/r0", "conv/a1"]
    assert "conv/a0-missing-results" in {n.message.id for n in workspace.tree.nodes("conv")}  # in the tree, off the path
    # A stand-in the file no longer reaches (the file was cut back to the call) is dropped too.
    other = workspace.sync_session(_imported([task, call, stand_in]), "other")[1][0]
    assert [m.id for m in other.messages] == ["other/u0", "other/a0", "other/a0-missing-results"]
    with pytest.raises(StoreError, match="at message 2 "):
        workspace.sync_session(_imported([task]), "other")


# ---------------------------------------------------------------------- the record beside a transcript


def test_the_record_beside_a_transcript_keeps_calibration_settings_and_measured_requests_apart(workspace):
    assert workspace.calibration("c", "a") is None and workspace.settings("c", "a") == {} and workspace.measured("c", "a") == []
    workspace.save_calibration("c", "a", {"scale": 1.1, "overhead": 40}, {"model": "m", "context_window": 1000, "threshold": True, "target": "9", "x": 1})
    assert workspace.calibration("c", "a") == {"scale": 1.1, "overhead": 40}
    assert workspace.settings("c", "a") == {"model": "m", "context_window": 1000}  # only what reads as a setting
    workspace.save_calibration("c", "a", {"overhead": 41})  # no settings given: the kept ones stay
    assert workspace.settings("c", "a") == {"model": "m", "context_window": 1000} and workspace.calibration("c", "a") == {"overhead": 41}
    assert workspace.calibration("c", "b") is None  # each agent its own


def test_an_older_record_or_one_that_is_not_an_object_reads_as_far_as_it_goes(tmp_path):
    from glyphpack._history.store import MEASURED_FORMAT

    with Workspace(tmp_path / "ws") as ws:
        first = history(1)
        ws.save("c", "a", first, revision=0)
        ws.backend.put_measured("c", "a", json.dumps({"format": MEASURED_FORMAT, "overhead": 7, "settings": "model"}).encode())
        assert ws.calibration("c", "a") == {"overhead": 7} and ws.settings("c", "a") == {}
        ws.backend.put_measured("c", "a", json.dumps({"first": first[1].id, "last": first[2].id, "tokens": 900}).encode())
        assert ws.measured("c", "a") == [(tuple(first[1:3]), 900)]  # the first layout: one request
        for damaged in (b"[1, 2]", b"not json"):
            ws.backend.put_measured("c", "a", damaged)
            assert ws.calibration("c", "a") is None and ws.measured("c", "a") == []
        ws.backend.put_measured("c", "a", json.dumps({"requests": [[first[1].id, first[2].id, "lots"]]}).encode())
        with pytest.raises(StoreError) as raised:
            ws.measured("c", "a")
        where = ws.backend.measured("c", "a")[0]
        assert str(raised.value) == f"{where} is damaged (invalid literal for int() with base 10: 'lots'); delete it"


def test_measured_requests_are_those_still_in_the_transcript_in_order_and_counted(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        first = history(2)
        ws.save("c", "a", first, revision=0)
        ids = [m.id for m in first]
        requests = [[ids[1], ids[1], 100], [ids[1], ids[3], 300], [ids[3], ids[1], 50], ["gone", ids[3], 70], [ids[1], ids[3], 0]]
        ws.backend.put_measured("c", "a", json.dumps({"requests": requests}).encode())
        assert ws.measured("c", "a") == [((first[1],), 100), (tuple(first[1:4]), 300)]


# ---------------------------------------------------------------------- refusals, word for word


def _refused(call) -> str:
    with pytest.raises(StoreError) as raised:
        call()
    return str(raised.value)


BAD = "../escape"
ID_RULE = "is not allowed: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"


def test_each_id_is_refused_by_what_it_names(tmp_path):
    from glyphpack._history.imported import ImportedAgent, ImportedSession, ImportReport

    session = ImportedSession("t", (ImportedAgent("main", tuple(history(1))),), (), ImportReport(format="test"))
    with Workspace(tmp_path / "ws") as ws:
        assert _refused(lambda: ws.import_session(session, BAD)) == f"conversation id {BAD!r} {ID_RULE}"
        assert _refused(lambda: ws.sync_session(session, BAD)) == f"conversation id {BAD!r} {ID_RULE}"
        assert _refused(lambda: ws.set_owner(BAD, {"salt": "s", "digest": "d"})) == f"conversation id {BAD!r} {ID_RULE}"
        assert _refused(lambda: ws.backend.delete(BAD)) == f"conversation id {BAD!r} {ID_RULE}"
    memory = MemoryStore()
    assert _refused(lambda: memory.load(BAD, "a")) == f"conversation id {BAD!r} {ID_RULE}"
    assert _refused(lambda: memory.load("c", BAD)) == f"agent id {BAD!r} {ID_RULE}"
    assert _refused(lambda: memory.save(BAD, "a", history(1), revision=0)) == f"conversation id {BAD!r} {ID_RULE}"
    assert _refused(lambda: memory.save("c", BAD, history(1), revision=0)) == f"agent id {BAD!r} {ID_RULE}"


def test_agent_names_from_a_file_become_ids(tmp_path):
    from glyphpack._history.imported import ImportedAgent, ImportedSession, ImportReport

    names = ["main", "sub/1", "sub-1", "-.odd.-", "日本", "Ünïcode", "x" * 200, ".hidden_agent"]
    agents = tuple(ImportedAgent(name, tuple(history(1))) for name in names)
    with Workspace(tmp_path / "ws") as ws:
        saved = ws.import_session(ImportedSession("t", agents, (), ImportReport(format="test")), "c")
    # a name of other letters only was refused as an id, and the whole import with it
    assert [t.agent for t in saved] == ["main", "sub-1", "sub-1-2", "odd", "agent", "n-code", "x" * 128, "hidden_agent"]


def test_checkpoints_rewind_branch_fork_and_delete_say_what_they_cannot_do(workspace):
    from glyphpack import HistoryError, ToolCall, ToolResult

    first = history(2)
    workspace.save("c", "a", first, revision=0)
    assert _refused(lambda: workspace.rewind("c", "a", "nowhere", "digest")) == "no checkpoint 'nowhere' in c/a (checkpoints: none)"
    workspace.checkpoint("c", "a", "b-mark")
    workspace.checkpoint("c", "a", "a-mark")
    assert _refused(lambda: workspace.rewind("c", "a", "nowhere", "digest")) == "no checkpoint 'nowhere' in c/a (checkpoints: a-mark, b-mark)"
    calling = [*first, Message("user", (Text("run it"),)), Message("assistant", (ToolCall("t1", "run", {}), ToolCall("t2", "run", {})))]
    workspace.save("c", "a", calling[: len(first) + 1], revision=workspace.load("c", "a").revision)
    workspace.tree.append("c", calling[-1])
    call_id = calling[-1].id
    before = calling[len(first)].id  # the user's message: a boundary; no results under the call yet
    assert _refused(lambda: workspace.branch("c", "a", call_id)) == (
        f"message {call_id!r} has tool calls without results: branch to a turn boundary (nearest: before it, {before})")
    results = Message("tool", (ToolResult("t1", (Text("one"),)), ToolResult("t2", (Text("two"),))))
    workspace.tree.add_paths("c", [[*calling, results]], tip=workspace.tree.tip("c"))
    assert _refused(lambda: workspace.branch("c", "a", call_id)) == (
        f"message {call_id!r} has tool calls without results: branch to a turn boundary (nearest: after it, {results.id} (its results); before it, {before})")
    with pytest.raises(HistoryError) as raised:
        workspace.fork("c", "a", at=call_id)
    assert str(raised.value) == (f"cannot fork 'c' at {call_id!r}: it is mid-turn (calls t1, t2 have no results there); "
                                 "fork at the message with their results, or before the call")
    assert _refused(lambda: workspace.delete("nowhere")) == f"no conversation 'nowhere' in {workspace.location}"
    workspace.tree.create("tree-only")  # a conversation with a tree and no transcript is still one to delete
    workspace.delete("tree-only")
    assert "tree-only" not in {c.id for c in workspace.tree.conversations()}


def test_a_checkpoint_keeps_the_error_a_failed_turn_was_saved_with(workspace):
    asked = history(1)[:2]
    workspace.save("c", "a", asked, revision=0, error="the provider timed out")
    marked = workspace.checkpoint("c", "a", "before-retry")
    assert marked.error == "the provider timed out" and marked.checkpoints == {"before-retry": asked[-1].id}
    assert workspace.load("c", "a").error == "the provider timed out"


def test_a_failed_turn_may_be_retried_from_its_start_and_nothing_answered_is_dropped(workspace):
    first = history(2)
    workspace.save("c", "a", first, revision=0)
    asked = [*first, Message("user", (Text("and then?"),))]
    workspace.save("c", "a", asked, revision=1, error="overloaded")
    retried = [*first, Message("user", (Text("and then, in short?"),))]
    assert workspace.save("c", "a", retried, revision=2).messages == tuple(retried)  # the unanswered question rewritten
    with pytest.raises(StoreError, match="would rewrite the stored history"):
        workspace.save("c", "a", [first[0], first[2], first[1], *first[3:], *retried[-1:]], revision=3)  # every message, not in order
    assert workspace.save("c", "a", first, revision=3).messages == tuple(first)  # the unanswered question may go
    with pytest.raises(StoreError, match="would drop 2 stored messages"):
        workspace.save("c", "a", first[:3], revision=4)  # the answered turn may not


def test_records_beside_transcripts_say_their_format_and_sit_in_their_own_folder(tmp_path):
    from glyphpack._history.imported import ImportedAgent, ImportedSession, ImportReport
    from glyphpack._history.store import MEASURED_FORMAT

    with Workspace(tmp_path / "ws") as ws:
        ws.save("c", "a", history(1), revision=0)
        ws.save_calibration("c", "a", {"overhead": 3})
        where, raw = ws.backend.measured("c", "a")
        assert where == str(tmp_path / "ws" / "transcripts" / "c" / "_measured" / "a.json")
        assert json.loads(raw) == {"format": MEASURED_FORMAT, "calibration": {"overhead": 3}}
        ws.set_owner("d", {"salt": "s", "digest": "x"})
        assert json.loads(ws.backend.measured("d", "main")[1]) == {"format": MEASURED_FORMAT, "owner": {"salt": "s", "digest": "x"}}
        plain = ImportedSession("t", (ImportedAgent("main", tuple(history(1))),), (), ImportReport(format="test"))
        ws.import_session(plain, "quiet")
        # No usage, no model: only the harness that wrote it (the index of glyphpack serve shows it).
        assert json.loads(ws.backend.measured("quiet", "main")[1]) == {"format": "glyphpack-measured", "harness": plain.report.format}
        counted = ImportedSession("t", (ImportedAgent("main", tuple(history(1)), usage=((1, 2, 500),), model="m"),), (), ImportReport(format="test"))
        ws.import_session(counted, "counted")
        stored = ws.load("counted", "main").messages
        assert json.loads(ws.backend.measured("counted", "main")[1]) == {
            "format": MEASURED_FORMAT, "requests": [[stored[1].id, stored[1].id, 500]], "settings": {"model": "m"}, "harness": "test"}


def test_the_memory_stores_transcript_is_unanswered_after_a_failed_turn_whatever_came_last():
    memory = MemoryStore()
    answered = history(1)
    saved = memory.save("c", "a", answered, revision=0, error="timed out")
    assert (saved.state, saved.error, saved.revision) == ("unanswered", "timed out", 1)
    assert memory.save("c", "a", answered, revision=1).state == "answered"


# ---------------------------------------------------------------------- copying a workspace


def test_a_copy_between_folders_reports_each_conversation_and_counts_what_it_copied(tmp_path):
    from glyphpack._history.copy import CopyReport, copy_workspace, workspace_record

    with Workspace(tmp_path / "a") as source, Workspace(tmp_path / "b") as destination:
        source.save("c1", "main", history(2), revision=0)
        source.save("c1", "helper", history(1), revision=0)
        source.save("c2", "main", history(1), revision=0)
        source.save_calibration("c2", "main", {"overhead": 5})
        said: list[str] = []
        report = copy_workspace(source, destination, progress=said.append)
        assert said == ["conversation 1/2: c1", "conversation 2/2: c2"]
        assert report == CopyReport(conversations=2, messages=5 + 3 + 3, transcripts=3, views=0)
        assert workspace_record(destination) == workspace_record(source)
        assert json.loads(destination.backend.measured("c2", "main")[1])["calibration"] == {"overhead": 5}


def test_a_destination_that_gains_a_transcript_during_the_copy_is_refused():
    from glyphpack._history.copy import _exactly
    from glyphpack._history.store import StoredTranscript

    stored = StoredTranscript(1, tuple(history(1)), {}, None)
    assert _exactly(stored)(None) is stored
    with pytest.raises(StoreError) as raised:
        _exactly(stored)(stored)
    assert str(raised.value) == "the destination gained a transcript while it was being copied into"


def test_the_record_a_copy_is_compared_by_holds_every_part_under_its_name(tmp_path):
    from glyphpack._history.copy import workspace_record

    with Workspace(tmp_path / "ws") as ws:
        ws.save("c", "main", [Message("user", (Text("q"),), id="q1", time=5.0), Message("assistant", (Text("a"),), id="a1")], revision=0)
        ws.checkpoint("c", "main", "mark")
        ws.save_calibration("c", "main", {"overhead": 2})
        record = workspace_record(ws)
        created = ws.tree.conversations()[0].created
    question, answer = {"id": "q1", "role": "user", "content": [{"type": "text", "text": "q"}], "time": 5.0}, {"id": "a1", "role": "assistant", "content": [{"type": "text", "text": "a"}]}
    assert record == {
        "conversations": {"c": {
            "conversation": "c", "title": "q", "tip": "a1", "messages": [{**question, "parent": None}, {**answer, "parent": "q1"}],
            "created": created, "agent_tips": {"main": "a1"}, "labels": {"mark": "a1"}, "main": "main",
        }},
        "transcripts": {"c/main": {
            "revision": 2, "error": None, "checkpoints": {"mark": "a1"}, "messages": [question, answer], "views": [],
            "measured": {"format": "glyphpack-measured", "calibration": {"overhead": 2}},
        }},
    }


def test_each_store_refuses_a_bad_id_by_its_name_and_counts_its_views(workspace):
    assert _refused(lambda: workspace.load(BAD, "a")) == f"conversation id {BAD!r} {ID_RULE}"
    assert _refused(lambda: workspace.load("c", BAD)) == f"agent id {BAD!r} {ID_RULE}"
    assert _refused(lambda: workspace.save(BAD, "a", history(1), revision=0)) == f"conversation id {BAD!r} {ID_RULE}"
    assert _refused(lambda: workspace.save("c", BAD, history(1), revision=0)) == f"agent id {BAD!r} {ID_RULE}"
    assert _refused(lambda: workspace.backend.put_measured(BAD, "a", b"{}")) == f"conversation id {BAD!r} {ID_RULE}"
    assert _refused(lambda: workspace.backend.put_measured("c", BAD, b"{}")) == f"agent id {BAD!r} {ID_RULE}"
    assert _refused(lambda: workspace.backend.put_view(BAD, "a", b"{}")) == f"conversation id {BAD!r} {ID_RULE}"
    assert _refused(lambda: workspace.backend.put_view("c", BAD, b"{}")) == f"agent id {BAD!r} {ID_RULE}"
    assert _refused(lambda: workspace.delete(BAD)) in (f"conversation id {BAD!r} {ID_RULE}", f"no conversation {BAD!r} in {workspace.location}")
    assert _refused(lambda: workspace.backend.delete(BAD)) == f"conversation id {BAD!r} {ID_RULE}"
    workspace.save("c", "a", history(1), revision=0)
    assert workspace.backend.count_views("c", "a") == 0
    for number in (1, 2):
        workspace.backend.put_view("c", "a", json.dumps({"format": "glyphpack-view", "n": number}).encode())
    assert workspace.backend.count_views("c", "a") == 2 and workspace.backend.count_views("c", "other") == 0
    assert [json.loads(raw)["n"] for _, raw in workspace.backend.views("c", "a")] == [1, 2]



def test_a_tree_switching_to_wal_while_others_hold_it_waits_for_them(tmp_path, monkeypatch):
    """SQLite refuses the switch to WAL at once ('database is locked'), without its busy
    timeout, while other processes open or write the tree (32 fleet agents opening one
    new workspace met it, about one run in two): the open tries again until they are done."""
    import sqlite3

    import glyphpack._history.sqlite as sqlite_module

    refusals = {"left": 3}
    real_connect = sqlite3.connect

    class Busy:
        def __init__(self, connection):
            self.connection = connection

        def execute(self, sql, *args):
            if sql.startswith("PRAGMA journal_mode") and refusals["left"]:
                refusals["left"] -= 1
                raise sqlite3.OperationalError("database is locked")
            return self.connection.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self.connection, name)

    monkeypatch.setattr(sqlite_module.sqlite3, "connect", lambda *a, **k: Busy(real_connect(*a, **k)))
    with Workspace(tmp_path) as ws:
        ws.save("c", "a", history(1), revision=0)
    assert refusals["left"] == 0
    refusals["left"] = 10**6  # held for good: after OPEN_WAIT, the busy error names the tree
    monkeypatch.setattr(sqlite_module.SqliteDatabase, "OPEN_WAIT", 0.05)
    with pytest.raises(StoreError, match=r"tree\.sqlite3 is busy: another process holds it \(database is locked\); try again"):
        Workspace(tmp_path / "other").tree.conversations()


@settings(max_examples=200, deadline=None)
@given(histories(max_turns=5), st.integers(0, 12))
def test_the_last_answered_boundary_read_from_the_end_is_the_one_every_boundary_gives(messages, cut):
    """A failed turn is retried from the last boundary that ends with an answer: read
    from the end, it is the one the list of every boundary gives."""
    from glyphpack._history.messages import last_answered_boundary, pending_calls, turn_boundaries

    history = messages[: max(0, len(messages) - cut)]
    assume(not pending_calls(history))  # a stored history: every call answered
    expected = max((n for n in turn_boundaries(history) if n and history[n - 1].role == "assistant"), default=0)
    assert last_answered_boundary(history) == expected


def test_the_calibration_is_kept_without_a_sync_and_an_owner_with_one(workspace, monkeypatch):
    """The calibration is written after every answer and only holds what is learned
    again, so it is not synced; who holds a conversation is."""
    from glyphpack._history.store import OWNER_AGENT

    asked = []
    real_put = workspace.backend.put_measured
    monkeypatch.setattr(workspace.backend, "put_measured", lambda *a, durable=True: asked.append((a[1], durable)) or real_put(*a, durable=durable))
    workspace.save("c", "a", history(1), revision=0)
    workspace.save_calibration("c", "a", {"scale": 1.0, "overhead": 12, "counts": []}, {"model": "m"})
    workspace.claim_owner("c", {"salt": "s", "digest": "d"})
    assert asked == [("a", False), (OWNER_AGENT, True)]
    assert workspace.calibration("c", "a") == {"scale": 1.0, "overhead": 12, "counts": []}


def test_a_record_not_synced_is_written_whole_without_an_fsync(tmp_path, monkeypatch):
    from glyphpack import _files

    with Workspace(tmp_path / "ws") as ws:
        synced = []
        real_fsync = _files.os.fsync
        monkeypatch.setattr(_files.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
        ws.backend.put_measured("c", "a", b'{"format": 1}', durable=False)
        assert synced == [] and ws.backend.measured("c", "a")[1] == b'{"format": 1}'
        ws.backend.put_measured("c", "a", b'{"format": 2}')
        assert len(synced) == 2 and ws.backend.measured("c", "a")[1] == b'{"format": 2}'  # the file, then its folder
