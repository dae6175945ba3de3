"""Format detection from content, and ``import_file``: one ``Format`` per format.

Adding a format is one module with ``FORMAT``, ``detect`` and ``read`` and one line in
``_FORMATS``: ``container`` says what ``detect`` and ``read`` are given (JSONL: the
first records and the file's bytes; JSON: the parsed document; text: the file's text).
Formats are tried in the order of ``_FORMATS``; the plain provider lists come last.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from .._errors import HistoryError
from .._history.imported import ImportedSession
from .._history.messages import first_task
from .._types import public
from . import (
    aider,
    claude_code,
    cline,
    codex,
    copilot_cli,
    crush,
    gemini_cli,
    goose,
    kimi_cli,
    mini_swe_agent,
    opencode,
    openhands,
    pi,
    plain,
    swe_agent,
)
from .base import jsonl_records, read_only_sqlite


@dataclasses.dataclass(frozen=True)
class Format:
    """One session format: its name, what kind of file holds it, how it is recognized
    from content and how it is read."""

    name: str
    container: Literal["jsonl", "json", "text"]
    detect: Callable[[Any], bool]
    read: Callable[[Path, Any], ImportedSession]


_FORMATS = (
    Format(claude_code.FORMAT, "jsonl", claude_code.detect, claude_code.read),
    Format(pi.FORMAT, "jsonl", pi.detect, pi.read),
    Format(codex.FORMAT, "jsonl", codex.detect, codex.read),
    Format(openhands.FORMAT, "jsonl", openhands.detect, openhands.read),
    Format(copilot_cli.FORMAT, "jsonl", copilot_cli.detect, copilot_cli.read),
    Format(kimi_cli.FORMAT, "jsonl", kimi_cli.detect, kimi_cli.read),
    Format(goose.FORMAT, "jsonl", goose.detect, goose.read),
    Format(gemini_cli.FORMAT, "json", gemini_cli.detect, gemini_cli.read),
    Format(opencode.FORMAT, "json", opencode.detect, opencode.read),
    Format(cline.FORMAT, "json", cline.detect, cline.read),
    Format(swe_agent.FORMAT, "json", swe_agent.detect, swe_agent.read),
    Format(mini_swe_agent.FORMAT, "json", mini_swe_agent.detect, mini_swe_agent.read),
    Format(openhands.EVENTS_FORMAT, "json", openhands.detect_events, openhands.read_events),
    Format(aider.FORMAT, "text", aider.detect, aider.read),
)
_BY_NAME = {f.name: f for f in _FORMATS}
#: Session files a harness names the same in each session's own folder, whose name is
#: the session's id; the other files in that folder are the session's companions.
_NAMED_BY_FOLDER = (cline.HISTORY_FILE, copilot_cli.EVENTS_FILE)
#: Every format ``import_file`` reads (the databases too).
FORMATS = tuple(dict.fromkeys((*_BY_NAME, goose.FORMAT, crush.FORMAT, *plain.KINDS)))
#: Records read to tell JSONL formats apart.
_SNIFF_RECORDS = 50


@public
def import_file(path: str | Path, *, format: str | None = None) -> ImportedSession:
    """A session file as neutral histories, its format detected from its content
    (``format`` forces one of ``FORMATS``). Every history returned is valid for every
    provider; the report counts what was skipped or repaired to make it so. The title is
    the harness's own (a summary or title line), else the first task. Raises
    ``HistoryError`` naming the file when it is no format glyphpack reads."""
    path = Path(path)
    sessions = _sessions(path, format)
    if len(sessions) != 1:  # only a database (Goose's, Crush's) holds other than one
        raise HistoryError(f"{path} holds {len(sessions)} sessions, not one: import_sessions reads each "
                           "(glyphpack import makes each a conversation of its own)")
    return _titled(sessions[0][1])


@public
def import_sessions(path: str | Path, *, format: str | None = None) -> list[tuple[str, ImportedSession]]:
    """Every session a file holds, each with the name of its conversation: a Goose
    ``sessions.db`` holds many (named by their session ids); any other file holds one,
    named by ``conversation_name``. Errors as ``import_file``."""
    return [(name, _titled(session)) for name, session in _sessions(Path(path), format)]


def _sessions(path: Path, format: str | None) -> list[tuple[str, ImportedSession]]:
    if path.is_dir():  # a session's own folder (a Roo Code or Cline task, a Kimi CLI session with its subagents)
        return [(path.name, _import(session_file_in(path), format))]
    database = _sqlite_kind(path)
    if database is not None and format in (None, database):
        return crush.read_database(path) if database == crush.FORMAT else goose.read_database(path)
    if database is not None and format in (crush.FORMAT, goose.FORMAT):
        raise _misfit(path, format, f"it is a {database} database")
    if format == crush.FORMAT:
        raise HistoryError(f"{path} is not in the crush format: it is no SQLite database")
    return [(conversation_name(path), _import(path, format))]


def session_file_in(folder: Path) -> Path:
    """The one session file of a session's folder: the file its harness names the same in
    every session's folder, else the one file of a session suffix that is no other
    session's companion (a subagent's context); ``HistoryError`` naming the folder when
    it holds none or several."""
    named = [Path(folder, name) for name in _NAMED_BY_FOLDER if Path(folder, name).is_file()]
    if not named:
        files = {p for p in folder.iterdir() if p.is_file()}
        named = sorted(p for p in files if p.suffix in (".jsonl", ".json") and not read_with_its_session(p, files))
    if len(named) != 1:
        listed = ", ".join(p.name for p in named[:5]) if named else "no session file"
        raise HistoryError(f"{folder} is a folder holding {listed}: name the session file to import")
    return named[0]


def _sqlite_kind(path: Path) -> str | None:
    """Which harness's SQLite database ``path`` is (``crush`` when its messages carry
    ``parts``, else ``goose``, whose reader names what it misses), or None for a file
    that is no SQLite database."""
    try:
        with path.open("rb") as file:
            if not goose.is_database(file.read(16)):
                return None
    except OSError:
        return None
    try:
        with read_only_sqlite(path) as connection:
            return crush.FORMAT if crush.is_database(connection) else goose.FORMAT
    except HistoryError:
        return goose.FORMAT


def _titled(session: ImportedSession) -> ImportedSession:
    """The session titled by its first task when its harness gave it no title."""
    return session if session.title else dataclasses.replace(session, title=first_task(session.messages))


def _import(path: Path, format: str | None) -> ImportedSession:
    if format is not None and format not in FORMATS:
        raise HistoryError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise HistoryError(f"cannot read {path}: {exc.strerror}") from None
    chosen = _BY_NAME.get(format) if format is not None else None
    if chosen is not None and chosen.container == "jsonl":
        if not chosen.detect(_sniffed(data)):
            raise _misfit(path, chosen.name, "its first records are not that harness's")
        return chosen.read(path, data)
    if chosen is not None and chosen.container == "text":
        text = _text(path, data)
        if not chosen.detect(text):
            raise _misfit(path, chosen.name, "its text is not laid out as that harness writes it")
        return chosen.read(path, text)
    document = _whole_json(data)
    if format is None and document is not _NOT_JSON:
        jsonl = [f for f in _FORMATS if f.container == "jsonl"]
        if isinstance(document, dict) and any(f.detect([document]) for f in jsonl):  # a one-record JSONL file
            return _read_jsonl(path, data)
        chosen = next((f for f in _FORMATS if f.container == "json" and f.detect(document)), None)
    if chosen is not None:
        if document is _NOT_JSON:
            raise HistoryError(f"{path} is not JSON, so it cannot be {format}")
        if not chosen.detect(document):
            raise _misfit(path, chosen.name, "its JSON does not have that format's shape")
        return chosen.read(path, document)
    if document is _NOT_JSON:
        if format is not None:
            raise HistoryError(f"{path} is not JSON, so it cannot be {format}")
        return _read_jsonl(path, data)
    seen = plain.kind_of(document)
    if format is not None and seen is not None and seen != format and format != "glyphpack":
        raise _misfit(path, format, f"its messages have the {seen} shape")
    kind = format or seen
    if kind is None:
        raise _unrecognized(path)
    return plain.read(path, document, kind)


def conversation_name(path: Path) -> str:
    """What a session file's conversation is called: the folder's name for a file named
    the same in every session's folder (``<task id>/api_conversation_history.json``),
    else the file's name without its suffixes."""
    by_folder = path.name in _NAMED_BY_FOLDER or path.name == kimi_cli.CONTEXT_FILE
    return path.parent.name if by_folder and path.parent.name else path.name.split(".")[0]


