"""The CLI on a workspace uses what the conversation ran with: its model, window and
thresholds (a proxy's included), unless the command says otherwise; compact and shake
take a workspace's conversation as well as a file."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

import glyphpack
from glyphpack._cli import main
from glyphpack._history.view import read_view
from glyphpack.testing.fake import Turn, answer_body, count_tokens


def _ran(ws: Path, **options: object) -> None:
    """A session that called its model once per turn, as a loop or a proxy does."""
    with glyphpack.Workspace(ws) as workspace:
        session = glyphpack.Session(workspace, "run", "main", model="claude-sonnet-4-5", **options)  # type: ignore[arg-type]
        for turn in range(12):
            session.add_user(f"turn {turn}: " + "the log says the auth service failed at 10:00:03; " * 40)
            session.request("anthropic")
            session.add_response(answer_body("anthropic", Turn(text=f"noted {turn}"), turn, 900 * (turn + 1)), "anthropic")


def test_context_uses_the_model_and_window_the_conversation_ran_with(tmp_path, capsys):
    _ran(tmp_path / "ws", context_window=60_000, threshold=30_000)
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        assert workspace.settings("run", "main") == {"model": "claude-sonnet-4-5", "context_window": 60_000, "threshold": 30_000}
    assert main(["context", str(tmp_path / "ws"), "run"]) == 0
    out = capsys.readouterr().out
    assert "window 60,000" in out and "compacts at 30,000" in out
    # another model named: its own window, not the one remembered for claude-sonnet-4-5
    assert main(["context", str(tmp_path / "ws"), "run", "--model", "gpt-5.4"]) == 0
    assert "window 60,000" not in capsys.readouterr().out
    # a window said on the command line wins
    assert main(["context", str(tmp_path / "ws"), "run", "--context-window", "100000"]) == 0
    assert "window 100,000" in capsys.readouterr().out


def test_nothing_remembered_asks_for_the_model_and_a_file_always_does(tmp_path, capsys):
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        glyphpack.Session(workspace, "quiet", "main", model="claude-sonnet-4-5").add_user("hello")
    assert main(["context", str(tmp_path / "ws"), "quiet"]) == 2
    assert "pass --model: no model was called on quiet main" in capsys.readouterr().err
    session_file = tmp_path / "s.json"
    session_file.write_text('[{"role": "user", "content": "hi"}]')
    for command in (["context", str(session_file)], ["compact", str(session_file), "--budget", "100"], ["shake", str(session_file)]):
        assert main(command) == 2
        assert "needs --model" in capsys.readouterr().err
    assert main(["compact", str(session_file), "--model", "claude-sonnet-4-5"]) == 2
    assert "needs --budget" in capsys.readouterr().err


def test_compact_takes_a_workspace_conversation_and_says_whether_it_fit(tmp_path, capsys):
    _ran(tmp_path / "ws", context_window=60_000)
    assert main(["compact", str(tmp_path / "ws"), "run", "--budget", "6000"]) == 0
    assert "fits" in capsys.readouterr().out
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        view = read_view(workspace, "run", "main")
        assert view is not None and view.trigger == "/compact"
    assert main(["compact", str(tmp_path / "ws"), "run", "--budget", "2500"]) == 1  # cannot fit: exit 1, as for a file
    capsys.readouterr()
    assert main(["compact", str(tmp_path / "ws")]) == 2
    assert "name the conversation" in capsys.readouterr().err
    assert main(["shake", str(tmp_path / "ws"), "run"]) in (0, 1)
    with pytest.raises(SystemExit):
        main(["compact", str(tmp_path / "ws"), "run", "--budget", "many"])


def test_delete_says_what_first_then_removes_every_trace_and_leaves_the_rest(workspace_location, capsys):
    """On a folder and on PostgreSQL: without --yes nothing goes; with it the
    conversation's tree, transcripts, compactions, records and index entries go, and
    another conversation (a fork of it included) is untouched."""
    with glyphpack.Workspace(workspace_location) as workspace:
        session = glyphpack.Session(workspace, "gone", "main", model="claude-sonnet-4-5")
        for turn in range(3):
            session.add_user(f"turn {turn}: " + "the log says auth failed; " * 60)
            session.request("anthropic")
            session.add_response(answer_body("anthropic", Turn(text=f"noted {turn}"), turn, 500 * (turn + 1)), "anthropic")
        session.compact(1_500)
        workspace.tree.set_ends({("gone", "main"): [b"digest"]})
        workspace.fork("gone", "main", new_conversation="kept")
        kept = workspace.load("kept", "main").messages
    assert main(["delete", workspace_location, "gone"]) == 2
    assert "this would delete conversation gone: 6 messages in its tree, 1 transcript(s) (main) and their compactions; nothing was deleted" in capsys.readouterr().err
    assert main(["delete", workspace_location, "gone", "--yes"]) == 0
    assert capsys.readouterr().out.startswith("deleted conversation gone: 6 messages")
    with glyphpack.Workspace(workspace_location) as workspace:
        assert [c.id for c in workspace.tree.conversations()] == ["kept"]
        assert workspace.transcripts() == [("kept", "main")] and workspace.load("kept", "main").messages == kept
        assert read_view(workspace, "gone", "main") is None and workspace.settings("gone", "main") == {}
        assert workspace.tree.ending_with([b"digest"]) == []
        assert workspace.load("gone", "main").messages == ()
    assert main(["delete", workspace_location, "gone", "--yes"]) == 2
    assert "no conversation 'gone'" in capsys.readouterr().err
    assert main(["rename", workspace_location, "kept", "the login bug, take two"]) == 0
    assert main(["tree", workspace_location]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("kept  the login bug, take two")


def test_the_session_shell_exits_1_when_a_compact_does_not_fit(tmp_path, capsys):
    _ran(tmp_path / "ws", context_window=60_000)
    ws = str(tmp_path / "ws")
    assert main(["session", ws, "run", "main", "-c", "/compact 6000"]) == 0
    assert "fits" in capsys.readouterr().out
    assert main(["session", ws, "run", "main", "-c", "/compact 2500", "-c", "/context"]) == 1  # kept, and said
    assert "does not fit" in capsys.readouterr().out


def test_a_branch_back_past_the_compaction_in_force_uses_the_newest_one_still_on_its_path(tmp_path):
    """/branch two messages back used to drop the compaction in force and send the whole
    transcript again; the newest earlier compaction that stands for messages of the new
    path is used instead (made from those very messages)."""
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        session = glyphpack.Session(workspace, "run", "main", model="claude-sonnet-4-5", context_window=60_000)
        for turn in range(16):
            session.add_user(f"turn {turn}: " + "the log says the auth service failed at 10:00:03; " * 40)
            request = session.request("anthropic")
            session.add_response(answer_body("anthropic", Turn(text=f"noted {turn}"), turn, count_tokens(request)), "anthropic")
        first = session.compact(9_000)
        first_view = session.view
        for turn in range(16, 32):
            session.add_user(f"turn {turn}: " + "the db was slow at 10:00:05; " * 40)
            request = session.request("anthropic")
            session.add_response(answer_body("anthropic", Turn(text=f"noted {turn}"), turn, count_tokens(request)), "anthropic")
        session.compact(15_000)
        second_view = session.view
        assert first.report.fits and first_view is not None and second_view is not None and second_view.covers != first_view.covers
        ids = [m.id for m in session.messages]
        back = ids[ids.index(second_view.covers) - 2]  # before the newest compaction's end, after the first's
        assert ids.index(first_view.covers) < ids.index(back)
        whole = session.cost().history(session.messages[: ids.index(back) + 1])
        session.command(f"/branch {back}")
        assert session.view is not None and session.view.covers == first_view.covers
        sent, prefix = session.request_view()
        assert sent[:prefix] == first_view.messages and session.estimate() < whole  # its pages, then the path after it
        reopened = glyphpack.Session(workspace, "run", "main", model="claude-sonnet-4-5", context_window=60_000)
        assert reopened.view is not None and reopened.view.covers == first_view.covers  # the same after a restart


def test_each_model_gets_its_own_window_and_an_import_the_one_its_file_recorded(tmp_path, capsys):
    """Every OpenAI model got 128,000: a Codex file that recorded 258,400 read at 108% of
    the threshold, and a proxy in front of Codex compacted long before it had to."""
    from glyphpack import context_window

    expected = {
        "claude-sonnet-4-5": 200_000, "claude-haiku-4-5-20251001": 200_000, "claude-opus-4-8": 1_000_000,
        "openrouter/anthropic/claude-opus-4.6": 1_000_000, "claude-sonnet-4.6": 1_000_000,
        "gpt-5": 272_000, "gpt-5-codex": 272_000, "gpt-5.1-codex-mini": 272_000, "gpt-5.4": 922_000, "gpt-5.4:high": 922_000,
        "gpt-5.6": 272_000,  # not in the table: the shorter prefix's, never a larger window
        "gpt-5-chat-latest": 111_616, "gpt-4o": 111_616, "gpt-4.1-mini": 1_014_808, "o3": 100_000,
        "gemini-2.5-flash": 1_048_576, "gemini-3-pro-preview": 1_048_576,
    }
    assert {model: context_window(model) for model in expected} == expected
    with pytest.warns(glyphpack.ProfileWarning):  # (warned once per model a run: a name no other run has used)
        assert context_window(f"some-new-model-{uuid.uuid4().hex[:8]}") == 128_000  # the smallest family window
    session_file = Path(__file__).resolve().parents[2] / "shared" / "sessions" / "codex" / "as-codex-small-schemadrift.jsonl"
    if not session_file.is_file():
        session_file = Path(__file__).parent / "data" / "sessions" / session_file.name
    imported = glyphpack.import_file(session_file)
    assert imported.agents[0].context_window == 258_400  # its task_started event's (a later 0 is no window)
    assert main(["import", str(session_file), "--workspace", str(tmp_path / "ws"), "--conversation", "codex"]) == 0
    capsys.readouterr()
    with glyphpack.Workspace(tmp_path / "ws") as workspace:
        assert workspace.settings("codex", "main")["context_window"] == 258_400
    assert main(["context", str(tmp_path / "ws"), "codex"]) == 0
    assert "window 258,400" in capsys.readouterr().out
    assert main(["context", str(session_file), "--model", "gpt-5.4"]) == 0
    assert "window 258,400" in capsys.readouterr().out
    # the file names the model it called: no --model needed
    assert main(["context", str(session_file)]) == 0
    out = capsys.readouterr().out
    assert "tokens for gpt-5.6-sol (" in out and "window 258,400" in out
