import errno
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from histories import histories, history, turn
from hypothesis import given
from hypothesis import strategies as st

from glyphpack import ConflictError, HistoryError, Message, StoreError, Workspace
from glyphpack._history.messages import validate_history
from glyphpack._history.store import trim_start

TESTS = Path(__file__).parent


@pytest.fixture
def workspace(workspace_location):
    with Workspace(workspace_location) as ws:
        yield ws


@pytest.fixture
def folder_workspace(tmp_path):
    """For what only a folder has: files to damage, writes to fail (PostgreSQL's are in test_postgres.py)."""
    with Workspace(tmp_path / "ws") as ws:
        yield ws


def test_save_and_load_round_trip(workspace):
    assert workspace.load("c1", "main").state == "empty"
    saved = workspace.save("c1", "main", history(2), revision=0)
    assert saved.revision == 1 and saved.state == "answered"
    loaded = workspace.load("c1", "main")
    assert list(loaded.messages) == history(2)
    assert (loaded.revision, loaded.state) == (1, "answered")
    assert workspace.transcripts() == [("c1", "main")]


def test_two_agents_keep_two_transcripts(workspace):
    workspace.save("c1", "planner", history(1), revision=0)
    workspace.save("c1", "coder", history(3), revision=0)
    assert len(workspace.load("c1", "planner").messages) == len(history(1))
    assert len(workspace.load("c1", "coder").messages) == len(history(3))
    assert workspace.transcripts() == [("c1", "coder"), ("c1", "planner")]


def test_failed_turns_are_told_apart(workspace_location):
    with Workspace(workspace_location) as workspace:
        messages = history(1) + [Message("user", "next question")]
        assert workspace.save("c", "a", messages, revision=0).state == "unanswered"  # no answer yet
        done = workspace.save("c", "a", history(2), revision=1, error=None)
        assert done.state == "answered"
        failed = workspace.save("c", "a", history(2), revision=2, error="529 overloaded", checkpoints={"start": None})
        assert workspace.load("c", "a").state == "unanswered" and workspace.load("c", "a").error == "529 overloaded"
        assert failed.revision == 3
    with Workspace(workspace_location) as another_process:  # read from the store, not from what this one wrote
        loaded = another_process.load("c", "a")
        assert (loaded.state, loaded.error, loaded.revision, dict(loaded.checkpoints)) == ("unanswered", "529 overloaded", 3, {"start": None})


def test_mid_turn_save_is_refused_and_writes_nothing(workspace):
    workspace.save("c", "a", history(1), revision=0)
    mid = history(2)[:-2]  # ends on an assistant tool call without its result
    with pytest.raises(HistoryError, match="not saved: mid-turn"):
        workspace.save("c", "a", mid, revision=1)
    assert workspace.load("c", "a").revision == 1


def test_stale_revision_is_a_conflict(workspace):
    workspace.save("c", "a", history(1), revision=0)
    workspace.save("c", "a", history(2), revision=1)
    with pytest.raises(ConflictError, match="at revision 2, not 1"):
        workspace.save("c", "a", history(3), revision=1)
    with pytest.raises(ConflictError):
        workspace.save("c", "a", history(3), revision=0)
    assert list(workspace.load("c", "a").messages) == history(2)


@pytest.mark.parametrize("bad", ["../escape", "a/b", ".hidden", "", "x" * 200, "sp ace", "..", "c:\\\\x"])
def test_ids_cannot_leave_the_workspace(workspace, bad):
    with pytest.raises(StoreError, match="is not allowed"):
        workspace.save(bad, "agent", history(1), revision=0)
    with pytest.raises(StoreError, match="is not allowed"):
        workspace.load("conv", bad)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda raw: raw[: len(raw) // 2], "corrupted or truncated"),
        (lambda raw: b"[]", "not a glyphpack transcript"),
        (lambda raw: raw.replace(b'"revision":1', b'"revision":"1"'), "'revision' must be a non-negative integer"),
        (lambda raw: raw.replace(b'"role":"user"', b'"role":"robot"', 1), "role must be one of"),
    ],
)
def test_damaged_files_are_named_and_never_overwritten_by_load(folder_workspace, damage, message):
    folder_workspace.save("c", "a", history(1), revision=0)
    path = folder_workspace.transcript_path("c", "a")
    damaged = damage(path.read_bytes())
    path.write_bytes(damaged)
    with pytest.raises(StoreError, match=message) as info:
        folder_workspace.load("c", "a")
    assert str(path) in str(info.value)
    assert path.read_bytes() == damaged


