"""Model ids as callers write them -> ``Profile``; and the catalog as rows to list."""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from .._errors import GlyphpackError
from .._types import Provider, public
from .catalog import (
    CONTEXT_WINDOWS,
    GATEWAYS,
    INPUT_WINDOWS,
    NATIVE_ROUTE,
    READER_PREFIXES,
    READERS,
    ROUTE_PREFIXES,
    ROUTES,
    TEXT_RATE_SCALE,
    UNKNOWN_READER,
    VARIANTS,
)
from .profile import CellGeometry, Profile, Reader, Route
from .reading import READING_PREFIXES, READING_PROFILES, ReadingProfile, local_profiles, warn_once
from .text_tokens import DEFAULT_ESTIMATOR, TextEstimator

_DATE_SUFFIX = re.compile(r"(@\d{8}|-\d{8}|-\d{4}-\d{2}-\d{2}|-v\d+(:\d+)?|-latest|-preview(-\d{2}-\d{2})?|-exp)$")
_BEDROCK_REGION = re.compile(r"^(us|eu|apac|global|us-gov|jp|au)\.")
_VENDOR_DOT = re.compile(r"^(anthropic|openai|google|meta|mistral|amazon)\.")
_BEDROCK_VERSION = re.compile(r"-v\d+:\d+$")


def normalize_model(name: str) -> str:
    name = name.strip().lower().lstrip("~")
    while True:
        stripped = _DATE_SUFFIX.sub("", name)
        if stripped == name:
            break
        name = stripped
    # Versions are written 4.5 or 4-5; tables use dashes.
    return re.sub(r"(?<=\d)\.(?=\d)", "-", name)


#: Models that take ``{"role": "system"}`` messages after the first turn (Anthropic's
#: mid-conversation system messages: its own API only, not Bedrock or Vertex).
MID_CONVERSATION_SYSTEM = ("claude-opus-4-8",)


def takes_system_messages(model_id: str) -> bool:
    """Whether ``model_id`` (as callers write it) takes system messages in the history."""
    route, model = _split_route(model_id)
    return route is None and normalize_model(model).startswith(MID_CONVERSATION_SYSTEM)


def _split_route(model_id: str) -> tuple[str | None, str]:
    """(route name or None, model part) from an id as callers write it."""
    text = model_id.strip().lower().lstrip("~")
    route = None
    parts = text.split("/")
    if len(parts) > 1 and parts[0] in ROUTE_PREFIXES:
        route = ROUTE_PREFIXES[parts[0]]
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


V = TypeVar("V")


def _longest_prefix(normalized: str, table: Mapping[str, V]) -> V | None:
    """What ``table`` (normalized model-name prefix -> value) has for a normalized model
    name: the longest prefix that is the name or begins it before a ``-``; None: none."""
    for prefix in sorted(table, key=len, reverse=True):
        if normalized == prefix or normalized.startswith(prefix + "-"):
            return table[prefix]
    return None


def _table_name(model_id: str) -> str:
    """A model id as the catalog's tables name it: no route, no ``:detail``, normalized."""
    text = model_id if _BEDROCK_VERSION.search(model_id) else model_id.partition(":")[0]
    return normalize_model(_split_route(text)[1])


def _reader_and_route(model_id: str) -> tuple[Reader, str | None]:
    """The reader a model id names (a ``:detail`` variant included), and the route it
    names (None: the reader's own provider)."""
    if _BEDROCK_VERSION.search(model_id):  # the colon is part of a Bedrock version
        text, variant = model_id, ""
    else:
        text, _, variant = model_id.partition(":")
    route_name, model_part = _split_route(text)
    normalized = normalize_model(model_part)
    reader_name = _longest_prefix(normalized, READER_PREFIXES)
    if reader_name is None:
        close = closest_model(normalized)
        warn_once(
            f"unknown model {model_id!r}" + (f" (did you mean {close!r}?)" if close else "")
            + ": using the most conservative known image limits (pages within 1536x768)",
            stacklevel=4,
        )
        conservative = READERS[UNKNOWN_READER]
        named = close or normalized
        family = _longest_prefix(named, READER_PREFIXES)
        provider = READERS[family].provider if family else _longest_prefix(named, FAMILY_PROVIDERS)
        if provider is None:  # no provider is guessed: the route says so
            return conservative, route_name or UNKNOWN_PROVIDER
        return dataclasses.replace(conservative, provider=provider), route_name
    if variant:
        key = (reader_name, variant.strip().lower())
        if key not in VARIANTS:
            options = sorted(v for (r, v) in VARIANTS if r == reader_name)
            raise GlyphpackError(
                f"model {model_id!r}: {variant!r} is not a detail level of {reader_name}"
                + (f"; choose one of {', '.join(options)}" if options else " (it has none)")
            )
        reader_name = VARIANTS[key]
    return READERS[reader_name], route_name


