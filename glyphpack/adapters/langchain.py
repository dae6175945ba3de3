"""LangChain 1.x agents over a glyphpack workspace: agent middleware.

    from langchain.agents import create_agent
    from glyphpack.adapters.langchain import GlyphpackMiddleware

    memory = GlyphpackMiddleware("runs/ws", model="gpt-5.4")
    agent = create_agent("openai:gpt-5.4", tools=[read_file], middleware=[memory], checkpointer=checkpointer)
    agent.invoke({"messages": [{"role": "user", "content": "fix the failing test"}]}, {"configurable": {"thread_id": "task-42"}})

Each run's thread (LangGraph's ``thread_id``) is a conversation of its own, so one
compiled agent serves them all (or the middleware keeps the one ``conversation`` given).
An agent run from a tool of such a run (a sub-agent used as a tool) is kept in that run's
conversation, as an agent of its own per call.

Around each model call (``wrap_model_call``) the middleware stores the messages of the
agent's state it has not stored yet (at turn boundaries, in the workspace's transcript
and session tree), sends the model the session's view in their place (compacting at the
threshold, eliding old results in batches, recovering from "too long" and sending
again) and learns from the provider's count. The agent's state keeps every message as
it was: only what is sent changes. ``glyphpack_recall`` is one of the agent's tools,
registered by the middleware. Unlike ``SummarizationMiddleware``, nothing is replaced
in the state and everything put away comes back on request. The framework packages are
imported here only (``pip install '.[langchain]'``).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse, ToolCallRequest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from .._compaction.summarize import Summarizer
from .._errors import UsageError
from .._history.messages import Block, Image, Message, Opaque, Text, ToolCall, ToolResult
from .._history.recall import RECALL_DESCRIPTION, RECALL_PARAMETERS, RECALL_TOOL
from .._history.store import Workspace
from .._session.session import Session
from .._types import Api
from .._wire.common import image_from_url
from ._common import (
    FrameworkSessions,
    calling_run,
    framework_api,
    recall_answer,
    recover_or_raise,
    store_turns,
    sub_agent,
    tool_call,
    unsaved_suffix,
)

FRAMEWORK = "LangChain"


# ------------------------------------------------------------------ conversion


def _blocks(content: str | list[Any], where: str) -> list[Block]:
    """A LangChain message's content as blocks: text, images (LangChain's standard
    ``image`` block, OpenAI's ``image_url``), anything else kept as it came."""
    if isinstance(content, str):
        return [Text(content)] if content else []
    blocks: list[Block] = []
    for part in content:
        if isinstance(part, str):
            blocks.append(Text(part))
            continue
        if not isinstance(part, dict):
            raise UsageError(f"{FRAMEWORK}: {where} holds a content part that is not an object: {type(part).__name__}")
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str) and set(part) <= {"type", "text"}:
            blocks.append(Text(part["text"]))
        elif kind == "image" and isinstance(part.get("base64"), str) and set(part) <= {"type", "base64", "mime_type"}:
            blocks.append(Image(part.get("mime_type") or "image/png", base64.b64decode(part["base64"])))
        elif kind == "image_url" and isinstance(part.get("image_url"), dict) and set(part) == {"type", "image_url"}:
            blocks.append(image_from_url(part["image_url"].get("url")))
        else:
            blocks.append(Opaque(str(kind), dict(part)))
    return blocks


def _part(block: Block) -> Any:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    if isinstance(block, Image):
        if block.data is None:
            return {"type": "image", "url": block.ref}
        return {"type": "image", "base64": base64.b64encode(block.data).decode("ascii"), "mime_type": block.media_type}
    if isinstance(block, Opaque):
        return dict(block.payload)
    raise UsageError(f"{FRAMEWORK}: a {type(block).__name__} block has no LangChain content part")


def _content(blocks: Sequence[Block]) -> str | list[Any]:
    """Blocks as LangChain content: one text is a string, as LangChain writes it."""
    if not blocks:
        return ""
    if len(blocks) == 1 and isinstance(blocks[0], Text):
        return blocks[0].text
    return [_part(b) for b in blocks]