@given(histories(max_turns=6), st.integers(0, 30), st.none() | st.integers(0, 400))
def test_trimming_keeps_a_valid_newest_suffix(messages, keep, budget):
    start = trim_start(messages, keep=keep, budget=budget)
    head = [m for m in messages[:start] if m.role == "system"]
    kept = head + messages[start:]
    validate_history(kept, allow_pending=False)  # no orphaned result, no unanswered call
    body = [m for m in kept if m.role != "system"]
    if body:
        assert body[0].role == "user"
    assert messages[start:] == kept[len(head):]  # a suffix: the newest messages


def test_load_trims_and_reports(workspace):
    workspace.save("c", "a", history(6), revision=0)
    loaded = workspace.load("c", "a", keep=12)
    assert loaded.messages[0].role == "system" and loaded.messages[1].role == "user"
    assert len(loaded.messages) - 1 <= 12
    assert loaded.trimmed == len(history(6)) - len(loaded.messages)
    by_budget = workspace.load("c", "a", budget=120)
    assert 0 < len(by_budget.messages) < len(history(6))


def test_checkpoints_survive_a_restart_and_rewind(tmp_path):
    with Workspace(tmp_path) as ws:
        ws.save("c", "a", history(2), revision=0)
        ws.checkpoint("c", "a", "before-refactor")
        current = ws.load("c", "a")
        ws.save("c", "a", list(current.messages) + turn(7, 2), revision=current.revision)
    with Workspace(tmp_path) as ws:  # a new process would see the same file
        loaded = ws.load("c", "a")
        assert loaded.checkpoints["before-refactor"] == history(2)[-1].id
        rewound = ws.rewind("c", "a", "before-refactor", "tried splitting the module; tests broke")
        assert list(rewound.messages[:-1]) == history(2)
        assert rewound.messages[-1].text.endswith("tried splitting the module; tests broke")
        assert "before-refactor" in ws.load("c", "a").checkpoints


def test_checkpoint_mid_turn_is_refused(workspace):
    with pytest.raises(HistoryError):
        workspace.save("c", "a", history(1)[:3], revision=0)
    workspace.save("c", "a", history(1), revision=0)
    with pytest.raises(StoreError, match="no checkpoint 'nope'"):
        workspace.rewind("c", "a", "nope", "x")


def test_a_trimmed_away_checkpoint_is_dropped_not_moved(workspace):
    workspace.save("c", "a", history(1), revision=0)
    workspace.checkpoint("c", "a", "early")
    current = workspace.load("c", "a")
    workspace.save("c", "a", list(current.messages) + turn(1, 1) + turn(2, 1) + turn(3, 1), revision=current.revision)
    trimmed = workspace.load("c", "a", keep=4)
    assert "early" not in trimmed.checkpoints and trimmed.dropped_checkpoints == ("early",)
    assert "early" in workspace.load("c", "a").checkpoints  # the stored file still has it


