import glyphpack


def test_public_api_is_pinned():
    assert glyphpack.__all__ == sorted(glyphpack.__all__)
    assert set(glyphpack.__all__) == {
        # rendering
        "SHAPES", "FontAtlas", "Page", "Pages", "RenderReport", "Shape", "count_pages", "plan",
        "read_grid", "read_page", "read_pages", "render",
        # providers and cost
        "Profile", "ProfileWarning", "resolve", "reading_profile", "context_window", "ReadingProfile", "TextEstimator", "estimate_text_tokens",
        # legibility
        "confusable_pairs", "downscale", "legibility", "simulate",
        # transcripts and the session tree
        "Message", "Text", "Image", "ToolCall", "ToolResult", "Thinking", "is_turn_boundary",
        "turn_boundaries", "validate_history", "to_anthropic", "from_anthropic", "to_openai_chat",
        "from_openai_chat", "Workspace", "MemoryStore", "Transcript", "RequestReport", "SessionTree", "export_json", "export_markdown",
        "RedactedThinking", "Opaque", "import_file", "import_sessions", "ImportReport", "ImportedAgent", "ImportedSession",
        "to_openai_responses", "from_openai_responses", "to_gemini", "from_gemini",
        # a harness's session
        "open_session", "Session", "Thresholds", "CommandResult", "export_html",
        # compaction
        "Compaction", "CompactionPolicy", "LadderReport", "RungReport", "CompactionError", "Summarizer", "Sent", "sdk_summarizer", "compact", "parse_overflow", "recover", "shake",
        "should_compact", "generate_session", "calibrate", "Calibration", "recall_tool", "RECALL_TOOL", "Recalled",
        # errors
        "GlyphpackError", "FontError", "LimitError", "PageError", "ShapeError", "TextOnlyModelError",
        "HistoryError", "StoreError", "ConflictError", "UsageError",
    }
    for name in glyphpack.__all__:
        assert getattr(glyphpack, name) is not None


def test_public_names_read_as_glyphpack_names():
    """Catches a public class or function whose repr shows its private module."""
    for name in glyphpack.__all__:
        value = getattr(glyphpack, name)
        if isinstance(value, type) or callable(value):
            assert value.__module__ == "glyphpack", name
            assert repr(value).startswith(("<class 'glyphpack.", "<function ")), name
    assert repr(glyphpack.Message) == "<class 'glyphpack.Message'>"


def test_errors_share_one_root():
    for error in (glyphpack.FontError, glyphpack.LimitError, glyphpack.ShapeError, glyphpack.PageError,
                  glyphpack.TextOnlyModelError, glyphpack.HistoryError, glyphpack.StoreError, glyphpack.ConflictError,
                  glyphpack.CompactionError, glyphpack.UsageError):
        assert issubclass(error, glyphpack.GlyphpackError)


def test_transcript_layer_imports_without_numba():
    import subprocess
    import sys

    probe = "import sys, glyphpack; glyphpack.Workspace; glyphpack.Message; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
