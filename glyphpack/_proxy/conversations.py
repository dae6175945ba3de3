"""Which stored conversation a proxied request continues, and what it becomes upstream.

A client behind the proxy sends its whole history with every request and usually
names no conversation. The proxy recognizes the conversation by content: a rolling
digest over the history's messages (role and blocks; thinking and blocks no API sends
back are left out, since clients drop them), one digest per stored history's end. The
longest stored history that the request begins with, among those the same client holds,
is the one it continues; its new messages are appended and saved (a turn boundary: the
request ends on the user's message or the tool results). A request that continues
nothing starts a new conversation.

A conversation belongs to the client that started it: a ``Client`` is a digest of the
request's credentials (API key headers, a ``key`` query parameter), kept in memory; the
workspace keeps a salted, keyed digest of it per conversation (``Workspace.owner``),
never the credentials. Two clients with the same opening, or whose histories differ only
in thinking, never share a conversation, a session, a retry or a subagent. A client may
also name its conversation (``CONVERSATION_HEADER``).

What goes upstream is the client's own body, untouched, until a compaction is in force;
from then on its history is the session's view (the persisted compaction, then the
messages after it), with the client's system prompt, tools and every other field as the
client sent them. The ``Session`` does the compacting, exactly as in a harness's loop.

Nothing here speaks HTTP (``server`` does): a request body in, the body to forward out.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import hashlib
import hmac
import re
import secrets
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._compaction.recovery import parse_overflow
from .._compaction.summarize import Summarizer
from .._errors import CompactionError, ConflictError, GlyphpackError, HistoryError, StoreError
from .._history.apis import provider_api
from .._history.apis.gemini import from_rest, to_rest
from .._history.codec import json_text
from .._history.ids import check_id, unique_name
from .._history.messages import Message, Opaque, RedactedThinking, Text, Thinking, ToolCall, ToolResult
from .._history.recall import RECALL_TOOL, recall_tool
from .._history.store import Workspace
from .._session.session import RequestReport, Session
from .._types import Api
from .log import without_values
from .rounds import UNANSWERED, marked

Json = dict[str, Any]

#: The agent name proxied conversations are stored under.
AGENT = "main"
#: Tools whose call starts a subagent with its own history (Claude Code's), and the
#: argument that history begins with.
SUBAGENT_TOOLS = ("Agent", "Task")
#: Sessions kept open between requests (the most recently used).
OPEN_SESSIONS = 64
#: Anthropic refuses a request with more prompt-cache breakpoints than this.
ANTHROPIC_CACHE_MARKS = 4
#: How deep a request body may nest for the proxy to record it: deeper ones (no real
#: tool schema or block comes near) go to the provider unrecorded, for it to judge.
MAX_NESTING = 200
#: Upstream rounds one client request may take, each after the model called only
#: ``glyphpack_recall``; the last asks for an answer without tool calls (a recall
#: called anyway goes unanswered, and the client gets the answer without it).
RECALL_ROUNDS = 8
#: Blocks a client may leave out when it sends a history back.
_UNKEYED = (Thinking, RedactedThinking, Opaque)
_SEED = hashlib.sha256(b"glyphpack proxy history").digest()


#: The header a client names its conversation with (optional): the request then
#: continues that conversation (when the same client holds it) or starts it.
CONVERSATION_HEADER = "x-glyphpack-conversation"
#: Request headers that carry a client's credentials, and the query parameter (Gemini's).
#: The provider's own, then the per-user keys of the gateways a team puts in front of one
#: upstream key (LiteLLM, Portkey, Cloudflare AI Gateway, Azure API Management): users told
#: apart only by those were one client.
CREDENTIAL_HEADERS = (
    "x-api-key", "authorization", "api-key", "x-goog-api-key",
    "x-litellm-api-key", "x-portkey-api-key", "cf-aig-authorization", "ocp-apim-subscription-key",
)
CREDENTIAL_QUERY = "key"
#: A key the proxy's operator handed a person (``ClientKeys``): with it, that person is
#: the client, whatever credentials go upstream (a subscription's OAuth token that is
#: refreshed mid-session stays one client). Never forwarded.
CLIENT_KEY_HEADER = "x-glyphpack-client-key"
#: How a client key begins (``glyphpack proxy-key`` makes them).
CLIENT_KEY_PREFIX = "gpk_"
#: Hex digits of the tag that scopes a named conversation to its client, and the longest
#: name a client may give (the tagged id stays within a workspace id's 128 characters).
SCOPE_DIGITS = 12
MAX_NAME = 128 - SCOPE_DIGITS - 1


class BadRequest(GlyphpackError):
    """A request the proxy cannot take: answered in the API's error shape with ``status``
    (400: unreadable; 403: a conversation another client holds), never forwarded."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclasses.dataclass(frozen=True)
