"""Google ADK (``google-adk``) over a glyphpack workspace: a session service and a plugin.

    from google.adk.agents import LlmAgent
    from google.adk.runners import Runner
    from glyphpack.adapters.google_adk import GlyphpackSessionService

    sessions = GlyphpackSessionService("runs/ws")
    agent = LlmAgent(name="coder", model="gemini-3-pro", tools=[read_file])
    runner = Runner(app=App(name="app", root_agent=agent, plugins=[sessions.plugin]), session_service=sessions)

ADK's sessions (their events and state, exactly as ADK writes them) are kept by ADK's own
SQLite session service in the workspace folder (or the ``events`` service given);
what each agent of a session sees is kept in the glyphpack workspace as the transcript
of (the session's id, the agent's name), saved at turn boundaries. The plugin puts the
ladder in force: before each model call it stores the request's new contents and sends
the session's view in their place (compacting at the threshold, eliding old results in
batches); a "too long" rejection compacts further and the call is made again; the
provider's counts calibrate the estimate. ``glyphpack_recall`` (``recall_tool``), offered
by the plugin to every agent of the runner (sub-agents too), brings back what a
compaction put away. Deleting a session deletes its glyphpack conversation too. The
framework package is imported here only (``pip install '.[google-adk]'``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.run_config import StreamingMode
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.adk.tools import FunctionTool, ToolContext
from google.genai import types

from .._compaction.recovery import parse_overflow
from .._compaction.summarize import Summarizer
from .._errors import StoreError, UsageError
from .._history.recall import RECALL_DESCRIPTION, RECALL_TOOL
from .._history.store import Workspace
from .._session import session as glyphpack_session
from .._wire.gemini import from_gemini
from ._common import FrameworkSessions, recall_answer, store_turns, unsaved_suffix

FRAMEWORK = "Google ADK"


class GlyphpackSessionService(BaseSessionService):
    """ADK's session service with a glyphpack workspace beside it (see the module).

    Args:
        workspace: a folder (created if new), a PostgreSQL URL or an open ``Workspace``.
        events: the ADK session service that keeps sessions' events and state (default:
            ADK's ``SqliteSessionService`` in the workspace folder; required when the
            workspace is not a folder).
        model: the model id when an agent's request names none.
        summarizer, context_window, threshold, recall: as ``glyphpack.open_session``.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | Workspace,
        *,
        events: BaseSessionService | None = None,
        model: str | None = None,
        summarizer: Summarizer | Callable[[str], str] | str | None = None,
        context_window: int | None = None,
        threshold: int | None = None,
        recall: bool = True,
    ):
        self._sessions = FrameworkSessions(workspace, agent="agent", summarizer=summarizer, context_window=context_window,
                                           threshold=threshold, recall=recall)
        self.workspace = self._sessions.workspace
        #: The glyphpack session of each (ADK session id, agent name) a model call was made in.
        self.sessions = self._sessions.sessions
        if events is None:
            folder = getattr(self.workspace, "path", None)
            if not isinstance(folder, Path):
                raise UsageError(f"{FRAMEWORK}: a workspace that is not a folder needs events=<an ADK session service>")
            events = SqliteSessionService(str(folder / "adk-sessions.db"))
        self.events = events
        self.model = model
        self.recall = recall
        self.plugin = GlyphpackPlugin(self)
        self.recall_tool = FunctionTool(self._recall_function())

    def session_for(self, conversation: str, agent: str, model: str | None) -> glyphpack_session.Session:
        """The glyphpack session of (``conversation``, ``agent``), opened on first use."""
        if (conversation, agent) in self.sessions:
            return self.sessions[(conversation, agent)]
        name = model or self.model
        if not name:
            raise UsageError(f"{FRAMEWORK}: the request of agent {agent!r} names no model: pass model=... to GlyphpackSessionService")
        return self._sessions.open(conversation, name, agent)

    def _recall_function(self) -> Callable[..., dict[str, Any]]:
        """``glyphpack_recall`` as ADK declares a function tool: by its name, docstring
        and signature (``tool_context`` is ADK's, not the model's)."""

        def glyphpack_recall(ref: str, tool_context: ToolContext, page: int = 1) -> dict[str, Any]:
            session = self.session_for(tool_context.session.id, tool_context.agent_name, None)
            text, images, is_error = recall_answer(session, {"ref": ref, "page": page})
            if images:
                text += f"\n[{len(images)} image(s): ADK function responses carry text only]"
            return {"error": text} if is_error else {"result": text}

        glyphpack_recall.__name__ = RECALL_TOOL
        glyphpack_recall.__doc__ = RECALL_DESCRIPTION
        return glyphpack_recall

    # ------------------------------------------------------------ ADK's session service

    async def create_session(self, *, app_name: str, user_id: str, state: dict[str, Any] | None = None, session_id: str | None = None) -> Session:
        return await self.events.create_session(app_name=app_name, user_id=user_id, state=state, session_id=session_id)

    async def get_session(self, *, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None) -> Session | None:
        return await self.events.get_session(app_name=app_name, user_id=user_id, session_id=session_id, config=config)

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        return await self.events.list_sessions(app_name=app_name, user_id=user_id)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        await self.events.delete_session(app_name=app_name, user_id=user_id, session_id=session_id)
        self._sessions.forget(session_id)
        try:
            self.workspace.delete(session_id)
        except StoreError:
            pass  # no agent of it called a model: nothing was kept

    async def append_event(self, session: Session, event: Any) -> Any:
        return await self.events.append_event(session, event)

    def close(self) -> None:
        self._sessions.close()


