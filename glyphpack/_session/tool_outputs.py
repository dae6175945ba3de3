"""What a tool returned, as a tool result's blocks: text as it is, bytes as the image they
are or as text (undecodable bytes escaped), JSON for anything else; a session's
``add_tool_results`` takes outputs through here."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re

from .._errors import UsageError
from .._history.messages import Block, Image, Text, ToolResult


def tool_result(call_id: str, output: object) -> ToolResult:
    """A tool's output as harnesses give it, as a result; nothing of it dropped.

    - a ``ToolResult`` for this call, as it is; ``None``: an explicit empty result;
    - ``str``; bytes (``subprocess`` output): UTF-8, bytes that are not shown as ``\\xNN``
      and counted in a note; binary (a NUL byte, or mostly not UTF-8): an image when it is
      one, else its base64 under a line saying what it is;
    - ``dict``, and lists or tuples of anything but blocks and strings: JSON;
    - a list or tuple of strings and ``Text``/``Image`` blocks: those blocks, in order.

    Anything else is a ``UsageError`` naming the call and the type.
    """
    if isinstance(output, ToolResult):
        if output.call_id != call_id:
            raise UsageError(f"result for {call_id!r} carries call id {output.call_id!r}")
        return output
    return ToolResult(call_id, _output_blocks(call_id, output))


def _output_blocks(call_id: str, output: object) -> tuple[Text | Image, ...]:
    if output is None:
        return ()
    if isinstance(output, str):
        return (Text(output),)
    if isinstance(output, (bytes, bytearray, memoryview)):
        return (_from_bytes(bytes(output)),)
    if isinstance(output, (list, tuple)) and output and all(isinstance(item, (str, Text, Image)) for item in output):
        return tuple(Text(item) if isinstance(item, str) else item for item in output)
    if isinstance(output, (dict, list, tuple)):
        try:
            return (Text(json.dumps(output, ensure_ascii=False, indent=1)),)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"the output for call {call_id!r} is of type {type(output).__name__} but not JSON: {exc}") from None
    kind = "a block of another kind" if isinstance(output, Block) else f"of type {type(output).__name__}"
    raise UsageError(
        f"the output for call {call_id!r} is {kind}: give text, bytes, JSON (a dict or list), "
        "a list of strings and Text/Image blocks, a ToolResult, or None for no output"
    )


#: A share of bytes that are not UTF-8 above which output is binary, not text.
BINARY_SHARE = 0.3
#: Image formats every provider takes, as Pillow names them.
_IMAGE_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
_ESCAPED = re.compile("[\udc80-\udcff]")


def _from_bytes(data: bytes) -> Text | Image:
    """Bytes a tool wrote: text where they are text, else what the binary is, whole."""
    # surrogateescape turns each byte that is not UTF-8 into one lone surrogate: countable.
    undecodable = len(_ESCAPED.findall(data.decode("utf-8", errors="surrogateescape")))
    if b"\x00" not in data and undecodable <= BINARY_SHARE * len(data):
        note = f"\n[{undecodable:,} bytes were not UTF-8: shown as \\xNN]" if undecodable else ""
        return Text(data.decode("utf-8", errors="backslashreplace") + note)
    media_type = _image_type(data)
    if media_type is not None:
        return Image(media_type, data)
    digest = hashlib.sha256(data).hexdigest()[:16]
    return Text(f"[binary output: {len(data):,} bytes, sha256 {digest}..., as base64]\n{base64.b64encode(data).decode('ascii')}")


def _image_type(data: bytes) -> str | None:
    """The media type of ``data`` when it is a whole image of a kind providers take (a
    broken one would be rejected), else None."""
    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(data)) as image:
            media_type = _IMAGE_FORMATS.get(image.format or "")
            image.verify()
    except Exception:
        return None
    return media_type
