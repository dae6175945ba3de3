import dataclasses
import json
import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import glyphs_to_text

import glyphpack
from glyphpack import CompactionError, CompactionPolicy, Image, Summarizer, ToolResult, read_pages
from glyphpack._compaction.cost import CostModel
from glyphpack._compaction.ladder import compact, shake, should_compact
from glyphpack._compaction.recovery import parse_overflow, recover, request_bytes
from glyphpack._compaction.rungs import drop_images, elide
from glyphpack._compaction.snapshot import SNAPSHOT_RESULT_CAP, priced_header, serialize_message, snapshot
from glyphpack._compaction.summarize import Sent, summarize
from glyphpack._history.messages import Message, Text, ToolCall, turn_boundaries, validate_history
from glyphpack._providers.resolve import resolve
from glyphpack._render.fonts import load_atlas
from glyphpack._render.render import page_sizes
from glyphpack._render.shapes import get_shape
from glyphpack._render.text import normalize
from glyphpack.testing import generate_session

CLAUDE = resolve("claude-sonnet-4-5")
#: The dense pages (5x8), for the tests of the ladder's mechanics: the default shape is
#: the reader's exact one (tested in test_the_default_snapshot_is_the_readers_exact_shape).
DENSE = CompactionPolicy(fidelity="dense")


@pytest.fixture(scope="module")
def session():
    return generate_session(300_000, seed=3)


def fake_summarizer(window=20_000, calls=None):
    def fn(prompt):
        if calls is not None:
            calls.append(prompt)
        return "Summary: " + " ".join(prompt.split()[-40:])

    return Summarizer(fn, window=window, output_reserve=1000)


def images_in(messages):
    return sum(
        isinstance(b, Image) or (isinstance(b, ToolResult) and sum(isinstance(c, Image) for c in b.content))
        for m in messages
        for b in m.content
    )


def test_generated_sessions_are_realistic_and_deterministic(session):
    assert session == generate_session(300_000, seed=3)
    validate_history(session, allow_pending=False)
    results = [b for m in session for b in m.tool_results]
    assert any(r.is_error for r in results) and images_in(session) > 0
    assert any("def " in m.text for m in session)  # real standard-library source
    assert sum(len(m.text) for m in session) >= 300_000


def test_elision_keeps_errors_recent_turns_and_what_the_caller_marks(session):
    cost = CostModel(CLAUDE)
    policy = CompactionPolicy(protect_turns=2, remarkable=lambda r, c: c is not None and c.name == "grep")
    result = elide(session, cost, policy)
    view, report = list(result.view), result.report
    assert report.changed > 0 and report.tokens_after < report.tokens_before
    calls = {c.id: c for m in session for c in m.tool_calls}
    protected = [i for i, m in enumerate(session) if m.role == "user"][-2]
    for old, new in zip(session, view):
        for before, after in zip(old.tool_results, new.tool_results):
            elided = after.content[0].text.startswith("[elided by glyphpack")
            if elided:
                assert not before.is_error and calls[before.call_id].name != "grep"
                assert session.index(old) < protected
                assert f"{len(before.content[0].text):,} chars" in after.content[0].text
    assert view[protected:] == session[protected:]


def test_image_drop(session):
    cost = CostModel(CLAUDE)
    result = drop_images(session, cost, protect_turns=1)
    view, report = list(result.view), result.report
    protected = [i for i, m in enumerate(session) if m.role == "user"][-1]
    assert images_in(view[:protected]) == 0 and view[protected:] == session[protected:]
    assert report.changed == images_in(session[:protected])
    assert "image dropped by glyphpack: image/png" in json.dumps([m.text for m in view]) or report.changed == 0


def test_snapshot_keeps_head_and_tail_and_pages_read_back(session):
    cost = CostModel(CLAUDE)
    shaken = list(shake(session, CLAUDE).view)
    budget = cost.history(shaken) // 2
    result = snapshot(shaken, cost, budget, DENSE)
    view, report, pages = list(result.view), result.report, result.pages
    assert pages and report.tokens_after <= budget
    assert (report.first_message, report.last_message, report.pages) == (3, len(shaken) - (len(view) - 2 - 1), len(pages))
    snap_index = next(i for i, m in enumerate(view) if m.id.startswith("snapshot-"))
    assert view[:snap_index] == shaken[:2]  # system prompt and the task, verbatim
    tail = view[snap_index + 1 :]
    assert tail == shaken[len(shaken) - len(tail) :]  # the newest turns, verbatim
    middle = shaken[2 : len(shaken) - len(tail)]
    text = "".join(serialize_message(m) for m in middle)
    atlas = load_atlas("5x8")
    assert read_pages(pages) == glyphs_to_text(normalize(text, atlas).glyphs, atlas)
    assert all(p.tokens == CLAUDE.tokens(p.width, p.height) for p in pages)


def test_snapshot_is_skipped_without_vision(session):
    result = snapshot(session, CostModel(resolve("o3-mini")), 10_000)
    assert result.pages == () and "no vision" in result.report.skipped and list(result.view) == list(session)


def test_summarization_fits_the_summarizers_own_window(session):
    calls = []
    summarizer = fake_summarizer(window=4_000, calls=calls)
    cost = CostModel(CLAUDE)
    result = summarize(session, cost, 30_000, summarizer)
    view, report = list(result.view), result.report
    assert len(calls) > 1 and report.summarizer_calls == len(calls)  # chunked
    limit = summarizer.window - summarizer.output_reserve
    assert all(cost.text(prompt) <= limit for prompt in calls)
    validate_history(view, allow_pending=False)
    assert view[:2] == session[:2] and "[glyphpack summary of messages 3-" in view[2].text


