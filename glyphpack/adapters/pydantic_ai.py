"""Pydantic AI agents over a glyphpack workspace: a capability.

    from pydantic_ai import Agent
    from glyphpack.adapters.pydantic_ai import GlyphpackHistory

    memory = GlyphpackHistory("runs/ws")
    agent = Agent("openai:gpt-5.4", tools=[read_file], capabilities=[memory])
    result = agent.run_sync("fix the failing test", conversation_id="task-42")

Each run is the conversation of its ``conversation_id``; an agent a tool delegates to is
kept in the delegating run's conversation, as an agent of its own per call.

Before each attempt at a model request (``prepare_model_request``) the capability stores
the run's messages it has not stored yet (at turn boundaries, in the workspace's
transcript and session tree) and puts the session's view in the request in their place
(compacting at the threshold, eliding old results in batches). The change is the
request's only: the run's own history (``result.all_messages()``) keeps every message
as it was, where a history processor's output would replace it. A "too long" rejection
compacts further and attempts again (``RetryModelRequest``); the provider's counts
calibrate the estimate; ``glyphpack_recall`` is one of the agent's tools. The framework
package is imported here only (``pip install '.[pydantic-ai]'``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import RetryModelRequest
from pydantic_ai.messages import (
    ERROR_OUTCOMES,
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import FunctionToolset

from .._compaction.summarize import Summarizer
from .._errors import UsageError
from .._history.messages import Block, Image, Message, Opaque, Text, ToolCall, ToolResult
from .._history.recall import RECALL_DESCRIPTION, RECALL_TOOL
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

FRAMEWORK = "Pydantic AI"


# ------------------------------------------------------------------ conversion


def _user_blocks(content: str | Sequence[Any], where: str) -> list[Block]:
    if isinstance(content, str):
        return [Text(content)]
    blocks: list[Block] = []
    for part in content:
        if isinstance(part, str):
            blocks.append(Text(part))
        elif isinstance(part, BinaryContent) and part.is_image:
            blocks.append(Image(part.media_type, bytes(part.data)))
        elif isinstance(part, ImageUrl):
            blocks.append(image_from_url(part.url))
        else:
            raise UsageError(f"{FRAMEWORK}: {where} holds a {type(part).__name__}, which glyphpack does not store yet")
    return blocks


def _text(content: object) -> str:
    return content if isinstance(content, str) else json.dumps(content, default=str, sort_keys=True)


def from_pydantic_ai(messages: Sequence[ModelMessage]) -> list[Message]:
    """Pydantic AI messages as glyphpack messages: a request's system prompts, tool
    returns and user prompts become system, tool and user messages (a return that
    failed or asks for a retry an error result, sent back as ``outcome="failed"``); a response's text and calls one assistant message (its
    thinking kept as it came). A tool's return that is not a string is kept as its JSON."""
    out: list[Message] = []

    def add(role: str, block: Block) -> None:
        if out and out[-1].role == role and role in ("tool", "user", "system"):
            out[-1] = out[-1].with_content((*out[-1].content, block))
        else:
            out.append(Message(role, (block,)))  # type: ignore[arg-type]

    for index, message in enumerate(messages):
        where = f"message {index} ({type(message).__name__})"
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    add("system", Text(part.content))
                elif isinstance(part, UserPromptPart):
                    for block in _user_blocks(part.content, where):
                        add("user", block)
                elif isinstance(part, ToolReturnPart):
                    failed = part.outcome in ERROR_OUTCOMES
                    add("tool", ToolResult(part.tool_call_id, (Text(_text(part.content)),), is_error=failed))
                elif isinstance(part, RetryPromptPart) and part.tool_name is not None:  # before ToolReturnPart's outcome
                    add("tool", ToolResult(part.tool_call_id, (Text(_text(part.content)),), is_error=True))
                elif isinstance(part, (RetryPromptPart, RetryFeedbackPart)):
                    add("user", Text(part.model_response()))
                else:
                    raise UsageError(f"{FRAMEWORK}: {where} holds a {type(part).__name__}, which glyphpack does not store yet")
        elif isinstance(message, ModelResponse):
            blocks: list[Block] = []
            for said in message.parts:
                if isinstance(said, TextPart):
                    blocks.append(Text(said.content))
                elif isinstance(said, ToolCallPart):
                    blocks.append(ToolCall(said.tool_call_id, said.tool_name, said.args_as_dict()))
                else:  # thinking, builtin tools, files: kept as they came, not sent again
                    blocks.append(Opaque(said.part_kind, json.loads(json.dumps(_dump(said), default=str))))
            out.append(Message("assistant", tuple(blocks)))
        else:
            raise UsageError(f"{FRAMEWORK}: {where} is neither a ModelRequest nor a ModelResponse")
    return out


#: Reads back a response part ``_dump`` wrote (its ``part_kind`` names its class).
_RESPONSE_PART: TypeAdapter[ModelResponsePart] = TypeAdapter(ModelResponsePart)