@pytest.mark.parametrize("fail_at", ["write", "fsync", "replace"])
def test_write_failure_leaves_the_previous_file_intact(folder_workspace, monkeypatch, fail_at):
    folder_workspace.save("c", "a", history(1), revision=0)
    path = folder_workspace.transcript_path("c", "a")
    before = path.read_bytes()
    import glyphpack._history.store as store

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    if fail_at == "write":
        real_fdopen = os.fdopen

        class FullFile:
            def __init__(self, f):
                self.f = f

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.f.close()

            def write(self, data):
                self.f.write(data[: len(data) // 2])
                disk_full()

        monkeypatch.setattr(store.os, "fdopen", lambda fd, mode: FullFile(real_fdopen(fd, mode)))
    elif fail_at == "fsync":
        monkeypatch.setattr(store.os, "fsync", disk_full)
    else:
        monkeypatch.setattr(store.os, "replace", denied)
    with pytest.raises(StoreError, match="previous file is intact"):
        folder_workspace.save("c", "a", history(3), revision=1)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert not list(path.parent.glob(".*.tmp"))
    assert folder_workspace.load("c", "a").revision == 1


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_no_completed_save(workspace_location):
    """A child saves growing histories in a loop and reports each save as it returns;
    it is SIGKILLed 50 times, after a random number of reported saves plus a random
    delay. Catches a save that returns before its data is on disk (a reported revision
    missing after the kill) and a torn file (a transcript that is no saved boundary).
    The kill moment comes from the child's own reports, so a slow disk cannot fail it."""
    sys.path.insert(0, str(TESTS))
    import saver

    valid = {json.dumps([m.id for m in history(k, 1)]) for k in range(1, saver.CYCLE + 1)}
    rng = random.Random(1234)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(TESTS.parent)]))
    ws_path = workspace_location
    for _ in range(50):
        child = subprocess.Popen([sys.executable, str(TESTS / "saver.py"), str(ws_path)], stdout=subprocess.PIPE, env=env)
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        lines = [child.stdout.readline() for _ in range(rng.randint(1, 4))]
        time.sleep(rng.uniform(0.0, 0.004))
        child.send_signal(signal.SIGKILL)
        child.wait()
        lines += child.stdout.readlines()  # what it reported before dying
        child.stdout.close()
        reported = [int(line) for line in lines if line.strip().isdigit()]
        with Workspace(ws_path) as workspace:
            loaded = workspace.load("conv", "agent")
            tree_path = workspace.tree.path_to(workspace.tree.agent_tip("conv", "agent"))
        if ws_path.startswith("postgresql://"):  # the transcript and the tree commit together: never apart
            assert tree_path == list(loaded.messages)
        assert json.dumps([m.id for m in loaded.messages]) in valid
        assert list(loaded.messages) == history(len({m.id for m in loaded.messages if m.role == "user"}), 1)
        # every save reported complete is there; at most one more (killed after its rename)
        assert reported and reported[-1] <= loaded.revision <= reported[-1] + 1


@pytest.mark.slow  # several processes writing at once: CI runs it
def test_concurrent_writers_lose_nothing_silently(workspace_location):
    """Two processes append to one conversation and save one transcript, 60 times
    each. Catches a lost update: the transcript must hold exactly the turns whose save
    was reported as saved (none reported as a conflict), and the tree every append."""
    ws_path = workspace_location
    with Workspace(ws_path) as ws:
        ws.tree.create("chain")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(TESTS.parent)]))
    names = ("alpha", "beta")
    children = [
        subprocess.Popen([sys.executable, str(TESTS / "worker.py"), str(ws_path), name, "60"], stdout=subprocess.PIPE, env=env)
        for name in names
    ]
    outcomes = {name: c.communicate(timeout=120)[0].decode().split("\n") for name, c in zip(names, children)}
    assert all(c.returncode == 0 for c in children)
    saved = {f"{name}-asks-{line.split()[1]}" for name, lines in outcomes.items() for line in lines if line.startswith("saved")}
    conflicted = {f"{name}-asks-{line.split()[1]}" for name, lines in outcomes.items() for line in lines if line.startswith("conflict")}
    assert len(saved) + len(conflicted) == 120 and not saved & conflicted
    with Workspace(ws_path) as ws:
        stored = ws.load("shared", "agent")
        asked = {m.id for m in stored.messages if "-asks-" in m.id}
        assert asked == saved  # every reported save is there, and nothing else
        assert stored.revision == len(saved)
        # the tree holds the transcript as the agent's path (each save recorded it under the lock)
        assert ws.tree.path_to(ws.tree.agent_tip("shared", "agent")) == list(stored.messages)
        # every append is in the tree, on one chain
        path_ids = [m.id for m in ws.tree.path("chain")]
        assert sorted(path_ids) == sorted(f"{n}-{i}" for n in names for i in range(60))


