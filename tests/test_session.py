"""The session as a store: saves at turn boundaries only, one tree agreeing with the
transcript (the transcript wins after a crash between the two), a persisted compaction
that keeps the prefix byte-identical across a restart, rewind and branch as pointer
moves that keep the explored path, fork, slash commands and the ``glyphpack session``
shell; and a harness SIGKILLed at random moments that resumes to the end."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_session_sdk import DENSE_SESSION, drive, project, reading_script

import glyphpack
from glyphpack import Message, StoreError, Text, ToolCall, UsageError
from glyphpack._cli import main as cli_main
from glyphpack._history.tree import SessionTree
from glyphpack.testing.fake import FakeModel

TESTS = Path(__file__).resolve().parent
MODEL = "claude-sonnet-4-5"


def anthropic_reply(text: str = "", calls: tuple[tuple[str, str], ...] = (), input_tokens: int | None = None) -> dict:
    """A Messages API response body (what ``model_dump()`` of the SDK's object gives)."""
    content = ([{"type": "text", "text": text}] if text else []) + [
        {"type": "tool_use", "id": call_id, "name": name, "input": {}} for call_id, name in calls
    ]
    return {"role": "assistant", "content": content} | ({"usage": {"input_tokens": input_tokens}} if input_tokens else {})


def open_session(tmp_path: Path, **options) -> glyphpack.Session:
    return glyphpack.open_session(tmp_path / "ws", "task", "coder", model=MODEL, **options)


def test_saved_at_turn_boundaries_only(tmp_path):
    with open_session(tmp_path, system="be brief") as s:
        s.add_user("list the files")
        assert s.workspace.load("task", "coder").messages == s.messages  # the user's message is a boundary
        s.request("anthropic")
        s.add_response(anthropic_reply("looking", (("t1", "ls"),)))
        assert s.pending_calls == (ToolCall("t1", "ls", {}),)
        stored = s.workspace.load("task", "coder")
        assert len(stored.messages) == 2 and stored.state == "unanswered"  # the calls are not saved
        with pytest.raises(UsageError, match="pending"):
            s.add_user("and another thing")
        with pytest.raises(UsageError, match="exactly the pending calls"):
            s.add_tool_results({"t2": "x"})
        s.add_tool_results({"t1": "a.py b.py"})
        assert s.workspace.load("task", "coder").messages == s.messages
        s.request("anthropic")
        s.add_response(anthropic_reply("two files"))
        assert s.workspace.load("task", "coder").state == "answered"


def test_resume_states(tmp_path):
    with open_session(tmp_path) as s:
        assert s.state == "empty"
        s.add_user("hello")
    with open_session(tmp_path) as s:
        assert s.state == "unanswered"  # the turn was not answered: retry it
        request = s.request("anthropic")
        assert request["messages"][-1]["content"][0]["text"] == "hello"
        s.add_response(anthropic_reply("hi"))
    with open_session(tmp_path) as s:
        assert s.state == "answered" and [m.text for m in s.messages] == ["hello", "hi"]


def test_the_transcript_wins_a_crash_between_its_write_and_the_trees(tmp_path, monkeypatch):
    """Fault injection: the tree write fails after the transcript's rename (as a crash
    there would leave it); the next open brings the tree to the transcript."""
    with open_session(tmp_path) as s:
        s.add_user("one")
        s.request("anthropic")
        s.add_response(anthropic_reply("first"))

        def crash(*args, **kwargs):
            raise OSError("killed")

        monkeypatch.setattr(SessionTree, "record", crash)
        with pytest.raises(OSError):
            s.add_user("two")
        monkeypatch.undo()
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        assert [m.text for m in ws.load("task", "coder").messages] == ["one", "first", "two"]
        assert [m.text for m in ws.tree.path_to(ws.tree.agent_tip("task", "coder"))] == ["one", "first"]
    with open_session(tmp_path) as s:
        assert [m.text for m in s.workspace.tree.path_to(s.workspace.tree.agent_tip("task", "coder"))] == ["one", "first", "two"]


def test_a_compaction_survives_a_restart_byte_for_byte(tmp_path):
    root = project(tmp_path)
    fake = FakeModel(reading_script(20))
    with open_session(tmp_path, context_window=30_000, policy=DENSE_SESSION) as s:
        s.add_user("Read every module.")
        drive(s, fake, "anthropic", root)
        assert s.view is not None and s.view.pages > 0
        s.add_user("and now?")
        before = json.dumps(s.request("anthropic"))
        covers = s.view.covers
    folder = tmp_path / "ws" / "transcripts" / "task"
    view_file = folder / "_views" / "coder.json"
    assert view_file.is_file() and (folder / "_archive" / "coder" / "0001.json").is_file()
    from glyphpack._history.folder import LEGACY_VIEW_START

    assert view_file.read_bytes().startswith(LEGACY_VIEW_START)  # how the old layout's views are told apart
    with open_session(tmp_path, context_window=30_000, policy=DENSE_SESSION) as s:
        assert s.view is not None and s.view.covers == covers
        assert json.dumps(s.request("anthropic")) == before
    # a workspace written before views had a folder of their own reads the same
    view_file.rename(folder / "coder.view.json")
    (folder / "_archive" / "coder").rename(folder / "coder.views")
    with open_session(tmp_path, context_window=30_000, policy=DENSE_SESSION) as s:
        assert s.view is not None and s.view.covers == covers
        assert json.dumps(s.request("anthropic")) == before
        assert s.workspace.transcripts() == [("task", "coder")]  # the old view is not an agent


def test_a_damaged_view_is_named(tmp_path):
    with open_session(tmp_path) as s:
        s.add_user("hi")
    path = tmp_path / "ws" / "transcripts" / "task" / "_views" / "coder.json"
    path.parent.mkdir()
    path.write_text("{not json")
    with pytest.raises(StoreError, match="_views/coder.json is damaged"):
        open_session(tmp_path)


def test_agent_names_cannot_reach_the_workspaces_own_files(tmp_path):
    """Agent ``coder.view`` and agent ``coder``'s compaction once shared
    ``coder.view.json``: loading either failed, and the error's advice deleted the
    other's file; ``transcripts()`` listed views as agents."""
    with open_session(tmp_path, context_window=30_000, policy=DENSE_SESSION) as coder:
        coder.add_user("Read every module.")
        drive(coder, FakeModel(reading_script(20)), "anthropic", project(tmp_path))
        assert coder.view is not None
        request = json.dumps(coder.request("anthropic"))
    with glyphpack.open_session(tmp_path / "ws", "task", "coder.view", model=MODEL) as other:
        other.add_user("a different agent")
        other.request("anthropic")
        other.add_response(anthropic_reply("done"))
    with glyphpack.open_session(tmp_path / "ws", "task", "coder.view", model=MODEL) as other:
        assert [m.text for m in other.messages][-2:] == ["a different agent", "done"]
    with open_session(tmp_path, context_window=30_000, policy=DENSE_SESSION) as coder:
        assert json.dumps(coder.request("anthropic")) == request
        assert coder.workspace.transcripts() == [("task", "coder"), ("task", "coder.view")]


def conversation_of(s: glyphpack.Session, turns: int, start: int = 0, words: int = 0) -> None:
    for n in range(start, start + turns):
        s.add_user(f"question {n}")
        s.request("anthropic")
        s.add_response(anthropic_reply(f"answer {n}" + f" and some detail number {n}" * words))


def test_rewind_is_a_pointer_move_that_keeps_the_explored_path(tmp_path):
    with open_session(tmp_path) as s:
        conversation_of(s, 2)
        s.command("/checkpoint before")
        conversation_of(s, 2, start=2)
        explored_tip = s.messages[-1].id
        result = s.command("/rewind before tried 2 and 3; neither helped")
        assert [m.text for m in s.messages][-1].endswith("tried 2 and 3; neither helped")
        assert len(s.messages) == 5 and "explored path stays" in result.text
        tree = s.workspace.tree
        assert explored_tip in {n.message.id for n in tree.nodes("task")}  # nothing was deleted
        drawing = s.command("/tree").text
        assert "answer 3" in drawing and "├─" in drawing and "<- tip" in drawing
        s.command(f"/branch {explored_tip[:10]}")  # and back again: one more pointer move
        assert s.messages[-1].id == explored_tip and len(s.messages) == 8
        assert s.workspace.load("task", "coder").messages == s.messages


def test_checkpoints_are_tree_labels_that_outlive_branches_and_come_along_in_forks(tmp_path, capsys):
    with open_session(tmp_path) as s:
        conversation_of(s, 2)
        s.command("/checkpoint before-compact")
        marked = s.messages[-1].id
        assert s.workspace.tree.labels("task") == {"before-compact": marked}
        conversation_of(s, 3, start=2)
        s.command(f"/branch {s.messages[1].id}")  # away from the checkpoint: it is not on this path
        assert "before-compact" not in s.workspace.load("task", "coder").checkpoints
        assert f"[{marked[:8]}]" in s.command("/tree").text and "[checkpoint before-compact]" in s.command("/tree").text
        s.command("/rewind before-compact what the detour taught")  # still reachable from the other branch
        assert s.messages[-2].id == marked and s.messages[-1].text.endswith("what the detour taught")
        assert s.workspace.load("task", "coder").checkpoints == {"before-compact": marked}
        s.command(f"/branch {s.messages[1].id}")
        s.command(f"/branch {marked[:12]}")  # branching back brings it back into the transcript
        assert s.workspace.load("task", "coder").checkpoints == {"before-compact": marked}
        fork = s.fork("task-copy")
        copied = s.workspace.load(fork, "coder")
        (name, target), = copied.checkpoints.items()
        assert name == "before-compact" and target == copied.messages[-1].id != marked  # on the copy, by its new id
        assert s.workspace.tree.labels("task-copy") == {"before-compact": target}
        s.command("/rewind before-compact nothing new")  # in the fork, on the fork's own path
        assert s.messages[-2].id == target
    assert cli_main(["tree", str(tmp_path / "ws"), "task"]) == 0
    assert "[checkpoint before-compact]" in capsys.readouterr().out


def test_a_checkpoint_stored_before_labels_still_survives_a_branch(tmp_path):
    with open_session(tmp_path) as s:
        conversation_of(s, 2)
        marked = s.messages[-1].id
        stored = s.workspace.load("task", "coder")  # written as an older glyphpack did: in the transcript only
        s.revision = s.workspace.save("task", "coder", stored.messages, revision=stored.revision, checkpoints={"old": marked}).revision
        conversation_of(s, 1, start=2)
        s.command(f"/branch {s.messages[1].id}")
        s.command("/rewind old found it again")
        assert s.messages[-2].id == marked


def test_fork_continues_in_a_copy(tmp_path):
    with open_session(tmp_path) as s:
        conversation_of(s, 2)
        original = [m.id for m in s.messages]
        result = s.command("/fork task-b")
        assert s.conversation == "task-b" and "task-b" in result.text
        assert [m.text for m in s.messages] == ["question 0", "answer 0", "question 1", "answer 1"]
        assert not set(original) & {m.id for m in s.messages}  # new ids: no shared rows
        conversation_of(s, 1, start=9)
        assert s.workspace.load("task", "coder").messages == tuple(s.workspace.tree.path("task"))
        assert [m.id for m in s.workspace.load("task", "coder").messages] == original


def test_two_agents_keep_two_tips_in_one_tree(tmp_path):
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        lead = glyphpack.open_session(ws, "task", "lead", model=MODEL)
        helper = glyphpack.open_session(ws, "task", "helper", model=MODEL)
        conversation_of(lead, 1)
        conversation_of(helper, 2, start=5)
        tips = ws.tree.agent_tips("task")
        assert list(tips) == ["lead", "helper"]  # the first agent is the main one
        assert ws.tree.tip("task") == lead.messages[-1].id
        assert ws.tree.path_to(tips["helper"]) == list(helper.messages)
        assert "(helper)" in lead.command("/tree").text


def test_commands(tmp_path):
    with open_session(tmp_path, context_window=20_000, policy=DENSE_SESSION) as s:
        conversation_of(s, 12, words=100)
        context = s.command("/context")
        assert context.data["request_messages"] == 24 and "compacts at" in context.text
        assert "no compaction" in context.text
        assert "/rewind" in s.command("/help").text
        for bad, why in [("/bogus", "unknown command"), ("/compact lots", "usage"), ("/branch", "usage"),
                         ("/rewind x", "usage"), ("/rewind nowhere d", "no checkpoint"), ("/context x", "no arguments"),
                         ('/checkpoint "unclosed', "cannot parse")]:
            with pytest.raises(glyphpack.GlyphpackError, match=why):
                s.command(bad)
        assert s.command("/shake").data["fits"] is True
        compacted = s.command("/compact 4000")
        assert compacted.data["budget"] == 4000 and compacted.data["fits"]
        assert s.view is not None and s.view.trigger == "/compact"
        assert "compaction in force (/compact)" in s.command("/context").text


def test_the_session_shell(tmp_path, capsys):
    with open_session(tmp_path) as s:
        conversation_of(s, 2)
    ws = str(tmp_path / "ws")
    assert cli_main(["session", ws, "task", "coder", "--model", MODEL, "-c", "/context", "-c", "/checkpoint here", "-c", "/tree"]) == 0
    out = capsys.readouterr().out
    assert "compacts at" in out and "checkpoint 'here'" in out and "<- tip" in out
    assert cli_main(["session", ws, "task", "coder", "--model", MODEL, "-c", "/nope"]) == 2
    assert "unknown command" in capsys.readouterr().err
    # A script stops at its first error; plain text is not sent anywhere.
    assert cli_main(["session", ws, "task", "coder", "--model", MODEL, "-c", "/context", "-c", "hello there", "-c", "/tree"]) == 2
    shown = capsys.readouterr()
    assert "compacts at" in shown.out and "<- tip" not in shown.out
    assert shown.err == ("glyphpack: error: 'hello' is not a command: this shell runs slash commands over the stored "
                         "session and calls no model; /help lists them\n")
    assert cli_main(["tree", ws, "nope"]) == 2
    assert capsys.readouterr().err == f"glyphpack: error: no conversation 'nope' in {ws} (stored: task)\n"
    assert cli_main(["session", ws, "task", "nobody", "--model", MODEL, "-c", "/tree"]) == 2
    assert "no transcript for task nobody" in capsys.readouterr().err
    assert cli_main(["session", str(tmp_path / "nothing"), "task", "coder", "--model", MODEL]) == 2
    assert "not a glyphpack workspace" in capsys.readouterr().err


@pytest.mark.slow  # a new process (1.5-2 s of imports): CI runs it
def test_the_session_shell_reads_stdin(tmp_path):
    with open_session(tmp_path) as s:
        conversation_of(s, 1)
    done = subprocess.run(
        [sys.executable, "-m", "glyphpack", "session", str(tmp_path / "ws"), "task", "coder", "--model", MODEL],
        input="/checkpoint a\n\n/rewind a learned-nothing\n/context\n", capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "rewound to 'a'" in done.stdout and "Traceback" not in done.stderr


def kill_and_resume(tmp_path: Path, kills: int, seed: int, ws: str | Path | None = None) -> None:
    """Run the harness, SIGKILL it at a random moment, check the store, resume; repeat
    ``kills`` times, then let it finish."""
    root = project(tmp_path, files=12)
    ws = ws or tmp_path / "ws"
    in_one_transaction = str(ws).startswith("postgresql://")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(TESTS.parent)]))
    rng = random.Random(seed)
    command = [sys.executable, str(TESTS / "session_child.py"), str(ws), str(root), "12"]
    for _ in range(kills):
        child = subprocess.Popen(command, stdout=subprocess.PIPE, env=env)
        assert child.stdout is not None
        # Kill after a random number of requests plus a random delay: mid-turn, mid-save,
        # between the transcript's write and the tree's, wherever it lands.
        for _ in range(rng.randint(1, 4)):
            line = child.stdout.readline()
            if not line or line.startswith(b"done"):
                break
        time.sleep(rng.uniform(0.0, 0.02))
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        with glyphpack.Workspace(ws) as workspace:
            stored = workspace.load("task", "coder")  # never torn: a saved boundary
            glyphpack.validate_history(stored.messages, allow_pending=False)
            tree_path = workspace.tree.path_to(workspace.tree.agent_tip("task", "coder"))
            # the tree is the transcript, or one save behind it (killed between the two writes
            # of a folder; PostgreSQL commits both in one transaction)
            assert tree_path == list(stored.messages[: len(tree_path)])
            assert len(stored.messages) - len(tree_path) <= (0 if in_one_transaction else 2)
    finished = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip().endswith("done")
    with glyphpack.Workspace(ws) as workspace:
        stored = workspace.load("task", "coder")
        assert stored.state == "answered" and stored.messages[-1].text == "finished"
        read = [c.arguments["path"] for m in stored.messages for c in m.tool_calls]
        assert read == [f"mod_{n:02d}.py" for n in range(12)]  # every turn once: none lost, none repeated
        assert workspace.tree.path_to(workspace.tree.agent_tip("task", "coder")) == list(stored.messages)


