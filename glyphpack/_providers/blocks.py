"""Image content blocks in each provider API's own request format."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from .._errors import UsageError
from .._types import APIS, Api, check_kind
from .profile import Profile

MEDIA_TYPE = "image/png"

Block = dict[str, Any]


def _anthropic(data: str, profile: Profile | None, cache: bool) -> Block:
    block: Block = {"type": "image", "source": {"type": "base64", "media_type": MEDIA_TYPE, "data": data}}
    if cache:
        block["cache_control"] = {"type": "ephemeral"}
    return block


def _detail(profile: Profile | None) -> str:
    return (profile.reader.detail if profile is not None else None) or "auto"


def _openai_chat(data: str, profile: Profile | None, cache: bool) -> Block:
    return {"type": "image_url", "image_url": {"url": f"data:{MEDIA_TYPE};base64,{data}", "detail": _detail(profile)}}


def _openai_responses(data: str, profile: Profile | None, cache: bool) -> Block:
    return {"type": "input_image", "image_url": f"data:{MEDIA_TYPE};base64,{data}", "detail": _detail(profile)}


def _gemini(data: str, profile: Profile | None, cache: bool) -> Block:
    block: Block = {"inline_data": {"mime_type": MEDIA_TYPE, "data": data}}
    if profile is not None and profile.reader.media_resolution:
        block["media_resolution"] = {"level": profile.reader.media_resolution}
    return block


_BUILDERS: dict[Api, Callable[[str, Profile | None, bool], Block]] = {
    "anthropic": _anthropic,
    "openai-chat": _openai_chat,
    "openai-responses": _openai_responses,
    "gemini": _gemini,
}


def image_block(png: bytes, api: Api, profile: Profile | None = None, *, cache: bool = False) -> Block:
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
    check_kind(api, APIS, "api")
    if cache and api != "anthropic":
        raise UsageError(f"cache breakpoints are marked per block only in the anthropic API, not {api!r}")
    return _BUILDERS[api](base64.b64encode(png).decode("ascii"), profile, cache)
