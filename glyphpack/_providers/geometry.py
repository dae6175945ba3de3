"""Image geometry a provider applies: resize rules and token formulas, one class per kind.

These change rarely (they follow published formulas); the catalog of which model uses
which changes monthly and lives in ``catalog.py``.

Every formula is written with integer ceiling division so that it works on Python
ints and on numpy integer arrays alike (the page-size search evaluates every candidate
size at once).

numpy is imported inside the functions that use it: resolving a profile (as the
commands that read a workspace do) needs none.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, ClassVar, Literal

ResizeKind = Literal["patch-cap", "patch-budget", "tile", "fit"]
BillingKind = Literal["patch", "tile", "flat", "gemini-tile"]

#: An int, or an int array of candidate sizes (the page-size search).
IntLike = Any


def ceil_div(a: IntLike, b: IntLike) -> IntLike:
    return -(-a // b)


# ------------------------------------------------------------------------- resizing


@dataclasses.dataclass(frozen=True, kw_only=True)
class Resize(abc.ABC):
    """What a serving stack does to an image before the model sees it.

    Attributes:
        max_edge: longest edge served unresized, px.
        short_edge: shortest edge served unresized, px (None: no such rule).
    """

    kind: ClassVar[ResizeKind]
    max_edge: int
    short_edge: int | None = None

    def fits(self, w: IntLike, h: IntLike) -> IntLike:
        """Whether an image of w x h px (ints or int arrays) is left untouched."""
        import numpy as np

        ok = np.maximum(w, h) <= self.max_edge
        if self.short_edge is not None:
            ok = ok & (np.minimum(w, h) <= self.short_edge)
        return ok

    def __call__(self, w: int, h: int) -> tuple[int, int]:
        """The size an image of w x h px is served at (never enlarged)."""
        if bool(self.fits(w, h)):
            return w, h
        return self.shrink(w, h)

    @abc.abstractmethod
    def shrink(self, w: int, h: int) -> tuple[int, int]:
        """The size an image that does not fit is served at."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PatchBudget:
    """A budget of ``budget`` patches of ``patch`` px; mixed into the patch resizes."""

    budget: int | None
    patch: int

    def patches_fit(self, w: IntLike, h: IntLike) -> IntLike:
        if self.budget is None:
            return True
        return ceil_div(w, self.patch) * ceil_div(h, self.patch) <= self.budget


@dataclasses.dataclass(frozen=True, kw_only=True)
class PatchCapResize(PatchBudget, Resize):
    """Anthropic: shrink (aspect kept) to the largest size with long edge <= ``max_edge``
    and ``ceil(w/patch) * ceil(h/patch) <= budget``."""

    kind: ClassVar[ResizeKind] = "patch-cap"
    patch: int = 28

    def fits(self, w: IntLike, h: IntLike) -> IntLike:
        return Resize.fits(self, w, h) & self.patches_fit(w, h)

    def shrink(self, w: int, h: int) -> tuple[int, int]:
        """Largest size, aspect kept, inside the edges and the patch budget (binary
        search on the long edge)."""
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class PatchBudgetResize(PatchBudget, Resize):
    """OpenAI patch models: fit into ``max_edge`` x ``max_edge``; if over ``budget``
    patches, shrink by ``sqrt(patch^2 * budget / (w * h))`` adjusted down so whole
    patches fit along the tighter side (OpenAI's published rule)."""

    kind: ClassVar[ResizeKind] = "patch-budget"
    patch: int = 32

    def fits(self, w: IntLike, h: IntLike) -> IntLike:
        return Resize.fits(self, w, h) & self.patches_fit(w, h)

    def shrink(self, w: int, h: int) -> tuple[int, int]:
        scale = min(1.0, self.max_edge / max(w, h))
        w1, h1 = w * scale, h * scale
        if not bool(self.patches_fit(math.ceil(w1), math.ceil(h1))):
            assert self.budget is not None
            shrink = math.sqrt(self.patch * self.patch * self.budget / (w1 * h1))
            fw, fh = w1 * shrink / self.patch, h1 * shrink / self.patch
            shrink *= min(math.floor(fw) / fw, math.floor(fh) / fh)
            w1, h1 = w1 * shrink, h1 * shrink
        return max(1, int(w1)), max(1, int(h1))


