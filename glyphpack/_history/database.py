"""What the session tree needs of a database (``TreeDatabase``), so one tree serves
SQLite (``sqlite``: the folder workspace) and PostgreSQL (``postgres``: a fleet's)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .._errors import StoreError
from .messages import Message


class Executor(Protocol):
    """A statement runner inside a write transaction (``sqlite3.Connection`` is one)."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any: ...


class TreeDatabase(Protocol):
    """What the tree needs of a database, so one tree serves SQLite (the folder
    workspace) and PostgreSQL (a fleet's): statements with ``?`` parameters, and a
    write transaction that keeps other writers of the same conversations out."""

    #: Where the database is, for messages (a file, or a URL without its password).
    name: str
    read_only: bool
    #: The column that orders a table's rows as they were inserted.
    order: str
    #: The comparison that treats NULL as a value (``tip IS ?`` on SQLite).
    same: str
    #: What a duplicate key raises.
    integrity_errors: tuple[type[Exception], ...]
    #: Whether the schema has the tables later versions added (an old tree opened read-only lacks them).
    has_agent_tips: bool
    has_labels: bool

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    def write(self, *conversations: str, durable: bool = True) -> AbstractContextManager[Executor]:
        """A transaction; ``durable=False``: its commit may be lost to a power failure
        (never to a crash of the process), for what the tree can be brought back to from
        the transcripts (``Workspace.reconcile``, the proxy's index of ends)."""
        ...

    def encode(self, message: Message) -> str: ...

    def decode(self, body: str) -> Message: ...

    def damaged(self, reason: object) -> StoreError: ...

    def problems(self) -> str | None: ...

    def close(self) -> None: ...


def check_schema_version(name: str, version: int, supported: int) -> None:
    """Refuse a database whose schema a newer glyphpack wrote (before anything is written)."""
    if version > supported:
        raise StoreError(f"{name} has schema version {version}, newer than this glyphpack's {supported}; upgrade glyphpack")
