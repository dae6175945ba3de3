"""The proxy's recorder: what a proxied request becomes upstream, and what is stored.

Each request is matched to the stored history it continues (``histories``: by content,
among those its client holds, ``identity``); its new messages are appended and saved (a
turn boundary: the request ends on the user's message or the tool results). A request
that continues nothing starts a new conversation; one whose first user message carries
a subagent call's prompt is that subagent, an agent of the caller's conversation.

A Responses request that names the answer it continues (``previous_response_id``: the
provider holds the conversation) is read as that answer's recorded history followed by
its input.

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
import re
import secrets
import sys
import threading
from collections.abc import Sequence
from typing import Any

from .._compaction.recovery import parse_overflow
from .._compaction.summarize import Summarizer
from .._errors import CompactionError, ConflictError, GlyphpackError, HistoryError
from .._history.ids import unique_name
from .._history.messages import Message, new_id
from .._history.recall import RECALL_TOOL
from .._history.store import Workspace
from .._session.session import RequestReport, Session
from .._types import Api
from .._wire import provider_api, recall_tool
from .._wire.gemini import to_rest
from .histories import (
    HistoryIndex,
    Key,
    RequestReader,
    _common,
    _read_request,
    digests,
    is_proxy_recall,
    recall_id_prefix,
    thinking_marks,
)
from .identity import ANONYMOUS, BadRequest, Client, ClientKeys
from .log import without_values
from .rounds import marked

Json = dict[str, Any]

#: The agent name proxied conversations are stored under.
AGENT = "main"
#: Tools whose call starts a subagent with its own history (Claude Code's), and the
#: argument that history begins with.
SUBAGENT_TOOLS = ("Agent", "Task")
#: Sessions kept open between requests (the most recently used): past it, each request
#: of a conversation beyond the 256 busiest reads its transcript again (128 clients at
#: once through one proxy took 7.0-8.7 ms of CPU a request with 64 open, 6.3 with 256).
OPEN_SESSIONS = 256
#: Anthropic refuses a request with more prompt-cache breakpoints than this.
ANTHROPIC_CACHE_MARKS = 4
#: Upstream rounds one client request may take, each after the model called only
#: ``glyphpack_recall``; the last asks for an answer without tool calls (a recall
#: called anyway goes unanswered, and the client gets the answer without it).
RECALL_ROUNDS = 8
#: Seconds a request waits for its conversation's answer to be recorded (one the client
#: got before it was: ``answer_due``); past it the request goes on, and the answer is
#: stored as the client sent it back.
ANSWER_WAIT = 10.0
#: Responses answers this process remembers by their response's id (the most recent); an
#: older one is found in the tree once saved.
RESPONSES_KEPT = 100_000


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
    #: Whether a later request may continue its answer by the answer's Responses id.
    joined: bool = True
    #: Upstream rounds this client request took before this one (each after a recall).
    rounds: int = 0
    #: Estimated tokens of the client's whole history and of what is forwarded (None:
    #: not recorded), for the proxy's log.
    client_tokens: int | None = None
    sent_tokens: int | None = None
    #: The session's ``whole_below`` after this request (None: not recorded).
    whole_below: int | None = None

    @property
    def compacted(self) -> bool:
        return self.session is not None and self.session.view is not None

    def still_current(self) -> bool:
        """Whether the session is where this request left it (call under its lock)."""
        session = self.session
        return session is not None and session.messages is self.messages and session.last_request is self.report


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
        self._lock = threading.Lock()  # the session cache and the histories' locks, never held for long
        self._locks: dict[Key, threading.Lock] = {}
        self.histories = HistoryIndex(workspace, self._lock_of, moved=self._forget)
        self.reader = RequestReader()
        self._sessions: collections.OrderedDict[Key, Session] = collections.OrderedDict()
        self._answers_due: dict[Key, tuple[Exchange, threading.Event]] = {}
        # The Responses ids of answers sent before they are recorded (``answer_due``), and
        # of those this process recorded (the most recent: the tree has the saved ones).
        self._responses_due: dict[str, Key] = {}
        self._responses: dict[str, Key] = {}

    def index_workspace(self) -> int:
        """Index every stored history; how many (``HistoryIndex.index_workspace``)."""
        return self.histories.index_workspace()

    def _lock_of(self, key: Key) -> threading.Lock:
        """``key``'s own lock (made once, under the index lock: two threads asking at
        once get the same one)."""
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())


    # ------------------------------------------------------------------ requests

    def prepare(self, api: Api, body: object, summarizer: Summarizer | None = None, client: Client = ANONYMOUS) -> Exchange:
        """Record the request's history and build what goes upstream (compacting first
        when the session's threshold is reached). A body without a history list or a
        model is a ``BadRequest``, and so is a named conversation another client holds
        (403); a history the proxy cannot record (one the provider may still take: it is
        the provider's to judge) passes through as it came, with a note on stderr.
        ``summarizer`` (this request's: it carries the caller's key) is the session's
        last rung."""
        found = self._with_history(api, body, client)
        joined = found is not None
        whole, continues = found if found is not None else (body, None)
        if not joined:
            print("glyphpack proxy: it continues a response this proxy did not record (previous_response_id): "
                  "its new input recorded on its own, the request passed on as it came", file=sys.stderr)  # fmt: skip
        request, history, chain = self.reader.read(api, whole, client.secret)
        if whole is not body:
            # The client's own body is what goes upstream below the threshold, continuing
            # the provider's stored response; the whole history is what is recorded.
            request = body  # type: ignore[assignment]
        try:
            if isinstance(history, HistoryError):
                raise history
            assert chain is not None  # a history read has its digests
            exchange = self._prepare(api, request, history, chain, summarizer, client, continues)
            if not joined:
                # The provider holds its history: whatever the session built, the client's
                # body goes as it came, and no later request joins its answer.
                exchange.forwarded, exchange.recall, exchange.joined = exchange.body, False, False
            return exchange
        except BadRequest:
            raise
        except (GlyphpackError, RecursionError) as exc:
            note = f"not recorded: {without_values(exc)}" if isinstance(exc, GlyphpackError) else "not recorded: nested too deep to record"
            print(f"glyphpack proxy: {note}", file=sys.stderr)
            return Exchange(api, request, request, note=note)

    def _with_history(self, api: Api, body: object, client: Client) -> tuple[object, Key | None] | None:
        """``body`` as the history reader takes it, and the history it continues where the
        request names it (else None: matched by content). A Responses request that
        continues a stored response (``previous_response_id``: the provider holds the
        conversation, the client sends only what is new) gets the history that response
        ended, as this proxy recorded it, before its input: an earlier response than the
        last takes the conversation back there. None when this proxy recorded no such
        answer for this client (another proxy's, one from before a restart, another
        client's): its input is then recorded on its own and the request passes on as it
        came."""
        if api != "openai-responses" or not isinstance(body, dict) or "previous_response_id" not in body:
            return body, None
        previous = body["previous_response_id"]
        if not isinstance(previous, str):
            return None
        with self._lock:
            due = self._responses_due.get(previous)
        if due is not None:  # an answer the client got before it was recorded (``answer_due``)
            self._await_answer(due)
        with self._lock:
            known = self._responses.get(previous)
        # The answer is stored under the response's id (``_finish``): found in the tree
        # whichever proxy recorded it, before a restart too, once saved (an answer whose
        # calls wait for their results is saved with them).
        conversation = known[0] if known is not None else self.workspace.tree.conversation_of(previous)
        if conversation is None or not self.histories.owns(client, conversation):
            return None
        for key in [known] if known is not None else [k for k in self.workspace.transcripts() if k[0] == conversation]:
            held = self._held(key)
            ends = [n for n, message in enumerate(held) if message.id == previous]
            if ends:
                break
        else:  # the conversation went back past that answer since
            return None
        _, items = provider_api(api).to_wire([m for m in held[: ends[0] + 1] if m.role != "system"])
        new = body.get("input")
        return {**body, "input": [*items, *([{"role": "user", "content": new}] if isinstance(new, str) else new if isinstance(new, list) else [])]}, key

    def _answer_id(self, exchange: Exchange, response: Json, session: Session) -> str | None:
        """The id a Responses answer is stored under: its response's, so that a request
        continuing it by that id finds it (``_with_history``), unless the tree or the
        session holds that id already (a server that numbers its responses anew)."""
        found = response.get("id")
        if exchange.api != "openai-responses" or not exchange.joined or not isinstance(found, str) or not found:
            return None
        if any(m.id == found for m in session.messages) or self.workspace.tree.conversation_of(found) is not None:
            return None
        return found

    def _named(self, client: Client) -> Client:
        """``client`` with the conversation it names as the workspace keeps it: the plain
        name where this client already holds a conversation of that name (one a proxy
        before names were scoped started), else the name within its identity (``scoped``)."""
        if client.conversation is None or not self.histories.owns(client, client.conversation):
            return client.scoped()
        return client

    def _prepare(
        self, api: Api, body: Json, history: list[Message], chain: tuple[list[bytes], list[bytes | None]], summarizer: Summarizer | None, client: Client,
        continues: Key | None = None,
    ) -> Exchange:
        client = self._named(client)
        try:
            return self._record(api, body, history, chain, summarizer, client, continues)
        except ConflictError:  # another process saved the conversation since: read it again, once
            return self._record(api, body, history, chain, summarizer, client, continues)

    def _record(
        self, api: Api, body: Json, history: list[Message], chain: tuple[list[bytes], list[bytes | None]], summarizer: Summarizer | None, client: Client,
        continues: Key | None = None,
    ) -> Exchange:
        """``history`` recorded where it belongs (``continues``, the history the request
        names, else the one it is matched to) and the exchange that forwards it; on a
        ``ConflictError`` what this process held of that conversation is forgotten."""
        key = continues if continues is not None else self.histories.match(chain[0], client, chain[1])[0]
        if key is None:
            key = self._subagent_of(history, client) or self._new_key(client, history)
        self._await_answer(key)
        with self._lock_of(key):
            try:
                session = self._session(api, key, body, history, chain, summarizer)
            except ConflictError:
                self._forget(key)  # the retry's match finds the history moved (``_moved``) and reads it again
                raise
            # The store's index (what other proxies on the workspace match against) gets
            # this end once it is saved (``finish``, ``flush``).
            self.histories.remember(key, session.messages, saved=not session.unsaved)
            return self._exchange(api, body, session)

    def _new_key(self, client: Client, history: Sequence[Message]) -> Key:
        """Where a history that continues nothing stored goes: a new conversation the
        client then holds, or, in a conversation it named, the main agent (when that is
        empty or the history starts the same task) or a new agent beside it."""
        conversation = client.conversation
        if conversation is None:
            conversation = self._new_conversation()
            self.histories.claim(client, conversation)
            return conversation, AGENT
        with self._lock:
            held = set(self._sessions)  # with any request not saved yet
        known = {c.id for c in self.workspace.tree.conversations()} | {conv for conv, _ in held}
        if conversation not in known and self.histories.claim(client, conversation):  # compared and set: a held name is not taken
            return conversation, AGENT
        if not self.histories.owns(client, conversation):
            raise BadRequest(f"conversation {conversation!r} is held by another client", status=403)
        stored = self._held((conversation, AGENT))
        if not stored or _first_task(stored) == _first_task(history):
            return conversation, AGENT
        agents = {agent for conv, agent in (*self.workspace.transcripts(), *held) if conv == conversation}
        return conversation, unique_name("agent", agents | {AGENT})

    def _held(self, key: Key) -> tuple[Message, ...]:
        """``key``'s history as this process holds it: its open session's (which may
        hold a request not saved yet), else the stored one."""
        with self._lock:
            session = self._sessions.get(key)
        return session.messages if session is not None else self.workspace.load(*key).messages

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
        if api == "openai-responses":
            # The whole view goes, so the provider's stored conversation must not go first too.
            forwarded.pop("previous_response_id", None)
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
        try:
            return self._finish(exchange, response)
        finally:
            self._answered(exchange)
            answered = response.get("id") if isinstance(response, dict) else None
            if isinstance(answered, str):  # (an id of another type is no key: never kept)
                with self._lock:
                    self._responses_due.pop(answered, None)

    def _finish(self, exchange: Exchange, response: Json) -> Exchange | None:
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
                answer_id = self._answer_id(exchange, response, session)
                session.add_response(response, exchange.api, id=answer_id)
                if answer_id is not None:
                    with self._lock:
                        self._responses[answer_id] = key
                        while len(self._responses) > RESPONSES_KEPT:
                            del self._responses[next(iter(self._responses))]
                pending = session.pending_calls
                if not (exchange.recall and pending and exchange.rounds + 1 < RECALL_ROUNDS and all(c.name == RECALL_TOOL for c in pending)):
                    self.histories.remember(key, session.messages)
                    return None
            except ConflictError:
                # Another proxy saved the conversation first: from the client's next
                # request (which carries this answer) when the answer went out first.
                print("glyphpack proxy: answer recorded with the next request: another proxy saved this conversation first", file=sys.stderr)
                self._forget(key)
                return None
            except (GlyphpackError, RecursionError) as exc:
                # The answer still reaches the client whole; its next request records it.
                print(f"glyphpack proxy: answer not recorded: {without_values(exc)}", file=sys.stderr)
                self._flushed(key, session)  # the request's own messages, if they still may be
                self._forget(key)
                return None
            try:
                session.add_tool_results(())
                self.histories.remember(key, session.messages)
                built = session.request(exchange.api)
            except GlyphpackError as exc:
                # Recorded; the client gets the answer without the recall call.
                print(f"glyphpack proxy: recall not answered: {without_values(exc)}", file=sys.stderr)
                return None
            following = self._built(exchange.api, exchange.body, built, session, rounds=exchange.rounds + 1)
            if following.rounds + 1 == RECALL_ROUNDS:  # the last round: an answer, not another call
                following.forwarded["tool_choice"] = {"type": "none"} if exchange.api == "anthropic" else "none"
            return following

    def answer_due(self, exchange: Exchange, response: Json | None = None) -> bool:
        """Whether ``exchange``'s answer may go to the client before ``finish`` records it
        (call ``finish`` then, whatever happens): when no recall round can follow and the
        conversation is stored already, so that a proxy on the same workspace that gets
        the client's next request first finds it there and stores the answer as the client
        sends it back (a new conversation's first answer is recorded before it is sent:
        the next request, anywhere, finds it). A request this proxy matches to the
        conversation meanwhile waits for the record (``ANSWER_WAIT`` at most), so the
        answer is stored as the upstream sent it (its usage, its ids); so does one that
        names ``response``'s Responses id (``previous_response_id``)."""
        session = exchange.session
        if session is None or exchange.recall or session.revision == 0:
            return False
        with self._lock:
            self._answers_due[_key(session)] = (exchange, threading.Event())
            if exchange.api == "openai-responses" and exchange.joined and isinstance((response or {}).get("id"), str):
                # A request that continues it by its id waits for the record too.
                self._responses_due[response["id"]] = _key(session)  # type: ignore[index]
        return True

    def _await_answer(self, key: Key) -> None:
        with self._lock:
            due = self._answers_due.get(key)
        if due is not None and not due[1].wait(ANSWER_WAIT):
            with self._lock:  # given up on: no later request waits for it again
                if self._answers_due.get(key) is due:
                    del self._answers_due[key]

    def _answered(self, exchange: Exchange) -> None:
        """``exchange``'s due answer (``answer_due``) recorded or given up on: the requests
        waiting for it go on."""
        if exchange.session is None:
            return
        key = _key(exchange.session)
        with self._lock:
            due = self._answers_due.get(key)
            if due is not None and due[0] is exchange:
                del self._answers_due[key]
                due[1].set()

    def flush(self, exchange: Exchange) -> None:
        """Save the request's history if no answer did (an error, a refusal, a stream
        that ended without one): what the client sent is stored whatever came back.
        Nothing to do once another request moved the session (it holds this one's
        messages, and saves them with its own)."""
        session = exchange.session
        if session is None or not session.unsaved:
            return
        with self._lock_of(_key(session)):
            if exchange.still_current():
                self._flushed(_key(session), session)

    def _flushed(self, key: Key, session: Session) -> None:
        """``session.flush()`` under ``key``'s lock; on a failure the session is forgotten
        (the next request reads the transcript again; the client sends what is missing)."""
        try:
            if session.unsaved:
                session.flush()
                self.histories.remember(key, session.messages)
        except (GlyphpackError, RecursionError) as exc:
            print(f"glyphpack proxy: request not recorded: {without_values(exc)}", file=sys.stderr)
            self._forget(key)

    def counted_body(self, api: Api, body: object, client: Client = ANONYMOUS) -> Json:
        """A token-count request as it would be forwarded (nothing recorded)."""
        request, history = _read_request(api, body)
        if isinstance(history, HistoryError):
            return request
        chain = digests(history)
        key, _ = self.histories.match(chain, self._named(client), thinking_marks(history))
        if key is None:
            return request
        with self._lock_of(key):
            session = self._sessions.get(key)
            if session is None or session.view is None:
                return request
            stored = self.histories.chain(key, session.messages)
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
            if not self.histories.owns(client, session.conversation):
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
        stored = self.histories.chain(key, session.messages)
        common = _common((stored.digests, stored.marks), chain)
        if common < len(stored.digests):
            # The client went back (a retry, or the last answer sent back changed): the
            # transcript continues from there; the tree keeps what it left.
            self._forget(key)
            kept = session.messages[: stored.ends[common - 1] if common else 0]
            self.workspace.save(*key, kept, revision=session.revision, replace=True)
            session = self._open(api, key, body, summarizer)
        # Ids of their own: a message the reader reused from an earlier request (``RequestReader``)
        # may already be stored, in the history this one branched from.
        new = [dataclasses.replace(message, id=new_id()) for message in history[common:]]
        if new and any(is_proxy_recall(c) for c in session.pending_calls):
            # The answer before mixed a recall with the client's calls: the client sends
            # its own calls' results, the session adds the recall's (or, on a new user
            # message, answers the recall alone first).
            if new[0].role == "tool":
                session.add_tool_results(new[0].tool_results)
                new = new[1:]
            elif all(c.name == RECALL_TOOL for c in session.pending_calls):
                session.add_tool_results(())
        # Recorded after the request is forwarded, with its answer (``finish``) or by
        # ``flush``: until then the client holds these messages and sends them again.
        session.extend(new, save=False)
        with self._lock:
            self._sessions[key] = session
            # The least recently used go, but never one whose request is still unrecorded:
            # a session opened again from the store would not hold its messages.
            while len(self._sessions) > OPEN_SESSIONS:
                oldest = next((k for k, s in self._sessions.items() if not s.unsaved), None)
                if oldest is None:
                    break
                self._sessions.pop(oldest).close()
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
        """Close every open session, saving what a request left unsaved first."""
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), collections.OrderedDict()
        for session in sessions:
            with self._lock_of(_key(session)):
                self._flushed(_key(session), session)
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
    return {"client_tokens": everything, "sent_tokens": sent, "whole_below": session.whole_below()}


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


