"""A transcript's journal: the saves since its file was last written whole, appended.

A long conversation's transcript is megabytes, and rewriting it at every turn made
saving cost in proportion to the whole history. A save that only extends what the file
and its journal hold appends one line to ``<agent>.json.journal`` instead (one write,
one fsync), and the transcript file is written whole again, the journal dropped, only
when the journal has grown as large as the file (so each byte is written at most about
twice) or the store closes.

The journal's first line names the file it continues (the file's revision and message
count: every save raises the revision, so a journal left behind by a crash after the
file was rewritten names a revision the file no longer has and is ignored). Each
following line is one save: its revision, error and checkpoints, and the messages it
appended. A line a crash cut short (no newline at its end) is the save that did not
happen: ignored when read, and cut off before the next append. A damaged line before
the last is a damaged transcript (``StoreError``, nothing written over).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._errors import HistoryError, StoreError
from .._files import fsync_dir
from .backend import StoredTranscript
from .codec import history_from_json, history_to_json, json_bytes
from .messages import Message
from .prefixes import begins_with

JOURNAL_FORMAT = "glyphpack-journal"


def journal_path(transcript: Path) -> Path:
    """The journal beside ``transcript`` (``<agent>.json.journal``: never a transcript's
    name, which ends in ``.json``)."""
    return transcript.with_name(transcript.name + ".journal")


def read_journal(transcript: Path, base: StoredTranscript) -> tuple[StoredTranscript, int]:
    """``base`` (the transcript file's content) with the journal's saves applied, and the
    journal's length in bytes that counts (0: no journal for this file; a line cut short
    at the end is not counted)."""
    path = journal_path(transcript)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return base, 0
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from None
    complete = raw[: raw.rfind(b"\n") + 1]  # after the last newline: a save a crash cut short
    lines = complete.splitlines()
    if not lines or _header(lines[0]) != (base.revision, len(base.messages)):
        return base, 0  # the journal of an earlier file (a crash before it was removed): ignored
    current = base
    for number, line in enumerate(lines[1:], start=2):
        try:
            entry = json.loads(line)
            appended = history_from_json(entry["messages"])
            revision, error, checkpoints = entry["revision"], entry["error"], entry["checkpoints"]
            if not isinstance(revision, int) or revision <= current.revision or not isinstance(checkpoints, dict):
                raise ValueError("revision or checkpoints out of place")
        except (ValueError, KeyError, TypeError, HistoryError, RecursionError) as exc:
            raise StoreError(f"{path} is damaged at line {number}: {exc}; it was left untouched") from None
        current = StoredTranscript(revision, (*current.messages, *appended), checkpoints, error)
    return current, len(complete)


def _header(line: bytes) -> tuple[int, int] | None:
    try:
        header = json.loads(line)
    except ValueError:
        return None
    if not isinstance(header, dict) or header.get("format") != JOURNAL_FORMAT:
        return None
    base, count = header.get("revision"), header.get("messages")
    return (base, count) if isinstance(base, int) and isinstance(count, int) else None


def extends(before: StoredTranscript, after: StoredTranscript) -> bool:
    """Whether ``after`` is ``before`` with messages appended (the very message objects:
    a save from a session that read or wrote ``before`` in this process)."""
    return begins_with(after.messages, before.messages)


def line(after: StoredTranscript, appended: Sequence[Message]) -> bytes:
    """The journal line of the save ``after``, which appended ``appended``."""
    entry: dict[str, Any] = {
        "revision": after.revision,
        "error": after.error,
        "checkpoints": dict(after.checkpoints),
        "messages": history_to_json(appended),
    }
    return json_bytes(entry) + b"\n"


def append(transcript: Path, base: StoredTranscript, journaled: int, entry: bytes) -> int:
    """Append ``entry`` (``line``) to the journal of the transcript file holding
    ``base``, whose journal holds ``journaled`` bytes that count (0: start one); returns
    the journal's new length. One write and one fsync; a failure leaves what counts as
    it was (``StoreError``)."""
    path = journal_path(transcript)
    if journaled == 0:
        header = {"format": JOURNAL_FORMAT, "revision": base.revision, "messages": len(base.messages)}
        entry = json_bytes(header) + b"\n" + entry
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)
        try:
            os.ftruncate(fd, journaled)  # a line a crash cut short, or an earlier file's journal, goes
            os.lseek(fd, journaled, os.SEEK_SET)
            written = os.write(fd, entry)
            if written != len(entry):
                raise OSError(f"wrote {written} of {len(entry)} bytes")
            os.fsync(fd)
        finally:
            os.close(fd)
        if journaled == 0:
            fsync_dir(path.parent)
    except OSError as exc:
        raise StoreError(f"could not append to {path}: {getattr(exc, 'strerror', None) or exc}; the transcript is as it was") from exc
    return journaled + len(entry)


def remove(transcript: Path) -> None:
    """Drop the journal once the transcript file holds all of it (a crash before this
    leaves a journal its header no longer matches: ignored)."""
    try:
        journal_path(transcript).unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StoreError(f"could not remove {journal_path(transcript)}: {exc.strerror}") from exc
