"""Google's Gemini API: ``client.models.generate_content``, contents to and from neutral messages.

Contents alternate ``user`` and ``model``; system text becomes the
``system_instruction``; a tool call is a ``function_call`` part (with the thought
signature Gemini 3 wants back), a result a ``function_response`` part naming its
call's function, the result's images ``inline_data`` parts after the turn's responses.
Image bytes stay bytes: the SDK base64-encodes them on the wire.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any

from .._errors import HistoryError, UsageError
from .._history.messages import Block, Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult
from .._providers.profile import Profile
from .._types import public
from .base import Json, ProviderApi, usage_tokens
from .common import (
    CONTINUES,
    KNOWN_BLOCKS,
    MALFORMED,
    add_turn,
    check_image_count,
    each_known,
    message_error,
    results_first,
    split_user_turn,
)

#: Ids glyphpack gave calls that Gemini sent without one; they are not sent back.
LOCAL_CALL_ID = "gemini-local-"


def _image_part(block: Image, media_resolution: str | None) -> Json:
    if block.data is not None:
        part: Json = {"inline_data": {"mime_type": block.media_type, "data": block.data}}
    else:
        part = {"file_data": {"mime_type": block.media_type, "file_uri": block.ref}}
    return part | {"media_resolution": {"level": media_resolution}} if media_resolution else part


#: Google's documented stand-in for a function call's thought signature the history does
#: not have (calls made by another model, or imported): Gemini 3 rejects a call of the
#: current turn without one ("Function call is missing a thought_signature").
SKIP_SIGNATURE = b"skip_thought_signature_validator"


@public
def to_gemini(
    messages: Sequence[Message], *, media_resolution: str | None = None, unsigned: bytes | None = None
) -> tuple[str | None, list[Json]]:
    """(``system_instruction``, ``contents``) for ``client.models.generate_content``;
    ``media_resolution`` (Gemini 3's per-part level, the reader's) is set on every image.
    ``unsigned``: the signature given to a model turn's first function call when it has
    none (``SKIP_SIGNATURE`` for Gemini 3; parallel calls carry one on the first only)."""
    system = "\n\n".join(m.text for m in messages if m.role == "system") or None
    names: dict[str, str] = {}  # call id -> function name, for the responses
    contents: list[Json] = []
    for message in results_first(messages):
        if each_known(message, KNOWN_BLOCKS, "Gemini").role == "system":
            continue
        role = "model" if message.role == "assistant" else "user"
        parts: list[Json] = []
        images: list[Json] = []
        for block in message.content:
            if isinstance(block, Text):
                parts.append({"text": block.text})
            elif isinstance(block, Image):
                images.append(_image_part(block, media_resolution))
            elif isinstance(block, ToolCall):
                names[block.id] = block.name
                call: Json = {"name": block.name, "args": block.arguments}
                if not block.id.startswith(LOCAL_CALL_ID):
                    call["id"] = block.id
                part: Json = {"function_call": call}
                if block.signature:
                    part["thought_signature"] = base64.b64decode(block.signature)
                parts.append(part)
            elif isinstance(block, ToolResult):
                key = "error" if block.is_error else "output"
                response: Json = {"name": names.get(block.call_id, "tool"), "response": {key: block.text}}
                if not block.call_id.startswith(LOCAL_CALL_ID):
                    response["id"] = block.call_id
                parts.append({"function_response": response})
                images.extend(_image_part(b, media_resolution) for b in block.images())
            # thinking, redacted thinking and opaque blocks: Gemini takes none back
        parts.extend(images)
        if not parts:
            continue
        calls = [part for part in parts if "function_call" in part]
        if unsigned is not None and calls and not any("thought_signature" in part for part in calls):
            calls[0]["thought_signature"] = unsigned
        add_turn(contents, role, "parts", parts)
    if contents and contents[0]["role"] == "model":
        contents.insert(0, {"role": "user", "parts": [{"text": CONTINUES}]})
    return system, contents


#: The keys a function response's text is wrapped in: the API's documented ``output`` and
#: ``error``, and ``result``, where ADK puts what a tool returned.
RESPONSE_KEYS = ("output", "error", "result")


def response_text(body: object) -> str:
    """A function response's text: its ``output`` (or ``error``, or ADK's ``result``)
    when that is all it holds, else the whole response as JSON, so no key of it is lost."""
    if isinstance(body, dict) and len(body) == 1 and next(iter(body)) in RESPONSE_KEYS and isinstance(next(iter(body.values())), str):
        return str(next(iter(body.values())))
    if isinstance(body, str):
        return body
    return json.dumps(body, ensure_ascii=False, default=str)


def _blocks(parts: Sequence[Json], content: int) -> list[Block]:
    """The blocks of content number ``content``'s ``parts``. A call without an id (the
    API's ids are optional, and ADK strips its own) is named by where it is
    (``gemini-local-<content>-<part>``): the same history read again gives it the same
    id, so a framework that sends its whole history each call continues what is stored."""
    blocks: list[Block] = []
    for position, part in enumerate(parts):
        signature = part.get("thought_signature")
        if isinstance(signature, (bytes, bytearray)):
            signature = base64.b64encode(signature).decode("ascii")
        if part.get("function_call"):
            call = part["function_call"]
            args = call.get("args") or {}
            blocks.append(ToolCall(call.get("id") or f"{LOCAL_CALL_ID}{content}-{position}", call["name"], dict(args), signature or None))
        elif part.get("function_response"):
            response = part["function_response"]
            body = response.get("response") or {}
            blocks.append(ToolResult(response.get("id") or "", (Text(response_text(body)),), isinstance(body, dict) and "error" in body))
        elif part.get("text") is not None:
            blocks.append(Thinking(part["text"], signature) if part.get("thought") else Text(part["text"]))
        elif part.get("inline_data"):
            blob = part["inline_data"]
            data = blob["data"]
            blocks.append(Image(blob.get("mime_type", "image/png"), data if isinstance(data, bytes) else base64.b64decode(data)))
        elif part.get("file_data") and str(part["file_data"].get("mime_type", "image/")).startswith("image/"):
            blob = part["file_data"]  # an uploaded image by URI (other files stay opaque)
            blocks.append(Image(blob.get("mime_type", "image/png"), ref=blob["file_uri"]))
        else:
            blocks.append(Opaque("gemini_part", {k: v for k, v in part.items() if not isinstance(v, bytes)}))
    return blocks


@public
def from_gemini(contents: Sequence[Json], system_instruction: str | None = None) -> list[Message]:
    """Neutral messages from Gemini contents (snake_case keys, as ``model_dump()``
    gives them): a user turn's function responses become a ``tool`` message."""
    out = [Message("system", (Text(system_instruction),))] if system_instruction else []
    for index, content in enumerate(contents):
        try:
            blocks = _blocks(content.get("parts") or (), index)
            if content.get("role") == "model":
                out.append(Message("assistant", tuple(blocks)))
                continue
            # A response without an id answers the first open call of its function.
            open_calls = list(out[-1].tool_calls) if out and out[-1].role == "assistant" else []
            names = [p["function_response"].get("name") for p in content.get("parts") or () if p.get("function_response")]
            for position, block in enumerate(blocks):
                if isinstance(block, ToolResult) and not block.call_id:
                    name = names[sum(isinstance(b, ToolResult) for b in blocks[:position])]
                    call = next((c for c in open_calls if c.name == name), None)
                    if call is None:
                        raise HistoryError(f"a function response for {name!r} answers no call of the turn before")
                    open_calls.remove(call)
                    blocks[position] = dataclasses.replace(block, call_id=call.id)
            out.extend(split_user_turn(blocks))
        except MALFORMED as exc:
            raise message_error(index, exc) from None
    return out


