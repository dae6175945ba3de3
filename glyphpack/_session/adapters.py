"""One adapter per provider API: a view of messages as the keyword arguments its official
SDK's create call takes, and the SDK's response as a neutral assistant message with the
input tokens the provider measured. Every request is checked against what the API's
server enforces before it is handed over."""

from __future__ import annotations

import abc
import copy
import dataclasses
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from .._errors import HistoryError, UsageError
from .._history.convert import from_anthropic, from_openai_chat, to_anthropic, to_openai_chat
from .._history.gemini import SKIP_SIGNATURE, check_gemini, from_gemini, to_gemini
from .._history.messages import Message
from .._history.responses import check_openai_responses, from_openai_responses, to_openai_responses
from .._history.validate import check_anthropic, check_openai_chat
from .._providers.profile import Profile
from .._types import APIS, Api, check_kind

Json = dict[str, Any]

#: ``max_tokens`` for an Anthropic call that does not say (the Messages API requires one).
DEFAULT_MAX_TOKENS = 4096

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

    @abc.abstractmethod
    def send(self, client: Any, request: Json) -> object:
        """``request`` through the official SDK's ``client``; its response."""

    def _single(self, messages: list[Message], what: str) -> Message:
        if len(messages) != 1 or messages[0].role != "assistant":
            raise HistoryError(f"a {what} response must hold one assistant message, found {[m.role for m in messages]}")
        return messages[0]


#: A key only one API's responses have, for naming the API a stray response came from.
_SIGNATURE_KEYS = (("choices", "openai-chat"), ("output", "openai-responses"), ("candidates", "gemini"), ("stop_reason", "anthropic"))


def _not_a(what: str, data: Json, missing: str) -> HistoryError:
    """The error for a response that is not ``what``'s: what was missing, and which API
    it looks like it came from (nothing is stored)."""
    other = next((api for key, api in _SIGNATURE_KEYS if key in data), None)
    hint = f"; it looks like a response of the {other} API: pass api={other!r}" if other else ""
    return HistoryError(f"not a {what} response: {missing}{hint}")


def _usage(data: Json, *keys: str) -> int | None:
    """The input tokens a response reports (the first key, plus the cached ones the
    others name); None when it reports none, or a count no provider gives (under 1),
    which must not calibrate the estimate."""
    usage = data.get("usage") or data.get("usage_metadata") or {}
    values = [usage.get(k) for k in keys]
    if not isinstance(values[0], int) or isinstance(values[0], bool):
        return None
    total = sum(v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0)
    return total if values[0] > 0 else None


