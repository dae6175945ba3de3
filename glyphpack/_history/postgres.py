"""The workspace on PostgreSQL, for fleets: many hosts, one database.

``Workspace("postgresql://user:password@host/db")`` keeps what the folder workspace
keeps, with the same guarantees, in one database through psycopg 3 and a connection
pool:

- the session tree: the tables of the SQLite tree (``SessionTree`` runs the same
  statements on both), with a ``seq`` column for insertion order;
- transcripts: a row per (conversation, agent) with its revision and checkpoints, and
  a row per message position naming the message's JSON by digest; each JSON is stored
  once in ``bodies``, so saving a turn writes that turn's rows and nothing before it;
- images, stored once by digest in ``images`` (a message's JSON names the digest);
- compaction views, numbered per agent (the one in force is the newest), and the
  measured record of an import.

A save is one transaction: the transcript's row and the tree's messages and tip
commit together, so a crash leaves the old or the new state of both. Writers of one
conversation take a transaction-scoped advisory lock on it (released by the server if
the writer dies), so the revision check and the write cannot interleave across hosts;
writers of different conversations run in parallel.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from .._errors import HistoryError, StoreError
from .._secrets import redacted, scrubbed
from .backend import StoredTranscript
from .codec import json_text, message_from_json, message_to_json
from .database import check_schema_version
from .ids import check_id
from .messages import Message, validate_history
from .tree import SessionTree

# Each entry moves the schema from version i to i + 1 (``glyphpack_schema.version``).
# The tree's four tables are SQLite's (``sqlite.MIGRATIONS``, reached there in three
# versions) with PostgreSQL's types and a ``seq`` column for insertion order;
# tests/test_postgres.py checks both schemas have the same columns.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL DEFAULT '',
        tip TEXT,
        created DOUBLE PRECISION NOT NULL,
        forked_from TEXT,
        forked_at TEXT
    );
    CREATE TABLE messages (
        seq BIGSERIAL UNIQUE,
        id TEXT PRIMARY KEY,
        conversation TEXT NOT NULL REFERENCES conversations(id),
        parent TEXT REFERENCES messages(id),
        role TEXT NOT NULL,
        body TEXT NOT NULL,
        created DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX messages_parent ON messages(parent);
    CREATE INDEX messages_conversation ON messages(conversation);
    CREATE TABLE agent_tips (
        conversation TEXT NOT NULL REFERENCES conversations(id),
        agent TEXT NOT NULL,
        tip TEXT REFERENCES messages(id),
        main INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (conversation, agent)
    );
    CREATE TABLE labels (
        conversation TEXT NOT NULL REFERENCES conversations(id),
        name TEXT NOT NULL,
        message TEXT REFERENCES messages(id),
        PRIMARY KEY (conversation, name)
    );
    CREATE TABLE images (
        digest TEXT PRIMARY KEY,
        data BYTEA NOT NULL
    );
    CREATE TABLE bodies (
        digest TEXT PRIMARY KEY,
        body TEXT NOT NULL
    );
    CREATE TABLE transcripts (
        conversation TEXT NOT NULL,
        agent TEXT NOT NULL,
        revision BIGINT NOT NULL,
        error TEXT,
        checkpoints TEXT NOT NULL,
        length INTEGER NOT NULL,
        PRIMARY KEY (conversation, agent)
    );
    CREATE TABLE transcript_messages (
        conversation TEXT NOT NULL,
        agent TEXT NOT NULL,
        position INTEGER NOT NULL,
        digest TEXT NOT NULL,
        PRIMARY KEY (conversation, agent, position)
    );
    CREATE TABLE views (
        conversation TEXT NOT NULL,
        agent TEXT NOT NULL,
        number INTEGER NOT NULL,
        document BYTEA NOT NULL,
        PRIMARY KEY (conversation, agent, number)
    );
    CREATE TABLE measured (
        conversation TEXT NOT NULL,
        agent TEXT NOT NULL,
        record BYTEA NOT NULL,
        PRIMARY KEY (conversation, agent)
    )
    """,
)
# Version 2: where each stored history ends (``sqlite.MIGRATIONS``' version 4).
MIGRATIONS += (
    """
    CREATE TABLE history_ends (
        conversation TEXT NOT NULL REFERENCES conversations(id),
        agent TEXT NOT NULL,
        digest BYTEA NOT NULL,
        PRIMARY KEY (conversation, agent, digest)
    );
    CREATE INDEX history_ends_digest ON history_ends(digest)
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
#: The advisory lock key migrations take, so two hosts opening a new database at once
#: do not both create the schema.
_MIGRATION_LOCK = ":glyphpack-schema"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _Statements:
    """A connection inside a transaction, taking the tree's ``?`` parameters."""

    def __init__(self, connection: Any):
        self.connection = connection
        #: The conversations whose advisory lock this transaction holds.
        self.locked: set[str] = set()
        #: message id -> (the message, its stored JSON): a save stores a new message's
        #: JSON in ``bodies`` and the tree stores it again, encoded once.
        self.encoded: dict[str, tuple[Message, str]] = {}

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        return self.connection.execute(sql.replace("?", "%s"), tuple(parameters))

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> None:
        rows = [tuple(row) for row in parameters]
        if rows:  # in one round trip (psycopg pipelines executemany)
            self.connection.cursor().executemany(sql.replace("?", "%s"), rows)


class PostgresDatabase:
    """A PostgreSQL database through a psycopg connection pool: the ``TreeDatabase``
    of a fleet's tree, and the statements the workspace's transcripts need."""

    order = "seq"
    same = "IS NOT DISTINCT FROM"
    has_agent_tips = True
    has_labels = True

    def __init__(self, url: str, *, read_only: bool = False, pool_size: int = 4):
        try:
            import psycopg
            import psycopg_pool
        except ImportError:
            raise StoreError(
                "a PostgreSQL workspace needs psycopg 3 and its pool: pip install '.[postgres]' in a checkout"
            ) from None
        self._psycopg = psycopg
        self.name = redacted(url)
        self._url = url  # for the pool only: never in a message (``_said``)
        self.read_only = read_only
        self.integrity_errors: tuple[type[Exception], ...] = (psycopg.IntegrityError,)
        self._local = threading.local()
        # One connection first, to say clearly why the server cannot be used (a pool
        # only retries in the background) and to bring the schema up to date.
        try:
            first = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to the PostgreSQL workspace {self.name}: {self._said(exc)} "
                f"(check that the server runs and the URL's host, port, user, password and database)"
            ) from None
        try:
            self._prepare(first)
        except psycopg.Error as exc:
            raise self.damaged(exc) from None
        finally:
            first.close()
        # Each connection is checked as it leaves the pool (one round trip): after a
        # server restart or a failover, pooled connections are dead, and without the
        # check the next load or save would fail once on each of them.
        self._pool = psycopg_pool.ConnectionPool(
            url, min_size=1, max_size=pool_size, kwargs={"autocommit": True}, open=False, name="glyphpack",
            check=psycopg_pool.ConnectionPool.check_connection,
        )
        try:
            self._pool.open(wait=True, timeout=30)
        except psycopg_pool.PoolTimeout as exc:
            self._pool.close()
            raise StoreError(f"cannot open connections to {self.name}: {self._said(exc)}") from None

    def _prepare(self, connection: Any) -> None:
        """Check the server takes writes and the schema is one this glyphpack reads;
        create or migrate it (not when read-only). Nothing is written when it refuses."""
        version = self._schema_version(connection)
        if self.read_only:
            if not version:  # no table, or one a crash left empty: nothing to read
                raise StoreError(f"{self.name} is not a glyphpack workspace (no glyphpack schema in it)")
            check_schema_version(self.name, version, SCHEMA_VERSION)
            return
        standby, read_only = connection.execute("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')").fetchone()
        if read_only == "on":  # a standby's sessions are read-only too; it is named apart
            what = "a standby (read-only replica)" if standby else "read-only (default_transaction_read_only)"
            raise StoreError(
                f"{self.name} is {what}: nothing was written; point the workspace at the primary, or open it read_only"
            )
        if version == SCHEMA_VERSION:
            return
        # A newer schema is refused under the lock, before anything is written (the
        # transaction creates nothing it does not commit).
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || %s, 0))", (_MIGRATION_LOCK,))
            connection.execute("CREATE TABLE IF NOT EXISTS glyphpack_schema (version INTEGER NOT NULL)")
            row = connection.execute("SELECT version FROM glyphpack_schema").fetchone()
            current = row[0] if row else 0
            check_schema_version(self.name, current, SCHEMA_VERSION)
            if row is None:
                connection.execute("INSERT INTO glyphpack_schema (version) VALUES (0)")
            for step in range(current, SCHEMA_VERSION):
                connection.execute(MIGRATIONS[step])  # several statements: no parameters, one round trip
                connection.execute("UPDATE glyphpack_schema SET version = %s", (step + 1,))

    @staticmethod
    def _schema_version(connection: Any) -> int | None:
        if connection.execute("SELECT to_regclass('glyphpack_schema')").fetchone()[0] is None:
            return None
        row = connection.execute("SELECT version FROM glyphpack_schema").fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self._pool.close()

    def _said(self, exc: BaseException) -> str:
        """What an error says, in one line, without any credential of the URL (a driver
        may quote the URL back, as in "invalid percent-encoded token")."""
        return scrubbed(_first_line(exc), self._url)

    def damaged(self, reason: object) -> StoreError:
        errors = self._psycopg.errors
        if isinstance(reason, errors.ReadOnlySqlTransaction):
            return StoreError(f"{self.name} refused a write: it is read-only ({self._said(reason)}); nothing was written")
        if isinstance(reason, self._psycopg.OperationalError):
            return StoreError(f"lost the PostgreSQL workspace {self.name}: {self._said(reason)}; nothing of this write was kept")
        if isinstance(reason, BaseException):
            reason = self._said(reason)
        return StoreError(f"{self.name}: {reason}")

    def problems(self) -> str | None:
        """PostgreSQL keeps its own pages sound; what can be wrong is a row the schema
        cannot express: a message pointing at a missing parent is caught by its key."""
        return None

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except self._psycopg.Error as exc:
            raise self.damaged(exc) from None

    @contextlib.contextmanager
    def write(self, *conversations: str, durable: bool = True) -> Iterator[_Statements]:
        """A transaction holding the advisory lock of each of ``conversations``; a write
        already open in this thread is joined (a save records its tree in its own
        transaction), as it is. ``durable=False``: committed without waiting for the
        server's WAL flush (``synchronous_commit``)."""
        if self.read_only:
            raise StoreError(f"{self.name} was opened read-only")
        current: _Statements | None = getattr(self._local, "statements", None)
        if current is not None:
            self._lock(current, conversations)
            yield current
            return
        with self._errors(), self._pool.connection() as connection, connection.transaction():
            statements = _Statements(connection)
            if not durable:
                statements.execute("SET LOCAL synchronous_commit = off")
            self._lock(statements, conversations)
            self._local.statements = statements
            try:
                yield statements
            finally:
                self._local.statements = None

    @staticmethod
    def _lock(statements: _Statements, conversations: Sequence[str]) -> None:
        # Sorted: two writers locking the same pair take them in one order (no deadlock).
        for conversation in sorted(set(conversations) - statements.locked):
            # Keyed by the schema too: workspaces in schemas of one database never wait on each other.
            statements.execute("SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ?, 0))", (f":glyphpack:{conversation}",))
            statements.locked.add(conversation)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        current: _Statements | None = getattr(self._local, "statements", None)
        if current is not None:
            return list(current.execute(sql, params).fetchall())
        with self._errors(), self._pool.connection() as connection:
            return list(_Statements(connection).execute(sql, params).fetchall())

    # ------------------------------------------------------------ message bodies

    def encode(self, message: Message) -> str:
        """The message's JSON with each image's bytes stored once in ``images`` and
        named by digest (inside a write only)."""
        with self.write() as statements:
            known = statements.encoded.get(message.id)
            if known is not None and known[0] is message:
                return known[1]
            body = self._encoded(message, statements)
            statements.encoded[message.id] = (message, body)
            return body

    @staticmethod
    def _encoded(message: Message, statements: _Statements) -> str:
        document = message_to_json(message)
        images: list[tuple[str, bytes]] = []
        for block in _image_blocks(document):
            data = base64.b64decode(block.pop("data"))
            digest = hashlib.sha256(data).hexdigest()
            block["sha256"] = digest
            images.append((digest, data))
        statements.executemany("INSERT INTO images (digest, data) VALUES (?, ?) ON CONFLICT DO NOTHING", dict(images).items())
        return json_text(document)

    def decode(self, body: str) -> Message:
        return self.decode_all([body])[0]

    def decode_all(self, bodies: Sequence[str], where: str | None = None) -> list[Message]:
        """Messages from stored bodies, their images fetched in one query; a body that
        does not decode is named by ``where`` (the transcript it belongs to)."""
        try:
            documents = [json.loads(body) for body in bodies]
            blocks = [block for document in documents for block in _image_blocks(document, stored=True)]
            wanted = sorted({block["sha256"] for block in blocks})
            found = dict(self.query("SELECT digest, data FROM images WHERE digest = ANY(?)", (wanted,))) if wanted else {}
            for block in blocks:
                block["data"] = base64.b64encode(bytes(found[block.pop("sha256")])).decode("ascii")
            return [message_from_json(document) for document in documents]
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"{where or self.name} is damaged: a stored message does not decode ({exc}); it was left untouched") from None