def _contents(session: glyphpack_session.Session) -> list[types.Content]:
    """The session's next request's contents (compacted at the threshold) as ADK's types,
    each tool's output wrapped as ADK wraps it (``{"result": ...}``)."""
    contents = session.request("gemini")["contents"]
    for content in contents:
        for part in content["parts"]:
            response = part.get("function_response")
            if response is not None and set(response["response"]) == {"output"}:
                response["response"] = {"result": response["response"]["output"]}
    return [types.Content.model_validate(content) for content in contents]


class GlyphpackPlugin(BasePlugin):
    """The ladder in force for every agent of a runner (``GlyphpackSessionService.plugin``)."""

    def __init__(self, service: GlyphpackSessionService):
        super().__init__(name="glyphpack")
        self.service = service

    def _session(self, context: CallbackContext, model: str | None) -> glyphpack_session.Session:
        return self.service.session_for(context.session.id, context.agent_name, model)

    def _send_view(self, session: glyphpack_session.Session, request: LlmRequest) -> None:
        given = from_gemini([c.model_dump(exclude_none=True) for c in request.contents])
        store_turns(session, unsaved_suffix(session, given, FRAMEWORK))
        request.contents = _contents(session)

    async def before_model_callback(self, *, callback_context: CallbackContext, llm_request: LlmRequest) -> LlmResponse | None:
        """The session's view in place of the request's contents; the recall tool offered
        to every agent of the runner (sub-agents included) that was not given it: ADK runs
        a call from the request's own tools."""
        self._send_view(self._session(callback_context, llm_request.model), llm_request)
        if self.service.recall and RECALL_TOOL not in llm_request.tools_dict:
            llm_request.append_tools([self.service.recall_tool])
        return None

    async def after_model_callback(self, *, callback_context: CallbackContext, llm_response: LlmResponse) -> LlmResponse | None:
        if llm_response.partial or llm_response.content is None:
            return None
        session = self._session(callback_context, None)
        usage = llm_response.usage_metadata
        if usage is not None and usage.prompt_token_count:
            session.measured(usage.prompt_token_count)
        answer = from_gemini([llm_response.content.model_dump(exclude_none=True)])
        if answer and not answer[-1].tool_calls:  # an answer that ends the turn; one with calls is stored with its results
            store_turns(session, answer)
        return None

    async def on_model_error_callback(self, *, callback_context: CallbackContext, llm_request: LlmRequest, error: Exception) -> LlmResponse | None:
        """A "too long" rejection: compacted further and sent again the way the run sends
        (server-sent events when it streams); ADK takes one response from this callback,
        so a streamed retry's pieces are gathered into its whole answer, which ADK then
        hands to the after-model callbacks as any other."""
        if parse_overflow(error) is None:
            return None
        session = self._session(callback_context, llm_request.model)
        invocation = callback_context.get_invocation_context()
        model = invocation.agent.canonical_model  # type: ignore[union-attr]
        streamed = invocation.run_config is not None and invocation.run_config.streaming_mode == StreamingMode.SSE
        while True:
            session.recover(error)  # escalates, then raises: never a loop
            request = llm_request.model_copy(update={"contents": _contents(session)})
            try:
                whole: LlmResponse | None = None
                async for response in model.generate_content_async(request, stream=streamed):
                    if not response.partial:
                        whole = response
                return whole
            except Exception as again:
                if parse_overflow(again) is None:
                    raise
                error = again


__all__ = ["GlyphpackPlugin", "GlyphpackSessionService"]
