"""The catalog: which readers and routes exist, and which model ids name them. Data only.

Every fact comes from ``PROVIDERS.md``; adding a model or a gateway is adding a row
to ``READERS`` / ``READER_PREFIXES`` or ``ROUTES``. This file changes as providers ship
models; the formulas it uses (``geometry.py``) rarely do.
"""

from __future__ import annotations

from .._types import Provider
from .geometry import (
    FitResize,
    FlatBilling,
    GeminiTileBilling,
    PatchBilling,
    PatchBudgetResize,
    PatchCapResize,
    TileBilling,
    TileResize,
)
from .profile import Reader, Route

_MB = 1024 * 1024


def _b64_limit(encoded_bytes: int) -> int:
    """Raw bytes whose base64 encoding fits in ``encoded_bytes``."""
    return encoded_bytes // 4 * 3


def _claude(name: str, max_edge: int, budget: int) -> Reader:
    return Reader(
        name,
        "anthropic",
        resize=PatchCapResize(max_edge=max_edge, budget=budget, patch=28),
        billing=PatchBilling(patch=28),
        many_images=(20, 2000),
        max_images=100,  # 100 on 200k-context models, 600 on others: the conservative one
        max_image_bytes=_b64_limit(10 * _MB),
    )


def _gpt_patch(
    name: str, multiplier: float, budget: int | None, max_edge: int = 2048, detail: str = "high", notes: str = ""
) -> Reader:
    return Reader(
        name,
        "openai",
        resize=PatchBudgetResize(max_edge=max_edge, budget=budget, patch=32),
        billing=PatchBilling(patch=32, multiplier=multiplier),
        detail=detail,
        max_images=1500,
        max_image_bytes=512 * _MB,
        notes=notes,
    )


def _gpt_tile(name: str, base: int, per_tile: int) -> Reader:
    return Reader(
        name,
        "openai",
        resize=TileResize(max_edge=2048, short_edge=768),
        billing=TileBilling(base=base, per_tile=per_tile, tile=512),
        detail="high",
        max_images=1500,
        max_image_bytes=512 * _MB,
    )


def _gemini3(level: str, tokens: int, note: str = "") -> Reader:
    return Reader(
        f"gemini-3-{level.lower().replace('_', '-')}",
        "google",
        resize=FitResize(max_edge=2048),
        billing=FlatBilling(base=tokens),
        media_resolution=f"MEDIA_RESOLUTION_{level}",
        max_images=900,
        max_image_bytes=7 * _MB,
        notes="flat billing; the pixel size Gemini 3 reads at is undocumented: 2048 px pages follow a peer system (unconfirmed)"
        + note,
    )


_UNCONFIRMED_BUDGET = "patch budget 1,536 (older docs) or 6,144 (newer)"

READERS: dict[str, Reader] = {
    r.name: r
    for r in (
        _claude("claude", 1568, 1568),
        _claude("claude-highres", 2576, 4784),
        _gpt_patch("gpt-5.6-original", 1.2, budget=None, max_edge=65535, detail="original"),
        _gpt_patch("gpt-5.6-high", 1.2, 2500),
        _gpt_patch("gpt-5.5-original", 1.2, 10_000, max_edge=6000, detail="original"),
        _gpt_patch("gpt-5.5-high", 1.2, 2500),
        _gpt_patch("gpt-5.4-original", 1.2, 10_000, max_edge=6000, detail="original"),
        _gpt_patch("gpt-5.4-high", 1.2, 2500),
        _gpt_patch("gpt-5.4-low", 1.2, 6144, detail="low"),
        # Older docs give a 1,536-patch budget, newer ones 6,144: pages use the smaller.
        _gpt_patch("gpt-5.2", 1.2, 1536, notes=_UNCONFIRMED_BUDGET),
        _gpt_patch("gpt-5-mini", 1.2, 1536, notes="patch budget assumed 1,536 (unconfirmed)"),
        _gpt_patch("gpt-5-nano", 1.5, 1536, notes="patch budget assumed 1,536 (unconfirmed)"),
        _gpt_patch("gpt-4.1-mini", 1.62, 1536, notes=_UNCONFIRMED_BUDGET),
        _gpt_patch("gpt-4.1-nano", 2.46, 1536, notes=_UNCONFIRMED_BUDGET),
        _gpt_patch("o4-mini", 1.72, 1536, notes=_UNCONFIRMED_BUDGET),
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
            resize=FitResize(max_edge=1536),
            billing=GeminiTileBilling(base=258, tile=768, small_edge=384),
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
            resize=PatchCapResize(max_edge=1536, budget=1568, patch=28, short_edge=768),
            billing=PatchBilling(patch=28),
            many_images=(20, 2000),
            max_images=20,
            max_image_bytes=_b64_limit(5 * _MB),
            notes="unknown model: the smallest limits of all known readers",
        ),
    )
}

#: The reader for model ids nobody recognizes.
UNKNOWN_READER = "conservative"

