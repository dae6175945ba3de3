"""Provider profiles: who reads a page (the model) and who carries and bills it (the route).

A ``Reader`` says whether a model takes images and what its serving stack does to
them: the resize rule and the native token formula. A ``Route`` says how the gateway
bills (the reader's own count, or per request with image area free) and its own
limits (bytes per image, images per request, pixel edge). A ``Profile`` joins one of
each. Every fact comes from ``PROVIDERS.md``; adding a model or a gateway is adding a
row to ``READERS`` / ``_READER_PREFIXES`` or ``ROUTES``.

Token and fit formulas are written with integer ceiling division so that they work on
Python ints and on numpy integer arrays alike (the page-size search evaluates every
candidate size at once).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import warnings

import numpy as np

from ._errors import GlyphpackError, LimitError
from ._shapes import Shape


class ProfileWarning(UserWarning):
    """A model id was not recognized; conservative limits were used."""


class TextOnlyModelError(GlyphpackError):
    """Pages were asked for a model that does not take images (use summarization)."""


def _ceil_div(a, b):
    return -(-a // b)


# ------------------------------------------------------------------------- resizing


@dataclasses.dataclass(frozen=True)
class Resize:
    """What a serving stack does to an image before the model sees it.

    kind:
        ``"patch-cap"``  Anthropic: shrink (aspect kept) to the largest size with long
                         edge <= ``max_edge`` and ``ceil(w/patch)*ceil(h/patch)`` <= ``budget``.
        ``"patch-budget"`` OpenAI patch models: fit into ``max_edge`` x ``max_edge``;
                         if over ``budget`` patches of ``patch`` px, shrink by
                         ``sqrt(patch^2*budget/(w*h))`` adjusted down to the patch grid.
        ``"tile"``       OpenAI tile models: fit into ``max_edge`` x ``max_edge``, then
                         scale the short side down to ``short_edge``.
        ``"fit"``        fit into ``max_edge`` x ``max_edge`` (also bounded by ``short_edge``).
    """

    kind: str
    max_edge: int
    budget: int | None = None
    patch: int = 28
    short_edge: int | None = None

    def fits(self, w, h):
        """Whether an image of w x h px (ints or int arrays) is left untouched."""
        long, short = np.maximum(w, h), np.minimum(w, h)
        ok = long <= self.max_edge
        if self.short_edge is not None:
            ok = ok & (short <= self.short_edge)
        if self.budget is not None:
            ok = ok & (_ceil_div(w, self.patch) * _ceil_div(h, self.patch) <= self.budget)
        return ok

    def __call__(self, w: int, h: int) -> tuple[int, int]:
        """The size an image of w x h px is served at (never enlarged)."""
        if bool(self.fits(w, h)):
            return w, h
        if self.kind == "patch-cap":
            return self._largest_fitting(w, h)
        scale = min(1.0, self.max_edge / max(w, h))
        if self.kind == "patch-budget":
            w1, h1 = w * scale, h * scale
            if self.budget is not None and _ceil_div(math.ceil(w1), self.patch) * _ceil_div(math.ceil(h1), self.patch) > self.budget:
                shrink = math.sqrt(self.patch * self.patch * self.budget / (w1 * h1))
                # Adjust so whole patches fit along the tighter side (OpenAI's published rule).
                fw, fh = w1 * shrink / self.patch, h1 * shrink / self.patch
                shrink *= min(math.floor(fw) / fw, math.floor(fh) / fh)
                w1, h1 = w1 * shrink, h1 * shrink
            return max(1, int(w1)), max(1, int(h1))
        w1, h1 = w * scale, h * scale
        if self.short_edge is not None and min(w1, h1) > self.short_edge:
            factor = self.short_edge / min(w1, h1)
            w1, h1 = w1 * factor, h1 * factor
        return max(1, round(w1)), max(1, round(h1))

    def _largest_fitting(self, w: int, h: int) -> tuple[int, int]:
        """Largest size, aspect kept, inside the edge and patch budget (binary search on the long edge)."""
        long, short = max(w, h), min(w, h)

        def size(edge: int) -> tuple[int, int]:
            other = max(1, round(edge * short / long))
            return (edge, other) if w >= h else (other, edge)

        lo, hi = 1, min(long, self.max_edge)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if bool(self.fits(*size(mid))):
                lo = mid
            else:
                hi = mid - 1
        return size(lo)


# ---------------------------------------------------------------------------- billing


@dataclasses.dataclass(frozen=True)
class Billing:
    """A reader's native image token count (after resize).

    kind:
        ``"patch"``  ``ceil(ceil(w/patch) * ceil(h/patch) * multiplier)``
        ``"tile"``   ``base + per_tile * ceil(w/tile) * ceil(h/tile)`` (``per_tile`` 0: base only)
        ``"flat"``   ``base`` per image, whatever its size
        ``"gemini-tile"``  ``base`` when both sides <= ``small_edge``, else ``base`` per ``tile`` px tile
    """

    kind: str
    patch: int = 28
    multiplier: float = 1.0
    base: int = 0
    per_tile: int = 0
    tile: int = 512
    small_edge: int = 384

    def tokens(self, w, h):
        if self.kind == "patch":
            patches = _ceil_div(w, self.patch) * _ceil_div(h, self.patch)
            if self.multiplier == 1.0:
                return patches
            # ceil of patches * multiplier, exact for the multipliers used (two decimals)
            scaled = patches * round(self.multiplier * 100)
            return _ceil_div(scaled, 100)
        if self.kind == "tile":
            return self.base + self.per_tile * _ceil_div(w, self.tile) * _ceil_div(h, self.tile)
        if self.kind == "flat":
            return self.base + 0 * w  # broadcast to w's shape when w is an array
        if self.kind == "gemini-tile":
            small = (w <= self.small_edge) & (h <= self.small_edge)
            return np.where(small, self.base, self.base * _ceil_div(w, self.tile) * _ceil_div(h, self.tile)) + 0
        raise ValueError(f"unknown billing kind {self.kind!r}")


# ---------------------------------------------------------------------------- readers


@dataclasses.dataclass(frozen=True)
class Reader:
    """A model as an image reader.

    Attributes:
        name: family name.
        vision: whether the model takes images at all.
        resize: what its serving stack does to an image (None when ``vision`` is False).
        billing: its native token count per image.
        detail: OpenAI ``detail`` sent with each image (the one ``resize`` describes).
        media_resolution: Gemini 3 per-part media resolution level.
        many_images: (count, edge): with more than ``count`` images in one request,
            every image must be at most ``edge`` px on each side (Anthropic).
        max_images: images per request the provider accepts.
        max_image_bytes: bytes per image (raw, before base64) the provider accepts.
        provider: ``anthropic``, ``openai`` or ``google``: the API family.
        notes: what is unconfirmed about this reader.
    """

    name: str
    provider: str
    vision: bool = True
    resize: Resize | None = None
    billing: Billing | None = None
    detail: str | None = None
    media_resolution: str | None = None
    many_images: tuple[int, int] | None = None
    max_images: int | None = None
    max_image_bytes: int | None = None
    notes: str = ""


def _b64_limit(encoded_bytes: int) -> int:
    """Raw bytes whose base64 encoding fits in ``encoded_bytes``."""
    return encoded_bytes // 4 * 3


_MB = 1024 * 1024

_CLAUDE = dict(
    provider="anthropic",
    billing=Billing("patch", patch=28),
    many_images=(20, 2000),
    max_images=100,  # 100 on 200k-context models, 600 on others: the conservative one
    max_image_bytes=_b64_limit(10 * _MB),
)


def _gpt_patch(name: str, multiplier: float, budget: int, max_edge: int = 2048, detail: str = "high", **kw) -> Reader:
    return Reader(
        name,
        "openai",
        resize=Resize("patch-budget", max_edge=max_edge, budget=budget, patch=32),
        billing=Billing("patch", patch=32, multiplier=multiplier),
        detail=detail,
        max_images=1500,
        max_image_bytes=512 * _MB,
        **kw,
    )


def _gpt_tile(name: str, base: int, per_tile: int) -> Reader:
    return Reader(
        name,
        "openai",
        resize=Resize("tile", max_edge=2048, short_edge=768),
        billing=Billing("tile", base=base, per_tile=per_tile, tile=512),
        detail="high",
        max_images=1500,
        max_image_bytes=512 * _MB,
    )


def _gemini3(level: str, tokens: int, note: str = "") -> Reader:
    return Reader(
        f"gemini-3-{level.lower().replace('_', '-')}",
        "google",
        resize=Resize("fit", max_edge=2048),
        billing=Billing("flat", base=tokens),
        media_resolution=f"MEDIA_RESOLUTION_{level}",
        max_images=900,
        max_image_bytes=7 * _MB,
        notes="flat billing; the pixel size Gemini 3 reads at is undocumented: 2048 px pages follow a peer system (unconfirmed)"
        + note,
    )


READERS: dict[str, Reader] = {
    r.name: r
    for r in (
        Reader("claude", resize=Resize("patch-cap", max_edge=1568, budget=1568), **_CLAUDE),
        Reader("claude-highres", resize=Resize("patch-cap", max_edge=2576, budget=4784), **_CLAUDE),
        _gpt_patch("gpt-5.6-original", 1.2, budget=None, max_edge=65535, detail="original"),
        _gpt_patch("gpt-5.6-high", 1.2, 2500),
        _gpt_patch("gpt-5.5-original", 1.2, 10_000, max_edge=6000, detail="original"),
        _gpt_patch("gpt-5.5-high", 1.2, 2500),
        _gpt_patch("gpt-5.4-original", 1.2, 10_000, max_edge=6000, detail="original"),
        _gpt_patch("gpt-5.4-high", 1.2, 2500),
        _gpt_patch("gpt-5.4-low", 1.2, 6144, detail="low"),
        # Older docs give a 1,536-patch budget, newer ones 6,144: pages use the smaller.
        _gpt_patch("gpt-5.2", 1.2, 1536, notes="patch budget 1,536 (older docs) or 6,144 (newer)"),
        _gpt_patch("gpt-5-mini", 1.2, 1536, notes="patch budget assumed 1,536 (unconfirmed)"),
        _gpt_patch("gpt-5-nano", 1.5, 1536, notes="patch budget assumed 1,536 (unconfirmed)"),
        _gpt_patch("gpt-4.1-mini", 1.62, 1536, notes="patch budget 1,536 (older docs) or 6,144 (newer)"),
        _gpt_patch("gpt-4.1-nano", 2.46, 1536, notes="patch budget 1,536 (older docs) or 6,144 (newer)"),
        _gpt_patch("o4-mini", 1.72, 1536, notes="patch budget 1,536 (older docs) or 6,144 (newer)"),
        _gpt_tile("gpt-4o", 85, 170),
        _gpt_tile("gpt-4o-mini", 2833, 5667),
        _gpt_tile("gpt-4.1", 85, 170),
        _gpt_tile("gpt-4.5", 85, 170),
        _gpt_tile("gpt-5", 70, 140),
        _gpt_tile("gpt-5.1", 70, 140),
        _gpt_tile("o1", 75, 150),
        _gpt_tile("o3", 75, 150),
        _gemini3("HIGH", 1120),
        _gemini3("LOW", 280, "; at LOW the model likely sees too few pixels for 5 px glyphs"),
        _gemini3("MEDIUM", 560, "; at MEDIUM the model likely sees too few pixels for 5 px glyphs"),
        _gemini3("ULTRA_HIGH", 2240),
        Reader(
            "gemini-2",
            "google",
            resize=Resize("fit", max_edge=1536),
            billing=Billing("gemini-tile", base=258, tile=768, small_edge=384),
            max_images=3000,
            max_image_bytes=7 * _MB,
            notes="768 px tiles at 258 tokens; the tiling rule and any resize are unconfirmed, so pages stay within 2x2 tiles",
        ),
        Reader("text-only", "openai", vision=False),
        # The most conservative known limits, for ids nobody recognizes: under
        # Anthropic's standard cap and OpenAI's 768 px short side at once.
        Reader(
            "conservative",
            "anthropic",
            resize=Resize("patch-cap", max_edge=1536, budget=1568, short_edge=768),
            billing=Billing("patch", patch=28),
            many_images=(20, 2000),
            max_images=20,
            max_image_bytes=_b64_limit(5 * _MB),
            notes="unknown model: the smallest limits of all known readers",
        ),
    )
}

# Normalized model-name prefix -> reader; the longest matching prefix wins.
_READER_PREFIXES: dict[str, str] = {
    "claude-opus-4-7": "claude-highres",
    "claude-opus-4-8": "claude-highres",
    "claude-fable-5": "claude-highres",
    "claude-mythos-5": "claude-highres",
    "claude-opus-4": "claude",
    "claude-sonnet-4": "claude",
    "claude-haiku-4": "claude",
    "claude-3-7-sonnet": "claude",
    "claude-3-5-sonnet": "claude",
    "claude-3-5-haiku": "claude",
    "claude-3-opus": "claude",
    "claude-3-haiku": "claude",
    "claude-sonnet": "claude",
    "claude-opus": "claude",
    "claude-haiku": "claude",
    "gpt-5-6": "gpt-5.6-original",
    "gpt-5-5": "gpt-5.5-original",
    "gpt-5-4": "gpt-5.4-original",
    "gpt-5-2": "gpt-5.2",
    "gpt-5-1": "gpt-5.1",
    "gpt-5-mini": "gpt-5-mini",
    "gpt-5-nano": "gpt-5-nano",
    "gpt-5": "gpt-5",
    "gpt-4-1-mini": "gpt-4.1-mini",
    "gpt-4-1-nano": "gpt-4.1-nano",
    "gpt-4-1": "gpt-4.1",
    "gpt-4-5": "gpt-4.5",
    "gpt-4o": "gpt-4o",
    "gpt-4o-mini": "gpt-4o-mini",
    "chatgpt-4o": "gpt-4o",
    "o4-mini": "o4-mini",
    "o3-mini": "text-only",
    "o1-mini": "text-only",
    "o1": "o1",
    "o3": "o3",
    "gpt-3-5": "text-only",
    "gpt-oss": "text-only",
    "deepseek": "text-only",
    "gemini-3": "gemini-3-high",
    "gemini-2": "gemini-2",
}

# Variant suffixes a caller may ask for: (reader, detail or media resolution) -> reader.
_VARIANTS: dict[tuple[str, str], str] = {
    ("gpt-5.6-original", "high"): "gpt-5.6-high",
    ("gpt-5.6-original", "auto"): "gpt-5.6-original",
    ("gpt-5.5-original", "high"): "gpt-5.5-high",
    ("gpt-5.4-original", "high"): "gpt-5.4-high",
    ("gpt-5.4-original", "low"): "gpt-5.4-low",
    ("gemini-3-high", "low"): "gemini-3-low",
    ("gemini-3-high", "medium"): "gemini-3-medium",
    ("gemini-3-high", "ultra_high"): "gemini-3-ultra-high",
    ("gemini-3-high", "high"): "gemini-3-high",
}


# ----------------------------------------------------------------------------- routes


@dataclasses.dataclass(frozen=True)
class Route:
    """A gateway: how it bills and what it limits on top of the reader.

    Attributes:
        name: the route.
        billing: ``"native"`` (the reader's token count, at the route's prices) or
            ``"per-request"`` (premium requests: image area is free).
        max_images: images per request (None: the reader's).
        max_image_bytes: raw bytes per image (None: the reader's).
        max_edge: pixel edge limit (None: none of its own).
    """

    name: str
    billing: str = "native"
    max_images: int | None = None
    max_image_bytes: int | None = None
    max_edge: int | None = None
    notes: str = ""


ROUTES: dict[str, Route] = {
    r.name: r
    for r in (
        Route("anthropic"),
        Route("openai"),
        Route("google-ai"),
        Route("bedrock", max_images=20, max_image_bytes=int(3.75 * _MB), max_edge=8000,
              notes="Converse: <= 20 images per message, each <= 3.75 MB and <= 8000x8000"),
        Route("vertex", max_image_bytes=_b64_limit(5 * _MB), notes="5 MB per image, base64 only"),
        Route("openrouter", notes="upstream rates; no resizing of its own found (unconfirmed)"),
        Route("github-copilot", billing="per-request", max_image_bytes=1 * _MB,
              notes="premium requests x model multiplier; a 413 was seen on a ~1.3 MB image, so 1 MB per image"),
        Route("azure", notes="OpenAI rules (unconfirmed whether detail 'original' is offered)"),
    )
}

_ROUTE_PREFIXES = {
    "anthropic": "anthropic",
    "openai": "openai",
    "bedrock": "bedrock",
    "vertex_ai": "vertex",
    "vertex": "vertex",
    "openrouter": "openrouter",
    "github_copilot": "github-copilot",
    "copilot": "github-copilot",
    "azure": "azure",
    "gemini": "google-ai",
    "google": "google-ai",
}
_NATIVE_ROUTE = {"anthropic": "anthropic", "openai": "openai", "google": "google-ai"}


# ---------------------------------------------------------------------------- profile


@dataclasses.dataclass(frozen=True)
class Profile:
    """A reader on a route: page geometry, resize and cost for one model id."""

    model: str
    reader: Reader
    route: Route

    @property
    def name(self) -> str:
        return f"{self.reader.name} via {self.route.name}"

    @property
    def vision(self) -> bool:
        return self.reader.vision

    @property
    def max_images(self) -> int | None:
        limits = [v for v in (self.reader.max_images, self.route.max_images) if v is not None]
        return min(limits) if limits else None

    @property
    def max_image_bytes(self) -> int | None:
        limits = [v for v in (self.reader.max_image_bytes, self.route.max_image_bytes) if v is not None]
        return min(limits) if limits else None

    def _require_vision(self) -> None:
        if not self.vision:
            raise TextOnlyModelError(
                f"model {self.model!r} ({self.reader.name}) does not take images: "
                f"compact its history with summarization, not pages"
            )

    def fits(self, w, h):
        """Whether w x h px (ints or int arrays) reaches the model unresized and within edge limits."""
        self._require_vision()
        ok = self.reader.resize.fits(w, h)
        if self.route.max_edge is not None:
            ok = ok & (np.maximum(w, h) <= self.route.max_edge)
        return ok

    def resize(self, w: int, h: int) -> tuple[int, int]:
        """The size the provider serves a w x h image at."""
        self._require_vision()
        return self.reader.resize(int(w), int(h))

    def tokens(self, w, h) -> int:
        """Image tokens billed on this route for one w x h image (after the provider's resize)."""
        if self.route.billing == "per-request":
            self._require_vision()
            return 0
        return self.context_tokens(w, h)

    def context_tokens(self, w, h) -> int:
        """Tokens one w x h image takes in the model's context (after the provider's
        resize), whatever the route bills: a per-request route makes image area free
        to pay for, not free of context."""
        self._require_vision()
        if np.ndim(w) == 0 and np.ndim(h) == 0:
            w, h = self.resize(int(w), int(h))
            return int(self.reader.billing.tokens(w, h))
        return self.reader.billing.tokens(w, h)

    def page_size(self, shape: Shape, pages: int = 1) -> tuple[int, int]:
        """The page size limit that packs the most characters per context token with no
        resize, for a rendering of ``pages`` pages (Anthropic's many-image rule shrinks
        pages when there are more than 20). Ties go to the larger page."""
        self._require_vision()
        max_edge = None
        if self.reader.many_images is not None and pages > self.reader.many_images[0]:
            max_edge = self.reader.many_images[1]
        return _best_page_size(self, shape.advance, shape.pitch, max_edge)

    def check_request(self, pages: int) -> None:
        """Raise ``LimitError`` when one request cannot carry ``pages`` images."""
        limit = self.max_images
        if limit is not None and pages > limit:
            raise LimitError(
                f"{pages} pages exceed {self.name}'s limit of {limit} images per request; "
                f"send them over several requests or compact further"
            )


#: No page edge beyond the largest a documented reader takes unresized (high-resolution
#: Claude): larger pages only cost more per image to send and to retry.
_LARGEST_PAGE_EDGE = 2576


@functools.lru_cache(maxsize=256)
def _best_page_size(profile: Profile, advance: int, pitch: int, max_edge: int | None) -> tuple[int, int]:
    edge_cap = min(profile.reader.resize.max_edge, max_edge or _LARGEST_PAGE_EDGE, _LARGEST_PAGE_EDGE)
    cols = np.arange(4, edge_cap // advance + 1)
    rows = np.arange(1, edge_cap // pitch + 1)
    w = (cols * advance)[:, None]
    h = (rows * pitch)[None, :]
    w, h = np.broadcast_arrays(w, h)
    ok = profile.fits(w, h) & (np.maximum(w, h) <= edge_cap)
    ok &= _worst_case_png_bytes(w, h) <= (profile.max_image_bytes or np.iinfo(np.int64).max)
    if not ok.any():
        raise LimitError(f"no page of {advance}x{pitch} cells fits {profile.name} without a resize")
    cells = (w // advance) * (h // pitch)
    # Density counts context tokens: on a per-request route image area is free to pay
    # for, but it still fills the context window.
    tokens = np.maximum(profile.reader.billing.tokens(w, h), 1)
    # Characters per token first, then characters per page; integer math keeps it exact.
    density = np.where(ok, cells * 10_000 // tokens, -1).ravel()
    # Within 1% of the most characters per token (finer differences are rounding of
    # cells against patches), within 1% of the most characters per page (fewer
    # images), the widest page (longer rows break fewer words), then the most cells.
    cells = np.where(density * 100 >= density.max() * 99, cells.ravel(), -1)
    widths = np.where(cells * 100 >= cells.max() * 99, w.ravel(), -1)
    pick = np.lexsort((cells, widths))[-1]
    return int(w.ravel()[pick]), int(h.ravel()[pick])


def _worst_case_png_bytes(w, h):
    """An upper bound on our PNG size for a w x h page: 1-bit rows stored uncompressed
    (deflate never grows data by more than 5 bytes per 16 KiB block) plus the chunks."""
    raw = h * (1 + _ceil_div(w, 8))
    return raw + 5 * (_ceil_div(raw, 16384) + 1) + 128


# ---------------------------------------------------------------------------- resolve

_DATE_SUFFIX = re.compile(r"(@\d{8}|-\d{8}|-\d{4}-\d{2}-\d{2}|-v\d+(:\d+)?|-latest|-preview(-\d{2}-\d{2})?|-exp)$")
_BEDROCK_REGION = re.compile(r"^(us|eu|apac|global|us-gov|jp|au)\.")
_VENDOR_DOT = re.compile(r"^(anthropic|openai|google|meta|mistral|amazon)\.")


def _normalize_model(name: str) -> str:
    name = name.strip().lower().lstrip("~")
    while True:
        stripped = _DATE_SUFFIX.sub("", name)
        if stripped == name:
            break
        name = stripped
    # Versions are written 4.5 or 4-5; tables use dashes.
    return re.sub(r"(?<=\d)\.(?=\d)", "-", name)


def _split_route(model_id: str) -> tuple[str | None, str]:
    """(route name or None, model part) from an id as callers write it."""
    text = model_id.strip().lower().lstrip("~")
    route = None
    parts = text.split("/")
    if len(parts) > 1 and parts[0] in _ROUTE_PREFIXES:
        route = _ROUTE_PREFIXES[parts[0]]
        parts = parts[1:]
    # OpenRouter-style vendor paths: anthropic/claude-..., openai/gpt-..., google/gemini-...
    if len(parts) > 1:
        parts = parts[-1:]
    model = parts[0]
    if _BEDROCK_REGION.match(model) or _VENDOR_DOT.match(model):
        route = route or "bedrock"
        model = _VENDOR_DOT.sub("", _BEDROCK_REGION.sub("", model))
    if "@" in model:
        route = route or "vertex"
    return route, model


def resolve(model_id: str | Profile, *, route: str | None = None, **reader_overrides) -> Profile:
    """The ``Profile`` for a model id as callers write it.

    Accepts route prefixes (``openrouter/anthropic/claude-sonnet-4.5``,
    ``bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0``, ``vertex_ai/claude-opus-4-7``,
    ``github_copilot/claude-sonnet-4.6``, ``gemini/gemini-3-pro-preview``), dots or
    dashes in versions, date suffixes, ``@date``, ``-latest``, ``~`` aliases, any case,
    and a trailing ``:detail`` (``gpt-5.4:high``, ``gemini-3-pro:low``). ``route``
    overrides the route; ``reader_overrides`` replace reader fields (``vision=False``
    declares a model text-only). An unknown model gets the most conservative known
    limits and a ``ProfileWarning``.
    """
    if isinstance(model_id, Profile):
        profile = model_id
    else:
        if not isinstance(model_id, str) or not model_id.strip():
            raise GlyphpackError(f"a model id must be a non-empty string, not {model_id!r}")
        text, _, variant = model_id.partition(":") if not re.search(r"-v\d+:\d+$", model_id) else (model_id, "", "")
        route_name, model_part = _split_route(text)
        normalized = _normalize_model(model_part)
        reader_name = None
        for prefix in sorted(_READER_PREFIXES, key=len, reverse=True):
            if normalized == prefix or normalized.startswith(prefix + "-"):
                reader_name = _READER_PREFIXES[prefix]
                break
        if reader_name is None:
            warnings.warn(
                f"unknown model {model_id!r}: using the most conservative known image limits "
                f"(pages within 1536x768); pass a Profile or overrides to do better",
                ProfileWarning,
                stacklevel=2,
            )
            reader_name = "conservative"
        if variant:
            key = (reader_name, variant.strip().lower())
            if key not in _VARIANTS:
                options = sorted(v for (r, v) in _VARIANTS if r == reader_name)
                raise GlyphpackError(
                    f"model {model_id!r}: {variant!r} is not a detail level of {reader_name}"
                    + (f"; choose one of {', '.join(options)}" if options else " (it has none)")
                )
            reader_name = _VARIANTS[key]
        reader = READERS[reader_name]
        route_name = route_name or _NATIVE_ROUTE[reader.provider]
        profile = Profile(model_id, reader, ROUTES[route_name])
    if route is not None:
        if route not in ROUTES:
            raise GlyphpackError(f"unknown route {route!r}; choose one of {', '.join(ROUTES)}")
        profile = dataclasses.replace(profile, route=ROUTES[route])
    if reader_overrides:
        unknown = set(reader_overrides) - {f.name for f in dataclasses.fields(Reader)}
        if unknown:
            raise GlyphpackError(f"unknown reader fields {sorted(unknown)}")
        profile = dataclasses.replace(profile, reader=dataclasses.replace(profile.reader, **reader_overrides))
    return profile


#: Model ids as callers write them, one or more per reader family (docs and tests).
EXAMPLE_MODELS = (
    "claude-sonnet-4-5",
    "claude-opus-4-8",
    "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "vertex_ai/claude-opus-4-7",
    "openrouter/anthropic/claude-sonnet-4.5",
    "github_copilot/claude-sonnet-4.6",
    "gpt-5.6",
    "gpt-5.5",
    "gpt-5.4",
    "gpt-5.4:high",
    "gpt-5.2",
    "gpt-4.1-mini",
    "o4-mini",
    "gpt-4o",
    "gpt-4.1",
    "gpt-5",
    "o3",
    "gemini-3-pro",
    "gemini-3-pro:low",
    "gemini-2.5-pro",
    "o3-mini",
)


def catalog() -> list[Profile]:
    """Every reader with vision on its own provider's route, and on each gateway that
    carries it."""
    gateways = {
        "anthropic": ("bedrock", "vertex", "openrouter", "github-copilot"),
        "openai": ("azure", "openrouter"),
        "google": ("openrouter",),
    }
    profiles = []
    for reader in READERS.values():
        if not reader.vision:
            continue
        for route in (_NATIVE_ROUTE[reader.provider],) + gateways[reader.provider]:
            profiles.append(Profile(reader.name, reader, ROUTES[route]))
    return profiles