class Client:
    """Who sent a request: a digest of its credentials (in memory only, never shown) and
    the conversation it names, if any. Requests without credentials are one anonymous
    client."""

    secret: bytes = dataclasses.field(repr=False)
    conversation: str | None = None

    @classmethod
    def of(
        cls, headers: Mapping[str, str], query: Mapping[str, str] | None = None, conversation: str | None = None, identity: Sequence[str] = (),
        keys: ClientKeys | None = None,
    ) -> Client:
        """The client of a request with these headers and query parameters (and the
        deployment's own ``identity`` headers: ``ProxySettings.identity_headers``); with
        a client key (``CLIENT_KEY_HEADER``) one of ``keys`` knows, the person it was
        issued to, and nothing else. ``BadRequest`` when the named conversation is not a
        valid id, or the client key is not one of ``keys`` (401), or ``keys`` requires one."""
        lowered = {k.lower(): v for k, v in headers.items()}
        names = dict.fromkeys((*CREDENTIAL_HEADERS, *(name.lower() for name in identity)))
        material = [f"{name}\0{lowered[name]}" for name in names if name in lowered]
        if query and CREDENTIAL_QUERY in query:
            material.append(f"?{CREDENTIAL_QUERY}\0{query[CREDENTIAL_QUERY]}")
        if CLIENT_KEY_HEADER in lowered or (keys is not None and keys.required):
            person = keys.person(lowered.get(CLIENT_KEY_HEADER, "")) if keys is not None else None
            if person is None:
                said = "is not one this proxy issued" if CLIENT_KEY_HEADER in lowered else "is required by this proxy and the request has none"
                raise BadRequest(f"{CLIENT_KEY_HEADER} {said}", status=401)
            material = [f"{CLIENT_KEY_HEADER}\0{person}"]
        named = conversation if conversation is not None else lowered.get(CONVERSATION_HEADER)
        if named is not None:
            try:
                check_id(named, "conversation")
                if len(named) > MAX_NAME:
                    raise StoreError(f"conversation id {named[:MAX_NAME]!r}... is longer than {MAX_NAME} characters")
            except StoreError as exc:
                raise BadRequest(f"{CONVERSATION_HEADER}: {exc}") from None
        secret = hashlib.sha256(b"glyphpack proxy client\0" + "\n".join(material).encode("utf-8", "surrogatepass")).digest()
        return cls(secret, named or None)

    def scoped(self) -> Client:
        """This client with the conversation it names taken within its own identity: the
        workspace id ``NAME.<12 hex>``, a keyed digest of its credentials. Two clients
        naming the same conversation never meet, and no answer tells one that another
        uses a name (a 403 "held by another client" was an oracle, and a first claim a
        race two clients could both win)."""
        if self.conversation is None:
            return self
        tag = hmac.new(self.secret, b"glyphpack proxy conversation names", hashlib.sha256).hexdigest()[:SCOPE_DIGITS]
        return dataclasses.replace(self, conversation=f"{self.conversation}.{tag}")

    def owner_record(self) -> dict[str, str]:
        """What the workspace keeps of this client for a conversation it starts: a fresh
        salt and the keyed digest of the client's secret under it."""
        salt = secrets.token_bytes(16)
        return {"salt": salt.hex(), "digest": hmac.new(salt, self.secret, hashlib.sha256).hexdigest()}

    def owns(self, record: Mapping[str, str] | None) -> bool:
        """Whether ``record`` (``owner_record`` of some client) is this client's."""
        if record is None:
            return False
        try:
            salt = bytes.fromhex(record["salt"])
        except (KeyError, ValueError):
            return False
        return hmac.compare_digest(hmac.new(salt, self.secret, hashlib.sha256).hexdigest(), str(record.get("digest", "")))


#: The client of requests that carry no credentials (and of calls that name none).
ANONYMOUS = Client.of({})


