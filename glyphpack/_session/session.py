"""One (conversation, agent) as a harness drives it.

    with glyphpack.open_session("runs/ws", "task-42", "coder", model="claude-sonnet-4-5") as s:
        s.add_user("fix the failing test")
        while True:
            request = s.request("anthropic")        # compacts at the threshold
            try:
                response = client.messages.create(**request, tools=TOOLS, max_tokens=4096)
            except anthropic.BadRequestError as e:
                s.recover(e); continue                # never loops: escalates, then raises
            s.add_response(response)
            if not s.pending_calls: break
            s.add_tool_results(run_tools(s.pending_calls))

The transcript is saved at every turn boundary (after the user's message, after an
answer without tool calls, after the tool results) and never while calls are pending;
each save records the history in the session tree too. A crash between the two writes
leaves the tree a turn behind; opening the session brings it forward: the transcript
wins. A compaction is persisted next to the transcript and reused, so the request's
prefix stays byte-identical until the next compaction, restarts included.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .._compaction.calibration import Calibration
from .._compaction.cost import CostModel
from .._compaction.ladder import LADDER
from .._compaction.recovery import DEFAULT_MARGIN, parse_overflow
from .._compaction.results import Compaction, CompactionPolicy
from .._compaction.sdk_summary import sdk_summarizer
from .._compaction.snapshot import head_end, page_density, serialize_messages
from .._compaction.summarize import Summarizer, as_summarizer
from .._errors import CompactionError, TextOnlyModelError, UsageError
from .._history.ids import unique_name
from .._history.messages import Block, Message, Text, ToolCall, ToolResult, call_ids, validate_history
from .._history.prefixes import begins_with
from .._history.recall import RECALL_DESCRIPTION, RECALL_PARAMETERS, RECALL_TOOL, Recalled
from .._history.recall import recall as recall_from
from .._history.store import Workspace
from .._history.view import StoredView, request_messages, view_for
from .._providers.profile import Profile
from .._providers.resolve import context_window as catalog_window
from .._providers.resolve import resolve, text_estimator
from .._providers.text_tokens import TextEstimator
from .._types import Api, LoadState, Rung, public
from .._wire import Reply, api_of, merge_extra, provider_api
from .commands import CommandResult, run_command
from .compactor import PAGES_OVER_ELISION, Compactor, Thresholds
from .tool_outputs import tool_result

#: The rungs a session without recall uses by default where pages are cheap for the
#: reader: no elision (with recall, elision loses nothing: the whole ladder).
#: Replaying the real pi session (benchmarks/test_bench_session_cost.py) with 5x8 pages
#: the ladder without it kept every character (verbatim or as pages) where the whole
#: ladder kept a quarter, for slightly less. Where the reader's legible pages cost about
#: what the text does, the whole ladder (elision first) bills less.
SESSION_RUNGS: tuple[Rung, ...] = tuple(step.rung for step in LADDER if step.rung != "elision")


#: What a harness may give as a tool's output (see ``tool_result``).
ToolOutput = str | bytes | bytearray | memoryview | Mapping[str, Any] | Sequence[Any] | ToolResult | None


@public
@dataclasses.dataclass(frozen=True, kw_only=True)
class RequestReport:
    """What one ``Session.request()`` did.

    Attributes:
        api: the API the request was built for.
        messages: messages it carries; ``prefix``: how many of them are the stored
            compaction (byte-identical until the next one).
        tokens: its estimated input tokens (the calibrated overhead included).
        compaction: the compaction this request made first (None: none was needed).
        prefix_kept: whether it begins with the previous request's messages, unchanged:
            a provider's prompt cache can hit on them (False on the first request and
            after a compaction or a branch).
        reused_tokens: estimated tokens of the leading messages it shares with the
            previous request, unchanged (with the requests' overhead: system prompt and
            tools), what a prompt cache can read; the other ``tokens - reused_tokens``
            are written to it (all of them on the first request).
        elided: tool results and call arguments this request elided below the
            threshold (with recall on: a batch, kept in the view; recall brings each back).
    """

    api: Api
    messages: int
    prefix: int
    tokens: int
    compaction: Compaction | None
    prefix_kept: bool
    reused_tokens: int
    elided: int = 0


@public
class Session:
    """One (conversation, agent) of a workspace: build requests, take responses, save at
    turn boundaries, compact at the threshold, recover from "too long", run slash
    commands. Open it with ``glyphpack.open_session``.

    Attributes:
        state: how the transcript was found when opened: ``"empty"``, ``"answered"``
            (the model answered last: add the user's next message) or ``"unanswered"``
            (the model's answer is due, after tool results or a turn that did not
            finish: call ``request`` or ``call``).
        messages: the whole stored history (never compacted; compaction changes what is sent).
        thresholds: when it compacts.
        last_compaction: the ladder's report of the last compaction this session made.
    """

    def __init__(
        self,
        workspace: Workspace,
        conversation: str,
        agent: str,
        *,
        model: str,
        system: str | None = None,
        summarizer: Summarizer | Callable[[str], str] | str | None = None,
        policy: CompactionPolicy | None = None,
        context_window: int | None = None,
        threshold: int | None = None,
        target: int | None = None,
        tools: object = None,
        recall: bool = True,
        owns_workspace: bool = False,
    ):
        if not isinstance(recall, bool):
            raise UsageError(f"recall must be True or False, not {recall!r}")
        self.compactor = Compactor(self)  # the policy: when and how deep to compact, how to recover
        self.workspace = workspace
        #: Whether requests offer the model ``glyphpack_recall`` and the session answers it.
        self.recall_enabled = recall
        self.conversation = conversation
        self.agent = agent
        self.model = model
        self.profile: Profile = resolve(model)
        if not self.profile.vision and summarizer is None:
            raise TextOnlyModelError(
                f"{model} reads no images, so compaction can only summarize: pass summarizer=... "
                f"(glyphpack.Summarizer) when opening the session"
            )
        if not isinstance(summarizer, str):
            summarizer = as_summarizer(summarizer)  # a plain function is taken as one
        window = context_window if context_window is not None else catalog_window(self.profile)
        self.thresholds = Thresholds.for_window(window, threshold, target)  # the caller's figures, checked
        # A window the provider's rejections taught an earlier process (``_learn_window``).
        learned_window = workspace.settings(conversation, agent).get("learned_window")
        if isinstance(learned_window, int) and 0 < learned_window < window:
            window = learned_window
            self.thresholds = self._thresholds(window, threshold, target)
        if isinstance(summarizer, str):
            # The session's own model summarizes within the window the session was told.
            same = summarizer == model
            summarizer = sdk_summarizer(model=summarizer, window=window if same else None, continues=same)
        self.summarizer = summarizer
        # With the default rungs, a history whose pages cannot fit falls back to the whole
        # ladder (elision first) rather than fail.
        self._fallback: CompactionPolicy | None = None
        if policy is None:
            # With recall, every word the pages stand for comes back exactly on request, so
            # the pages need only carry the gist: the reader's gist shape (denser where a
            # measured profile says the reader follows it there).
            # With recall the summary stands behind a recall ref, so it may take the whole
            # middle (deeper: compactions come less often; the replay bills +8.3% on the
            # 471-call pi session at 100k with pages beside it); without recall the
            # newest part of a middle too large for pages stays on pages, verbatim.
            policy = CompactionPolicy(fidelity="gist" if recall else "exact", summary_pages=not recall)
            # With recall an elided result comes back exactly, so the whole ladder (elision
            # first) runs at the threshold as the batches do below it: the pages then draw
            # the stubs the batches left, never those results whole again (which made
            # batches and threshold compactions rewrite each other's cached prefix).
            if not recall and self.profile.vision and page_density(self.profile, policy) >= PAGES_OVER_ELISION:
                policy, self._fallback = dataclasses.replace(policy, rungs=SESSION_RUNGS), policy
        self.policy = policy
        # Kept with each calibration, so commands on the workspace later use what this ran with.
        self._settings: dict[str, Any] = {"model": model, "context_window": window, "threshold": threshold, "target": target}
        if isinstance(learned_window, int) and learned_window == window:
            self._settings["learned_window"] = learned_window
        # With recall on, a summarizer to reach the depth, and neither given, the
        # economics choose both (``threshold``).
        self._economic = recall and threshold is None and target is None and self.summarizer is not None
        self._calls = 0  # model calls this process built requests for
        self._grown_from: tuple[int, int] | None = None  # (calls, estimate) growth is measured from
        self._owns_workspace = owns_workspace
        self._calibration = Calibration(base=policy.estimator or text_estimator(self.profile))
        self._cost_model: CostModel | None = None
        self._overflows = 0  # "too long" rejections since the last answer
        # The pending calls' ids as the model gave them -> as stored: a server that
        # numbers calls per response reuses ids, which a history cannot hold twice.
        self._call_ids: dict[str, str] = {}
        self._sent: tuple[Message, ...] | None = None  # the view of the last request built
        self._sent_tools: tuple[dict[str, object], ...] | None = None  # the tools it offered
        self._api: Api | None = None
        self.last_compaction: Compaction | None = None
        #: What the last ``request()`` did (None before the first); ``on_request``, when
        #: set, is called with each.
        self.last_request: RequestReport | None = None
        self.on_request: Callable[[RequestReport], None] | None = None
        self.messages: tuple[Message, ...] = ()
        self.revision = 0
        self._unsaved = False  # messages appended with ``extend(save=False)``, not yet saved
        workspace.reconcile(conversation, agent)
        self.state: LoadState = self._load()
        if policy.estimator is None and policy.tokenizer is None:
            # What the provider counted last, as the last process learned it (a restart
            # prices the next request the same way), else an imported file's last count.
            learned = workspace.calibration(conversation, agent)
            measured = workspace.measured(conversation, agent) if learned is None else []
            if learned is not None:
                self._calibration = Calibration.from_record(self._calibration.base, learned)
            for history, tokens in measured:
                self._calibration = self._calibration.learn(self.cost(), history, tokens)
            if measured and not workspace.backend.read_only:
                # Kept as learned: a branch or rewind that leaves those requests' messages
                # behind no longer loses what they taught (the system prompt and tools' share).
                workspace.save_calibration(conversation, agent, self._calibration.to_record())
            schemas = ([RECALL_SCHEMA] if tools is None else [tools, RECALL_SCHEMA]) if recall else tools
            if learned is None and not measured and schemas is not None:  # before any count: the tool schemas, as text
                self._calibration = dataclasses.replace(self._calibration, overhead=self.cost().text(_schema_text(schemas)))
        if not self.messages and system:
            self.messages = (Message("system", (Text(system),)),)

    @staticmethod
    def _thresholds(window: int, threshold: int | None, target: int | None) -> Thresholds:
        """``Thresholds.for_window`` for a learned ``window`` smaller than the one the
        caller's (already checked) threshold and target were given for: one it no longer
        holds gives way to the window's default."""
        if threshold is not None and threshold > window:
            threshold = None
        defaults = Thresholds.for_window(window, threshold)
        return defaults if target is None or target >= defaults.threshold else Thresholds.for_window(window, threshold, target)

    def _learn_window(self, window: int) -> None:
        """The provider refused a request of this size: its window is at most ``window``
        tokens (its own count, or the refused request's estimate when the refusal named
        no number). Compaction keeps to it from the next request on, here and in the next
        process (the workspace keeps it with the session's settings)."""
        if window >= self.thresholds.window or window <= 0:
            return
        given = self._settings
        self.thresholds = self._thresholds(window, given["threshold"], given["target"])
        self._settings = {**given, "context_window": window, "learned_window": window}
        self.workspace.save_calibration(self.conversation, self.agent, self._calibration.to_record(), self._settings)

    # ----------------------------------------------------------------- state

    def _load(self) -> LoadState:
        """Read the transcript and its compaction; returns how the transcript was found."""
        transcript = self.workspace.load(self.conversation, self.agent)
        self.messages = transcript.messages
        self.revision = transcript.revision
        self._unsaved = False
        self._view = view_for(self.workspace, self.conversation, self.agent, self.messages)
        start = self.workspace.harness_start(self.conversation, self.agent)
        ids = [m.id for m in self.messages]
        self._harness_start = ids.index(start) if start in ids else 0
        return transcript.state

    def _compactable(self) -> tuple[Message, ...]:
        """What the ladder compacts: the stored history, or for an imported transcript the
        harness compacted, its system prompt and what the harness's newest compaction
        carried on (its summary on): a compaction starts from what is in force, never
        from what the harness already summarized (still stored, and recallable)."""
        start = self._harness_start
        if not start:
            return self.messages
        return tuple(m for m in self.messages[:start] if m.role == "system") + self.messages[start:]

    def close(self) -> None:
        if self._owns_workspace:
            self.workspace.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Session({self.conversation!r}, {self.agent!r}, model={self.model!r}, {len(self.messages)} messages)"

    @property
    def pending_calls(self) -> tuple[ToolCall, ...]:
        """The last answer's tool calls still waiting for results."""
        if not self.messages or self.messages[-1].role != "assistant":
            return ()
        return tuple(self.messages[-1].tool_calls)

    @property
    def view(self) -> StoredView | None:
        """The compaction in force (None: the full transcript is sent)."""
        return self._view

    @property
    def estimator(self) -> TextEstimator:
        """The text estimate as the provider's counts corrected it (``calibration``)."""
        return self._calibration.estimator


    @property
    def calibration(self) -> Calibration:
        """What the provider's counts taught: the rates' scale and the requests' overhead."""
        return self._calibration

    def cost(self) -> CostModel:
        """Token estimates for this session's reader, with the calibrated estimator.

        One model per estimator; most recalibrations change only the overhead, which no
        message's price depends on, so the prices already worked out carry over (each
        turn then prices only its new messages); a new scale prices them again."""
        estimator = self.estimator
        if self._cost_model is None:
            self._cost_model = CostModel(self.profile, estimator, self.policy.tokenizer)
        elif self._cost_model.estimator != estimator:
            self._cost_model = self._cost_model.with_estimator(estimator)
        return self._cost_model

    def request_view(self) -> tuple[tuple[Message, ...], int]:
        """The messages the next request carries and how many of them are the stored
        compaction (the stable prefix)."""
        return request_messages(self._view, self.messages)

    def _after_view(self) -> int:
        """Index of the first stored message the view in force does not stand for (0: no view)."""
        return 0 if self._view is None else [m.id for m in self.messages].index(self._view.covers) + 1

    def estimate(self) -> int:
        """Estimated tokens of the next request (with the calibrated overhead)."""
        view, _ = self.request_view()
        return self.cost().history(view) + self.estimator.overhead

    # ----------------------------------------------------------------- the loop

    def _append(self, message: Message, *, save: bool) -> None:
        """Add ``message``, saved or (calls pending) checked; on an error nothing changes.
        What ``extend(save=False)`` left unsaved is saved first when ``message`` itself
        is not (its calls pending: the history before it is the turn boundary)."""
        messages = (*self.messages, message)
        if save:
            self.revision = self.workspace.save(self.conversation, self.agent, messages, revision=self.revision).revision
            self._unsaved = False
        else:
            validate_history(messages, allow_pending=True)
            self.flush()
        self.messages = messages

    def add_user(self, content: str | Sequence[Block]) -> Message:
        """Add the user's message (a turn boundary: saved)."""
        self._no_pending("add a user message")
        message = Message("user", (Text(content),) if isinstance(content, str) else tuple(content))
        self._append(message, save=True)
        return message

    def extend(self, messages: Sequence[Message], *, save: bool = True) -> None:
        """Append messages the harness already holds, saved once at the end (which must
        be a turn boundary): a client's history as a proxy receives it, the model's
        answers and the tool results included. Nothing changes on an error.

        ``save=False``: checked as a save checks them, but written later, by ``flush``
        or with the next message saved (the answer): a proxy forwards the request first
        and records it after, in one save with its answer. Until then a crash loses
        them from the store, and only a caller that still holds them (a client that
        sends its whole history again) may defer; anything that stores state beside the
        transcript (a compaction, a checkpoint, a branch) flushes first."""
        if not messages:
            return
        history = (*self.messages, *messages)
        if save:
            self.revision = self.workspace.save(self.conversation, self.agent, history, revision=self.revision).revision
        else:
            validate_history(history, allow_pending=False)
        self.messages = history
        self._unsaved = not save
        self._overflows = 0

    @property
    def unsaved(self) -> bool:
        """Whether the session holds messages its transcript does not (``flush`` saves them)."""
        return self._unsaved or (self.revision == 0 and bool(self.messages))

    def flush(self) -> None:
        """Save what the session holds and has not saved: what ``extend(save=False)``
        appended, or a new session's system prompt (a turn boundary either way)."""
        if self.unsaved:
            self.revision = self.workspace.save(self.conversation, self.agent, self.messages, revision=self.revision).revision
            self._unsaved = False

    def request(self, api: Api, **extra: Any) -> dict[str, Any]:
        """Keyword arguments for the SDK's create call of ``api`` (``"anthropic"``,
        ``"openai-chat"``, ``"openai-responses"`` or ``"gemini"``), with ``extra``
        (tools, max_tokens, ...) added. Compacts first when the estimate reaches the
        threshold; the compaction is persisted and reused until the next one. Below
        it, with recall on, elides a batch of old tool results once one is due."""
        built = self._request(api, extra, whole=True)
        assert built is not None
        return built

    def request_if_compacted(self, api: Api, **extra: Any) -> dict[str, Any] | None:
        """``request``, when a compaction is in force; None when none is (the whole
        history goes as it is, so a caller that holds it in the provider's shape
        already, such as the proxy, sends its own and nothing is built). The threshold,
        the compaction and the request's report are as ``request`` makes them."""
        return self._request(api, extra, whole=False)

    def next_view(self, api: Api) -> tuple[Message, ...]:
        """The messages the next request sends, as ``request`` decides them (compacting
        at the threshold, eliding a due batch), for a caller that builds the request in
        its own shapes (a framework's chat model). ``api`` is the provider API it talks
        (``measured`` and ``recover`` then apply to this view)."""
        self._request(api, {}, whole=False, build=False)
        assert self._sent is not None
        return self._sent

    def _request(self, api: Api, extra: dict[str, Any], *, whole: bool, build: bool = True) -> dict[str, Any] | None:
        provider = provider_api(api)
        self._no_pending("build a request")
        if not any(m.role != "system" for m in self.messages):
            raise UsageError("nothing to send yet: add a user message first")
        compaction, elided = None, 0
        threshold = self.threshold
        estimate = self.estimate()
        if estimate >= self.thresholds.threshold or (estimate >= threshold and self.compactor.pays(estimate)):
            compaction = self.compactor.compact_to(self.target, "proactive")
            if self.estimate() >= threshold:
                # The ladder cannot get under the threshold that bills least here (every
                # request would compact again): the window's thresholds from now on.
                self._economic = False
        else:
            elided = self.compactor.elide_batch()
        tokens = self.estimate()
        if self._grown_from is None or compaction is not None or elided:
            self._grown_from = (self._calls, tokens)
        self._calls += 1
        view, prefix = self.request_view()
        if tokens > self.thresholds.window:
            head = self.cost().history(view[: head_end(view)]) + self.estimator.overhead
            if head > self.thresholds.window:
                raise CompactionError(
                    f"the system prompt, the tools and the task alone take ~{head:,} tokens, over the {self.thresholds.window:,}-token "
                    "window: compaction keeps them verbatim, so no request can fit; a larger context_window or a shorter task would"
                )
            raise CompactionError(
                f"the request is still ~{tokens:,} tokens after compaction, over the {self.thresholds.window:,}-token window"
                + ("" if self.summarizer else "; a summarizer would free more")
            )
        request = provider.build(self.model, view, prefix, self.profile) if build and (whole or self._view is not None) else None
        if self.recall_enabled:
            extra = provider.with_tools(extra, [provider.tool(RECALL_TOOL, RECALL_DESCRIPTION, RECALL_PARAMETERS)])
        previous = self._sent
        self._sent, self._api = view, api
        tools = extra.get("tools")
        self._sent_tools = tuple(tools) if isinstance(tools, list) and tools else None
        # The very message objects, mostly: the whole previous view by identity (in C), else
        # message by message, by identity first (a deep compare is O(size)).
        shared = len(previous) if previous is not None and begins_with(view, previous) else 0
        while previous is not None and shared < min(len(previous), len(view)) and (previous[shared] is view[shared] or previous[shared] == view[shared]):
            shared += 1
        self.last_request = RequestReport(
            api=api,
            messages=len(view),
            prefix=prefix,
            tokens=tokens,
            compaction=compaction,
            prefix_kept=previous is not None and shared == len(previous),
            reused_tokens=self.cost().history(view[:shared]) + self.estimator.overhead if shared else 0,
            elided=elided,
        )
        if self.on_request is not None:
            self.on_request(self.last_request)
        return None if request is None else merge_extra(request, extra)

    def call(self, client: Any, *, api: Api | None = None, **extra: Any) -> Message:
        """One model call of the common loop, through the official SDK's ``client``:
        build the request (with ``extra``: tools, max_tokens, ...; Anthropic's
        max_tokens defaults to ``DEFAULT_MAX_TOKENS``), send it, recover from a "too
        long" rejection and send again (``recover`` raises rather than loop), add the
        response and return it. ``api`` defaults to the client's (``api_of``); other
        errors are raised as the SDK raised them."""
        api = api or api_of(client)
        build = provider_api(api)
        while True:
            request = self.request(api, **extra)
            try:
                response = build.send(client, request)
            except Exception as error:
                if parse_overflow(error) is None:
                    raise
                self.recover(error)
                continue
            message = self.add_response(response, api)
            if not self._answer_recalls():
                return message

    def _answer_recalls(self) -> bool:
        """With recall on, answer pending calls that are all ``glyphpack_recall`` (the
        harness never sees them); whether it did."""
        pending = self.pending_calls
        if not (self.recall_enabled and pending and all(c.name == RECALL_TOOL for c in pending)):
            return False
        self.add_tool_results(())
        return True

    def recall(self, ref: str, page: int = 1) -> Recalled:
        """What ``ref`` (as a compaction's stub names it) stands for, from the stored
        transcript: the exact original, page ``page`` of it when long. An unknown ref
        is an error answer, not an exception (a model's call must be answered)."""
        return recall_from(self.messages, ref, page, range_text=serialize_messages)

    def add_response(self, response: object, api: Api | None = None, *, id: str | None = None) -> Message:
        """Add the model's answer (an SDK response, its ``model_dump()``, or an assistant
        ``Message``); saved when it has no tool calls. The input tokens the provider
        counted calibrate the estimate. ``id``: the id it is stored under (default: a
        new one; the proxy gives a Responses answer its response's id)."""
        self._no_pending("add another response")
        if isinstance(response, Message):
            if response.role != "assistant":
                raise UsageError(f"a response is an assistant message, not a {response.role} one")
            reply = Reply(message=response, input_tokens=None)
        else:
            api = api or self._api
            if api is None:
                raise UsageError("add_response needs api=... (no request was built by this session)")
            reply = provider_api(api).parse(response)
        if reply.input_tokens and self._sent is not None and self.policy.tokenizer is None:
            self._learn(self._sent, reply.input_tokens)
        self._overflows = 0
        message = self._fresh_call_ids(reply.message if id is None else dataclasses.replace(reply.message, id=id))
        self._append(message, save=not message.tool_calls)
        return message

    def _fresh_call_ids(self, message: Message) -> Message:
        """``message`` with each tool call id the history already holds made unique
        (``id-2``, ``id-3``...), remembered so results may name either id."""
        calls = message.tool_calls
        if not calls:  # (the renames are read only while calls are pending: none are now)
            return message
        taken = set(call_ids(self.messages))
        renamed: dict[str, str] = {}
        for call in calls:
            fresh = unique_name(call.id, taken)
            taken.add(fresh)
            renamed[call.id] = fresh
        self._call_ids = renamed
        if all(old == new for old, new in renamed.items()):
            return message
        content = tuple(dataclasses.replace(b, id=renamed[b.id]) if isinstance(b, ToolCall) else b for b in message.content)
        return dataclasses.replace(message, content=content)

    def add_tool_results(self, results: Mapping[str, ToolOutput] | Iterable[ToolResult]) -> Message:
        """Answer every pending call (a turn boundary: saved). ``results`` maps call ids
        to their output as the tool gave it (text, bytes, JSON, a list of strings and
        blocks, a ``ToolResult`` or ``None``: see ``tool_result``); or is a sequence of
        ``ToolResult``. With recall on, ``glyphpack_recall`` calls left out are answered
        by the session. Nothing is stored unless every output is taken."""
        pending = {c.id for c in self.pending_calls}
        if not pending:
            raise UsageError("no tool calls are pending")
        if isinstance(results, Mapping):
            blocks = tuple(tool_result(call_id, output) for call_id, output in results.items())
        else:
            blocks = tuple(results) if not isinstance(results, (str, bytes)) else (results,)
            strays = [type(b).__name__ for b in blocks if not isinstance(b, ToolResult)]
            if strays:
                raise UsageError(
                    f"results must be a mapping of call ids to outputs, or ToolResult values, not {', '.join(strays)}"
                )
        # A call whose id was made unique is answered by either id.
        stored = {given: fresh for given, fresh in self._call_ids.items() if given not in pending}
        blocks = tuple(dataclasses.replace(b, call_id=stored[b.call_id]) if b.call_id in stored else b for b in blocks)
        if self.recall_enabled:
            answered = {b.call_id for b in blocks}
            blocks += tuple(
                self.recall(*_recall_arguments(c.arguments)).as_result(c.id)
                for c in self.pending_calls
                if c.name == RECALL_TOOL and c.id not in answered
            )
        given = [b.call_id for b in blocks]
        if sorted(given) != sorted(pending):
            raise UsageError(f"results must answer exactly the pending calls {sorted(pending)}, got {sorted(given)}")
        message = Message("tool", blocks)
        self._append(message, save=True)
        return message

    def measured(self, input_tokens: int) -> None:
        """The provider counted ``input_tokens`` for the last request this session built
        (for a caller that sends it and reads the usage itself, as a framework's model
        does): the estimate learns from it, as ``add_response`` does from a response."""
        if isinstance(input_tokens, bool) or not isinstance(input_tokens, int) or input_tokens < 0:
            raise UsageError(f"input_tokens must be a whole number of tokens, not {input_tokens!r}")
        if self._sent is None:
            raise UsageError("no request was built by this session to measure")
        if input_tokens and self.policy.tokenizer is None:
            self._learn(self._sent, input_tokens)

    def _learn(self, sent: Sequence[Message], measured_tokens: int) -> None:
        """Learn from the provider's count for a request carrying ``sent``, and keep what
        was learned for the next process."""
        calibration = self._calibration.learn(self.cost(), sent, measured_tokens)
        self.workspace.save_calibration(self.conversation, self.agent, calibration.to_record(), self._settings)
        self._calibration = calibration

    def _no_pending(self, what: str) -> None:
        if self.pending_calls:
            ids = ", ".join(c.id for c in self.pending_calls)
            raise UsageError(f"cannot {what} while tool calls are pending ({ids}): add their results first")

    # ----------------------------------------------------------------- compaction

    @property
    def target(self) -> int:
        """What proactive compaction aims at now (``Compactor.target``)."""
        return self.compactor.target

    @property
    def threshold(self) -> int:
        """Where the next request is compacted first (``Compactor.threshold``)."""
        return self.compactor.threshold

    def whole_below(self) -> int:
        """Estimated tokens (as ``estimate`` counts them) below which the next request
        goes whole, as the caller holds it, with nothing compacted or elided: a caller
        that forwards its client's own request (the proxy) may send one that is surely
        smaller before reading it (``Compactor.whole_below``)."""
        return self.compactor.whole_below()

    def compact(self, budget: int | None = None) -> Compaction:
        """Compact now, to ``budget`` (default: the target), and keep it when it fits and
        is no larger than the request in force (``Compactor.compact``)."""
        return self.compactor.compact(budget)

    def shake(self) -> Compaction:
        """Only the free rungs (reasoning drop, elision, image drop), kept as the view."""
        return self.compactor.shake()

    def recover(self, error: BaseException | object, *, margin: float = DEFAULT_MARGIN) -> Compaction:
        """After the provider rejected the last request as too long: compact to fit,
        trusting the provider's count; escalates, then raises ``CompactionError``: it
        never loops (``Compactor.recover``). Any other error is raised as it is."""
        return self.compactor.recover(error, margin=margin)


    # ----------------------------------------------------------------- the tree

    def checkpoint(self, name: str) -> None:
        """Mark the current end as checkpoint ``name``."""
        self._no_pending("set a checkpoint")
        self.flush()
        self.revision = self.workspace.checkpoint(self.conversation, self.agent, name).revision

    def rewind(self, name: str, digest: str) -> None:
        """Back to checkpoint ``name`` with ``digest`` (what was learned) appended. The
        explored path stays in the tree (``/tree`` shows it; ``branch`` returns to it)."""
        self._no_pending("rewind")
        self.flush()
        self.workspace.rewind(self.conversation, self.agent, name, digest)
        self._reload()

    def branch(self, message_id: str) -> None:
        """Make the path to ``message_id`` (an id or unique prefix of one in this
        conversation's tree, at a turn boundary) this agent's history; the path left
        stays in the tree."""
        self._no_pending("branch")
        self.flush()
        self.workspace.branch(self.conversation, self.agent, message_id, revision=self.revision)
        self._reload()

    def fork(self, new_conversation: str | None = None) -> str:
        """Copy this agent's history into a new conversation (new ids) and continue
        there; returns the new conversation's id. The original is untouched."""
        self._no_pending("fork")
        self.flush()
        # The workspace carries the compaction in force along (Workspace.fork): the fork's
        # next request is the one this conversation would have sent, under the new ids.
        self.conversation = self.workspace.fork(self.conversation, self.agent, new_conversation=new_conversation).conversation
        self._reload()
        return self.conversation

    def _reload(self) -> None:
        self._load()
        self._sent = None
        self._overflows = 0

    # ----------------------------------------------------------------- commands

    def command(self, line: str) -> CommandResult:
        """Run a slash command: ``/compact [BUDGET]``, ``/shake``, ``/context``,
        ``/tree``, ``/branch ID``, ``/fork [NEW_ID]``, ``/checkpoint NAME``,
        ``/rewind NAME DIGEST...``, ``/help``."""
        return run_command(self, line)


#: The recall tool's definition as its schema text is priced before any count.
RECALL_SCHEMA = {"name": RECALL_TOOL, "description": RECALL_DESCRIPTION, "parameters": RECALL_PARAMETERS}


def _recall_arguments(arguments: Mapping[str, Any]) -> tuple[Any, Any]:
    """(ref, page) of a ``glyphpack_recall`` call as the model gave them (checked by ``recall``)."""
    return arguments.get("ref"), arguments.get("page", 1)


def _schema_text(tools: object) -> str:
    """Tool schemas (SDK objects, dicts or lists of them) as the JSON text a request carries."""
    try:
        return json.dumps(tools, default=lambda o: getattr(o, "model_dump", lambda: str(o))(), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"tools must be JSON-like (dicts, lists, SDK objects), not {type(tools).__name__}: {exc}") from None


@public
def open_session(
    workspace: str | os.PathLike[str] | Workspace,
    conversation: str,
    agent: str,
    *,
    model: str,
    system: str | None = None,
    summarizer: Summarizer | Callable[[str], str] | str | None = None,
    policy: CompactionPolicy | None = None,
    context_window: int | None = None,
    threshold: int | None = None,
    target: int | None = None,
    tools: object = None,
    recall: bool = True,
) -> Session:
    """Open (resume or start) one (conversation, agent) of a workspace.

    Args:
        workspace: a directory (created if new) or an open ``Workspace``.
        model: the model id, as the SDK takes it; it decides page geometry and prices.
        system: the system prompt of a new transcript (a resumed one keeps its own).
        summarizer: the last rung; required for a model without vision. A model id
            (``"claude-haiku-4-5"``) summarizes through its SDK (``sdk_summarizer``); a
            plain function ``fn(prompt) -> summary`` is taken as ``Summarizer(fn)``.
        policy: how the ladder compacts (default with recall: the whole ladder, pages in
            the reader's gist shape; without recall: pages in the reader's exact shape,
            without elision, ``SESSION_RUNGS``, where those pages hold at least
            ``PAGES_OVER_ELISION`` characters per token, falling back to the whole ladder
            when they cannot fit; else the whole ladder).
        context_window: the model's input window (default: the model's, from the catalog:
            ``glyphpack.context_window(model)``; or a smaller one a provider's "too long"
            taught an earlier session on this transcript).
        threshold, target: proactive compaction starts at ``threshold`` estimated
            tokens and aims at ``target`` (defaults: the window less a reply reserve of
            1/8 of it, at most 32k; the requests' overhead plus half of what the
            threshold leaves after it).
        tools: the tool schemas the harness sends (as given to the SDK): the estimate
            counts them from the first request, until a provider's count calibrates it.
        recall: offer the model ``glyphpack_recall`` in every request (added to the
            tools passed to ``request``/``call``), answered by the session from the
            stored transcript: what compaction put away comes back exactly. Old tool
            results are then also elided below the threshold, in batches that keep the
            cached prefix (``Session._elide_batch``).
    """
    owns = not isinstance(workspace, Workspace)
    ws = Workspace(workspace) if not isinstance(workspace, Workspace) else workspace
    try:
        return Session(
            ws,
            conversation,
            agent,
            model=model,
            system=system,
            summarizer=summarizer,
            policy=policy,
            context_window=context_window,
            threshold=threshold,
            target=target,
            tools=tools,
            recall=recall,
            owns_workspace=owns,
        )
    except BaseException:
        if owns:
            ws.close()
        raise
