"""A transcript's journal (``glyphpack._history.journal``): a save that extends the
stored history appends to it instead of writing the transcript file whole; whatever
point a writer dies at, a reader gets every save that finished and nothing else."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap

import pytest

from glyphpack import Message, StoreError, Text, Workspace
from glyphpack._history import journal
from glyphpack._history.folder import JOURNAL_FLOOR, read_transcript


def turn(n: int) -> list[Message]:
    return [Message("user", (Text(f"ask {n}"),), id=f"u{n}"), Message("assistant", (Text(f"answer {n} " + "x" * 300),), id=f"a{n}")]


def grow(ws: Workspace, turns: int, start: int = 0) -> list[Message]:
    """Save ``turns`` turns one at a time, as a session does (each save the objects before plus a turn)."""
    messages = list(ws.load("c", "a").messages) if start else []
    for n in range(start, start + turns):
        messages = [*messages, *turn(n)]
        ws.save("c", "a", messages, revision=n)
    return messages


def test_saves_that_extend_append_and_a_reader_gets_them_all(tmp_path):
    with Workspace(tmp_path) as ws:
        messages = grow(ws, 1)
        path = ws.transcript_path("c", "a")
        file_bytes = path.read_bytes()
        messages = grow(ws, 5, start=1)
        assert path.read_bytes() == file_bytes  # the file untouched: five lines appended
        lines = journal.journal_path(path).read_bytes().splitlines()
        assert len(lines) == 6 and json.loads(lines[0]) == {"format": "glyphpack-journal", "revision": 1, "messages": 2}
        with Workspace(tmp_path) as other:  # another process's reader
            again = other.load("c", "a")
            assert again.messages == tuple(messages) and again.revision == 6
        assert read_transcript(path).messages == tuple(messages)  # a transcript file read on its own (import)
    # Closing the workspace folds the journal in: one file again, the same transcript.
    assert not journal.journal_path(path).exists()
    assert json.loads(path.read_bytes())["revision"] == 6
    with Workspace(tmp_path) as ws:
        assert ws.load("c", "a").messages == tuple(messages)


def test_the_file_is_written_whole_once_the_journal_is_as_large(tmp_path):
    with Workspace(tmp_path) as ws:
        grow(ws, 1)
        path = ws.transcript_path("c", "a")
        written = []
        for n in range(1, 280):
            grow(ws, 1, start=n)
            size = path.stat().st_size
            journaled = journal.journal_path(path).stat().st_size if journal.journal_path(path).exists() else 0
            assert journaled <= max(size, JOURNAL_FLOOR)
            if journaled == 0:
                written.append(n)
        # Whole writes come further and further apart (each at least doubles the file).
        assert 2 <= len(written) <= 6, written
        assert all(b >= 1.9 * a for a, b in zip(written, written[1:]))
        assert ws.load("c", "a").revision == 280


def test_a_save_that_does_not_extend_writes_the_file_whole_and_drops_the_journal(tmp_path):
    with Workspace(tmp_path) as ws:
        messages = grow(ws, 3)
        path = ws.transcript_path("c", "a")
        assert journal.journal_path(path).exists()
        ws.save("c", "a", messages[:2], revision=3, replace=True)  # back to the first turn
        assert not journal.journal_path(path).exists()
        assert ws.load("c", "a").messages == tuple(messages[:2])
        # Equal messages that are not the stored objects (read by another process): whole too.
        ws.save("c", "a", [*copy.deepcopy(messages[:2]), *turn(9)], revision=4)
        assert not journal.journal_path(path).exists()


def test_a_line_a_crash_cut_short_is_not_a_save_and_the_next_save_goes_after_the_last_whole_one(tmp_path):
    with Workspace(tmp_path) as ws:
        messages = grow(ws, 3)
        path = ws.transcript_path("c", "a")
        with journal.journal_path(path).open("ab") as file:
            file.write(b'{"revision": 4, "error": null, "checkp')  # a writer died here
        with Workspace(tmp_path) as other:
            assert other.load("c", "a").messages == tuple(messages)  # the three saves that finished
            more = [*other.load("c", "a").messages, *turn(3)]
            other.save("c", "a", more, revision=3)
        with Workspace(tmp_path) as third:
            assert third.load("c", "a").messages == tuple(more) and third.load("c", "a").revision == 4


def test_a_journal_left_by_an_earlier_file_is_ignored(tmp_path):
    """A crash after the file was written whole and before its journal was removed."""
    with Workspace(tmp_path) as ws:
        grow(ws, 3)
        path = ws.transcript_path("c", "a")
        left = journal.journal_path(path).read_bytes()
        ws.backend.fold("c", "a")
        journal.journal_path(path).write_bytes(left)  # as if its removal never happened
        with Workspace(tmp_path) as other:
            stored = other.load("c", "a")
            assert stored.revision == 3 and len(stored.messages) == 6


def test_a_damaged_line_before_the_last_is_a_damaged_transcript_and_nothing_is_written_over(tmp_path):
    ws = Workspace(tmp_path)
    messages = grow(ws, 3)
    path = ws.transcript_path("c", "a")
    lines = journal.journal_path(path).read_bytes().splitlines(keepends=True)
    journal.journal_path(path).write_bytes(lines[0] + b"{not json\n" + b"".join(lines[2:]))
    damaged, kept = journal.journal_path(path).read_bytes(), path.read_bytes()
    with Workspace(tmp_path) as other:
        with pytest.raises(StoreError, match=r"a\.json\.journal is damaged at line 2"):
            other.load("c", "a")
        with pytest.raises(StoreError, match="is damaged at line 2"):
            other.save("c", "a", [*messages, *turn(7)], revision=3)
    ws.close()  # folding it is not attempted over damage: the damage stays to be seen
    assert journal.journal_path(path).read_bytes() == damaged and path.read_bytes() == kept


def test_an_append_that_fails_leaves_the_transcript_as_it_was(tmp_path, monkeypatch):
    import errno

    with Workspace(tmp_path) as ws:
        messages = grow(ws, 2)
        real_write = os.write

        def half_then_full(fd, data):
            real_write(fd, data[: len(data) // 2])  # half a line reaches the disk, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(journal.os, "write", half_then_full)
        with pytest.raises(StoreError, match=r"could not append to .*a\.json\.journal: No space left on device; the transcript is as it was"):
            ws.save("c", "a", [*messages, *turn(2)], revision=2)
        monkeypatch.undo()
        with Workspace(tmp_path) as other:
            assert other.load("c", "a").messages == tuple(messages)
        ws.save("c", "a", [*messages, *turn(5)], revision=2)  # the same process saves on after the half line
        with Workspace(tmp_path) as other:
            assert other.load("c", "a").messages == (*messages, *turn(5))


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from glyphpack import Message, Text, Workspace

    ws = Workspace(sys.argv[1])
    stored = ws.load("c", "a")
    messages = list(stored.messages)
    for n in range(stored.revision, 100000):
        messages = [*messages, Message("user", (Text(f"ask {n}"),), id=f"u{n}"),
                    Message("assistant", (Text(f"answer {n} " + "x" * 3000),), id=f"a{n}")]
        ws.save("c", "a", messages, revision=n)
        print(n + 1, flush=True)
    """
)


