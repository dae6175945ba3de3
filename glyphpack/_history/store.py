"""The workspace: ``Workspace`` holds the rules of a save (turn boundaries, the
revision compared and swapped, a history that extends the stored one, checkpoints)
over a ``StoreBackend`` chosen by the location: ``FolderStore`` (``folder``), or
``glyphpack._history.postgres.PostgresStore`` for a ``postgresql://`` URL.

The folder: one directory holding the session tree (SQLite) and one JSON transcript
per (conversation, agent), with checkpoints. Writes are atomic: a temporary file in the same directory, fsync, rename, fsync of
the directory, so a crash at any instant leaves the previous or the new complete
file. Savers of one transcript take an exclusive lock on a sidecar lock file (released
by the kernel if the holder dies) and compare revisions: a save based on an older
revision raises ``ConflictError`` and writes nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from .._errors import ConflictError, HistoryError, StoreError, UsageError
from .._providers.text_tokens import DEFAULT_ESTIMATOR, TextEstimator
from .._secrets import redacted
from .._types import LoadState, public
from .backend import StoreBackend, StoredTranscript
from .codec import json_bytes
from .folder import FolderStore, _refuse_read_only
from .ids import check_id, unique_name
from .imported import ImportedAgent, ImportedSession
from .messages import Message, Text, last_answered_boundary, pending_calls, turn_boundaries, validate_history
from .prefixes import begins_with
from .pricing import EstimatePricer, message_tokens
from .tree import SessionTree, displayable
from .view import harness_view, read_view, renamed_view, view_for, write_view


def _nearest_boundaries(tree: SessionTree, path: Sequence[Message]) -> str:
    """The turn boundaries nearest the last message of ``path`` (one that made calls):
    the message with their results after it, and the last boundary before it."""
    near = [f"after it, {child.id} (its results)" for child in tree.children(path[-1].id) if not pending_calls([*path, child])][:1]
    before = next((path[n].id for n in range(len(path) - 2, -1, -1) if not pending_calls(path[: n + 1])), None)
    if before is not None:
        near.append(f"before it, {before}")
    return f" (nearest: {'; '.join(near)})" if near else ""


def _agent_names(session: ImportedSession) -> list[str]:
    """The agent id each of an imported session's agents is stored under: its name made
    an id, names that clean to one id ("sub/1", "sub-1") made distinct."""
    names: list[str] = []
    for agent in session.agents:
        names.append(check_id(unique_name(_agent_id(agent.name), set(names)), "agent"))
    return names


def _agent_id(name: str) -> str:
    """An agent name from a session file as an id a file name can carry."""
    # ASCII only: an id is a file name on every system (``check_id``), and "日本".isalnum().
    cleaned = "".join(c if (c.isascii() and c.isalnum()) or c in "._-" else "-" for c in name).strip("-.") or "agent"
    return cleaned[:128]


#: The record of what an imported file's last request measured (``Workspace.measured``).
MEASURED_FORMAT = "glyphpack-measured"
#: Requests of an imported file whose counts are kept for calibration (the newest).
MEASURED_KEPT = 32
#: What ``Workspace.sync_session`` did with a file.
SyncState = Literal["new", "appended", "unchanged"]
#: The agent whose record beside it holds who owns a conversation (``Workspace.owner``).
OWNER_AGENT = "main"
#: What a measured record holds that no count teaches again: who holds the conversation,
#: the file it was imported from, the harness that wrote it and what it recorded the
#: requests cost, where the harness's newest compaction starts.
_MEASURED_FACTS = ("owner", "source", "harness", "harness_cost", "harness_start")


def _cost_recorded(session: ImportedSession) -> dict[str, Any]:
    """The measured record's ``harness_cost`` for ``session``: what its harness recorded,
    where it recorded a cost at all."""
    return {} if session.report.cost is None else {"harness_cost": session.report.cost}


def _json_object(raw: bytes | None) -> dict[str, Any]:
    """A measured record as a JSON object ({} when absent or not one: it only ever holds
    what can be learned again)."""
    try:
        record = json.loads(raw) if raw is not None else {}
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _loaded(
    stored: StoredTranscript | None, conversation: str, agent: str, keep: int | None, budget: int | None, estimator: TextEstimator
) -> Transcript:
    """The ``Transcript`` of what a store holds, trimmed to its newest messages when
    ``keep`` (messages) or ``budget`` (estimated tokens) is given."""
    if stored is None:
        return Transcript(conversation, agent)
    messages = stored.messages
    start = trim_start(messages, keep, budget, estimator)
    head = tuple(m for m in messages[:start] if m.role == "system")
    kept = head + messages[start:]
    kept_ids = {m.id for m in kept}
    checkpoints, dropped = {}, []
    for name, target in stored.checkpoints.items():
        if target is None and start > len(head):
            dropped.append(name)  # the start of the history was trimmed away
        elif target is None or target in kept_ids:
            checkpoints[name] = target
        else:
            dropped.append(name)
    return Transcript(
        conversation,
        agent,
        kept,
        stored.revision,
        _state(messages, stored.error),
        stored.error,
        checkpoints,
        tuple(dropped),
        start - len(head),
    )


# The steps of a save, in order (each store writes and records in its own way):
# validate, compare-and-swap, keep the checkpoints, write, record.


def _validated(messages: Sequence[Message]) -> tuple[Message, ...]:
    """``messages`` at a turn boundary, or ``HistoryError``."""
    messages = tuple(messages)
    try:
        validate_history(messages, allow_pending=False)
    except HistoryError as exc:
        raise HistoryError(f"not saved: {exc} (save only at a turn boundary)") from None
    return messages


def _compare_and_swap(
    where: str, stored: StoredTranscript | None, revision: int, messages: tuple[Message, ...], replace: bool
) -> StoredTranscript | None:
    """``stored`` (the transcript at ``where``), if ``revision`` is still its revision
    (else ``ConflictError``) and ``messages`` extend it (unless ``replace``)."""
    stored_revision = stored.revision if stored else 0
    if stored_revision != revision:
        raise ConflictError(
            f"{where} is at revision {stored_revision}, not {revision}: another writer saved first; "
            f"load it again and redo the change"
        )
    # The very messages stored, then more (a session saving what it holds): nothing to compare.
    if stored is not None and not replace and not begins_with(messages, stored.messages):
        _check_extends(where, _clean_prefix(stored), messages)
    return stored


def _kept_checkpoints(
    stored: StoredTranscript | None, messages: tuple[Message, ...], checkpoints: Mapping[str, str | None] | None
) -> dict[str, str | None]:
    """The checkpoints to store: those given (each must point into ``messages``), or
    by default the stored ones whose target is still in ``messages``."""
    if not checkpoints and not (stored and stored.checkpoints):
        return {}  # the common case: no marks, and no need to list every message's id
    ids = {m.id for m in messages}
    if checkpoints is None:
        checkpoints = {n: t for n, t in (stored.checkpoints if stored else {}).items() if t is None or t in ids}
    for name, target in checkpoints.items():
        if target is not None and target not in ids:
            raise HistoryError(f"checkpoint {name!r} points at message {target!r}, which is not in the history")
    return dict(checkpoints)


def _clean_prefix(stored: StoredTranscript) -> tuple[Message, ...]:
    """The stored messages a save must keep: all of them, except that a failed turn
    (one that did not end with the assistant's answer) may be retried from its start."""
    if _state(stored.messages, stored.error) != "unanswered":
        return stored.messages
    return stored.messages[: last_answered_boundary(stored.messages)]


def _check_extends(path: Path | str, stored: Sequence[Message], messages: Sequence[Message]) -> None:
    """Refuse a save that does not begin with the stored history: it would drop messages."""
    stored_ids = [m.id for m in stored]
    if [m.id for m in messages[: len(stored_ids)]] == stored_ids:
        return
    dropped = len(set(stored_ids) - {m.id for m in messages})
    what = f"would drop {dropped} stored messages" if dropped else "would rewrite the stored history"
    raise StoreError(
        f"{path}: this save {what} (the history was loaded trimmed with keep or budget, or edited); "
        f"save the full history, or pass replace=True to replace it"
    )


@public
@dataclasses.dataclass(frozen=True)
class Transcript:
    """A loaded transcript.

    Attributes:
        conversation, agent: whose history it is.
        messages: the (possibly trimmed) history.
        revision: the stored revision it was read at (0: nothing stored). Pass it
            back to ``save`` to have the save rejected if someone saved since.
        state: ``"empty"`` (nothing stored), ``"answered"`` (the model answered last:
            the user speaks next) or ``"unanswered"`` (the model's answer is due: after
            tool results mid-loop, or a turn to retry).
        error: why the last turn failed, when the caller said so.
        checkpoints: name -> id of the message the mark follows (None: the start).
        dropped_checkpoints: checkpoints left out because trimming removed their target.
        trimmed: how many messages the load cut from the front.
    """

    conversation: str
    agent: str
    messages: tuple[Message, ...] = ()
    revision: int = 0
    state: LoadState = "empty"
    error: str | None = None
    checkpoints: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    dropped_checkpoints: tuple[str, ...] = ()
    trimmed: int = 0


def _state(messages: Sequence[Message], error: str | None) -> LoadState:
    if not messages:
        return "empty"
    if error is not None or messages[-1].role != "assistant":
        return "unanswered"
    return "answered"


def trim_start(
    messages: Sequence[Message],
    keep: int | None = None,
    budget: int | None = None,
    estimator: TextEstimator = DEFAULT_ESTIMATOR,
) -> int:
    """Where to cut a history so it keeps its newest messages: at most ``keep``
    messages, or at most ``budget`` estimated tokens.

    The cut lands only where the earlier part is at a turn boundary and the kept part
    starts with a user message, so no tool result is orphaned and no call loses its
    result. Leading system messages are not counted and always kept. When no cut
    meets the limit, the latest valid cut is used (the shortest valid history).
    """
    n = len(messages)
    head = 0
    while head < n and messages[head].role == "system":
        head += 1
    boundaries = set(turn_boundaries(messages))
    starts = [s for s in range(head, n) if s in boundaries and messages[s].role == "user"]
    if not starts:
        return head
    if keep is None and budget is None:
        return head
    pricer = EstimatePricer(estimator)
    costs = [message_tokens(m, pricer) for m in messages] if budget is not None else None
    suffix = 0
    suffix_cost: dict[int, int] = {}
    for s in range(n - 1, head - 1, -1):
        if costs is not None:
            suffix += costs[s]
            suffix_cost[s] = suffix
    for s in starts:
        fits = True
        if keep is not None and n - s > keep:
            fits = False
        if budget is not None and suffix_cost[s] > budget:
            fits = False
        if fits:
            return s
    return starts[-1]


def is_database_location(location: str | os.PathLike[str]) -> bool:
    """Whether a workspace location names a database (``postgresql://...``, the scheme in
    any case), not a folder. Any other URL is refused (``StoreError``, the URL shown
    without its credentials): it is never taken as a folder named after it."""
    if not isinstance(location, str):
        return False
    scheme, separator, _ = location.partition("://")
    if not separator or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        return False
    if scheme.lower() in ("postgresql", "postgres"):
        return True
    raise StoreError(f"{redacted(location)} is not a workspace: a workspace is a folder or a postgresql:// URL")


def _with_lower_scheme(url: str) -> str:
    """``POSTGRESQL://...`` as libpq reads it (it takes the scheme in lower case only)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme.lower()}://{rest}"


@public
class Workspace:
    """Where sessions are kept: a folder (``tree.sqlite3``, the session tree, and
    ``transcripts/<conversation>/<agent>.json``), or a PostgreSQL database for a fleet
    of hosts (``Workspace("postgresql://user:password@host/db")``, with
    ``pip install '.[postgres]'`` in a checkout). Both keep the same things with the same
    guarantees."""

    def __init__(self, location: str | os.PathLike[str], *, read_only: bool = False, pool_size: int = 4):
        """Open (creating it, unless ``read_only``) the workspace at ``location``.
        ``read_only`` writes nothing: the tree is opened read-only and saves raise.
        ``pool_size``: the most connections a PostgreSQL workspace holds open at once."""
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size < 1:
            raise UsageError(f"pool_size must be a whole number of connections, at least 1, not {pool_size!r}")
        self.read_only = read_only
        self._store: StoreBackend
        if is_database_location(location):
            from .postgres import PostgresStore

            self._store = PostgresStore(_with_lower_scheme(str(location)), read_only=read_only, pool_size=pool_size)
        else:
            self._store = FolderStore(Path(location), read_only=read_only)
        self.location = self._store.location

    def __repr__(self) -> str:
        return f"Workspace({self.location!r})"

    @property
    def path(self) -> Path:
        """The folder of a folder workspace (a PostgreSQL workspace has none)."""
        if not isinstance(self._store, FolderStore):
            raise StoreError(f"{self.location} is a database, not a folder")
        return self._store.path

    @property
    def name(self) -> str:
        """A short name for the workspace: its folder's, or its database's."""
        if isinstance(self._store, FolderStore):
            return self._store.path.name
        return self.location.rsplit("/", 1)[-1].split("?", 1)[0] or self.location

    @property
    def backend(self) -> StoreBackend:
        return self._store

    @property
    def tree(self) -> SessionTree:
        """The session tree (``SessionTree``)."""
        return self._store.tree

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def transcript_path(self, conversation: str, agent: str) -> Path:
        """The file of a folder workspace's transcript."""
        if not isinstance(self._store, FolderStore):
            raise StoreError(f"{self.location} is a database: its transcripts are rows, not files")
        return self._store.transcript_path(conversation, agent)

    def import_session(self, session: ImportedSession, conversation: str, *, replace: bool = False) -> list[Transcript]:
        """Store an imported session as conversation ``conversation``: every path of its
        tree (the main history, the other branches, each subagent's history) in the
        session tree, the tip on the main history's end; and one transcript per agent.
        Message ids are prefixed with the conversation id, so the same file imported
        twice under two names keeps two separate trees."""
        check_id(conversation, "conversation")

        def scoped(messages: Sequence[Message]) -> tuple[Message, ...]:
            return tuple(dataclasses.replace(m, id=f"{conversation}/{m.id}") for m in messages)

        agents = [(agent.name, scoped(agent.messages)) for agent in session.agents]
        names = _agent_names(session)
        existing = {c.id for c in self.tree.conversations()}
        if conversation in existing and not replace:
            raise StoreError(f"conversation {conversation!r} is already in {self.location}; import it under another name")
        if conversation not in existing:
            self.tree.create(conversation, title=displayable(session.title))
        main = agents[0][1] if agents else ()
        paths = [main, *(scoped(branch) for branch in session.branches), *(messages for _, messages in agents[1:])]
        self.tree.add_paths(conversation, paths, tip=main[-1].id if main else None)
        saved = []
        for name, (_, messages), imported in zip(names, agents, session.agents):
            current = self.load(conversation, name)
            saved.append(self.save(conversation, name, messages, revision=current.revision, replace=True))
            self._keep_usage(conversation, name, messages, imported)
            self._keep_compactions(conversation, name, messages, imported, session.report.format)
        self._update_measured(conversation, OWNER_AGENT, harness=session.report.format, **_cost_recorded(session))
        return saved

    def _keep_compactions(self, conversation: str, agent: str, messages: Sequence[Message], imported: ImportedAgent, harness: str) -> None:
        """The harness's own compactions as the transcript's compactions (``view.harness_view``),
        oldest first, the newest in force: each one newer than the view in force is kept,
        so a sync adds only what is new and never undoes a later compaction of glyphpack's."""
        ids = [m.id for m in messages]
        current = read_view(self, conversation, agent)
        after = ids.index(current.covers) if current is not None and current.covers in ids else -1
        for start in imported.compactions:
            view = harness_view(tuple(messages), f"{conversation}/{start}", harness)
            if view is not None and ids.index(view.covers) > after:
                write_view(self, conversation, agent, view)
                after = ids.index(view.covers)
        starts = [f"{conversation}/{start}" for start in imported.compactions if f"{conversation}/{start}" in ids[1:]]
        if starts:
            self._update_measured(conversation, agent, harness_start=starts[-1])

    def harness_start(self, conversation: str, agent: str) -> str | None:
        """The id of the message the harness's newest compaction of an imported transcript
        starts its requests at (its summary, or the first message it kept), or None: a
        compaction of glyphpack's starts there too (``Session``), never from the messages
        the harness already summarized (which stay in the transcript, recallable)."""
        start = self._measured_record(conversation, agent)[1].get("harness_start")
        return start if isinstance(start, str) else None

    def harness(self, conversation: str) -> str | None:
        """The format of the session file an imported conversation came from
        (``claude-code``, ``codex``, ...), or None: not imported, or imported before it
        was kept."""
        harness = self._measured_record(conversation, OWNER_AGENT)[1].get("harness")
        return harness if isinstance(harness, str) else None

    def harness_cost(self, conversation: str) -> float | None:
        """What the harness recorded an imported conversation's requests cost, in US
        dollars, every agent's (as of the last import or sync), or None: it recorded none
        (Crush records it; Claude Code, Codex and most others do not)."""
        cost = self._measured_record(conversation, OWNER_AGENT)[1].get("harness_cost")
        return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None

    def source(self, conversation: str) -> str | None:
        """Where the session file of an imported conversation is (``sync_session``'s
        ``source``), or None: not imported, or imported before sources were kept."""
        source = self._measured_record(conversation, OWNER_AGENT)[1].get("source")
        return source if isinstance(source, str) else None

    def _update_measured(self, conversation: str, agent: str, *, only_new: bool = False, **fields: Any) -> dict[str, Any]:
        """Set ``fields`` in the transcript's measured record, the rest of it kept, in one
        step no other process interleaves with (``only_new``: only those it does not
        hold yet); returns the record as it is then."""

        def change(stored: bytes | None) -> bytes | None:
            record = _json_object(stored) or {"format": MEASURED_FORMAT}
            wanted = {key: value for key, value in fields.items() if not (only_new and key in record)}
            if all(record.get(key) == value for key, value in wanted.items()):
                return None
            return json_bytes(record | wanted)

        return _json_object(self._store.update_measured(conversation, agent, change))

    def _keep_usage(self, conversation: str, agent: str, messages: Sequence[Message], imported: ImportedAgent) -> None:
        """What the harness's last requests measured, for the session's estimate; and the
        model it called (with the window it ran with, where the file records it), as the
        workspace's setting (``settings``) unless a session that ran on this transcript
        since set one."""
        current = self._measured_record(conversation, agent)[1]
        record = dict(current) or {"format": MEASURED_FORMAT}
        if imported.usage:
            requests = [[messages[start].id, messages[end - 1].id, tokens] for start, end, tokens, *_ in imported.usage]
            # New counts replace what was learned from the old ones; what is not learned is kept.
            facts = {key: current[key] for key in _MEASURED_FACTS if key in current}
            record = {"format": MEASURED_FORMAT, "requests": requests[-MEASURED_KEPT:], **facts}
        kept = current.get("settings")
        settings: dict[str, Any] = kept if isinstance(kept, dict) else {}
        if imported.model is not None and "model" not in settings:
            settings = {**settings, "model": imported.model}
            if imported.context_window is not None:  # the window that model ran with, as the harness recorded it
                settings["context_window"] = imported.context_window
        if settings:
            record["settings"] = settings
        if record != current and len(record) > 1:
            self._store.put_measured(conversation, agent, json_bytes(record))

    def name_for(self, source: str, names: Sequence[str]) -> str:
        """The conversation a session file at ``source`` is kept in: the first of ``names``
        (``importers.registry.conversation_names``: its name, then that name with more
        of its folders) that is free, was imported from ``source``, or was imported
        before sources were kept; so two files named alike in two folders are two
        conversations, and each file finds its own again. ``StoreError`` when every
        name is another file's."""
        taken = {c.id for c in self.tree.conversations()}
        for name in names:
            if name not in taken or self.source(name) in (source, None):
                return name
        raise StoreError(f"{source}: every name it could be imported as ({', '.join(names)}) holds another file's session; "
                         "import it with --conversation")

    def sync_session(self, session: ImportedSession, conversation: str, *, source: str | None = None) -> tuple[SyncState, list[Transcript]]:
        """Keep conversation ``conversation`` in step with a session file its harness keeps
        writing: a new conversation is imported (``import_session``, state ``"new"``); one
        imported before gets what the file added appended to each agent (same ids, same
        tree: the ids are the file's, scoped by the conversation) and new branches added
        to the tree (``"appended"``); an unchanged one is left as it is (``"unchanged"``).
        A stand-in result the import made up for a call the file had not answered yet
        (``-missing-results``) gives way to what the file has now. A file whose past
        differs from what is stored raises ``StoreError`` naming the agent and the
        message, and nothing is written. ``source``: where the file is, kept with the
        conversation (``name_for`` tells files named alike apart by it)."""
        check_id(conversation, "conversation")
        if conversation not in {c.id for c in self.tree.conversations()}:
            saved = self.import_session(session, conversation)
            if source is not None:
                self._update_measured(conversation, OWNER_AGENT, source=source)
            return "new", saved

        def scoped(messages: Sequence[Message]) -> tuple[Message, ...]:
            return tuple(dataclasses.replace(m, id=f"{conversation}/{m.id}") for m in messages)

        plans = []
        for name, imported in zip(_agent_names(session), session.agents):
            messages = scoped(imported.messages)
            current = self.load(conversation, name)
            stored = current.messages
            kept = len(stored)
            while kept and stored[kept - 1].id.endswith("-missing-results") and (kept > len(messages) or messages[kept - 1] != stored[kept - 1]):
                kept -= 1  # a stand-in for a result the file has now (or may have later)
            differs = next((i for i, (old, new) in enumerate(zip(stored[:kept], messages)) if old != new), None)
            if differs is not None or len(messages) < kept:
                where = differs if differs is not None else len(messages)
                raise StoreError(
                    f"conversation {conversation!r}, agent {name!r}: the file's history differs from the stored one at message "
                    f"{where + 1} (its harness rewrote the past); nothing synced: import it under another name to keep both"
                )
            plans.append((name, messages, current, kept, imported))
        stored_ids = {node.message.id for node in self.tree.nodes(conversation)}
        branches = [path for path in (scoped(branch) for branch in session.branches) if any(m.id not in stored_ids for m in path)]
        changed = [plan for plan in plans if plan[1] != plan[2].messages]
        if source is not None:
            self._update_measured(conversation, OWNER_AGENT, source=source)
        if not changed and not branches:
            return "unchanged", []
        if branches:
            self.tree.add_paths(conversation, branches, tip=self.tree.tip(conversation))
        saved = []
        for name, messages, current, kept, imported in changed:
            saved.append(self.save(conversation, name, messages, revision=current.revision, replace=kept < len(current.messages)))
            self._keep_usage(conversation, name, messages, imported)
            self._keep_compactions(conversation, name, messages, imported, session.report.format)
        self._update_measured(conversation, OWNER_AGENT, **_cost_recorded(session))
        return "appended", saved

    def calibration(self, conversation: str, agent: str) -> dict[str, Any] | None:
        """What a session learned from its provider's counts (``save_calibration``; None:
        nothing yet), so a new process prices the next request as the old one would."""
        record = self._measured_record(conversation, agent)[1]
        if isinstance(record.get("calibration"), dict):
            return record["calibration"]
        return {"overhead": record["overhead"]} if "overhead" in record else None  # before the scale was learned

    def save_calibration(self, conversation: str, agent: str, learned: Mapping[str, Any], settings: Mapping[str, Any] | None = None) -> None:
        """Keep ``learned`` (a JSON object: ``Calibration.to_record``) beside the
        transcript, with the import's record; and ``settings``, what the session ran
        with (``settings``). Written after every answer, so not synced: all of it is
        learned again (the next answer's count, the next "too long", an import)."""
        record = self._measured_record(conversation, agent)[1] or {"format": MEASURED_FORMAT}
        extra = {"settings": dict(settings)} if settings is not None else {}
        self._store.put_measured(conversation, agent, json_bytes(record | {"calibration": dict(learned)} | extra), durable=False)

    def settings(self, conversation: str, agent: str) -> dict[str, Any]:
        """What the session that last called a model on this transcript ran with: its
        ``model``, ``context_window``, and the ``threshold`` and ``target`` it was given
        (None: the window's defaults), and ``learned_window`` when a provider's "too long"
        taught it a smaller window than it was given; {} when no session has (commands
        then need them said). A proxy's sessions record the proxy's window and threshold."""
        record = self._measured_record(conversation, agent)[1].get("settings")
        if not isinstance(record, dict):
            return {}
        kinds = {"model": str, "context_window": int, "threshold": int, "target": int, "learned_window": int}
        return {key: value for key, value in record.items() if key in kinds and isinstance(value, kinds[key]) and not isinstance(value, bool)}

    def owner(self, conversation: str) -> dict[str, str] | None:
        """Who holds ``conversation``, as ``set_owner`` kept it (a salted, keyed digest of a
        client's credentials; never the credentials), or None when no one does."""
        record = self._measured_record(conversation, OWNER_AGENT)[1].get("owner")
        if isinstance(record, dict) and all(isinstance(record.get(k), str) for k in ("salt", "digest")):
            return {"salt": record["salt"], "digest": record["digest"]}
        return None

    def set_owner(self, conversation: str, owner: Mapping[str, str]) -> None:
        """Keep who holds ``conversation`` beside its main transcript (``owner``: the
        ``salt`` and ``digest`` a proxy compares a client's credentials by)."""
        check_id(conversation, "conversation")
        self._update_measured(conversation, OWNER_AGENT, owner=dict(owner))

    def claim_owner(self, conversation: str, owner: Mapping[str, str]) -> dict[str, str]:
        """Make ``owner`` hold ``conversation`` if no one does, compared and set in one
        step (two proxies claiming a name at once: one wins); returns who holds it now."""
        check_id(conversation, "conversation")
        record = self._update_measured(conversation, OWNER_AGENT, only_new=True, owner=dict(owner)).get("owner")
        return dict(record) if isinstance(record, dict) else dict(owner)

    def _measured_record(self, conversation: str, agent: str) -> tuple[str, dict[str, Any]]:
        """Where the measured-tokens record is kept, and the record as a JSON object ({}
        when absent or not one: it only ever holds what can be learned again)."""
        found = self._store.measured(conversation, agent)
        return ("", {}) if found is None else (found[0], _json_object(found[1]))

    def measured(self, conversation: str, agent: str) -> list[tuple[tuple[Message, ...], int]]:
        """The messages each of an imported session's last requests carried (up to
        ``MEASURED_KEPT``, oldest first) with the input tokens its provider counted for
        it (the file's usage records), those whose messages are still in the transcript."""
        place, record = self._measured_record(conversation, agent)
        requests = record.get(
            "requests", [[record["first"], record.get("last"), record.get("tokens")]] if "first" in record else []
        )
        try:
            spans = [(str(first), str(last), int(tokens)) for first, last, tokens in requests]
        except (ValueError, TypeError) as exc:
            raise StoreError(f"{place} is damaged ({exc}); delete it") from None
        messages = self.load(conversation, agent).messages
        where = {m.id: n for n, m in enumerate(messages)}
        return [
            (messages[where[first] : where[last] + 1], tokens)
            for first, last, tokens in spans
            if first in where and last in where and where[first] <= where[last] and tokens > 0
        ]

    def reconcile(self, conversation: str, agent: str) -> int:
        """Bring the tree to the stored transcript (after a crash between the two
        writes of a save); returns the messages it added. Writes nothing when they agree.
        Under the save's lock: a save by another process between reading the transcript
        and moving the tree would otherwise be undone in the tree."""

        def behind() -> StoredTranscript | None:
            stored = self._store.read(conversation, agent)
            if stored is None:
                return None
            tip = stored.messages[-1].id if stored.messages else None
            return None if self.tree.agent_tip(conversation, agent) == tip else stored

        if behind() is None:  # the usual case, checked without a lock (a read-only workspace takes none)
            return 0
        with self._store.exclusive(conversation, agent):
            stored = behind()
            return 0 if stored is None else self.tree.record(conversation, agent, stored.messages)

    def transcripts(self) -> list[tuple[str, str]]:
        """Every stored (conversation, agent) pair (compaction views are not agents)."""
        return self._store.transcripts()

    # ---------------------------------------------------------------- reading

    def load(
        self,
        conversation: str,
        agent: str,
        *,
        keep: int | None = None,
        budget: int | None = None,
        estimator: TextEstimator = DEFAULT_ESTIMATOR,
    ) -> Transcript:
        """The stored transcript, trimmed to its newest messages when ``keep``
        (messages) or ``budget`` (estimated tokens) is given. Never writes."""
        return _loaded(self._store.read(conversation, agent), conversation, agent, keep, budget, estimator)

    # ---------------------------------------------------------------- writing

    def save(
        self,
        conversation: str,
        agent: str,
        messages: Sequence[Message],
        *,
        revision: int,
        error: str | None = None,
        checkpoints: Mapping[str, str | None] | None = None,
        replace: bool = False,
    ) -> Transcript:
        """Store ``messages`` as the transcript, at a turn boundary only.

        Args:
            revision: the revision the caller's history is based on (from ``load``;
                0 for a new transcript). If the stored revision differs, raises
                ``ConflictError`` and writes nothing.
            error: mark the last turn as failed, with why (``state == "unanswered"``).
            checkpoints: the marks to store; default: the stored ones whose target
                is still in ``messages``.
            replace: allow ``messages`` not to begin with the stored history (a view
                loaded with ``keep`` or ``budget``, or an edited history), which drops
                or rewrites stored messages. Without it such a save raises
                ``StoreError`` and writes nothing.

        Returns:
            the transcript as stored, at ``revision + 1``.
        """
        _refuse_read_only(self._store)
        messages = _validated(messages)
        where = self._store.where(conversation, agent)

        def prepare(stored: StoredTranscript | None) -> StoredTranscript:
            stored = _compare_and_swap(where, stored, revision, messages, replace)
            return StoredTranscript(revision + 1, messages, _kept_checkpoints(stored, messages, checkpoints), error)

        saved = self._store.save(conversation, agent, prepare)
        return Transcript(conversation, agent, messages, saved.revision, _state(messages, error), error, dict(saved.checkpoints))

    def checkpoint(self, conversation: str, agent: str, name: str) -> Transcript:
        """Mark the transcript's current end as checkpoint ``name`` (a clean turn boundary only)."""
        current = self.load(conversation, agent)
        validate_history(current.messages, allow_pending=False)
        target = current.messages[-1].id if current.messages else None
        marks = dict(current.checkpoints) | {name: target}
        saved = self.save(
            conversation, agent, current.messages, revision=current.revision, error=current.error, checkpoints=marks
        )
        self.tree.label(conversation, name, target)  # in the tree too: it outlives a branch away from it
        return saved

    def _labels(self, conversation: str, current: Transcript) -> dict[str, str | None]:
        """The conversation's checkpoints as tree labels, with any the transcript holds
        that the tree does not (a transcript written before labels) labelled first."""
        tree = self.tree
        labels = tree.labels(conversation)
        for name, target in current.checkpoints.items():
            if name not in labels:
                tree.label(conversation, name, target)
                labels[name] = target
        return labels

    @staticmethod
    def _on_path(labels: Mapping[str, str | None], path: Sequence[Message]) -> dict[str, str | None]:
        ids = {m.id for m in path}
        return {name: target for name, target in labels.items() if target is None or target in ids}

    def rewind(self, conversation: str, agent: str, name: str, digest: str) -> Transcript:
        """Return to checkpoint ``name`` and append ``digest`` (what was explored since)
        as a user message. Checkpoints whose target is cut off go with it."""
        current = self.load(conversation, agent)
        labels = self._labels(conversation, current)
        if name not in labels:
            known = ", ".join(sorted(labels)) or "none"
            raise StoreError(f"no checkpoint {name!r} in {conversation}/{agent} (checkpoints: {known})")
        # The checkpoint's path from the tree: it may be on a branch this agent left.
        kept = (*self.tree.path_to(labels[name]), Message("user", (Text(f"[rewound to checkpoint {name!r}] {digest}"),)))
        return self.save(
            conversation, agent, kept, revision=current.revision, checkpoints=self._on_path(labels, kept), replace=True
        )

    def branch(self, conversation: str, agent: str, message_id: str, *, revision: int | None = None) -> Transcript:
        """Make the path to ``message_id`` (an id or unique prefix of one in the
        conversation's tree, at a turn boundary) ``agent``'s history: the transcript and
        the agent's tip move together; the path left stays in the tree."""
        tree = self.tree
        target = tree.find(conversation, message_id)
        path = tree.path_to(target)
        if path and path[-1].tool_calls:
            raise StoreError(f"message {message_id!r} has tool calls without results: branch to a turn boundary"
                             + _nearest_boundaries(tree, path))
        loaded = self.load(conversation, agent)
        labels = self._on_path(self._labels(conversation, loaded), path)  # a checkpoint on the path comes back
        current = revision if revision is not None else loaded.revision
        return self.save(conversation, agent, path, revision=current, checkpoints=labels, replace=True)

    def delete(self, conversation: str) -> None:
        """Delete ``conversation``: its transcripts, compactions and records, then its
        tree (every message, tip and label). Conversations forked from it keep their own
        copies. ``StoreError`` when there is no such conversation."""
        if conversation not in {c.id for c in self.tree.conversations()} and not any(c == conversation for c, _ in self.transcripts()):
            raise StoreError(f"no conversation {conversation!r} in {self.location}")
        self._store.delete(conversation)
        self.tree.delete(conversation)

    def fork(self, conversation: str, agent: str, *, at: str | None = None, new_conversation: str | None = None) -> Transcript:
        """Copy ``agent``'s history (to ``at``, an id or unique prefix; default: its tip)
        into a new conversation with new ids, with its own transcript; the original is
        untouched. Returns the new transcript (its ``conversation`` is the new id)."""
        tree = self.tree
        point = tree.find(conversation, at) if at is not None else tree.agent_tip(conversation, agent) or tree.tip(conversation)
        self._labels(conversation, self.load(conversation, agent))
        pending = pending_calls(tree.path_to(point))
        if pending:  # checked before anything is written: a refused fork leaves nothing behind
            raise HistoryError(
                f"cannot fork {conversation!r} at {point!r}: it is mid-turn (calls {', '.join(pending)} have no results there); "
                "fork at the message with their results, or before the call"
            )
        new = tree.fork(conversation, point, new_conversation=new_conversation)
        copied = self.save(new, agent, tree.path(new), revision=0, checkpoints=tree.labels(new))
        # The compaction that stands for the forked path comes along, under the new ids:
        # the fork's next request is the one the conversation would have sent there.
        original = tree.path_to(point)
        carried = view_for(self, conversation, agent, original)
        renamed = {o.id: n.id for o, n in zip(original, copied.messages)}
        if carried is not None:
            write_view(self, new, agent, renamed_view(carried, renamed))
        # What sessions learned and ran with comes along: the fork's next session prices
        # and compacts as the conversation's would have (no --model asked again).
        record = self._measured_record(conversation, agent)[1]
        learned = {key: record[key] for key in ("settings", "calibration") if isinstance(record.get(key), dict)}
        start = self.harness_start(conversation, agent)
        if start in renamed:  # the fork's compactions start where the harness's did
            learned["harness_start"] = renamed[start]
        if learned:
            self._update_measured(new, agent, **learned)
        return copied
