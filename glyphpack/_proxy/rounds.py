"""Answers the proxy continues: when the model calls ``glyphpack_recall`` (which the
proxy offers once a compaction is in force), the proxy answers it from the stored
transcript and asks the upstream again, so one client request may take several
upstream *rounds*. The client gets them as the one answer it asked for: the recall
calls left out, the rounds' blocks in order, their usage summed.

``joined`` does it for whole responses; a ``Relay`` does it for streams as they come
(events re-numbered, each round's end held until it is known whether another round
follows). Nothing here speaks HTTP or touches the workspace.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from .._history.recall import RECALL_TOOL
from .._types import Api
from .streams import SseParser

Json = dict[str, Any]


def _calls(api: Api, response: Json) -> list[Json]:
    """The tool calls of a whole response, as the API shapes them."""
    if api == "anthropic":
        return [b for b in response.get("content") or () if isinstance(b, dict) and b.get("type") == "tool_use"]
    if api == "openai-chat":
        choices = response.get("choices") or [{}]
        return list((choices[0].get("message") or {}).get("tool_calls") or ())
    return [i for i in response.get("output") or () if isinstance(i, dict) and i.get("type") == "function_call"]


def _name(api: Api, call: Json) -> object:
    return (call.get("function") or {}).get("name") if api == "openai-chat" else call.get("name")


def recall_calls(api: Api, response: Json) -> int:
    """How many ``glyphpack_recall`` calls a whole response makes."""
    return sum(_name(api, c) == RECALL_TOOL for c in _calls(api, response))


def marked(api: Api, response: Json, prefix: str) -> Json:
    """A copy of ``response`` with each ``glyphpack_recall`` call's id prefixed by
    ``prefix`` (what tells the proxy's calls from a client's own)."""
    response = copy.deepcopy(response)
    key = "call_id" if api == "openai-responses" else "id"
    for call in _calls(api, response):
        if _name(api, call) == RECALL_TOOL and isinstance(call.get(key), str):
            call[key] = prefix + call[key]
    return response


#: What the client gets when the proxy's recall calls were all an answer held: an
#: assistant message with nothing in it would be refused when the client sends it back
#: (Anthropic takes no empty content; Chat needs content or calls), so it says what
#: happened instead.
UNANSWERED = (
    "[glyphpack: this answer held only requests to bring back earlier context, more than one turn answers; "
    "nothing else was said. Ask again to continue.]"
)


def summed_usage(first: object, second: object) -> object:
    """Two usage objects added field by field (whole numbers add; anything else is the
    second's)."""
    if isinstance(first, dict) and isinstance(second, dict):
        return {k: summed_usage(first[k], second[k]) if k in first and k in second else second.get(k, first.get(k)) for k in {**first, **second}}
    if type(first) is int and type(second) is int:
        return first + second
    return second


def joined(api: Api, rounds: Sequence[Json]) -> Json:
    """The client's answer for whole responses ``rounds`` (the first is what its request
    got; each next one followed a recall): recall calls left out, the rounds' blocks in
    order, usage summed, and a stop reason that names tool use only when a call is left."""
    first, last = rounds[0], rounds[-1]
    usage = first.get("usage")
    for response in rounds[1:]:
        usage = summed_usage(usage, response.get("usage"))
    if api == "anthropic":
        content = [b for r in rounds for b in r.get("content") or () if not (isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == RECALL_TOOL)]
        if not any(isinstance(b, dict) and b.get("type") in ("text", "tool_use") for b in content) and _recalled(api, rounds):
            content.append({"type": "text", "text": UNANSWERED})  # after any thinking, as the client view has it
        stop = last.get("stop_reason")
        if stop == "tool_use" and not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content):
            stop = "end_turn"
        return {**last, "id": first.get("id"), "content": content, "stop_reason": stop, "usage": usage}
    if api == "openai-chat":
        messages = [((r.get("choices") or [{}])[0].get("message") or {}) for r in rounds]
        text = "".join(m.get("content") or "" for m in messages)
        calls = [c for r in rounds for c in _calls(api, r) if _name(api, c) != RECALL_TOOL]
        unanswered = not calls and _recalled(api, rounds)
        message = {**messages[-1], "content": text or (UNANSWERED if unanswered else None)}
        message.pop("tool_calls", None)
        if calls:
            message["tool_calls"] = calls
        choice = {**(last.get("choices") or [{}])[0], "message": message}
        if choice.get("finish_reason") == "tool_calls" and not calls:
            choice["finish_reason"] = "stop"
        return {**last, "id": first.get("id"), "choices": [choice], **({"usage": usage} if usage is not None else {})}
    output = [i for r in rounds for i in r.get("output") or () if not _is_recall_item(i)]
    if not any(_answers(i) for i in output) and _recalled(api, rounds):
        output.append(_note_item())
    return {**last, "id": first.get("id"), "output": output, "usage": usage}


