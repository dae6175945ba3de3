"""What more than one provider API's conversion needs: the order tool results must
come in, merging a role's consecutive turns, base64 and data URLs, tool-call
arguments, and the error a malformed provider message raises."""

from __future__ import annotations

import base64
import binascii
import functools
import io
import json
from collections.abc import Callable, Sequence
from typing import Any

from .._errors import HistoryError
from .._history.messages import Block, Image, Message, Opaque, RedactedThinking, Text, Thinking, ToolCall, ToolResult

Json = dict[str, Any]

#: The user's first message where a history starts with the assistant's (after a trim
#: or a compaction): Anthropic and Gemini want the user first.
CONTINUES = "[the conversation continues]"

#: What reading a malformed provider message raises, turned into ``message_error``.
MALFORMED = (KeyError, TypeError, AttributeError, ValueError, IndexError, HistoryError)


def results_first(messages: Sequence[Message]) -> list[Message]:
    """The history in the order every API requires: an assistant message's tool results
    right after it, ahead of any other message that came between (a harness's note, the
    user's shell command); a user message carrying results split into its results and
    the rest. Nothing is dropped or changed."""
    out: list[Message] = []
    waiting: list[Message] = []  # messages that came between calls and their results
    for message in messages:
        if message.role == "assistant":
            out.extend(waiting)
            waiting = []
            out.append(message)
            continue
        results = tuple(b for b in message.content if isinstance(b, ToolResult))
        others = tuple(b for b in message.content if not isinstance(b, ToolResult))
        if results and out and out[-1].role in ("assistant", "tool") and not waiting:
            out.append(message if not others else Message("tool", results, id=f"{message.id}-results"))
        elif results:
            out.append(Message("tool", results, id=f"{message.id}-results") if others or message.role != "tool" else message)
        if waiting and not calls_open(out):  # every call answered: what waited goes next
            out.extend(waiting)
            waiting = []
        if others:
            rest = message if not results else message.with_content(others)
            (waiting if calls_open(out) else out).append(rest)
    out.extend(waiting)
    return out


def calls_open(out: Sequence[Message]) -> bool:
    """Whether the last assistant message in ``out`` has calls not yet answered in ``out``."""
    answered: set[str] = set()
    for message in reversed(out):
        if message.role == "assistant":
            return any(c.id not in answered for c in message.tool_calls)
        answered.update(r.call_id for r in message.tool_results)
    return False


def add_turn(out: list[Json], role: str, key: str, items: list[Json]) -> None:
    """Append a turn of ``role`` whose ``key`` holds ``items``, merged into the last turn
    when that is the same role (APIs that want the roles to alternate)."""
    if out and out[-1]["role"] == role:
        out[-1][key].extend(items)
    else:
        out.append({"role": role, key: items})


def decode_base64(data: object, what: str) -> bytes:
    if not isinstance(data, str):
        raise HistoryError(f"{what} must be a base64 string, not {type(data).__name__}")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise HistoryError(f"{what} is not valid base64 ({exc})") from None


def split_user_turn(blocks: Sequence[Block]) -> list[Message]:
    """A user turn of an API that carries tool results in it (Anthropic, Gemini): a
    ``tool`` message of its results, then a user message of the rest."""
    results = tuple(b for b in blocks if isinstance(b, ToolResult))
    others = tuple(b for b in blocks if not isinstance(b, ToolResult))
    return ([Message("tool", results)] if results else []) + ([Message("user", others)] if others else [])


def message_error(index: int, exc: Exception) -> HistoryError:
    """A malformed provider message as a ``HistoryError`` naming its index and the key."""
    if isinstance(exc, KeyError):
        return HistoryError(f"message {index}: no {exc.args[0]!r} key where one is needed")
    if isinstance(exc, HistoryError):
        return HistoryError(f"message {index}: {exc}")
    return HistoryError(f"message {index}: malformed ({type(exc).__name__}: {exc})")


#: The image types the Anthropic and OpenAI APIs take; a request with another is refused (400).
WEB_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: What an image's first bytes say it is: the APIs refuse an image whose bytes are not
#: the type it is labelled ("image does not match the provided media type").
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
          (b"GIF89a", "image/gif"))


