"""Which stored history a proxied request continues: digests and the proxy's index.

A client behind the proxy sends its whole history with every request and usually names
no conversation. The proxy recognizes the conversation by content: a rolling digest over
the history's messages (role and blocks; thinking and blocks no API sends back are left
out, since clients drop them), one digest per stored history's end (``HistoryIndex``,
and the store's index for the other proxies of a fleet). The longest stored history that
the request begins with, among those the same client holds, is the one it continues.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import operator
import re
import secrets
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .._errors import HistoryError
from .._history.codec import json_text
from .._history.messages import Message, Opaque, RedactedThinking, Text, Thinking, ToolCall, ToolResult
from .._history.recall import RECALL_TOOL
from .._history.store import Workspace
from .._types import Api
from .._wire import provider_api
from .._wire.anthropic import from_anthropic_message
from .._wire.gemini import from_rest
from .identity import ANONYMOUS, BadRequest, Client
from .rounds import UNANSWERED

Json = dict[str, Any]

#: Blocks a client may leave out when it sends a history back.
_UNKEYED = (Thinking, RedactedThinking, Opaque)


_SEED = hashlib.sha256(b"glyphpack proxy history").digest()


#: How deep a request body may nest for the proxy to record it: deeper ones (no real
#: tool schema or block comes near) go to the provider unrecorded, for it to judge.
MAX_NESTING = 200


def digests(messages: Sequence[Message], after: Sequence[bytes] = ()) -> list[bytes]:
    """The rolling digest of ``messages[:1]``, ``messages[:2]``, ... (one per message),
    continuing ``after`` (the digests of the messages before these).

    Each message counts by its role and its blocks' JSON, without thinking and opaque
    blocks, adjacent text blocks as one (an answer the proxy continued after a recall
    reaches a Chat client as one string); ids never count (a history sent back gets
    new ones)."""
    out: list[bytes] = list(after)
    digest = after[-1] if after else _SEED
    for message in messages:
        blocks: list[Json] = []
        for block in message.content:
            if isinstance(block, _UNKEYED):
                continue
            if isinstance(block, Text) and blocks and blocks[-1]["type"] == "text":
                blocks[-1] = {"type": "text", "text": blocks[-1]["text"] + block.text}
            else:
                blocks.append(block.to_json())
        digest = hashlib.sha256(digest + json_text([message.role, blocks]).encode("utf-8")).digest()
        out.append(digest)
    return out


@dataclasses.dataclass(frozen=True)
class Shown:
    """A stored history as its client holds it: ``messages``, and per message the
    number of stored messages up to its end (``ends``)."""

    messages: tuple[Message, ...]
    ends: tuple[int, ...]


def client_view(messages: Sequence[Message], start: int = 0, recall_ids: frozenset[str] | None = None) -> Shown:
    """What the client holds of ``messages[start:]`` (a stored history): the
    ``glyphpack_recall`` calls the proxy answered, and their results, left out (the
    client never saw them); a message left with nothing dropped; an answer the proxy
    went on to after a recall joined to the answer before it (the client got them as
    one), and a turn whose answer was recall calls alone as ``UNANSWERED`` (what the
    client got instead). ``recall_ids``: those calls' ids (default:
    ``proxy_recall_ids(messages)``)."""
    if recall_ids is None:
        recall_ids = proxy_recall_ids(messages)
    shown: list[Message] = []
    ends: list[int] = []
    dropped = False

    recalled = False  # the proxy answered a recall in the turn so far

    def unanswered(end: int) -> None:
        # A turn whose answer, its recall calls left out, says and calls nothing (thinking
        # at most): the client got ``UNANSWERED`` after it (``rounds.joined``).
        if not recalled:
            return
        if shown and shown[-1].role == "assistant":
            if not any(isinstance(b, (Text, ToolCall)) for b in shown[-1].content):
                shown[-1] = shown[-1].with_content((*shown[-1].content, Text(UNANSWERED)))
        else:
            shown.append(Message("assistant", (Text(UNANSWERED),), id=f"{messages[end - 1].id}-unanswered"))
            ends.append(end)

    for number in range(start, len(messages)):
        message = messages[number]
        content = tuple(
            b for b in message.content
            if not (isinstance(b, ToolCall) and b.id in recall_ids) and not (isinstance(b, ToolResult) and b.call_id in recall_ids)
        )
        recalled |= len(content) < len(message.content) and message.role == "assistant"
        if not content and message.content:
            dropped = True  # a recall round's call or answer alone
            continue
        if message.role != "assistant":
            unanswered(number)
            recalled = False
        if dropped and message.role == "assistant" and shown and shown[-1].role == "assistant":
            shown[-1] = shown[-1].with_content(shown[-1].content + content)
            ends[-1] = number + 1
        else:
            shown.append(message if len(content) == len(message.content) else message.with_content(content))
            ends.append(number + 1)
        dropped = False
    unanswered(len(messages))
    return Shown(tuple(shown), tuple(ends))


#: How the ids the proxy gives the ``glyphpack_recall`` calls it answers begin: the calls
#: a client never saw (a client's own tool of that name keeps its ids) ...
RECALL_ID_PREFIX = "glyphpack_"


#: ... then a nonce of this many hex digits and an underscore, so a client's own ids
#: (a glyphpack session behind the proxy calls its own glyphpack_recall) are never taken
#: for the proxy's: a client whose ids began "glyphpack_" started a new conversation on
#: every request.
RECALL_NONCE_DIGITS = 12


_PROXY_RECALL_ID = re.compile(rf"{RECALL_ID_PREFIX}[0-9a-f]{{{RECALL_NONCE_DIGITS}}}_")


def recall_id_prefix() -> str:
    """A fresh prefix for the ids of the recall calls of one answer."""
    return f"{RECALL_ID_PREFIX}{secrets.token_hex(RECALL_NONCE_DIGITS // 2)}_"


def is_proxy_recall(call: ToolCall) -> bool:
    """Whether ``call`` is a ``glyphpack_recall`` call the proxy answered (its id as
    ``recall_id_prefix`` began it)."""
    return call.name == RECALL_TOOL and _PROXY_RECALL_ID.match(call.id) is not None


def proxy_recall_ids(messages: Sequence[Message]) -> frozenset[str]:
    """The ids of the ``glyphpack_recall`` calls in ``messages`` the proxy answered."""
    return frozenset(c.id for m in messages for c in m.tool_calls if is_proxy_recall(c))


@dataclasses.dataclass(frozen=True)
class Chain:
    """A stored history as its client holds it, digested: per message shown, its
    rolling digest, thinking mark, stored end and role; with how many stored messages
    it read and the last one's id (what a longer history is checked against)."""

    stored: int
    last_id: str
    digests: tuple[bytes, ...]
    marks: tuple[bytes | None, ...]
    ends: tuple[int, ...]
    roles: tuple[str, ...]
    #: the ids of the recall calls the proxy answered among the ``stored`` messages
    recall_ids: frozenset[str] = frozenset()