@pytest.mark.slow
def test_killed_harness_resumes_fifty_times(tmp_path, workspace_location):
    kill_and_resume(tmp_path, kills=50, seed=2, ws=workspace_location)


def test_messages_carry_no_unsaved_pending_state_across_restarts(tmp_path):
    """A harness killed with calls pending resumes from the last boundary: the calls are
    asked for again (the answer that made them was never saved)."""
    with open_session(tmp_path) as s:
        s.add_user("go")
        s.request("anthropic")
        s.add_response(anthropic_reply("", (("t1", "ls"),)))
    with open_session(tmp_path) as s:
        assert s.state == "unanswered" and [m.role for m in s.messages] == ["user"]
        assert not s.pending_calls
        assert isinstance(s.messages[0], Message)


@pytest.mark.parametrize(("model", "no_elision"), [("claude-fable-5", True), ("gemini-3-pro", True),
                                                  ("claude-sonnet-4-5", False), ("gpt-5.6", False)])
@pytest.mark.parametrize("recall", [True, False])
def test_default_rungs_keep_old_results_as_pages_where_pages_are_cheap(tmp_path, model, no_elision, recall):
    """Recall is on by default: every word the pages stand for comes back on request, so
    they carry the gist; without it, the reader's exact shape."""
    from glyphpack._session.session import SESSION_RUNGS

    options = {} if recall else {"recall": False}
    with glyphpack.open_session(tmp_path / "ws", "t", "a", model=model, **options) as s:
        assert s.recall_enabled is recall
        # With recall (the default) every reader gets the whole ladder: elision loses nothing.
        assert (s.policy.rungs == SESSION_RUNGS) == (no_elision and not recall) and s.policy.fidelity == ("gist" if recall else "exact")
        assert s.policy.summary_pages is not recall  # with recall the summary stands behind a ref: it may go deep