def from_langchain(messages: Sequence[BaseMessage]) -> list[Message]:
    """LangChain messages as glyphpack messages: consecutive ``ToolMessage``s (the
    answers to one ``AIMessage``'s calls) form one tool message."""
    out: list[Message] = []
    for index, message in enumerate(messages):
        where = f"message {index} ({type(message).__name__})"
        if isinstance(message, SystemMessage):
            out.append(Message("system", tuple(_blocks(message.content, where))))
        elif isinstance(message, HumanMessage):
            out.append(Message("user", tuple(_blocks(message.content, where))))
        elif isinstance(message, AIMessage):
            calls = [ToolCall(c["id"] or f"call_{index}_{n}", c["name"], dict(c["args"])) for n, c in enumerate(message.tool_calls)]
            out.append(Message("assistant", (*_blocks(message.content, where), *calls)))
        elif isinstance(message, ToolMessage):
            # A tool result holds text and images: any other part is kept as its JSON text.
            parts = [b if isinstance(b, (Text, Image)) else Text(json.dumps(_part(b), sort_keys=True)) for b in _blocks(message.content, where)]
            result = ToolResult(message.tool_call_id, tuple(parts), is_error=message.status == "error")
            if out and out[-1].role == "tool":
                out[-1] = out[-1].with_content((*out[-1].content, result))
            else:
                out.append(Message("tool", (result,)))
        else:
            raise UsageError(f"{FRAMEWORK}: {where} is not a system, human, AI or tool message")
    return out


def _run_config() -> tuple[str | None, str | None]:
    """The ``thread_id`` and the agent's name (``create_agent(name=...)``) of the LangGraph
    run this is called in (``None`` where there is none)."""
    try:
        from langgraph.config import get_config

        config = get_config()
    except RuntimeError:  # not inside a run
        return None, None
    thread = config.get("configurable", {}).get("thread_id")
    name = config.get("metadata", {}).get("lc_agent_name")
    return (thread if isinstance(thread, str) and thread else None), (name if isinstance(name, str) and name else None)


def to_langchain(messages: Sequence[Message]) -> list[AnyMessage]:
    """glyphpack messages as LangChain messages (the inverse of ``from_langchain``)."""
    out: list[AnyMessage] = []
    for message in messages:
        if message.role == "system":
            out.append(SystemMessage(content=_content(message.content)))
        elif message.role == "user":
            out.append(HumanMessage(content=_content(message.content)))
        elif message.role == "assistant":
            calls = [{"id": c.id, "name": c.name, "args": dict(c.arguments), "type": "tool_call"} for c in message.tool_calls]
            blocks = [b for b in message.content if not isinstance(b, ToolCall)]
            out.append(AIMessage(content=_content(blocks), tool_calls=calls))
        else:
            for result in message.tool_results:
                out.append(
                    ToolMessage(content=_content(result.content), tool_call_id=result.call_id, status="error" if result.is_error else "success")
                )
    return out


# ------------------------------------------------------------------ the middleware