def image_type_of(data: bytes) -> str | None:
    """The ``WEB_IMAGE_TYPES`` type ``data``'s first bytes say it is; None for any other."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for magic, kind in _MAGIC if data.startswith(magic)), None)


@functools.lru_cache(maxsize=32)
def _as_png(data: bytes) -> bytes | None:
    """``data`` (an image of a type Pillow reads: BMP, TIFF, ICO, ...) re-encoded as PNG;
    None when Pillow cannot read it. The same bytes give the same PNG, so the prompt
    cache still hits."""
    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(data)) as image:
            image.load()
            converted = image if image.mode in ("1", "L", "LA", "P", "RGB", "RGBA") else image.convert("RGBA")
            out = io.BytesIO()
            converted.save(out, "PNG")
    except (OSError, ValueError, SyntaxError, PILImage.DecompressionBombError):
        return None
    return out.getvalue()


def web_image(block: Image) -> Image | Text:
    """``block`` as the Anthropic and OpenAI APIs take it: itself when it is a reference
    or its bytes are of a ``WEB_IMAGE_TYPES`` type (labelled by what the bytes are, which
    may differ from the label it came with); else re-encoded as PNG where Pillow reads it;
    else a note saying what it is. The history keeps the block as it was (Gemini takes
    more types)."""
    if block.data is None:
        return block
    actual = image_type_of(block.data)
    if actual is not None:
        return block if actual == block.media_type else Image(actual, block.data)
    png = _as_png(block.data)
    if png is not None:
        return Image("image/png", png)
    return Text(f"[attachment {block.media_type}, {len(block.data):,} bytes: kept in the history; "
                "this API takes no attachment of this type]")


def check_image_type(where: str, media_type: object) -> None:
    """Raise ``HistoryError`` for an image a request carries whose type the Anthropic
    and OpenAI APIs refuse (``where``: the message or item, for the error)."""
    if media_type not in WEB_IMAGE_TYPES:
        raise HistoryError(f"{where}: image type {media_type!r} is not one of {', '.join(sorted(WEB_IMAGE_TYPES))}")


def data_url_parts(url: object) -> tuple[str, str] | None:
    """(media type, payload) of a ``data:`` URL (``data:image/png;base64,...``); None for
    anything else."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    header, _, payload = url[5:].partition(",")
    return header.split(";")[0], payload


def check_image_url(where: str, url: object) -> None:
    """``check_image_type`` for an OpenAI image URL: a ``data:`` URL's type (a link is
    fetched by the provider, which reads its type there)."""
    parts = data_url_parts(url)
    if parts is not None:
        check_image_type(where, parts[0])


def image_url(block: Image) -> str | None:
    """An image as OpenAI takes it: its bytes as a ``data:`` URL, else its reference."""
    if block.data is not None:
        return f"data:{block.media_type};base64,{base64.b64encode(block.data).decode('ascii')}"
    return block.ref


def image_from_url(url: object) -> Image:
    """An ``Image`` from a URL, or from a ``data:`` URL's bytes."""
    if not isinstance(url, str):
        raise HistoryError(f"an image URL must be a string, not {type(url).__name__}")
    parts = data_url_parts(url)
    if parts is not None:
        return Image(parts[0] or "image/png", decode_base64(parts[1], "a data URL"))
    return Image(ref=url)


def tool_arguments(raw: object, call_id: str) -> dict[str, Any]:
    """A tool call's arguments from a JSON string (or an object); ``HistoryError`` if neither."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError as exc:
        raise HistoryError(f"tool call {call_id!r} has arguments that are not JSON: {exc}") from None
    if not isinstance(arguments, dict):
        return {"input": raw}  # a custom tool's free-form input, kept as it came
    return arguments


#: The block classes the converters have a rule for, sent or left out on purpose (thinking
#: and opaque blocks are not sent by every API). A new block class is in none of them,
#: so every converter refuses it until it is given a rule.
KNOWN_BLOCKS: tuple[type[Block], ...] = (Text, Image, ToolCall, ToolResult, Thinking, RedactedThinking, Opaque)


def each_known(message: Message, known: tuple[type[Block], ...], api: str) -> Message:
    """``message``, once every block of it is of a class the API module has a rule for
    (sent, or left out on purpose); ``HistoryError`` naming the first that is not."""
    for block in message.content:
        if not isinstance(block, known):
            raise unsendable(block, api)
    return message


def content_part(block: Text | Image, text_type: str, image_part: Callable[[Image], Json]) -> Json:
    """A text or image block as one of an API's content parts (``text_type`` names its
    text part; ``image_part`` builds its image part)."""
    sent = web_image(block) if isinstance(block, Image) else block
    return {"type": text_type, "text": sent.text} if isinstance(sent, Text) else image_part(sent)


def check_image_count(images: int, max_images: int | None) -> None:
    """Raise ``HistoryError`` when a request's ``images`` are more than it may carry."""
    if max_images is not None and images > max_images:
        raise HistoryError(f"{images} images, over the {max_images} a request may carry")


def unsendable(block: Block, api: str) -> HistoryError:
    """The error for a block class an API's converter has no rule for (a new block
    type must be given one in every API module, never dropped unseen)."""
    return HistoryError(f"{type(block).__name__} has no {api} form")