def test_imported_agents_whose_names_clean_to_one_id_keep_separate_transcripts(tmp_path):
    """Sidechain ids ``sub/1`` and ``sub-1`` both became ``sub-1``, and one subagent's
    transcript overwrote the other's."""
    from glyphpack._history.imported import ImportedAgent, ImportedSession, ImportReport

    def agent(name: str, text: str) -> ImportedAgent:
        return ImportedAgent(name, (Message("user", text, id=f"{text}-1"), Message("assistant", "ok", id=f"{text}-2")))

    session = ImportedSession("t", (agent("main", "main"), agent("sub/1", "first"), agent("sub-1", "second")), (), ImportReport(format="test"))
    with Workspace(tmp_path / "ws") as ws:
        saved = ws.import_session(session, "conv")
        assert [t.agent for t in saved] == ["main", "sub-1", "sub-1-2"]
        assert ws.transcripts() == [("conv", "main"), ("conv", "sub-1"), ("conv", "sub-1-2")]
        assert ws.load("conv", "sub-1").messages[0].text == "first"
        assert ws.load("conv", "sub-1-2").messages[0].text == "second"


@pytest.mark.parametrize(("change", "reason"), [
    ({"version": 2}, "has transcript format version 2; this glyphpack reads 1"),
    ({"revision": -1}, "is damaged: 'revision' must be a non-negative integer, not -1; it was left untouched"),
    ({"revision": True}, "is damaged: 'revision' must be a non-negative integer, not True; it was left untouched"),
    ({"checkpoints": []}, "is damaged: 'checkpoints' must map names to message ids; it was left untouched"),
    ({"checkpoints": {"x": 3}}, "is damaged: 'checkpoints' must map names to message ids; it was left untouched"),
    ({"error": 5}, "is damaged: 'error' must be a string or null; it was left untouched"),
])
def test_a_damaged_transcript_is_named_and_left_as_it_is(tmp_path, change, reason):
    import re

    from glyphpack import Message, StoreError, Workspace

    with Workspace(tmp_path / "ws") as ws:
        saved = ws.save("c", "a", [Message("user", "hi", id="u"), Message("assistant", "yo", id="a1")], revision=0)
        path = ws.transcript_path("c", "a")
        data = json.loads(path.read_text())
        assert (data["revision"], data["error"], data["checkpoints"]) == (saved.revision, None, {})
        path.write_text(json.dumps(data | change))
        before = path.read_bytes()
        with pytest.raises(StoreError, match=f"^{re.escape(str(path))} {re.escape(reason)}$"):
            ws.load("c", "a")
        assert path.read_bytes() == before
    with Workspace(tmp_path / "ws2") as ws:  # revision 0 and an error are a transcript's own
        ws.save("c", "a", [Message("user", "hi", id="u")], revision=0, error="timed out")
        path = ws.transcript_path("c", "a")
        path.write_text(json.dumps(json.loads(path.read_text()) | {"revision": 0}))
        loaded = ws.load("c", "a")
        assert (loaded.revision, loaded.error, loaded.state) == (0, "timed out", "unanswered")


