import json
import sqlite3

import pytest

from glyphpack import ConflictError, Message, StoreError, Workspace, export_json, export_markdown
from glyphpack._cli import main
from glyphpack._history.sqlite import SCHEMA_VERSION
from glyphpack._history.tree import SessionTree


@pytest.fixture
def tree(workspace_location):
    with Workspace(workspace_location) as ws:
        yield ws.tree


def chat(tree, conversation, texts):
    ids = []
    for i, text in enumerate(texts):
        ids.append(tree.append(conversation, Message("user" if i % 2 == 0 else "assistant", text)))
    return ids


def test_append_path_children(tree):
    c = tree.create("c1", "first")
    ids = chat(tree, c, ["hi", "hello", "do x", "done"])
    assert tree.tip(c) == ids[-1]
    assert [m.id for m in tree.path(c)] == ids
    assert [m.id for m in tree.children(ids[0])] == [ids[1]]
    assert [conv.id for conv in tree.conversations()] == ["c1"]


def test_branch_moves_only_the_tip(tree, tmp_path):
    c = tree.create("c1")
    ids = chat(tree, c, ["a", "b", "c", "d"])
    before = tree._db.query("SELECT id, parent, body FROM messages ORDER BY id")
    tree.branch(c, ids[1])
    assert tree._db.query("SELECT id, parent, body FROM messages ORDER BY id") == before
    assert [m.id for m in tree.path(c)] == ids[:2]
    new = tree.append(c, Message("user", "c'"))
    assert sorted(m.id for m in tree.children(ids[1])) == sorted([ids[2], new])
    tree.branch(c, None)
    assert tree.path(c) == []


def test_fork_copies_the_path_with_new_ids(tree):
    c = tree.create("c1", "origin")
    ids = chat(tree, c, ["a", "b", "c", "d"])
    f = tree.fork(c, at=ids[2], new_conversation="c2")
    copied = tree.path(f)
    assert [m.text for m in copied] == ["a", "b", "c"]
    assert not {m.id for m in copied} & set(ids)  # no shared rows
    assert [m.id for m in tree.path(c)] == ids  # the original is untouched
    assert tree.conversation(f).forked_from == "c1" and tree.conversation(f).forked_at == ids[2]
    tree.append(f, Message("assistant", "e"))
    assert len(tree.path(c)) == 4


def test_tip_compare_and_swap(tree):
    c = tree.create("c1")
    first = tree.append(c, Message("user", "a"))
    tree.append(c, Message("assistant", "b"), expected_tip=first)
    with pytest.raises(ConflictError, match="has moved"):
        tree.append(c, Message("assistant", "stale"), expected_tip=first)
    assert [m.text for m in tree.path(c)] == ["a", "b"]


def test_bad_references(tree):
    a, b = tree.create("a"), tree.create("b")
    m = tree.append(a, Message("user", "x"))
    with pytest.raises(StoreError, match="belongs to 'a', not 'b'"):
        tree.branch(b, m)
    with pytest.raises(StoreError, match="no conversation 'zz'"):
        tree.append("zz", Message("user", "x"))
    with pytest.raises(StoreError, match="already exists"):
        tree.create("a")
    with pytest.raises(StoreError, match="already in the tree"):
        tree.append(a, Message("user", "again", id=m))


def test_schema_is_versioned_and_wal(tmp_path):
    path = tmp_path / "t.sqlite3"
    SessionTree(path).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer than this glyphpack"):
        SessionTree(path)
    (tmp_path / "junk.sqlite3").write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match="junk.sqlite3 is damaged"):
        SessionTree(tmp_path / "junk.sqlite3")


def test_export_json_and_markdown(tree):
    c = tree.create("c1", "Export me")
    ids = chat(tree, c, ["question", "answer"])
    tree.branch(c, ids[0])
    tree.append(c, Message("assistant", "other answer"))
    path = export_json(tree, c)
    assert [m["content"][0]["text"] for m in path["messages"]] == ["question", "other answer"]
    whole = export_json(tree, c, whole_tree=True)
    assert len(whole["messages"]) == 3 and whole["messages"][1]["parent"] == ids[0]
    md = export_markdown(tree, c, whole_tree=True)
    assert md.startswith("# Export me") and "<- tip" in md and "other answer" in md


