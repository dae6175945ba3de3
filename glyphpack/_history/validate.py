"""What each provider API enforces on a request's messages beyond their types: the
rules its server rejects a request for. ``to_anthropic`` and ``to_openai_chat`` are
built to pass these; tests run them on every view the ladder and the store make."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import HistoryError

Json = dict[str, Any]


def check_anthropic(messages: Sequence[Json], *, max_images: int | None = None) -> None:
    """Raise ``HistoryError`` where the Anthropic Messages API would reject ``messages``:
    roles alternate starting with the user; every ``tool_use`` is answered by a
    ``tool_result`` in the next message, which holds its results first; no result
    without its call; thinking carries a signature; no text block is empty or only
    white space; at most ``max_images`` images."""
    images = 0
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        expected = "user" if index % 2 == 0 else "assistant"
        if role != expected:
            raise HistoryError(f"message {index}: role {role!r} where {expected!r} must come (roles alternate from user)")
        blocks: list[Json] = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if not blocks:
            raise HistoryError(f"message {index}: empty content")
        results = [str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"]
        if role == "user":
            if set(results) != open_calls:
                missing, extra = sorted(open_calls - set(results)), sorted(set(results) - open_calls)
                raise HistoryError(f"message {index}: tool results {extra} without calls, calls {missing} without results")
            kinds = [b.get("type") for b in blocks]
            if results and kinds[: len(results)] != ["tool_result"] * len(results):
                raise HistoryError(f"message {index}: tool results must come before the other blocks")
            open_calls = set()
        else:
            if results:
                raise HistoryError(f"message {index}: an assistant message holds tool results")
            open_calls = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
            for block in blocks:
                if block.get("type") == "thinking" and not block.get("signature"):
                    raise HistoryError(f"message {index}: thinking without a signature")
        for block in [*blocks, *(b for r in blocks if r.get("type") == "tool_result" and isinstance(r.get("content"), list) for b in r["content"])]:
            if block.get("type") == "text" and not str(block.get("text") or "").strip():
                raise HistoryError(f"message {index}: text content blocks must contain non-whitespace text")
        for block in blocks:
            if block.get("type") == "image":
                images += 1
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                images += sum(1 for b in block["content"] if b.get("type") == "image")
    if open_calls:
        raise HistoryError(f"tool calls {sorted(open_calls)} at the end have no results")
    if max_images is not None and images > max_images:
        raise HistoryError(f"{images} images, over the {max_images} a request may carry")


def check_openai_chat(messages: Sequence[Json], *, max_images: int | None = None) -> None:
    """Raise ``HistoryError`` where Chat Completions would reject ``messages``: the
    results of an assistant message's ``tool_calls`` come right after it as ``tool``
    messages, one per call, before any other message; no ``tool`` message otherwise;
    ``tool`` messages carry text; an assistant message has content or tool calls, and
    no other message's content is an empty list; at most ``max_images`` images."""
    waiting: set[str] = set()
    images = 0
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in waiting:
                raise HistoryError(f"message {index}: a tool message for {call_id!r}, which no open call made")
            if not isinstance(message.get("content"), str):
                raise HistoryError(f"message {index}: a tool message must carry text")
            waiting.discard(call_id)
            continue
        if waiting:
            raise HistoryError(f"message {index}: {role} message before the results of calls {sorted(waiting)}")
        content = message.get("content")
        if role == "assistant":
            waiting = {c["id"] for c in message.get("tool_calls") or ()}
            if content is None and not waiting:
                raise HistoryError(f"message {index}: an assistant message needs content or tool_calls")
        elif isinstance(content, list) and not content:
            raise HistoryError(f"message {index}: a {role} message with empty content")
        if isinstance(content, list):
            images += sum(1 for part in content if part.get("type") == "image_url")
    if waiting:
        raise HistoryError(f"tool calls {sorted(waiting)} at the end have no results")
    if max_images is not None and images > max_images:
        raise HistoryError(f"{images} images, over the {max_images} a request may carry")
