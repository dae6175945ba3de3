"""What only the PostgreSQL workspace has to prove (the contract, workspace and tree
tests run on it too, by the ``workspace_location`` fixture): clear errors before
anything is written, rows that cannot be read named and left alone, a save that fails
midway leaving nothing behind, images stored once, a lossless copy both ways, and
several processes (hosts) on one database."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from test_session_sdk import DENSE_SESSION, drive, project, reading_script

import glyphpack
from glyphpack import ConflictError, Image, Message, RedactedThinking, StoreError, Text, ToolCall, ToolResult, Workspace
from glyphpack._cli import main as cli_main
from glyphpack._history.copy import copy_workspace, workspace_record
from glyphpack._history.postgres import SCHEMA_VERSION, redacted
from glyphpack._history.view import read_archive, read_view
from glyphpack._importers.registry import import_file
from glyphpack.testing.fake import FakeModel

TESTS = Path(__file__).resolve().parent
SESSIONS = TESTS / "data" / "sessions"
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(TESTS.parent)]))


def turn(n: int) -> list[Message]:
    return [Message("user", f"question {n}", id=f"u{n}"), Message("assistant", f"answer {n}", id=f"a{n}")]


def turns(conversation: str, count: int) -> list[Message]:
    """``count`` turns with ids of their own: a message id names one message in the whole workspace."""
    return [Message(m.role, m.content, id=f"{conversation}-{m.id}") for n in range(count) for m in turn(n)]


def rows(url: str, sql: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute(sql).fetchall()


def tables(url: str) -> list[str]:
    return [name for (name,) in rows(url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")]


# ------------------------------------------------------------------ clear errors, nothing written


def test_an_unreachable_server_and_a_wrong_password_are_told_apart(postgres_server):
    with psycopg.connect(postgres_server.admin_url) as probe:
        port = probe.info.port
    closed = postgres_server.admin_url.replace(f":{port}/", ":1/")
    with pytest.raises(StoreError, match=r"^cannot connect to the PostgreSQL workspace postgresql://glyphpack:\*\*\*@127\.0\.0\.1:1/") as refused:
        Workspace(closed)
    assert "refused" in str(refused.value) or "connect" in str(refused.value)
    password = re.search(r"://[^:/@]+:([^@]+)@", postgres_server.admin_url)
    if password is None:
        pytest.skip("GLYPHPACK_POSTGRES_URL has no password to get wrong")
    wrong = postgres_server.admin_url.replace(password.group(1), "not-the-password")
    with pytest.raises(StoreError, match="password authentication failed") as denied:
        Workspace(wrong)
    assert "not-the-password" not in str(denied.value)  # a password never reaches a message


def test_a_read_only_server_is_refused_before_anything_is_written(postgres_url):
    read_only = postgres_url + "%20-cdefault_transaction_read_only%3Don"
    with pytest.raises(StoreError, match=r"is read-only \(default_transaction_read_only\): nothing was written; point the workspace at the primary"):
        Workspace(read_only)
    assert tables(postgres_url) == []


@pytest.mark.slow  # a base backup and a second server (about 2 s)
def test_a_standby_is_refused_for_writing_and_reads_what_the_primary_saved(postgres_server, postgres_url):
    if postgres_server.cluster is None:
        pytest.skip("the server is GLYPHPACK_POSTGRES_URL's: the tests start no standby of it")
    with Workspace(postgres_url) as primary:
        primary.save("c", "a", turn(0), revision=0)
    port = postgres_server.cluster.start_standby()
    replica = postgres_url.replace(f":{postgres_server.cluster.port}/", f":{port}/")
    with pytest.raises(StoreError, match=r"is a standby \(read-only replica\): nothing was written; point the workspace at the primary, or open it read_only"):
        Workspace(replica)
    with Workspace(postgres_url) as primary:
        primary.save("c", "a", turn(0) + turn(1), revision=1)
    deadline = time.monotonic() + 30
    with Workspace(replica, read_only=True) as reader:  # a replica serves readers: the navigator, an export
        while reader.load("c", "a").revision < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reader.load("c", "a").messages == tuple(turn(0) + turn(1))
        assert reader.tree.path_to(reader.tree.agent_tip("c", "a")) == turn(0) + turn(1)


def test_a_schema_from_a_newer_glyphpack_is_refused_and_left_as_it_is(postgres_url):
    with Workspace(postgres_url) as workspace:
        workspace.save("c", "a", turn(0), revision=0)
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("UPDATE glyphpack_schema SET version = %s", (SCHEMA_VERSION + 1,))
    before = rows(postgres_url, "SELECT * FROM transcripts")
    for read_only in (False, True):
        with pytest.raises(StoreError) as refused:
            Workspace(postgres_url, read_only=read_only)
        assert str(refused.value) == (
            f"{redacted(postgres_url)} has schema version {SCHEMA_VERSION + 1}, newer than this glyphpack's {SCHEMA_VERSION}; upgrade glyphpack"
        )
    assert rows(postgres_url, "SELECT * FROM transcripts") == before
    assert rows(postgres_url, "SELECT version FROM glyphpack_schema") == [(SCHEMA_VERSION + 1,)]


def test_a_user_who_may_not_create_tables_is_told_so_before_anything_is_written(postgres_url):
    schema = postgres_url.rsplit("%3D", 1)[-1]
    role = f"reader_{schema}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")
        admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
    try:
        limited = re.sub(r"://[^@]+@", f"://{role}:pw@", postgres_url)
        with pytest.raises(StoreError, match=f"^postgresql://{role}:\\*\\*\\*@.*: permission denied for schema {schema}"):
            Workspace(limited)
        assert tables(postgres_url) == []
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def test_read_only_opens_only_a_workspace_and_writes_nothing(postgres_url):
    with pytest.raises(StoreError, match=r"is not a glyphpack workspace \(no glyphpack schema in it\)"):
        Workspace(postgres_url, read_only=True)
    assert tables(postgres_url) == []  # not even a schema
    with Workspace(postgres_url) as workspace:
        workspace.save("c", "a", turn(0), revision=0)
    with Workspace(postgres_url, read_only=True) as workspace:
        assert workspace.load("c", "a").revision == 1
        with pytest.raises(StoreError, match="was opened read-only"):
            workspace.save("c", "a", turn(0) + turn(1), revision=1)
        with pytest.raises(StoreError, match="was opened read-only"):
            workspace.tree.create("other")
    assert rows(postgres_url, "SELECT revision FROM transcripts") == [(1,)]


def test_the_tree_has_the_same_tables_and_columns_on_both_stores(tmp_path, postgres_url):
    """The tree's statements run on both databases: a column added to one schema and not
    the other would fail only where that statement runs."""
    import sqlite3

    with Workspace(tmp_path / "ws") as folder, Workspace(postgres_url):
        folder.tree.conversations()
        database = sqlite3.connect(tmp_path / "ws" / "tree.sqlite3")
        on_sqlite = {
            table: [row[1] for row in database.execute(f"PRAGMA table_info({table})")]
            for (table,) in database.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        database.close()
    on_postgres = {
        table: [c for (c,) in rows(postgres_url, f"SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = '{table}' ORDER BY ordinal_position")]
        for table in on_sqlite
    }
    on_postgres["messages"].remove("seq")  # PostgreSQL's insertion order; SQLite has its rowid
    assert on_postgres == on_sqlite and set(on_sqlite) == {"conversations", "messages", "agent_tips", "labels", "history_ends"}


def test_the_location_never_shows_the_password(postgres_url):
    with Workspace(postgres_url) as workspace:
        assert "***" in workspace.location and postgres_url.split(":")[2].split("@")[0] not in workspace.location
        assert repr(workspace) == f"Workspace({workspace.location!r})"
    assert redacted("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redacted("postgresql://u:secret@h:notaport/db") == "postgresql://u:***@h:notaport/db"
    assert redacted("postgresql://h/db?user=u&password=secret&sslmode=off") == "postgresql://h/db?user=u&password=***&sslmode=off"
    with pytest.raises(StoreError, match=r"^cannot connect to the PostgreSQL workspace postgresql://u:\*\*\*@h:notaport/db: "):
        Workspace("postgresql://u:secret@h:notaport/db")


# ------------------------------------------------------------------ damage and failed writes


def test_a_damaged_row_is_named_and_left_as_it_is(postgres_url):
    with Workspace(postgres_url) as workspace:
        workspace.save("c", "a", turn(0), revision=0)
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("UPDATE bodies SET body = '{not json'")
    with Workspace(postgres_url) as workspace:
        with pytest.raises(StoreError) as damaged:
            workspace.load("c", "a")
        assert str(damaged.value) == (
            f"{workspace.location} transcript c/a is damaged: a stored message does not decode "
            "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1)); it was left untouched"
        )
        with pytest.raises(StoreError, match="is damaged"):
            workspace.save("c", "a", turn(0) + turn(1), revision=1)
    assert rows(postgres_url, "SELECT body FROM bodies") == [("{not json",), ("{not json",)]
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("DELETE FROM bodies")
    with Workspace(postgres_url) as workspace, pytest.raises(StoreError, match="2 of its messages are missing"):
        workspace.load("c", "a")


def test_a_damaged_view_or_measured_record_is_named_by_agent_and_number(postgres_url):
    from glyphpack._history.view import StoredView, write_view

    with Workspace(postgres_url) as workspace:
        workspace.save("c", "a", turn(0), revision=0)
        for covers in ("u0", "a0"):
            write_view(workspace, "c", "a", StoredView(covers=covers, messages=tuple(turn(0)[:1])))
        assert [v.covers for v in read_archive(workspace, "c", "a")] == ["u0", "a0"] and read_view(workspace, "c", "a").covers == "a0"
        assert [name for name, _ in workspace.backend.views("c", "a")] == [f"{workspace.location} view {n} of c/a" for n in (1, 2)]
        workspace.backend.put_measured("c", "a", json.dumps({"requests": [["u0", "a0"]]}).encode())
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("UPDATE views SET document = 'not json' WHERE number = 2")
    with Workspace(postgres_url) as workspace:
        location = re.escape(workspace.location)
        with pytest.raises(StoreError, match=f"^{location} view 2 of c/a is damaged"):
            read_view(workspace, "c", "a")
        with pytest.raises(StoreError, match=f"^{location} measured record of c/a is damaged"):
            workspace.measured("c", "a")


@pytest.mark.parametrize("fail_at", ["before the tree", "in the tree", "connection lost"])
def test_a_save_that_fails_midway_leaves_the_transcript_and_the_tree_as_they_were(postgres_url, monkeypatch, fail_at):
    from glyphpack._history.tree import SessionTree

    with Workspace(postgres_url) as workspace:
        workspace.save("c", "a", turn(0), revision=0)
        before = workspace_record(workspace)
        real_record = SessionTree.record

        def failing(tree, conversation, agent, history, **options):
            if fail_at == "before the tree":
                raise OSError("the host died")
            if fail_at == "connection lost":  # the server ends this connection mid-transaction
                tree._db.query("SELECT pg_terminate_backend(pg_backend_pid())")
            added = real_record(tree, conversation, agent, history, **options)
            raise OSError(f"the host died after adding {added}")

        monkeypatch.setattr(SessionTree, "record", failing)
        with pytest.raises((OSError, StoreError)) as failed:
            workspace.save("c", "a", turn(0) + turn(1), revision=1)
        if fail_at == "connection lost":
            assert "nothing of this write was kept" in str(failed.value) and "terminating connection" in str(failed.value)
        monkeypatch.setattr(SessionTree, "record", real_record)
    with Workspace(postgres_url) as workspace:
        assert workspace_record(workspace) == before
        assert workspace.save("c", "a", turn(0) + turn(1), revision=1).revision == 2  # and the store takes the next save


def test_a_workspace_outlives_its_connections_being_cut(postgres_url):
    """A server restart or a failover ends every pooled connection; the next load and
    save get new ones instead of failing."""
    with Workspace(postgres_url, pool_size=2) as workspace:
        workspace.save("c", "a", turn(0), revision=0)
        cut = rows(postgres_url, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                 "WHERE application_name = '' AND pid <> pg_backend_pid() AND datname = current_database() "
                                 "AND backend_type = 'client backend' AND state = 'idle'")
        assert cut[0][0] >= 1
        time.sleep(0.1)
        assert workspace.load("c", "a").revision == 1
        assert workspace.save("c", "a", turn(0) + turn(1), revision=1).revision == 2


def test_images_are_stored_once_by_digest_and_come_back_byte_for_byte(postgres_url):
    png, other = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40, b"\x89PNG second"
    history = [
        Message("user", (Text("look"), Image(data=png)), id="u0"),
        Message("assistant", (ToolCall("t1", "screenshot", {}),), id="a0"),
        Message("user", (ToolResult("t1", (Text("again"), Image(data=png), Image(data=other, media_type="image/jpeg"))),), id="u1"),
        Message("assistant", (RedactedThinking("c2VjcmV0"), Text("the same picture twice")), id="a1"),
    ]
    with Workspace(postgres_url) as workspace:
        workspace.save("c", "a", history, revision=0)
        workspace.save("d", "b", [Message("user", (Image(data=png),), id="u9"), Message("assistant", "ok", id="a9")], revision=0)
    assert sorted(len(data) for (data,) in rows(postgres_url, "SELECT data FROM images")) == sorted([len(png), len(other)])
    blocks = [block for (body,) in rows(postgres_url, "SELECT body FROM bodies") for block in json.loads(body)["content"]]
    blocks += [inner for block in blocks if block["type"] == "tool_result" for inner in block["content"]]
    assert all("data" not in block for block in blocks if block["type"] == "image")
    assert [block["data"] for block in blocks if block["type"] == "redacted_thinking"] == ["c2VjcmV0"]  # not an image: kept in its message
    with Workspace(postgres_url) as workspace:
        assert workspace.load("c", "a").messages == tuple(history)
        assert [n.message for n in workspace.tree.nodes("c")][:4] == history


# ------------------------------------------------------------------ moving a workspace


def _a_lived_in_workspace(location: str, tmp_path: Path) -> None:
    """Two imported real sessions (a subagent, branches, measured requests), a fork, a
    checkpoint, a rewind, and a compaction with pages."""
    with Workspace(location) as workspace:
        workspace.import_session(import_file(SESSIONS / "ccl-session_b.jsonl"), "claude")
        workspace.import_session(import_file(SESSIONS / "simonw-sample_codex_session.jsonl"), "codex")
        main = workspace.tree.agent_tips("claude")
        agent = next(iter(main))
        workspace.checkpoint("claude", agent, "before")
        workspace.fork("claude", agent, new_conversation="claude-fork")
        earlier = workspace.tree.path("codex")[1].id
        workspace.tree.branch("codex", earlier)  # the tree's tip apart from the transcript's end
    root = project(tmp_path)
    with glyphpack.open_session(location, "task", "coder", model="claude-sonnet-4-5", context_window=30_000, policy=DENSE_SESSION) as s:
        s.add_user("Read every module.")
        drive(s, FakeModel(reading_script(14)), "anthropic", root)
        assert s.view is not None and s.view.pages > 0


def test_a_workspace_copies_to_postgres_and_back_losslessly(tmp_path, postgres_url, capsys):
    folder, back = str(tmp_path / "ws"), str(tmp_path / "back")
    _a_lived_in_workspace(folder, tmp_path)
    assert cli_main(["workspace", "copy", folder, postgres_url]) == 0
    out = capsys.readouterr()
    assert "both hold the same (compared)" in out.out and "conversation 1/" in out.err
    assert postgres_url.split(":")[2].split("@")[0] not in out.out  # the password stays out of the output
    assert cli_main(["workspace", "copy", postgres_url, back]) == 0
    with Workspace(folder) as a, Workspace(postgres_url) as b, Workspace(back) as c:
        original = workspace_record(a)
        assert workspace_record(b) == original == workspace_record(c)
        assert len(original["conversations"]) == 4 and any(t["views"] for t in original["transcripts"].values())
        # the files of the copy back are the files of the original, byte for byte
        for conversation, agent in a.transcripts():
            assert a.transcript_path(conversation, agent).read_bytes() == c.transcript_path(conversation, agent).read_bytes()
    # into a workspace that holds something: refused, nothing written
    assert cli_main(["workspace", "copy", folder, postgres_url]) == 2
    assert "is not empty: copy a workspace only into a new one (nothing was written)" in capsys.readouterr().err
    with Workspace(postgres_url) as b:
        assert workspace_record(b) == original


def test_the_record_a_copy_is_compared_by_sees_every_part_of_a_workspace(tmp_path, postgres_url):
    """Each change below, made to one side after a copy, must make the two records
    differ: the comparison is only as good as what the record holds."""
    folder = str(tmp_path / "ws")
    _a_lived_in_workspace(folder, tmp_path)
    with Workspace(folder) as source, Workspace(postgres_url) as copy:
        report = copy_workspace(source, copy)
        record = workspace_record(source)
        assert report.conversations == 4 and report.transcripts == len(source.transcripts())
        assert report.messages == sum(len(c["messages"]) for c in record["conversations"].values())
        assert report.views == sum(len(t["views"]) for t in record["transcripts"].values()) >= 1
        assert workspace_record(copy) == record
        claude_agent = next(iter(copy.tree.agent_tips("claude")))
        changes = {
            "a side branch": lambda: copy.tree.append("claude", Message("user", "a message off the path", id="off-path"))
            and copy.tree.branch("claude", record["conversations"]["claude"]["tip"]),
            "a label": lambda: copy.tree.label("claude", "before", None),
            "an agent's tip": lambda: copy.tree.set_tips("claude", record["conversations"]["claude"]["tip"], {claude_agent: None}),
            "when it was made": lambda: rows(postgres_url, "UPDATE conversations SET created = created + 1 WHERE id = 'codex' RETURNING id"),
            "a measured record": lambda: copy.backend.put_measured("claude", claude_agent, b'{"requests": []}'),
        }
        for what, change in changes.items():
            change()
            assert workspace_record(copy) != record, what
            record = workspace_record(copy)


def test_a_copy_into_a_workspace_with_a_tree_alone_is_refused(tmp_path, postgres_url):
    with Workspace(tmp_path / "ws") as source, Workspace(postgres_url) as destination:
        source.save("c", "a", turn(0), revision=0)
        destination.tree.create("already-here")  # a conversation, no transcript
        with pytest.raises(StoreError, match="is not empty"):
            copy_workspace(source, destination)
        assert destination.transcripts() == []


def test_a_copy_that_does_not_compare_equal_is_an_error(tmp_path, postgres_url, monkeypatch):
    from glyphpack._history import copy as copy_module

    with Workspace(tmp_path / "ws") as source:
        source.save("c", "a", turn(0), revision=0)
        real = copy_module.workspace_record

        def changed(workspace):
            record = real(workspace)
            if workspace is not source:
                record["transcripts"]["c/a"]["revision"] += 1
                del record["conversations"]["c"]  # and one part missing on one side
            return record

        monkeypatch.setattr(copy_module, "workspace_record", changed)
        with Workspace(postgres_url) as destination, pytest.raises(StoreError, match=r"differs from .* in: c, c/a$"):
            copy_workspace(source, destination)


def test_the_cli_and_the_navigator_read_a_workspace_that_lives_in_postgres(tmp_path, postgres_url, capsys):
    folder = str(tmp_path / "ws")
    _a_lived_in_workspace(folder, tmp_path)
    assert cli_main(["workspace", "copy", folder, postgres_url]) == 0
    capsys.readouterr()
    drawn = []
    for location in (folder, postgres_url):
        assert cli_main(["tree", location, "claude"]) == 0
        assert cli_main(["export", location, "codex", "--format", "json"]) == 0
        drawn.append(capsys.readouterr().out)
    assert drawn[0] == drawn[1] and "claude" in drawn[0]  # the same tree and export from either store
    pages = []
    for n, location in enumerate((folder, postgres_url)):
        out = tmp_path / f"nav{n}.html"
        assert cli_main(["export", location, "--format", "html", "--out", str(out)]) == 0
        pages.append(out.read_text())
    data = [page.split('id="data"', 1)[1] for page in pages]
    assert data[0].replace('"workspace":"ws"', "") == data[1].replace(f'"workspace":"{Workspace(postgres_url).name}"', "")
    assert '"trigger":"proactive"' in data[1] or '"trigger":"recovery"' in data[1]  # the compaction, from the database


def test_every_workspace_command_takes_a_database(postgres_url, capsys):
    session_file = str(SESSIONS / "ccl-session_b.jsonl")
    assert cli_main(["import", session_file, "--workspace", postgres_url, "--conversation", "imported"]) == 0
    out = capsys.readouterr().out
    assert "conversation imported" in out and "***" in out and postgres_url.split(":")[2].split("@")[0] not in out
    with Workspace(postgres_url) as workspace:
        agent = next(iter(workspace.tree.agent_tips("imported")))
        first_answer = next(m for m in workspace.load("imported", agent).messages if m.role == "assistant" and not m.tool_calls)
        length = len(workspace.load("imported", agent).messages)
    assert cli_main(["context", postgres_url, "imported", "--model", "claude-sonnet-4-5"]) == 0
    assert "tokens" in capsys.readouterr().out
    assert cli_main(["session", postgres_url, "imported", agent, "--model", "claude-sonnet-4-5", "-c", "/checkpoint here"]) == 0
    assert cli_main(["branch", postgres_url, "imported", first_answer.id]) == 0
    assert f"tip is now {first_answer.id}" in capsys.readouterr().out
    assert cli_main(["fork", postgres_url, "imported", "--new", "copied"]) == 0
    assert cli_main(["tree", postgres_url]) == 0
    drawn = capsys.readouterr().out
    assert "imported" in drawn and "copied" in drawn
    with Workspace(postgres_url) as workspace:
        assert len(workspace.load("imported", agent).messages) < length  # the transcript moved with the tip
        assert list(workspace.tree.labels("imported")) == ["here"]  # the session's checkpoint, in the database's tree
        assert [m.text for m in workspace.load("copied", agent).messages] == [m.text for m in workspace.load("imported", agent).messages]
    assert cli_main(["tree", postgres_url, "nowhere"]) == 2
    assert "no conversation 'nowhere' in postgresql://glyphpack:***@" in capsys.readouterr().err


# ------------------------------------------------------------------ hosts: processes on one database


@pytest.mark.slow  # two hosts racing on one server (about 1 s): CI runs it
def test_two_hosts_saving_one_transcript_from_one_revision_one_wins_nothing_lost(postgres_url, tmp_path):
    with Workspace(postgres_url) as workspace:
        workspace.save("c", "a", turn(0), revision=0)
    go = tmp_path / "go"
    hosts = [
        subprocess.Popen([sys.executable, str(TESTS / "host.py"), "race", postgres_url, name, str(go)], stdout=subprocess.PIPE, env=ENV, text=True)
        for name in ("east", "west")
    ]
    for host in hosts:  # both have loaded revision 1
        assert host.stdout is not None and host.stdout.readline().strip() == "loaded 1"
    go.write_text("")
    outcomes = sorted(host.communicate(timeout=60)[0].strip() for host in hosts)
    assert [o.split()[0] for o in outcomes] == ["conflict", "saved"], outcomes
    winner = outcomes[1].split()[1]
    with Workspace(postgres_url) as workspace:
        stored = workspace.load("c", "a")
        assert stored.revision == 2 and [m.id for m in stored.messages] == ["u0", "a0", f"{winner}-q", f"{winner}-a"]
        assert workspace.tree.path_to(workspace.tree.agent_tip("c", "a")) == list(stored.messages)


@pytest.mark.slow  # a writer process saving as fast as it can (about 1 s)
def test_a_reader_on_another_host_sees_whole_saves_while_a_writer_saves(postgres_url):
    """Loads while another process saves as fast as it can: each load is one save's
    state, its messages the ones that revision holds (a read in two statements once
    paired a revision with the next save's messages)."""
    import saver
    from histories import history

    host = subprocess.Popen([sys.executable, str(TESTS / "saver.py"), postgres_url], stdout=subprocess.PIPE, env=ENV)
    try:
        assert host.stdout is not None and host.stdout.readline().strip() == b"ready"
        host.stdout.readline()  # a first save is in
        seen = set()
        with Workspace(postgres_url) as workspace:
            while len(seen) < 40:
                loaded = workspace.load("conv", "agent")
                assert list(loaded.messages) == history((loaded.revision - 1) % saver.CYCLE + 1, 1)
                seen.add(loaded.revision)
    finally:
        host.kill()
        host.wait()
        if host.stdout:
            host.stdout.close()


@pytest.mark.slow  # a host process to kill (about 1 s)
def test_a_host_killed_inside_a_save_leaves_nothing_and_holds_no_lock(postgres_url):
    """SIGKILL while the save's transaction is open (its transcript rows written, the
    tree's not): the server rolls it back and frees the conversation's lock, so the
    next host saves at once from the same revision."""
    with Workspace(postgres_url) as workspace:
        workspace.save("c", "a", turn(0), revision=0)
        before = workspace_record(workspace)
    host = subprocess.Popen([sys.executable, str(TESTS / "host.py"), "stall", postgres_url], stdout=subprocess.PIPE, env=ENV, text=True)
    assert host.stdout is not None and host.stdout.readline().strip() == "inside"
    advisory = (  # the conversation's lock: its 64-bit key is split over classid and objid
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
        "AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(current_schema() || ':glyphpack:c', 0)"
    )
    assert rows(postgres_url, advisory) == [(1,)]  # the stalled host holds the conversation's lock
    with Workspace(postgres_url) as workspace:
        assert workspace.load("c", "a").revision == 1  # the open transaction is invisible to other hosts
    host.send_signal(signal.SIGKILL)
    host.wait()
    host.stdout.close()
    deadline = time.monotonic() + 10
    while rows(postgres_url, advisory) != [(0,)] and time.monotonic() < deadline:  # the server sees the socket close
        time.sleep(0.05)
    assert rows(postgres_url, advisory) == [(0,)]
    with Workspace(postgres_url) as workspace:
        assert workspace_record(workspace) == before
        saved = workspace.save("c", "a", turn(0) + turn(1), revision=1)
        assert saved.revision == 2 and workspace.tree.path_to(workspace.tree.agent_tip("c", "a")) == list(saved.messages)


@pytest.mark.slow  # a stalled host process (about 1 s)
def test_workspaces_in_two_schemas_of_one_database_never_wait_on_each_other(postgres_server, postgres_url):
    import threading

    other = postgres_server.create()
    try:
        with Workspace(postgres_url) as workspace:
            workspace.save("c", "a", turn(0), revision=0)
        host = subprocess.Popen([sys.executable, str(TESTS / "host.py"), "stall", postgres_url], stdout=subprocess.PIPE, env=ENV, text=True)
        done: list[int] = []
        in_time: list[int] = []
        with Workspace(other) as workspace:
            saving = threading.Thread(target=lambda: done.append(workspace.save("c", "a", turn(0), revision=0).revision), daemon=True)
            try:
                assert host.stdout is not None and host.stdout.readline().strip() == "inside"  # holds conversation c's lock there
                saving.start()
                saving.join(timeout=10)
                in_time = list(done)
            finally:  # the stalled host goes before the workspace closes: a save waiting on it then ends
                host.kill()
                host.wait()
                host.stdout.close()
                saving.join(timeout=20)
        assert in_time == [1]  # the same conversation id in another workspace saved at once, not after the kill
    finally:
        postgres_server.drop(other)


@pytest.mark.slow  # a session on two hosts (about 1 s): CI runs it
def test_a_session_resumed_on_another_host_sends_the_same_next_request_byte_for_byte(postgres_url, tmp_path):
    root = project(tmp_path)
    with glyphpack.open_session(postgres_url, "task", "coder", model="claude-sonnet-4-5", context_window=30_000, policy=DENSE_SESSION) as s:
        s.add_user("Read every module.")
        drive(s, FakeModel(reading_script(20)), "anthropic", root)
        assert s.view is not None and s.view.pages > 0  # a compaction with pages, kept in the database
        s.add_user("and now?")
        expected = json.loads(json.dumps(s.request("anthropic")))
        view = s.view
        compactions = s.workspace.backend.count_views("task", "coder")
    with Workspace(postgres_url) as workspace:
        assert read_view(workspace, "task", "coder") == view
        assert [v.covers for v in read_archive(workspace, "task", "coder")][-1] == view.covers and compactions >= 1
    resumed = subprocess.run(
        [sys.executable, str(TESTS / "host.py"), "request", postgres_url], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    found = json.loads(resumed.stdout)
    # the stored compaction is the one in force there (not one made again), and the request is the same
    assert found["covers"] == view.covers and found["compacted_again"] is False
    assert json.dumps(found["request"]) == json.dumps(expected)


def test_conflicting_saves_raise_conflict_error_not_a_database_error(postgres_url):
    with Workspace(postgres_url) as first, Workspace(postgres_url) as second:
        first.save("c", "a", turn(0), revision=0)
        assert second.load("c", "a").revision == 1
        first.save("c", "a", turn(0) + turn(1), revision=1)
        with pytest.raises(ConflictError, match="is at revision 2, not 1"):
            second.save("c", "a", turn(0) + turn(2), revision=1)
        assert second.load("c", "a").messages == tuple(turn(0) + turn(1))  # the cache sees the other host's save


# ------------------------------------------------------------------ what the mutation runs showed no test read


def test_a_refused_write_quotes_the_servers_first_line_or_else_names_the_error(postgres_url):
    with Workspace(postgres_url) as workspace:
        database = workspace.backend.database
        refused = psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction\nCONTEXT: line 2")
        assert str(database.damaged(refused)) == (
            f"{workspace.location} refused a write: it is read-only (cannot execute INSERT in a read-only transaction); nothing was written"
        )
        silent = database.damaged(psycopg.errors.ReadOnlySqlTransaction())
        assert str(silent) == f"{workspace.location} refused a write: it is read-only (ReadOnlySqlTransaction); nothing was written"


def test_a_pool_that_cannot_open_says_so_after_waiting_for_it(postgres_url, monkeypatch):
    import psycopg_pool

    opened = []

    def timing_out(pool, wait=False, timeout=30.0):
        opened.append((wait, timeout))
        raise psycopg_pool.PoolTimeout(f"pool initialization incomplete after {timeout} sec")

    monkeypatch.setattr(psycopg_pool.ConnectionPool, "open", timing_out)
    with pytest.raises(StoreError) as refused:
        Workspace(postgres_url)
    assert str(refused.value) == f"cannot open connections to {redacted(postgres_url)}: pool initialization incomplete after 30 sec"
    assert opened == [(True, 30)]  # ready when it opens, or said why


def test_a_workspace_at_an_older_schema_is_brought_up_to_date_keeping_what_it_holds(postgres_url):
    with Workspace(postgres_url) as workspace:
        workspace.save("c", "a", turn(0), revision=0)
    with psycopg.connect(postgres_url, autocommit=True) as connection:  # as a glyphpack of schema 1 left it
        connection.execute("DROP TABLE history_ends")
        connection.execute("UPDATE glyphpack_schema SET version = 1")
    with Workspace(postgres_url) as workspace:
        assert workspace.load("c", "a").messages == tuple(turn(0))
        assert workspace.save("c", "a", turn(0) + turn(1), revision=1).revision == 2
    assert rows(postgres_url, "SELECT version FROM glyphpack_schema") == [(SCHEMA_VERSION,)]
    assert "history_ends" in tables(postgres_url)


def test_an_empty_schema_table_is_no_workspace_to_read_and_one_to_create(postgres_url):
    with psycopg.connect(postgres_url, autocommit=True) as connection:  # what a crash between the two could leave
        connection.execute("CREATE TABLE glyphpack_schema (version INTEGER NOT NULL)")
    with pytest.raises(StoreError) as refused:
        Workspace(postgres_url, read_only=True)
    assert str(refused.value) == f"{redacted(postgres_url)} is not a glyphpack workspace (no glyphpack schema in it)"
    with Workspace(postgres_url) as workspace:
        workspace.save("c", "a", turn(0), revision=0)
    assert rows(postgres_url, "SELECT version FROM glyphpack_schema") == [(SCHEMA_VERSION,)]


def test_a_store_decodes_a_transcript_again_only_when_another_writer_moved_it(postgres_url, monkeypatch):
    """Reading a long transcript back is megabytes: a store keeps what it last read or
    wrote until the stored revision moves, and a save encodes only the messages it adds,
    once each though the tree stores them too."""
    from glyphpack._history.postgres import PostgresDatabase

    decoded: list[int] = []
    encoded: list[str] = []
    queries: list[str] = []
    real_decode_all, real_encoded, real_query = PostgresDatabase.decode_all, PostgresDatabase._encoded, PostgresDatabase.query
    monkeypatch.setattr(PostgresDatabase, "decode_all", lambda db, bodies, where=None: decoded.append(len(bodies)) or real_decode_all(db, bodies, where))
    monkeypatch.setattr(PostgresDatabase, "_encoded", staticmethod(lambda message, statements: encoded.append(message.id) or real_encoded(message, statements)))
    monkeypatch.setattr(PostgresDatabase, "query", lambda db, sql, params=(): queries.append(sql) or real_query(db, sql, params))
    with Workspace(postgres_url) as one, Workspace(postgres_url) as other:
        one.save("c", "a", turn(0), revision=0)
        assert encoded == ["u0", "a0"]
        one.load("c", "a")
        one.save("c", "a", turn(0) + turn(1), revision=1)
        assert encoded == ["u0", "a0", "u1", "a1"] and decoded == []
        queries.clear()
        assert other.load("c", "a").messages == tuple(turn(0) + turn(1))
        assert decoded == [4] and len(queries) == 2  # the revision, then the rows: no image query for a text-only transcript
        other.load("c", "a")
        assert decoded == [4]
        other.save("c", "a", turn(0) + turn(1) + turn(2), revision=2)
        assert one.load("c", "a").messages == tuple(turn(0) + turn(1) + turn(2)) and decoded == [4, 6]
        one.save("c", "a", [*turn(0), Message("user", "instead", id="u9")], revision=3, replace=True)
        assert encoded[-1:] == ["u9"]
    with Workspace(postgres_url) as fresh:
        assert fresh.load("c", "a").messages == (*turn(0), Message("user", "instead", id="u9"))


def test_a_stored_transcript_left_awaiting_a_tool_result_is_damaged_and_one_of_one_message_reads_back(postgres_url):
    history = [
        Message("user", "list the files", id="u0"),
        Message("assistant", (ToolCall("t1", "ls", {}),), id="a0"),
        Message("user", (ToolResult("t1", (Text("a.py"),)),), id="u1"),
        Message("assistant", "one file", id="a1"),
    ]
    with Workspace(postgres_url) as workspace:
        workspace.save("c", "a", history, revision=0)
        workspace.save("solo", "a", [Message("user", "only a question", id="q0")], revision=0)
    with psycopg.connect(postgres_url, autocommit=True) as connection:  # cut after the call, as no save can
        connection.execute("DELETE FROM transcript_messages WHERE conversation = 'c' AND position >= 2")
        connection.execute("UPDATE transcripts SET length = 2 WHERE conversation = 'c'")
    with Workspace(postgres_url) as workspace:
        with pytest.raises(StoreError) as damaged:
            workspace.load("c", "a")
        assert str(damaged.value) == f"{workspace.location} transcript c/a is damaged: mid-turn: tool calls t1 have no results yet; it was left untouched"
        assert workspace.load("solo", "a").messages == (Message("user", "only a question", id="q0"),)


def test_every_write_of_a_conversation_waits_for_its_lock_and_no_other_conversations(postgres_url):
    """Another host holding a conversation's lock holds up each write of it (a save, a
    measured record, a view, a delete, an exclusive section), each on its own pooled
    connection, and nothing of another conversation."""
    import threading

    with Workspace(postgres_url, pool_size=6) as workspace:
        backend = workspace.backend
        for name in ("save", "measured", "view", "delete", "exclusive", "free"):
            workspace.save(name, "a", turns(name, 1), revision=0)

        def exclusive() -> None:
            with backend.exclusive("exclusive", "a"):
                pass

        writes = {
            "save": lambda: workspace.save("save", "a", turns("save", 2), revision=1),
            "measured": lambda: backend.put_measured("measured", "a", b"{}"),
            "view": lambda: backend.put_view("view", "a", b"{}"),
            "delete": lambda: backend.delete("delete"),
            "exclusive": exclusive,
        }
        done: dict[str, object] = {}

        def run(name: str) -> None:
            try:
                writes[name]()
                done[name] = "done"
            except Exception as exc:  # reported by the assertion below
                done[name] = exc

        with psycopg.connect(postgres_url, autocommit=True) as other_host:
            for name in writes:
                other_host.execute("SELECT pg_advisory_lock(hashtextextended(current_schema() || %s, 0))", (f":glyphpack:{name}",))
            threads = [threading.Thread(target=run, args=(name,), daemon=True) for name in writes]
            for thread in threads:
                thread.start()
            time.sleep(0.3)
            workspace.save("free", "a", turns("free", 2), revision=1)  # another conversation is not held up
            time.sleep(0.2)
            assert done == {}, f"these wrote through another host's lock: {done}"
            other_host.execute("SELECT pg_advisory_unlock_all()")
            for thread in threads:
                thread.join(timeout=30)
        assert done == dict.fromkeys(writes, "done")
        assert workspace.load("save", "a").revision == 2 and workspace.backend.count_views("view", "a") == 1
        assert workspace.backend.read("delete", "a") is None and workspace.measured("measured", "a") is not None


def test_a_nul_in_a_task_is_kept_in_the_messages_and_no_title_stops_a_copy_into_postgres(tmp_path, postgres_url):
    """A folder workspace whose first task held a NUL could not be copied into PostgreSQL
    ("text fields cannot contain NUL"): its title was the task. The title shows U+FFFD;
    the message keeps the NUL (its JSON escapes it) in both stores."""
    import sqlite3
    from pathlib import Path

    from glyphpack._history.tree import check_title

    folder = str(tmp_path / "ws")
    with Workspace(folder) as workspace:
        workspace.save("c0", "main", [Message("user", (Text("nul \x00 here"),))], revision=0)
    # a folder written before titles were made so: its title holds the NUL as it came
    with sqlite3.connect(Path(folder, "tree.sqlite3")) as db:
        db.execute("UPDATE conversations SET title = ? WHERE id = ?", ("nul \x00 here", "c0"))
    db.close()
    with Workspace(folder, read_only=True) as source, Workspace(postgres_url) as copy:
        copy_workspace(source, copy)
        assert copy.load("c0", "main").messages[0].text == "nul \x00 here"
        assert copy.tree.conversation("c0").title == "nul \ufffd here"
    with Workspace(str(tmp_path / "new")) as fresh:
        fresh.save("c1", "main", [Message("user", (Text("nul \x00 again"),))], revision=0)
        assert fresh.tree.conversation("c1").title == "nul \ufffd again"
    with pytest.raises(StoreError, match="a conversation's title holds a NUL character .at character 3., which PostgreSQL keeps in no text field"):
        check_title("nul\x00")
