"""The workspace's parts a proxy and the CLI lean on, each exact: who holds a
conversation (``owner``), deleting one, the compaction archive's order and its older
layout, and the in-memory store's contract."""

from __future__ import annotations

import json

import pytest

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