def conversation_names(path: Path, name: str) -> list[str]:
    """The conversation names a session ``name`` read from ``path`` (``import_sessions``)
    can be kept under, first choice first: its own name, then prefixed with one, two,
    three of the folders it is in (``projB-session``), so a file named like another in
    another folder gets a name of its own (``Workspace.name_for`` picks)."""
    start = path.parent.parent if path.parent.name == name != path.name.split(".")[0] else path.parent
    folders = [folder.name for folder in (start, *start.parents) if folder.name][:3]
    return [name, *("-".join([*reversed(folders[:depth]), name]) for depth in range(1, len(folders) + 1))]


def session_source(path: Path, name: str) -> str:
    """Where session ``name`` read from ``path`` comes from, as a workspace keeps it: the
    file's absolute path, with ``#name`` for one of a database's many sessions."""
    resolved = str(path.resolve())
    return resolved if name == conversation_name(path) else f"{resolved}#{name}"


def read_with_its_session(path: Path, files: set[Path]) -> bool:
    """Whether ``path``, one of ``files`` found in a folder, is read with a session
    rather than as one: a Claude Code subagent's file (``SESSION/subagents/agent-ID.jsonl``
    beside ``SESSION.jsonl``), a Kimi CLI subagent's context (``SESSION_read_1.jsonl``
    beside ``SESSION.jsonl``), or a file inside a session's own folder other than the
    session file (Cline's ``ui_messages.json``, Copilot CLI's checkpoints)."""
    folder = path.parent
    if folder.name == "subagents" and Path(folder.parent.parent, folder.parent.name + ".jsonl").is_file():
        return True
    if kimi_cli.is_subagent_file(path):  # SESSION_read_1.jsonl beside SESSION.jsonl
        return True
    return path.name not in _NAMED_BY_FOLDER and any(
        Path(parent, name) in files for parent in path.parents for name in _NAMED_BY_FOLDER
    )


