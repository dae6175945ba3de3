"""Who reads a page (the ``Reader``: a model) and who carries and bills it (the ``Route``:
a gateway), joined in a ``Profile`` that sizes pages and prices them.

A reader says whether a model takes images and what its serving stack does to them
(the resize rule and the native token formula); a route says how the gateway bills
(the reader's own count, or per request with image area free) and its own limits. The
rows themselves are data, in ``catalog.py``.

numpy is imported inside the functions that use it: resolving a profile (as the
commands that read a workspace do) needs none.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Protocol

from .._errors import GlyphpackError, LimitError, TextOnlyModelError
from .._types import PROVIDERS, ROUTE_BILLINGS, Provider, RouteBilling, check_kind, public
from .geometry import Billing, IntLike, Resize, worst_case_png_bytes


class CellGeometry(Protocol):
    """What page sizing needs of a shape: the cell step in px."""

    @property
    def advance(self) -> int: ...

    @property
    def pitch(self) -> int: ...


@dataclasses.dataclass(frozen=True)
class Reader:
    """A model as an image reader.

    Attributes:
        name: family name.
        provider: the API family.
        vision: whether the model takes images at all.
        resize: what its serving stack does to an image (required with vision, None without).
        billing: its native token count per image (required with vision, None without).
        detail: OpenAI ``detail`` sent with each image (the one ``resize`` describes).
        media_resolution: Gemini 3 per-part media resolution level.
        many_images: (count, edge): with more than ``count`` images in one request,
            every image must be at most ``edge`` px on each side (Anthropic).
        max_images: images per request the provider accepts.
        max_image_bytes: bytes per image (raw, before base64) the provider accepts.
        notes: what is unconfirmed about this reader.
    """

    name: str
    provider: Provider
    vision: bool = True
    resize: Resize | None = None
    billing: Billing | None = None
    detail: str | None = None
    media_resolution: str | None = None
    many_images: tuple[int, int] | None = None
    max_images: int | None = None
    max_image_bytes: int | None = None
    notes: str = ""

    def __post_init__(self) -> None:
        check_kind(self.provider, PROVIDERS, f"reader {self.name!r}: provider", GlyphpackError)
        if self.vision and (self.resize is None or self.billing is None):
            raise GlyphpackError(f"reader {self.name!r} takes images, so it needs a resize rule and a billing formula")
        if not self.vision and (self.resize is not None or self.billing is not None):
            raise GlyphpackError(f"reader {self.name!r} takes no images: it has no resize rule or billing formula")


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
    billing: RouteBilling = "native"
    max_images: int | None = None
    max_image_bytes: int | None = None
    max_edge: int | None = None
    notes: str = ""

    def __post_init__(self) -> None:
        check_kind(self.billing, ROUTE_BILLINGS, f"route {self.name!r}: billing", GlyphpackError)


#: No page edge beyond the largest a documented reader takes unresized (high-resolution
#: Claude): larger pages only cost more per image to send and to retry.
LARGEST_PAGE_EDGE = 2576
#: Cells per row a page needs at least (a wide glyph, a wrap marker, room to move).
MIN_COLUMNS = 4


@public
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

    def _vision(self) -> tuple[Resize, Billing]:
        """The reader's resize rule and billing, or ``TextOnlyModelError``."""
        if self.reader.resize is None or self.reader.billing is None:
            raise TextOnlyModelError(
                f"model {self.model!r} ({self.reader.name}) does not take images: "
                f"compact its history with summarization, not pages"
            )
        return self.reader.resize, self.reader.billing

    def fits(self, w: IntLike, h: IntLike) -> IntLike:
        """Whether w x h px (ints or int arrays) reaches the model unresized and within edge limits."""
        import numpy as np

        resize, _ = self._vision()
        ok = resize.fits(w, h)
        if self.route.max_edge is not None:
            ok = ok & (np.maximum(w, h) <= self.route.max_edge)
        return ok

    def resize(self, w: int, h: int) -> tuple[int, int]:
        """The size the provider serves a w x h image at."""
        resize, _ = self._vision()
        return resize(int(w), int(h))

    def tokens(self, w: IntLike, h: IntLike) -> IntLike:
        """Image tokens billed on this route for one w x h image (after the provider's resize)."""
        if self.route.billing == "per-request":
            self._vision()
            return 0
        return self.context_tokens(w, h)

    def context_tokens(self, w: IntLike, h: IntLike) -> IntLike:
        """Tokens one w x h image takes in the model's context (after the provider's
        resize), whatever the route bills: a per-request route makes image area free
        to pay for, not free of context."""
        import numpy as np

        _, billing = self._vision()
        if np.ndim(w) == 0 and np.ndim(h) == 0:
            w, h = self.resize(int(w), int(h))
            return int(billing.tokens(w, h))
        return billing.tokens(w, h)

    def page_density(self, cells: CellGeometry) -> float:
        """Characters a full page of ``cells`` holds per image token it costs (text runs
        about 3.5-4 characters per token); infinite where image area is free."""
        width, height = self.page_size(cells)
        tokens = self.tokens(width, height)
        return (width // cells.advance) * (height // cells.pitch) / tokens if tokens else float("inf")

    def page_size(self, cells: CellGeometry, pages: int = 1) -> tuple[int, int]:
        """The page size limit that packs the most characters per context token with no
        resize, for a rendering of ``pages`` pages of ``cells.advance`` x ``cells.pitch``
        px cells (Anthropic's many-image rule shrinks pages when there are more than
        20). Ties go to the larger page."""
        resize, billing = self._vision()
        many = self.reader.many_images
        edges = [e for e in (many[1] if many is not None and pages > many[0] else None, self.route.max_edge) if e is not None]
        size = _best_page_size(resize, billing, self.max_image_bytes, cells.advance, cells.pitch, min(edges, default=None))
        if size is None:
            raise LimitError(f"no page of {cells.advance}x{cells.pitch} cells fits {self.name} without a resize")
        return size


@functools.lru_cache(maxsize=256)
def _best_page_size(
    resize: Resize, billing: Billing, max_bytes: int | None, advance: int, pitch: int, max_edge: int | None
) -> tuple[int, int] | None:
    """The search behind ``Profile.page_size``, on what decides it alone (the resize
    rule, the billing, the byte and edge limits: many profiles share them, and a
    listing of every profile searches each set once). None: no page fits."""
    import numpy as np

    edge_cap = min(resize.max_edge, max_edge or LARGEST_PAGE_EDGE, LARGEST_PAGE_EDGE)
    cols = np.arange(MIN_COLUMNS, edge_cap // advance + 1)
    rows = np.arange(1, edge_cap // pitch + 1)
    w, h = np.broadcast_arrays((cols * advance)[:, None], (rows * pitch)[None, :])
    ok = resize.fits(w, h) & (np.maximum(w, h) <= edge_cap)
    ok &= worst_case_png_bytes(w, h) <= (max_bytes or np.iinfo(np.int64).max)
    if not ok.any():
        return None
    cells = (w // advance) * (h // pitch)
    # Density counts context tokens: on a per-request route image area is free to pay
    # for, but it still fills the context window.
    tokens = np.maximum(billing.tokens(w, h), 1)
    # Characters per token first, then characters per page; integer math keeps it exact.
    density = np.where(ok, cells * 10_000 // tokens, -1).ravel()
    # Within 1% of the most characters per token (finer differences are rounding of
    # cells against patches), within 1% of the most characters per page (fewer
    # images), the widest page (longer rows break fewer words), then the most cells.
    cells = np.where(density * 100 >= density.max() * 99, cells.ravel(), -1)
    widths = np.where(cells * 100 >= cells.max() * 99, w.ravel(), -1)
    pick = np.lexsort((cells, widths))[-1]
    return int(w.ravel()[pick]), int(h.ravel()[pick])