def _image_blocks(document: Any, *, stored: bool = False) -> Iterator[dict[str, Any]]:
    """The image blocks of a message's JSON that carry bytes (``stored``: that name a
    digest instead), in its content and in its tool results' content."""
    key = "sha256" if stored else "data"
    for block in document["content"]:
        nested = block["content"] if block["type"] == "tool_result" else (block,)
        yield from (b for b in nested if b["type"] == "image" and key in b)


class PostgresStore:
    """A workspace's transcripts, views and measured records in PostgreSQL beside its
    session tree (``StoreBackend``)."""

    def __init__(self, url: str, *, read_only: bool = False, pool_size: int = 4):
        self.database = PostgresDatabase(url, read_only=read_only, pool_size=pool_size)
        self.location = self.database.name
        self.read_only = read_only
        self.tree = SessionTree(self.database)
        # (conversation, agent) -> (revision, what it holds, its bodies' digests): a save
        # checks the stored revision, and reading a long transcript back is megabytes;
        # fetched again only when the revision moved.
        self._known: dict[tuple[str, str], tuple[int, StoredTranscript, tuple[str, ...]]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.database.close()

    def where(self, conversation: str, agent: str) -> str:
        return f"{self.location} transcript {conversation}/{agent}"

    def transcripts(self) -> list[tuple[str, str]]:
        return [(c, a) for c, a in self.database.query("SELECT conversation, agent FROM transcripts ORDER BY conversation, agent")]

    # ---------------------------------------------------------------- transcripts

    def read(self, conversation: str, agent: str) -> StoredTranscript | None:
        found = self._read(conversation, agent)
        return found[0] if found else None

    def _read(self, conversation: str, agent: str) -> tuple[StoredTranscript, tuple[str, ...]] | None:
        """The stored transcript and its messages' digests (from this store's cache when
        the stored revision is the one it last read or wrote)."""
        key = (check_id(conversation, "conversation"), check_id(agent, "agent"))
        rows = self.database.query("SELECT revision FROM transcripts WHERE conversation = ? AND agent = ?", key)
        if not rows:
            return None
        with self._lock:
            known = self._known.get(key)
        if known is not None and known[0] == rows[0][0]:
            return known[1], known[2]
        # One statement, so one snapshot: the row and its messages as one save left them,
        # even while another host saves (two statements could pair a revision with the
        # next save's messages).
        found = self.database.query(
            "SELECT t.revision, t.error, t.checkpoints, t.length, m.digest, b.body FROM transcripts t "
            "LEFT JOIN transcript_messages m ON m.conversation = t.conversation AND m.agent = t.agent "
            "LEFT JOIN bodies b ON b.digest = m.digest "
            "WHERE t.conversation = ? AND t.agent = ? ORDER BY m.position",
            key,
        )
        if not found:
            return None
        revision, error, checkpoints, length = found[0][:4]
        found = [(digest, body) for *_, digest, body in found if digest is not None]
        where = self.where(conversation, agent)
        missing = sum(1 for _, body in found if body is None) + length - len(found)
        if missing:
            raise StoreError(f"{where} is damaged: {missing} of its messages are missing; it was left untouched")
        try:
            marks = json.loads(checkpoints)
            messages = tuple(self.database.decode_all([body for _, body in found], where))
            validate_history(messages, allow_pending=False)
        except (ValueError, HistoryError) as exc:
            raise StoreError(f"{where} is damaged: {exc}; it was left untouched") from None
        digests = tuple(digest for digest, _ in found)
        stored = StoredTranscript(revision, messages, marks, error)
        with self._lock:
            self._known[key] = (revision, stored, digests)
        return stored, digests

    def exclusive(self, conversation: str, agent: str) -> AbstractContextManager[object]:
        return self.database.write(conversation)

    def save(self, conversation: str, agent: str, prepare: Callable[[StoredTranscript | None], StoredTranscript]) -> StoredTranscript:
        key = (check_id(conversation, "conversation"), check_id(agent, "agent"))
        with self.database.write(conversation) as statements:
            found = self._read(conversation, agent)
            previous, previous_digests = found if found else (None, ())
            stored = prepare(previous)
            # The messages the save keeps as they are (compared, not re-encoded), then the rest.
            kept = 0
            old = previous.messages if previous is not None else ()
            while kept < min(len(old), len(stored.messages)) and old[kept] == stored.messages[kept]:
                kept += 1
            bodies = [self.database.encode(message) for message in stored.messages[kept:]]
            added = [hashlib.sha256(body.encode("utf-8")).hexdigest() for body in bodies]
            digests = [*previous_digests[:kept], *added]
            statements.executemany("INSERT INTO bodies (digest, body) VALUES (?, ?) ON CONFLICT DO NOTHING", zip(added, bodies))
            if kept < len(previous_digests):
                statements.execute(
                    "DELETE FROM transcript_messages WHERE conversation = ? AND agent = ? AND position >= ?", (*key, kept)
                )
            statements.executemany(
                "INSERT INTO transcript_messages (conversation, agent, position, digest) VALUES (?, ?, ?, ?)",
                ((*key, position, digest) for position, digest in enumerate(added, kept)),
            )
            statements.execute(
                "INSERT INTO transcripts (conversation, agent, revision, error, checkpoints, length) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (conversation, agent) DO UPDATE SET revision = excluded.revision, error = excluded.error, "
                "checkpoints = excluded.checkpoints, length = excluded.length",
                (*key, stored.revision, stored.error, json_text(dict(stored.checkpoints)), len(digests)),
            )
            # The tree in the same transaction: both commit, or neither does.
            self.tree.record(conversation, agent, stored.messages)
        with self._lock:
            self._known[key] = (stored.revision, stored, tuple(digests))
        return stored

    # ---------------------------------------------------------------- measured records, views

    def measured(self, conversation: str, agent: str) -> tuple[str, bytes] | None:
        rows = self.database.query("SELECT record FROM measured WHERE conversation = ? AND agent = ?", (conversation, agent))
        return (f"{self.location} measured record of {conversation}/{agent}", bytes(rows[0][0])) if rows else None

    def put_measured(self, conversation: str, agent: str, record: bytes, *, durable: bool = True) -> None:
        with self.database.write(conversation, durable=durable) as statements:
            statements.execute(
                "INSERT INTO measured (conversation, agent, record) VALUES (?, ?, ?) "
                "ON CONFLICT (conversation, agent) DO UPDATE SET record = excluded.record",
                (check_id(conversation, "conversation"), check_id(agent, "agent"), record),
            )

    def update_measured(self, conversation: str, agent: str, change: Callable[[bytes | None], bytes | None]) -> bytes | None:
        with self.database.write(conversation) as statements:  # the conversation's advisory lock: other proxies wait
            rows = statements.execute("SELECT record FROM measured WHERE conversation = ? AND agent = ?", (conversation, agent)).fetchall()
            current = bytes(rows[0][0]) if rows else None
            changed = change(current)
            if changed is None:
                return current
            self.put_measured(conversation, agent, changed)  # joins this transaction
            return changed

    def views(self, conversation: str, agent: str) -> list[tuple[str, bytes]]:
        rows = self.database.query(
            "SELECT number, document FROM views WHERE conversation = ? AND agent = ? ORDER BY number", (conversation, agent)
        )
        return [(self._view_name(conversation, agent, number), bytes(document)) for number, document in rows]

    def view(self, conversation: str, agent: str) -> tuple[str, bytes] | None:
        rows = self.database.query(
            "SELECT number, document FROM views WHERE conversation = ? AND agent = ? ORDER BY number DESC LIMIT 1",
            (conversation, agent),
        )
        return (self._view_name(conversation, agent, rows[0][0]), bytes(rows[0][1])) if rows else None

    def count_views(self, conversation: str, agent: str) -> int:
        return int(self.database.query("SELECT count(*) FROM views WHERE conversation = ? AND agent = ?", (conversation, agent))[0][0])

    def delete(self, conversation: str) -> None:
        with self.database.write(conversation) as statements:
            for table in ("transcript_messages", "transcripts", "views", "measured"):
                statements.execute(f"DELETE FROM {table} WHERE conversation = ?", (check_id(conversation, "conversation"),))

    def put_view(self, conversation: str, agent: str, document: bytes) -> None:
        with self.database.write(conversation) as statements:
            statements.execute(
                "INSERT INTO views (conversation, agent, number, document) SELECT ?, ?, coalesce(max(number), 0) + 1, ? "
                "FROM views WHERE conversation = ? AND agent = ?",
                (check_id(conversation, "conversation"), check_id(agent, "agent"), document, conversation, agent),
            )

    def _view_name(self, conversation: str, agent: str, number: int) -> str:
        return f"{self.location} view {number} of {conversation}/{agent}"