def test_a_reader_without_vision_keeps_elision(tmp_path):
    summarizer = glyphpack.Summarizer(lambda prompt: "summary")
    with glyphpack.open_session(tmp_path / "ws", "t", "a", model="o1-mini", summarizer=summarizer) as s:
        assert "elision" in s.policy.rungs  # the free rung before the summary


PI = TESTS.parent.parent / "shared" / "sessions" / "pi" / "pimono-before-compaction.jsonl"


@pytest.mark.slow  # 3 s: CI runs it
@pytest.mark.skipif(not PI.is_file(), reason="shared/sessions is not beside the repository")
def test_when_the_pages_cannot_fit_the_default_falls_back_to_the_whole_ladder(tmp_path):
    from glyphpack._history.messages import turn_boundaries

    history = list(glyphpack.import_file(PI).messages)
    end = next(t for t in turn_boundaries(history) if t >= 748 and history[t - 1].role == "assistant")
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        ws.save("pi", "agent", history[:end], revision=0)
        with glyphpack.open_session(ws, "pi", "agent", model="claude-fable-5", recall=False) as s:  # reads 5x8, no recall: no elision
            pages_only = glyphpack.compact(s.messages, s.profile, 60_000, policy=s.policy)
            assert not pages_only.report.fits  # 415k tokens: too much even as pages
            result = s.compact(60_000)
            assert result.report.fits and result.report.rung("elision") is not None and result.pages