#: The route of an unknown model whose provider its name does not tell.
UNKNOWN_PROVIDER = "provider unknown"
#: Model families whose name alone says whose they are (a version glyphpack does not know yet).
FAMILY_PROVIDERS: dict[str, Provider] = {"claude": "anthropic", "gpt": "openai", "chatgpt": "openai", "o1": "openai", "o3": "openai",
                                          "o4": "openai", "gemini": "google", "gemma": "google"}


def closest_model(normalized: str) -> str | None:
    """The known model name a mistyped one most likely meant (``claude-sonet-4-5`` ->
    ``claude-sonnet-4-5``, ``gpt5`` -> ``gpt-5``): the catalog's model prefix closest to
    a leading part of it, the rest kept; None when none is close."""
    parts = normalized.split("-")
    known_names = sorted({*READER_PREFIXES, *INPUT_WINDOWS})
    best: tuple[float, str] | None = None
    for cut in range(len(parts), 0, -1):
        head, rest = "-".join(parts[:cut]), parts[cut:]
        for known in known_names:
            ratio = difflib.SequenceMatcher(None, head, known).ratio()
            # A typo: not a known family with an unknown tail, nor another version of one
            # (``o5-mini`` is no mistyped ``o1-mini``): those are no mistakes to fix.
            version = re.sub(r"[0-9]", "", head) == re.sub(r"[0-9]", "", known)
            if 0.85 <= ratio < 1 and not version and (best is None or ratio > best[0]):
                best = (ratio, "-".join([known, *rest]))
    return best[1] if best is not None and best[1] != normalized else None


@public
def resolve(model_id: str | Profile, *, route: str | None = None, **reader_overrides: Any) -> Profile:
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
        reader, route_name = _reader_and_route(model_id)
        chosen = route_name or NATIVE_ROUTE[reader.provider]
        profile = Profile(model_id, reader, ROUTES[chosen] if chosen in ROUTES else Route(chosen))
    if route is not None:
        if route not in ROUTES:
            raise GlyphpackError(f"unknown route {route!r}; choose one of {', '.join(ROUTES)}")
        profile = dataclasses.replace(profile, route=ROUTES[route])
    if reader_overrides:
        unknown = set(reader_overrides) - {f.name for f in dataclasses.fields(Reader)}
        if unknown:
            raise GlyphpackError(f"unknown reader fields {sorted(unknown)}")
        if reader_overrides.get("vision") is False:
            reader_overrides = {"resize": None, "billing": None} | reader_overrides
        profile = dataclasses.replace(profile, reader=dataclasses.replace(profile.reader, **reader_overrides))
    return profile


@public
def context_window(model: str | Profile) -> int:
    """The input tokens a request to ``model`` may carry, from the catalog
    (``INPUT_WINDOWS``; a model it does not name: its provider's ``CONTEXT_WINDOWS``, and
    one no reader names the smallest of those).
    Route prefixes, dates and ``:detail`` suffixes are read as ``resolve`` reads them."""
    profile = model if isinstance(model, Profile) else resolve(model)
    window = _longest_prefix(_table_name(profile.model), INPUT_WINDOWS)
    if window is not None:
        return window
    if profile.reader.name == UNKNOWN_READER:  # a model no table names: the smallest window of any family
        return min(CONTEXT_WINDOWS.values())
    return CONTEXT_WINDOWS[profile.reader.provider]