class ClientKeys:
    """The client keys a proxy's operator issued (``glyphpack proxy-key``), one or more
    per person: a file of ``PERSON sha256:HEX`` lines (``#`` comments), the keys' digests,
    never the keys. Read again when the file changes (a key revoked by deleting its line
    is refused from the next request on). ``required``: a request without a key is refused."""

    def __init__(self, path: Path, *, required: bool = False):
        self.path = Path(path)
        self.required = required
        self._lock = threading.Lock()
        self._read_at: tuple[int, int] | None = None
        self._people: dict[str, str] = {}
        self._load()  # a file that cannot be read is said when the proxy starts

    def person(self, key: str) -> str | None:
        """Who ``key`` was issued to (None: no one)."""
        if not key.startswith(CLIENT_KEY_PREFIX):
            return None
        with self._lock:
            try:
                stat = self.path.stat()
                if (stat.st_mtime_ns, stat.st_size) != self._read_at:
                    self._load()
            except (OSError, StoreError):  # the file gone or broken since: the keys read last stand
                pass
            digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
            return self._people.get(digest)

    def _load(self) -> None:
        try:
            stat = self.path.stat()
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"cannot read the client keys in {self.path}: {getattr(exc, 'strerror', None) or exc}") from None
        people = {}
        for number, line in enumerate(text.splitlines(), start=1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) != 2 or not words[1].startswith("sha256:") or len(words[1]) != 71 or not _is_hex(words[1][7:]):
                raise StoreError(f"{self.path}, line {number}: not 'PERSON sha256:<64 hex>' (a client key's digest, as glyphpack proxy-key writes it)")
            people[words[1][7:].lower()] = check_id(words[0], "person")
        self._people, self._read_at = people, (stat.st_mtime_ns, stat.st_size)

    @staticmethod
    def issue(path: Path, person: str) -> str:
        """A new key for ``person``, its digest added to the file at ``path`` (made if
        missing); the key itself is returned once and kept nowhere."""
        check_id(person, "person")
        key = CLIENT_KEY_PREFIX + secrets.token_urlsafe(32)
        line = f"{person} sha256:{hashlib.sha256(key.encode()).hexdigest()}\n"
        path = Path(path)
        if path.exists():
            ClientKeys(path)  # a broken file is said, not appended to
        with path.open("a", encoding="utf-8") as file:
            file.write(line)
        return key


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


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


@dataclasses.dataclass(frozen=True)
class ProxySettings:
    """How the proxy compacts (as ``open_session`` takes them; None: the model's defaults),
    and which headers tell its clients apart."""

    context_window: int | None = None
    threshold: int | None = None
    target: int | None = None
    #: Headers that tell clients apart besides the credentials (``CREDENTIAL_HEADERS``):
    #: a deployment's own per-user header, set by what authenticates its users.
    identity_headers: tuple[str, ...] = ()
    #: The client keys the operator issued (None: none; a request sending one is refused).
    client_keys: ClientKeys | None = None


@dataclasses.dataclass
class Exchange:
    """One request on its way through: what the client sent, what goes upstream, and
    the session that records it (None: passed through unrecorded, ``note`` says why).
    ``messages`` and ``report`` are the session's history and request report as this
    request left them: a retry or an answer is taken only while they are still the
    session's (no other request moved it since)."""

    api: Api
    body: Json
    forwarded: Json
    session: Session | None = None
    note: str | None = None
    retried: bool = False
    messages: tuple[Message, ...] = ()
    report: RequestReport | None = None
    #: Whether ``forwarded`` offers the model ``glyphpack_recall`` (the proxy answers it).
    recall: bool = False
    #: Upstream rounds this client request took before this one (each after a recall).
    rounds: int = 0
    #: Estimated tokens of the client's whole history and of what is forwarded (None:
    #: not recorded), for the proxy's log.
    client_tokens: int | None = None
    sent_tokens: int | None = None

    @property
    def compacted(self) -> bool:
        return self.session is not None and self.session.view is not None

    def still_current(self) -> bool:
        """Whether the session is where this request left it (call under its lock)."""
        session = self.session
        return session is not None and session.messages is self.messages and session.last_request is self.report


#: A stored history: (conversation, agent).
Key = tuple[str, str]
#: How many of a request's last messages may be new to the history it continues, for
#: a lookup in the store's index (a turn adds the answer, its results and the user's words).
STORE_LOOKUP = 64


