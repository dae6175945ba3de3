"""Server-sent event streams as the provider APIs send them, read as they pass through:
bytes go on to the client untouched while an accumulator rebuilds the response the
same request would have had without ``stream`` (what the transcript records).

Each accumulator takes the decoded events of one stream (``SseParser``) and gives the
whole response as the API's non-streaming JSON (``result``), or None when the stream
ended before it was complete (a dropped connection, an error event): nothing half is
recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .._types import Api

Json = dict[str, Any]


class SseParser:
    """Bytes of an ``text/event-stream`` body, fed in any chunks, as (event, data) pairs.

    Lines end with LF, CRLF or CR; an event ends at a blank line; its ``data:`` lines
    join with LF; comments (``:``) and other fields are skipped.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> Iterator[tuple[str, str]]:
        self._buffer += chunk
        while True:
            cut = min((i for i in (self._buffer.find(b"\n"), self._buffer.find(b"\r")) if i >= 0), default=-1)
            if cut < 0:
                return
            # A CR at the very end may be the first half of a CRLF still to come.
            if self._buffer[cut : cut + 1] == b"\r" and cut + 1 == len(self._buffer):
                return
            line = self._buffer[:cut].decode("utf-8", errors="replace")
            skip = 2 if self._buffer[cut : cut + 2] == b"\r\n" else 1
            self._buffer = self._buffer[cut + skip :]
            if not line:
                if self._data:
                    yield self._event or "message", "\n".join(self._data)
                self._event, self._data = "", []
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                self._event = value
            elif field == "data":
                self._data.append(value)

    def feed_json(self, chunk: bytes) -> Iterator[tuple[str, str, Json | None]]:
        """``feed``, each event with its data read as a JSON object (None: it is not one)."""
        for event, data in self.feed(chunk):
            try:
                payload = json.loads(data)
            except (ValueError, RecursionError):
                payload = None
            yield event, data, payload if isinstance(payload, dict) else None


class Accumulator:
    """One API's stream events folded into its non-streaming response."""

    def __init__(self) -> None:
        self.parser = SseParser()
        self.failed = False
        self.done = False  # the stream's own end marker ("[DONE]") came

    def feed(self, chunk: bytes) -> None:
        for event, data in self.parser.feed(chunk):
            if data == "[DONE]":
                self.done = True
                continue
            try:
                payload = json.loads(data)
            except (ValueError, RecursionError):
                self.failed = True
                continue
            if isinstance(payload, dict):
                self.event(event, payload)

    def event(self, event: str, payload: Json) -> None:
        raise NotImplementedError

    def result(self) -> Json | None:
        raise NotImplementedError


def _object(value: object) -> Json:
    return value if isinstance(value, dict) else {}


class AnthropicAccumulator(Accumulator):
    """Messages API events: ``message_start``, ``content_block_start/delta/stop``,
    ``message_delta``, ``message_stop`` (``ping`` and unknown events are skipped)."""

    def __init__(self) -> None:
        super().__init__()
        self.message: Json | None = None
        self.blocks: dict[int, Json] = {}
        self.partial_json: dict[int, str] = {}
        self.stopped = False

    def event(self, event: str, payload: Json) -> None:
        kind = payload.get("type", event)
        if kind == "error":
            self.failed = True
        elif kind == "message_start" and isinstance(payload.get("message"), dict):
            self.message = dict(payload["message"])
        elif kind == "content_block_start" and isinstance(payload.get("content_block"), dict):
            self.blocks[payload.get("index", len(self.blocks))] = dict(payload["content_block"])
        elif kind == "content_block_delta":
            self._delta(payload.get("index", -1), payload.get("delta") or {})
        elif kind == "message_delta" and self.message is not None:
            self.message.update({k: v for k, v in (payload.get("delta") or {}).items() if v is not None or k == "stop_sequence"})
            # Counts so far and the delta's; a usage that is no object (a gateway's) counts nothing.
            self.message["usage"] = {**_object(self.message.get("usage")), **_object(payload.get("usage"))}
        elif kind == "message_stop":
            self.stopped = True

    def _delta(self, index: int, delta: Json) -> None:
        block = self.blocks.get(index)
        if block is None:
            self.failed = True
            return
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.get("text", "")
        elif kind == "input_json_delta":
            self.partial_json[index] = self.partial_json.get(index, "") + delta.get("partial_json", "")
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))

    def result(self) -> Json | None:
        if self.failed or not self.stopped or self.message is None:
            return None
        content = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if index in self.partial_json:
                try:
                    block["input"] = json.loads(self.partial_json[index] or "{}")
                except (ValueError, RecursionError):
                    return None
            content.append(block)
        return {**self.message, "content": content}