@pytest.mark.parametrize("delay", [0.2, pytest.param(0.05, marks=pytest.mark.slow), pytest.param(0.45, marks=pytest.mark.slow)])
def test_a_writer_killed_at_any_moment_loses_no_save_it_finished(tmp_path, delay):
    """SIGKILL a process that saves a growing transcript (journal appends and whole
    writes both happen): every save it reported finished is read back, whole, and the
    next process saves on from there."""
    import signal
    import time

    writer = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    time.sleep(delay + 0.5)  # the interpreter's start, then some saves
    writer.send_signal(signal.SIGKILL)
    reported = [int(line) for line in writer.communicate()[0].split()]
    with Workspace(tmp_path) as ws:
        stored = ws.load("c", "a")
        assert stored.revision >= (reported[-1] if reported else 0)  # finished saves are there (one more may have landed)
        assert len(stored.messages) == 2 * stored.revision
        assert [m.id for m in stored.messages[::2]] == [f"u{n}" for n in range(stored.revision)]
        more = [*stored.messages, *turn(10**6)]
        ws.save("c", "a", more, revision=stored.revision)
    with Workspace(tmp_path) as ws:
        assert ws.load("c", "a").messages == tuple(more)


def test_a_process_that_read_a_transcript_without_a_journal_starts_one_that_others_read(tmp_path):
    """The saves of a process that read the transcript (no journal yet, or one an earlier
    file left) begin a journal of their own, header first, that another process reads."""
    with Workspace(tmp_path) as ws:
        grow(ws, 2)
        path = ws.transcript_path("c", "a")
        stale = journal.journal_path(path).read_bytes()
    for left_behind in (None, stale):  # no journal; the journal of an earlier file
        if left_behind is not None:
            journal.journal_path(path).write_bytes(left_behind)
        reader = Workspace(tmp_path)
        stored = reader.load("c", "a")
        more = [*stored.messages, *turn(stored.revision)]
        reader.save("c", "a", more, revision=stored.revision)
        assert path.read_bytes().startswith(b"{") and journal.journal_path(path).read_bytes().startswith(b'{"format":"glyphpack-journal"')
        with Workspace(tmp_path) as other:
            assert other.load("c", "a").messages == tuple(more)
        reader.close()


