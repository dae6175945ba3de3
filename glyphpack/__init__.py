"""glyphpack: text packed into pages of 5-pixel bitmap glyphs for vision models,
and the transcript, session-tree and compaction machinery of an agent harness on top.

    >>> import glyphpack
    >>> pages = glyphpack.render("hello, world", model="claude-sonnet-4-5")
    >>> glyphpack.read_page(pages[0])
    'hello, world'

Names are imported on first use, so ``import glyphpack`` stays cheap for code that
needs only the transcript layer (numba loads with the renderer).
"""

import importlib

__version__ = "0.1.0"

# Public name -> private module that defines it.
_EXPORTS = {
    "FontError": "_errors",
    "GlyphpackError": "_errors",
    "LimitError": "_errors",
    "PageError": "_errors",
    "ShapeError": "_errors",
    "FontAtlas": "_fonts",
    "confusable_pairs": "_legibility",
    "downscale": "_legibility",
    "legibility": "_legibility",
    "simulate": "_legibility",
    "Profile": "_providers",
    "ProfileWarning": "_providers",
    "TextOnlyModelError": "_providers",
    "resolve": "_providers",
    "read_grid": "_reader",
    "read_page": "_reader",
    "read_pages": "_reader",
    "Page": "_render",
    "Pages": "_render",
    "RenderReport": "_render",
    "count_pages": "_render",
    "plan": "_render",
    "render": "_render",
    "SHAPES": "_shapes",
    "Shape": "_shapes",
    "TextEstimator": "_tokens",
    "estimate_text_tokens": "_tokens",
    "HistoryError": "_messages",
    "Image": "_messages",
    "Message": "_messages",
    "Text": "_messages",
    "Thinking": "_messages",
    "ToolCall": "_messages",
    "ToolResult": "_messages",
    "from_anthropic": "_messages",
    "from_openai_chat": "_messages",
    "is_turn_boundary": "_messages",
    "to_anthropic": "_messages",
    "to_openai_chat": "_messages",
    "turn_boundaries": "_messages",
    "validate_history": "_messages",
    "ConflictError": "_store",
    "StoreError": "_store",
    "Transcript": "_store",
    "Workspace": "_store",
    "SessionTree": "_tree",
    "export_json": "_export",
    "export_markdown": "_export",
    "Compaction": "_compaction",
    "calibrate": "_compaction",
    "CompactionError": "_compaction",
    "Summarizer": "_compaction",
    "compact": "_compaction",
    "parse_overflow": "_compaction",
    "recover": "_compaction",
    "shake": "_compaction",
    "should_compact": "_compaction",
    "generate_session": "_sessions",
}

__all__ = [
    "Compaction",
    "CompactionError",
    "ConflictError",
    "FontAtlas",
    "FontError",
    "GlyphpackError",
    "HistoryError",
    "Image",
    "LimitError",
    "Message",
    "Page",
    "PageError",
    "Pages",
    "Profile",
    "ProfileWarning",
    "RenderReport",
    "SHAPES",
    "SessionTree",
    "Shape",
    "ShapeError",
    "StoreError",
    "Summarizer",
    "Text",
    "TextEstimator",
    "TextOnlyModelError",
    "Thinking",
    "ToolCall",
    "ToolResult",
    "Transcript",
    "Workspace",
    "calibrate",
    "compact",
    "confusable_pairs",
    "count_pages",
    "downscale",
    "estimate_text_tokens",
    "export_json",
    "export_markdown",
    "from_anthropic",
    "from_openai_chat",
    "generate_session",
    "is_turn_boundary",
    "legibility",
    "parse_overflow",
    "plan",
    "read_grid",
    "read_page",
    "read_pages",
    "recover",
    "render",
    "resolve",
    "shake",
    "should_compact",
    "simulate",
    "to_anthropic",
    "to_openai_chat",
    "turn_boundaries",
    "validate_history",
]


def __getattr__(name: str):
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'glyphpack' has no attribute {name!r}") from None
    value = getattr(importlib.import_module("." + module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
