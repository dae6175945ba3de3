"""The folder store: a workspace in a folder on disk (the embedded default).

``tree.sqlite3`` holds the session tree; ``transcripts/<conversation>/<agent>.json`` each
transcript, written atomically under a file lock; views (``_views/``, ``_archive/``) and
measured records (``_measured/``) beside them. ``Workspace`` (``store``) works over this
or the PostgreSQL store (``postgres``) through the ``StoreBackend`` protocol.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .._errors import HistoryError, StoreError
from .._files import atomic_write, read_stored, stale_temporaries
from . import journal
from .backend import StoreBackend, StoredTranscript
from .codec import history_from_json, history_to_json, json_bytes
from .ids import check_id
from .messages import validate_history
from .tree import SessionTree

try:
    import fcntl

    _flock: Any = fcntl.flock
except ImportError:  # pragma: no cover - Windows: no advisory locks; revisions still checked
    _flock = None


#: A journal may hold this many bytes whatever the size of its transcript file (a small
#: transcript is cheap to write whole, but not at every turn).
JOURNAL_FLOOR = 64 * 1024

#: What a transcript file says it is, and the version of its layout.
FORMAT = "glyphpack-transcript"
FORMAT_VERSION = 1


#: How the file of a compaction view begins (``glyphpack._history.view`` writes them):
#: before views had a folder of their own, agent X's view was ``X.view.json`` beside
#: ``X.json``, a name an agent can have too; the first bytes tell them apart.
LEGACY_VIEW_START = b'{"format":"glyphpack-view"'


def is_legacy_view(path: Path) -> bool:
    """Whether ``path`` is a compaction view kept in the old layout, not a transcript."""
    if not path.name.endswith(".view.json"):
        return False
    try:
        with path.open("rb") as file:
            return file.read(len(LEGACY_VIEW_START)) == LEGACY_VIEW_START
    except OSError:
        return False


def _write(path: Path, data: bytes, durable: bool = True) -> None:
    """``atomic_write``, with a failure reported as a ``StoreError`` naming the file."""
    try:
        atomic_write(path, data, durable=durable)
    except OSError as exc:
        raise StoreError(f"could not write {path}: {exc.strerror or exc}; the previous file is intact") from exc


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock for writers of ``path`` (a sidecar ``.lock`` file)."""
    lock_path = path.with_name(path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if _flock is not None:
            _flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _parse_json(path: Path, raw: bytes) -> object:
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else f"not valid JSON ({exc})"
        raise StoreError(f"{path} is corrupted or truncated: {reason}; it was left untouched") from None


def read_transcript(path: Path) -> StoredTranscript | None:
    """The stored transcript at ``path`` with the saves its journal holds (``journal``;
    None: nothing stored), checked through: a damaged file raises ``StoreError`` naming
    it and is never written over."""
    base = _read_file(path)
    return None if base is None else journal.read_journal(path, base)[0]


def _read_file(path: Path) -> StoredTranscript | None:
    """The transcript file at ``path`` alone (its journal not applied)."""
    raw = read_stored(path)
    if raw is None:
        return None
    data = _parse_json(path, raw)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StoreError(f"{path} is not a glyphpack transcript (no format {FORMAT!r}); it was left untouched")
    if data.get("version") != FORMAT_VERSION:
        raise StoreError(f"{path} has transcript format version {data.get('version')!r}; this glyphpack reads {FORMAT_VERSION}")
    revision, checkpoints, error = data.get("revision"), data.get("checkpoints"), data.get("error")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 0:
        raise StoreError(f"{path} is damaged: 'revision' must be a non-negative integer, not {revision!r}; it was left untouched")
    if not isinstance(checkpoints, dict) or not all(isinstance(t, (str, type(None))) for t in checkpoints.values()):
        raise StoreError(f"{path} is damaged: 'checkpoints' must map names to message ids; it was left untouched")
    if not isinstance(error, (str, type(None))):
        raise StoreError(f"{path} is damaged: 'error' must be a string or null; it was left untouched")
    try:
        messages = history_from_json(data.get("messages"))
        validate_history(messages, allow_pending=False)
    except HistoryError as exc:
        raise StoreError(f"{path} is damaged: {exc}; it was left untouched") from None
    return StoredTranscript(revision, tuple(messages), checkpoints, error)


@dataclasses.dataclass(frozen=True)
class _Known:
    """A transcript as a folder store last read or wrote it.

    Attributes:
        identity: its file's and its journal's (``FolderStore._identity``; None where absent).
        stored: what it holds, the journal's saves applied.
        file: what its file alone holds (the journal continues it).
        journaled: the journal's bytes that count (0: none).
        appended: this store appended to the journal (``close`` folds it in).
    """

    identity: tuple[Any, Any]
    stored: StoredTranscript
    file: StoredTranscript
    journaled: int
    appended: bool


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create {folder}: {exc.strerror}") from None


def _refuse_read_only(backend: StoreBackend) -> None:
    if backend.read_only:
        raise StoreError(f"{backend.location} was opened read-only")


class FolderStore:
    """The embedded default: ``tree.sqlite3`` (the session tree) and
    ``transcripts/<conversation>/<agent>.json``, each written atomically, with views
    in ``_views/`` and ``_archive/`` and measured records in ``_measured/`` beside them."""

    def __init__(self, path: Path, *, read_only: bool = False):
        self.path = path
        self.location = str(path)
        self.read_only = read_only
        if read_only and not (self.path / "tree.sqlite3").is_file():
            raise StoreError(f"{self.path} is not a glyphpack workspace (no tree.sqlite3 in it)")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot use {self.path} as a workspace: {exc.strerror}") from None
        self._tree: SessionTree | None = None
        # What each transcript held when this workspace last read or wrote it: a save reads
        # the stored transcript to check its revision, and a long session's transcript is
        # megabytes; re-parsed only when its file or journal changed.
        self._known: dict[Path, _Known] = {}

    @property
    def tree(self) -> SessionTree:
        if self._tree is None:
            self._tree = SessionTree(self.path / "tree.sqlite3", read_only=self.read_only)
        return self._tree

    def close(self) -> None:
        """Fold every journal this store appended to into its transcript file (so each
        transcript is one file again), then close the tree."""
        if not self.read_only:
            for path in sorted(path for path, known in self._known.items() if known.appended):
                with contextlib.suppress(StoreError):  # a damaged journal stays as it is, to be reported when read
                    self.fold(path.parent.name, path.name.removesuffix(".json"))
        if self._tree is not None:
            self._tree.close()
            self._tree = None

    def fold(self, conversation: str, agent: str) -> None:
        """Write the transcript file whole with its journal's saves, and drop the journal."""
        path = self.transcript_path(conversation, agent)
        if not journal.journal_path(path).exists():
            return
        with self.exclusive(conversation, agent):
            stored = self.read(conversation, agent)
            if stored is not None:
                self._write(path, stored, conversation, agent)

    def transcript_path(self, conversation: str, agent: str) -> Path:
        return self.path / "transcripts" / check_id(conversation, "conversation") / f"{check_id(agent, 'agent')}.json"

    def delete(self, conversation: str) -> None:
        _refuse_read_only(self)
        folder = self.path / "transcripts" / check_id(conversation, "conversation")
        if folder.is_dir():
            try:
                # Moved aside first, in one rename, so a crash never leaves half a conversation.
                doomed = folder.with_name(f".deleting-{folder.name}-{os.getpid()}")
                folder.rename(doomed)
                shutil.rmtree(doomed)
            except OSError as exc:
                raise StoreError(f"could not delete {folder}: {exc.strerror or exc}") from exc
        self._known = {path: known for path, known in self._known.items() if folder not in path.parents}

    def where(self, conversation: str, agent: str) -> str:
        return str(self.transcript_path(conversation, agent))

    def transcripts(self) -> list[tuple[str, str]]:
        root = self.path / "transcripts"
        if not root.is_dir():
            return []
        return sorted((p.parent.name, p.stem) for p in root.glob("*/*.json") if not is_legacy_view(p))

    # ---------------------------------------------------------------- transcripts

    @staticmethod
    def _identity(path: Path) -> tuple[int, int, int, int] | None:
        try:
            stat = path.stat()
        except OSError:
            return None
        return (stat.st_ino, stat.st_dev, stat.st_size, stat.st_mtime_ns)

    def _identities(self, path: Path) -> tuple[Any, Any]:
        """The identities of a transcript file and of its journal (None where absent)."""
        return self._identity(path), self._identity(journal.journal_path(path))

    def read(self, conversation: str, agent: str) -> StoredTranscript | None:
        path = self.transcript_path(conversation, agent)
        known = self._known.get(path)
        identity = self._identities(path)  # before reading: a writer after it changes it, and it is read again
        if known is not None and known.identity == identity:
            return known.stored  # an atomic rename gives every new file a new inode; an append a new size
        base = _read_file(path)
        if base is None:
            return None  # a journal without its file is no transcript: a new one starts with the file
        stored, journaled = journal.read_journal(path, base)
        self._remember(path, stored, base, journaled, appended=known is not None and known.appended, identity=identity)
        return stored

    def _remember(
        self, path: Path, stored: StoredTranscript, file: StoredTranscript, journaled: int, *, appended: bool, identity: tuple[Any, Any] | None = None
    ) -> None:
        """What the transcript at ``path`` holds (``file`` in its file, ``journaled`` bytes
        of journal), under the identities of its file and journal as they were when it
        was read (default: now, for what this store just wrote under the lock)."""
        identity = identity or self._identities(path)
        if identity[0] is not None:
            self._known[path] = _Known(identity, stored, file, journaled, appended)

    def save(self, conversation: str, agent: str, prepare: Callable[[StoredTranscript | None], StoredTranscript]) -> StoredTranscript:
        _refuse_read_only(self)
        path = self.transcript_path(conversation, agent)
        with self.exclusive(conversation, agent):
            before = self.read(conversation, agent)
            stored = prepare(before)
            self.tree.stored_prefix(conversation, stored.messages)  # what the tree would refuse, refused before writing
            if not self._appended(path, before, stored):
                self._write(path, stored, conversation, agent)
            # The transcript first, then the tree: a crash between the two leaves the tree
            # a turn behind, and ``reconcile`` (run when a session opens) brings it forward.
            # The transcript is what a run resumes from, so it is the one that wins; and
            # the tree's commit need not be synced (a power failure, too, leaves it behind).
            self.tree.record(conversation, agent, stored.messages, durable=False)
        return stored

    def _appended(self, path: Path, before: StoredTranscript | None, stored: StoredTranscript) -> bool:
        """Save ``stored`` by appending to the journal, when it only extends ``before`` and
        the journal stays smaller than the file (or ``JOURNAL_FLOOR``); whether it did."""
        known = self._known.get(path)
        if before is None or known is None or not journal.extends(before, stored):
            return False
        entry = journal.line(stored, stored.messages[len(before.messages) :])
        if known.journaled + len(entry) > max(known.identity[0][2], JOURNAL_FLOOR):  # against the file's size
            return False
        journaled = journal.append(path, known.file, known.journaled, entry)
        self._remember(path, stored, known.file, journaled, appended=True)
        return True

    @contextlib.contextmanager
    def exclusive(self, conversation: str, agent: str) -> Iterator[None]:
        path = self.transcript_path(conversation, agent)
        _make_folder(path.parent)
        with _locked(path):
            yield

    def _write(self, path: Path, stored: StoredTranscript, conversation: str, agent: str) -> None:
        """The transcript file, atomically (a crashed writer's temporaries removed first)."""
        document = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "conversation": conversation,
            "agent": agent,
            "revision": stored.revision,
            "error": stored.error,
            "checkpoints": dict(stored.checkpoints),
            "messages": history_to_json(stored.messages),
        }
        # Under the lock every temporary file of this transcript is a crashed writer's.
        for stale in stale_temporaries(path):
            with contextlib.suppress(OSError):
                stale.unlink()
        _write(path, json_bytes(document))
        journal.remove(path)  # the file holds it all now (a crash before this: the journal's header no longer matches)
        self._remember(path, stored, stored, 0, appended=False)

    # ---------------------------------------------------------------- measured records

    def _measured_path(self, conversation: str, agent: str) -> Path:
        path = self.transcript_path(conversation, agent)
        return path.parent / "_measured" / path.name

    def measured(self, conversation: str, agent: str) -> tuple[str, bytes] | None:
        path = self._measured_path(conversation, agent)
        raw = read_stored(path)
        return None if raw is None else (str(path), raw)

    def put_measured(self, conversation: str, agent: str, record: bytes, *, durable: bool = True) -> None:
        _refuse_read_only(self)
        path = self._measured_path(conversation, agent)
        _make_folder(path.parent)
        _write(path, record, durable)

    def update_measured(self, conversation: str, agent: str, change: Callable[[bytes | None], bytes | None]) -> bytes | None:
        _refuse_read_only(self)
        with self.exclusive(conversation, agent):  # a file lock: other processes wait too
            stored = self.measured(conversation, agent)
            current = None if stored is None else stored[1]
            changed = change(current)
            if changed is None:
                return current
            self.put_measured(conversation, agent, changed)
            return changed

    # ---------------------------------------------------------------- compaction views
    # ``_views/<agent>.json`` is the view in force; every view is also kept, numbered,
    # in ``_archive/<agent>/``. Agent ids start with a letter or digit, so these folders
    # can never be an agent's transcript, and no agent name can reach another agent's
    # view (``coder.view.json`` was both agent ``coder``'s view and agent
    # ``coder.view``'s transcript once; that layout is still read).

    def _view_path(self, conversation: str, agent: str) -> Path:
        transcript = self.transcript_path(conversation, agent)
        return transcript.parent / "_views" / transcript.name

    def _archive_files(self, conversation: str, agent: str) -> list[Path]:
        transcript = self.transcript_path(conversation, agent)
        archive = transcript.parent / "_archive" / agent
        if not archive.is_dir():
            archive = transcript.parent / f"{agent}.views"  # the layout before _views
        return sorted((p for p in archive.glob("[0-9]*.json") if p.stem.isdigit()), key=lambda p: int(p.stem))

    def views(self, conversation: str, agent: str) -> list[tuple[str, bytes]]:
        found = ((str(path), read_stored(path)) for path in self._archive_files(conversation, agent))
        return [(where, data) for where, data in found if data is not None]

    def count_views(self, conversation: str, agent: str) -> int:
        return len(self._archive_files(conversation, agent))

    def view(self, conversation: str, agent: str) -> tuple[str, bytes] | None:
        path = self._view_path(conversation, agent)
        raw = read_stored(path)
        if raw is None:
            path = self.transcript_path(conversation, agent).with_suffix(".view.json")  # the layout before _views
            if not is_legacy_view(path):
                return None
            raw = read_stored(path)
        return None if raw is None else (str(path), raw)

    def put_view(self, conversation: str, agent: str, document: bytes) -> None:
        _refuse_read_only(self)
        target = self._view_path(conversation, agent)
        archive = target.parent.parent / "_archive" / agent
        try:
            archive.mkdir(parents=True, exist_ok=True)
            target.parent.mkdir(exist_ok=True)
            number = 1 + max((int(p.stem) for p in archive.glob("[0-9]*.json") if p.stem.isdigit()), default=0)
            atomic_write(archive / f"{number:04d}.json", document)
            atomic_write(target, document)
        except OSError as exc:
            raise StoreError(f"could not write {target}: {exc.strerror or exc}; the previous view is intact") from exc