def test_a_save_the_tree_would_refuse_writes_nothing(tmp_path):
    """Message ids are stored once: saving the same messages under a second conversation
    is refused before the transcript is written (a copy needs new ids: fork)."""
    history = [Message("user", "hello", id="u1"), Message("assistant", "hi", id="a1")]
    with glyphpack.Workspace(tmp_path / "ws") as ws:
        ws.save("first", "agent", history, revision=0)
        with pytest.raises(StoreError, match="already in conversation 'first'.*fork"):
            ws.save("second", "agent", history, revision=0)
        assert not ws.transcript_path("second", "agent").exists()
        assert ws.load("first", "agent").messages == tuple(history)


def test_the_cli_branch_and_fork_move_the_transcript_with_the_tree(tmp_path, capsys):
    with open_session(tmp_path) as s:
        conversation_of(s, 3)
        early = s.messages[1].id  # the first answer
    ws = str(tmp_path / "ws")
    assert cli_main(["branch", ws, "task", early[:10]]) == 0
    with glyphpack.Workspace(ws) as workspace:
        stored = workspace.load("task", "coder")
        assert stored.messages[-1].id == early and len(stored.messages) == 2
        assert workspace.tree.agent_tip("task", "coder") == early  # the two agree
    assert cli_main(["fork", ws, "task", "--new", "copy"]) == 0
    with glyphpack.Workspace(ws) as workspace:
        copy = workspace.load("copy", "coder")
        assert [m.text for m in copy.messages] == ["question 0", "answer 0"]
    with open_session(tmp_path) as s:  # a session resumes from the branch
        assert s.messages[-1].id == early
    assert cli_main(["branch", ws, "task", early[:10], "--agent", "nobody"]) == 2
    assert "no transcript for agent 'nobody'" in capsys.readouterr().err