def check_gemini(contents: Sequence[Json], *, max_images: int | None = None) -> None:
    """Raise ``HistoryError`` where Gemini would reject ``contents``: it starts with a
    user turn, roles alternate, a model turn's function calls are answered by as many
    function responses, with the same names, in the next user turn, and at most
    ``max_images`` images."""
    if not contents:
        raise HistoryError("contents is empty")
    check_image_count(sum(1 for c in contents for p in c.get("parts") or () if "inline_data" in p or "file_data" in p), max_images)
    for index, content in enumerate(contents):
        expected = "user" if index % 2 == 0 else "model"
        if content.get("role") != expected:
            raise HistoryError(f"content {index}: role {content.get('role')!r} where {expected!r} must come")
        if not content.get("parts"):
            raise HistoryError(f"content {index}: no parts")
        calls = [p["function_call"]["name"] for p in content["parts"] if p.get("function_call")]
        if not calls:
            continue
        following = contents[index + 1]["parts"] if index + 1 < len(contents) else []
        answered = [p["function_response"]["name"] for p in following if p.get("function_response")]
        if sorted(answered) != sorted(calls):
            raise HistoryError(f"content {index}: calls {calls} answered by {answered} in the next turn")


# ------------------------------------------------------------------ the REST wire
# The SDK speaks snake_case and bytes; the REST API (what Gemini CLI and a proxy see)
# camelCase and base64. Keys are renamed everywhere but inside a call's ``args`` and a
# response's ``response``: those are the tool's own data, never renamed.

#: Keys whose values are a tool's own data.
_PAYLOADS = frozenset({"args", "response"})


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _renamed(value: Any, rename: Any, *, encode: bool) -> Any:
    if isinstance(value, dict):
        return {rename(k): v if k in _PAYLOADS else _renamed(v, rename, encode=encode) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, rename, encode=encode) for v in value]
    if encode and isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    return value


