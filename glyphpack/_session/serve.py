"""``glyphpack serve``: a workspace people browse over HTTP.

An index of projects (the folder each imported session file was in; what the proxy
recorded apart), each conversation with its title, harness, model, dates, messages,
calls, tokens (the whole history and what its next request carries), compactions and
agents, newest first, filtered and searched across conversations (every stored text,
folded tool outputs included). A conversation opens on its own page (the navigator of
that conversation alone), where every ref a stub or note names can be recalled. The
index asks for the workspace's list every few seconds, so what the proxy records shows
up without a reload. Starlette and uvicorn come with the ``proxy`` extra; they are
imported here only.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from .._compaction.snapshot import serialize_messages
from .._errors import GlyphpackError
from .._history.messages import Message, ToolCall, first_task
from .._history.pricing import EstimatePricer, message_tokens
from .._history.recall import recall
from .._history.store import Workspace
from .._history.tree import Conversation
from .._history.view import archived, read_view, request_messages
from .navigator import asset, export_html

Json = dict[str, Any]
#: Conversations whose summary a search result lists at most, and matches per conversation.
SEARCH_CONVERSATIONS = 50
SEARCH_MATCHES = 5
#: Characters of text around a search match shown in the index.
SNIPPET_CHARS = 80
#: What the index calls the conversations no session file was imported for.
RECORDED = "recorded here (the proxy, a session, a framework)"


def _project(source: str | None) -> tuple[str, str]:
    """The project a conversation is listed under, and its full location: the folder of
    the file it was imported from (Claude Code's ``projects/-home-me-repo`` named as the
    path it stands for)."""
    if source is None:
        return RECORDED, ""
    folder = PurePath(source).parent
    name = folder.name
    if folder.parent.name == "projects" and name.startswith("-"):  # Claude Code: the working directory, "/" written "-"
        name = name.replace("-", "/")
    return name or str(folder), str(folder)


def conversation_summary(workspace: Workspace, conversation: Conversation) -> Json:
    """What the index shows of one conversation (a JSON object): ``id``, ``title`` (its
    own, else the first prompt a person typed), ``harness``, ``project`` and
    ``location``, ``model``, ``first`` and ``last`` (seconds since the epoch, the
    messages' own times where known), ``messages``, ``calls``, ``tokens`` (estimated, the
    whole history of every agent), ``next_request`` (estimated tokens the main agent's
    next request carries, the compaction in force applied), ``cost`` (US dollars, as the
    harness recorded it; None where it recorded none), ``compactions`` and ``agents``."""
    pricer = EstimatePricer()
    agents = sorted({agent for conv, agent in workspace.transcripts() if conv == conversation.id})
    histories = {agent: workspace.load(conversation.id, agent).messages for agent in agents}
    main = max(agents, key=lambda agent: (agent == "main", len(histories[agent])), default=None)
    messages: tuple[Message, ...] = histories[main] if main else ()
    times = [m.time for history in histories.values() for m in history if m.time is not None]
    view = read_view(workspace, conversation.id, main) if main else None
    sent, _ = request_messages(view, messages)
    project, location = _project(workspace.source(conversation.id))
    settings = workspace.settings(conversation.id, main) if main else {}
    return {
        "id": conversation.id,
        "title": conversation.title or first_task(messages) or conversation.id,
        "harness": workspace.harness(conversation.id) or "",
        "project": project,
        "location": location,
        "model": str(settings.get("model") or ""),
        "first": min(times, default=conversation.created),
        "last": max(times, default=conversation.created),
        "messages": sum(len(history) for history in histories.values()),
        "calls": sum(isinstance(b, ToolCall) for history in histories.values() for m in history for b in m.content),
        "tokens": sum(message_tokens(m, pricer) for history in histories.values() for m in history),
        "next_request": sum(message_tokens(m, pricer) for m in sent),
        "cost": workspace.harness_cost(conversation.id),
        "compactions": sum(archived(workspace, conversation.id, agent) for agent in agents),
        "agents": agents,
    }


class Index:
    """The workspace's conversations as the index lists them, newest first; a summary is
    made again only when its conversation's tip or title moved (the proxy appends while
    people browse)."""

    def __init__(self, workspace: Workspace):
        self.workspace = workspace
        self._kept: dict[str, tuple[tuple[str | None, str], Json]] = {}
        self._lock = threading.Lock()

    def conversations(self) -> list[Json]:
        with self._lock:
            listed = self.workspace.tree.conversations()
            for conversation in listed:
                key = (conversation.tip, conversation.title)
                kept = self._kept.get(conversation.id)
                if kept is None or kept[0] != key:
                    self._kept[conversation.id] = (key, conversation_summary(self.workspace, conversation))
            ids = {c.id for c in listed}
            for gone in [c for c in self._kept if c not in ids]:
                del self._kept[gone]
            return sorted((summary for _, summary in self._kept.values()), key=lambda s: (-s["last"], s["id"]))

    def search(self, query: str) -> list[Json]:
        """Every conversation whose stored text holds ``query`` (case folded): each agent's
        messages, tool outputs folded on the page included, with up to
        ``SEARCH_MATCHES`` snippets (the message's id, its agent, the text around it)."""
        needle = query.casefold()
        found: dict[str, list[Json]] = {}  # conversation -> its matches, in the order found
        if not needle:
            return []
        with self._lock:
            for conversation, agent in self.workspace.transcripts():
                for message in self.workspace.load(conversation, agent).messages:
                    text = "\n".join([message.text, *(call.arguments_json for call in message.tool_calls)])  # outputs and commands too
                    at = text.casefold().find(needle)
                    if at < 0 or (conversation not in found and len(found) == SEARCH_CONVERSATIONS):
                        continue
                    matches = found.setdefault(conversation, [])
                    if len(matches) < SEARCH_MATCHES:
                        start = max(0, at - SNIPPET_CHARS // 2)
                        snippet = " ".join(text[start : at + len(needle) + SNIPPET_CHARS // 2].split())
                        matches.append({"agent": agent, "message": message.id, "role": message.role, "text": snippet})
        return [{"id": conversation, "matches": matches} for conversation, matches in found.items()]

    def recall(self, conversation: str, agent: str, ref: str, page: int) -> Json:
        """What ``ref`` stands for in the stored transcript, exactly (``glyphpack recall``)."""
        with self._lock:
            messages = self.workspace.load(conversation, agent).messages
        answer = recall(messages, ref, page, range_text=serialize_messages)
        return {"text": answer.as_text(), "error": answer.is_error}

    def page(self, conversation: str) -> str:
        """The navigator of one conversation (and its forks), with what a served page adds:
        refs recalled from the server."""
        with self._lock:
            self.workspace.tree.conversation(conversation)  # an unknown one is a StoreError
            html = export_html(self.workspace, conversation)
        served = asset("served.js")
        # Served pages may ask their own server (recall); nothing else is allowed to load.
        html = html.replace("default-src 'none';", "default-src 'none'; connect-src 'self';", 1)
        return html.replace("</body>", f"<script>{served}</script>\n</body>", 1)


def index_page(workspace: Workspace) -> str:
    return asset("index.html").replace("@@WORKSPACE@@", html.escape(workspace.name))


def serve_app(workspace: Workspace) -> Any:
    """The Starlette application ``glyphpack serve`` runs over ``workspace``: ``/`` the
    index, ``/api/conversations`` its list, ``/api/search?q=`` the search,
    ``/c/{conversation}`` one conversation's page, ``/api/recall/{conversation}/{agent}?ref=``
    what a ref stands for."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Route

    index = Index(workspace)
    headers = {"cache-control": "no-store", "x-content-type-options": "nosniff"}

    def answered(make: Callable[[Request], Response]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            try:
                return make(request)
            except GlyphpackError as error:
                return JSONResponse({"error": str(error)}, status_code=404, headers=headers)

        return endpoint

    def home(request: Request) -> Response:
        return HTMLResponse(index_page(workspace), headers=headers)

    def listed(request: Request) -> Response:
        return JSONResponse({"workspace": workspace.name, "conversations": index.conversations()}, headers=headers)

    def searched(request: Request) -> Response:
        return JSONResponse({"results": index.search(request.query_params.get("q", "")[:200])}, headers=headers)

    def conversation_page(request: Request) -> Response:
        return HTMLResponse(index.page(request.path_params["conversation"]), headers=headers)

    def recalled(request: Request) -> Response:
        try:
            page = int(request.query_params.get("page", "1"))
        except ValueError:
            page = 0  # recall says what a page must be
        params = request.path_params
        return JSONResponse(index.recall(params["conversation"], params["agent"], request.query_params.get("ref", ""), page), headers=headers)

    routes = [
        Route("/", home),
        Route("/api/conversations", answered(listed)),
        Route("/api/search", answered(searched)),
        Route("/c/{conversation}", answered(conversation_page)),
        Route("/api/recall/{conversation}/{agent}", answered(recalled)),
    ]
    return Starlette(routes=routes)
