"""Image content blocks in each provider API's own request format."""

from __future__ import annotations

import base64

from ._providers import Profile

APIS = ("anthropic", "openai-chat", "openai-responses", "gemini")
MEDIA_TYPE = "image/png"


def image_block(png: bytes, api: str, profile: Profile | None = None) -> dict:
    """A content block carrying ``png`` for ``api``.

    ``anthropic``: a Messages ``image`` block with a base64 source.
    ``openai-chat``: a Chat Completions ``image_url`` part with a data URL.
    ``openai-responses``: a Responses ``input_image`` part with a data URL.
    ``gemini``: a ``Part`` with ``inline_data`` (and ``media_resolution`` for Gemini 3).
    The OpenAI ``detail`` and Gemini ``media_resolution`` come from the profile the page
    was sized for; without one, ``detail`` is ``"auto"``.
    """
    data = base64.b64encode(png).decode("ascii")
    reader = profile.reader if profile is not None else None
    if api == "anthropic":
        return {"type": "image", "source": {"type": "base64", "media_type": MEDIA_TYPE, "data": data}}
    detail = (reader.detail if reader is not None else None) or "auto"
    url = f"data:{MEDIA_TYPE};base64,{data}"
    if api == "openai-chat":
        return {"type": "image_url", "image_url": {"url": url, "detail": detail}}
    if api == "openai-responses":
        return {"type": "input_image", "image_url": url, "detail": detail}
    if api == "gemini":
        block: dict = {"inline_data": {"mime_type": MEDIA_TYPE, "data": data}}
        if reader is not None and reader.media_resolution:
            block["media_resolution"] = {"level": reader.media_resolution}
        return block
    raise ValueError(f"api must be one of {', '.join(APIS)}, not {api!r}")
