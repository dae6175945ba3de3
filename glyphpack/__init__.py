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
from typing import Any

__version__ = "0.1.0"

# Public name -> module that defines it, layer by layer (see README, "How it is built").
_EXPORTS = {
    "CompactionError": "_errors",
    "ConflictError": "_errors",
    "FontError": "_errors",
    "GlyphpackError": "_errors",
    "HistoryError": "_errors",
    "LimitError": "_errors",
    "PageError": "_errors",
    "ProfileWarning": "_errors",
    "ShapeError": "_errors",
    "StoreError": "_errors",
    "TextOnlyModelError": "_errors",
    "UsageError": "_errors",
    "FontAtlas": "_render.fonts",
    "confusable_pairs": "_render.legibility",
    "downscale": "_render.legibility",
    "legibility": "_render.legibility",
    "simulate": "_render.legibility",
    "read_grid": "_render.reader",
    "read_page": "_render.reader",
    "read_pages": "_render.reader",
    "Page": "_render.render",
    "Pages": "_render.render",
    "RenderReport": "_render.render",
    "count_pages": "_render.render",
    "plan": "_render.render",
    "render": "_render.render",
    "SHAPES": "_render.shapes",
    "Shape": "_render.shapes",
    "Profile": "_providers.profile",
    "resolve": "_providers.resolve",
    "reading_profile": "_providers.resolve",
    "context_window": "_providers.resolve",
    "ReadingProfile": "_providers.reading",
    "TextEstimator": "_providers.text_tokens",
    "estimate_text_tokens": "_providers.text_tokens",
    "Image": "_history.messages",
    "Message": "_history.messages",
    "Text": "_history.messages",
    "Thinking": "_history.messages",
    "ToolCall": "_history.messages",
    "ToolResult": "_history.messages",
    "is_turn_boundary": "_history.messages",
    "turn_boundaries": "_history.messages",
    "validate_history": "_history.messages",
    "from_anthropic": "_wire.anthropic",
    "from_openai_chat": "_wire.openai_chat",
    "to_anthropic": "_wire.anthropic",
    "to_openai_chat": "_wire.openai_chat",
    "Transcript": "_history.store",
    "MemoryStore": "_history.memory",
    "Workspace": "_history.store",
    "SessionTree": "_history.tree",
    "export_json": "_history.export",
    "export_markdown": "_history.export",
    "ImportReport": "_history.imported",
    "ImportedAgent": "_history.imported",
    "ImportedSession": "_history.imported",
    "import_file": "_importers.registry",
    "import_sessions": "_importers.registry",
    "Opaque": "_history.messages",
    "RedactedThinking": "_history.messages",
    "Compaction": "_compaction.results",
    "CompactionPolicy": "_compaction.results",
    "LadderReport": "_compaction.results",
    "RungReport": "_compaction.results",
    "sdk_summarizer": "_compaction.sdk_summary",
    "Summarizer": "_compaction.summarize",
    "Sent": "_compaction.summarize",
    "compact": "_compaction.ladder",
    "shake": "_compaction.ladder",
    "should_compact": "_compaction.ladder",
    "calibrate": "_compaction.calibration",
    "Calibration": "_compaction.calibration",
    "recall_tool": "_wire",
    "RECALL_TOOL": "_history.recall",
    "Recalled": "_history.recall",
    "parse_overflow": "_compaction.recovery",
    "recover": "_compaction.recovery",
    "generate_session": "testing",
    "from_gemini": "_wire.gemini",
    "to_gemini": "_wire.gemini",
    "from_openai_responses": "_wire.openai_responses",
    "to_openai_responses": "_wire.openai_responses",
    "CommandResult": "_session.commands",
    "RequestReport": "_session.session",
    "Session": "_session.session",
    "Thresholds": "_session.compactor",
    "open_session": "_session.session",
    "export_html": "_session.navigator",
}

#: The public API: every name above, one list.
__all__ = sorted(_EXPORTS)



def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'glyphpack' has no attribute {name!r}") from None
    value = getattr(importlib.import_module("." + module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
