"""Image content blocks in each provider API's own request format."""

from __future__ import annotations

import base64

from ._providers import Profile

APIS = ("anthropic", "openai-chat", "openai-responses", "gemini")
MEDIA_TYPE = "image/png"


def image_block(png: bytes, api: str, profile: Profile | None = None, *, cache: bool = False) -> dict:
    """A content block carrying ``png`` for ``api``.

    ``anthropic``: a Messages ``image`` block with a base64 source.
    ``openai-chat``: a Chat Completions ``image_url`` part with a data URL.
    ``openai-responses``: a Responses ``input_image`` part with a data URL.
    ``gemini``: a ``Part`` with ``inline_data`` (and ``media_resolution`` for Gemini 3).
    The OpenAI ``detail`` and Gemini ``media_resolution`` come from the profile the page
    was sized for; without one, ``detail`` is ``"auto"``. ``cache=True`` marks an
    Anthropic prompt-cache breakpoint after this block (pages before the first changed
    character stay byte-identical between compactions, so the cache keeps hitting);
    the other APIs cache without per-block marks, so it is refused there.
    """
    if api not in APIS:
        raise ValueError(f"api must be one of {', '.join(APIS)}, not {api!r}")
    if cache and api != "anthropic":
        raise ValueError(f"cache breakpoints are marked per block only in the anthropic API, not {api!r}")
    data = base64.b64encode(png).decode("ascii")
    reader = profile.reader if profile is not None else None
    if api == "anthropic":
        block = {"type": "image", "source": {"type": "base64", "media_type": MEDIA_TYPE, "data": data}}
        if cache:
            block["cache_control"] = {"type": "ephemeral"}
        return block
    detail = (reader.detail if reader is not None else None) or "auto"
    url = f"data:{MEDIA_TYPE};base64,{data}"
    if api == "openai-chat":
        return {"type": "image_url", "image_url": {"url": url, "detail": detail}}
    if api == "openai-responses":
        return {"type": "input_image", "image_url": url, "detail": detail}
    block = {"inline_data": {"mime_type": MEDIA_TYPE, "data": data}}
    if reader is not None and reader.media_resolution:
        block["media_resolution"] = {"level": reader.media_resolution}
    return block
