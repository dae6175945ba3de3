"""A compaction, persisted: the view that stands for the transcript up to a message, so
the request prefix stays byte-identical on the turns that follow and after a restart.

Stored next to the transcript as ``<agent>.view.json``, written atomically; every
compaction is also kept, numbered, in ``<agent>.views/`` (for the navigator's
compaction points). It holds
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
        trigger: what made it (``"proactive"``, ``"recovery"``, ``"/compact"``, ``"/shake"``).
        report: the ladder's one-line outcome.
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
            "messages": history_to_json(self.messages),
        }


def view_path(transcript: Path) -> Path:
    return transcript.with_name(transcript.stem + ".view.json")


def archive_path(path: Path) -> Path:
    """The folder of every compaction made for the transcript whose view is ``path``."""
    return path.with_name(path.name.removesuffix(".view.json") + ".views")


def write_view(path: Path, view: StoredView) -> None:
    """Make ``view`` the one in force, and keep it in the archive too."""
    data = json_bytes(view.to_json())
    archive = archive_path(path)
    target = path
    try:
        archive.mkdir(exist_ok=True)
        number = 1 + max((int(p.stem) for p in archive.glob("[0-9]*.json") if p.stem.isdigit()), default=0)
        atomic_write(archive / f"{number:04d}.json", data)
        atomic_write(target, data)
    except OSError as exc:
        raise StoreError(f"could not write {target}: {exc.strerror or exc}; the previous view is intact") from exc


def read_archive(path: Path) -> list[StoredView]:
    """Every compaction kept for the transcript whose view is ``path``, oldest first."""
    archive = archive_path(path)
    files = sorted((p for p in archive.glob("[0-9]*.json") if p.stem.isdigit()), key=lambda p: int(p.stem))
    return [view for view in map(read_view, files) if view is not None]


def read_view(path: Path) -> StoredView | None:
    """The stored view (None: none). A damaged file raises ``StoreError`` naming it."""
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
        )
    except (ValueError, KeyError, TypeError, IndexError, HistoryError, RecursionError) as exc:
        raise StoreError(f"{path} is damaged ({exc}); delete it to send the full transcript again") from None