def test_text_only_reader_never_receives_an_image_and_gets_the_summary(session):
    """Catches: a ``compact`` that never compacts (the view keeps its images and its
    size), one that snapshots a reader without vision, and one that skips the summary."""
    cost = CostModel(resolve("o3-mini"))
    full = cost.history(session)
    shaken = cost.history(shake(session, "o3-mini").view)  # what the free rungs leave
    assert images_in(session) > 0 and shaken < full
    for budget in (full * 2, (full + shaken) // 2, shaken // 2, shaken // 4):
        result = compact(session, "o3-mini", budget, summarizer=fake_summarizer())
        assert images_in(result.view) == 0 and result.pages == ()
        assert all(r.rung != "snapshot" for r in result.report.rungs)
        assert result.report.fits and cost.history(result.view) <= budget
        summarized = any(m.id.startswith("summary-") for m in result.view)
        assert summarized == (budget < shaken), "\n".join(result.report.lines())
    assert images_in(shake(session, "deepseek-chat").view) == 0


@pytest.mark.slow  # two seconds of examples: CI runs it
@settings(max_examples=40 if os.environ.get("CI") else 12, deadline=None)  # the long hunt runs in CI
@given(
    chars=st.integers(5_000, 120_000),
    seed=st.integers(0, 50),
    fraction=st.floats(0.15, 1.2),
    model=st.sampled_from(["claude-sonnet-4-5", "claude-opus-4-8", "gpt-5.4", "gpt-4o", "gemini-3-pro", "o3-mini"]),
)
def test_the_ladder_meets_any_budget_it_can(chars, seed, fraction, model):
    """Catches a ``compact`` that never compacts, or gives up early: whenever the head,
    the last turn and room for a summary fit the budget, the view must fit it."""
    history = generate_session(chars, seed)
    profile = resolve(model)
    cost = CostModel.for_model(profile)
    budget = max(1, int(cost.history(history) * fraction))
    result = compact(history, profile, budget, summarizer=fake_summarizer())
    view = list(result.view)
    validate_history(view, allow_pending=False)  # no orphans: a provider accepts it
    assert view[:2] == history[:2]  # the head verbatim
    assert result.report.fits == (cost.history(view) <= budget)
    last_turn = max(i for i, m in enumerate(history) if m.role == "user")
    reachable = cost.history(history[:2]) + cost.history(history[last_turn:]) + 1000
    if budget >= reachable:
        assert result.report.fits, "\n".join(result.report.lines())
    if not profile.vision:
        assert images_in(view) == 0
    snap = [i for i, m in enumerate(view) if m.id.startswith("snapshot-")]
    if snap:
        tail = view[snap[0] + 1 :]
        # the pages hold exactly the serialized middle of the history the rungs before made
        shaken = list(history)
        for report in result.report.rungs:
            if report.rung == "elision":
                shaken = list(elide(shaken, cost).view)
            elif report.rung == "image drop":
                shaken = list(drop_images(shaken, cost).view)
        assert tail == shaken[len(shaken) - len(tail):]
        # The whole middle on pages, or (when it did not fit) its oldest part summarized
        # and the rest on pages: the summary stands right before them.
        summary = next((i for i, m in enumerate(view) if m.id.startswith("summary-")), None)
        start = 2
        if summary is not None:
            assert summary == snap[0] - 1
            start = result.report.rung("summarization").last_message
        middle = shaken[start : len(shaken) - len(tail)]
        drawn = [r for r in result.report.rungs if r.rung == "snapshot" and r.skipped is None]
        cap = drawn[-1].result_cap or None
        assert cap is None or cap >= SNAPSHOT_RESULT_CAP
        text = "".join(serialize_message(m, cap) for m in middle)
        atlas = load_atlas(get_shape(result.pages[0].shape).font)
        assert read_pages(result.pages) == glyphs_to_text(normalize(text, atlas).glyphs, atlas)
    assert len(result.report.rungs) <= 6  # each rung at most once (and the image cap): it never loops


def test_recompaction_keeps_earlier_pages_byte_identical():
    history = generate_session(1_000_000, seed=7)
    longer = history + generate_session(100_000, seed=8)[1:]  # more turns: a new task and its work
    budget = CostModel(CLAUDE).history(shake(history, CLAUDE).view) // 4
    first = compact(history, "claude-sonnet-4-5", budget, policy=DENSE)
    second = compact(longer, "claude-sonnet-4-5", budget, policy=DENSE)
    assert first.pages and second.pages

    def middle_text(result, source):
        snap = next(i for i, m in enumerate(result.view) if m.id.startswith("snapshot-"))
        tail = len(result.view) - snap - 1
        shaken = list(source)  # the rungs before the snapshot
        cost = CostModel(resolve("claude-sonnet-4-5"))
        shaken = list(elide(shaken, cost).view)
        shaken = list(drop_images(shaken, cost).view)
        return "".join(serialize_message(m) for m in shaken[2 : len(shaken) - tail])

    a, b = middle_text(first, history), middle_text(second, longer)
    first_change = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    per_page = first.pages[0].chars
    unchanged_pages = first_change // per_page
    assert unchanged_pages >= 1
    for i in range(min(unchanged_pages, len(first.pages) - 1)):
        assert first.pages[i].png == second.pages[i].png


ERRORS = [
    ("anthropic", "Error code: 400 - {'type': 'error', 'error': {'type': 'invalid_request_error', 'message': 'prompt is too long: 215147 tokens > 200000 maximum'}}", 215147, 200000),
    ("openai", "Error code: 400 - {'error': {'message': \"This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.\", 'type': 'invalid_request_error', 'param': 'messages', 'code': 'context_length_exceeded'}}", 130532, 128000),
    ("gemini", "400 INVALID_ARGUMENT. {'error': {'code': 400, 'message': 'The input token count (1245760) exceeds the maximum number of tokens allowed (1048576).', 'status': 'INVALID_ARGUMENT'}}", 1245760, 1048576),
]


@pytest.mark.parametrize("provider, text, measured, limit", ERRORS)
def test_parse_real_overflow_wordings(provider, text, measured, limit):
    overflow = parse_overflow(text)
    assert (overflow.kind, overflow.measured, overflow.limit, overflow.provider) == ("tokens", measured, limit, provider)


def test_parse_413_and_others():
    class APIStatusError(Exception):
        status_code = 413

    assert parse_overflow(APIStatusError("Error code: 413 - request_too_large")).kind == "bytes"
    assert parse_overflow({"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum size"}}).kind == "bytes"
    assert parse_overflow("Your input exceeds the context window of this model.").kind == "tokens"
    assert parse_overflow("529 overloaded_error") is None
    with pytest.raises(CompactionError, match="not a 'request too long' error"):
        recover([], CLAUDE, "rate limited")