def thinking_marks(messages: Sequence[Message]) -> list[bytes | None]:
    """Per message, a digest of its thinking blocks (None: it carries none). Digests
    leave thinking out, since clients drop it; where both histories still carry it, it
    must be the same for them to be one history."""
    marks: list[bytes | None] = []
    for message in messages:
        thinking = [b.to_json() for b in message.content if isinstance(b, (Thinking, RedactedThinking))]
        marks.append(hashlib.sha256(json_text(thinking).encode("utf-8")).digest() if thinking else None)
    return marks


def history_of(api: Api, body: Json) -> list[Message]:
    """The neutral history a request body carries (its system prompt first);
    ``BadRequest`` when the body has no history list."""
    build = provider_api(api)
    items = body.get(build.request_key)
    if api == "openai-responses" and isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise BadRequest(f"{build.request_key}: expected a list of objects, got {type(items).__name__}")
    if api == "gemini":  # the REST wire: camelCase, base64
        items = from_rest(items)
    return build.from_wire(items, _system_text(api, body))


def _system_text(api: Api, body: Json) -> str | None:
    if api == "gemini":
        instruction = body.get("systemInstruction", body.get("system_instruction"))
        if isinstance(instruction, str):
            return instruction or None
        parts = instruction.get("parts") if isinstance(instruction, dict) else None
        return "\n\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)) or None if isinstance(parts, list) else None
    system = body.get("system") if api == "anthropic" else body.get("instructions") if api == "openai-responses" else None
    if isinstance(system, list):
        return "\n\n".join(b.get("text", "") for b in system if isinstance(b, dict)) or None
    return system if isinstance(system, str) and system else None


