"""The session tree: messages with parent pointers, a tip per conversation, in a
``TreeDatabase`` (``sqlite``: the folder workspace's; ``postgres``: a fleet's).

``append`` adds a message under the conversation's tip and moves the tip;
``branch`` moves the tip to an earlier message and writes nothing else; ``fork``
copies the path to a message into a new conversation with new ids (no shared rows).
The tip moves by compare-and-swap inside an immediate transaction, so two writers
never clobber each other.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from .._errors import ConflictError, StoreError
from .._types import public
from .database import Executor, TreeDatabase
from .ids import check_id, new_id
from .messages import Message, first_task
from .sqlite import SqliteDatabase


class _Unset:
    """The type of ``UNSET``: an argument not given (where None means something)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()



@dataclasses.dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    tip: str | None
    created: float
    forked_from: str | None = None
    forked_at: str | None = None


@dataclasses.dataclass(frozen=True)
class Node:
    """A message in the tree: the message, its parent's id and its conversation."""

    message: Message
    parent: str | None
    conversation: str


def check_title(title: object) -> str:
    """A conversation's title, refused (``StoreError``) unless it is text every store
    keeps as it is: a string with no lone surrogate (half of a UTF-16 pair, which UTF-8
    cannot encode) and no NUL (which PostgreSQL keeps in no text field). Titles taken
    from a file are made so first (``displayable``)."""
    if not isinstance(title, str):
        raise StoreError(f"a conversation's title must be text, not {type(title).__name__}")
    bad = next((n for n, c in enumerate(title) if "\ud800" <= c <= "\udfff"), None)
    if bad is not None:
        raise StoreError(f"a conversation's title holds a lone surrogate (U+{ord(title[bad]):04X} at character {bad}), which no store keeps as text")
    if "\x00" in title:
        raise StoreError(f"a conversation's title holds a NUL character (at character {title.index(chr(0))}), which PostgreSQL keeps in no text field")
    return title


def displayable(text: str) -> str:
    """``text`` with each lone surrogate and NUL replaced by U+FFFD, for a title derived
    from a file or a task (the messages themselves are stored as they are: their JSON
    escapes both), so every store keeps it (``check_title``)."""
    return "".join("\ufffd" if "\ud800" <= c <= "\udfff" or c == "\x00" else c for c in text)