def test_recover_trusts_the_providers_count(session):
    cost = CostModel(CLAUDE)
    estimate = cost.history(session)
    measured = int(estimate * 1.5)  # the provider counted half again as much as we did
    limit = int(measured * 0.6)
    error = f"prompt is too long: {measured} tokens > {limit} maximum"
    result = recover(session, CLAUDE, error, summarizer=fake_summarizer())
    assert result.report.budget == int(limit * 0.9)
    # judged with the provider's count (the difference is the requests' overhead), the view is under the target
    assert cost.history(result.view) + (measured - estimate) <= result.report.budget
    assert "measured by the provider" in result.report.message


def test_recover_from_413_needs_fewer_bytes(session):
    before = request_bytes(session)
    result = recover(session, CLAUDE, "Error code: 413 - {'error': {'type': 'request_too_large'}}", summarizer=fake_summarizer())
    assert request_bytes(result.view) <= before * 0.5 * 0.9
    assert images_in(result.view) == 0
    validate_history(result.view, allow_pending=False)


def test_proactive_trigger_and_budget_errors(session):
    cost = CostModel(CLAUDE).history(session)
    assert should_compact(session, CLAUDE, cost - 1) and not should_compact(session, CLAUDE, cost + 1)
    with pytest.raises(CompactionError, match="positive number of tokens"):
        compact(session, CLAUDE, 0)


def test_ladder_says_when_it_cannot_fit(session):
    result = compact(session, CLAUDE, 100)  # no summarizer, impossible budget
    assert not result.report.fits and "does not fit" in result.report.message
    assert "a summarizer would free more" in result.report.message


def test_calibrate_to_a_reported_count(session):
    from glyphpack import calibrate

    """The difference from a reported count is the requests' overhead: the rates (and
    so every text estimate, a summarizer's included) stay as they were."""
    cost = CostModel(CLAUDE)
    estimate, images = cost.history(session), cost.breakdown(session)["images"]
    measured = estimate + 12_345  # a harness's system prompt and tool schemas
    estimator = calibrate(session, CLAUDE, measured)
    assert estimator.overhead == 12_345
    calibrated = CostModel(CLAUDE, estimator)
    assert calibrated.history(session) + estimator.overhead == measured
    assert calibrated.text("some text") == cost.text("some text")
    assert calibrated.breakdown(session)["images"] == images  # image prices are exact: untouched
    # the ladder leaves room for the overhead
    result = compact(session, CLAUDE, 40_000, policy=CompactionPolicy(estimator=estimator))
    assert result.report.fits and calibrated.history(result.view) + 12_345 <= 40_000
    with pytest.raises(CompactionError, match="leaves nothing for messages"):
        compact(session, CLAUDE, 12_000, policy=CompactionPolicy(estimator=estimator))


def test_a_per_request_route_still_counts_images_against_the_context(session):
    copilot = resolve("github_copilot/claude-sonnet-4.6")
    page = next(b for m in session for r in m.tool_results for b in r.content if isinstance(b, Image))
    assert copilot.tokens(640, 480) == 0  # not billed per image on this route
    assert CostModel(copilot).image(page) == CostModel(CLAUDE).image(page) > 0  # but it fills the context


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-opus-4-8", "gpt-5.4", "gpt-4o", "gemini-3-pro", "gemini-2.5-pro"])
@pytest.mark.parametrize("chars", [100_000, 400_000])
def test_snapshots_alone_meet_a_budget_they_can(model, chars):
    """Without a summarizer, a quarter of what the free rungs leave is met by snapshots
    (a partial last page costs only its rows: the search must price it so)."""
    history = generate_session(chars, seed=11)
    profile = resolve(model)
    budget = CostModel(profile).history(shake(history, profile).view) // 4
    result = compact(history, profile, budget, policy=DENSE)
    assert result.report.fits, "\n".join(result.report.lines())
    assert result.pages