@public
def reading_profile(model: str | Profile, *, measured: bool = True) -> ReadingProfile:
    """What the reader a model id names is known to read (``ReadingProfile``): the
    densest shape read exactly and the densest that keeps the gist, with sources.
    What ``glyphpack eval --apply`` measured here comes first (``measured=False``: the
    published profiles alone). Readers without evidence get the conservative profile."""
    normalized = _table_name(model.model if isinstance(model, Profile) else model)
    local = local_profiles() if measured else {}  # what glyphpack eval measured here wins
    if normalized in local:
        return local[normalized]
    return READING_PROFILES[_longest_prefix(normalized, READING_PREFIXES) or "conservative"]


def all_profiles() -> list[Profile]:
    """Every reader with vision on its own provider's route, and on each gateway that
    carries it."""
    profiles = []
    for reader in READERS.values():
        if not reader.vision:
            continue
        for route in (NATIVE_ROUTE[reader.provider], *GATEWAYS[reader.provider]):
            profiles.append(Profile(reader.name, reader, ROUTES[route]))
    return profiles


@dataclasses.dataclass(frozen=True)
class ProfileRow:
    """One profile and shape: the page it gets and what the page holds and costs."""

    profile: str
    shape: str
    page_width: int
    page_height: int
    chars_per_page: int
    tokens_per_page: int
    max_images: int | None
    max_image_bytes: int | None
    billing: str
    notes: str

    @property
    def chars_per_token(self) -> float | None:
        """None where the route bills image area at nothing."""
        return round(self.chars_per_page / self.tokens_per_page, 2) if self.tokens_per_page else None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"chars_per_token": self.chars_per_token}


def profile_rows(shapes: Iterable[tuple[str, CellGeometry]]) -> list[ProfileRow]:
    """A row per vision profile and (name, shape): page size, characters and tokens per page."""
    shapes = list(shapes)
    return [profile_row(profile, name, cells) for profile in all_profiles() for name, cells in shapes]


def profile_row(profile: Profile, name: str, cells: CellGeometry) -> ProfileRow:
    """``profile``'s row for the shape ``name`` (``cells``)."""
    width, height = profile.page_size(cells)
    return ProfileRow(
        profile=profile.name,
        shape=name,
        page_width=width,
        page_height=height,
        chars_per_page=(width // cells.advance) * (height // cells.pitch),
        tokens_per_page=int(profile.tokens(width, height)),
        max_images=profile.max_images,
        max_image_bytes=profile.max_image_bytes,
        billing=profile.route.billing,
        notes="; ".join(n for n in (profile.reader.notes, profile.route.notes) if n),
    )


def text_estimator(profile: Profile) -> TextEstimator:
    """The text-token estimate for ``profile``'s provider family (``TEXT_RATE_SCALE``)."""
    return DEFAULT_ESTIMATOR.scaled(TEXT_RATE_SCALE.get(profile.reader.provider, 1.0))


@dataclasses.dataclass(frozen=True)
class DefaultShapes:
    """What ``render --model``, ``compact`` and ``Session`` draw for one model: its exact
    shape (the default) and its gist shape (with recall), each with characters per image
    token on a full page of the model's size (None: image area not billed)."""

    model: str
    profile: str
    exact: str
    exact_chars_per_token: float | None
    gist: str
    gist_chars_per_token: float | None
    source: str


def default_shapes(model: str, shapes: Mapping[str, CellGeometry]) -> DefaultShapes:
    """``model``'s exact and gist shapes (``reading_profile``) and what a page of each holds
    per token (``shapes``: the shape table, ``glyphpack._render.shapes.SHAPES``)."""
    profile, found = resolve(model), reading_profile(model)

    def per_token(shape: str) -> float | None:
        return profile_row(profile, shape, shapes[shape]).chars_per_token

    return DefaultShapes(model, profile.name, found.exact.shape, per_token(found.exact.shape), found.gist.shape, per_token(found.gist.shape), found.exact.source)