@public
class SessionTree:
    """Messages with parent pointers and a tip per conversation, in one SQLite file
    (or a PostgreSQL database: ``Workspace("postgresql://...").tree``)."""

    def __init__(self, path: str | Path | TreeDatabase, *, read_only: bool = False):
        """Open (and, unless ``read_only``, create or migrate) the tree at ``path``.

        ``read_only`` writes nothing, not even a schema, and checks the database's
        integrity first: a damaged or empty file raises ``StoreError`` naming it.
        """
        self._db: TreeDatabase = path if not isinstance(path, (str, Path)) else SqliteDatabase(path, read_only=read_only)
        self.name = self._db.name
        self.read_only = self._db.read_only

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SessionTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def verify(self) -> None:
        """Raise ``StoreError`` naming the database if its integrity check finds damage."""
        problems = self._db.problems()
        if problems:
            raise self._db.damaged(problems)

    def _not_found(self, message: str) -> StoreError:
        """``message`` as the error, unless the thing is missing because the database is damaged."""
        problems = self._db.problems()
        return self._db.damaged(problems) if problems else StoreError(message)

    def _message(self, body: str) -> Message:
        return self._db.decode(body)

    def _write(self, *conversations: str, durable: bool = True) -> AbstractContextManager[Executor]:
        return self._db.write(*conversations, durable=durable)

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        return self._db.query(sql, params)

    # ------------------------------------------------------------------ reading

    def conversations(self) -> list[Conversation]:
        rows = self._query("SELECT id, title, tip, created, forked_from, forked_at FROM conversations ORDER BY created, id")
        return [Conversation(*row) for row in rows]

    def conversation(self, conversation: str) -> Conversation:
        found = self._query(
            "SELECT id, title, tip, created, forked_from, forked_at FROM conversations WHERE id = ?", (conversation,)
        )
        row = found[0] if found else None
        if row is None:
            raise self._not_found(f"no conversation {conversation!r} in {self.name}")
        return Conversation(*row)

    def tip(self, conversation: str) -> str | None:
        return self.conversation(conversation).tip

    def conversation_of(self, message_id: str) -> str | None:
        """The conversation that holds message ``message_id``, None when none does."""
        found = self._query("SELECT conversation FROM messages WHERE id = ?", (message_id,))
        return found[0][0] if found else None

    def node(self, message_id: str) -> Node:
        found = self._query("SELECT body, parent, conversation FROM messages WHERE id = ?", (message_id,))
        row = found[0] if found else None
        if row is None:
            raise self._not_found(f"no message {message_id!r} in {self.name}")
        return Node(self._message(row[0]), row[1], row[2])

    def path_to(self, message_id: str | None) -> list[Message]:
        """The messages from the root to ``message_id``, in order."""
        if message_id is None:
            return []
        rows = self._query(
            """
            WITH RECURSIVE up(id, parent, body, depth) AS (
                SELECT id, parent, body, 0 FROM messages WHERE id = ?
                UNION ALL
                SELECT m.id, m.parent, m.body, up.depth + 1 FROM messages m JOIN up ON m.id = up.parent
            )
            SELECT body FROM up ORDER BY depth DESC
            """,
            (message_id,),
        )
        if not rows:
            raise self._not_found(f"no message {message_id!r} in {self.name}")
        return [self._message(body) for (body,) in rows]

    def path(self, conversation: str) -> list[Message]:
        """The conversation's current history: root to tip."""
        return self.path_to(self.tip(conversation))

    def find(self, conversation: str, prefix: str) -> str:
        """A message id of the conversation from the id or a unique prefix of it (as
        ``/tree`` shows them: imported ids may carry a ``conversation/`` scope)."""
        ids = [n.message.id for n in self.nodes(conversation)]
        if prefix in ids:
            return prefix
        exact = [i for i in ids if i.rsplit("/", 1)[-1] == prefix]  # an imported id as /tree shows it
        if len(exact) == 1:
            return exact[0]
        matches = [i for i in ids if i.startswith(prefix) or i.rsplit("/", 1)[-1].startswith(prefix)]
        if len(matches) != 1:
            found = "no message" if not matches else f"{len(matches)} messages"
            raise StoreError(f"{found} in {conversation!r} with an id starting {prefix!r}")
        return matches[0]

    def children(self, message_id: str) -> list[Message]:
        """The messages stored directly under ``message_id`` (branches, oldest first)."""
        rows = self._query(f"SELECT body FROM messages WHERE parent = ? ORDER BY created, {self._db.order}", (message_id,))
        return [self._message(body) for (body,) in rows]

    def nodes(self, conversation: str) -> list[Node]:
        """Every message stored for a conversation, in insertion order (the whole tree)."""
        self.conversation(conversation)
        rows = self._query(
            f"SELECT body, parent FROM messages WHERE conversation = ? ORDER BY created, {self._db.order}", (conversation,)
        )
        return [Node(self._message(body), parent, conversation) for body, parent in rows]

    # ------------------------------------------------------------------ writing

    def create(self, conversation: str | None = None, title: str = "") -> str:
        """A new, empty conversation; returns its id."""
        conversation = check_id(conversation if conversation is not None else new_id(), "conversation")
        with self._write(conversation) as db:
            try:
                db.execute(
                    "INSERT INTO conversations (id, title, tip, created) VALUES (?, ?, NULL, ?)",
                    (conversation, check_title(title), time.time()),
                )
            except self._db.integrity_errors:
                raise StoreError(f"conversation {conversation!r} already exists") from None
        return conversation

    def append(self, conversation: str, message: Message, *, expected_tip: str | None | _Unset = UNSET) -> str:
        """Add ``message`` under the tip and move the tip to it; returns its id.

        ``expected_tip``: the tip the caller's message continues from. If the tip has
        moved since, raises ``ConflictError`` and writes nothing. Omitted, the message
        goes under whatever the tip is now (appends from several writers chain up).
        """
        with self._write(conversation) as db:
            body = self._db.encode(message)
            tip = self.tip(conversation)
            if not isinstance(expected_tip, _Unset) and expected_tip != tip:
                raise ConflictError(
                    f"conversation {conversation!r} has moved to tip {tip!r}, not {expected_tip!r}: reload it and retry"
                )
            try:
                db.execute(
                    "INSERT INTO messages (id, conversation, parent, role, body, created) VALUES (?, ?, ?, ?, ?, ?)",
                    (message.id, conversation, tip, message.role, body, time.time()),
                )
            except self._db.integrity_errors:
                raise StoreError(f"message id {message.id!r} is already in the tree; messages are stored once") from None
            self._move_tip(db, conversation, tip, message.id)
        return message.id

    def _move_tip(self, db: Executor, conversation: str, old: str | None, new: str | None) -> None:
        moved = db.execute(
            f"UPDATE conversations SET tip = ? WHERE id = ? AND tip {self._db.same} ?", (new, conversation, old)
        ).rowcount
        if moved != 1:
            raise ConflictError(f"conversation {conversation!r}: the tip moved underneath this write")

    def branch(self, conversation: str, message_id: str | None) -> None:
        """Move the conversation's tip to ``message_id`` (one of its messages, or None
        for the empty start). Writes nothing but the tip."""
        with self._write(conversation) as db:
            current = self.tip(conversation)
            if message_id is not None:
                node = self.node(message_id)
                if node.conversation != conversation:
                    raise StoreError(f"message {message_id!r} belongs to {node.conversation!r}, not {conversation!r}")
            self._move_tip(db, conversation, current, message_id)

    def add_paths(self, conversation: str, paths: Sequence[Sequence[Message]], *, tip: str | None) -> int:
        """Store whole paths (root first) in one transaction: each message under the one
        before it, a message already stored (a prefix two paths share) stored once; then
        move the tip to ``tip``. Returns how many messages were added."""
        added = 0
        with self._write(conversation) as db:
            self.conversation(conversation)
            for path in paths:
                parent = None
                for message in path:
                    exists = db.execute("SELECT conversation FROM messages WHERE id = ?", (message.id,)).fetchone()
                    if exists is None:
                        db.execute(
                            "INSERT INTO messages (id, conversation, parent, role, body, created) VALUES (?, ?, ?, ?, ?, ?)",
                            (message.id, conversation, parent, message.role, self._db.encode(message), time.time()),
                        )
                        added += 1
                    elif exists[0] != conversation:
                        raise StoreError(f"message id {message.id!r} is already in conversation {exists[0]!r}")
                    parent = message.id
            self._move_tip(db, conversation, self.tip(conversation), tip)
        return added

    def agent_tips(self, conversation: str) -> dict[str, str | None]:
        """Each agent's tip in ``conversation`` (agents recorded with ``record``), main agent first."""
        self.conversation(conversation)
        if not self._db.has_agent_tips:
            return {}
        rows = self._query(
            "SELECT agent, tip FROM agent_tips WHERE conversation = ? ORDER BY main DESC, agent", (conversation,)
        )
        return dict(rows)

    def agent_tip(self, conversation: str, agent: str) -> str | None:
        """``agent``'s tip in ``conversation`` (None: nothing recorded for it)."""
        if not self._db.has_agent_tips:
            return None
        rows = self._query("SELECT tip FROM agent_tips WHERE conversation = ? AND agent = ?", (conversation, agent))
        return rows[0][0] if rows else None

    def stored_prefix(self, conversation: str, history: Sequence[Message]) -> int:
        """How many of ``history``'s first messages the conversation already stores (the
        rest would be added by ``record``). Raises ``StoreError`` if one of the others is
        stored in another conversation: ids are stored once. Writes nothing."""
        # The newest first, in growing windows: a save that adds a turn finds the
        # stored end in its first window, one statement however long the history.
        end, window = len(history), 8
        while end > 0:
            start = max(0, end - window)
            ids = [m.id for m in history[start:end]]
            found = dict(self._query(f"SELECT id, conversation FROM messages WHERE id IN ({', '.join('?' * len(ids))})", tuple(ids)))
            for index in range(end - 1, start - 1, -1):
                stored_in = found.get(history[index].id)
                if stored_in is None:
                    continue
                if stored_in != conversation:
                    raise StoreError(
                        f"message id {history[index].id!r} is already in conversation {stored_in!r}; "
                        f"a copy needs new ids (fork does that)"
                    )
                return index + 1
            end, window = start, min(window * 8, 512)
        return 0

    def record(self, conversation: str, agent: str, history: Sequence[Message], *, title: str = "", durable: bool = True) -> int:
        """Make the tree hold ``history`` (root first) as ``agent``'s path and move the
        agent's tip to its end, in one transaction; returns how many messages it added.

        Messages already stored are kept as they are (ids are stable), so recording a
        transcript that grew by a turn adds that turn only, and recording one that went
        back (a rewind, a branch) adds its new messages under the point it left from:
        the path left behind stays in the tree. The conversation is created if new; its
        first recorded agent is its main agent, whose tip is the conversation's tip.
        ``durable=False``: for a history the transcript holds already, durably
        (``Database.write``; ``Workspace.reconcile`` brings the tree back to it).
        """
        check_id(agent, "agent")
        with self._write(conversation, durable=durable) as db:
            db.execute(
                "INSERT INTO conversations (id, title, tip, created) VALUES (?, ?, NULL, ?) ON CONFLICT (id) DO NOTHING",
                (check_id(conversation, "conversation"), check_title(title), time.time()),
            )
            untitled = db.execute("SELECT title FROM conversations WHERE id = ?", (conversation,)).fetchone()[0] == ""
            task = displayable(first_task(history)) if untitled else ""
            if task:  # untitled (a proxy's, a new session's): its first task names it
                db.execute("UPDATE conversations SET title = ? WHERE id = ?", (task, conversation))
            known = self.stored_prefix(conversation, history)
            parents = [history[known - 1].id if known else None] + [m.id for m in history[known:-1]]
            db.executemany(
                "INSERT INTO messages (id, conversation, parent, role, body, created) VALUES (?, ?, ?, ?, ?, ?)",
                [(m.id, conversation, parent, m.role, self._db.encode(m), time.time()) for m, parent in zip(history[known:], parents)],
            )
            tip = history[-1].id if history else None
            # A new agent is the main one only where the conversation has none yet; the
            # main agent's tip is the conversation's. Two statements, whatever the case.
            db.execute(
                "INSERT INTO agent_tips (conversation, agent, tip, main) VALUES (?, ?, ?, "
                "CASE WHEN EXISTS (SELECT 1 FROM agent_tips WHERE conversation = ? AND main = 1) THEN 0 ELSE 1 END) "
                "ON CONFLICT (conversation, agent) DO UPDATE SET tip = excluded.tip",
                (conversation, agent, tip, conversation),
            )
            db.execute(
                "UPDATE conversations SET tip = ? WHERE id = ? AND EXISTS "
                "(SELECT 1 FROM agent_tips WHERE conversation = ? AND agent = ? AND main = 1)",
                (tip, conversation, conversation, agent),
            )
        return len(history) - known

    def set_title(self, conversation: str, title: str) -> None:
        """Give ``conversation`` the title ``title`` (a tree shows it beside the id)."""
        self.conversation(conversation)
        with self._write(conversation) as db:
            db.execute("UPDATE conversations SET title = ? WHERE id = ?", (check_title(title), conversation))

    def delete(self, conversation: str) -> int:
        """Remove ``conversation`` and every message, tip, label and index entry of it,
        in one transaction; returns how many messages went. Conversations forked from
        it keep their own copies (``forked_from`` still names it)."""
        self.conversation(conversation)
        with self._write(conversation) as db:
            for table in ("labels", "agent_tips", "history_ends"):
                db.execute(f"DELETE FROM {table} WHERE conversation = ?", (conversation,))
            db.execute("UPDATE conversations SET tip = NULL WHERE id = ?", (conversation,))
            removed = db.execute("DELETE FROM messages WHERE conversation = ?", (conversation,)).rowcount
            db.execute("DELETE FROM conversations WHERE id = ?", (conversation,))
        return int(removed)

    def set_ends(self, ends: Mapping[tuple[str, str], Sequence[bytes]]) -> None:
        """Keep where each (conversation, agent) history ends, as digests (``ends``:
        the new ends of each, replacing the old), in one transaction, not a durable one
        (``Database.write``): what a power failure undoes, ``remember`` and the proxy's
        ``index_workspace`` write again from the transcripts."""
        if not ends:
            return
        with self._write(*sorted({conversation for conversation, _ in ends}), durable=False) as db:
            for (conversation, agent), digests in ends.items():
                db.execute("DELETE FROM history_ends WHERE conversation = ? AND agent = ?", (conversation, agent))
                db.executemany(
                    "INSERT INTO history_ends (conversation, agent, digest) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    [(conversation, agent, digest) for digest in digests],
                )

    def ending_with(self, digests: Sequence[bytes]) -> list[tuple[str, str]]:
        """The (conversation, agent) histories whose kept ends are among ``digests``."""
        found: set[tuple[str, str]] = set()
        for start in range(0, len(digests), 500):  # within every database's parameter limit
            chunk = list(digests[start : start + 500])
            rows = self._query(
                f"SELECT conversation, agent FROM history_ends WHERE digest IN ({', '.join('?' * len(chunk))})", tuple(chunk)
            )
            found.update((conversation, agent) for conversation, agent in rows)
        return sorted(found)

    def ends_of(self, conversation: str, agent: str) -> set[bytes]:
        """Where the (conversation, agent) history ends as the store keeps it (``set_ends``)."""
        rows = self._query("SELECT digest FROM history_ends WHERE conversation = ? AND agent = ?", (conversation, agent))
        return {bytes(digest) for (digest,) in rows}

    def label(self, conversation: str, name: str, message_id: str | None) -> None:
        """Put label ``name`` on ``message_id`` (None: the start of the conversation),
        moving it if the conversation has it elsewhere."""
        self.conversation(conversation)
        if message_id is not None and self.node(message_id).conversation != conversation:
            raise StoreError(f"message {message_id!r} is not in conversation {conversation!r}")
        with self._write(conversation) as db:
            db.execute(
                "INSERT INTO labels (conversation, name, message) VALUES (?, ?, ?) "
                "ON CONFLICT (conversation, name) DO UPDATE SET message = excluded.message",
                (conversation, name, message_id),
            )

    def labels(self, conversation: str) -> dict[str, str | None]:
        """Every label of a conversation: name -> the message it marks (None: the start)."""
        if not self._db.has_labels:
            return {}
        return {name: message for name, message in self._query(
            "SELECT name, message FROM labels WHERE conversation = ? ORDER BY name", (conversation,)
        )}

    def fork(self, conversation: str, at: str | None = None, *, new_conversation: str | None = None, title: str = "") -> str:
        """Copy the path root..``at`` (default: the tip) into a new conversation with
        new message ids; the original is untouched. Returns the new conversation's id."""
        source = self.conversation(conversation)
        at = source.tip if at is None else at
        if at is not None and self.node(at).conversation != conversation:
            raise StoreError(f"message {at!r} is not in conversation {conversation!r}")
        path = self.path_to(at)
        new = check_id(new_conversation if new_conversation is not None else new_id(), "conversation")
        with self._write(new) as db:
            try:
                db.execute(
                    "INSERT INTO conversations (id, title, tip, created, forked_from, forked_at) VALUES (?, ?, NULL, ?, ?, ?)",
                    (new, check_title(title) or source.title, time.time(), conversation, at),
                )
            except self._db.integrity_errors:
                raise StoreError(f"conversation {new!r} already exists") from None
            parent = None
            renamed: dict[str | None, str | None] = {None: None}
            for message in path:
                copy = dataclasses.replace(message, id=new_id())
                renamed[message.id] = copy.id
                db.execute(
                    "INSERT INTO messages (id, conversation, parent, role, body, created) VALUES (?, ?, ?, ?, ?, ?)",
                    (copy.id, new, parent, copy.role, self._db.encode(copy), time.time()),
                )
                parent = copy.id
            self._move_tip(db, new, None, parent)
            # The labels on the copied path come along, on the copies.
            for name, message in self._query("SELECT name, message FROM labels WHERE conversation = ?", (conversation,)):
                if message in renamed:
                    db.execute("INSERT INTO labels (conversation, name, message) VALUES (?, ?, ?)", (new, name, renamed[message]))
        return new

    def copy_conversation(self, source: SessionTree, conversation: str) -> int:
        """Copy ``conversation`` from ``source`` (another workspace's tree) as it is: each
        message with its id, parent, role and time, the tips of the conversation and of
        each agent, the labels, where it was forked from. Returns the messages copied."""
        info = source.conversation(conversation)
        rows = source._query(
            f"SELECT id, parent, role, body, created FROM messages WHERE conversation = ? ORDER BY created, {source._db.order}",
            (conversation,),
        )
        agents = source._query("SELECT agent, tip, main FROM agent_tips WHERE conversation = ?", (conversation,)) if source._db.has_agent_tips else []
        with self._write(conversation) as db:
            try:
                db.execute(
                    "INSERT INTO conversations (id, title, tip, created, forked_from, forked_at) VALUES (?, ?, NULL, ?, ?, ?)",
                    (info.id, displayable(info.title), info.created, info.forked_from, info.forked_at),  # an older folder's title may hold a NUL
                )
            except self._db.integrity_errors:
                raise StoreError(f"conversation {conversation!r} already exists in {self.name}") from None
            for message_id, parent, role, body, created in rows:
                message = source._message(body)
                db.execute(
                    "INSERT INTO messages (id, conversation, parent, role, body, created) VALUES (?, ?, ?, ?, ?, ?)",
                    (message_id, conversation, parent, role, self._db.encode(message), created),
                )
            for agent, tip, main in agents:
                db.execute("INSERT INTO agent_tips (conversation, agent, tip, main) VALUES (?, ?, ?, ?)", (conversation, agent, tip, main))
            for name, message_id in source.labels(conversation).items():
                db.execute("INSERT INTO labels (conversation, name, message) VALUES (?, ?, ?)", (conversation, name, message_id))
            db.execute("UPDATE conversations SET tip = ? WHERE id = ?", (info.tip, conversation))
        return len(rows)

    def set_tips(self, conversation: str, tip: str | None, agent_tips: dict[str, str | None]) -> None:
        """Put the conversation's tip and its agents' tips where they were in a copy's source."""
        with self._write(conversation) as db:
            db.execute("UPDATE conversations SET tip = ? WHERE id = ?", (tip, conversation))
            for agent, agent_tip in agent_tips.items():
                db.execute("UPDATE agent_tips SET tip = ? WHERE conversation = ? AND agent = ?", (agent_tip, conversation, agent))
