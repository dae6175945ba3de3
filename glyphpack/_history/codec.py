"""glyphpack's own JSON form of messages and histories (lossless round trip)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .._errors import HistoryError
from .ids import new_id
from .messages import Block, Message


def json_text(value: object) -> str:
    """Compact JSON text that encodes to UTF-8 whatever strings ``value`` holds: lone
    surrogates (valid in a Python str, not in UTF-8) are written as ``\\udXXX``
    escapes, which read back as the same string."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text


def json_bytes(value: object) -> bytes:
    """``json_text`` as UTF-8 bytes."""
    return json_text(value).encode("utf-8")


def message_to_json(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"id": message.id, "role": message.role, "content": [b.to_json() for b in message.content]}
    if message.time is not None:
        out["time"] = message.time
    return out


def message_from_json(data: object) -> Message:
    """A message from its JSON form; ``HistoryError`` says what is wrong."""
    if not isinstance(data, dict) or "role" not in data:
        raise HistoryError(f"a message must be an object with a role, not {str(data)[:80]!r}")
    content = data.get("content", [])
    if not isinstance(content, list):
        raise HistoryError(f"a message's content must be a list of blocks, not {type(content).__name__}")
    return Message(data["role"], tuple(Block.from_json(b) for b in content), data.get("id") or new_id(), data.get("time"))


def history_to_json(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [message_to_json(m) for m in messages]


def history_from_json(data: object) -> list[Message]:
    """Messages from a JSON list; errors name the message's index."""
    if not isinstance(data, list):
        raise HistoryError(f"a history must be a list of messages, not {type(data).__name__}")
    out = []
    for index, item in enumerate(data):
        try:
            out.append(message_from_json(item))
        except HistoryError as exc:
            raise HistoryError(f"message {index}: {exc}") from None
    return out