def test_call_ids_a_server_reuses_in_later_turns_are_made_unique(tmp_path):
    """Servers that number calls per response (call_0 in every turn) made the second
    ``add_response`` raise, and the session could not go on."""
    from glyphpack._wire.anthropic import check_anthropic

    with open_session(tmp_path) as s:
        s.add_user("list, then read")
        s.request("anthropic")
        s.add_response(anthropic_reply("", (("call_0", "ls"),)))
        s.add_tool_results({"call_0": "a.py"})
        s.request("anthropic")
        second = s.add_response(anthropic_reply("", (("call_0", "read"), ("call_1", "read"))))
        assert [c.id for c in second.tool_calls] == ["call_0-2", "call_1"]
        assert [c.id for c in s.pending_calls] == ["call_0-2", "call_1"]
        s.add_tool_results({"call_0": "print(1)", "call_1": "print(2)"})  # the ids the model gave
        s.request("anthropic")
        third = s.add_response(anthropic_reply("", (("call_0", "ls"), ("call_0-3", "ls"))))
        assert [c.id for c in third.tool_calls] == ["call_0-3", "call_0-3-2"]  # unique within the answer too
        s.add_tool_results({"call_0-3": "b.py", "call_0-3-2": "c.py"})  # or the ids as stored
        s.add_user("thanks")
        request = s.request("anthropic")
        check_anthropic(request["messages"])
        results = [r for m in s.messages for r in m.tool_results]
        assert [(r.call_id, r.text) for r in results] == [
            ("call_0", "a.py"), ("call_0-2", "print(1)"), ("call_1", "print(2)"), ("call_0-3", "b.py"), ("call_0-3-2", "c.py")
        ]
    with open_session(tmp_path) as again:  # and it all reads back after a restart
        assert [m.id for m in again.messages] == [m.id for m in s.messages]


def test_recover_compares_before_and_after_on_the_providers_scale(tmp_path):
    """``recover()`` took "before" from the stale estimate, recalibrated, then compared the
    ladder's result with it: with no summarizer it raised "could not shrink" although the
    ladder got the request from 43k down toward a 36k limit."""
    with open_session(tmp_path, policy=DENSE_SESSION) as s:
        conversation_of(s, 12, words=40)
        s.add_user("and now?")
        s.request("anthropic")
        estimate = s.cost().history(s.messages)
        measured, limit = estimate * 3, int(estimate * 2.6)  # the tools the session never saw
        result = s.recover(f"prompt is too long: {measured} tokens > {limit} maximum")
        assert result.report.tokens_after < measured
        assert s.estimator.overhead == measured - estimate


def test_an_imported_id_as_tree_shows_it_is_found_even_when_it_prefixes_others(tmp_path):
    from glyphpack import Workspace
    from glyphpack._history.imported import ImportedAgent, ImportedSession, ImportReport

    messages = tuple(m for n in range(60) for m in (Message("user", f"q{n}", id=f"pi-{2 * n}"), Message("assistant", f"a{n}", id=f"pi-{2 * n + 1}")))
    with Workspace(tmp_path / "ws") as ws:
        ws.import_session(ImportedSession("t", (ImportedAgent("main", messages),), (), ImportReport(format="test")), "conv")
        assert ws.tree.find("conv", "pi-5") == "conv/pi-5"  # pi-50 ... pi-59 exist too
        assert ws.tree.find("conv", "pi-11") == "conv/pi-11"
        with pytest.raises(StoreError, match="120 messages in 'conv' with an id starting 'pi-'"):
            ws.tree.find("conv", "pi-")  # a prefix of many, none exactly