def test_an_imports_measured_requests_read_back_and_a_damaged_record_is_named(tmp_path):
    from glyphpack import Message, StoreError, Workspace

    history = [Message("user", f"q{n}", id=f"u{n}") if n % 2 == 0 else Message("assistant", f"a{n}", id=f"a{n}") for n in range(6)]
    with Workspace(tmp_path / "ws") as ws:
        ws.save("c", "main", history, revision=0)
        path = ws.backend._measured_path("c", "main")
        path.parent.mkdir(parents=True, exist_ok=True)
        requests = [["u0", "u0", 100], ["u0", "u2", 300], ["u2", "u0", 50], ["u0", "gone", 70], ["u0", "a3", 0]]
        path.write_text(json.dumps({"format": "glyphpack-measured", "requests": requests}))
        assert [(len(m), t) for m, t in ws.measured("c", "main")] == [(1, 100), (3, 300)]  # backwards, missing, zero: left out
        path.write_text(json.dumps({"format": "glyphpack-measured", "first": "u0", "last": "a1", "tokens": 40}))  # an older record
        assert [(tuple(x.id for x in m), t) for m, t in ws.measured("c", "main")] == [(("u0", "a1"), 40)]
        path.write_text(json.dumps({"format": "glyphpack-measured", "requests": [["u0", "a1"]]}))
        with pytest.raises(StoreError, match=f"^{path} is damaged \\("):
            ws.measured("c", "main")
        path.write_text("[1, 2]")  # not an object: nothing measured, nothing learned
        assert ws.measured("c", "main") == [] and ws.calibration("c", "main") is None
        path.write_text(json.dumps({"format": "glyphpack-measured", "overhead": 77}))  # a session's calibration, before the scale
        assert ws.calibration("c", "main") == {"overhead": 77} and ws.measured("c", "main") == []
        ws.save_calibration("c", "main", {"scale": 1.1, "overhead": 5, "counts": []})
        assert ws.calibration("c", "main") == {"scale": 1.1, "overhead": 5, "counts": []}
        assert json.loads(path.read_text())["format"] == "glyphpack-measured"


def test_an_import_stores_every_agents_path_with_the_tip_on_the_main_history(tmp_path):
    """From the store's mutmut survivors: the tip, the subagents' paths, the refusal to
    import over a conversation and the replacement that is asked for."""
    from glyphpack import StoreError, Workspace, import_file

    session = import_file(Path(__file__).parent / "data" / "sessions" / "as-claude-small-schemadrift.jsonl")
    with Workspace(tmp_path / "ws") as ws:
        saved = ws.import_session(session, "imp")
        assert [t.agent for t in saved] == ["main", "sidechain-1"]
        main, side = (ws.load("imp", t.agent).messages for t in saved)
        assert ws.tree.tip("imp") == main[-1].id and ws.tree.agent_tips("imp") == {"main": main[-1].id, "sidechain-1": side[-1].id}
        assert {n.message.id for n in ws.tree.nodes("imp")} >= {m.id for m in (*main, *side)}
        assert ws.tree.conversation("imp").title == session.title
        with pytest.raises(StoreError, match=f"^conversation 'imp' is already in {ws.path}; import it under another name$"):
            ws.import_session(session, "imp")
        again = ws.import_session(session, "imp", replace=True)
        assert [t.messages for t in again] == [main, side] and all(t.revision == 2 for t in again)


def test_a_workspace_fork_at_a_message_copies_the_path_to_it(tmp_path):
    from glyphpack import Message, Workspace

    history = [Message("user", "q0", id="u0"), Message("assistant", "a0", id="a0"),
               Message("user", "q1", id="u1"), Message("assistant", "a1", id="a1")]
    with Workspace(tmp_path / "ws") as ws:
        ws.save("c", "main", history, revision=0)
        forked = ws.fork("c", "main", at="a0", new_conversation="early")
        assert forked.conversation == "early" and [m.text for m in forked.messages] == ["q0", "a0"]
        assert ws.load("early", "main").messages == forked.messages and ws.load("c", "main").messages == tuple(history)
        whole = ws.fork("c", "main", new_conversation="all")
        assert [m.text for m in whole.messages] == ["q0", "a0", "q1", "a1"]


def test_a_database_workspace_without_its_driver_says_how_to_install_it(monkeypatch, capsys):
    from glyphpack._cli import main

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the postgres extra were not installed
    with pytest.raises(StoreError, match=r"^a PostgreSQL workspace needs psycopg 3 and its pool: pip install '\.\[postgres\]' in a checkout$"):
        Workspace("postgresql://u:p@127.0.0.1:1/db")
    assert main(["tree", "postgresql://u:p@127.0.0.1:1/db"]) == 2
    assert "pip install '.[postgres]' in a checkout" in capsys.readouterr().err