def _dump(part: object) -> dict[str, Any]:
    return TypeAdapter(type(part)).dump_python(part, mode="json")


def to_pydantic_ai(messages: Sequence[Message]) -> list[ModelMessage]:
    """glyphpack messages as Pydantic AI messages (the inverse of ``from_pydantic_ai``
    for what it takes); consecutive system, user and tool messages form one request."""
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    out: list[ModelMessage] = []
    parts: list[ModelRequestPart] = []

    def user_content(blocks: Sequence[Block]) -> str | list[Any]:
        if len(blocks) == 1 and isinstance(blocks[0], Text):
            return blocks[0].text
        return [b.text if isinstance(b, Text) else _image(b) for b in blocks if isinstance(b, (Text, Image))]

    for message in messages:
        if message.role == "assistant":
            if parts:
                out.append(ModelRequest(parts=parts))
                parts = []
            response: list[ModelResponsePart] = []
            for block in message.content:
                if isinstance(block, Text):
                    response.append(TextPart(block.text))
                elif isinstance(block, ToolCall):
                    response.append(ToolCallPart(block.name, dict(block.arguments), tool_call_id=block.id))
                elif isinstance(block, Opaque) and block.kind == block.payload.get("part_kind"):  # thinking and the like, as they came
                    response.append(_RESPONSE_PART.validate_python(block.payload))
            out.append(ModelResponse(parts=response))
        elif message.role == "system":
            parts.extend(SystemPromptPart(b.text) for b in message.content if isinstance(b, Text))
        elif message.role == "user":
            parts.append(UserPromptPart(user_content(message.content)))
        else:
            for result in message.tool_results:
                name = names.get(result.call_id, "")
                text = result.text
                images = result.images()
                outcome: Any = "failed" if result.is_error else "success"
                parts.append(ToolReturnPart(name, text, tool_call_id=result.call_id, outcome=outcome))
                if images:  # a tool return carries no images: they follow as the user's
                    parts.append(UserPromptPart([_image(i) for i in images]))
    if parts:
        out.append(ModelRequest(parts=parts))
    return out


def _image(image: Image) -> BinaryContent | ImageUrl:
    if image.data is None:
        return ImageUrl(url=image.ref or "")
    return BinaryContent(data=image.data, media_type=image.media_type)


# ------------------------------------------------------------------ the capability


def _api_of(model: object, otherwise: Api) -> Api:
    """The API a Pydantic AI model talks, by its class: ``openai:`` models are
    ``OpenAIResponsesModel`` in 2.x (``openai-chat:`` the Chat Completions one)."""
    kind = type(model).__name__
    if kind == "OpenAIResponsesModel":
        return "openai-responses"
    if kind in ("OpenAIChatModel", "OpenAIModel"):
        return "openai-chat"
    if kind == "AnthropicModel":
        return "anthropic"
    if kind in ("GoogleModel", "GeminiModel"):
        return "gemini"
    return otherwise


