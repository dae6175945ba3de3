"""One contract, every transcript store: the folder ``Workspace`` and the in-memory
``MemoryStore`` and the PostgreSQL workspace.
Each test is the store's promise to a harness: nothing saved is lost, no concurrent
save is silently overwritten, nothing is saved mid-turn."""

from __future__ import annotations

import threading
import time

import pytest

from glyphpack import ConflictError, HistoryError, MemoryStore, Message, StoreError, Text, ToolCall, ToolResult, Workspace


@pytest.fixture(params=["folder", "postgres", "memory"])
def store(request, tmp_path):
    if request.param == "memory":
        yield MemoryStore()
        return
    location = str(tmp_path / "ws") if request.param == "folder" else request.getfixturevalue("postgres_url")
    request.node.glyphpack_location = location  # where another process would open it
    with Workspace(location) as workspace:
        yield workspace


def turn(n: int) -> list[Message]:
    return [Message("user", f"question {n}", id=f"u{n}"), Message("assistant", f"answer {n}", id=f"a{n}")]


def test_what_is_saved_loads_back(store):
    assert store.load("c", "a").state == "empty" and store.load("c", "a").revision == 0
    saved = store.save("c", "a", turn(0), revision=0)
    loaded = store.load("c", "a")
    assert saved.revision == loaded.revision == 1 and loaded.messages == tuple(turn(0)) and loaded.state == "answered"
    assert store.transcripts() == [("c", "a")]


def test_a_save_from_an_older_or_a_newer_revision_is_refused_and_writes_nothing(store):
    store.save("c", "a", turn(0), revision=0)
    store.save("c", "a", turn(0) + turn(1), revision=1)
    for stale in (0, 1, 3):  # older, one behind, ahead: only the stored revision (2) is taken
        with pytest.raises(ConflictError, match="another writer saved first"):
            store.save("c", "a", turn(0) + turn(1) + turn(2), revision=stale)
    assert store.load("c", "a").revision == 2 and len(store.load("c", "a").messages) == 4


def test_concurrent_writers_from_one_revision_one_wins(store, monkeypatch):
    from glyphpack._history import store as store_module

    store.save("c", "a", turn(0), revision=0)
    real = store_module._compare_and_swap

    def slow(*args):  # a slow disk: the check and the write are far apart
        checked = real(*args)
        time.sleep(0.02)
        return checked

    monkeypatch.setattr(store_module, "_compare_and_swap", slow)
    monkeypatch.setattr("glyphpack._history.memory._compare_and_swap", slow)  # MemoryStore's own binding
    outcomes: list[str] = []

    def write(n: int) -> None:
        try:
            store.save("c", "a", turn(0) + turn(n), revision=1)
            outcomes.append("saved")
        except ConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["conflict"] * 7 + ["saved"]
    assert store.load("c", "a").revision == 2


def test_nothing_is_saved_mid_turn(store):
    pending = [Message("user", "ls"), Message("assistant", (ToolCall("t1", "ls", {}),))]
    with pytest.raises(HistoryError, match="turn boundary"):
        store.save("c", "a", pending, revision=0)
    assert store.load("c", "a").state == "empty"
    answered = pending + [Message("tool", (ToolResult("t1", (Text("a.py"),)),))]
    assert store.save("c", "a", answered, revision=0).state == "unanswered"  # no answer yet: a retry resumes there


def test_a_history_that_drops_stored_messages_needs_replace(store):
    store.save("c", "a", turn(0) + turn(1), revision=0)
    with pytest.raises(StoreError, match="drop"):
        store.save("c", "a", turn(1), revision=1)
    assert len(store.load("c", "a").messages) == 4
    assert store.save("c", "a", turn(1), revision=1, replace=True).messages == tuple(turn(1))


def test_a_replace_that_edits_a_message_in_place_keeps_the_edit(store, request):
    store.save("c", "a", turn(0) + turn(1), revision=0)
    edited = [turn(0)[0], Message("assistant", "answer 0, corrected", id="a0"), *turn(1)]
    store.save("c", "a", edited, revision=1, replace=True)
    assert store.load("c", "a").messages == tuple(edited)
    if isinstance(store, Workspace):  # and another process reads the edit too
        with Workspace(request.node.glyphpack_location) as fresh:
            assert fresh.load("c", "a").messages[1].text == "answer 0, corrected"