def test_reconcile_never_moves_the_tree_back_past_a_save_made_meanwhile(workspace, monkeypatch):
    """Reconcile reads the transcript, finds the tree behind, and records: a save by
    another process in between was undone in the tree. It checks again under the lock."""
    from glyphpack._history.tree import SessionTree

    workspace.save("c", "a", turn(0, 1), revision=0)
    real_record = SessionTree.record
    monkeypatch.setattr(SessionTree, "record", lambda *args, **kwargs: 0)
    workspace.save("c", "a", turn(0, 1) + turn(1, 1), revision=1)  # a crash between the transcript and the tree
    monkeypatch.setattr(SessionTree, "record", real_record)
    assert workspace.tree.agent_tip("c", "a") == turn(0, 1)[-1].id  # the tree is a turn behind
    real_exclusive = type(workspace.backend).exclusive
    newest = turn(0, 1) + turn(1, 1) + turn(2, 1)

    def another_host_saves_first(backend, conversation, agent):
        monkeypatch.setattr(type(backend), "exclusive", real_exclusive)
        workspace.save("c", "a", newest, revision=2)  # lands between the check and the lock
        return real_exclusive(backend, conversation, agent)

    monkeypatch.setattr(type(workspace.backend), "exclusive", another_host_saves_first)
    assert workspace.reconcile("c", "a") == 0
    assert workspace.tree.path_to(workspace.tree.agent_tip("c", "a")) == newest


@pytest.mark.parametrize("pool_size", [0, -1, 1.5, True, "4"])
def test_a_pool_size_that_is_not_a_count_of_connections_is_refused_before_anything_opens(tmp_path, pool_size):
    from glyphpack import UsageError

    with pytest.raises(UsageError, match=f"^pool_size must be a whole number of connections, at least 1, not {re.escape(repr(pool_size))}$"):
        Workspace(tmp_path / "ws", pool_size=pool_size)
    assert not (tmp_path / "ws").exists()
    with Workspace(tmp_path / "ws", pool_size=1):
        pass


def test_a_copy_into_a_folder_that_holds_transcripts_but_no_tree_is_refused_and_writes_nothing(tmp_path):
    """A destination that lost its tree (or never had one) still holds someone's
    transcripts: a copy into it would mix two workspaces. Refused, those files untouched."""
    import shutil

    from glyphpack._history.copy import copy_workspace

    with Workspace(tmp_path / "src") as source:
        source.save("c", "a", [Message("user", "hello"), Message("assistant", "hi")], revision=0)
    with Workspace(tmp_path / "other") as other:
        other.save("d", "a", [Message("user", "other words"), Message("assistant", "x")], revision=0)
    destination = tmp_path / "dst"
    destination.mkdir()
    shutil.copytree(tmp_path / "other" / "transcripts", destination / "transcripts")
    before = {p: p.read_bytes() for p in (destination / "transcripts").rglob("*.json")}
    with Workspace(tmp_path / "src") as source, Workspace(destination) as target:
        with pytest.raises(StoreError, match=r"is not empty: copy a workspace only into a new one \(nothing was written\)"):
            copy_workspace(source, target)
        assert target.tree.conversations() == [] and target.transcripts() == [("d", "a")]
    assert {p: p.read_bytes() for p in (destination / "transcripts").rglob("*.json")} == before


def test_a_fork_refused_mid_turn_leaves_nothing_behind(tmp_path, capsys):
    from glyphpack import Message, Text, ToolCall, ToolResult, Workspace
    from glyphpack._cli import main

    history = [Message("user", "q0", id="u0"), Message("assistant", (ToolCall("c1", "ls", {}),), id="a0"),
               Message("tool", (ToolResult("c1", (Text("a.txt"),)),), id="t0"), Message("assistant", "done", id="a1")]
    with Workspace(tmp_path / "ws") as ws:
        ws.save("c", "main", history, revision=0)
        before = [c.id for c in ws.tree.conversations()]
    assert main(["fork", str(tmp_path / "ws"), "c", "--at", "a0", "--new", "mid"]) == 2
    assert "cannot fork 'c' at 'a0': it is mid-turn (calls c1 have no results there)" in capsys.readouterr().err
    with Workspace(tmp_path / "ws") as ws:
        assert [c.id for c in ws.tree.conversations()] == before  # no empty conversation left
        assert [m.text for m in ws.fork("c", "main", at="t0", new_conversation="after").messages] == ["q0", "", "a.txt"]