def test_absurd_inputs_and_provider_counts_are_refused_or_ignored(tmp_path):
    """``target="5"`` raised a raw TypeError; a negative ``input_tokens`` calibrated the
    estimate; an error saying "limit 1, measured 2" reported ``fits: 2 -> -139``."""
    from glyphpack._compaction.recovery import Overflow, parse_overflow

    for bad in ({"target": "5"}, {"threshold": 2.5}, {"threshold": True}, {"target": -1}):
        with pytest.raises(glyphpack.UsageError, match="must be a positive number of tokens"):
            open_session(tmp_path, **bad)
    with open_session(tmp_path) as s:
        s.add_user("hi")
        s.request("anthropic")
        before = s.estimator.overhead  # the recall tool's schema, as text, before any count
        s.add_response(anthropic_reply("hello", input_tokens=-5))
        assert s.estimator.overhead == before  # not a count any provider gives: not taken
        s.add_user("again")
        s.request("anthropic")
        s.add_response(anthropic_reply("hello", input_tokens=5_000))
        assert s.estimator.overhead != before
    from glyphpack._wire import usage_tokens as _usage

    assert _usage({"usage": {"input_tokens": -5, "cache_read_input_tokens": 3_000}}, "input_tokens", "cache_read_input_tokens") is None
    assert _usage({"usage": {"input_tokens": 5, "cache_read_input_tokens": 3_000}}, "input_tokens", "cache_read_input_tokens") == 3_005
    assert _usage({"usage": {"input_tokens": True}}, "input_tokens") is None
    with pytest.raises(glyphpack.UsageError, match="positive number of tokens"):
        glyphpack.calibrate([Message("user", "x")], MODEL, 0)
    assert Overflow("tokens", 2, 1) == Overflow("tokens", None, None)
    assert Overflow("tokens", 150_000, 200_000).measured is None  # under its own limit: not an overflow count
    assert parse_overflow("prompt is too long: 2 tokens > 1 maximum") == Overflow("tokens", None, None, "anthropic")
    kept = Overflow("tokens", 215_000, 200_000)
    assert (kept.measured, kept.limit) == (215_000, 200_000)


def test_fork_carries_the_compaction_in_force(tmp_path):
    """After ``/compact``, ``/fork`` sent the whole history and said nothing: the fork
    now sends what the conversation would have sent, its messages under new ids."""
    with open_session(tmp_path, policy=DENSE_SESSION) as s:
        conversation_of(s, 12, words=30)
        s.command("/compact 1500")
        assert s.view is not None
        s.add_user("and now?")
        before = s.request("anthropic")
        old_ids = [m.id for m in s.messages]
        result = s.command("/fork")
        assert "with the compaction in force" in result.text
        after = s.request("anthropic")
        expected = renamed_ids(json.dumps(before), old_ids, s.messages)
        assert json.dumps(after) == expected  # the same request, the refs its notes name under the new ids
        assert s.view is not None and s.view.covers in {m.id for m in s.messages}
    with glyphpack.open_session(tmp_path / "ws", s.conversation, "coder", model=MODEL, policy=DENSE_SESSION) as again:
        assert again.view is not None and json.dumps(again.request("anthropic")) == expected


def renamed_ids(text: str, old_ids: list[str], messages: Sequence[glyphpack.Message]) -> str:
    """``text`` with each of ``old_ids`` replaced by the id of the message at its place in
    ``messages``, whole or as the short id a ref names (its first ``SHORT_ID`` characters)."""
    from glyphpack._history.recall import SHORT_ID

    for old, new in zip(old_ids, (m.id for m in messages)):
        text = text.replace(old, new).replace(f"messages:{old[:SHORT_ID]}", f"messages:{new[:SHORT_ID]}")
        text = text.replace(f"..{old[:SHORT_ID]}", f"..{new[:SHORT_ID]}")
    return text


def test_a_restart_prices_and_sends_the_next_request_as_the_old_process_would(tmp_path):
    """The calibrated overhead (mostly the tool schemas, which the session never sees)
    lived only in memory: a new process compacted at another point, or not at all."""
    with open_session(tmp_path, context_window=6_000, policy=DENSE_SESSION) as s:
        for n in range(8):
            s.add_user(f"question {n} " + "with some detail " * 20)
            s.request("anthropic")
            s.add_response(anthropic_reply(f"answer {n} " + "and more words " * 30, input_tokens=s.cost().history(s.messages) + 2_500))
        s.add_user("and now?")
        expected = json.dumps(s.request("anthropic"))
        overhead = s.estimator.overhead
    assert overhead > 2_000
    with open_session(tmp_path, context_window=6_000, policy=DENSE_SESSION) as again:
        assert again.estimator.overhead == overhead
        assert json.dumps(again.request("anthropic")) == expected


def test_a_process_that_never_closed_its_session_leaves_what_it_learned_for_the_next(tmp_path):
    """A harness killed mid-run (or an adapter that never closes its sessions) leaves
    the calibration of its last answer: the next process prices the conversation as
    the old one did (spacing the calibration's writes out broke pydantic-ai's restart)."""
    s = open_session(tmp_path, context_window=6_000, policy=DENSE_SESSION)
    for n in range(4):
        s.add_user(f"question {n} " + "with some detail " * 20)
        s.request("anthropic")
        s.add_response(anthropic_reply(f"answer {n}", input_tokens=s.cost().history(s.messages) + 700 * (n + 1)))
    again = open_session(tmp_path, context_window=6_000, policy=DENSE_SESSION)  # the first never closed
    assert again.estimator == s.estimator and again.estimate() == s.estimate()
    s.close()
    again.close()