def test_cli_tree_branch_fork_export(tmp_path, capsys):
    ws_path = tmp_path / "ws"
    with Workspace(ws_path) as ws:
        c = ws.tree.create("demo")
        ids = chat(ws.tree, c, ["hello", "hi", "try A", "A done"])
    assert main(["tree", str(ws_path)]) == 0
    drawn = capsys.readouterr().out
    assert "A done" in drawn and drawn.count("<- tip") == 1
    assert main(["branch", str(ws_path), "demo", ids[1][:10]]) == 0
    capsys.readouterr()
    assert main(["fork", str(ws_path), "demo", "--new", "demo2"]) == 0
    assert capsys.readouterr().out.strip() == "demo2"
    assert main(["export", str(ws_path), "demo2", "--format", "json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert [m["content"][0]["text"] for m in exported["messages"]] == ["hello", "hi"]
    assert main(["tree", str(tmp_path / "nowhere")]) == 2
    assert "not a glyphpack workspace" in capsys.readouterr().err


def test_threads_sharing_one_tree_lose_no_append(tree):
    from concurrent.futures import ThreadPoolExecutor

    c = tree.create("threads")

    def work(name):
        for i in range(40):
            tree.append(c, Message("user", f"{name} {i}", id=f"{name}-{i}"))
            tree.path(c)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, ["a", "b", "c", "d"]))
    assert sorted(m.id for m in tree.path(c)) == sorted(f"{n}-{i}" for n in "abcd" for i in range(40))


def test_a_version_1_tree_read_only_has_no_agent_tips_and_migrates_when_written(tmp_path):
    """Read-only opens write nothing, so an old tree keeps its schema: it reads as having
    no agent tips (not as damaged); opened for writing, it gains them."""
    path = tmp_path / "tree.sqlite3"
    with SessionTree(path) as tree:
        tree.record("c", "agent", [Message("user", "hello", id="u1")])
    db = sqlite3.connect(path)
    db.execute("DROP TABLE agent_tips")
    db.execute("DROP TABLE labels")
    db.execute("DROP TABLE history_ends")
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    with SessionTree(path, read_only=True) as tree:
        assert tree.agent_tips("c") == {} and tree.agent_tip("c", "agent") is None and tree.labels("c") == {}
        assert [m.id for m in tree.path("c")] == ["u1"]
    with SessionTree(path) as tree:
        tree.record("c", "agent", [Message("user", "hello", id="u1")])
        assert tree.agent_tips("c") == {"agent": "u1"}



def test_only_what_the_transcripts_rebuild_is_committed_without_a_sync(workspace_location, monkeypatch):
    """A save's tree record (folder: the transcript was synced before it; PostgreSQL: one
    transaction with the transcript, durable as it is) and the proxy's index of ends ask
    for a commit that is not synced; a label and a branch do not."""
    with Workspace(workspace_location) as ws:
        db = ws.tree._db
        asked = []
        real_write = db.write
        monkeypatch.setattr(db, "write", lambda *conversations, durable=True: asked.append(durable) or real_write(*conversations, durable=durable))
        first = ws.save("c", "main", [Message("user", "hi"), Message("assistant", "hello")], revision=0)
        saved, asked[:] = asked.copy(), []
        ws.tree.set_ends({("c", "main"): [b"\x01" * 16]})
        ends, asked[:] = asked.copy(), []
        ws.tree.label("c", "start", first.messages[-1].id)
        ws.tree.branch("c", first.messages[0].id)
        labelled = asked.copy()
    is_folder = not workspace_location.startswith("postgresql")
    assert saved == [False] if is_folder else saved and all(saved)
    assert ends == [False]
    assert labelled == [True, True]