@pytest.mark.slow  # builds each SDK's own exceptions (about 2.5 s): CI runs it
def test_parse_overflow_from_the_sdks_own_exceptions():
    """The exception objects a harness actually catches, built the way the SDKs build them."""
    import anthropic
    import openai
    from google.genai import errors as genai_errors

    try:  # the SDKs' HTTP client: httpx2 in current releases, httpx in older ones
        import httpx2 as httpx
    except ImportError:
        import httpx
    request = httpx.Request("POST", "https://api.example/v1")

    def response(status, body):
        return httpx.Response(status, request=request, json=body)

    body = {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 215147 tokens > 200000 maximum"}}
    claude = anthropic.BadRequestError(body["error"]["message"], response=response(400, body), body=body)
    assert parse_overflow(claude) == parse_overflow(ERRORS[0][1])
    body = {"error": {"message": ERRORS[1][1].split('"')[1], "type": "invalid_request_error", "code": "context_length_exceeded"}}
    gpt = openai.BadRequestError(f"Error code: 400 - {body}", response=response(400, body), body=body)
    assert (parse_overflow(gpt).measured, parse_overflow(gpt).limit) == (130532, 128000)
    body = {"error": {"code": 400, "message": "The input token count (1245760) exceeds the maximum number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}
    gemini = genai_errors.ClientError(400, body)
    assert (parse_overflow(gemini).measured, parse_overflow(gemini).limit) == (1245760, 1048576)
    body = {"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum allowed number of bytes."}}
    too_big = anthropic.RequestTooLargeError(body["error"]["message"], response=response(413, body), body=body)
    assert parse_overflow(too_big).kind == "bytes"


def test_large_tool_call_arguments_are_elided_and_shown_unescaped_on_pages():
    """Catches arguments that stay whole in old turns (an edit's body was a third of a
    real pi session's tokens) and arguments drawn as one JSON-escaped line."""
    from glyphpack import Message, Text, ToolCall, ToolResult

    body = "def f():\n\treturn 1\n" * 200
    history = [Message("user", "task")]
    for turn in range(4):
        history += [
            Message("assistant", (ToolCall(f"e{turn}", "write", {"path": f"f{turn}.py", "content": body}),)),
            Message("tool", (ToolResult(f"e{turn}", (Text("ok"),)),)),
            Message("assistant", f"wrote {turn}"),
            Message("user", f"next {turn}"),
        ]
    result = elide(history, CostModel(CLAUDE), CompactionPolicy(protect_turns=2))
    calls = [c for m in result.view for c in m.tool_calls]
    assert [c.id for c in calls] == ["e0", "e1", "e2", "e3"]
    assert "elided_by_glyphpack" in calls[0].arguments and "elided_by_glyphpack" in calls[1].arguments
    assert calls[3].arguments["content"] == body  # the protected turns keep theirs
    assert result.report.tokens_after < result.report.tokens_before
    validate_history(list(result.view), allow_pending=False)
    text = serialize_message(history[1])
    assert "content:\ndef f():\n\treturn 1\n" in text and "\\n" not in text


@pytest.mark.parametrize(
    "text, expected",
    [
        ("This endpoint's maximum context length is 200000 tokens. However, you requested about 250796 tokens "
         "(250796 of text input). Please reduce the length of either one, or use the \"middle-out\" transform.",
         ("tokens", 250796, 200000, "openrouter")),
        ("ValidationException: Input is too long for requested model.", ("tokens", None, None, "bedrock")),
        ("400 INVALID_ARGUMENT. Request payload size exceeds the limit: 20971520 bytes.", ("bytes", None, None, None)),
        ("This model's maximum context length is 128000 tokens. However, you requested 140000 tokens "
         "(130000 in the messages, 10000 in the completion). Please reduce the length of the messages or completion.",
         ("tokens", 130000, 128000, "openai")),
        ("input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or "
         "`max_tokens` and try again", ("tokens", 188240, 178667, "anthropic")),
        ("Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
         ("tokens", 40000, 32768, "mistral")),
        ("litellm.ContextWindowExceededError: litellm.BadRequestError: context window exceeded", ("tokens", None, None, "litellm")),
    ],
)
def test_parse_more_real_wordings(text, expected):
    overflow = parse_overflow(text)
    assert (overflow.kind, overflow.measured, overflow.limit, overflow.provider) == expected


def test_a_rate_limit_ending_in_413_is_no_overflow():
    """OpenAI's tokens-per-minute errors end "Requested 413.": that is a rate limit, not
    an HTTP 413 (it once read as one)."""
    import openai

    try:
        import httpx2 as httpx
    except ImportError:
        import httpx
    text = ("Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, "
            "Used 29587, Requested 413. Please try again in 2ms.")
    body = {"error": {"message": text, "type": "tokens", "code": "rate_limit_exceeded"}}
    response = httpx.Response(429, request=httpx.Request("POST", "https://api.example/v1"), json=body)
    assert parse_overflow(openai.RateLimitError(text, response=response, body=body)) is None
    assert parse_overflow(text) is None


def _screenshot_turn(count: int) -> list:
    from glyphpack import Message, Text, ToolCall, ToolResult

    png = glyphpack_render_png()
    calls = tuple(ToolCall(f"shot{k}", "screenshot", {}) for k in range(count))
    results = tuple(ToolResult(f"shot{k}", (Text("screen"), Image("image/png", png))) for k in range(count))
    return [Message("user", "look at the screens"), Message("assistant", calls), Message("tool", results), Message("assistant", "seen")]


def glyphpack_render_png() -> bytes:
    import glyphpack

    return glyphpack.render("a small screenshot")[0].png


def test_snapshot_pages_count_the_requests_other_images():
    """Catches pages sized as if they were the request's only images: with 18 screenshots
    in the last turn, high-resolution Claude pages must follow the rule for requests of
    more than 20 images (each at most 2000 px), and a request never exceeds 100 images."""
    history = generate_session(400_000, seed=4) + _screenshot_turn(24)
    profile = resolve("claude-opus-4-7")
    policy = CompactionPolicy(protect_turns=1, fidelity="dense")
    cost = CostModel(profile)
    shaken = cost.history(shake(history, profile, policy=policy).view)
    room = cost.history(history[:2]) + cost.history(history[-4:])  # the head and the screenshot turn
    budget = room + (shaken - room) // 4  # the screenshots fit verbatim; the middle must go to pages
    result = compact(history, profile, budget, policy=policy)
    assert result.pages
    images = sum(len(m.images) for m in result.view)
    assert 20 < images <= profile.max_images  # the 24 screenshots stay: the many-image rule applies
    assert all(max(p.width, p.height) <= 2000 for p in result.pages), [(p.width, p.height) for p in result.pages]


def test_the_snapshot_search_is_bounded_and_names_what_stopped_it(monkeypatch):
    """Catches a search that draws once per cut (a 4.2M-character history once took
    197 renders): cuts are priced from their layout and only the answer is drawn; and
    a skip reason that hides the image limit."""
    import glyphpack._render.render as render_module
    from glyphpack._compaction import snapshot as snapshot_module

    renders, plans = [], []
    real_render, real_sizes = render_module.render, render_module.page_sizes
    monkeypatch.setattr(render_module, "render", lambda *a, **k: renders.append(1) or real_render(*a, **k))
    monkeypatch.setattr(render_module, "page_sizes", lambda *a, **k: plans.append(1) or real_sizes(*a, **k))
    history = generate_session(300_000, seed=9)
    cost = CostModel(CLAUDE)
    result = snapshot(history, cost, cost.history(history[:2]) + 50)  # room for the head only
    assert not renders and not plans and not result.pages  # no tail fits: nothing is even priced
    assert "the budget of" in result.report.skipped
    fits = snapshot(history, cost, cost.history(history) // 3)
    assert fits.pages and len(renders) == 1 and 1 <= len(plans) <= snapshot_module.MAX_SNAPSHOT_PLANS
    from glyphpack import Message, Text, ToolCall, ToolResult

    png = glyphpack_render_png()
    task = Message("user", (Text("match these 100 mockups"), *(Image("image/png", png) for _ in range(100))))
    crowded = [history[0], task, *history[2:]]  # the head alone holds the request's 100 images
    result = snapshot(crowded, cost, cost.history(crowded))
    assert not result.pages and "100 images per request" in result.report.skipped
    # Every cut is priced to pages the image limit refuses (99 images in the head, four or
    # more pages of middle): none is drawn, and the search stops at its limit of plans.
    renders.clear(), plans.clear()
    monkeypatch.setattr(snapshot_module, "MAX_SNAPSHOT_PLANS", 5)
    task = Message("user", (Text("the task"), *(Image("image/png", png) for _ in range(99))))
    big = [Message("assistant", (ToolCall("r0", "read", {}),)), Message("tool", (ToolResult("r0", (Text("x" * 120_000),)),))]
    turns = [m for k in range(12) for m in (Message("user", f"next {k}"), Message("assistant", f"done {k}"))]
    crowded = [history[0], task, *big, *turns]  # 13 cuts, each laid out to 4 or more pages
    result = snapshot(crowded, cost, cost.history(crowded), CompactionPolicy(tail_tokens=0))
    assert not result.pages and not renders and len(plans) == 5
    assert "limit of 5 priced cuts" in result.report.skipped and "100 images per request" in result.report.skipped
    crowded = history + _screenshot_turn(99)
    result = compact(crowded, CLAUDE, cost.history(crowded) // 3, policy=CompactionPolicy(protect_turns=1))
    assert sum(len(m.images) for m in result.view) <= 100


def test_consecutive_snapshots_share_their_header_and_unchanged_pages():
    """The text before the pages is the same on every pass (it once carried the message
    range and counts, so the cached prefix ended at block 1)."""
    history = generate_session(600_000, seed=7)
    longer = history + generate_session(60_000, seed=8)[1:]
    budget = CostModel(CLAUDE).history(shake(history, CLAUDE).view) // 4
    first, second = compact(history, CLAUDE, budget, policy=DENSE), compact(longer, CLAUDE, budget, policy=DENSE)
    header = [next(m for m in r.view if m.id.startswith("snapshot-")).content[0] for r in (first, second)]
    assert header[0] == header[1]


@pytest.mark.slow  # builds a merged Unifont atlas: CI runs it
def test_kept_geometry_gives_way_to_a_script_its_font_lacks():
    """A pinned 5x8 geometry once drew every CJK character of a growing middle as the
    replacement glyph and reported nothing. A snapshot never replaces a character: the
    middle is drawn in Unifont, the note says the pinned pages were redrawn, and the
    pages read back to the text."""
    from glyphpack import Message

    def turns(text: str, count: int, start: int) -> list:
        out = []
        for i in range(start, start + count):
            out += [Message("user", f"step {i}"), Message("assistant", text * 40)]
        return out

    history = [Message("system", "agent"), Message("user", "task")] + turns("plain ascii words. ", 30, 0)
    budget = CostModel(CLAUDE).history(history) // 4
    first = compact(history, CLAUDE, budget, policy=DENSE)
    assert first.pages and first.pages[0].shape == "5x8"
    longer = history + turns("more ascii words. ", 10, 30)
    same = compact(longer, CLAUDE, CostModel(CLAUDE).history(longer) // 4, policy=first.keep_geometry(DENSE))
    assert {(p.shape, p.width) for p in same.pages} == {("5x8", first.pages[0].width)}
    assert read_pages(same.pages).startswith(read_pages(first.pages))
    grown = history + turns("漢字の文章がここに続きます。", 60, 30)
    budget = CostModel(CLAUDE).history(grown) // 2
    kept = compact(grown, CLAUDE, budget, policy=first.keep_geometry(DENSE))
    snap = next(r for r in kept.report.rungs if r.rung == "snapshot")
    assert {p.shape for p in kept.pages} == {"unifont"} and snap.replaced_scripts == {}
    assert "5x8's font lacks characters of the middle (" in snap.note and "CJK" in snap.note
    assert "earlier pages are redrawn" in snap.note
    assert "漢字の文章がここに続きます。" * 40 in read_pages(kept.pages)
    unpinned = compact(grown, CLAUDE, budget, policy=DENSE)
    assert "redrawn" not in next(r for r in unpinned.report.rungs if r.rung == "snapshot").note


def test_the_policy_chooses_the_rungs(session):
    cost = CostModel.for_model("claude-sonnet-4-5")
    budget = cost.history(session) // 5
    summarizer = Summarizer(lambda prompt: "what happened, briefly")
    only = compact(session, "claude-sonnet-4-5", budget, summarizer=summarizer, policy=CompactionPolicy(rungs=("summarization",)))
    assert [r.rung for r in only.report.rungs] == ["summarization"] and only.report.fits and not only.pages
    free = compact(session, "claude-sonnet-4-5", budget // 20, policy=CompactionPolicy(rungs=("elision", "image drop")))
    assert [r.rung for r in free.report.rungs] == ["elision", "image drop"]
    with pytest.raises(glyphpack.UsageError, match="a rung must be one of"):
        CompactionPolicy(rungs=("pruning",))


@pytest.mark.parametrize(("model", "shape"), [("claude-sonnet-4-5", "9x15-loose"), ("claude-fable-5", "5x8"),
                                              ("claude-opus-5", "9x15"), ("gpt-5.6", "9x15-loose")])
def test_the_default_snapshot_is_the_readers_exact_shape(session, model, shape):
    """A snapshot the model cannot read is a deleted conversation: by default the pages
    are in the densest shape the reader is known to read exactly; a reader with no
    evidence (Sonnet 4.5) gets the conservative shape, never 5x8."""
    budget = CostModel.for_model(model).history(session) // 2
    result = compact(session, model, budget, policy=CompactionPolicy(rungs=("snapshot",)))
    assert result.pages and {p.shape for p in result.pages} == {shape}


def test_a_cost_model_given_to_compact_prices_unchanged_messages_once(session):
    """A harness compacting again and again passes its cost model: the messages the
    ladder keeps as they are are not priced a second time."""
    priced = []

    def tokenizer(text):
        priced.append(text)
        return len(text) // 4 + 1

    cost = CostModel(CLAUDE, tokenizer=tokenizer)
    before = cost.history(session)
    priced.clear()
    result = compact(session, CLAUDE, before * 2 // 3, policy=DENSE, cost=cost)
    assert [r.rung for r in result.report.rungs] == ["elision"] and len(result.view) == len(session)
    # A message with nothing elided is the very same object, so its price is a memo hit.
    assert all(new is old for new, old in zip(result.view, session) if new.content == old.content)
    kept = [new for new, old in zip(result.view, session) if new is old]
    assert kept and len(kept) < len(session)  # some were elided, the rest kept
    kept_texts = {text for m in kept for block in m.content for text in block.texts() if len(text) > 200}
    assert kept_texts and not kept_texts & set(priced)
    with pytest.raises(CompactionError, match="prices for .* not for"):
        compact(session, "gpt-5.4", 1000, cost=cost)


_LOOP = None


def _tool_loop():
    """A shaken tool loop (built once): a history whose newest work is tool results."""
    global _LOOP
    if _LOOP is None:
        _LOOP = list(shake(generate_session(120_000, seed=21), CLAUDE).view)
    return _LOOP


def _kept_as_text(result) -> int:
    """Messages after the snapshot's pages: the newest ones, kept verbatim."""
    return len(result.view) - 1 - next(i for i, m in enumerate(result.view) if m.id.startswith("snapshot-"))


@settings(max_examples=12, deadline=None)
@given(st.floats(min_value=0.08, max_value=0.9), st.floats(min_value=0.0, max_value=0.5))
def test_a_larger_budget_never_keeps_fewer_newest_messages_as_text(share, more):
    """The cut search once kept the 4 newest messages as text at 14,750 tokens and none
    at 15,000 (an estimate-driven search that ran out of renders, and results cut only
    after every uncut middle failed). Every cut is priced exactly now, so the tail can
    only grow with the budget; and the newest round is never put on pages."""
    history = _tool_loop()
    cost = CostModel(CLAUDE)
    total = cost.history(history)
    smaller, larger = int(total * share), int(total * min(share + more, 0.95))
    results = [snapshot(history, cost, budget, DENSE) for budget in (smaller, larger)]
    newest_round = len(history) - max(b for b in turn_boundaries(history) if b < len(history))
    for result, budget in zip(results, (smaller, larger)):
        if result.pages:
            assert result.report.tokens_after <= budget
            assert _kept_as_text(result) >= newest_round
            assert list(result.view[-newest_round:]) == history[-newest_round:]
    if all(r.pages for r in results):
        assert _kept_as_text(results[1]) >= _kept_as_text(results[0])


def test_the_newest_round_is_never_put_on_pages():
    """In a long tool loop the newest tool result once ended up only on page images:
    a budget that holds the pages of everything but not the newest result as text
    makes no snapshot, rather than one that hides what the model just read."""
    from glyphpack import Message, Text, ToolCall

    loop = _tool_loop()
    newest = [
        Message("assistant", (ToolCall("last", "read_file", {"path": "big.py"}),)),
        Message("tool", (ToolResult("last", (Text("def newest_result():\n    return 1\n" * 400),)),)),
    ]
    history = loop + newest
    cost = CostModel(CLAUDE)
    header = cost.message(priced_header(history))

    def least(messages):
        """The cheapest view with ``messages`` after the head on pages, results cut."""
        middle = "".join(serialize_message(m, SNAPSHOT_RESULT_CAP) for m in messages)
        return cost.history(history[:2]) + header + sum(CLAUDE.context_tokens(w, h) for w, h in page_sizes(middle, model=CLAUDE, fidelity="dense"))

    kept = snapshot(history, cost, least(history[2:-2]) + cost.history(newest), DENSE)
    assert kept.pages and list(kept.view[-2:]) == newest
    # all of it on pages would fit (the newest result included): never done
    assert least(history[2:]) + 50 < least(history[2:-2]) + cost.history(newest)
    assert not snapshot(history, cost, least(history[2:]) + 50, DENSE).pages


def test_a_pinned_page_size_gives_way_to_the_many_image_rule():
    """A session for Opus 4.8 pinned the first pass's 2575 px pages and later built a
    request of 22 images of 2575 px, which Anthropic rejects (over 20 images: each at
    most 2000 px). The pinned size holds while the request has few images, and is
    re-planned (the note says so) when it would break the rule."""
    opus = resolve("claude-opus-4-8")
    history = generate_session(200_000, seed=4)
    cost = CostModel(opus)
    first = compact(history, opus, cost.history(shake(history, opus).view) // 3, policy=DENSE)
    assert first.pages and max(first.pages[0].width, first.pages[0].full_height) > 2000
    pinned = first.keep_geometry(CompactionPolicy(fidelity="dense", protect_turns=1))
    few = history + _screenshot_turn(2)
    again = compact(few, opus, CostModel(opus).history(shake(few, opus, policy=pinned).view) // 3, policy=pinned)
    assert {(p.width, p.full_height) for p in again.pages} == {(first.pages[0].width, first.pages[0].full_height)}
    crowded = history + _screenshot_turn(20)[:-1]  # the newest round: 20 screenshots the model just took
    budget = CostModel(opus).history(shake(crowded, opus, policy=pinned).view) * 4 // 5
    result = compact(crowded, opus, budget, policy=pinned)
    images = sum(len(m.images) for m in result.view)
    assert result.pages and images > 20
    assert all(max(p.width, p.height) <= 2000 for p in result.pages)
    snap = next(r for r in result.report.rungs if r.rung == "snapshot")
    assert "many-image rule" in snap.note
    # 18 screenshots fit the rule with one page of 2575 px; the middle takes several
    pages_only = dataclasses.replace(pinned, rungs=("snapshot",))
    crowded = generate_session(400_000, seed=4) + _screenshot_turn(18)[:-1]
    result = compact(crowded, opus, CostModel(opus).history(crowded) // 4, policy=pages_only)
    assert len(result.pages) >= 3 and sum(len(m.images) for m in result.view) > 20
    assert all(max(p.width, p.height) <= 2000 for p in result.pages)


def test_the_ladder_is_one_tuple_in_one_order():
    """``policy.rungs`` was made a set, so a caller's order was silently ignored; the
    order was written again in ``shake``, the 413 path and ``Session``."""
    from glyphpack._compaction.ladder import LADDER
    from glyphpack._session.session import SESSION_RUNGS
    from glyphpack._types import RUNGS

    assert tuple(step.rung for step in LADDER) == RUNGS == ("reasoning drop", "elision", "image drop", "snapshot", "summarization", "tail cut")
    assert SESSION_RUNGS == ("reasoning drop", "image drop", "snapshot", "summarization", "tail cut")
    assert CompactionPolicy(rungs=("image drop", "summarization")).rungs == ("image drop", "summarization")
    for refused in (("snapshot", "elision"), ("elision", "elision"), ("summarization", "image drop")):
        with pytest.raises(glyphpack.UsageError, match="cheapest first"):
            CompactionPolicy(rungs=refused)
    session = generate_session(60_000, seed=2)
    assert [r.rung for r in shake(session, CLAUDE).report.rungs] == ["elision", "image drop"]
    result = recover(session, CLAUDE, "Error code: 413 - {'error': {'type': 'request_too_large'}}", summarizer=fake_summarizer())
    assert [r.rung for r in result.report.rungs][:2] == ["image drop", "elision"]  # images are most of the bytes


def test_one_overflow_budget_for_the_ladder_and_the_session():
    from glyphpack._compaction.recovery import Overflow, overflow_budget

    assert overflow_budget(Overflow("tokens", 210_000, 200_000), 150_000, 0.1) == 180_000  # the provider's limit
    assert overflow_budget(Overflow("tokens", 210_000, None), 150_000, 0.1) == int(210_000 * 0.8 * 0.9)  # its count
    assert overflow_budget(Overflow("tokens", None, None), 150_000, 0.1) == int(150_000 * 0.8 * 0.9)  # the estimate
    assert overflow_budget(Overflow("tokens", 210_000, 200_000), 150_000, 0.1, 0.5) == 90_000  # a second rejection
    assert overflow_budget(Overflow("tokens", None, 1), 1, 0.5) == 1


def test_long_results_keep_as_much_of_their_ends_as_the_budget_allows(monkeypatch):
    """Results cut to their ends fit at 4,000 characters each end; the snapshot widens
    that cut until the pages fill the budget, rather than land far under it."""
    from glyphpack._compaction import snapshot as snapshot_module

    history = generate_session(300_000, seed=0)
    policy = CompactionPolicy(rungs=("snapshot",))
    widened = compact(history, "claude-sonnet-4-5", 20_000, policy=policy)
    rung = widened.report.rung("snapshot")
    assert rung.results_cut >= 1 and rung.result_cap > SNAPSHOT_RESULT_CAP
    assert 0.95 * 20_000 < widened.report.tokens_after <= 20_000
    assert f"cut to {rung.result_cap:,} chars at each end to fit" in "\n".join(widened.report.lines())
    monkeypatch.setattr(snapshot_module, "CAP_REFINEMENTS", 0)
    narrow = compact(history, "claude-sonnet-4-5", 20_000, policy=policy)
    assert narrow.report.rung("snapshot").result_cap == SNAPSHOT_RESULT_CAP
    assert narrow.report.rung("snapshot").middle_chars < rung.middle_chars


def test_when_the_middle_cannot_all_go_on_pages_its_newest_part_does_and_only_the_rest_is_summarized():
    """The whole middle of a 400k-character session does not fit a 5% budget as pages:
    instead of one summary for all of it, the newest part of the middle goes on as many
    pages as fit and only the oldest part is summarized, behind its recall ref."""
    history = generate_session(400_000, seed=3)
    cost = CostModel.for_model(CLAUDE)
    budget = int(cost.history(history) * 0.05)
    prompts: list[str] = []
    summarizer = Summarizer(lambda prompt: prompts.append(prompt) or "the oldest work, summarized " * 30)
    result = compact(history, CLAUDE, budget, summarizer=summarizer)
    assert result.report.fits and cost.history(result.view) <= budget
    rungs = [(r.rung, r.skipped is None) for r in result.report.rungs]
    assert rungs == [("elision", True), ("image drop", True), ("snapshot", False), ("summarization", True), ("snapshot", True)]
    ids = [m.id for m in result.view]
    summary = next(i for i, m in enumerate(result.view) if m.id.startswith("summary-"))
    assert ids[summary + 1].startswith("snapshot-") and result.pages
    summarized = result.report.rung("summarization")
    drawn = result.report.rungs[-1]
    assert summarized.first_message == 3 and summarized.last_message < len(history)
    assert "oldest" in summarized.note and f"on {len(result.pages)} pages" in summarized.note
    # The summary stands for messages 3..split and names their range; the pages draw
    # exactly the (elided) messages after it, up to the verbatim tail.
    shaken = list(elide(history, cost).view)
    split = summarized.last_message
    assert f"messages:{shaken[2].id}..{shaken[split - 1].id}" in result.view[summary].text
    tail = result.view[summary + 2 :]
    assert list(tail) == shaken[len(shaken) - len(tail) :]
    middle = shaken[split : len(shaken) - len(tail)]
    assert drawn.changed == len(middle) > 0
    text = "".join(serialize_message(m, drawn.result_cap or None) for m in middle)
    atlas = load_atlas(get_shape(result.pages[0].shape).font)
    assert read_pages(result.pages) == glyphs_to_text(normalize(text, atlas).glyphs, atlas)
    assert not any(middle[0].id in prompt for prompt in prompts)  # what is on pages is not summarized
    # Against the summary alone, which was the answer before: more of the session in sight.
    alone = compact(history, CLAUDE, budget, summarizer=summarizer, policy=CompactionPolicy(rungs=("elision", "image drop", "summarization")))
    assert alone.report.rung("summarization").last_message > split
    # summary_pages=False (a session with recall): the whole middle summarized, deeper.
    deep = compact(history, CLAUDE, budget, summarizer=summarizer, policy=CompactionPolicy(summary_pages=False))
    assert not deep.pages and deep.report.rung("summarization").last_message > split
    assert cost.history(deep.view) < cost.history(result.view)


def test_a_plain_function_is_taken_as_a_summarizer_and_anything_else_is_refused_by_name(tmp_path):
    """``compact(..., summarizer=<a plain function>)`` raised a raw AttributeError (the
    natural first try); so did ``recover`` and ``open_session``."""
    history = generate_session(50_000, seed=1)
    prompts: list[str] = []

    def plain(prompt: str) -> str:
        prompts.append(prompt)
        return "what happened, in short"

    budget = 3_000
    result = compact(history, CLAUDE, budget, summarizer=plain, policy=CompactionPolicy(rungs=("summarization",)))
    assert prompts and result.report.rung("summarization").summarizer_calls == len(prompts)
    assert any("what happened, in short" in m.text for m in result.view)
    measured = CostModel.for_model(CLAUDE).history(history) + 500
    message = f"prompt is too long: {measured} tokens > {measured // 3} maximum"
    too_long = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    prompts.clear()
    assert recover(history, CLAUDE, too_long, summarizer=plain, policy=CompactionPolicy(rungs=("summarization",))).report.fits and prompts
    with glyphpack.open_session(tmp_path / "ws", "c", "a", model="claude-sonnet-4-5", summarizer=plain) as s:
        assert isinstance(s.summarizer, Summarizer) and s.summarizer.fn is plain
    for wrong in (42, object()):
        with pytest.raises(glyphpack.UsageError, match="summarizer must be a glyphpack.Summarizer, a function taking the prompt"):
            compact(history, CLAUDE, budget, summarizer=wrong)


def test_an_error_that_refers_to_itself_is_refused_as_not_too_long_not_raised_raw():
    looped: dict = {"status": 400}
    looped["self"] = looped
    assert parse_overflow(looped) is None
    with pytest.raises(CompactionError, match="not a 'request too long' error"):
        recover(generate_session(5_000, seed=1), CLAUDE, looped)

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert parse_overflow(Unprintable()) is None


def _reasoning(n: int, sealed: bool = True) -> glyphpack.Opaque:
    payload = {"type": "reasoning", "id": f"rs_{n}", "summary": [], **({"encrypted_content": "gAAAA" + "x" * 4_000} if sealed else {})}
    return glyphpack.Opaque("reasoning", payload)


def test_old_reasoning_items_are_the_first_thing_left_out_and_the_newest_stays() -> None:
    """Responses reasoning sent back (with its encrypted content) is counted, and all but
    the newest answer's is left out first; reasoning known by id alone (never sent) and
    the transcript are untouched; an answer of reasoning alone is left out whole."""
    history = [Message("user", (Text("find the parser"),), id="u")]
    for n in range(4):
        content = (_reasoning(n), ToolCall(f"c{n}", "read", {"n": n})) if n != 1 else (_reasoning(n),)
        history.append(Message("assistant", content, id=f"a{n}"))
        if n != 1:
            history.append(Message("tool", (ToolResult(f"c{n}", (Text(f"module {n}"),)),), id=f"r{n}"))
    history.append(Message("assistant", (_reasoning(9, sealed=False), Text("done")), id="a9"))
    cost = CostModel.for_model("gpt-5.4")
    # Counted, at its share of its encrypted text's price (the provider counts the reasoning).
    sealed = history[1].content[0]
    assert isinstance(sealed, glyphpack.Opaque) and sealed.tokens(cost) == math.ceil(cost.text(sealed.payload["encrypted_content"]) / 2.3) > 0
    assert _reasoning(0, sealed=False).tokens(cost) == 0
    result = compact(history, "gpt-5.4", 1, policy=CompactionPolicy(rungs=("reasoning drop",)))
    (report,) = result.report.rungs
    assert report.rung == "reasoning drop" and report.changed == 4
    assert [m.id for m in result.view] == ["u", "a0", "r0", "a2", "r2", "a3", "r3", "a9"]  # a1 held reasoning alone
    assert all(not any(isinstance(b, glyphpack.Opaque) for b in m.content) for m in result.view[:-1])
    assert result.view[-1] == history[-1]  # the newest answer's (here known by id alone) stays
    newest = [*history[:-1], Message("assistant", (_reasoning(5), Text("done")), id="a5")]
    kept = compact(newest, "gpt-5.4", 1, policy=CompactionPolicy(rungs=("reasoning drop",))).view
    assert kept[-1] == newest[-1] and sum(isinstance(b, glyphpack.Opaque) for m in kept for b in m.content) == 1
    # A history without reasoning sent back: the rung is passed over, without a report.
    plain = compact(history[:1], "gpt-5.4", 1, policy=CompactionPolicy(rungs=("reasoning drop", "elision")))
    assert [r.rung for r in plain.report.rungs] == ["elision"]


@pytest.mark.parametrize("where", ["fn", "continues"])
def test_a_summarizer_that_raises_leaves_the_view_as_the_cheaper_rungs_left_it_and_says_why(where):
    """A summary is a side request: a provider's 429 or a bug in the caller's function is
    the rung's failure, reported, not the request's (the proxy answered 500 on every
    request from the threshold on). A summarizer whose window is too small is still the
    caller's error, raised."""
    history = generate_session(50_000, seed=1)
    free = compact(history, CLAUDE, 3_000, policy=CompactionPolicy(rungs=("elision", "image drop")))

    def refused(*args):
        raise RuntimeError("429 Too Many Requests\nretry later")

    ok = lambda *args: "summary"
    summarizer = Summarizer(refused if where == "fn" else ok, continues=refused if where == "continues" else None)
    sent = Sent(tuple(history))
    policy = CompactionPolicy(rungs=("elision", "image drop", "summarization"))
    result = compact(history, CLAUDE, 3_000, summarizer=summarizer, policy=policy, sent=sent)
    what = "the summary request" if where == "fn" else "the summary request that continues the conversation"
    assert result.report.rung("summarization").skipped == f"{what} failed: RuntimeError: 429 Too Many Requests"
    assert result.view == free.view and not result.report.fits
    with pytest.raises(glyphpack.CompactionError, match="a summarizer window of 300 tokens leaves no room for the transcript"):
        compact(history, CLAUDE, 3_000, summarizer=Summarizer(ok, window=300), policy=policy)
