"""The OpenAI Agents SDK (``openai-agents``) over a glyphpack workspace.

    from agents import Agent, Runner
    from glyphpack.adapters.openai_agents import GlyphpackSession, compacting_agent

    agent = compacting_agent(Agent(name="coder", instructions="You fix bugs.", tools=[read_file]))
    session = GlyphpackSession("runs/ws", "task-42", model="gpt-5.4")
    result = await Runner.run(agent, "fix the failing test", session=session)

``GlyphpackSession`` is the SDK's ``Session``, one per conversation: the runner's items
go into the workspace's transcript (saved at turn boundaries, so a run resumed in a new
process sends what the first would have), and ``get_items`` returns the compacted view
in the SDK's item shapes. ``compacting_agent(agent)`` gives the agent, and every agent
its handoffs reach, a model that sends every request through the session its run is
given (compacting at the threshold, learning the provider's counts, recovering from
"too long" and sending again) and the ``glyphpack_recall`` tool, which the runner
executes like any function tool; one agent object serves every conversation
(``session.agent(agent)`` binds one to a session). The framework package is
imported here only (``pip install '.[openai-agents]'``).
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

from agents import Agent, FunctionTool, Handoff, RunContextWrapper, ToolOutputImage, ToolOutputText
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.models.multi_provider import MultiProvider

from .._compaction.recovery import parse_overflow
from .._compaction.summarize import Summarizer
from .._errors import UsageError
from .._history.messages import pending_calls
from .._history.recall import RECALL_DESCRIPTION, RECALL_PARAMETERS, RECALL_TOOL
from .._history.store import Workspace
from .._session.session import Session, open_session
from .._types import Api
from .._wire.common import image_url
from .._wire.openai_responses import from_openai_responses, to_openai_responses
from ._common import recall_answer, same_content, store_turns

API: Api = "openai-responses"
FRAMEWORK = "OpenAI Agents SDK"


def _plain(item: object) -> dict[str, Any]:
    """An input item as plain JSON (the runner may hand pydantic models)."""
    dump = getattr(item, "model_dump", None)
    data = dump(exclude_unset=True, mode="json") if callable(dump) else item
    if not isinstance(data, dict):
        raise UsageError(f"{FRAMEWORK}: a session item must be a JSON object, not {type(item).__name__}")
    return json.loads(json.dumps(data))


def _role(item: dict[str, Any]) -> str:
    """The neutral role of the message an input item belongs to."""
    kind = item.get("type", "message")
    if kind == "message":
        return str(item.get("role"))
    return "tool" if kind == "function_call_output" else "assistant"


class GlyphpackSession:
    """The Agents SDK's ``Session`` protocol over one (conversation, agent) of a
    glyphpack workspace (a folder, or ``postgresql://...``).

    Args:
        workspace: a folder (created if new), a PostgreSQL URL or an open ``Workspace``.
        session_id: the conversation.
        model: the model id the agent runs (page geometry, window and prices).
        agent_name: the glyphpack agent the transcript belongs to (default ``"agent"``).
        summarizer, context_window, threshold, recall: as ``glyphpack.open_session``.
    """

    session_settings = None  # the SDK's per-session read limit: the whole view is what the model sees

    def __init__(
        self,
        workspace: str | os.PathLike[str] | Workspace,
        session_id: str,
        *,
        model: str,
        agent_name: str = "agent",
        summarizer: Summarizer | Callable[[str], str] | str | None = None,
        context_window: int | None = None,
        threshold: int | None = None,
        recall: bool = True,
    ):
        self.session_id = session_id
        self.glyphpack: Session = open_session(
            workspace, session_id, agent_name, model=model, summarizer=summarizer,
            context_window=context_window, threshold=threshold, recall=recall,
        )
        # Items of a turn whose calls are not all answered yet: glyphpack stores turn
        # boundaries only, so they wait here until their outputs come.
        self._held: list[dict[str, Any]] = []

    # ------------------------------------------------------------ the protocol

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The compacted view in force (the whole history before any compaction), as
        Responses input items, with any items of an unfinished turn; the newest
        ``limit`` when given. The runner reads it as a run starts: from then on that
        run's model calls go through this session (``compacting_agent``)."""
        _RUNNING.set(self)
        view, _ = self.glyphpack.request_view()
        _, items = to_openai_responses(view)
        items = [*items, *self._held]
        return list(items if limit is None else items[-limit:] if limit > 0 else [])  # type: ignore[arg-type]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Keep the runner's new items; saved once their turn's calls are all answered."""
        _RUNNING.set(self)
        held = [*self._held, *(_plain(item) for item in items)]
        # The longest run of whole messages that ends at a turn boundary is saved now.
        for cut in range(len(held), 0, -1):
            if cut < len(held) and _role(held[cut]) == _role(held[cut - 1]):
                continue  # the next item belongs to the same message
            messages = from_openai_responses(held[:cut])
            if not pending_calls(messages):
                store_turns(self.glyphpack, messages)
                held = held[cut:]
                break
        self._held = held

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item (the path left stays in the session tree)."""
        if self._held:
            return self._held.pop()  # type: ignore[return-value]
        session = self.glyphpack
        if not session.messages:
            return None
        _, items = to_openai_responses(session.messages)
        if not items:
            return None
        kept = from_openai_responses(items[:-1])
        if pending_calls(kept):
            raise UsageError(
                f"{FRAMEWORK}: popping the newest item of {session.conversation}/{session.agent} would leave "
                f"calls {pending_calls(kept)} unanswered; glyphpack stores turn boundaries only"
            )
        system = [m for m in session.messages if m.role == "system"]
        # Messages that keep their content keep their ids (the tree shares their path).
        old = [m for m in session.messages if m.role != "system"]
        history = [*system, *(o if n < len(old) and same_content(o, new) else new for n, (o, new) in enumerate(zip(old, kept)))]
        session.revision = session.workspace.save(
            session.conversation, session.agent, history, revision=session.revision, replace=True
        ).revision
        session.messages = tuple(history)
        return items[-1]  # type: ignore[return-value]

    async def clear_session(self) -> None:
        """Start the conversation over (what it held stays in the session tree)."""
        session = self.glyphpack
        self._held = []
        system = tuple(m for m in session.messages if m.role == "system")
        session.revision = session.workspace.save(
            session.conversation, session.agent, system, revision=session.revision, replace=True
        ).revision
        session.messages = system

    # ------------------------------------------------------------ the agent

    @property
    def recall_tool(self) -> FunctionTool:
        """``glyphpack_recall`` as a function tool the runner executes: what a
        compaction's note names comes back exactly from the stored transcript."""
        return _recall_tool(self)

    def agent(self, agent: Agent[Any], model: Model | None = None) -> Agent[Any]:
        """``agent`` sending through this session (``compacting_agent`` bound to it)."""
        return _wrapped(agent, model, self, self.glyphpack.recall_enabled)

    def model_input(self, given: str | list[TResponseInputItem]) -> list[TResponseInputItem]:
        """What to send in place of the runner's ``given`` input: the session's request
        (compacted at the threshold). The runner saves each turn before it asks for
        the next, so ``given`` must end where the stored history does."""
        if self._held:
            raise UsageError(f"{FRAMEWORK}: a model call while calls {pending_calls(from_openai_responses(self._held))} are unanswered")
        items = [{"role": "user", "content": given}] if isinstance(given, str) else [_plain(i) for i in given]
        tail = [m for m in from_openai_responses(items) if m.role != "system"][-1:]
        stored = [m for m in self.glyphpack.messages if m.role != "system"][-1:]
        if not tail or not stored or not same_content(tail[0], stored[0]):
            raise UsageError(
                f"{FRAMEWORK}: the run's input ends with what {self.glyphpack.conversation}/{self.glyphpack.agent} "
                f"has not stored: pass session=<this GlyphpackSession> to Runner.run"
            )
        return list(self.glyphpack.request(API)["input"])

    def measured(self, response: ModelResponse) -> None:
        """Calibrate the estimate with the provider's count for the request sent."""
        tokens = getattr(response.usage, "input_tokens", 0)
        if tokens:
            self.glyphpack.measured(tokens)

    def close(self) -> None:
        self.glyphpack.close()


#: The session of the run in progress (each run is its own task, its own context): set
#: when the runner reads or keeps its items.
_RUNNING: contextvars.ContextVar[GlyphpackSession | None] = contextvars.ContextVar("glyphpack_agents_session", default=None)


def _session_of(bound: GlyphpackSession | None) -> GlyphpackSession:
    session = bound or _RUNNING.get()
    if session is None:
        raise UsageError(f"{FRAMEWORK}: run the agent with session=<a GlyphpackSession> (Runner.run(agent, input, session=...))")
    return session


def compacting_agent(agent: Agent[Any], model: Model | None = None, *, recall: bool = True) -> Agent[Any]:
    """``agent`` sending through whichever ``GlyphpackSession`` its run is given
    (``Runner.run(agent, input, session=...)``), so one agent object serves every
    conversation, as the SDK's sessions are meant: each run compacts, recovers and
    recalls in its own session. Every agent a run can reach by handoffs goes the same
    way; ``recall``: add the recall tool (a session that has recall off answers it
    with an error)."""
    return _wrapped(agent, model, None, recall)


def _wrapped(agent: Agent[Any], model: Model | None, bound: GlyphpackSession | None, recall: bool) -> Agent[Any]:
    """``agent`` and every agent its handoffs reach (an ``Agent`` listed, or one a
    ``Handoff`` returns) sending through ``bound`` (None: the run's session), with the
    recall tool added when ``recall``. ``model`` defaults to each agent's own (a name is
    resolved by the SDK's default provider)."""
    wrapped: dict[int, Agent[Any]] = {}
    tool = _recall_tool(bound)

    def wrap(each: Agent[Any], given: Model | None) -> Agent[Any]:
        if id(each) in wrapped:  # handoffs may lead back: each agent wrapped once
            return wrapped[id(each)]
        inner = given or each.model
        if not isinstance(inner, Model):
            named = inner if isinstance(inner, str) else bound.glyphpack.model if bound is not None else None
            inner = MultiProvider().get_model(named)
        clone = each.clone(model=CompactingModel(inner, bound), tools=[*each.tools, tool] if recall else list(each.tools))
        wrapped[id(each)] = clone
        clone.handoffs = [wrap(h, None) if isinstance(h, Agent) else _wrapped_handoff(h, lambda a: wrap(a, None)) for h in each.handoffs]
        return clone

    return wrap(agent, model)


def _recall_tool(bound: GlyphpackSession | None) -> FunctionTool:
    """``glyphpack_recall`` answered from ``bound``'s transcript (None: the run's session's)."""

    async def invoke(context: RunContextWrapper[Any], arguments: str) -> Any:
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            return f"[error] the arguments are not JSON: {exc}"
        text, images, is_error = recall_answer(_session_of(bound).glyphpack, parsed if isinstance(parsed, dict) else {})
        if is_error:
            return f"[error] {text}"
        return [ToolOutputText(text=text), *(ToolOutputImage(image_url=image_url(i)) for i in images)] if images else text

    return FunctionTool(
        name=RECALL_TOOL, description=RECALL_DESCRIPTION, params_json_schema=dict(RECALL_PARAMETERS),
        on_invoke_tool=invoke, strict_json_schema=False,
    )


def _wrapped_handoff(handoff: Handoff[Any, Any], wrap: Callable[[Agent[Any]], Agent[Any]]) -> Handoff[Any, Any]:
    """``handoff`` handing over to its agent sending through the session (``wrap``)."""
    invoke = handoff.on_invoke_handoff

    async def on_invoke_handoff(context: RunContextWrapper[Any], arguments: str) -> Agent[Any]:
        return wrap(await invoke(context, arguments))

    return dataclasses.replace(handoff, on_invoke_handoff=on_invoke_handoff)


class CompactingModel(Model):
    """A model of the Agents SDK that sends the glyphpack session's request in place of
    the runner's input, and on a "too long" rejection compacts further and sends again
    (``Session.recover`` escalates, then raises: it never loops)."""

    def __init__(self, model: Model, session: GlyphpackSession | None = None):
        self.model = model
        self.bound = session

    @property
    def session(self) -> GlyphpackSession:
        """The session this model sends through: the one it was bound to, else the run's."""
        return _session_of(self.bound)

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        session = self.session
        while True:
            sent = session.model_input(input)
            try:
                response = await self.model.get_response(system_instructions, sent, *args, **kwargs)
            except Exception as error:
                if parse_overflow(error) is None:
                    raise
                session.glyphpack.recover(error)
                continue
            session.measured(response)
            return response

    async def stream_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        session = self.session
        while True:
            sent = session.model_input(input)
            started = False
            try:
                async for event in self.model.stream_response(system_instructions, sent, *args, **kwargs):
                    started = True
                    yield event
                    response = getattr(event, "response", None)
                    if getattr(event, "type", "") == "response.completed" and response is not None and response.usage:
                        session.glyphpack.measured(response.usage.input_tokens)
                return
            except Exception as error:
                # Once an event went out the runner holds part of an answer: not retried here.
                if started or parse_overflow(error) is None:
                    raise
                session.glyphpack.recover(error)

    async def close(self) -> None:
        close = getattr(self.model, "close", None)
        if callable(close):
            await close()


__all__ = ["CompactingModel", "GlyphpackSession", "compacting_agent"]