def test_a_commit_not_synced_is_so_on_sqlite_and_the_next_is_synced_again(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        db = ws.tree._db

        def level(durable):
            with db.write("c", durable=durable) as executor:
                return executor.execute("PRAGMA synchronous").fetchone()[0]

        assert [level(True), level(False), level(True)] == [2, 1, 2]  # FULL, NORMAL, FULL again


def test_a_commit_not_synced_is_so_on_postgres(postgres_url, monkeypatch):
    from glyphpack._history import postgres

    executed = []
    real_execute = postgres._Statements.execute
    monkeypatch.setattr(postgres._Statements, "execute", lambda self, sql, parameters=(): executed.append(sql) or real_execute(self, sql, parameters))
    with Workspace(postgres_url) as ws:
        for durable in (True, False):
            executed.clear()
            with ws.tree._db.write("c", durable=durable):
                pass
            assert ("SET LOCAL synchronous_commit = off" in executed) is not durable


def test_a_write_that_raises_is_rolled_back_at_either_level_and_the_level_restored(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        db = ws.tree._db
        for durable in (True, False):
            with pytest.raises(ValueError), db.write("c", durable=durable) as executor:
                executor.execute("INSERT INTO conversations (id, title, tip, created) VALUES ('gone', '', NULL, 0)")
                raise ValueError("mid-way")
            assert ws.tree.conversations() == []
        with db.write("c", durable=False) as executor:
            executor.execute("INSERT INTO conversations (id, title, tip, created) VALUES ('kept', '', NULL, 0)")
        assert [c.id for c in ws.tree.conversations()] == ["kept"]
        with db.write("c") as executor:
            assert executor.execute("PRAGMA synchronous").fetchone()[0] == 2


def test_a_write_to_a_tree_opened_read_only_is_refused_naming_it(tmp_path):
    path = tmp_path / "t.sqlite3"
    SessionTree(path).close()
    reader = SessionTree(path, read_only=True)
    for durable in (True, False):
        with pytest.raises(StoreError, match=f"^{path} was opened read-only$"):
            reader._db.write("c", durable=durable)
    reader.close()


# ---------------------------------------------------------------------- reads beside writes


def test_a_read_does_not_wait_for_another_threads_write_transaction(tmp_path) -> None:
    """A proxy's lookups (which conversation a request continues) read the tree while
    other threads save: reads take connections of their own (WAL), never the writer's
    lock, and see what is committed."""
    import threading

    tree = SessionTree(tmp_path / "tree.db")
    conversation = tree.create("c1")
    tree.set_ends({(conversation, "main"): [b"end-1"]})
    inside, release = threading.Event(), threading.Event()

    def hold_a_write() -> None:
        with tree._write(conversation) as db:
            db.execute("UPDATE conversations SET title = ? WHERE id = ?", ("held", conversation))
            inside.set()
            release.wait(10)

    writer = threading.Thread(target=hold_a_write)
    writer.start()
    try:
        assert inside.wait(10)
        read: list[object] = []
        reader = threading.Thread(target=lambda: read.append((tree.ends_of(conversation, "main"), tree.conversation(conversation).title)))
        reader.start()
        reader.join(2)
        assert not reader.is_alive() and read == [({b"end-1"}, "")]  # at once, and without the uncommitted title
    finally:
        release.set()
        writer.join(10)
    assert tree.conversation(conversation).title == "held"
    tree.close()


def test_a_read_inside_a_write_transaction_sees_that_transactions_own_writes(tmp_path) -> None:
    tree = SessionTree(tmp_path / "tree.db")
    conversation = tree.create("c1")
    with tree._write(conversation) as db:
        db.execute("UPDATE conversations SET title = ? WHERE id = ?", ("mine", conversation))
        assert tree.conversation(conversation).title == "mine"
    tree.close()


def test_read_connections_are_reused_and_closed_with_the_tree(tmp_path) -> None:
    import threading

    tree = SessionTree(tmp_path / "tree.db")
    conversation = tree.create("c1")
    for _ in range(20):  # one thread after another: one connection serves them all
        thread = threading.Thread(target=lambda: tree.conversation(conversation))
        thread.start()
        thread.join()
    readers = list(tree._db._readers)  # type: ignore[attr-defined]
    assert len(readers) == 1
    tree.close()
    with pytest.raises(sqlite3.ProgrammingError):
        readers[0].execute("SELECT 1")
    with pytest.raises(StoreError):  # as before: a closed tree reads nothing
        tree.conversation(conversation)


def test_a_read_that_sqlite_refuses_says_why_on_either_connection(tmp_path) -> None:
    tree = SessionTree(tmp_path / "tree.db")
    conversation = tree.create("c1")
    with pytest.raises(StoreError, match="no such table: nowhere"):
        tree._db.query("SELECT * FROM nowhere")  # a reader's
    with tree._write(conversation), pytest.raises(StoreError, match="no such table: nowhere"):
        tree._db.query("SELECT * FROM nowhere")  # the writer's, inside its transaction
    tree.close()