@dataclasses.dataclass(frozen=True, kw_only=True)
class FitResize(Resize):
    """Fit into ``max_edge`` x ``max_edge``, then (if set) shrink the short side to
    ``short_edge``."""

    kind: ClassVar[ResizeKind] = "fit"

    def shrink(self, w: int, h: int) -> tuple[int, int]:
        scale = min(1.0, self.max_edge / max(w, h))
        w1, h1 = w * scale, h * scale
        if self.short_edge is not None and min(w1, h1) > self.short_edge:
            factor = self.short_edge / min(w1, h1)
            w1, h1 = w1 * factor, h1 * factor
        return max(1, round(w1)), max(1, round(h1))


@dataclasses.dataclass(frozen=True, kw_only=True)
class TileResize(FitResize):
    """OpenAI tile models: fit into ``max_edge`` x ``max_edge``, then scale the short
    side down to ``short_edge``."""

    kind: ClassVar[ResizeKind] = "tile"
    short_edge: int | None = 768


# ---------------------------------------------------------------------------- billing


@dataclasses.dataclass(frozen=True, kw_only=True)
class Billing(abc.ABC):
    """A reader's native image token count for an image as served (after resize)."""

    kind: ClassVar[BillingKind]

    @abc.abstractmethod
    def tokens(self, w: IntLike, h: IntLike) -> IntLike:
        """Tokens of one w x h image (ints or int arrays)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PatchBilling(Billing):
    """``ceil(ceil(w/patch) * ceil(h/patch) * multiplier)``."""

    kind: ClassVar[BillingKind] = "patch"
    patch: int = 28
    multiplier: float = 1.0

    def tokens(self, w: IntLike, h: IntLike) -> IntLike:
        patches = ceil_div(w, self.patch) * ceil_div(h, self.patch)
        if self.multiplier == 1.0:
            return patches
        # ceil of patches * multiplier, exact for the multipliers used (two decimals)
        return ceil_div(patches * round(self.multiplier * 100), 100)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TileBilling(Billing):
    """``base + per_tile * ceil(w/tile) * ceil(h/tile)``."""

    kind: ClassVar[BillingKind] = "tile"
    base: int
    per_tile: int
    tile: int = 512

    def tokens(self, w: IntLike, h: IntLike) -> IntLike:
        return self.base + self.per_tile * ceil_div(w, self.tile) * ceil_div(h, self.tile)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlatBilling(Billing):
    """``base`` per image, whatever its size."""

    kind: ClassVar[BillingKind] = "flat"
    base: int

    def tokens(self, w: IntLike, h: IntLike) -> IntLike:
        return self.base + 0 * w  # broadcast to w's shape when w is an array


@dataclasses.dataclass(frozen=True, kw_only=True)
class GeminiTileBilling(Billing):
    """``base`` when both sides are <= ``small_edge``, else ``base`` per ``tile`` px tile."""

    kind: ClassVar[BillingKind] = "gemini-tile"
    base: int
    tile: int = 768
    small_edge: int = 384

    def tokens(self, w: IntLike, h: IntLike) -> IntLike:
        import numpy as np

        small = (w <= self.small_edge) & (h <= self.small_edge)
        tiled = self.base * ceil_div(w, self.tile) * ceil_div(h, self.tile)
        out = np.where(small, self.base, tiled)
        return int(out) if np.ndim(out) == 0 else out


# ----------------------------------------------------------------------- PNG bounds


def worst_case_png_bytes(w: IntLike, h: IntLike) -> IntLike:
    """An upper bound on glyphpack's PNG size for a w x h page: 1-bit rows stored
    uncompressed (deflate never grows data by more than 5 bytes per 16 KiB block) plus
    the chunks."""
    raw = h * (1 + ceil_div(w, 8))
    return raw + 5 * (ceil_div(raw, 16384) + 1) + 128