class AnthropicMessages(Adapter):
    """``client.messages.create(**request, max_tokens=..., tools=...)``. Prompt-cache
    breakpoints: the system prompt, the end of a stored compaction (byte-identical until
    the next one) and the newest message, which the next turn reads from the cache."""

    api = "anthropic"

    def send(self, client: Any, request: Json) -> object:
        return client.messages.create(**{"max_tokens": DEFAULT_MAX_TOKENS, **request})

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
        if not isinstance(data.get("content"), list) or data.get("role", "assistant") != "assistant":
            raise _not_a("Messages", data, "no assistant content list")
        # An empty content list is an answer that said nothing (end_turn): kept, and never sent back.
        messages = from_anthropic([{"role": "assistant", "content": data["content"]}])
        tokens = _usage(data, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        return Reply(self._single(messages, "Messages"), tokens)


class OpenAIChat(Adapter):
    """``client.chat.completions.create(**request, tools=...)``; OpenAI caches prefixes
    without marks."""

    api = "openai-chat"

    def send(self, client: Any, request: Json) -> object:
        return client.chat.completions.create(**request)

    def build(self, model: str, view: Sequence[Message], prefix: int, profile: Profile) -> Json:
        messages = to_openai_chat(view, detail=profile.reader.detail)
        check_openai_chat(messages, max_images=profile.max_images)
        return {"model": model, "messages": messages}

    def parse(self, response: object) -> Reply:
        data = as_dict(response)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _not_a("Chat Completions", data, "no choices")
        found = choices[0].get("message")
        reason = choices[0].get("finish_reason")
        if not isinstance(found, dict):
            raise HistoryError(f"a Chat Completions response whose first choice has no message (finish_reason {reason!r})")
        message = dict(found, role="assistant")
        refusal = message.pop("refusal", None)
        if not message.get("content") and not message.get("tool_calls"):
            if not isinstance(refusal, str) or not refusal:
                raise HistoryError(f"a Chat Completions response with neither content, tool calls nor a refusal (finish_reason {reason!r})")
            message["content"] = refusal  # the refusal's words are the answer, and resend as its text
        messages = from_openai_chat([message])
        return Reply(self._single(messages, "Chat Completions"), _usage(data, "prompt_tokens"))


class OpenAIResponses(Adapter):
    """``client.responses.create(**request, tools=...)``: the whole input every turn
    (stateless), so compaction decides what the model sees."""

    api = "openai-responses"

    def send(self, client: Any, request: Json) -> object:
        return client.responses.create(**request)

    def build(self, model: str, view: Sequence[Message], prefix: int, profile: Profile) -> Json:
        instructions, items = to_openai_responses(view, detail=profile.reader.detail)
        check_openai_responses(items)
        request: Json = {"model": model, "input": items}
        if instructions:
            request["instructions"] = instructions
        return request

    def parse(self, response: object) -> Reply:
        data = as_dict(response)
        if not isinstance(data.get("output"), list):
            raise _not_a("Responses", data, "no output list")
        messages = from_openai_responses(data["output"])
        return Reply(self._single(messages, "Responses"), _usage(data, "input_tokens"))


#: Models that enforce thought signatures on the current turn's function calls.
_GEMINI_3 = re.compile(r"(models/)?gemini-([3-9]|\d\d)")


class Gemini(Adapter):
    """``client.models.generate_content(**request)``; tools go in ``config``
    (``request(..., config={"tools": ...})`` merges them)."""

    api = "gemini"

    def send(self, client: Any, request: Json) -> object:
        return client.models.generate_content(**request)

    def build(self, model: str, view: Sequence[Message], prefix: int, profile: Profile) -> Json:
        unsigned = SKIP_SIGNATURE if _GEMINI_3.match(model) else None
        system, contents = to_gemini(view, media_resolution=profile.reader.media_resolution, unsigned=unsigned)
        check_gemini(contents)
        request: Json = {"model": model, "contents": contents, "config": {}}
        if system:
            request["config"]["system_instruction"] = system
        return request

    def parse(self, response: object) -> Reply:
        data = as_dict(response)
        candidates = data.get("candidates")
        if not isinstance(candidates, list) or not candidates:
            feedback = data.get("prompt_feedback")
            raise _not_a("Gemini", data, f"no candidates ({feedback})" if feedback else "no candidates")
        first = candidates[0] if isinstance(candidates[0], dict) else {}
        if not isinstance(first.get("content"), dict):
            raise HistoryError(f"a Gemini response whose first candidate has no content (finish_reason {first.get('finish_reason')!r})")
        messages = from_gemini([first["content"]])
        return Reply(self._single(messages, "Gemini"), _usage(data, "prompt_token_count"))


ADAPTERS: dict[Api, Adapter] = {a.api: a for a in (AnthropicMessages(), OpenAIChat(), OpenAIResponses(), Gemini())}


def api_of(client: object) -> Api:
    """The API an official SDK client speaks: Anthropic's Messages, OpenAI's Chat
    Completions (pass ``api="openai-responses"`` for Responses), Google's Gemini."""
    module = type(client).__module__
    if module.startswith("anthropic"):
        return "anthropic"
    if module.startswith("openai"):
        return "openai-chat"
    if module.startswith("google.genai"):
        return "gemini"
    raise UsageError(f"{type(client).__name__} ({module}) is not an anthropic, openai or google-genai client; pass api=...")


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