def test_a_harness_sees_what_each_request_did(tmp_path):
    """A harness could tell that a compaction happened inside ``request()`` only by
    comparing ``s.view`` before and after."""
    seen = []
    with open_session(tmp_path, context_window=3_000, policy=DENSE_SESSION) as s:
        s.on_request = seen.append
        for n in range(16):
            s.add_user(f"question {n} " + "with some detail " * 20)
            s.request("anthropic")
            s.add_response(anthropic_reply(f"answer {n} " + "and more words " * 30))
        assert seen and s.last_request is seen[-1]
        first, compacting = seen[0], [r for r in seen if r.compaction is not None]
        assert first.prefix_kept is False and first.compaction is None and first.api == "anthropic"
        assert compacting and all(not r.prefix_kept and r.prefix > 0 for r in compacting)
        assert all(r.prefix_kept for r in seen[1:] if r.compaction is None)
        assert all(0 < r.tokens < 3_000 and r.messages >= r.prefix for r in seen)
        assert compacting[0].compaction.report.fits
        # What a prompt cache can read: nothing at first; on a turn that only appends, the
        # whole previous request; after a compaction, at most what came before its cut.
        assert first.reused_tokens == 0
        for before, after in zip(seen, seen[1:]):
            if after.compaction is None:
                assert before.tokens <= after.reused_tokens < after.tokens
            else:
                assert after.reused_tokens < before.tokens


def test_the_tool_schemas_count_from_the_first_request(tmp_path):
    """Estimates before the first answer were blind to the harness's tools."""
    tools = [{"name": f"tool_{n}", "description": "reads a file " * 40, "input_schema": {"type": "object", "properties": {
        "path": {"type": "string", "description": "the file " * 20}}}} for n in range(6)]
    with open_session(tmp_path / "plain", tools=tools, recall=False) as s:
        assert s.estimator.overhead == s.cost().text(json.dumps(tools, ensure_ascii=False)) > 1_000
    with open_session(tmp_path, tools=tools) as s:  # recall on: its schema is sent too
        from glyphpack._session.session import RECALL_SCHEMA, _schema_text

        expected = s.cost().text(_schema_text([tools, RECALL_SCHEMA]))
        assert s.estimator.overhead == expected > s.cost().text(json.dumps(tools, ensure_ascii=False))
        s.add_user("hi")
        s.request("anthropic", tools=tools)
        s.add_response(anthropic_reply("hello", input_tokens=5_000))
        assert s.estimator.overhead == 5_000 - s.cost().history(s.messages[:1])  # the count wins once there is one
    circular: list = []
    circular.append(circular)
    with pytest.raises(glyphpack.UsageError, match="tools must be JSON-like"):
        open_session(tmp_path / "other", tools=circular)