@public
def from_rest(value: Any) -> Any:
    """Gemini REST JSON (camelCase: ``functionCall``, ``usageMetadata``) in the SDK's
    snake_case, which ``from_gemini`` and ``Gemini.parse`` read; base64 stays text."""
    return _renamed(value, _snake, encode=False)


@public
def to_rest(value: Any) -> Any:
    """``to_gemini``'s contents (snake_case, bytes) as the REST API's JSON (camelCase,
    base64), as a REST client sends them."""
    return _renamed(value, _camel, encode=True)


#: Models that enforce thought signatures on the current turn's function calls.
_GEMINI_3 = re.compile(r"(models/)?gemini-([3-9]|\d\d)")


class Gemini(ProviderApi):
    """``client.models.generate_content(**request)``; tools go in ``config``
    (``request(..., config={"tools": ...})`` merges them)."""

    name = "gemini"
    provider = "google"
    title = "Gemini"
    request_key = "contents"
    response_key = "candidates"
    sdk_module = "google.genai"
    sdk_package = "google-genai"
    output_usage_key = "candidates_token_count"
    key_variables = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    overflow_patterns = (
        # "The input token count (1234567) exceeds the maximum number of tokens allowed (1048576)."
        (
            "gemini",
            re.compile(r"input token count \((?P<measured>\d+)\) exceeds the maximum number of tokens allowed \((?P<limit>\d+)\)", re.I),
        ),
        ("gemini", re.compile(r"input token count \((?P<measured>\d+)\) exceeds the maximum", re.I)),
    )
    overflow_wordings = (("gemini", re.compile(r"exceeds the maximum number of tokens", re.I)),)

    def to_wire(self, messages: Sequence[Message], profile: Profile | None = None, model: str = "") -> tuple[str | None, list[Json]]:
        unsigned = SKIP_SIGNATURE if _GEMINI_3.match(model) else None
        media_resolution = profile.reader.media_resolution if profile else None
        return to_gemini(messages, media_resolution=media_resolution, unsigned=unsigned)

    def from_wire(self, items: Sequence[Json], system: str | None = None) -> list[Message]:
        return from_gemini(items, system)

    def check(self, items: Sequence[Json], *, max_images: int | None = None) -> None:
        check_gemini(items, max_images=max_images)

    def recognizes(self, items: Sequence[Json], document: object) -> int:
        return 3 if any("parts" in i and i.get("role") in ("user", "model", "function", "tool") for i in items) else 0

    def build(self, model: str, view: Sequence[Message], prefix: int, profile: Profile) -> Json:
        request = super().build(model, view, prefix, profile)
        request.setdefault("config", {})  # where the caller's tools merge
        return request

    def put_system(self, request: Json, system: str) -> None:
        request["config"] = {"system_instruction": system}

    def send(self, client: Any, request: Json) -> object:
        return client.models.generate_content(**request)

    def tool(self, name: str, description: str, parameters: Json) -> Json:
        return {"function_declarations": [{"name": name, "description": description, "parameters": parameters}]}

    def with_tools(self, extra: Json, definitions: Sequence[Json]) -> Json:
        """Gemini takes tools in ``config``: added to the caller's ``config["tools"]``."""
        config = extra.get("config", {})
        if not isinstance(config, dict):
            raise UsageError("config must be a dict to take glyphpack's tools (not a types.GenerateContentConfig)")
        return {**extra, "config": {**config, **super().with_tools(config, definitions)}}

    def tool_names(self, definition: object) -> set[str]:
        declarations = definition.get("function_declarations") if isinstance(definition, dict) else None
        named = super().tool_names  # (a comprehension has no super of its own)
        return {name for d in declarations for name in named(d)} if isinstance(declarations, list) else set()

    def reply_limit(self, tokens: int) -> Json:
        return {"config": {"max_output_tokens": tokens}}

    def parse(self, response: object) -> Any:
        """As ``ProviderApi.parse``, for an SDK response or its REST JSON alike."""
        return super().parse(from_rest(response) if isinstance(response, dict) else response)

    def assistant_messages(self, data: Json) -> list[Message]:
        candidates = data.get("candidates")
        if not isinstance(candidates, list) or not candidates:
            feedback = data.get("prompt_feedback")
            raise self.not_a(data, f"no candidates ({feedback})" if feedback else "no candidates")
        first = candidates[0] if isinstance(candidates[0], dict) else {}
        if not isinstance(first.get("content"), dict):
            raise HistoryError(f"a Gemini response whose first candidate has no content (finish_reason {first.get('finish_reason')!r})")
        return from_gemini([first["content"]])

    def input_tokens(self, data: Json) -> int | None:
        return usage_tokens(data, "prompt_token_count")

    def new_client(self, module: Any, options: Json) -> Any:
        base_url = options.pop("base_url", None)
        return module.Client(**options, **({"http_options": {"base_url": base_url}} if base_url else {}))


API = Gemini()