def _sniffed(data: bytes) -> list[dict[str, Any]]:
    """The first records of a JSONL file, as many as detection reads."""
    records = []
    for _, record in jsonl_records(data[: 1 << 24]):
        records.append(record)
        if len(records) >= _SNIFF_RECORDS:
            break
    return records


def _misfit(path: Path, format: str, why: str) -> HistoryError:
    """The error for a forced ``format`` the file is not, naming the format the file's
    content is recognized as, if any (nothing is imported)."""
    try:
        found = import_file(path).report.format
    except HistoryError:
        found = None
    if found == format:  # recognized as it after all (a one-record file, say): no clue to give
        found = None
    hint = f"; it reads as {found}: pass --format {found}, or leave --format out" if found else ""
    return HistoryError(f"{path} is not in the {format} format: {why}{hint}")


def _unrecognized(path: Path) -> HistoryError:
    return HistoryError(f"{path}: no session format recognized (read: {', '.join(FORMATS)}); pass --format to say which it is")


class _NotJson:
    pass


_NOT_JSON: Any = _NotJson()


def _whole_json(data: bytes) -> Any:
    try:
        return json.loads(data.removeprefix(codecs.BOM_UTF8))
    except (ValueError, RecursionError):
        return _NOT_JSON


def _text(path: Path, data: bytes) -> str:
    try:
        return data.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HistoryError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _read_jsonl(path: Path, data: bytes) -> ImportedSession:
    """A JSONL file whose format its first records tell; a text format when no line is
    a JSON object."""
    records = _sniffed(data)
    chosen = next((f for f in _FORMATS if f.container == "jsonl" and f.detect(records)), None)
    if chosen is not None:
        return chosen.read(path, data)
    if not records:
        text = data.removeprefix(codecs.BOM_UTF8).decode("utf-8", errors="replace")
        chosen = next((f for f in _FORMATS if f.container == "text" and f.detect(text)), None)
        if chosen is not None:
            return chosen.read(path, _text(path, data))
    raise _unrecognized(path)
