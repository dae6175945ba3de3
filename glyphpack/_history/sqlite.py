"""The folder workspace's session tree database: one SQLite file in WAL mode, its
schema versioned and migrated forward (``MIGRATIONS``); writes in ``BEGIN IMMEDIATE``
transactions on one connection, reads on connections of their own."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._errors import HistoryError, StoreError
from .codec import json_text, message_from_json, message_to_json
from .database import check_schema_version
from .messages import Message

# Each entry moves the schema from version i to i + 1.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL DEFAULT '',
        tip TEXT,
        created REAL NOT NULL,
        forked_from TEXT,
        forked_at TEXT
    );
    CREATE TABLE messages (
        id TEXT PRIMARY KEY,
        conversation TEXT NOT NULL REFERENCES conversations(id),
        parent TEXT REFERENCES messages(id),
        role TEXT NOT NULL,
        body TEXT NOT NULL,
        created REAL NOT NULL
    );
    CREATE INDEX messages_parent ON messages(parent);
    CREATE INDEX messages_conversation ON messages(conversation);
    """,
    # Version 2: each agent of a conversation has its own tip (two agents keep two
    # histories); the conversation's tip is its main agent's.
    """
    CREATE TABLE agent_tips (
        conversation TEXT NOT NULL REFERENCES conversations(id),
        agent TEXT NOT NULL,
        tip TEXT REFERENCES messages(id),
        main INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (conversation, agent)
    );
    """,
    # Version 3: checkpoints are labels on messages of the tree (NULL: the start), so
    # they outlive a branch away from them and come along in a fork.
    """
    CREATE TABLE labels (
        conversation TEXT NOT NULL REFERENCES conversations(id),
        name TEXT NOT NULL,
        message TEXT REFERENCES messages(id),
        PRIMARY KEY (conversation, name)
    );
    """,
)
# Version 4: where each stored history ends, as the proxy digests it (its last one or
# two messages' rolling digests), so any proxy on the workspace finds the conversation a
# request continues, whichever proxy recorded it. At most two rows per history.
MIGRATIONS += (
    """
    CREATE TABLE history_ends (
        conversation TEXT NOT NULL REFERENCES conversations(id),
        agent TEXT NOT NULL,
        digest BLOB NOT NULL,
        PRIMARY KEY (conversation, agent, digest)
    );
    CREATE INDEX history_ends_digest ON history_ends(digest);
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


class SqliteDatabase:
    """The folder workspace's tree: one SQLite file, WAL mode, ``BEGIN IMMEDIATE`` for
    writes (one writer at a time across processes), ``PRAGMA user_version`` for the schema."""

    order = "rowid"
    same = "IS"
    integrity_errors: tuple[type[Exception], ...] = (sqlite3.IntegrityError,)

    def __init__(self, path: str | Path, *, read_only: bool = False):
        """Open (and, unless ``read_only``, create or migrate) the database at ``path``.

        ``read_only`` writes nothing, not even a schema, and checks the database's
        integrity first: a damaged or empty file raises ``StoreError`` naming it.
        """
        self.db_path = Path(path)
        self.name = str(self.db_path)
        self.read_only = read_only
        # One connection for writes, shared by the threads of this process: sqlite3
        # connections are not safe to use from two threads at once, so every write
        # transaction takes this lock (other processes are kept apart by SQLite). Reads
        # outside one take a connection of their own from ``_readers`` (WAL: readers
        # never wait for the writer), so a proxy's lookups never queue behind saves.
        self._lock = threading.RLock()
        self._readers: list[sqlite3.Connection] = []  # idle; one per read at once, at most
        self._readers_lock = threading.Lock()  # the list's, held for nothing longer
        self._closed = False
        if read_only and not self.db_path.is_file():
            raise StoreError(f"{self.db_path}: no session tree there")
        try:
            self._db = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None, check_same_thread=False)
        except sqlite3.DatabaseError as exc:
            raise self.damaged(exc) from None
        try:
            self._db.execute("PRAGMA busy_timeout=30000")
            if read_only:
                # query_only: unlike mode=ro, the WAL files SQLite opens are removed on close.
                self._db.execute("PRAGMA query_only=1")
                self._check_read_only()
            else:
                self._until_free(lambda: self._db.execute("PRAGMA journal_mode=WAL"))
                self._db.execute("PRAGMA foreign_keys=ON")
                self._db.execute("PRAGMA synchronous=FULL")  # what a write not asked to be durable lowers and restores
                self._migrate()
            tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            # A tree of an older schema opened read-only is not migrated: what it lacks reads as empty.
            self.has_agent_tips = "agent_tips" in tables
            self.has_labels = "labels" in tables
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise self.damaged(exc) from None
        except StoreError:
            self._db.close()
            raise

    #: How long opening waits for other processes opening the same new tree.
    OPEN_WAIT = 30.0

    def _until_free(self, step: Callable[[], object]) -> None:
        """Run ``step``, again while SQLite says the database is locked, for up to
        ``OPEN_WAIT`` seconds: switching to WAL takes a lock that SQLite may refuse at
        once, without its busy timeout, while other processes open or write the tree (32
        agents opening one new workspace met it, about one run in two)."""
        deadline = time.monotonic() + self.OPEN_WAIT
        pause = 0.005
        while True:
            try:
                step()
                return
            except sqlite3.OperationalError as exc:
                if not ("locked" in str(exc) or "busy" in str(exc)) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)

    def close(self) -> None:
        with self._readers_lock:
            self._closed = True
            readers, self._readers = self._readers, []
        for reader in readers:
            reader.close()
        self._db.close()

    def damaged(self, reason: object) -> StoreError:
        if isinstance(reason, sqlite3.OperationalError) and ("locked" in str(reason) or "busy" in str(reason)):
            return StoreError(f"{self.db_path} is busy: another process holds it ({reason}); try again")
        return StoreError(f"{self.db_path} is damaged ({reason}); it was left as it is: restore it from a copy")

    def _check_read_only(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            raise StoreError(f"{self.db_path} is empty: not a session tree (it holds no schema)")
        check_schema_version(self.name, version, SCHEMA_VERSION)
        problems = self.problems()
        if problems:
            raise self.damaged(problems)

    def problems(self) -> str | None:
        """SQLite's quick check: None when the database is sound."""
        with self._lock:
            try:
                rows = [r[0] for r in self._db.execute("PRAGMA quick_check").fetchall()]
            except sqlite3.DatabaseError as exc:
                return str(exc)
        return None if rows == ["ok"] else "; ".join(rows[:3])

    def _migrate(self) -> None:
        with self.write():
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            check_schema_version(self.name, version, SCHEMA_VERSION)
            for step in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[step].split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version={step + 1}")

    def write(self, *conversations: str, durable: bool = True) -> _Transaction:
        if self.read_only:
            raise StoreError(f"{self.db_path} was opened read-only")
        return _Transaction(self._db, self._lock, self.damaged, durable)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        # In a write transaction of this thread's (its own writes not committed yet), on
        # a read-only tree, or closed: the one connection, as writes use it.
        if self.read_only or self._closed or self._lock._is_owned():  # type: ignore[attr-defined]
            with self._lock:
                try:
                    return self._db.execute(sql, tuple(params)).fetchall()
                except sqlite3.DatabaseError as exc:
                    raise self.damaged(exc) from None
        with self._readers_lock:
            reader = self._readers.pop() if self._readers else None
        if reader is None:
            try:
                reader = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None, check_same_thread=False)
                reader.execute("PRAGMA query_only=1")
            except sqlite3.DatabaseError as exc:
                raise self.damaged(exc) from None
        try:
            return reader.execute(sql, tuple(params)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise self.damaged(exc) from None
        finally:
            with self._readers_lock:
                if not self._closed:
                    self._readers.append(reader)
                    reader = None
            if reader is not None:
                reader.close()

    def encode(self, message: Message) -> str:
        return json_text(message_to_json(message))

    def decode(self, body: str) -> Message:
        try:
            return message_from_json(json.loads(body))
        except (json.JSONDecodeError, HistoryError) as exc:
            raise self.damaged(f"a stored message does not decode: {exc}") from None


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error): one writer at a time, across
    processes (SQLite's lock) and threads (the tree's lock)."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, damaged: Callable[[object], StoreError], durable: bool):
        self.db = db
        self.lock = lock
        self.damaged = damaged
        self.durable = durable

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            if not self.durable:
                # In WAL mode a NORMAL commit is not synced (the next FULL one or a
                # checkpoint syncs it): a power failure may undo it, a crash cannot.
                self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self.lock.release()
            if isinstance(exc, sqlite3.DatabaseError):
                raise self.damaged(exc) from None
            raise
        return self.db

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        try:
            self.db.execute("COMMIT" if kind is None else "ROLLBACK")
        except sqlite3.DatabaseError as exc:
            raise self.damaged(exc) from None
        finally:
            try:
                if not self.durable:
                    self.db.execute("PRAGMA synchronous=FULL")
            finally:
                self.lock.release()
        if isinstance(value, sqlite3.DatabaseError):
            raise self.damaged(value) from None