#: Normalized model-name prefix -> reader; the longest matching prefix wins.
READER_PREFIXES: dict[str, str] = {
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

#: Variant suffixes a caller may ask for: (reader, detail or media resolution) -> reader.
VARIANTS: dict[tuple[str, str], str] = {
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

#: Route prefix as callers write it (``openrouter/...``) -> route.
ROUTE_PREFIXES: dict[str, str] = {
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
#: Each provider's own API.
NATIVE_ROUTE: dict[Provider, str] = {"anthropic": "anthropic", "openai": "openai", "google": "google-ai"}
#: Gateways that carry each provider's models.
GATEWAYS: dict[Provider, tuple[str, ...]] = {
    "anthropic": ("bedrock", "vertex", "openrouter", "github-copilot"),
    "openai": ("azure", "openrouter"),
    "google": ("openrouter",),
}

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


#: Input context window per provider family, in tokens, when the caller names none: the
#: smallest of the family's current models (Claude 200k; GPT-4o's 128k, which the GPT-5
#: and GPT-4.1 families exceed; Gemini's 1,048,576). A session takes its own
#: ``context_window`` when the model's is known to be larger.
CONTEXT_WINDOWS: dict[Provider, int] = {"anthropic": 200_000, "openai": 128_000, "google": 1_048_576}

#: Normalized model-name prefix -> the input tokens a request to it may carry (the
#: longest matching prefix wins; a model none names gets its provider's
#: ``CONTEXT_WINDOWS``, the smallest of the family's current windows). OpenAI states a
#: context window that the reply shares, so its input limit is the window less the
#: largest reply (GPT-5: 400,000 - 128,000; Codex records 95% of it, 258,400, as
#: ``model_context_window``); Anthropic and Google state the input limit. From each
#: provider's model pages; ``docs/providers.md`` has the table. A model the table does
#: not name falls to a shorter prefix or its provider's window: never a larger one.
INPUT_WINDOWS: dict[str, int] = {
    # Anthropic: 1M on Opus 4.6 and later and Sonnet 4.6; 200k on the others (Sonnet 4
    # and 4.5 reach 1M only with the context-1m beta header, which a caller must send).
    "claude-opus-4-6": 1_000_000,
    "claude-opus-4-7": 1_000_000,
    "claude-opus-4-8": 1_000_000,
    "claude-sonnet-4-6": 1_000_000,
    "claude-fable-5": 1_000_000,
    "claude-mythos-5": 1_000_000,
    "claude": 200_000,
    # OpenAI: context less the largest reply.
    "gpt-5-4": 922_000,  # 1,050,000 - 128,000
    "gpt-5-5": 922_000,
    "gpt-5-chat": 111_616,  # 128,000 - 16,384
    "gpt-5-1-chat": 111_616,
    "gpt-5": 272_000,  # 400,000 - 128,000: gpt-5, 5.1, 5.2, -mini, -nano, -codex
    "gpt-4-1": 1_014_808,  # 1,047,576 - 32,768
    "gpt-4o": 111_616,  # 128,000 - 16,384
    "gpt-4-5": 111_616,
    "o1": 100_000,  # 200,000 - 100,000
    "o3": 100_000,
    "o4-mini": 100_000,
    # Google: the input limit as stated.
    "gemini-3": 1_048_576,
    "gemini-2-5": 1_048_576,
    "gemini-2-0": 1_048_576,
}


#: Each provider family's prompt-cache prices as multiples of its uncached input price:
#: (a token written to the cache, a token read from it). Anthropic: writes 1.25x (the
#: 5-minute cache), reads 0.1x. OpenAI (GPT-5 family) and Gemini (2.5 and 3, implicit
#: caching) cache prefixes by themselves, with no write premium (a token not read is
#: billed as input), and bill a cached token at 0.1x.
CACHE_PRICES: dict[Provider, tuple[float, float]] = {"anthropic": (1.25, 0.1), "openai": (1.0, 0.1), "google": (1.0, 0.1)}
#: ... and an output token's price, the same way: Claude Sonnet $15 against $3; GPT-5
#: $10 against $1.25; Gemini 2.5 Pro $10 against $1.25.
OUTPUT_PRICES: dict[Provider, float] = {"anthropic": 5.0, "openai": 8.0, "google": 8.0}


#: Each provider family's text rates as a multiple of ``DEFAULT_ESTIMATOR``'s. Fitted to
#: the input tokens real sessions recorded (``benchmarks/test_bench_estimate.py``: the
#: change from request to request against the estimate's, so the unknown overhead
#: cancels): OpenAI 0.805 (one Codex GPT-5 session, 27 requests), Anthropic 1.017 (865
#: requests of pi and Claude Code). OpenAI's is applied (rounded to 0.8); Anthropic's is
#: within the noise of its fit and stays 1.0. Applying one was unsafe while calibration
#: learned an overhead only (a counter above the estimate's rate showed up as an
#: overhead growing with the history, until a 30k-window loop stopped); it now learns a
#: scale as well (``Calibration``), and the slow SDK loops pass with it.
TEXT_RATE_SCALE: dict[Provider, float] = {"anthropic": 1.0, "openai": 0.8, "google": 1.0}
