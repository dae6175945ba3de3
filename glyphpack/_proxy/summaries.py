"""The proxy's own requests to the upstream: a summary asked of a model, with the
caller's credentials, by the proxy's HTTP client (``UpstreamSummary``), either as a text
prompt or by continuing the client's conversation as the upstream last received it
(``continued_request``)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

import httpx

from .._compaction.sdk_summary import SUMMARY_OUTPUT_TOKENS
from .._compaction.summarize import Sent
from .._errors import CompactionError, GlyphpackError
from .._history.messages import Message, Text
from .._providers.resolve import resolve
from .._secrets import scrubbed
from .._types import Api
from .._wire import provider_api, recall_tool
from .._wire.gemini import to_rest
from .conversations import cap_cache_marks, offers_recall

Json = dict[str, Any]
#: How long the upstream may take: a long answer streams for minutes.
TIMEOUT = httpx.Timeout(600.0, connect=15.0)


#: The caller's headers a summary call through the upstream carries (its credentials and
#: API version; nothing else of the caller's request).
_SUMMARY_HEADERS = ("x-api-key", "authorization", "anthropic-version", "anthropic-beta", "openai-organization", "openai-project", "api-key",
                    "x-goog-api-key")


class UpstreamSummary:
    """``fn`` of the proxy's ``Summarizer``: a summary asked of ``model`` through the
    proxy's own upstream, with the caller's credentials in the form the caller sent them
    (its headers, or Gemini's ``?key=``; the proxy holds none), by the proxy's own HTTP
    client: no provider SDK is needed, so the ``proxy`` extra serves every API.

    Any failure (a status other than 200, a transport error, an answer with no text) is
    raised, and the ladder reports the summarization rung skipped: the client's request
    goes as the cheaper rungs left it, or gets the provider's own error, never a 500.

    With the client's request (``body``, sent to ``path``), ``continued`` asks it of the
    request's own model by continuing the conversation as the upstream last received it
    (``Summarizer.continues``): the client's body with the instruction added at its end,
    so the provider reads the rest from its prompt cache."""

    def __init__(
        self, upstream: str, api: Api, model: str, headers: Mapping[str, str], body: Json | None = None, path: str = "",
        query: Mapping[str, str] | None = None, transport: httpx.BaseTransport | None = None, tls: ssl.SSLContext | None = None,
    ):
        """``tls``: the TLS context its connections take (None: httpx's default, made anew)."""
        self.upstream, self.api, self.model = upstream, api, model
        self.headers = {k: v for k, v in headers.items() if k.lower() in _SUMMARY_HEADERS}
        # The caller's credential in the query (Gemini's ``?key=``) goes where it came.
        self.query = {k: v for k, v in (query or {}).items() if k.lower() in _SUMMARY_QUERY}
        self.body, self.path = body, path
        self.transport, self.tls = transport, tls
        self.calls = 0
        self.billed_input = 0
        self.billed_output = 0

    def continued(self, sent: Sent, instruction: str) -> str:
        """The summary from one request that continues the conversation ("" when the
        upstream finds the request malformed (400) or answers without text: the text
        prompt is used then); any other refusal is raised, as ``__call__`` raises it."""
        if self.body is None:
            return ""
        request = continued_request(self.api, self.body, sent, instruction, self.model)
        return self._ask(self.path, request, malformed="")

    def __call__(self, prompt: str) -> str:
        build = provider_api(self.api)
        request = build.build(self.model, (Message("user", (Text(prompt),)),), 0, resolve(self.model))
        if self.api == "gemini":  # the REST form: the model in the path, camelCase, the cap in generationConfig
            request = {"contents": to_rest(request["contents"]), "generationConfig": {"maxOutputTokens": SUMMARY_OUTPUT_TOKENS}}
        else:
            request.update(build.reply_limit(SUMMARY_OUTPUT_TOKENS))
        text = self._ask(self._summary_path(), request)
        if not text.strip():
            raise CompactionError(f"{self.model} answered a summary request with no text")
        return text

    def _summary_path(self) -> str:
        """Where a summary request goes: the client's own endpoint for its API (so an
        upstream URL with or without ``/v1`` works as the client's did), with the
        summarizing model in a Gemini path and a method that answers whole."""
        if self.api == "gemini":
            version = self.path.split("/models/", 1)[0] if "/models/" in self.path else "/v1beta"
            return f"{version}/models/{self.model}:generateContent"
        return self.path or SIDE_PATHS[self.api]

    def _ask(self, path: str, request: Json, malformed: str | None = None) -> str:
        """The answer's text to ``request`` at ``path``; a refusal or a transport error
        raised with the status and the provider's words (no credential among them), but
        a 400 answered with ``malformed`` when it is given."""
        try:
            with httpx.Client(timeout=TIMEOUT, transport=self.transport, verify=self.tls or True) as client:
                response = client.post(self.upstream + path, json=request, params=self.query, headers={**self.headers, "accept-encoding": "identity"})
        except httpx.HTTPError as exc:
            raise CompactionError(f"the upstream failed: {type(exc).__name__}") from None
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code == 400 and malformed is not None:
            return malformed
        if response.status_code != 200 or not isinstance(data, dict):
            message = error_message(data if isinstance(data, dict) else None) or "no JSON error"
            raise CompactionError(f"the upstream answered {response.status_code}: {scrubbed(message, self.upstream)[:200]}")
        try:
            reply = provider_api(self.api).parse(data)
        except GlyphpackError as exc:
            raise CompactionError(f"the upstream's answer could not be read: {exc}") from None
        self.calls += 1
        self.billed_input += reply.input_tokens or 0
        self.billed_output += reply.output_tokens or 0
        return reply.message.text


#: Where a summary request goes when the client's request named no path.
SIDE_PATHS: dict[Api, str] = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses", "gemini": ""}
#: The caller's query parameters a summary request carries (its credential, when it came there).
_SUMMARY_QUERY = ("key", "api-version")


def continued_request(api: Api, body: Json, sent: Sent, instruction: str, model: str) -> Json:
    """The client's request ``body`` continued by one more user message, ``instruction``,
    as the upstream last received it: before any compaction the client's own history
    (forwarded as it came), from one on the session's (``sent``: the compaction and the
    messages after it, built as they are forwarded, the recall tool included). Not
    streamed, the reply capped at ``SUMMARY_OUTPUT_TOKENS`` (past any thinking budget)."""
    build = provider_api(api)
    key = build.request_key
    if sent.prefix == 0:
        history = with_instruction(api, body[key], instruction)
        request = {**body, key: history}
    else:
        built = build.build(model, (*sent.messages, Message("user", (Text(instruction),))), sent.prefix, resolve(model))
        request = {**body, key: built[key]}
        if offers_recall(api, body):
            request["tools"] = [*(body.get("tools") or ()), recall_tool(api)]
    for limit in ("max_tokens", "max_completion_tokens", "max_output_tokens", "stream", "stream_options"):
        request.pop(limit, None)
    thinking = body.get("thinking") if api == "anthropic" else None
    budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
    output = SUMMARY_OUTPUT_TOKENS + (budget if isinstance(budget, int) else 0)
    request.update(build.reply_limit(output))
    if api == "anthropic":
        cap_cache_marks(request)
    return request


def with_instruction(api: Api, history: object, instruction: str) -> list[Any]:
    """A client's history (its wire form) with ``instruction`` as the user's next words:
    Anthropic's in the last user message (tool results stay first in it), the others'
    as one more user message."""
    # Only Responses takes its input as one string: the user's first words.
    items = [{"role": "user", "content": history}] if isinstance(history, str) else list(history) if isinstance(history, list) else []
    block = {"type": "text", "text": instruction}
    if api == "anthropic" and items and isinstance(items[-1], dict) and items[-1].get("role") == "user":
        content = items[-1].get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or ())
        return [*items[:-1], {**items[-1], "content": [*blocks, block]}]
    if api == "anthropic":
        return [*items, {"role": "user", "content": [block]}]
    return [*items, {"role": "user", "content": instruction}]


def error_message(data: Json | None) -> str | None:
    """The provider's words in an error body (``{"error": {"message": ...}}``), else None."""
    error = data.get("error") if data else None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else None