class Recorder:
    """The proxy's side of the workspace: recognizes conversations, records them, builds
    what is forwarded. Thread-safe: one lock per (conversation, agent), none around the
    upstream call (``server`` runs these methods in worker threads).

    A new history whose first user message carries the prompt of a subagent call
    (``SUBAGENT_TOOLS``: Claude Code's ``Agent``/``Task``) that an open session of the
    same client is waiting on is that subagent: recorded as an agent of the caller's
    conversation (``<subagent_type>-<call id end>``), so the tree shows it beside the call."""

    def __init__(self, workspace: Workspace, settings: ProxySettings = ProxySettings()):
        self.workspace = workspace
        self.settings = settings
        # The digest of each history's current end (and of that end before its last
        # answer) -> the histories that end so (several clients may begin alike); a
        # rolling digest names its length too. Only the current ends: a new client that
        # begins like an old conversation's past is a conversation of its own.
        self._index: dict[bytes, set[Key]] = {}
        self._ends: dict[Key, list[bytes]] = {}
        # history -> its client view digested (``Chain``): a long history is digested
        # once, then a message at a time.
        self._chains: dict[Key, Chain] = {}
        # conversation -> its owner record (None: no one's); (conversation, client) -> owns.
        self._owners: dict[str, dict[str, str] | None] = {}
        self._owned: dict[tuple[str, bytes], bool] = {}
        self._lock = threading.Lock()  # the index and the session cache, never held for long
        self._locks: dict[Key, threading.Lock] = {}
        self._sessions: collections.OrderedDict[Key, Session] = collections.OrderedDict()

    def _lock_of(self, key: Key) -> threading.Lock:
        """``key``'s own lock (made once, under the index lock: two threads asking at
        once get the same one)."""
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())

    # ------------------------------------------------------------------ owners

    def _owns(self, client: Client, conversation: str) -> bool:
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

    def _claim(self, client: Client, conversation: str) -> bool:
        """Make ``client`` the owner of ``conversation`` if no one is (compared and set in
        the store: of two proxies claiming one name at once, one wins); whether it is."""
        record = self.workspace.claim_owner(conversation, client.owner_record())
        owns = client.owns(record)
        with self._lock:
            self._owners[conversation] = record
            self._owned[(conversation, client.secret)] = owns
        return owns

    # ------------------------------------------------------------------ the index

    def index_workspace(self) -> int:
        """Index every stored history; how many. The store's index gets them too, in one
        transaction (a workspace recorded before it kept one is then found by every proxy)."""
        stored = self.workspace.transcripts()
        ends = {key: self._remember(key, self.workspace.load(*key).messages, persist=False) for key in stored}
        self.workspace.tree.set_ends({key: found for key, found in ends.items() if found})
        return len(stored)

    def _chain(self, key: Key, messages: Sequence[Message]) -> Chain:
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
        shown = client_view(messages, start, proxy_recall_ids(messages))
        before = (known.digests[:keep], known.marks[:keep], known.ends[:keep], known.roles[:keep]) if known is not None else ((), (), (), ())
        return Chain(
            stored=len(messages),
            last_id=messages[-1].id if messages else "",
            digests=tuple(digests(shown.messages, before[0])),
            marks=(*before[1], *thinking_marks(shown.messages)),
            ends=(*before[2], *shown.ends),
            roles=(*before[3], *(m.role for m in shown.messages)),
        )

    def _remember(self, key: Key, messages: Sequence[Message], *, persist: bool = True) -> tuple[bytes, ...]:
        """Index the end of ``messages`` (as the client holds them), and the end before a
        last answer (a client that retries the request, or sends the answer back changed,
        continues from there); returns those ends. With ``persist``, the store's index
        gets them too, so another proxy on the workspace finds the history."""
        chain = self._chain(key, messages)
        ends = chain.digests[-2:] if len(chain.digests) > 1 and chain.roles[-1] == "assistant" else chain.digests[-1:]
        with self._lock:
            changed = self._ends.get(key) != list(ends)
        if persist and changed:
            self.workspace.tree.set_ends({key: ends})
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
        Nothing found here, the store's index is asked for the chain's last
        ``STORE_LOOKUP`` digests (another proxy on the workspace may have recorded it),
        and what it names is read and indexed here first."""
        found = self._match(chain, client, marks)
        if found[0] is not None and self._moved(found[0]):
            # Another proxy on the workspace moved that history since this one read it:
            # matched against what is stored now, never what this proxy last saw (a stale
            # end made one window's request rewind another window's transcript).
            self._refresh(found[0])
            found = self._match(chain, client, marks)
        if found[0] is not None or not chain:
            return found
        stored = [key for key in self.workspace.tree.ending_with(chain[-STORE_LOOKUP:])
                  if client.conversation is None or key[0] == client.conversation]
        for key in stored:
            with self._lock_of(key):
                self._remember(key, self.workspace.load(*key).messages, persist=False)
        return self._match(chain, client, marks) if stored else found

    def _moved(self, key: Key) -> bool:
        """Whether ``key``'s history ends elsewhere in the store than this proxy indexed it."""
        with self._lock:
            known = set(self._ends.get(key, ()))
        stored = self.workspace.tree.ends_of(*key)
        return bool(stored) and stored != known

    def _refresh(self, key: Key) -> None:
        """Index ``key``'s history as it is stored now (another proxy saved it since)."""
        with self._lock_of(key):
            self._remember(key, self.workspace.load(*key).messages, persist=False)

    def _match(self, chain: Sequence[bytes], client: Client, marks: Sequence[bytes | None]) -> tuple[Key | None, int]:
        for length in range(len(chain), 0, -1):
            with self._lock:
                candidates = sorted(self._index.get(chain[length - 1], ()))
            for key in candidates:
                if client.conversation is not None and key[0] != client.conversation:
                    continue
                if self._owns(client, key[0]) and self._same_thinking(key, marks, length):
                    return key, length
        return None, 0

    def _same_thinking(self, key: Key, marks: Sequence[bytes | None], length: int) -> bool:
        """Whether no message of the first ``length`` carries thinking other than the
        stored history's (a client may drop thinking, never change it)."""
        with self._lock:
            known = self._chains.get(key)
        stored = known.marks if known is not None else ()
        return all(_marks_agree(mine, theirs) for mine, theirs in zip(stored[:length], marks[:length]))

    # ------------------------------------------------------------------ requests

    def prepare(self, api: Api, body: object, summarizer: Summarizer | None = None, client: Client = ANONYMOUS) -> Exchange:
        """Record the request's history and build what goes upstream (compacting first
        when the session's threshold is reached). A body without a history list or a
        model is a ``BadRequest``, and so is a named conversation another client holds
        (403); a history the proxy cannot record (one the provider may still take: it is
        the provider's to judge) passes through as it came, with a note on stderr.
        ``summarizer`` (this request's: it carries the caller's key) is the session's
        last rung."""
        request, history = _read_request(api, body)
        try:
            if isinstance(history, HistoryError):
                raise history
            return self._prepare(api, request, history, summarizer, client)
        except BadRequest:
            raise
        except (GlyphpackError, RecursionError) as exc:
            note = f"not recorded: {without_values(exc)}" if isinstance(exc, GlyphpackError) else "not recorded: nested too deep to record"
            print(f"glyphpack proxy: {note}", file=sys.stderr)
            return Exchange(api, request, request, note=note)

    def _named(self, client: Client) -> Client:
        """``client`` with the conversation it names as the workspace keeps it: the plain
        name where this client already holds a conversation of that name (one a proxy
        before names were scoped started), else the name within its identity (``scoped``)."""
        if client.conversation is None or not self._owns(client, client.conversation):
            return client.scoped()
        return client

    def _prepare(self, api: Api, body: Json, history: list[Message], summarizer: Summarizer | None, client: Client) -> Exchange:
        client = self._named(client)
        chain = (digests(history), thinking_marks(history))
        try:
            return self._record(api, body, history, chain, summarizer, client)
        except ConflictError:  # another process saved the conversation since: read it again, once
            return self._record(api, body, history, chain, summarizer, client)

    def _record(
        self, api: Api, body: Json, history: list[Message], chain: tuple[list[bytes], list[bytes | None]], summarizer: Summarizer | None, client: Client
    ) -> Exchange:
        """``history`` recorded where it belongs and the exchange that forwards it; on a
        ``ConflictError`` what this process held of that conversation is forgotten."""
        key, _ = self.match(chain[0], client, chain[1])
        if key is None:
            key = self._subagent_of(history, client) or self._new_key(client, history)
        with self._lock_of(key):
            try:
                session = self._session(api, key, body, history, chain, summarizer)
            except ConflictError:
                self._forget(key)  # the retry's match finds the history moved (``_moved``) and reads it again
                raise
            self._remember(key, session.messages)
            return self._exchange(api, body, session)

    def _new_key(self, client: Client, history: Sequence[Message]) -> Key:
        """Where a history that continues nothing stored goes: a new conversation the
        client then holds, or, in a conversation it named, the main agent (when that is
        empty or the history starts the same task) or a new agent beside it."""
        conversation = client.conversation
        if conversation is None:
            conversation = self._new_conversation()
            self._claim(client, conversation)
            return conversation, AGENT
        known = {c.id for c in self.workspace.tree.conversations()}
        if conversation not in known and self._claim(client, conversation):  # compared and set: a held name is not taken
            return conversation, AGENT
        if not self._owns(client, conversation):
            raise BadRequest(f"conversation {conversation!r} is held by another client", status=403)
        stored = self.workspace.load(conversation, AGENT).messages
        if not stored or _first_task(stored) == _first_task(history):
            return conversation, AGENT
        agents = {agent for conv, agent in self.workspace.transcripts() if conv == conversation}
        return conversation, unique_name("agent", agents | {AGENT})

    def _exchange(self, api: Api, body: Json, session: Session) -> Exchange:
        try:
            # Below the threshold with nothing compacted the client's own body goes
            # upstream: nothing is built (``_forwarded``).
            built = session.request_if_compacted(api) or {}
        except CompactionError as exc:
            # Recorded, but the ladder could not bring it under the window: the provider
            # gets it whole and says so to the client; the answer, if any, is recorded.
            said = without_values(exc)
            print(f"glyphpack proxy: not compacted: {said}", file=sys.stderr)
            return Exchange(api, body, body, session, note=f"not compacted: {said}", messages=session.messages, report=session.last_request, **_estimates(session, whole=True))
        return self._built(api, body, built, session)

    def _built(self, api: Api, body: Json, built: Json, session: Session, **fields: Any) -> Exchange:
        """The exchange that forwards ``built`` (the session's request) for ``body``."""
        forwarded = self._forwarded(api, body, built, session)
        return Exchange(
            api, body, forwarded, session, messages=session.messages, report=session.last_request,
            recall=forwarded is not body and offers_recall(api, body), **fields, **_estimates(session),
        )

    def _forwarded(self, api: Api, body: Json, built: Json, session: Session) -> Json:
        """The client's body, with the session's history where a compaction is in force,
        and then ``glyphpack_recall`` after the client's tools (unless it defines a tool
        of that name itself): the stubs' refs come back exactly, from the transcript."""
        if session.view is None:
            return body
        build = provider_api(api)
        forwarded = {**body, build.request_key: to_rest(built[build.request_key]) if api == "gemini" else built[build.request_key]}
        if api == "openai-responses":
            # The session builds every system message into ``instructions``; a client
            # such as Codex sends its own as developer items in ``input`` (and may send
            # ``instructions`` too): what the client's ``instructions`` does not carry goes
            # first in ``input``, as a developer item, so no system text is lost.
            built_text, own = built.get("instructions"), body.get("instructions")
            own = own if isinstance(own, str) else ""
            if isinstance(built_text, str) and built_text and built_text != own:
                extra = built_text[len(own) + 2 :] if own and built_text.startswith(own + "\n\n") else built_text
                developer = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": extra}]}
                forwarded["input"] = [developer, *forwarded["input"]]
        if offers_recall(api, body):
            forwarded["tools"] = [*(body.get("tools") or ()), recall_tool(api)]
        if api == "anthropic":
            cap_cache_marks(forwarded)
        return forwarded

    def recover(self, exchange: Exchange, status: int, error: Json) -> Exchange | None:
        """After the provider rejected ``exchange``'s request as too long: compact to fit
        and the body to send once more; None when it is another error, was already
        retried, nothing can be freed (the retry would be the same request), or another
        request moved the session since this one was built (the retry is built from this request's own history only; the
        client then gets the provider's error)."""
        session = exchange.session
        rejection = {"status": status, **error}
        if session is None or exchange.retried or parse_overflow(rejection) is None:
            return None
        with self._lock_of(_key(session)):
            if not exchange.still_current():
                print("glyphpack proxy: not retried: another request moved this conversation since", file=sys.stderr)
                return None
            try:
                session.recover(rejection)
                built = session.request(exchange.api)
            except GlyphpackError as exc:
                print(f"glyphpack proxy: could not recover from 'too long': {without_values(exc)}", file=sys.stderr)
                return None
            retry = self._built(exchange.api, exchange.body, built, session, retried=True, rounds=exchange.rounds)
            if retry.forwarded == exchange.forwarded:
                # The ladder had nothing more to take (no summarizer, no cut that fits): the
                # same body would be refused the same way, so the client gets the provider's error.
                print("glyphpack proxy: not retried: compacting again freed nothing, so the same request would be refused", file=sys.stderr)
                return None
            return retry

    def finish(self, exchange: Exchange, response: Json) -> Exchange | None:
        """Record the provider's answer (saved when it has no tool calls; the provider's
        input count calibrates the session). An answer to a request whose session another
        request moved since is not recorded here: the client sends it back with its next
        request, which records it in its place.

        When the request offered ``glyphpack_recall`` and the answer calls only that
        (fewer than ``RECALL_ROUNDS`` times in a row), the session answers the calls and
        the exchange that asks the upstream again is returned (else None). A recall
        called beside the client's own calls is answered with the client's results."""
        session = exchange.session
        if session is None:
            return None
        key = _key(session)
        with self._lock_of(key):
            if not exchange.still_current():
                print("glyphpack proxy: answer recorded with the next request: another request moved this conversation since", file=sys.stderr)
                return None
            try:
                if exchange.recall:
                    response = marked(exchange.api, response, recall_id_prefix())
                session.add_response(response, exchange.api)
                pending = session.pending_calls
                if not (exchange.recall and pending and exchange.rounds + 1 < RECALL_ROUNDS and all(c.name == RECALL_TOOL for c in pending)):
                    self._remember(key, session.messages)
                    return None
            except (GlyphpackError, RecursionError) as exc:
                # The answer still reaches the client whole; its next request records it.
                print(f"glyphpack proxy: answer not recorded: {without_values(exc)}", file=sys.stderr)
                self._forget(key)
                return None
            try:
                session.add_tool_results(())
                self._remember(key, session.messages)
                built = session.request(exchange.api)
            except GlyphpackError as exc:
                # Recorded; the client gets the answer without the recall call.
                print(f"glyphpack proxy: recall not answered: {without_values(exc)}", file=sys.stderr)
                return None
            following = self._built(exchange.api, exchange.body, built, session, rounds=exchange.rounds + 1)
            if following.rounds + 1 == RECALL_ROUNDS:  # the last round: an answer, not another call
                following.forwarded["tool_choice"] = {"type": "none"} if exchange.api == "anthropic" else "none"
            return following

    def counted_body(self, api: Api, body: object, client: Client = ANONYMOUS) -> Json:
        """A token-count request as it would be forwarded (nothing recorded)."""
        request, history = _read_request(api, body)
        if isinstance(history, HistoryError):
            return request
        chain = digests(history)
        key, _ = self.match(chain, self._named(client), thinking_marks(history))
        if key is None:
            return request
        with self._lock_of(key):
            session = self._sessions.get(key)
            if session is None or session.view is None:
                return request
            stored = self._chain(key, session.messages)
            if _common((stored.digests, stored.marks), (chain, thinking_marks(history))) < len(stored.digests):
                return request
            view, prefix = session.request_view()
            build = provider_api(api)
            built = build.build(request["model"], (*view, *history[len(stored.digests) :]), prefix, session.profile)
        return self._forwarded(api, request, built, session)

    # ------------------------------------------------------------------ sessions

    def _new_conversation(self) -> str:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        return f"proxy-{stamp}-{secrets.token_hex(3)}"

    def _subagent_of(self, history: Sequence[Message], client: Client) -> Key | None:
        """The (conversation, agent) of a subagent whose call an open session of
        ``client``'s waits on and whose prompt ``history``'s first user message carries,
        else None."""
        first = next((m.text for m in history if m.role == "user"), "")
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            if client.conversation is not None and session.conversation != client.conversation:
                continue
            if not self._owns(client, session.conversation):
                continue
            for call in session.pending_calls:
                prompt = call.arguments.get("prompt")
                if call.name in SUBAGENT_TOOLS and isinstance(prompt, str) and prompt.strip() and prompt.strip() in first:
                    kind = str(call.arguments.get("subagent_type") or "task")
                    return session.conversation, f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', kind)}-{call.id[-8:]}"
        return None

    def _session(
        self, api: Api, key: Key, body: Json, history: Sequence[Message], chain: tuple[Sequence[bytes], Sequence[bytes | None]], summarizer: Summarizer | None
    ) -> Session:
        """The open session of ``key`` for this request's model and with its summarizer,
        its history made ``history``: the new messages appended and saved (a turn
        boundary)."""
        with self._lock:
            session = self._sessions.get(key)
            if session is not None:
                self._sessions.move_to_end(key)
        if session is not None and session.model != body["model"]:
            self._forget(key)
            session = None
        if session is None:
            session = self._open(api, key, body, summarizer)
        session.summarizer = summarizer
        stored = self._chain(key, session.messages)
        common = _common((stored.digests, stored.marks), chain)
        if common < len(stored.digests):
            # The client went back (a retry, or the last answer sent back changed): the
            # transcript continues from there; the tree keeps what it left.
            self._forget(key)
            kept = session.messages[: stored.ends[common - 1] if common else 0]
            self.workspace.save(*key, kept, revision=session.revision, replace=True)
            session = self._open(api, key, body, summarizer)
        new = history[common:]
        if new and any(is_proxy_recall(c) for c in session.pending_calls):
            # The answer before mixed a recall with the client's calls: the client sends
            # its own calls' results, the session adds the recall's (or, on a new user
            # message, answers the recall alone first).
            if new[0].role == "tool":
                session.add_tool_results(new[0].tool_results)
                new = new[1:]
            elif all(c.name == RECALL_TOOL for c in session.pending_calls):
                session.add_tool_results(())
        session.extend(new)
        with self._lock:
            self._sessions[key] = session
            while len(self._sessions) > OPEN_SESSIONS:
                self._sessions.popitem(last=False)[1].close()
        return session

    def _open(self, api: Api, key: Key, body: Json, summarizer: Summarizer | None) -> Session:
        settings = self.settings
        tools = body.get("tools")
        return Session(
            self.workspace,
            *key,
            model=body["model"],
            summarizer=summarizer,
            context_window=settings.context_window,
            threshold=settings.threshold,
            target=settings.target,
            tools=tools if isinstance(tools, list) and tools else None,
            # Once a compaction is in force the proxy offers glyphpack_recall and answers
            # it (``finish``), so the session may elide below the threshold too.
            recall=offers_recall(api, body),
        )

    def _forget(self, key: Key) -> None:
        with self._lock:
            session = self._sessions.pop(key, None)
        if session is not None:
            session.close()

    def close(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), collections.OrderedDict()
        for session in sessions:
            session.close()


