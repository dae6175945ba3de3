"""One adapter per provider API: a view of messages as the keyword arguments its official
SDK's create call takes, and the SDK's response as a neutral assistant message with the
input tokens the provider measured. Every request is checked against what the API's
server enforces before it is handed over."""

from __future__ import annotations

import abc
import copy
import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

from .._errors import HistoryError, UsageError
from .._history.convert import from_anthropic, from_openai_chat, to_anthropic, to_openai_chat
from .._history.gemini import check_gemini, from_gemini, to_gemini
from .._history.messages import Message
from .._history.responses import check_openai_responses, from_openai_responses, to_openai_responses
from .._history.validate import check_anthropic, check_openai_chat
from .._providers.profile import Profile
from .._types import APIS, Api, check_kind

Json = dict[str, Any]

#: Anthropic marks a prompt-cache breakpoint on one of these block types only.
_CACHEABLE = ("text", "image", "tool_use", "tool_result")
_EPHEMERAL = {"type": "ephemeral"}


def as_dict(response: object) -> Json:
    """An SDK response object (a pydantic model) or an already plain dict, as a dict."""
    if isinstance(response, dict):
        return response
    dump = getattr(response, "model_dump", None)
    if dump is None:
        raise UsageError(f"expected an SDK response (with model_dump) or a dict, not {type(response).__name__}")
    return dump(mode="python", exclude_none=True)


@dataclasses.dataclass(frozen=True)
class Reply:
    """A parsed response: the assistant message and the input tokens the provider counted
    for the request (None when the response did not say)."""

    message: Message
    input_tokens: int | None


class Adapter(abc.ABC):
    api: ClassVar[Api]

    @abc.abstractmethod
    def build(self, model: str, view: Sequence[Message], prefix: int, profile: Profile) -> Json:
        """The create call's keyword arguments for ``view``, whose first ``prefix``
        messages are a stored compaction (the stable prefix)."""

    @abc.abstractmethod
    def parse(self, response: object) -> Reply:
        """The assistant message of a response."""

    def _single(self, messages: list[Message], what: str) -> Message:
        if len(messages) != 1 or messages[0].role != "assistant":
            raise HistoryError(f"a {what} response must hold one assistant message, found {[m.role for m in messages]}")
        return messages[0]


def _usage(data: Json, *keys: str) -> int | None:
    usage = data.get("usage") or data.get("usage_metadata") or {}
    values = [usage.get(k) for k in keys]
    return sum(v for v in values if isinstance(v, int)) if isinstance(values[0], int) else None


class AnthropicMessages(Adapter):
    """``client.messages.create(**request, max_tokens=..., tools=...)``. Prompt-cache
    breakpoints: the system prompt, the end of a stored compaction (byte-identical until
    the next one) and the newest message, which the next turn reads from the cache."""

    api = "anthropic"

    def build(self, model: str, view: Sequence[Message], prefix: int, profile: Profile) -> Json:
        system, messages = to_anthropic(view)
        check_anthropic(messages, max_images=profile.max_images)
        if 0 < prefix < len(view):
            self._mark_prefix(messages, view[:prefix])
        if messages:
            self._mark(messages[-1])
        request: Json = {"model": model, "messages": messages}
        if system:
            request["system"] = [{"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)}]
        return request

    @staticmethod
    def _mark(message: Json, end: int | None = None) -> bool:
        blocks = message["content"][:end]
        for block in reversed(blocks):
            if block.get("type") in _CACHEABLE and (block.get("type") != "text" or block.get("text")):
                block["cache_control"] = dict(_EPHEMERAL)
                return True
        return False

    def _mark_prefix(self, messages: list[Json], prefix: Sequence[Message]) -> None:
        # The prefix converts alone to the same messages, the last of which the rest may
        # extend (a role's consecutive messages merge): mark its own last block.
        _, alone = to_anthropic(prefix)
        if not alone:
            return
        last = len(alone) - 1
        own = len(alone[-1]["content"])
        if messages[:last] == alone[:last] and messages[last]["content"][:own] == alone[-1]["content"]:
            self._mark(messages[last], own)

    def parse(self, response: object) -> Reply:
        data = as_dict(response)
        messages = from_anthropic([{"role": data.get("role", "assistant"), "content": data.get("content") or []}])
        tokens = _usage(data, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        return Reply(self._single(messages, "Messages"), tokens)


class OpenAIChat(Adapter):
    """``client.chat.completions.create(**request, tools=...)``; OpenAI caches prefixes
    without marks."""

    api = "openai-chat"

    def build(self, model: str, view: Sequence[Message], prefix: int, profile: Profile) -> Json:
        messages = to_openai_chat(view, detail=profile.reader.detail)
        check_openai_chat(messages, max_images=profile.max_images)
        return {"model": model, "messages": messages}

    def parse(self, response: object) -> Reply:
        data = as_dict(response)
        choices = data.get("choices") or []
        if not choices:
            raise HistoryError("a Chat Completions response without choices")
        message = dict(choices[0]["message"])
        message.pop("refusal", None)
        messages = from_openai_chat([message])
        return Reply(self._single(messages, "Chat Completions"), _usage(data, "prompt_tokens"))


class OpenAIResponses(Adapter):
    """``client.responses.create(**request, tools=...)``: the whole input every turn
    (stateless), so compaction decides what the model sees."""

    api = "openai-responses"

    def build(self, model: str, view: Sequence[Message], prefix: int, profile: Profile) -> Json:
        instructions, items = to_openai_responses(view, detail=profile.reader.detail)
        check_openai_responses(items)
        request: Json = {"model": model, "input": items}
        if instructions:
            request["instructions"] = instructions
        return request

    def parse(self, response: object) -> Reply:
        data = as_dict(response)
        messages = from_openai_responses(data.get("output") or [])
        return Reply(self._single(messages, "Responses"), _usage(data, "input_tokens"))


class Gemini(Adapter):
    """``client.models.generate_content(**request)``; tools go in ``config``
    (``request(..., config={"tools": ...})`` merges them)."""

    api = "gemini"

    def build(self, model: str, view: Sequence[Message], prefix: int, profile: Profile) -> Json:
        system, contents = to_gemini(view, media_resolution=profile.reader.media_resolution)
        check_gemini(contents)
        request: Json = {"model": model, "contents": contents, "config": {}}
        if system:
            request["config"]["system_instruction"] = system
        return request

    def parse(self, response: object) -> Reply:
        data = as_dict(response)
        candidates = data.get("candidates") or []
        if not candidates or not candidates[0].get("content"):
            reason = candidates[0].get("finish_reason") if candidates else (data.get("prompt_feedback") or "no candidates")
            raise HistoryError(f"a Gemini response without content ({reason})")
        messages = from_gemini([candidates[0]["content"]])
        return Reply(self._single(messages, "Gemini"), _usage(data, "prompt_token_count"))


ADAPTERS: dict[Api, Adapter] = {a.api: a for a in (AnthropicMessages(), OpenAIChat(), OpenAIResponses(), Gemini())}


def adapter(api: str) -> Adapter:
    check_kind(api, APIS, "api", UsageError)
    return ADAPTERS[api]  # type: ignore[index]


def merge_extra(request: Json, extra: Json) -> Json:
    """The caller's own keyword arguments added to a request (``config`` merged key by key)."""
    out = copy.copy(request)
    for key, value in extra.items():
        if key in ("messages", "input", "contents"):
            raise UsageError(f"{key!r} is what the session builds; pass the rest (tools, max_tokens, ...)")
        if key == "config" and isinstance(value, dict):
            out["config"] = {**out.get("config", {}), **value}
        else:
            out[key] = value
    return out