class GlyphpackMiddleware(AgentMiddleware):
    """Agent middleware keeping each thread of an agent as a conversation of a glyphpack
    workspace: one compiled agent serves many threads (LangGraph's ``thread_id``, from the
    run's config), each its own conversation, or the one ``conversation`` given.

    Args:
        workspace: a folder (created if new), a PostgreSQL URL or an open ``Workspace``.
        conversation: the one conversation every run keeps (default: each run's
            ``config["configurable"]["thread_id"]``).
        model: the model id the agent runs (page geometry, window and prices).
        agent: the glyphpack agent the transcript belongs to (default ``"agent"``).
        api: the provider API the chat model talks (default: its provider's own).
        summarizer, context_window, threshold, recall: as ``glyphpack.open_session``.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | Workspace,
        conversation: str | None = None,
        *,
        model: str,
        agent: str = "agent",
        api: Api | None = None,
        summarizer: Summarizer | Callable[[str], str] | str | None = None,
        context_window: int | None = None,
        threshold: int | None = None,
        recall: bool = True,
    ):
        super().__init__()
        self._sessions = FrameworkSessions(workspace, agent=agent, summarizer=summarizer, context_window=context_window,
                                           threshold=threshold, recall=recall)
        self.workspace = self._sessions.workspace
        self.conversation = conversation
        self.model = model
        self.api: Api = framework_api(model, api)
        if conversation is not None:
            self.session_for(conversation)  # a bad conversation id is said now
        self.tools: list[BaseTool] = [self.recall_tool()] if recall else []

    def session_for(self, conversation: str, agent: str | None = None) -> Session:
        """The glyphpack session of thread ``conversation`` (and ``agent``, default the
        middleware's), opened on first use (from the workspace: a thread resumed in a new
        process goes on where it stood)."""
        return self._sessions.open(conversation, self.model, agent)

    def _run_key(self) -> tuple[str, str]:
        """The conversation and agent this run is kept as. A run started inside a tool call
        of a glyphpack run (an agent used as a tool) is a sub-agent of that run: its
        conversation, as an agent named by this agent's name and the call. Any other run is
        the conversation given, else its thread."""
        thread, name = _run_config()
        nested = sub_agent(name or self._sessions.agent)
        if nested is not None:
            return nested
        conversation = self.conversation or thread
        if conversation is None:
            raise UsageError(f"{FRAMEWORK}: run the agent with config={{'configurable': {{'thread_id': ...}}}}, "
                             "or give GlyphpackMiddleware the conversation it keeps")
        return conversation, self._sessions.agent

    @property
    def session(self) -> Session:
        """The session of the run this is called in (a sub-agent's its own), or of the
        conversation given."""
        return self.session_for(*self._run_key())

    def recall_tool(self) -> BaseTool:
        """``glyphpack_recall`` as a LangChain tool: what a compaction's note names comes
        back exactly from the stored transcript."""

        def run(ref: str, page: int = 1) -> str | list[Any]:
            # Called as a tool of the run it recalls for (a sub-agent's its own).
            calling = calling_run()
            session = self.session_for(*calling) if calling else self.session
            text, images, is_error = recall_answer(session, {"ref": ref, "page": page})
            if is_error:
                return f"[error] {text}"
            return [{"type": "text", "text": text}, *(_part(i) for i in images)] if images else text

        return StructuredTool.from_function(func=run, name=RECALL_TOOL, description=RECALL_DESCRIPTION, args_schema=dict(RECALL_PARAMETERS))

    def sent_messages(self, messages: Sequence[AnyMessage], session: Session | None = None) -> list[AnyMessage]:
        """Store what of the agent's ``messages`` is new, and return what to send in their
        place (the view of ``session``, default this run's, compacted at the threshold)."""
        session = session or self.session
        store_turns(session, unsaved_suffix(session, from_langchain(messages), FRAMEWORK))
        return to_langchain([m for m in session.next_view(self.api) if m.role != "system"])

    @staticmethod
    def _answered(session: Session, response: Any, messages: Sequence[AnyMessage]) -> None:
        """Learn the provider's count; store an answer that ends the turn (one with calls
        is stored with its results, at the next model call)."""
        result = getattr(response, "model_response", response)
        answers = [m for m in getattr(result, "result", [result]) if isinstance(m, AIMessage)]
        if not answers:
            return
        usage = answers[-1].usage_metadata
        if usage and usage.get("input_tokens"):
            session.measured(int(usage["input_tokens"]))
        if not answers[-1].tool_calls:
            store_turns(session, unsaved_suffix(session, from_langchain([*messages, answers[-1]]), FRAMEWORK))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        session = self.session  # this run's thread, once: the calls below all keep it
        while True:
            try:
                response = handler(request.override(messages=self.sent_messages(request.messages, session)))
            except Exception as error:
                recover_or_raise(session, error)
                continue
            self._answered(session, response, request.messages)
            return response

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> Any:
        session = self.session
        while True:
            try:
                response = await handler(request.override(messages=self.sent_messages(request.messages, session)))
            except Exception as error:
                recover_or_raise(session, error)
                continue
            self._answered(session, response, request.messages)
            return response

    def _running(self, request: ToolCallRequest) -> AbstractContextManager[None]:
        """While ``request``'s tool runs: an agent it runs is a sub-agent of this run."""
        return tool_call(*self._run_key(), str(request.tool_call.get("id") or request.tool_call["name"]))

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]) -> Any:
        with self._running(request):
            return handler(request)

    async def awrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Any]]) -> Any:
        with self._running(request):
            return await handler(request)

    def close(self) -> None:
        self._sessions.close()


__all__ = ["GlyphpackMiddleware", "from_langchain", "to_langchain"]