def test_checkpoints_follow_their_messages(store):
    store.save("c", "a", turn(0), revision=0, checkpoints={"start": None, "first": "a0"})
    assert store.load("c", "a").checkpoints == {"start": None, "first": "a0"}
    with pytest.raises(HistoryError, match="not in the history"):
        store.save("c", "a", turn(0) + turn(1), revision=1, checkpoints={"gone": "x9"})
    store.save("c", "a", turn(1), revision=1, replace=True)  # a0 is gone, and its checkpoint with it
    assert store.load("c", "a").checkpoints == {"start": None}


def test_a_trimmed_load_keeps_the_system_prompt_and_says_what_it_cut(store):
    history = [Message("system", "be brief", id="s")] + turn(0) + turn(1) + turn(2)
    store.save("c", "a", history, revision=0, checkpoints={"first": "a0", "last": "a2"})
    loaded = store.load("c", "a", keep=2)
    assert [m.id for m in loaded.messages] == ["s", "u2", "a2"] and loaded.trimmed == 4
    assert loaded.checkpoints == {"last": "a2"} and loaded.dropped_checkpoints == ("first",)


def test_ids_a_file_name_cannot_carry_are_refused(store):
    for bad in ("../x", "", "a/b", "-x"):
        with pytest.raises(StoreError, match="not allowed"):
            store.save(bad, "a", turn(0), revision=0)
        with pytest.raises(StoreError, match="not allowed"):
            store.load("c", bad)


def test_a_save_returns_the_transcript_a_load_gives(store):
    calls = [Message("user", "run it", id="u0"), Message("assistant", (ToolCall("k", "run", {}),), id="a0"),
             Message("tool", (ToolResult("k", (Text("done"),)),), id="t0")]
    saved = store.save("conv", "agent-1", calls, revision=0, error="the model timed out")
    loaded = store.load("conv", "agent-1")
    assert saved == loaded
    assert (saved.conversation, saved.agent, saved.state, saved.error) == ("conv", "agent-1", "unanswered", "the model timed out")


@pytest.mark.parametrize(("keep", "budget", "first"), [
    (None, None, "s"), (4, None, "u1"), (3, None, "u2"), (2, None, "u2"), (5, None, "u1"), (6, None, "u0"),
])
def test_trimming_keeps_the_system_prompt_and_cuts_only_at_a_user_turn(store, keep, budget, first):
    history = [Message("system", "be brief", id="s"), *turn(0), *turn(1), *turn(2)]
    store.save("c", "a", history, revision=0)
    loaded = store.load("c", "a", keep=keep, budget=budget)
    assert loaded.messages[0].id == "s"
    assert loaded.messages[1].id == (first if first != "s" else "u0")
    assert loaded.trimmed == len(history) - len(loaded.messages)


def test_a_budget_keeps_the_newest_turns_that_fit(store):
    from glyphpack._history.pricing import EstimatePricer, message_tokens

    history = [*turn(0), *turn(1), *turn(2)]
    store.save("c", "a", history, revision=0)
    pricer = EstimatePricer()
    last_two = sum(message_tokens(m, pricer) for m in history[2:])
    assert [m.id for m in store.load("c", "a", budget=last_two).messages] == ["u1", "a1", "u2", "a2"]
    assert [m.id for m in store.load("c", "a", budget=last_two - 1).messages] == ["u2", "a2"]
    assert [m.id for m in store.load("c", "a", budget=1).messages] == ["u2", "a2"]  # nothing fits: the shortest valid history


def test_a_title_with_a_lone_surrogate_is_refused_by_name_and_an_imported_one_is_kept_displayable(workspace_location):
    """UTF-8 cannot hold half of a UTF-16 pair: a title given so is refused clearly on
    every store, nothing written; one from a file is kept with U+FFFD in its place, and
    the messages hold the text as it was."""
    from glyphpack import ImportedAgent, ImportedSession, ImportReport, Message, StoreError, Text, Workspace

    with Workspace(workspace_location) as workspace:
        with pytest.raises(StoreError, match=r"title holds a lone surrogate \(U\+D800 at character 4\)"):
            workspace.tree.create("t1", title="bad \ud800 title")
        assert [c.id for c in workspace.tree.conversations()] == []
        session = ImportedSession("bad \ud800 title", (ImportedAgent("main", (Message("user", (Text("bad \ud800 text"),)),)),), (),
                                  ImportReport(format="glyphpack"))
        workspace.import_session(session, "imported")
        assert workspace.tree.conversation("imported").title == "bad \ufffd title"
        assert workspace.load("imported", "main").messages[0].text == "bad \ud800 text"
