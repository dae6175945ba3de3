"""JSON lists of provider messages: OpenAI Chat Completions, OpenAI Responses input
items, Anthropic Messages (with a separate ``system``), Gemini ``contents``, and
glyphpack's own messages or transcripts."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._errors import HistoryError
from .._history.codec import history_from_json
from .._history.imported import ImportedAgent, ImportedSession
from .._history.messages import Block, Image, Message, Opaque, Text, Thinking, ToolCall, ToolResult
from .._types import APIS, Role
from .._wire import REGISTRY, ProviderApi
from .._wire.gemini import response_text
from .base import Tally, repair
from .codex import _item as responses_item

Document = Any
#: The provider lists this module reads, by the name ``import_file`` takes.
KINDS = (*APIS, "glyphpack")


def _messages_of(document: Document) -> tuple[list[Any], str | None]:
    """(message list, system prompt) of a plain list or an object holding one."""
    if isinstance(document, list):
        return document, None
    if isinstance(document, dict):
        for key in ("messages", "input", "contents", "history"):
            if isinstance(document.get(key), list):
                system = document.get("system") or document.get("instructions") or document.get("systemInstruction")
                if isinstance(system, dict):  # Gemini systemInstruction: {parts: [...]}
                    system = " ".join(p.get("text", "") for p in system.get("parts", []) if isinstance(p, dict))
                elif isinstance(system, list):  # Anthropic system blocks
                    system = " ".join(b.get("text", "") for b in system if isinstance(b, dict))
                return document[key], system if isinstance(system, str) else None
    return [], None


def _dicts(items: list[Any]) -> list[dict[str, Any]]:
    return [i for i in items if isinstance(i, dict)]


def kind_of(document: Document) -> str | None:
    """Which plain format ``document`` is, from its content; None if none."""
    if isinstance(document, dict) and document.get("format") == "glyphpack-transcript":
        return "glyphpack"
    items, _ = _messages_of(document)
    items = _dicts(items)
    if not items:
        return None
    blocks = [b for i in items if isinstance(i.get("content"), list) for b in i["content"] if isinstance(b, dict)]
    if all("id" in i and isinstance(i.get("content"), list) for i in items) and all(b.get("type") in Block.registry for b in blocks):
        return "glyphpack"
    # The API whose shape it surely has; of equal claims, the first registered.
    sureness, name = max(((api.recognizes(items, document), -n), name) for n, (name, api) in enumerate(REGISTRY.items()))
    return name if sureness[0] else None


def read(path: Path, document: Document, kind: str) -> ImportedSession:
    tally = Tally()
    items, system = _messages_of(document)
    # Files are read more leniently than responses (camelCase keys, calls without ids,
    # bad image data kept as a note): those readers first, each API's own for the rest.
    readers: dict[str, Callable[[list[Any], str | None, Tally], list[Message]]] = {
        "gemini": _gemini,
        "openai-responses": _responses,
        "glyphpack": lambda items, system, tally: history_from_json(items),
    }
    for name, api in REGISTRY.items():
        readers.setdefault(name, functools.partial(_strict, api))
    if kind == "glyphpack" and isinstance(document, dict) and document.get("format") == "glyphpack-transcript":
        from .._history.folder import read_transcript

        stored = read_transcript(path)
        messages = list(stored.messages) if stored else []
    else:
        try:
            messages = readers[kind](items, system, tally)
        except HistoryError as exc:
            raise HistoryError(f"{path}: {exc}") from None
        if kind != "glyphpack":  # provider lists carry no ids: number the messages, so a file imports the same twice
            messages = [dataclasses.replace(m, id=f"{kind}-{n}") for n, m in enumerate(messages)]
    agents = (ImportedAgent("main", tuple(repair(messages, tally))),)
    return ImportedSession("", agents, (), tally.report(kind, agents, 0))


def _strict(api: ProviderApi, items: list[Any], system: str | None, tally: Tally) -> list[Message]:
    return api.from_wire(items, system)


def _with_system(messages: list[Message], system: str | None) -> list[Message]:
    return ([Message("system", (Text(system),))] if system else []) + messages


def _responses(items: list[Any], system: str | None, tally: Tally) -> list[Message]:
    messages: list[Message] = _with_system([], system)
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise HistoryError(f"item {index}: not an object")
        if "type" not in item and "role" in item:
            item = item | {"type": "message"}
        role, blocks = responses_item(item, tally)
        if not blocks:
            continue
        if messages and messages[-1].role == role and role in ("assistant", "tool"):
            messages[-1] = messages[-1].with_content(messages[-1].content + tuple(blocks))
        else:
            messages.append(Message(role, tuple(blocks)))  # type: ignore[arg-type]
    return messages


def _gemini(items: list[Any], system: str | None, tally: Tally) -> list[Message]:
    """Gemini ``contents``: function calls carry no id in older files, so each gets one
    and the next response with its name answers it."""
    messages: list[Message] = _with_system([], system)
    waiting: dict[str, list[str]] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("parts"), list):
            raise HistoryError(f"content {index}: needs a role and a list of parts")
        calls: list[Block] = []
        results: list[Block] = []
        others: list[Block] = []
        for number, part in enumerate(item["parts"]):
            if not isinstance(part, dict):
                continue
            call = part.get("functionCall") or part.get("function_call")
            response = part.get("functionResponse") or part.get("function_response")
            inline = part.get("inlineData") or part.get("inline_data")
            linked = part.get("fileData") or part.get("file_data")
            signature = part.get("thoughtSignature") or part.get("thought_signature")
            if isinstance(call, dict):
                call_id = str(call.get("id") or f"gemini-{index}-{number}")
                waiting.setdefault(str(call.get("name")), []).append(call_id)
                args = call.get("args")
                arguments: dict[str, Any] = args if isinstance(args, dict) else {}
                calls.append(ToolCall(call_id, str(call.get("name") or "tool"), arguments, signature if isinstance(signature, str) else None))
            elif isinstance(response, dict):
                # Calls without ids are answered in order, by name: the first open call of the
                # function; so are they by a response whose id no open call has (Gemini CLI
                # wrote ids on its responses, ``run_shell_command-1768861006340-...``, not its calls).
                name = str(response.get("name"))
                queue = waiting.get(name) or []
                given = str(response.get("id") or "")
                call_id = given if given in queue or not queue else queue[0]
                if call_id in queue:
                    queue.remove(call_id)
                body = response.get("response")
                results.append(ToolResult(call_id, (Text(response_text(body)),), isinstance(body, dict) and set(body) == {"error"}))
            elif isinstance(inline, dict):
                mime = inline.get("mimeType") or inline.get("mime_type") or "image/png"
                try:
                    others.append(Image(str(mime), base64.b64decode(str(inline.get("data")), validate=True)))
                except (binascii.Error, ValueError):
                    tally.repair("images without valid data kept as a text stub")
                    others.append(Text(f"[image {mime}: its data was not valid base64]"))
            elif isinstance(linked, dict) and isinstance(linked.get("fileUri") or linked.get("file_uri"), str) and str(
                linked.get("mimeType") or linked.get("mime_type") or "image/"
            ).startswith("image/"):
                mime = linked.get("mimeType") or linked.get("mime_type") or "image/png"
                others.append(Image(str(mime), ref=linked.get("fileUri") or linked.get("file_uri")))
            elif isinstance(part.get("text"), str) and part.get("thought") is True:
                others.append(Thinking(part["text"], signature if isinstance(signature, str) else None))
            elif isinstance(part.get("text"), str):
                others.append(Text(part["text"]))
            else:
                others.append(Opaque("gemini-part", part))
        role: Role = "assistant" if item.get("role") == "model" else "user"
        if results:
            messages.append(Message("tool", tuple(results)))
        if others or calls:
            messages.append(Message(role, (*others, *calls)))
    return messages