def _recalled(api: Api, rounds: Sequence[Json]) -> bool:
    """Whether the proxy left recall calls out of these rounds (another round followed one)."""
    return len(rounds) > 1 or recall_calls(api, rounds[0]) > 0


def _answers(item: object) -> bool:
    """Whether a Responses output item is something said or called (not reasoning)."""
    return isinstance(item, dict) and item.get("type") in ("message", "function_call", "custom_tool_call")


def _note_item() -> Json:
    return {"type": "message", "id": "msg_glyphpack_unanswered", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": UNANSWERED, "annotations": []}]}  # fmt: skip


class Relay:
    """One client stream made of the rounds' upstream streams: ``feed`` each round's
    bytes (what to send the client now comes back), then ``end_round`` (``final``: the
    client's answer ends here; else another round follows and this round's end is
    dropped)."""

    def __init__(self) -> None:
        self.parser = SseParser()
        self.continued = False  # a round before this one was followed by another
        self.usage: object = None  # the rounds before this one's, summed
        self.client_called = False  # a call of the client's own was sent this round
        self.dropped = False  # a recall call was left out
        self._held: list[tuple[str, Json | str]] = []

    def feed(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        for event, data, payload in self.parser.feed_json(chunk):
            if payload is None:
                if data == "[DONE]":
                    self._held.append((event, data))
                else:
                    out.append(_sse(event, data))
                continue
            for name, relayed in self.event(event, payload):
                out.append(_sse(name, relayed))
        return b"".join(out)

    def event(self, event: str, payload: Json) -> list[tuple[str, Json]]:
        """What one upstream event becomes for the client (held ones are kept aside)."""
        raise NotImplementedError

    def end_round(self, final: bool) -> bytes:
        held, self._held = self._held, []
        if final:
            note = b"".join(_sse(event, payload) for event, payload in self.note()) if (self.continued or self.dropped) and not self.said else b""
            return note + b"".join(_sse(event, self.ended(payload) if isinstance(payload, dict) else payload) for event, payload in held)
        for _, payload in held:
            usage = self.round_usage(payload) if isinstance(payload, dict) else None
            if usage is not None:
                self.usage = self._total(usage)
        self.continued = True
        self.client_called = False
        self.next_round()
        return b""

    def round_usage(self, payload: Json) -> object:
        """The usage a held end event of a continued round carries (None: none)."""
        return None

    @property
    def said(self) -> bool:
        """Whether the client was sent anything said or called, any round."""
        raise NotImplementedError

    def note(self) -> list[tuple[str, Json]]:
        """The events that give the client ``UNANSWERED`` (its answer had nothing else)."""
        raise NotImplementedError

    def ended(self, payload: Json) -> Json:
        """A held end event of the last round, as the client gets it."""
        return payload

    def next_round(self) -> None:
        pass

    def _total(self, usage: object) -> object:
        return summed_usage(self.usage, usage)  # the round's own while no earlier one counted


def _sse(event: str, data: Json | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event != "message" else ""
    return f"{head}data: {text}\n\n".encode()


class AnthropicRelay(Relay):
    """Messages events: one ``message_start``, content blocks numbered on across rounds,
    recall ``tool_use`` blocks dropped, ``message_delta``/``message_stop`` held."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = 0
        self.index: dict[object, int | None] = {}
        self.start_usage: object = None
        self.spoke = False  # a text or a call of the client's went out (not thinking alone)

    def event(self, event: str, payload: Json) -> list[tuple[str, Json]]:
        kind = payload.get("type", event)
        if kind == "message_start":
            self.start_usage = (payload.get("message") or {}).get("usage")
            return [] if self.continued else [(event, payload)]
        if kind == "content_block_start":
            block = payload.get("content_block") or {}
            if block.get("type") == "tool_use" and block.get("name") == RECALL_TOOL:
                self.index[payload.get("index")] = None
                self.dropped = True
                return []
            self.index[payload.get("index")] = self.blocks
            self.blocks += 1
            self.client_called |= block.get("type") == "tool_use"
            self.spoke |= block.get("type") in ("text", "tool_use")
        if kind in ("content_block_start", "content_block_delta", "content_block_stop"):
            number = self.index.get(payload.get("index"), payload.get("index"))
            return [] if number is None else [(event, {**payload, "index": number})]
        if kind in ("message_delta", "message_stop"):
            self._held.append((event, payload))
            return []
        return [(event, payload)]

    def round_usage(self, payload: Json) -> object:
        if payload.get("type") != "message_delta":
            return None
        start = self.start_usage if isinstance(self.start_usage, dict) else {}
        return {**start, **(payload.get("usage") or {})}

    def ended(self, payload: Json) -> Json:
        if payload.get("type") != "message_delta":
            return payload
        delta = dict(payload.get("delta") or {})
        if delta.get("stop_reason") == "tool_use" and not self.client_called:
            delta["stop_reason"] = "end_turn"
        if self.continued:  # every round's usage, each round's start and delta merged
            payload = {**payload, "usage": self._total(self.round_usage(payload))}
        return {**payload, "delta": delta}

    def next_round(self) -> None:
        self.index = {}

    @property
    def said(self) -> bool:
        return self.spoke

    def note(self) -> list[tuple[str, Json]]:
        start = {"type": "content_block_start", "index": self.blocks, "content_block": {"type": "text", "text": ""}}
        delta = {"type": "content_block_delta", "index": self.blocks, "delta": {"type": "text_delta", "text": UNANSWERED}}
        self.blocks += 1
        return [("content_block_start", start), ("content_block_delta", delta), ("content_block_stop", {"type": "content_block_stop", "index": self.blocks - 1})]


class ChatRelay(Relay):
    """Chat Completions chunks: tool calls numbered on across rounds, recall calls
    dropped, the finish, usage and ``[DONE]`` chunks held."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.index: dict[object, int | None] = {}
        self.texted = False  # some content went to the client
        self.chunk: Json = {}  # a chunk's fields other than its choices (id, model, created)

    def event(self, event: str, payload: Json) -> list[tuple[str, Json]]:
        choices = payload.get("choices")
        if "error" in payload or not isinstance(choices, list):
            return [(event, payload)]
        self.chunk = {k: v for k, v in payload.items() if k not in ("choices", "usage")}
        if not choices:  # the usage chunk after the finish
            self._held.append((event, payload))
            return []
        out: list[tuple[str, Json]] = []
        kept: list[Json] = []
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                kept.append(choice)
                continue
            delta = dict(choice.get("delta") or {})
            if self.continued:
                delta.pop("role", None)  # said once: clients add up every delta's fields
            if delta.get("tool_calls"):
                delta["tool_calls"] = self._calls(delta["tool_calls"])
                if not delta["tool_calls"]:
                    del delta["tool_calls"]
            if choice.get("finish_reason"):
                self._held.append((event, {**payload, "choices": [{**choice, "delta": {}}]}))
                if not delta:
                    continue
                choice = {**choice, "finish_reason": None}
            elif not delta and choice.get("delta"):
                continue  # it carried only a recall call's pieces
            self.texted |= bool(delta.get("content"))
            kept.append({**choice, "delta": delta})
        if kept:
            out.append((event, {**payload, "choices": kept}))
        return out

    def _calls(self, calls: list[Json]) -> list[Json]:
        kept = []
        for call in calls:
            if not isinstance(call, dict):
                continue
            number = call.get("index")
            if number not in self.index:
                if (call.get("function") or {}).get("name") == RECALL_TOOL:
                    self.index[number] = None
                    self.dropped = True
                else:
                    self.index[number] = self.calls
                    self.calls += 1
                    self.client_called = True
            mapped = self.index[number]
            if mapped is not None:
                kept.append({**call, "index": mapped})
        return kept

    def round_usage(self, payload: Json) -> object:
        return payload.get("usage")

    def ended(self, payload: Json) -> Json:
        # The held finish chunk has its one choice (``event`` made it so).
        choices = payload.get("choices") or []
        if choices and isinstance(choices[0], dict) and choices[0].get("finish_reason") == "tool_calls" and not self.client_called:
            return {**payload, "choices": [{**choices[0], "finish_reason": "stop"}]}
        if not choices and self.continued:
            return {**payload, "usage": self._total(payload.get("usage"))}
        return payload

    def next_round(self) -> None:
        self.index = {}

    @property
    def said(self) -> bool:
        return self.texted or self.calls > 0

    def note(self) -> list[tuple[str, Json]]:
        return [("message", {**self.chunk, "choices": [{"index": 0, "delta": {"content": UNANSWERED}, "finish_reason": None}]})]


class ResponsesRelay(Relay):
    """Responses events: ``response.created``/``in_progress`` once, output items
    numbered on across rounds, recall ``function_call`` items dropped, sequence numbers
    renumbered, ``response.completed`` held and, at the end, carrying every round's
    output (recall calls left out) and summed usage."""

    def __init__(self) -> None:
        super().__init__()
        self.outputs = 0  # output items the client was sent, every round's
        self.earlier: list[Json] = []  # the output items of the rounds before this one
        self.index: dict[object, int | None] = {}
        self.sequence = 0
        self.first_id: object = None
        self.answered = False  # a message or a call of the client's went out
        self.noted = False  # the note was sent as an item (it goes into the end's output too)

    def event(self, event: str, payload: Json) -> list[tuple[str, Json]]:
        kind = payload.get("type", event)
        if kind in ("response.created", "response.in_progress"):
            if self.continued:
                return []
            self.first_id = (payload.get("response") or {}).get("id", self.first_id)
        if kind == "response.completed":
            self._held.append((event, payload))
            return []
        if "output_index" in payload:
            number = payload.get("output_index")
            if kind == "response.output_item.added":
                item = payload.get("item") or {}
                if _is_recall_item(item):
                    self.index[number] = None
                    self.dropped = True
                else:
                    self.index[number] = self.outputs
                    self.outputs += 1
                    self.answered |= _answers(item)
            mapped = self.index.get(number, number)
            if mapped is None:
                return []
            payload = {**payload, "output_index": mapped}
        return [(event, self._numbered(payload))]

    def _numbered(self, payload: Json) -> Json:
        if "sequence_number" in payload:
            payload = {**payload, "sequence_number": self.sequence}
            self.sequence += 1
        return payload

    def round_usage(self, payload: Json) -> object:
        response = payload.get("response") or {}
        self.earlier += [i for i in response.get("output") or () if not _is_recall_item(i)]
        return response.get("usage")

    def ended(self, payload: Json) -> Json:
        response = payload.get("response")
        if not isinstance(response, dict):
            return self._numbered(payload)
        output = [*self.earlier, *(i for i in response.get("output") or () if not _is_recall_item(i))]
        if self.noted:
            output.append(_note_item())
        usage = self._total(response.get("usage"))
        # One response to the client, named as it began (clients check the lifecycle's id).
        whole = {**response, "id": self.first_id or response.get("id"), "output": output, "usage": usage}
        return self._numbered({**payload, "response": whole})

    def next_round(self) -> None:
        self.index = {}

    @property
    def said(self) -> bool:
        return self.answered

    def note(self) -> list[tuple[str, Json]]:
        self.noted = True
        index, item = self.outputs, _note_item()
        self.outputs += 1
        return [
            (name, self._numbered({"type": name, "sequence_number": 0, "output_index": index, "item": item}))
            for name in ("response.output_item.added", "response.output_item.done")
        ]


def _is_recall_item(item: object) -> bool:
    return isinstance(item, dict) and item.get("type") == "function_call" and item.get("name") == RECALL_TOOL


RELAYS: dict[Api, type[Relay]] = {"anthropic": AnthropicRelay, "openai-chat": ChatRelay, "openai-responses": ResponsesRelay}
