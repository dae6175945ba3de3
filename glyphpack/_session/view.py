"""A compaction, persisted: the view that stands for the transcript up to a message, so
the request prefix stays byte-identical on the turns that follow and after a restart.

Stored beside the transcripts as ``_views/<agent>.json``, written atomically; every
compaction is also kept, numbered, in ``_archive/<agent>/`` (for the navigator's
compaction points). Agent ids start with a letter or digit, so these folders can
never be an agent's transcript, and no agent name can reach another agent's view
(``coder.view.json`` was both agent ``coder``'s view and agent ``coder.view``'s
transcript once; that layout is still read). It holds
the compacted messages themselves (snapshot pages as PNG, base64): pages are rendered
from the stored text once per compaction and then reused byte for byte, never redrawn
per turn. A view whose ``covers`` message is no longer in the transcript (a rewind or
a branch went back past it) no longer applies and is ignored.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from .._errors import HistoryError, StoreError
from .._files import atomic_write, read_stored
from .._history.codec import history_from_json, history_to_json, json_bytes
from .._history.messages import Message
from .._history.store import is_legacy_view

FORMAT = "glyphpack-view"
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class StoredView:
    """A persisted compaction.

    Attributes:
        covers: id of the last transcript message the view stands for.
        messages: the compacted messages sent in place of the transcript up to ``covers``.
        source: ids of the first and last message a snapshot or summary replaced.
        shape, page_size: the snapshot pages' geometry (pinned for the next compaction).
        pages: snapshot pages in the view.
        tokens: estimated tokens of the view when it was made.
        trigger: what made it (``"proactive"``, ``"recovery"``, ``"/compact"``, ``"/shake"``,
            ``"elision"``: a batch elided below the threshold, with recall on).
        report: the ladder's one-line outcome.
        page_text: the text the snapshot pages draw, exactly (stubs and cut results as
            drawn; "" without pages), for a person checking what the model was shown.
    """

    covers: str
    messages: tuple[Message, ...]
    source: tuple[str, str] | None = None
    shape: str | None = None
    page_size: tuple[int, int] | None = None
    pages: int = 0
    tokens: int = 0
    trigger: str = ""
    report: str = ""
    page_text: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "covers": self.covers,
            "source": list(self.source) if self.source else None,
            "shape": self.shape,
            "page_size": list(self.page_size) if self.page_size else None,
            "pages": self.pages,
            "tokens": self.tokens,
            "trigger": self.trigger,
            "report": self.report,
            "page_text": self.page_text,
            "messages": history_to_json(self.messages),
        }


def view_path(transcript: Path) -> Path:
    """Where the view in force for the transcript at ``transcript`` is kept."""
    return transcript.parent / "_views" / transcript.name


def archive_path(path: Path) -> Path:
    """The folder of every compaction made for the transcript whose view is ``path``."""
    return path.parent.parent / "_archive" / path.stem


def _legacy_paths(path: Path) -> tuple[Path, Path]:
    """The view and archive folder the layout before ``_views`` kept beside the transcript."""
    agent = path.stem
    return path.parent.parent / f"{agent}.view.json", path.parent.parent / f"{agent}.views"


def write_view(path: Path, view: StoredView) -> None:
    """Make ``view`` the one in force, and keep it in the archive too."""
    data = json_bytes(view.to_json())
    archive = archive_path(path)
    target = path
    try:
        archive.mkdir(parents=True, exist_ok=True)
        target.parent.mkdir(exist_ok=True)
        number = 1 + max((int(p.stem) for p in archive.glob("[0-9]*.json") if p.stem.isdigit()), default=0)
        atomic_write(archive / f"{number:04d}.json", data)
        atomic_write(target, data)
    except OSError as exc:
        raise StoreError(f"could not write {target}: {exc.strerror or exc}; the previous view is intact") from exc


def _archive_files(path: Path) -> list[Path]:
    archive = archive_path(path)
    if not archive.is_dir():
        archive = _legacy_paths(path)[1]
    return sorted((p for p in archive.glob("[0-9]*.json") if p.stem.isdigit()), key=lambda p: int(p.stem))


def read_archive(path: Path) -> list[StoredView]:
    """Every compaction kept for the transcript whose view is ``path``, oldest first."""
    return [view for view in map(read_view, _archive_files(path)) if view is not None]


def archived(path: Path) -> int:
    """How many compactions are kept for the transcript whose view is ``path`` (counted,
    not read: each holds its pages)."""
    return len(_archive_files(path))


def read_view(path: Path) -> StoredView | None:
    """The stored view (None: none; the old layout's ``<agent>.view.json`` is read when
    there is no other, unless it is not a view: an agent's transcript of that name). A
    damaged file raises ``StoreError`` naming it."""
    raw = read_stored(path)
    if raw is None and path.parent.name == "_views":
        path = _legacy_paths(path)[0]
        if not is_legacy_view(path):
            return None
        raw = read_stored(path)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != FORMAT_VERSION:
            raise ValueError(f"not a {FORMAT} version {FORMAT_VERSION} file")
        source, size = data.get("source"), data.get("page_size")
        return StoredView(
            covers=str(data["covers"]),
            messages=tuple(history_from_json(data["messages"])),
            source=(str(source[0]), str(source[1])) if source else None,
            shape=data.get("shape"),
            page_size=(int(size[0]), int(size[1])) if size else None,
            pages=int(data.get("pages", 0)),
            tokens=int(data.get("tokens", 0)),
            trigger=str(data.get("trigger", "")),
            report=str(data.get("report", "")),
            page_text=str(data.get("page_text", "")),
        )
    except (ValueError, KeyError, TypeError, IndexError, HistoryError, RecursionError) as exc:
        raise StoreError(f"{path} is damaged ({exc}); delete it to send the full transcript again") from None
