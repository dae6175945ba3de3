"""The compaction rungs' parts, figure by figure: the cost breakdown per category, the
reports' tables and dicts, the free rungs' reports and stubs, the summarizer's bill.
Each case is small and exact, so a changed figure anywhere fails it."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image as PILImage

from glyphpack import CompactionPolicy, Image, LadderReport, Message, RungReport, Text, Thinking, ToolCall, ToolResult
from glyphpack._compaction.cost import BAR_WIDTH, CostModel, token_bars
from glyphpack._compaction.results import Compaction
from glyphpack._compaction.rungs import DROPPED_MARK, ELIDED_MARK, STUB_ARGUMENTS_WIDTH, cap_images, drop_reasoning, elide
from glyphpack._history.messages import Opaque
from glyphpack._history.recall import arguments_ref, recall_hint
from glyphpack._history.pricing import MESSAGE_OVERHEAD


def png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("L", (width, height), 255).save(buffer, "PNG")
    return buffer.getvalue()


COST = CostModel.for_model("claude-sonnet-4-5")


def test_the_breakdown_puts_each_block_in_its_category_and_a_results_images_under_images():
    shot = Image("image/png", png(400, 300))
    result = ToolResult("c1", (Text("the screen shows a login form"), shot))
    messages = [
        Message("system", (Text("you are terse"),)),
        Message("user", (Text("open the page"), Image("image/png", png(200, 100)))),
        Message("assistant", (Thinking("the user wants the page open"), Text("opening"), ToolCall("c1", "open", {"url": "https://x"}))),
        Message("tool", (result,)),
        Message("assistant", (Text("done"),)),
    ]
    image_small, image_shot = COST.image(messages[1].content[1]), COST.image(shot)  # type: ignore[arg-type]
    assert image_small != image_shot and image_small > 0
    expected = {
        "system": MESSAGE_OVERHEAD + COST.text("you are terse"),
        "user": MESSAGE_OVERHEAD + COST.text("open the page"),
        "assistant": 3 * MESSAGE_OVERHEAD + COST.text("opening") + COST.text("done"),  # the tool message's overhead counts as the assistant's
        "thinking": COST.text("the user wants the page open"),
        "tool calls": COST.block(messages[2].content[2]),
        "tool results": COST.block(result) - image_shot,
        "images": image_small + image_shot,
    }
    breakdown = COST.breakdown(messages)
    assert breakdown == expected
    assert sum(breakdown.values()) == COST.history(messages)


def test_the_breakdown_of_nothing_is_zero_in_every_category():
    breakdown = COST.breakdown([])
    assert set(breakdown) == set(COST.breakdown([Message("user", (Text("x"),))])) and set(breakdown.values()) == {0}


def test_token_bars_give_the_count_the_share_and_a_bar_of_its_share():
    assert token_bars([("user", 250), ("tool results", 750)], 1_000) == [
        "user                 250  25.0%  " + "█" * (BAR_WIDTH // 4),
        "tool results         750  75.0%  " + "█" * (3 * BAR_WIDTH // 4),
    ]
    assert token_bars([("system", 0)], 0) == ["system                 0   0.0%  "]  # no division by zero


def test_another_estimator_keeps_the_prices_only_when_the_rates_are_the_same():
    model = CostModel(COST.profile)
    message = Message("user", (Text("x" * 400),))
    price = model.message(message)
    # Another overhead, the same rates: the prices carry over (no message's price depends on it).
    same_rates = model.with_estimator(model.estimator.with_overhead(model.estimator.overhead + 7))
    assert same_rates._memo is model._memo and same_rates._image_memo is model._image_memo
    assert same_rates.message(message) == price
    # Other rates: priced afresh, so the price changes with them.
    halved = model.with_estimator(model.estimator.scaled(0.5))
    assert halved._memo is not model._memo and halved._memo == {} and halved._image_memo is model._image_memo
    assert halved.message(message) == MESSAGE_OVERHEAD + model.estimator.scaled(0.5).estimate("x" * 400) < price
    assert model.message(message) == price  # the original's prices untouched
    # An exact tokenizer stays.
    exact = CostModel(COST.profile, tokenizer=len).with_estimator(model.estimator)
    assert exact.tokenizer is len and exact.text("abcd") == 4


def test_a_ladder_reports_lines_are_a_header_a_row_per_rung_and_its_message():
    rung = RungReport(rung="elision", tokens_before=12_345, tokens_after=2_345, changed=3, seconds=0.25)
    report = LadderReport(budget=5_000, tokens_before=12_345, tokens_after=2_345, fits=True, rungs=(rung,), message="fits")
    assert report.lines() == [
        "rung               before      after      freed  changed  pages  seconds  details",
        "elision            12,345      2,345     10,000        3      0    0.250  3 tool results and arguments elided",
        "fits",
    ]
    as_dict = report.as_dict()
    assert as_dict["rungs"][0]["details"] == "3 tool results and arguments elided" and as_dict["rungs"][0]["tokens_before"] == 12_345
    assert as_dict["budget"] == 5_000 and as_dict["message"] == "fits"
    json.dumps(as_dict)  # a report goes out as JSON


def test_keep_geometry_pins_the_first_pages_shape_and_size():
    import glyphpack

    pages = (*glyphpack.render("first page text " * 400, model="claude-sonnet-4-5", shape="6x13"),
             *glyphpack.render("x", model="claude-sonnet-4-5", shape="5x8"))
    assert pages[0].shape != pages[-1].shape
    report = LadderReport(budget=1, tokens_before=1, tokens_after=1, fits=True)
    policy = Compaction(view=(), report=report, pages=pages).keep_geometry(CompactionPolicy(protect_turns=5))
    assert policy.shape == pages[0].shape and policy.page_size == (pages[0].width, pages[0].full_height)
    assert policy.protect_turns == 5
    assert Compaction(view=(), report=report).keep_geometry(CompactionPolicy(protect_turns=5)) == CompactionPolicy(protect_turns=5)


def reasoning(n: int) -> Opaque:
    return Opaque("reasoning", {"type": "reasoning", "id": f"rs_{n}", "encrypted_content": "e" * 800, "summary": []})


def test_reasoning_drop_keeps_the_newest_answers_items_and_reports_its_figures():
    messages = [
        Message("user", (Text("task"),)),
        Message("assistant", (reasoning(1), ToolCall("c1", "ls", {}))),
        Message("tool", (ToolResult("c1", (Text("a b"),)),)),
        Message("assistant", (reasoning(2),)),  # nothing else: left out whole
        Message("user", (Text("go on"),)),
        Message("assistant", (reasoning(3), Text("answer"))),
    ]
    result = drop_reasoning(messages, COST)
    assert [m.id for m in result.view] == [messages[i].id for i in (0, 1, 2, 4, 5)]
    assert result.view[1].content == (ToolCall("c1", "ls", {}),) and result.view[-1] is messages[-1]
    report = result.report
    assert (report.rung, report.changed) == ("reasoning drop", 2)
    assert (report.tokens_before, report.tokens_after) == (COST.history(messages), COST.history(result.view))
    assert report.tokens_after < report.tokens_before and 0 <= report.seconds < 5


def test_reasoning_drop_without_an_answer_drops_every_item():
    # No answer at all: no newest to keep, so every item goes (the second message too).
    messages = [Message("user", (Text("task"), reasoning(1))), Message("user", (reasoning(2),))]
    result = drop_reasoning(messages, COST)
    assert result.report.changed == 2 and result.view == (messages[0].with_content((Text("task"),)),)
    assert drop_reasoning([], COST).view == ()


def test_a_long_calls_arguments_become_a_stub_naming_its_length_and_ref_with_a_preview():
    body = "line of the new file\n" * 80
    call = ToolCall("write-1", "write_file", {"path": "notes.md", "content": body})
    messages = [
        Message("user", (Text("write it"),)),
        Message("assistant", (call,)),
        Message("tool", (ToolResult("write-1", (Text("ok"),)),)),
        *[m for n in range(3) for m in (Message("user", (Text(f"turn {n}"),)), Message("assistant", (Text("ok"),)))],
    ]
    result = elide(messages, COST, CompactionPolicy(elide_min_chars=1_000))
    stub = result.view[1].tool_calls[0].arguments["elided_by_glyphpack"]
    preview = json.dumps(call.arguments, ensure_ascii=False)[: 2 * STUB_ARGUMENTS_WIDTH - 3] + "..."
    assert stub == f'{ELIDED_MARK}{len(call.arguments_json):,} chars of arguments; {recall_hint(arguments_ref("write-1"))}] {preview}'
    assert result.report.changed == 1


def test_capping_images_drops_the_oldest_first_until_the_limit_and_reports_it():
    def shot(n):
        return Image("image/png", png(100 + n, 50))

    messages = [
        Message("user", (Text("compare"), shot(1), shot(2))),
        Message("assistant", (ToolCall("c1", "screenshot", {}),)),
        Message("tool", (ToolResult("c1", (Text("screen"), shot(3), shot(4))),)),
        Message("user", (shot(5),)),
    ]
    result = cap_images(messages, COST, 2)
    # The first message's two go, then the result's two together (a block's images go
    # together, so one is left where two were allowed).
    assert [b for m in result.view for b in m.images] == list(messages[3].images)
    assert result.view[0].content[1].text.startswith(DROPPED_MARK + "image/png, 101x50")  # type: ignore[union-attr]
    assert result.view[3] is messages[3]
    report = result.report
    assert (report.rung, report.changed, report.note) == ("image drop", 4, "a request may carry at most 2 images")
    assert (report.tokens_before, report.tokens_after) == (COST.history(messages), COST.history(result.view)) and 0 <= report.seconds < 5
    exact = cap_images(messages, COST, 5)
    assert exact.view == tuple(messages) and exact.report.changed == 0
    one_over = cap_images(messages, COST, 4)
    assert one_over.report.changed == 1 and list(one_over.view[0].images) == [messages[0].images[1]] and one_over.view[1:] == tuple(messages[1:])


# --------------------------------------------------------------- the SDK summarizer


def sdk(limit: int = 1_000_000, script_text: str = "unused", **options):
    import glyphpack
    from glyphpack.testing import FakeModel, Turn

    fake = FakeModel([Turn(text=script_text)], limit=limit)
    return fake, glyphpack.sdk_summarizer(fake.client("anthropic"), "claude-haiku-4-5", **options)


def request_text(body: dict) -> str:
    return "".join(block["text"] for message in body["messages"] for block in message["content"] if block["type"] == "text")


def test_a_summary_request_names_its_model_caps_its_reply_and_adds_up_the_bill():
    from glyphpack.testing.fake import count_tokens, fake_summary

    fake, summarizer = sdk(output_tokens=777, service_tier="standard_only")
    prompts = [summarizer.instructions + f"[user] task {n}\n" for n in (1, 2)]
    assert [summarizer.fn(p) for p in prompts] == [fake_summary(p) for p in prompts]
    first = fake.requests[0]
    assert (first["model"], first["max_tokens"], first["service_tier"]) == ("claude-haiku-4-5", 777, "standard_only")
    assert request_text(first) == prompts[0]
    fn = summarizer.fn
    assert (fn.calls, fn.billed_input, fn.billed_output) == (2, sum(count_tokens(b) for b in fake.requests), 100)  # type: ignore[attr-defined]
    assert summarizer.output_reserve == 777


def test_a_prompt_refused_as_too_long_is_cut_at_a_line_into_halves_that_each_carry_the_instructions():
    from glyphpack.testing.fake import count_tokens, fake_summary

    fake, summarizer = sdk()
    lines = [f"[user] step {n:03d} of the work\n" + ("\n" if n == 30 else "") for n in range(40)]
    transcript = "".join(lines)  # holds a blank line past its middle: the instructions end at the first one
    prompt = summarizer.instructions + transcript
    fake.limit = count_tokens({"t": prompt}) - 5  # the whole prompt is refused; each half fits
    summary = summarizer.fn(prompt)
    assert fake.statuses == [400, 200, 200]
    halves = [request_text(body) for body in fake.requests[1:]]
    head = summarizer.instructions.rstrip("\n") + "\n\n"
    assert all(h.startswith(head) for h in halves)
    first, second = (h[len(head):] for h in halves)
    assert first + second == transcript and first.endswith("\n")
    assert first == transcript[: transcript.rfind("\n", 0, len(transcript) // 2) + 1]
    assert summary == "\n".join(fake_summary(h).strip() for h in halves)


def test_a_transcript_without_a_line_break_is_halved_at_its_middle():
    from glyphpack.testing.fake import count_tokens

    fake, summarizer = sdk()
    transcript = "[user] " + "w" * 2_001
    prompt = summarizer.instructions + transcript
    fake.limit = count_tokens({"t": prompt}) - 5
    summarizer.fn(prompt)
    head = summarizer.instructions.rstrip("\n") + "\n\n"
    assert [len(request_text(b)) - len(head) for b in fake.requests[1:]] == [len(transcript) // 2, len(transcript) - len(transcript) // 2]


def test_a_prompt_still_too_long_after_three_halvings_is_a_compaction_error_naming_the_model():
    from glyphpack import CompactionError
    from glyphpack._compaction.sdk_summary import MAX_SPLITS

    fake, summarizer = sdk(limit=1)
    with pytest.raises(CompactionError, match=r"claude-haiku-4-5 still calls a summary prompt of [\d,]+ characters too long"):
        summarizer.fn(summarizer.instructions + "".join(f"[user] line {n}\n" for n in range(64)))
    assert len(fake.requests) == MAX_SPLITS + 1 == 4  # the first half of each halving, depth first, until none is left


def test_an_answer_without_text_is_a_compaction_error_naming_the_model():
    from glyphpack import CompactionError

    _, summarizer = sdk(script_text="")
    with pytest.raises(CompactionError, match="claude-haiku-4-5 answered a summary request with no text"):
        summarizer.fn("not a summary prompt the fake knows, so it answers its script: nothing")


def test_a_continued_summary_repeats_the_sent_conversation_and_its_tools_then_asks():
    from glyphpack import Sent

    fake, summarizer = sdk(continues=True, output_tokens=500)
    assert summarizer.continues is not None
    sent = Sent((Message("user", (Text("the task"),)), Message("assistant", (Text("working"),))), prefix=0)
    tool = {"name": "ls", "description": "list", "input_schema": {"type": "object", "properties": {}}}
    summarizer.continues(sent, "summarize now")
    summarizer.continues(Sent(sent.messages, tools=(tool,)), "summarize now")
    bare, with_tools = fake.requests
    assert "tools" not in bare and with_tools["tools"] == [tool]
    assert bare["model"] == "claude-haiku-4-5" and bare["max_tokens"] == 500
    assert [m["role"] for m in bare["messages"]] == ["user", "assistant", "user"] and request_text(bare).endswith("summarize now")
    assert summarizer.fn.calls == 2  # type: ignore[attr-defined]