def test_a_saves_error_and_checkpoints_come_back_from_the_journal(tmp_path):
    ws = Workspace(tmp_path)
    messages = grow(ws, 2)
    ws.save("c", "a", [*messages, *turn(2)], revision=2, error="the provider refused it", checkpoints={"before": messages[-1].id})
    path = ws.transcript_path("c", "a")
    assert journal.journal_path(path).exists()
    with Workspace(tmp_path) as other:
        stored = other.load("c", "a")
        assert (stored.error, stored.checkpoints, stored.revision) == ("the provider refused it", {"before": messages[-1].id}, 3)
    ws.close()


def test_a_journal_is_made_with_the_mode_of_its_transcript_file(tmp_path):
    with Workspace(tmp_path) as ws:
        grow(ws, 2)
        path = ws.transcript_path("c", "a")
        assert journal.journal_path(path).stat().st_mode & 0o777 == path.stat().st_mode & 0o777


@pytest.mark.parametrize(
    ("first_line", "second_line", "read"),
    [
        (b"[1, 2]", None, "ignored"),  # a first line that is no header
        (b'{"format": "glyphpack-journal", "revision": "1", "messages": 2}', None, "ignored"),
        (None, b'{"revision": 1, "error": null, "checkpoints": {}, "messages": []}', "revision or checkpoints out of place"),
        (None, b'{"revision": 9, "error": null, "checkpoints": [], "messages": []}', "revision or checkpoints out of place"),
        (None, b'{"revision": 9, "error": null, "checkpoints": {}}', "'messages'"),
    ],
)
def test_a_journal_whose_lines_do_not_follow_is_ignored_or_refused(tmp_path, first_line, second_line, read):
    ws = Workspace(tmp_path)
    messages = grow(ws, 2)
    path = ws.transcript_path("c", "a")
    lines = journal.journal_path(path).read_bytes().splitlines(keepends=True)
    header = lines[0] if first_line is None else first_line + b"\n"
    journal.journal_path(path).write_bytes(header + (lines[1] if second_line is None else second_line + b"\n"))
    with Workspace(tmp_path) as other:
        if read == "ignored":
            assert other.load("c", "a").messages == tuple(messages[:2])  # the file alone: its journal ignored
        else:
            with pytest.raises(StoreError, match=f"is damaged at line 2: .*{read}"):
                other.load("c", "a")
    ws.close()