#: A stored history: (conversation, agent).
Key = tuple[str, str]


#: Messages one turn adds to the history it continues (the answer, then the results or
#: the user's words): a match here that leaves more new asks the store's index too.
TURN_MESSAGES = 2
#: How many of a request's last messages may be new to the history it continues, for
#: a lookup in the store's index (a turn adds the answer, its results and the user's words).
STORE_LOOKUP = 64


def nesting(value: object, limit: int = MAX_NESTING) -> int:
    """How deep ``value`` nests (a scalar: 0), counted without recursion and only to
    just past ``limit``."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, (dict, list)):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((child, depth) for child in (current.values() if isinstance(current, dict) else current))
    return deepest


def _marks_agree(mine: bytes | None, theirs: bytes | None) -> bool:
    """Whether two messages' thinking marks say one message: either side may have
    dropped its thinking, but where both carry it, it is the same."""
    return mine is None or theirs is None or mine == theirs


def _common(stored: tuple[Sequence[bytes], Sequence[bytes | None]], history: tuple[Sequence[bytes], Sequence[bytes | None]]) -> int:
    """How many leading messages two histories share, by their (digests, thinking
    marks): a message whose thinking both carry and differ in is where they part."""
    shared = min(len(stored[0]), len(history[0]))
    if all(map(operator.eq, stored[0][:shared], history[0])) and all(map(operator.eq, stored[1][:shared], history[1])):
        return shared  # the same digests and marks (compared in C): the common case, a history that grew
    common = 0
    for mine, my_mark, theirs, their_mark in zip(*stored, *history):
        if mine != theirs or not _marks_agree(my_mark, their_mark):
            break
        common += 1
    return common


def _read_request(api: Api, body: object) -> tuple[Json, list[Message] | HistoryError]:
    """(the body, its history or why glyphpack cannot read it); ``BadRequest`` when the
    body is not an object naming a model."""
    if not isinstance(body, dict):
        raise BadRequest(f"the request body must be a JSON object, not {type(body).__name__}")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise BadRequest("model: a model id is required")
    depth = nesting(body)
    if depth > MAX_NESTING:
        return body, HistoryError(f"the body is nested {depth}+ levels deep; glyphpack records at most {MAX_NESTING}")
    try:
        return body, history_of(api, body)
    except HistoryError as exc:
        return body, exc


#: A request as read: its body, its history (or why it cannot be recorded), and the
#: history's (digests, thinking marks) when read.
Read = tuple[Json, "list[Message] | HistoryError", "tuple[list[bytes], list[bytes | None]] | None"]


@dataclasses.dataclass(frozen=True, eq=False)
class _Remembered:
    """An Anthropic request read in full: what the next request of its client reuses
    where its messages are the same."""

    system: str | None
    others: Json  # the body's fields but its messages (the tools, the system prompt...)
    others_depth: int  # how deep they nest
    items: list[Json]
    per_item: list[list[Message]]  # each wire message's neutral messages
    depths: list[int]  # how deep each wire message nests
    digests: list[bytes]  # per neutral message, the system message's first
    marks: list[bytes | None]


class RequestReader:
    """Reads proxied requests, and for the Anthropic API each one in proportion to what
    is new: a client resends its whole history every turn, so the messages a client's
    recent request began with (compared as parsed JSON, in C) are not converted, nested,
    digested or marked again; only the rest is. The same results as reading the request
    whole (a property test says so). Thread-safe; a few requests kept per client."""

    def __init__(self, per_client: int = 4):
        self.per_client = per_client
        self._lock = threading.Lock()
        self._recent: dict[bytes, list[_Remembered]] = {}

    def read(self, api: Api, body: object, owner: bytes = b"") -> Read:
        """(the body, its history or the ``HistoryError`` that keeps it from being
        recorded, its digests and marks); ``BadRequest`` as ``_read_request``."""
        if api != "anthropic" or not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            request, history = _read_request(api, body)
            return request, history, None if isinstance(history, HistoryError) else (digests(history), thinking_marks(history))
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise BadRequest("model: a model id is required")
        items = body["messages"]
        system = _system_text(api, body)
        before, reused = self._best(owner, system, items)
        # Those equal to a kept request's were objects then.
        if not all(isinstance(i, dict) for i in items[reused:]):
            raise BadRequest(f"messages: expected a list of objects, got {type(items).__name__}")
        others = {k: v for k, v in body.items() if k != "messages"}
        rest = before.others_depth if before is not None and before.others == others else nesting(others)  # a client's tools rarely change
        try:
            fresh = (nesting(i, MAX_NESTING - 2) for i in items[reused:])  # each message is 2 levels down
            depths = [*(before.depths[:reused] if before else ()), *fresh]
            depth = max(rest, 2 + max(depths, default=-1))
            if depth > MAX_NESTING:
                return body, HistoryError(f"the body is nested {depth}+ levels deep; glyphpack records at most {MAX_NESTING}"), None
            per_item = [*(before.per_item[:reused] if before else ()), *(
                from_anthropic_message(item, index) for index, item in enumerate(items[reused:], start=reused)
            )]
        except HistoryError as exc:
            return body, exc, None
        head = [Message("system", (Text(system),))] if system else []
        kept = len(head) + sum(map(len, per_item[:reused]))
        messages = [*head, *itertools.chain.from_iterable(per_item)]
        if before is not None and reused:
            chain = (digests(messages[kept:], before.digests[:kept]), [*before.marks[:kept], *thinking_marks(messages[kept:])])
        else:
            chain = (digests(messages), thinking_marks(messages))
        self._keep(owner, _Remembered(system, others, rest, list(items), per_item, depths, chain[0], chain[1]))
        return body, messages, chain

    def _best(self, owner: bytes, system: str | None, items: list[Json]) -> tuple[_Remembered | None, int]:
        """The kept request of ``owner`` with ``system`` whose messages ``items`` begin
        with longest, and how many (None, 0: none shares the first)."""
        with self._lock:
            kept = list(self._recent.get(owner, ()))
        shared = [(_same_prefix(r.items, items), -n, r) for n, r in enumerate(kept) if r.system == system and r.items and items and r.items[0] == items[0]]
        if not shared:
            return None, 0
        count, _, best = max(shared)
        return best, count

    def _keep(self, owner: bytes, read: _Remembered) -> None:
        with self._lock:
            kept = [r for r in self._recent.get(owner, ()) if r.items[:1] != read.items[:1] or r.system != read.system]
            self._recent[owner] = [read, *kept][: self.per_client]
            while len(self._recent) > 64:  # clients seen: the oldest forgotten (each keeps parsed requests: memory)
                del self._recent[next(iter(self._recent))]


def _same_prefix(before: list[Json], items: list[Json]) -> int:
    """How many leading wire messages two requests share (compared as parsed JSON): the
    same objects, as ``BodyParser`` reuses them, counted in C, then any equal ones."""
    count = len(list(itertools.takewhile(bool, map(operator.is_, before, items))))
    for old, new in zip(before[count:], items[count:]):
        if old != new:
            break
        count += 1
    return count


class HistoryIndex:
    """The stored histories' ends, digested as their clients hold them, and who owns each
    conversation: what a request is matched against. Thread-safe (its own lock, never held
    for long; ``lock_of`` gives a history's own lock, the recorder's, held while it is read
    from the store)."""

    def __init__(self, workspace: Workspace, lock_of: Callable[[Key], threading.Lock], moved: Callable[[Key], None] = lambda key: None):
        """``moved``: called with a history another proxy saved since this one read it
        (under its lock): what this process holds of it is stale."""
        self.workspace = workspace
        self._lock_of = lock_of
        self._on_moved = moved
        # The digest of each history's current end (and of that end before its last
        # answer) -> the histories that end so (several clients may begin alike); a
        # rolling digest names its length too. Only the current ends: a new client that
        # begins like an old conversation's past is a conversation of its own.
        self._index: dict[bytes, set[Key]] = {}
        self._ends: dict[Key, list[bytes]] = {}
        # The ends as the store's index has them (a history held unsaved is ahead of it).
        self._stored_ends: dict[Key, list[bytes]] = {}
        # history -> its client view digested (``Chain``): a long history is digested
        # once, then a message at a time.
        self._chains: dict[Key, Chain] = {}
        # conversation -> its owner record (None: no one's); (conversation, client) -> owns.
        self._owners: dict[str, dict[str, str] | None] = {}
        self._owned: dict[tuple[str, bytes], bool] = {}
        self._lock = threading.Lock()

    def owns(self, client: Client, conversation: str) -> bool:
        """Whether ``client`` holds ``conversation`` (a conversation no one holds, stored
        before owners were kept, is continued by no one: a new one starts)."""
        with self._lock:
            known = self._owned.get((conversation, client.secret))
            if known is not None:
                return known
            cached = conversation in self._owners
            record = self._owners.get(conversation)
        if not cached:
            record = self.workspace.owner(conversation)
        owns = client.owns(record)
        with self._lock:
            self._owners[conversation] = record
            self._owned[(conversation, client.secret)] = owns
        return owns

    def claim(self, client: Client, conversation: str) -> bool:
        """Make ``client`` the owner of ``conversation`` if no one is (compared and set in
        the store: of two proxies claiming one name at once, one wins); whether it is."""
        record = self.workspace.claim_owner(conversation, client.owner_record())
        owns = client.owns(record)
        with self._lock:
            self._owners[conversation] = record
            self._owned[(conversation, client.secret)] = owns
        return owns

    def index_workspace(self) -> int:
        """Index every stored history; how many. The store's index gets them too, in one
        transaction (a workspace recorded before it kept one is then found by every proxy)."""
        stored = self.workspace.transcripts()
        ends = {key: self.remember(key, self.workspace.load(*key).messages, persist=False) for key in stored}
        self.workspace.tree.set_ends({key: found for key, found in ends.items() if found})
        return len(stored)

    def chain(self, key: Key, messages: Sequence[Message]) -> Chain:
        """``key``'s stored history ``messages`` as its client holds it, digested, from
        what was remembered: only the messages after the last shown one that no later
        answer can join (not an answer) are read again."""
        with self._lock:
            known = self._chains.get(key)
        keep = 0
        if known is not None and known.stored <= len(messages) and known.stored and messages[known.stored - 1].id == known.last_id:
            keep = next((n + 1 for n in range(len(known.roles) - 1, -1, -1) if known.roles[n] != "assistant"), 0)
        else:
            known = None
        start = known.ends[keep - 1] if known is not None and keep else 0
        # The answered recalls: those of the messages read before, and of the new ones.
        recall_ids = known.recall_ids | proxy_recall_ids(messages[known.stored :]) if known is not None else proxy_recall_ids(messages)
        shown = client_view(messages, start, recall_ids)
        before = (known.digests[:keep], known.marks[:keep], known.ends[:keep], known.roles[:keep]) if known is not None else ((), (), (), ())
        return Chain(
            stored=len(messages),
            last_id=messages[-1].id if messages else "",
            digests=tuple(digests(shown.messages, before[0])),
            marks=(*before[1], *thinking_marks(shown.messages)),
            ends=(*before[2], *shown.ends),
            roles=(*before[3], *(m.role for m in shown.messages)),
            recall_ids=recall_ids,
        )

    def remember(self, key: Key, messages: Sequence[Message], *, persist: bool = True, saved: bool = True) -> tuple[bytes, ...]:
        """Index the end of ``messages`` (as the client holds them), and the end before a
        last answer (a client that retries the request, or sends the answer back changed,
        continues from there); returns those ends. ``saved``: ``messages`` are the stored
        history (else held, not yet saved: only this process matches them); with
        ``persist`` as well, the store's index gets them, so another proxy on the
        workspace finds the history (without: they were read from the store)."""
        chain = self.chain(key, messages)
        ends = chain.digests[-2:] if len(chain.digests) > 1 and chain.roles[-1] == "assistant" else chain.digests[-1:]
        if saved:
            with self._lock:
                changed = self._stored_ends.get(key) != list(ends)
            if persist and changed:
                self.workspace.tree.set_ends({key: ends})
            with self._lock:
                self._stored_ends[key] = list(ends)
        with self._lock:
            for stale in self._ends.get(key, ()):
                holders = self._index.get(stale)
                if holders is not None:
                    holders.discard(key)
                    if not holders:
                        del self._index[stale]
            self._ends[key] = list(ends)
            for end in ends:
                self._index.setdefault(end, set()).add(key)
            if messages:
                self._chains[key] = chain
        return tuple(ends)

    def match(self, chain: Sequence[bytes], client: Client = ANONYMOUS, marks: Sequence[bytes | None] = ()) -> tuple[Key | None, int]:
        """(the stored history of ``client``'s that a history with the digests ``chain``
        (and thinking ``marks``) continues, how many of its messages are stored there),
        or (None, 0). With a conversation named, only that conversation's histories.
        Nothing found here, or only a match that leaves more than a turn's messages new,
        the store's index is asked for the chain's last ``STORE_LOOKUP`` digests (another
        proxy on the workspace may have recorded a longer one), and what it names is read
        and indexed here first."""
        found = self._match(chain, client, marks)
        if found[0] is not None and self._moved(found[0]):
            # Another proxy on the workspace moved that history since this one read it:
            # matched against what is stored now, never what this proxy last saw (a stale
            # end made one window's request rewind another window's transcript).
            self._refresh(found[0])
            found = self._match(chain, client, marks)
        if (found[0] is not None and found[1] >= len(chain) - TURN_MESSAGES) or not chain:
            return found
        # Nothing here, or only a history this request left long ago (a retry goes back one
        # answer, a turn adds a few messages): another proxy may hold a longer one.
        stored = [key for key in self.workspace.tree.ending_with(chain[-STORE_LOOKUP:])
                  if client.conversation is None or key[0] == client.conversation]
        for key in stored:
            with self._lock_of(key):
                self.remember(key, self.workspace.load(*key).messages, persist=False)
        return self._match(chain, client, marks) if stored else found

    def _moved(self, key: Key) -> bool:
        """Whether ``key``'s history ends elsewhere in the store than this proxy indexed it."""
        with self._lock:
            known = set(self._stored_ends.get(key, ()))
        stored = self.workspace.tree.ends_of(*key)
        return bool(stored) and stored != known

    def _refresh(self, key: Key) -> None:
        """Index ``key``'s history as it is stored now (another proxy saved it since)."""
        with self._lock_of(key):
            self._on_moved(key)
            self.remember(key, self.workspace.load(*key).messages, persist=False)

    def _match(self, chain: Sequence[bytes], client: Client, marks: Sequence[bytes | None]) -> tuple[Key | None, int]:
        for length in range(len(chain), 0, -1):
            with self._lock:
                candidates = sorted(self._index.get(chain[length - 1], ()))
            for key in candidates:
                if client.conversation is not None and key[0] != client.conversation:
                    continue
                if self.owns(client, key[0]) and self._same_thinking(key, marks, length):
                    return key, length
        return None, 0

    def _same_thinking(self, key: Key, marks: Sequence[bytes | None], length: int) -> bool:
        """Whether no message of the first ``length`` carries thinking other than the
        stored history's (a client may drop thinking, never change it)."""
        with self._lock:
            known = self._chains.get(key)
        stored = known.marks if known is not None else ()
        if all(map(operator.eq, stored[:length], marks[:length])):
            return True  # the same marks (compared in C): nothing dropped, nothing changed
        return all(_marks_agree(mine, theirs) for mine, theirs in zip(stored[:length], marks[:length]))