def _first_task(messages: Sequence[Message]) -> tuple[Any, ...] | None:
    """The content of the first user message (ids never count), None when there is none."""
    return next((m.content for m in messages if m.role == "user"), None)


def _estimates(session: Session, whole: bool = False) -> dict[str, Any]:
    """The log's token estimates of a session's request: the whole history, and what
    the request just built carries (``whole``: the whole history went, as it came).
    Call under the session's lock."""
    everything = session.cost().history(session.messages) + session.estimator.overhead
    sent = everything if whole or session.last_request is None else session.last_request.tokens
    return {"client_tokens": everything, "sent_tokens": sent}


def _key(session: Session) -> Key:
    return session.conversation, session.agent


def offers_recall(api: Api, body: Json) -> bool:
    """Whether the proxy adds ``glyphpack_recall`` to ``body``'s tools (once a compaction
    is in force): not when the client defines a tool of that name itself."""
    tools = body.get("tools")
    if api == "gemini" or (tools is not None and not isinstance(tools, list)):
        return False  # Gemini: the proxy does not answer recall there yet (no relay for its stream)
    build = provider_api(api)
    return not any(RECALL_TOOL in build.tool_names(t) for t in tools or ())


def cap_cache_marks(body: Json) -> None:
    """Remove prompt-cache breakpoints from the oldest messages until the request has no
    more than Anthropic allows (the client's own in ``system`` and ``tools`` stay)."""
    def marked(blocks: object) -> list[Json]:
        return [b for b in blocks if isinstance(b, dict) and "cache_control" in b] if isinstance(blocks, list) else []

    fixed = len(marked(body.get("system"))) + len(marked(body.get("tools")))
    in_messages = [b for m in body.get("messages") or () for b in marked(m.get("content"))]
    for block in in_messages[: max(0, fixed + len(in_messages) - ANTHROPIC_CACHE_MARKS)]:
        del block["cache_control"]


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