def test_reused_tokens_are_the_previous_request_exactly_when_a_turn_only_appends(tmp_path):
    tools = [{"name": "read", "description": "reads a file " * 30, "input_schema": {"type": "object"}}]
    seen = []
    with open_session(tmp_path, context_window=3_000, policy=DENSE_SESSION, tools=tools) as s:
        s.on_request = seen.append
        for n in range(16):
            s.add_user(f"question {n} " + "with some detail " * 20)
            s.request("anthropic")
            s.add_response(Message("assistant", (Text(f"answer {n} " + "and more words " * 30),)))  # no usage: no recalibration
    assert seen[0].reused_tokens == 0
    appended = [(b, a) for b, a in zip(seen, seen[1:]) if a.compaction is None]
    assert appended and all(a.reused_tokens == b.tokens for b, a in appended)  # the overhead (the tools) included
    compacted = [a for a in seen[1:] if a.compaction is not None]
    assert compacted and all(a.reused_tokens < a.tokens // 2 for a in compacted)  # the cut: most is written anew


def test_the_interactive_shell_prompts_and_ends_on_ctrl_d(monkeypatch, capsys):
    from glyphpack._cli.ladder import _shell_lines

    typed = iter(["/context", "/tree"])
    prompts = []

    def fake_input(prompt):
        prompts.append(prompt)
        try:
            return next(typed)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr("builtins.input", fake_input)
    assert list(_shell_lines(None, True)) == ["/context", "/tree"]
    assert prompts == ["glyphpack> "] * 3 and capsys.readouterr().out == "\n"
    assert list(_shell_lines(["/a", "/b"], False)) == ["/a", "/b"]


def test_tree_counts_long_runs_unless_all(tmp_path, capsys):
    with open_session(tmp_path) as s:
        conversation_of(s, 6)
        assert "…" in s.command("/tree").text and "…" not in s.command("/tree all").text
        with pytest.raises(glyphpack.UsageError, match=r"usage: /tree \[all\]"):
            s.command("/tree everything")
    ws = str(tmp_path / "ws")
    assert cli_main(["tree", ws, "task"]) == 0 and "messages …" in capsys.readouterr().out
    assert cli_main(["tree", ws, "task", "--all"]) == 0 and "…" not in capsys.readouterr().out


def test_a_fork_sends_what_the_conversation_would_have_elided_results_included(tmp_path):
    """``/fork`` under a compaction that elided tool results sent 132,476 tokens where the
    original sent 112,510: the carried view took each elided message's original back by
    id. The fork's next request is now the original's with the messages' new ids, and a
    ref its notes name is recalled in the fork."""
    with open_session(tmp_path) as s:  # recall on: the whole ladder, elision first
        for n in range(12):
            s.add_user(f"read file {n}")
            s.request("anthropic")
            s.add_response(anthropic_reply(f"reading {n}", ((f"t{n}", "read"),)))
            s.add_tool_results({f"t{n}": f"line {n}: " + "some content of the file " * 200})
        s.command("/compact 8000")  # elision alone gets there: the stubs stand in the view under their messages' ids
        stored = {m.id: m for m in s.messages}
        assert sum(m.id in stored and m != stored[m.id] for m in s.view.messages) == 10
        s.add_user("and now?")
        before = json.dumps(s.request("anthropic"))
        old_ids = [m.id for m in s.messages]
        s.command("/fork")
        after = json.dumps(s.request("anthropic"))
        assert after == renamed_ids(before, old_ids, s.messages) and len(after) == len(before)
        refs = re.findall(r'ref \\"([^"\\]+)\\"', after)
        assert refs and all(not any(old in ref for old in old_ids) for ref in refs)
        recalled = s.recall(refs[0])  # the fork's own messages answer it
        assert not recalled.is_error and "some content of the file" in "".join(b.text for b in recalled.content)


def test_the_cli_fork_carries_the_compaction_in_force_too(tmp_path):
    """``glyphpack fork`` copied the transcript without its compaction: a session on the
    copy compacted anew (or sent the whole history). Now the copy's next request is the
    original's, under the new ids; a fork at a point before the compaction carries none."""
    with open_session(tmp_path) as s:
        for n in range(12):
            s.add_user(f"read file {n}")
            s.request("anthropic")
            s.add_response(anthropic_reply(f"reading {n}", ((f"t{n}", "read"),)))
            s.add_tool_results({f"t{n}": f"line {n}: " + "some content of the file " * 200})
        s.command("/compact 8000")
        early = s.messages[3].id
        s.add_user("and now?")
        original = [m.id for m in s.messages]
    ws = str(tmp_path / "ws")
    assert cli_main(["fork", ws, "task", "--new", "copy"]) == 0
    assert cli_main(["fork", ws, "task", "--new", "early", "--at", early]) == 0
    with open_session(tmp_path) as s:
        before = json.dumps(s.request("anthropic"))
    with glyphpack.open_session(tmp_path / "ws", "copy", "coder", model=MODEL) as copy:
        assert copy.view is not None
        assert json.dumps(copy.request("anthropic")) == renamed_ids(before, original, copy.messages)
    with glyphpack.Workspace(ws) as workspace:
        assert glyphpack._history.view.read_view(workspace, "early", "coder") is None


# ---------------------------------------------------------------- held, then saved


def _user(text: str) -> Message:
    return Message("user", (Text(text),))


def test_messages_held_unsaved_are_saved_with_the_answer_once(tmp_path, monkeypatch):
    """``extend(save=False)`` (a proxy forwarding first): checked as a save checks them,
    stored by nothing until the answer's save, which writes them with it, once."""
    with open_session(tmp_path) as s:
        s.add_user("list the files")
        s.request("anthropic")
        s.add_response(anthropic_reply("which folder?"))
        saves: list[int] = []
        real_save = s.workspace.save
        monkeypatch.setattr(s.workspace, "save", lambda *a, **k: saves.append(len(a[2])) or real_save(*a, **k))
        with pytest.raises(glyphpack.HistoryError):  # a boundary only, as a save would refuse it
            s.extend([Message("assistant", (ToolCall("t9", "ls", {}),))], save=False)
        assert not s.unsaved and len(s.messages) == 2
        s.extend([_user("src")], save=False)
        assert s.unsaved and len(s.messages) == 3 and saves == []
        assert len(s.workspace.load("task", "coder").messages) == 2
        s.request("anthropic")
        s.add_response(anthropic_reply("a.py b.py"))
        assert saves == [4] and not s.unsaved  # the request's message and its answer, in one save
        assert s.workspace.load("task", "coder").messages == s.messages


def test_an_answer_with_calls_saves_the_held_messages_before_it(tmp_path):
    with open_session(tmp_path) as s:
        s.extend([_user("list the files")], save=False)
        s.request("anthropic")
        s.add_response(anthropic_reply("looking", (("t1", "ls"),)))
        stored = s.workspace.load("task", "coder")
        assert [m.text for m in stored.messages] == ["list the files"] and stored.state == "unanswered"
        assert not s.unsaved and len(s.messages) == 2


def test_whatever_stores_state_beside_the_transcript_saves_the_held_messages_first(tmp_path):
    """A compaction's view names stored messages; a checkpoint marks a stored end: each
    saves what the session holds before it writes."""
    with open_session(tmp_path, context_window=20_000, threshold=2_000, target=1_000) as s:
        s.add_user("read the logs")
        for n in range(12):
            s.request("anthropic")
            s.add_response(anthropic_reply("", ((f"t{n}", "cat"),)))
            s.add_tool_results({f"t{n}": f"log line {n} " * 120})
        s.add_response(anthropic_reply("read them all"))
        s.extend([_user("which failed first?")], save=False)
        s.request("anthropic")  # over the threshold: compacted, the view kept
        assert s.view is not None and s.view.covers == s.messages[-1].id
        assert s.workspace.load("task", "coder").messages == s.messages and not s.unsaved
        s.add_response(anthropic_reply("auth"))
        s.extend([_user("mark it")], save=False)
        s.checkpoint("found")
        assert s.workspace.load("task", "coder").messages[-1].text == "mark it"
        assert s.workspace.load("task", "coder").checkpoints == {"found": s.messages[-1].id}


def test_flush_saves_what_is_held_and_nothing_twice(tmp_path):
    with open_session(tmp_path) as s:
        s.flush()
        assert s.revision == 0  # nothing held, nothing written
        s.extend([_user("list the files")], save=False)
        s.flush()
        assert s.revision == 1 and not s.unsaved
        s.flush()
        assert s.revision == 1