class GlyphpackHistory(AbstractCapability[Any]):
    """A Pydantic AI capability keeping each conversation of an agent in a glyphpack
    workspace: each run's own (Pydantic AI's ``conversation_id``: passed to the run, or
    inherited from the message history it continues), or the one ``conversation`` given.

    Args:
        workspace: a folder (created if new), a PostgreSQL URL or an open ``Workspace``.
        conversation: the one conversation every run keeps (default: each run's
            ``conversation_id``).
        model: the model id the agent runs (page geometry, window and prices; default:
            the agent's own, read at each run's first request).
        agent: the glyphpack agent the transcript belongs to (default ``"agent"``).
        api: the provider API the model talks (default: the one the run's model class
            talks, read at each request: Responses for ``openai:`` models).
        summarizer, context_window, threshold, recall: as ``glyphpack.open_session``.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | Workspace,
        conversation: str | None = None,
        *,
        model: str | None = None,
        agent: str = "agent",
        api: Api | None = None,
        summarizer: Summarizer | Callable[[str], str] | str | None = None,
        context_window: int | None = None,
        threshold: int | None = None,
        recall: bool = True,
    ):
        self._sessions = FrameworkSessions(workspace, agent=agent, summarizer=summarizer, context_window=context_window,
                                           threshold=threshold, recall=recall)
        self.workspace = self._sessions.workspace
        self.conversation = conversation
        self._model = model
        self._recall = recall
        self._api_given = api is not None
        self._last: Session | None = None
        self.api: Api = api or (framework_api(model, None) if model else "openai-responses")
        if conversation is not None and model is not None:  # a bad id or model is said now
            self.session_for(conversation, model)

    def session_for(self, conversation: str, model: str, agent: str | None = None) -> Session:
        """The glyphpack session of ``conversation`` (and ``agent``, default the
        capability's), opened on first use (from the workspace: a conversation continued in
        a new process goes on where it stood); its model the one given to the capability,
        else ``model``."""
        return self._sessions.open(conversation, self._model or model, agent)

    def _run_key(self, ctx: RunContext[Any]) -> tuple[str, str]:
        """The conversation and agent the run ``ctx`` is of is kept as. A run started inside
        a tool call of a glyphpack run (delegation: an agent run from a tool) is a sub-agent
        of that run: its conversation, as an agent named by this agent's name and the call.
        Any other run is the conversation given, else the run's ``conversation_id``."""
        nested = sub_agent(ctx.agent.name if ctx.agent is not None and ctx.agent.name else self._sessions.agent)
        if nested is not None:
            return nested
        conversation = self.conversation or ctx.conversation_id
        if not conversation:
            raise UsageError(f"{FRAMEWORK}: the run has no conversation_id: pass conversation_id=... to the run, or give GlyphpackHistory one")
        return conversation, self._sessions.agent

    def _run_session(self, ctx: RunContext[Any], key: tuple[str, str] | None = None) -> Session:
        """The session of the run ``ctx`` is of (or of ``key``); its model the one given,
        else the run's."""
        conversation, agent = key or self._run_key(ctx)
        self._last = self.session_for(conversation, ctx.model.model_name, agent)
        return self._last

    @property
    def session(self) -> Session:
        """The session of the conversation given, else of the last run's."""
        if self.conversation is not None and (self.conversation, self._sessions.agent) in self._sessions.sessions:
            return self._sessions.sessions[(self.conversation, self._sessions.agent)]
        if self._last is None:
            raise UsageError(f"{FRAMEWORK}: no model is known yet: pass model=... or run the agent once")
        return self._last

    def history(self, conversation: str) -> list[ModelMessage]:
        """The stored history of ``conversation`` as Pydantic AI messages, each naming the
        conversation: ``agent.run(prompt, message_history=memory.history(id))`` continues
        it, in this process or a new one, from the workspace alone ([] for a new one)."""
        messages = to_pydantic_ai(self.workspace.load(conversation, self._sessions.agent).messages)
        for message in messages:
            message.conversation_id = conversation
        return messages

    def get_toolset(self) -> FunctionToolset[Any] | None:
        """``glyphpack_recall``: what a compaction's note names comes back exactly, from
        the transcript of the run that calls it."""
        if not self._recall:
            return None
        toolset: FunctionToolset[Any] = FunctionToolset()

        def glyphpack_recall(ctx: RunContext[Any], ref: str, page: int = 1) -> str | list[Any]:
            # Called as a tool of the run it recalls for (a delegate's its own).
            text, images, is_error = recall_answer(self._run_session(ctx, calling_run()), {"ref": ref, "page": page})
            if is_error:
                return f"[error] {text}"
            return [text, *(_image(i) for i in images)] if images else text

        toolset.add_function(glyphpack_recall, name=RECALL_TOOL, description=RECALL_DESCRIPTION)
        return toolset

    def sent_messages(self, messages: Sequence[ModelMessage], session: Session | None = None, api: Api | None = None) -> list[ModelMessage]:
        """Store what of the run's ``messages`` is new, and return what to send in their
        place (the view of ``session``, default ``self.session``, compacted at the threshold,
        shaped for ``api``, default ``self.api``)."""
        session = session or self.session
        store_turns(session, unsaved_suffix(session, from_pydantic_ai(messages), FRAMEWORK))
        return to_pydantic_ai(session.next_view(api or self.api))

    async def prepare_model_request(self, ctx: RunContext[Any], request_context: ModelRequestContext) -> ModelRequestContext:
        session = self._run_session(ctx)
        # The API of this run's model: two runs at once on two model classes each get their own.
        api = self.api if self._api_given else _api_of(ctx.model, self.api)
        request_context.messages = self.sent_messages(ctx.messages, session, api)
        return request_context

    async def on_model_request_error(self, ctx: RunContext[Any], *, request_context: ModelRequestContext, error: Exception) -> ModelResponse:
        recover_or_raise(self._run_session(ctx), error)
        raise RetryModelRequest()

    async def after_model_request(self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse) -> ModelResponse:
        session = self._run_session(ctx)
        if response.usage.input_tokens:
            session.measured(response.usage.input_tokens)
        if not response.tool_calls:  # an answer that ends the turn; one with calls is stored with its results
            store_turns(session, unsaved_suffix(session, from_pydantic_ai([*ctx.messages, response]), FRAMEWORK))
        return response

    async def wrap_tool_execute(self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any, handler: Any) -> Any:
        with tool_call(*self._run_key(ctx), call.tool_call_id):
            return await handler(args)  # an agent this tool runs is a sub-agent of this run

    def close(self) -> None:
        self._sessions.close()


__all__ = ["GlyphpackHistory", "from_pydantic_ai", "to_pydantic_ai"]