class ChatAccumulator(Accumulator):
    """Chat Completions chunks (``chat.completion.chunk``), the first choice's deltas:
    content, refusal and tool calls by index; usage from the chunk after the finish when
    asked for; complete at ``[DONE]`` (after which nothing more comes)."""

    def __init__(self) -> None:
        super().__init__()
        self.head: Json | None = None
        self.message: Json = {"role": "assistant", "content": None}
        self.calls: dict[int, Json] = {}
        self.finish: str | None = None
        self.usage: Json | None = None

    def event(self, event: str, payload: Json) -> None:
        if "error" in payload:
            self.failed = True
            return
        if self.head is None:
            self.head = {k: payload.get(k) for k in ("id", "created", "model", "system_fingerprint")}
        if isinstance(payload.get("usage"), dict):
            self.usage = payload["usage"]
        for choice in payload.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            for key in ("content", "refusal"):
                if isinstance(delta.get(key), str):
                    self.message[key] = (self.message.get(key) or "") + delta[key]
            for call in delta.get("tool_calls") or ():
                slot = self.calls.setdefault(call.get("index", len(self.calls)), {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function") or {}
                slot["function"]["name"] += function.get("name") or ""
                slot["function"]["arguments"] += function.get("arguments") or ""
            self.finish = choice.get("finish_reason") or self.finish

    def result(self) -> Json | None:
        if self.failed or not self.done or self.head is None or self.finish is None:
            return None
        # Streams open with an empty content delta; the whole response says null for "none".
        message = {k: (v or None) if k in ("content", "refusal") else v for k, v in self.message.items()}
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        response: Json = {**self.head, "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": self.finish}]}
        if self.usage is not None:
            response["usage"] = self.usage
        return response


class ResponsesAccumulator(Accumulator):
    """Responses API events: the ``response.completed`` event carries the whole response."""

    def __init__(self) -> None:
        super().__init__()
        self.response: Json | None = None

    def event(self, event: str, payload: Json) -> None:
        kind = payload.get("type", event)
        if kind in ("error", "response.failed", "response.incomplete"):
            self.failed = True
        elif kind == "response.completed" and isinstance(payload.get("response"), dict):
            self.response = payload["response"]

    def result(self) -> Json | None:
        return None if self.failed else self.response


class GeminiAccumulator(Accumulator):
    """Gemini's ``streamGenerateContent?alt=sse``: each event is a response of its own
    holding the next parts (text in pieces, each function call whole); the one with the
    candidate's ``finishReason`` ends it (usage rides on the last events)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[Json] = []
        self.finish: str | None = None
        self.head: Json = {}

    def event(self, event: str, payload: Json) -> None:
        if "error" in payload:
            self.failed = True
            return
        self.head.update({k: payload[k] for k in ("usageMetadata", "modelVersion", "responseId") if k in payload})
        candidates = payload.get("candidates")
        first = _object(candidates[0]) if isinstance(candidates, list) and candidates else {}
        for part in _object(first.get("content")).get("parts") or ():
            if not isinstance(part, dict):
                continue
            last = self.parts[-1] if self.parts else None
            pieces_of_one_text = (
                last is not None and isinstance(last.get("text"), str) and isinstance(part.get("text"), str)
                and bool(last.get("thought")) == bool(part.get("thought")) and len(part) == len({"text", "thought", "thoughtSignature"} & part.keys())
            )
            if pieces_of_one_text and last is not None:
                last["text"] += part["text"]
                if "thoughtSignature" in part:
                    last["thoughtSignature"] = part["thoughtSignature"]
            else:
                self.parts.append(dict(part))
        if isinstance(first.get("finishReason"), str):
            self.finish = first["finishReason"]

    def result(self) -> Json | None:
        if self.failed or self.finish is None:
            return None
        candidate = {"content": {"role": "model", "parts": self.parts}, "finishReason": self.finish, "index": 0}
        return {"candidates": [candidate], **self.head}


ACCUMULATORS: dict[Api, type[Accumulator]] = {
    "anthropic": AnthropicAccumulator,
    "openai-chat": ChatAccumulator,
    "openai-responses": ResponsesAccumulator,
    "gemini": GeminiAccumulator,
}


#: The events a stream may open with before any that shows whether the provider took
#: the request (an API not named: its first event shows it).
_PREAMBLE: dict[str, frozenset[str]] = {
    "anthropic": frozenset({"message_start", "ping"}),
    "openai-responses": frozenset({"response.created", "response.in_progress", "response.queued"}),
}
#: Bytes of a stream held back at most while waiting for that event.
OPENING_LIMIT = 1 << 16


def stream_failure(event: str, payload: Json) -> Json | None:
    """The error a stream event reports, as the API's error body (``{"error": {...}}``),
    or None when the event is no failure: Responses' ``response.failed`` (the failed
    response's ``error``) and ``error`` events, Anthropic's ``error`` event, and the
    ``error`` object Chat Completions and Gemini streams may carry."""
    kind = payload.get("type") if isinstance(payload.get("type"), str) else event
    if kind == "response.failed":
        response = payload.get("response")
        error = response.get("error") if isinstance(response, dict) else None
        return {"error": error} if isinstance(error, dict) else {"error": {"message": "response.failed"}}
    if isinstance(payload.get("error"), dict):
        return {"error": payload["error"]}
    if kind == "error":  # Responses' error event: its code and message at the top
        return {"error": {k: v for k, v in payload.items() if k != "type"}}
    return None


class Opening:
    """A stream's first events, fed as they come, until one shows whether the provider
    took the request (``decided``): a failure (``failure``: its error body), or any event
    past the API's preamble. A proxy holds these bytes back, so a refusal reported inside
    a 200 stream ("too long", as Responses may) can be recovered like a refusal by status."""

    def __init__(self, api: Api):
        self.preamble = _PREAMBLE.get(api, frozenset())
        self.parser = SseParser()
        self.failure: Json | None = None
        self.decided = False

    def feed(self, chunk: bytes) -> None:
        for event, _, payload in self.parser.feed_json(chunk):
            if payload is None:
                self.decided = True
                return
            self.failure = stream_failure(event, payload)
            kind = payload.get("type") if isinstance(payload.get("type"), str) else event
            if self.failure is not None or kind not in self.preamble:
                self.decided = True
                return
