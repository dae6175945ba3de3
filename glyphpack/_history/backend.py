"""What a workspace's store keeps, and the interface every store offers: the folder
(``glyphpack._history.folder.FolderStore``) and PostgreSQL
(``glyphpack._history.postgres.PostgresStore``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol

from .messages import Message
from .tree import SessionTree


@dataclasses.dataclass(frozen=True)
class StoredTranscript:
    """What a transcript file holds, checked."""

    revision: int
    messages: tuple[Message, ...]
    checkpoints: dict[str, str | None]
    error: str | None


class StoreBackend(Protocol):
    """Where a workspace keeps what it holds: a folder (``FolderStore``) or a PostgreSQL
    database (``glyphpack._history.postgres.PostgresStore``). ``Workspace`` holds the
    rules (what a save must extend, which checkpoints stay); a backend holds the bytes,
    and makes a save atomic against other writers of the same transcript."""

    #: The location as given (a PostgreSQL URL without its password), for messages.
    location: str
    read_only: bool

    @property
    def tree(self) -> SessionTree: ...

    def where(self, conversation: str, agent: str) -> str:
        """The transcript's place, for messages (a file, or the database and the ids)."""
        ...

    def read(self, conversation: str, agent: str) -> StoredTranscript | None: ...

    def save(self, conversation: str, agent: str, prepare: Callable[[StoredTranscript | None], StoredTranscript]) -> StoredTranscript:
        """Under the transcript's lock: ``prepare`` the new transcript from the stored one
        (it raises to write nothing), write it, and record its messages in the tree."""
        ...

    def exclusive(self, conversation: str, agent: str) -> AbstractContextManager[object]:
        """The lock a save of the transcript holds, for work that must not interleave with one."""
        ...

    def transcripts(self) -> list[tuple[str, str]]: ...

    def measured(self, conversation: str, agent: str) -> tuple[str, bytes] | None:
        """An import's measured record and where it is kept (None: none)."""
        ...

    def put_measured(self, conversation: str, agent: str, record: bytes, *, durable: bool = True) -> None:
        """Keep ``record`` (replacing the one kept); ``durable=False``: atomically still,
        but not synced (a power failure may undo it), for what can be learned again."""
        ...

    def update_measured(self, conversation: str, agent: str, change: Callable[[bytes | None], bytes | None]) -> bytes | None:
        """Under a lock every process takes: the record ``change`` makes of the stored one
        (None: the stored one stays), written; returns the record now stored. What two
        proxies claim at once is claimed once."""
        ...

    def views(self, conversation: str, agent: str) -> list[tuple[str, bytes]]:
        """Every compaction view kept for the transcript, oldest first (the last is in
        force), each with where it is kept."""
        ...

    def view(self, conversation: str, agent: str) -> tuple[str, bytes] | None:
        """The view in force and where it is kept (None: none)."""
        ...

    def count_views(self, conversation: str, agent: str) -> int: ...

    def put_view(self, conversation: str, agent: str, document: bytes) -> None:
        """Make ``document`` the view in force, kept in the archive too."""
        ...

    def delete(self, conversation: str) -> None:
        """Remove every transcript, view and record of ``conversation`` (not its tree)."""
        ...

    def close(self) -> None: ...
