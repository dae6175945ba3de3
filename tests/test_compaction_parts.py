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
from glyphpack._history.pricing import MESSAGE_OVERHEAD
from glyphpack._history.recall import arguments_ref, recall_hint


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


@pytest.mark.slow  # drives a summary over a long history (about 1.6 s)
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


# --------------------------------------------------------------- the summarization rung


EXACT = CostModel(COST.profile, tokenizer=len)  # a character a token: every figure below is exact


def chat(turns: int, size: int = 100) -> list[Message]:
    out = [Message("system", (Text("be brief"),)), Message("user", (Text("the task"),))]
    for n in range(turns):
        out += [Message("assistant", (Text(f"a{n} " + "x" * size),)), Message("user", (Text(f"u{n} " + "y" * size),))]
    return out


def counting(answer: str = "short summary"):
    from glyphpack import Summarizer

    prompts: list[str] = []

    def fn(prompt: str) -> str:
        prompts.append(prompt)
        return answer

    return prompts, Summarizer(fn, window=100_000, output_reserve=200)


def test_chunks_pack_texts_up_to_the_limit_and_cut_a_huge_one_into_pieces():
    from glyphpack._compaction.summarize import chunks

    assert chunks(["aaa", "bbb", "cccc"], EXACT, 6) == ["aaabbb", "cccc"]  # exactly the limit fits
    assert chunks(["aaa", "bbbb"], EXACT, 6) == ["aaa", "bbbb"]
    assert chunks(["x" * 25, "yy"], EXACT, 10) == ["x" * 10, "x" * 10, "x" * 5 + "yy"]
    assert chunks(["x" * 10], EXACT, 10) == ["x" * 10]  # as long as the limit: one piece
    assert chunks([], EXACT, 10) == []


def test_a_piece_of_a_huge_text_shrinks_until_its_dense_part_fits():
    from glyphpack._compaction.summarize import chunks

    dense = CostModel(COST.profile, tokenizer=lambda text: len(text) + 4 * text.count("W"))  # a W costs five
    text = "W" * 4 + "a" * 40
    pieces = chunks([text], dense, 10)
    assert "".join(pieces) == text and all(dense.text(p) <= 10 for p in pieces)
    assert pieces[0] == "WW"  # 2 of the 10 characters the first guess took fit
    assert chunks(["W", "ab"], dense, 4) == ["W", "ab"]  # a character over the limit alone still goes, whole, and nothing empty after it


def test_summarizing_nothing_reports_why_and_returns_the_messages():
    from glyphpack._compaction.summarize import summarize

    messages = chat(0)
    _, summarizer = counting()
    result = summarize(messages, EXACT, 10, summarizer)
    assert result.view == tuple(messages)
    report = result.report
    assert (report.rung, report.skipped, report.tokens_before, report.tokens_after) == (
        "summarization", "nothing to summarize", EXACT.history(messages), EXACT.history(messages))
    assert 0 <= report.seconds < 5


def test_the_summary_replaces_the_earliest_cut_that_fits_the_budget_exactly():
    from glyphpack._compaction.summarize import summarize

    messages = chat(6)
    costs = [EXACT.message(m) for m in messages]
    _, summarizer = counting()
    head_cost, allowance = sum(costs[:2]), 200  # max(SUMMARY_MIN_TOKENS, min(output_reserve, a fifth))
    # Cuts are every message boundary after the task; the one at 6 fits a budget of exactly its size.
    budget = head_cost + allowance + sum(costs[6:])
    fitted = summarize(messages, EXACT, budget, summarizer, tail_tokens=0)
    assert (fitted.report.first_message, fitted.report.last_message) == (3, 6)
    one_less = summarize(messages, EXACT, budget - 1, summarizer, tail_tokens=0)
    assert one_less.report.last_message == 7
    # Nothing fits: the last cut (the newest round stays).
    assert summarize(messages, EXACT, 1, summarizer, tail_tokens=0).report.last_message == len(messages) - 1
    # A budget that holds everything still summarizes at least one message after the task.
    roomy = summarize(messages, EXACT, 10**6, summarizer, tail_tokens=0)
    assert (roomy.report.first_message, roomy.report.last_message) == (3, 3)
    # tail_tokens given: kept verbatim however large the budget's default tail would be.
    kept = summarize(messages, EXACT, 1, summarizer, tail_tokens=sum(costs[-4:]))
    assert kept.report.last_message == len(messages) - 4


def test_the_summary_message_names_its_range_and_its_digest_and_the_report_its_figures():
    import hashlib

    from glyphpack._compaction.summarize import summarize
    from glyphpack._history.recall import short_range_ref

    messages = chat(6)
    prompts, summarizer = counting("  the summary  ")
    result = summarize(messages, EXACT, 1, summarizer, tail_tokens=0)
    note = result.view[2]
    ref = short_range_ref(messages, 2, 12)
    assert note.text == f"[glyphpack summary of messages 3-13, {recall_hint(ref)}]\nthe summary"
    assert note.id == "summary-" + hashlib.sha256(b"the summary").hexdigest()[:16] and note.role == "user"
    assert result.view[:2] == tuple(messages[:2]) and result.view[3:] == tuple(messages[13:])
    report = result.report
    assert (report.changed, report.summary_tokens, report.summarizer_calls, report.ref) == (11, len("the summary"), 1, ref)
    assert (report.tokens_before, report.tokens_after) == (EXACT.history(messages), EXACT.history(result.view))
    assert prompts == [summarizer.instructions + "".join(serialize(m) for m in messages[2:13])]


def serialize(message: Message) -> str:
    from glyphpack._compaction.snapshot import serialize_message

    return serialize_message(message)


@pytest.mark.parametrize(("length", "calls", "summary"), [
    (99, 2, "s" * 99 + "\n" + "s" * 99),  # two summaries of 99 and their line breaks: exactly the allowance of 200
    (150, 3, "s" * 150),  # two of 150 do not fit: summarized again, once, into one
])
def test_summaries_of_chunks_are_joined_by_lines_and_summarized_again_until_they_fit(length, calls, summary):
    from glyphpack import Summarizer
    from glyphpack._compaction.summarize import SUMMARIZER_PROMPT_SLACK, chunks, summarize

    messages = chat(12, size=300)
    instructions = "Sum up.\n\n"
    limit = 5_000
    assert len(chunks([serialize(m) for m in messages[2:25]], EXACT, limit)) == 2  # the middle goes in two chunks
    prompts: list[str] = []

    def fn(prompt: str) -> str:
        prompts.append(prompt)
        return " " + "s" * length + " "

    window = 200 + len(instructions) + SUMMARIZER_PROMPT_SLACK + limit
    result = summarize(messages, EXACT, 1, Summarizer(fn, window=window, output_reserve=200, instructions=instructions), tail_tokens=0)
    assert result.report.summarizer_calls == len(prompts) == calls
    assert result.view[2].text.split("]\n", 1)[1] == summary
    if calls == 3:
        assert prompts[2] == instructions + ("s" * length + "\n") * 2


def test_a_summary_holding_a_lone_surrogate_is_kept_and_named_by_its_digest():
    import hashlib

    from glyphpack._compaction.summarize import summarize

    _, summarizer = counting("half a pair: \ud800")
    note = summarize(chat(4), EXACT, 1, summarizer, tail_tokens=0).view[2]
    assert note.text.endswith("half a pair: \ud800")
    assert note.id == "summary-" + hashlib.sha256("half a pair: \ud800".encode("utf-8", "surrogatepass")).hexdigest()[:16]


def test_a_summarizer_window_with_no_room_left_is_refused_on_its_boundary():
    from glyphpack import CompactionError, Summarizer
    from glyphpack._compaction.summarize import SUMMARIZER_MIN_ROOM, SUMMARIZER_PROMPT_SLACK, summarize

    messages = chat(4)
    instructions = "Sum up.\n\n"
    fits = SUMMARIZER_MIN_ROOM + 200 + len(instructions) + SUMMARIZER_PROMPT_SLACK
    summarize(messages, EXACT, 1, Summarizer(lambda p: "ok", window=fits, output_reserve=200, instructions=instructions), tail_tokens=0)
    with pytest.raises(CompactionError, match=f"a summarizer window of {fits - 1:,} tokens leaves no room for the transcript"):
        summarize(messages, EXACT, 1, Summarizer(lambda p: "ok", window=fits - 1, output_reserve=200, instructions=instructions), tail_tokens=0)


class BilledFn:
    """A summarizer function that says what its provider billed, as ``sdk_summarizer``'s does."""

    def __init__(self) -> None:
        self.billed_input, self.billed_output = 1_000, 70  # from earlier calls: not this rung's

    def __call__(self, prompt: str) -> str:
        self.billed_input += 300
        self.billed_output += 20
        return "billed summary"


def test_the_report_bills_only_this_rungs_summarizer_calls():
    from glyphpack import Summarizer
    from glyphpack._compaction.summarize import summarize

    report = summarize(chat(4), EXACT, 1, Summarizer(BilledFn(), output_reserve=200), tail_tokens=0).report
    assert (report.summarizer_input_tokens, report.summarizer_output_tokens) == (300, 20)
    assert "billed 300 in, 20 out" in report.details
    plain = summarize(chat(4), EXACT, 1, Summarizer(lambda p: "free", output_reserve=200), tail_tokens=0).report
    assert (plain.summarizer_input_tokens, plain.summarizer_output_tokens) == (0, 0) and "billed" not in plain.details


def test_a_continued_summary_instruction_says_what_to_keep_and_adds_what_was_not_sent():
    from glyphpack import Sent
    from glyphpack._compaction.summarize import continued_instruction

    messages = chat(4)
    messages[8] = Message("assistant", (Text("line one\nline two " + "k" * 200),))
    _, summarizer = counting()
    sent = Sent(tuple(messages[:5]))
    instruction = continued_instruction(messages, 2, 8, sent, summarizer)
    keep = serialize(messages[8]).strip().replace("\n", " ")[:120]
    assert instruction == "\n\n".join([
        summarizer.instructions.strip(),
        "Summarize the conversation above, from after the task at its start, for the agent to continue the work "
        "from your summary: it will stand in place of those messages.",
        f"The newest turns, from the message that begins {keep!r}, stay as they are after your summary: leave them out.",
        "Include these newer messages too:\n\n" + "".join(serialize(m) for m in messages[5:8]),
        "Answer with the summary only, as text: no tool calls.",
    ])
    # Everything sent already, the range ending at the end: neither a part to keep nor one to add.
    whole = continued_instruction(messages, 2, len(messages), Sent(tuple(messages)), summarizer)
    assert whole is not None and "newest turns" not in whole and "Include these" not in whole
    assert continued_instruction(messages, 2, 8, Sent(()), summarizer) is None
    assert continued_instruction(messages, 2, 8, Sent((Message("user", (Text("elsewhere"),)),)), summarizer) is None


def test_a_continued_summary_is_asked_only_when_it_fits_the_summarizers_window():
    from glyphpack import Sent, Summarizer
    from glyphpack._compaction.summarize import SUMMARIZER_PROMPT_SLACK, continued_instruction, continued_summary

    messages = chat(4)
    sent = Sent(tuple(messages[:7]))
    asked: list[str] = []

    def continues(s: Sent, instruction: str) -> str:
        asked.append(instruction)
        return "  continued  "

    probe = Summarizer(lambda p: "", output_reserve=200, continues=continues)
    instruction = continued_instruction(messages, 2, 8, sent, probe)
    assert instruction is not None
    needed = EXACT.history(sent.messages) + EXACT.estimator.overhead + len(instruction) + SUMMARIZER_PROMPT_SLACK + 200
    at = Summarizer(lambda p: "", window=needed, output_reserve=200, continues=continues)
    assert continued_summary(messages, 2, 8, EXACT, at, sent) == "continued" and asked == [instruction]
    under = Summarizer(lambda p: "", window=needed - 1, output_reserve=200, continues=continues)
    assert continued_summary(messages, 2, 8, EXACT, under, sent) is None and len(asked) == 1
    assert continued_summary(messages, 2, 8, EXACT, at, None) is None
    blank = Summarizer(lambda p: "", window=needed, output_reserve=200, continues=lambda s, i: "   ")
    assert continued_summary(messages, 2, 8, EXACT, blank, sent) is None


# --------------------------------------------------------------- the free rungs' stubs


def test_protection_starts_at_the_newest_user_turns_or_the_newest_rounds_of_a_long_loop():
    from glyphpack._compaction.rungs import PROTECTED_ROUNDS, protected_from

    system = Message("system", (Text("s"),))
    one_turn = [system, Message("user", (Text("u"),)), Message("assistant", (Text("a"),))]
    assert protected_from(one_turn, 2) == 0  # fewer turns than protected: all of them
    two_turns = [*one_turn, Message("user", (Text("v"),)), Message("assistant", (Text("b"),))]
    assert protected_from(two_turns, 2) == 1 and protected_from(two_turns, 1) == 3
    assert protected_from(two_turns, 0) == len(two_turns)

    def loop(rounds: int) -> list[Message]:
        out = [system, Message("user", (Text("fix it"),))]
        for n in range(rounds):
            out += [Message("assistant", (ToolCall(f"c{n}", "run", {}),)), Message("tool", (ToolResult(f"c{n}", (Text("ok"),)),))]
        return out

    assert protected_from(loop(PROTECTED_ROUNDS), 2) == 0 and protected_from(loop(PROTECTED_ROUNDS), 1) == 1
    long = loop(PROTECTED_ROUNDS + 1)
    assert protected_from(long, 1) == 4  # the 8 newest assistant rounds, from the second
    assert [m.role for m in long[4:]].count("assistant") == PROTECTED_ROUNDS


def old_and_new(*old: Message) -> list[Message]:
    """``old`` in a first turn, then two turns that protection keeps."""
    return [Message("user", (Text("task"),)), *old, *[m for n in range(2) for m in (Message("user", (Text(f"turn {n}"),)), Message("assistant", (Text("ok"),)))]]


def test_an_elided_result_names_its_call_its_size_its_lines_and_its_ref():
    long_text = "first line\n" + "é" * 1_500 + "\nlast line"
    call = ToolCall("c1", "read_file", {"path": "src/été.py", "note": "n" * 80})
    orphan = ToolResult("gone", (Text(long_text),))  # its call was compacted away earlier
    messages = old_and_new(
        Message("assistant", (call,)),
        Message("tool", (ToolResult("c1", (Text(long_text),)),)),
        Message("tool", (orphan,)),
    )
    result = elide(messages, COST, CompactionPolicy(elide_min_chars=1_000))
    preview = json.dumps(call.arguments, ensure_ascii=False)[: STUB_ARGUMENTS_WIDTH - 3] + "..."
    assert preview.startswith('{"path": "src/été.py"')
    assert result.view[2].tool_results[0].text == (
        f'{ELIDED_MARK}result of read_file({preview}), {len(long_text):,} chars, 3 lines; {recall_hint("c1")}]'
    )
    assert result.view[3].tool_results[0].text == f'{ELIDED_MARK}result of a tool call, {len(long_text):,} chars, 3 lines; {recall_hint("gone")}]'
    assert result.report.changed == 2 and result.view[1] is messages[1]
    assert (result.report.rung, result.report.tokens_before, result.report.tokens_after) == (
        "elision", COST.history(messages), COST.history(result.view))
    assert 0 <= result.report.seconds < 5


def test_a_short_arguments_preview_is_whole_up_to_its_width():
    from glyphpack._compaction.rungs import _short

    exact = {"k": "v" * (STUB_ARGUMENTS_WIDTH - 9)}
    assert len(json.dumps(exact)) == STUB_ARGUMENTS_WIDTH and _short(exact) == json.dumps(exact)
    over = {"k": "v" * (STUB_ARGUMENTS_WIDTH - 8)}
    assert _short(over) == json.dumps(over)[: STUB_ARGUMENTS_WIDTH - 3] + "..." and len(_short(over)) == STUB_ARGUMENTS_WIDTH


def test_elision_runs_on_both_sides_of_its_limits():
    def result_of(chars: int, error: bool = False) -> list[Message]:
        return [Message("assistant", (ToolCall(f"c{chars}{error}", "run", {}),)),
                Message("tool", (ToolResult(f"c{chars}{error}", (Text("r" * chars),), is_error=error),))]

    messages = old_and_new(*result_of(999), *result_of(1_000), *result_of(5_000, error=True))
    view = elide(messages, COST, CompactionPolicy(elide_min_chars=1_000)).view
    assert [view[i].tool_results[0].text.startswith(ELIDED_MARK) for i in (2, 4, 6)] == [False, True, False]
    seen: list[tuple[str, str | None]] = []

    def remarkable(result, call):
        seen.append((result.call_id, call.name if call else None))
        return result.call_id == "c1000False"

    kept = elide(messages, COST, CompactionPolicy(elide_min_chars=1_000, remarkable=remarkable))
    assert kept.report.changed == 0 and ("c1000False", "run") in seen
    # A call's arguments exactly at the limit are elided; one character less are not.
    arguments = {"body": "b" * 100}
    width = len(ToolCall("w", "write", arguments).arguments_json)
    calls = old_and_new(Message("assistant", (ToolCall("w", "write", arguments),)), Message("tool", (ToolResult("w", (Text("ok"),)),)))
    assert elide(calls, COST, CompactionPolicy(elide_min_chars=width)).report.changed == 1
    assert elide(calls, COST, CompactionPolicy(elide_min_chars=width + 1)).report.changed == 0


def test_the_first_protected_message_is_kept_even_when_it_carries_a_long_result():
    # Anthropic's shape: a tool result in a user message, which starts a turn.
    messages = [
        Message("user", (Text("task"),)),
        Message("assistant", (ToolCall("c1", "run", {}),)),
        Message("user", (ToolResult("c1", (Text("r" * 2_000),)), Text("and now this"))),
        Message("assistant", (Text("ok"),)),
    ]
    assert elide(messages, COST, CompactionPolicy(protect_turns=1)).report.changed == 0
    assert elide(messages, COST, CompactionPolicy(protect_turns=0)).report.changed == 1


def test_dropped_images_become_stubs_numbered_in_their_message_with_their_refs():
    from glyphpack._compaction.rungs import drop_images
    from glyphpack._history.recall import image_ref

    pasted, one, two = png(30, 20), png(40, 10), png(50, 60)
    message = Message("user", (Image("image/png", pasted), Text("see"), Image("image/png", ref="file-abc")))
    results = Message("tool", (ToolResult("c1", (Text("two shots"), Image("image/png", one), Image("image/png", two))),))
    messages = old_and_new(message, Message("assistant", (ToolCall("c1", "shoot", {}),)), results)
    dropped = drop_images(messages, COST, note="why")
    stubs = [b.text for b in dropped.view[1].content if isinstance(b, Text)]
    assert stubs == [
        f"{DROPPED_MARK}image/png, 30x20, {len(pasted):,} bytes; {recall_hint(image_ref(message.id, 1))}]",
        "see",
        f"{DROPPED_MARK}image/png, file-abc; {recall_hint(image_ref(message.id, 2))}]",
    ]
    result = dropped.view[3].tool_results[0]
    assert [b.text for b in result.content] == [  # type: ignore[union-attr]
        "two shots",
        f"{DROPPED_MARK}image/png, 40x10, {len(one):,} bytes; {recall_hint(image_ref(results.id, 1))}]",
        f"{DROPPED_MARK}image/png, 50x60, {len(two):,} bytes; {recall_hint(image_ref(results.id, 2))}]",
    ]
    report = dropped.report
    assert (report.rung, report.changed, report.note) == ("image drop", 4, "why") and 0 <= report.seconds < 5
    assert (report.tokens_before, report.tokens_after) == (COST.history(messages), COST.history(dropped.view))
    # The first protected message keeps its image.
    protected = [Message("user", (Text("task"),)), Message("assistant", (Text("a"),)), Message("user", (Image("image/png", one),))]
    assert drop_images(protected, COST, protect_turns=1).report.changed == 0
    assert drop_images(protected, COST, protect_turns=0).report.changed == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fidelity": "sharp"}, "fidelity must be one of exact, gist, dense, not 'sharp'"),
        ({"rungs": ("snapshot", "elision")}, "rungs ('snapshot', 'elision'): the ladder runs each rung once, cheapest first "
         "(reasoning drop, elision, image drop, snapshot, summarization, tail cut); give them in that order"),
        ({"summary_pages": 1}, "summary_pages must be True or False, not 1"),
        ({"protect_turns": -1}, "protect_turns must be a non-negative int, not -1"),
        ({"protect_turns": 1.5}, "protect_turns must be a non-negative int, not 1.5"),
        ({"tail_tokens": -1}, "tail_tokens must be a non-negative int, not -1"),
        ({"tail_tokens": "9"}, "tail_tokens must be a non-negative int, not '9'"),
        ({"elide_min_chars": -1}, "elide_min_chars must be a non-negative int, not -1"),
        ({"elide_min_chars": 2.0}, "elide_min_chars must be a non-negative int, not 2.0"),
    ],
)
def test_a_policy_refuses_each_bad_field_by_name(options, message):
    from glyphpack import UsageError

    with pytest.raises(UsageError) as raised:
        CompactionPolicy(**options)
    assert str(raised.value) == message


def test_a_policy_takes_the_lowest_values_and_a_tail_of_a_tenth_of_the_budget():
    policy = CompactionPolicy(protect_turns=0, tail_tokens=0, elide_min_chars=0)
    assert policy.tail_for(10**6) == 0
    assert CompactionPolicy(tail_tokens=20_000).tail_for(109_999) == 10_999 and CompactionPolicy().tail_for(10**7) == 20_000
    assert isinstance(CompactionPolicy().tail_for(99), int)


# --------------------------------------------------------------- the snapshot's plan and cut search


def test_a_plan_notes_the_characters_its_shape_lacks_per_script_and_draws_the_middle_in_unifont():
    from glyphpack._compaction.snapshot import _plan

    messages = [
        Message("system", (Text("agent"),)),
        Message("user", (Text("task"),)),
        Message("assistant", (Text("字字字のの plain"),)),
        Message("user", (Text("step"),)),
        Message("assistant", (Text("漢"),)),
        Message("user", (Text("next"),)),
        Message("assistant", (Text("done"),)),
    ]
    dense = CompactionPolicy(fidelity="dense", tail_tokens=0)
    plan = _plan(messages, COST, 1_000, dense, None)
    assert not isinstance(plan, str)
    search, cuts, note = plan
    assert cuts == [3, 4, 5, 6] and search.head == 2
    assert note == "drawn in Unifont: 5x8's font lacks characters of the middle (4 CJK, 2 HIRAGANA)"
    assert (search.policy.shape, search.policy.page_size) == ("unifont", None)
    pinned = _plan(messages, COST, 1_000, CompactionPolicy(fidelity="dense", tail_tokens=0, shape="5x8", page_size=(400, 400)), None)
    assert not isinstance(pinned, str)
    assert pinned[2] == note + "; the pinned geometry changed, so earlier pages are redrawn"
    assert (pinned[0].policy.shape, pinned[0].policy.page_size) == ("unifont", None)
    ascii_only = [m if "字" not in m.text and "漢" not in m.text else Message(m.role, (Text("words"),)) for m in messages]
    plain = _plan(ascii_only, COST, 1_000, dense, None)
    assert not isinstance(plain, str) and plain[2] == "" and plain[0].policy is dense


def test_a_message_no_font_draws_ends_the_middle_before_it():
    from glyphpack._compaction.snapshot import _plan

    messages = [Message("system", (Text("agent"),)), Message("user", (Text("task"),))]
    messages += [Message("assistant" if n % 2 else "user", (Text(f"m{n}"),)) for n in range(8)]
    messages[6] = Message("user", (Text("private \ue000 use"),))
    plan = _plan(messages, COST, 1_000, CompactionPolicy(tail_tokens=0), None)
    assert not isinstance(plan, str) and plan[1] == [3, 4, 5, 6]
    messages[2] = Message("user", (Text("\ue000"),))
    assert _plan(messages, COST, 1_000, CompactionPolicy(tail_tokens=0), None) == "nothing between the head and the newest work kept as text"
    # The head's own end counts as no cut: a middle of one message is the least.
    assert _plan(messages[:4], COST, 1_000, CompactionPolicy(tail_tokens=0), head=3) == "nothing between the head and the newest work kept as text"


def test_a_reader_without_vision_gets_no_plan():
    from glyphpack._compaction.snapshot import _plan

    text_only = CostModel.for_model("deepseek-chat")
    assert _plan([Message("user", (Text("task"),))], text_only, 1_000, CompactionPolicy(), None) == "the reader has no vision"


@pytest.mark.parametrize("fraction", [0.2, 0.25, 0.3])
def test_the_cut_search_past_the_linear_cuts_finds_the_first_cut_that_fits(fraction):
    """With more candidate cuts than ``LINEAR_CUTS``, a binary search and a backtrack
    find the cut; it must be the one pricing every cut in order would find."""
    from glyphpack._compaction.snapshot import LINEAR_CUTS, _plan

    messages = [Message("system", (Text("agent"),)), Message("user", (Text("the task"),))]
    for n in range(90):
        messages += [Message("assistant", (Text(f"step {n}: " + "the work goes on. " * 30),)), Message("user", (Text(f"ok {n}"),))]
    budget = int(COST.history(messages) * fraction)
    plan = _plan(messages, COST, budget, CompactionPolicy(tail_tokens=0, fidelity="dense"), None)
    assert not isinstance(plan, str)
    search, cuts, _ = plan
    start = next(i for i, t in enumerate(cuts) if search._room(t))
    fitting = [t for t in cuts[start:] if search._fits(t) is not None]
    assert fitting and cuts[start:].index(fitting[0]) >= LINEAR_CUTS  # the search goes past the linear part
    assert search.choose(cuts) == fitting[0]


@pytest.mark.parametrize("fraction", [0.08, 0.2])
def test_summary_then_pages_splits_at_the_earliest_turn_whose_rest_fits_as_pages(fraction):
    from glyphpack import Sent, Summarizer, read_pages
    from glyphpack._compaction.snapshot import fits_as_pages
    from glyphpack._compaction.summarize import summarize_then_page

    messages = [Message("system", (Text("agent"),)), Message("user", (Text("the task"),))]
    for n in range(60):
        messages += [Message("assistant", (Text(f"step {n}: " + "the work goes on. " * 30),)), Message("user", (Text(f"ok {n}"),))]
    budget, allowance = int(COST.history(messages) * fraction), 200
    continued: list[str] = []

    def continues(sent: Sent, instruction: str) -> str:
        continued.append(instruction)
        return "the summary, continued"

    summarizer = Summarizer(lambda p: "never asked", output_reserve=200, continues=continues)
    policy = CompactionPolicy(shape="6x13", tail_tokens=0)
    result = summarize_then_page(messages, COST, budget, summarizer, policy, Sent(tuple(messages)))
    assert result is not None and len(continued) == 1  # the conversation as sent was continued
    report, (paged,) = result.report, result.also
    split = report.last_message
    assert report.first_message == 3

    def fits(cut: int) -> bool:
        return fits_as_pages((*messages[:2], *messages[cut:]), COST, budget - allowance, policy)

    assert fits(split) and not fits(split - 1)  # the earliest turn boundary that fits
    assert {p.shape for p in result.pages} == {"6x13"} and result.page_text and read_pages(result.pages).rstrip() == result.page_text.rstrip()
    assert report.note == (
        f"the middle did not fit as pages: its oldest {split - 2} messages summarized, the {paged.changed} after them on {len(result.pages)} pages"
    )
    assert report.tokens_after == paged.tokens_after == COST.history(result.view) and report.tokens_before == COST.history(messages)
    assert 0 <= report.seconds < 30
    assert result.view[2].text.endswith("the summary, continued") and result.view[3].id.startswith("snapshot-")


def test_the_tail_keeps_the_newest_round_and_the_newest_messages_within_its_tokens():
    from glyphpack._compaction.snapshot import tail_cuts

    messages = [Message("user", (Text(f"m{n}"),)) for n in range(6)]
    costs = [10, 20, 30, 40, 50, 60]
    cuts = list(range(7))
    assert tail_cuts(messages, cuts, costs, 0) == [0, 1, 2, 3, 4, 5]  # the newest message stays: the newest round
    assert tail_cuts(messages, cuts, costs, 110) == [0, 1, 2, 3, 4]  # 60 + 50 = 110: exactly the tail
    assert tail_cuts(messages, cuts, costs, 109) == [0, 1, 2, 3, 4, 5]
    assert tail_cuts(messages, cuts, costs, 210) == [0]  # everything is tail: only the empty cut
    assert tail_cuts(messages, cuts, costs, 10**6) == [0]
    # A call still open at the end: the newest round starts at the call.
    open_call = [*messages[:3], Message("assistant", (ToolCall("c1", "run", {}),)), Message("tool", (ToolResult("c1", (Text("r"),)),)),
                 Message("assistant", (ToolCall("c2", "run", {}),))]
    assert tail_cuts(open_call, list(range(7)), costs, 0) == [0, 1, 2, 3, 4, 5]
    assert tail_cuts(open_call[:5] + [Message("assistant", (ToolCall("c3", "run", {}),))], [1, 2, 3, 4, 5], costs, 0) == [1, 2, 3, 4, 5]


def test_the_head_ends_after_the_first_task_a_harness_did_not_write():
    from glyphpack._compaction.snapshot import head_end

    preamble = Message("user", (Text("<environment_context>cwd=/x</environment_context>"),))
    task = Message("user", (Text("fix the bug"),))
    answer = Message("assistant", (Text("ok"),))
    assert head_end([Message("system", (Text("s"),)), preamble, task, answer]) == 3
    assert head_end([Message("system", (Text("s"),)), preamble, answer, preamble]) == 2  # only preambles: the first
    assert head_end([Message("system", (Text("s"),)), answer]) == 2  # no user: everything is head


def test_the_priced_header_names_a_range_at_the_longest_id():
    from glyphpack._compaction.snapshot import SNAPSHOT_HEADER, priced_header, range_note
    from glyphpack._history.recall import range_ref

    messages = [Message("user", (Text("a"),), id="short"), Message("user", (Text("b"),), id="a-much-longer-id"), Message("user", (Text("c"),), id="mid-id")]
    header = priced_header(messages)
    assert header.role == "user" and [b.text for b in header.content] == [SNAPSHOT_HEADER, range_note(range_ref("a-much-longer-id", "a-much-longer-id"))]  # type: ignore[union-attr]
    assert [b.text for b in priced_header([]).content] == [SNAPSHOT_HEADER, range_note(range_ref("", ""))]  # type: ignore[union-attr]


def test_data_urls_in_snapshot_text_are_elided_by_a_marker():
    from glyphpack._compaction.snapshot import serialize_message

    text = serialize_message(Message("user", (Text("see data:image/png;base64," + "A" * 400 + " here"),)))
    assert text == "[user] see [data URL elided] here\n"


def test_the_snapshot_shape_is_the_policys_else_the_readers_for_its_fidelity():
    from glyphpack._compaction.snapshot import snapshot_shape
    from glyphpack._render.shapes import reading_shape

    profile = COST.profile
    assert snapshot_shape(profile, CompactionPolicy(fidelity="dense")).name == "5x8"
    assert snapshot_shape(profile, CompactionPolicy(shape="8x13")).name == "8x13"
    assert snapshot_shape(profile, CompactionPolicy(shape="9x15", fidelity="dense")).name == "9x15"
    exact, gist = (snapshot_shape(profile, CompactionPolicy(fidelity=f)) for f in ("exact", "gist"))
    assert exact == reading_shape(profile, "exact")[0] and gist == reading_shape(profile, "gist")[0]


def test_no_cut_says_which_bound_stopped_it():
    from glyphpack._compaction.snapshot import snapshot

    messages = [Message("system", (Text("agent"),)), Message("user", (Text("the task"),))]
    messages += [Message("assistant" if n % 2 else "user", (Text(f"m{n} " + "words " * 50),)) for n in range(10)]
    skipped = snapshot(messages, COST, 20, CompactionPolicy(tail_tokens=0))
    assert skipped.report.skipped == "no cut fits the budget of 20 tokens with the middle as pages"
    assert skipped.view == tuple(messages) and skipped.report.tokens_after == skipped.report.tokens_before == COST.history(messages)
    assert 0 <= skipped.report.seconds < 5 and skipped.report.rung == "snapshot"


def test_the_empty_text_costs_nothing_and_the_readers_rates_are_its_providers():
    from glyphpack._providers.resolve import resolve, text_estimator
    from glyphpack._providers.text_tokens import DEFAULT_ESTIMATOR

    assert COST.text("") == 0
    openai = resolve("gpt-5.4")  # OpenAI's tokenizer packs text denser: its own rates
    assert CostModel(openai).estimator == text_estimator(openai) != DEFAULT_ESTIMATOR


def long_chat(turns: int = 40) -> list[Message]:
    out = [Message("system", (Text("agent"),)), Message("user", (Text("the task"),))]
    for n in range(turns):
        out += [Message("assistant", (Text(f"step {n}: " + "the work goes on. " * 30),)), Message("user", (Text(f"ok {n}"),))]
    return out


def test_a_snapshot_message_is_the_header_the_pages_and_the_range_note_named_by_its_text():
    import hashlib

    from glyphpack import read_pages
    from glyphpack._compaction.snapshot import SNAPSHOT_HEADER, range_note, snapshot
    from glyphpack._history.recall import short_range_ref

    messages = long_chat()
    result = snapshot(messages, COST, COST.history(messages) // 2, CompactionPolicy(tail_tokens=0, fidelity="dense"))
    report, t = result.report, result.report.last_message
    assert report.skipped is None and report.first_message == 3 and result.pages
    message = result.view[2]
    assert message.id == "snapshot-" + hashlib.sha256(result.page_text.encode()).hexdigest()[:16]
    assert message.content[0] == Text(SNAPSHOT_HEADER) and message.content[-1] == Text(range_note(short_range_ref(messages, 2, t - 1)))
    images = message.content[1:-1]
    assert [(i.media_type, i.data) for i in images] == [("image/png", p.png) for p in result.pages]  # type: ignore[union-attr]
    assert result.view[3:] == tuple(messages[t:]) and read_pages(result.pages).rstrip() == result.page_text.rstrip()
    assert (report.middle_chars, report.middle_text_tokens) == (len(result.page_text), COST.text(result.page_text))
    assert report.image_tokens == sum(int(COST.profile.context_tokens(p.width, p.height)) for p in result.pages)
    assert (report.results_cut, report.result_cap, report.replaced_scripts, report.pages) == (0, 0, {}, len(result.pages))
    assert report.tokens_after == COST.history(result.view) and 0 <= report.seconds < 30


def test_long_results_are_cut_to_their_ends_and_counted_when_the_whole_middle_does_not_fit():
    from glyphpack._compaction.snapshot import SNAPSHOT_RESULT_CAP, snapshot

    messages = [Message("system", (Text("agent"),)), Message("user", (Text("the task"),))]
    sizes = [3_000, 40_000, 30_000, 9_000]  # the oldest first: the middle
    for n, size in enumerate(sizes):
        messages += [Message("assistant", (ToolCall(f"r{n}", "read", {"n": n}),)),
                     Message("tool", (ToolResult(f"r{n}", (Text(f"line of the file {n}\n" * (size // 19)),)),))]
    messages += [Message("assistant", (Text("done"),)), Message("user", (Text("thanks"),))]
    result = snapshot(messages, COST, 12_000, CompactionPolicy(tail_tokens=0))
    report = result.report
    assert report.skipped is None and report.result_cap >= SNAPSHOT_RESULT_CAP
    middle = messages[2 : report.last_message]
    assert report.results_cut == sum(1 for m in middle for r in m.tool_results if len(r.text) > 2 * report.result_cap) >= 1
    assert report.results_cut < len([r for m in middle for r in m.tool_results])


def test_the_image_limit_leaves_room_for_one_page_and_is_named_when_it_stops_every_cut():
    from glyphpack._compaction.snapshot import snapshot

    shot = png(64, 64)

    def with_tail_images(count: int) -> list[Message]:
        tail = Message("user", tuple(Image("image/png", shot) for _ in range(count)))  # the newest round: kept
        return [*long_chat(8), Message("assistant", (Text("look at these"),)), tail]

    budget = 10**6
    limit = COST.profile.max_images
    assert limit == 100
    room = snapshot(with_tail_images(limit - 1), COST, budget, CompactionPolicy(tail_tokens=0, fidelity="dense"))
    assert room.report.skipped is None and room.report.pages == 1
    full = snapshot(with_tail_images(limit), COST, budget, CompactionPolicy(tail_tokens=0, fidelity="dense"))
    assert full.report.skipped == f"no cut fits {COST.profile.name}'s limit of {limit} images per request with the middle as pages"


def test_cutting_a_huge_text_ends_when_an_exact_tokenizers_pieces_count_less_than_the_whole():
    from glyphpack._compaction.summarize import chunks

    squared = CostModel(COST.profile, tokenizer=lambda text: len(text) ** 2)  # 100 for the whole, 1 a character
    assert chunks(["abcdefghij"], squared, 10) == list("abcdefghij")  # hung on an empty remainder before


def _tool_rounds(lengths: list[int]) -> list[Message]:
    """A task, then one round per length: a call and a result of that many characters
    (each its own letter, so a cut shows which end it kept)."""
    out = [Message("system", (Text("be terse"),)), Message("user", (Text("the task " * 50),))]
    for n, length in enumerate(lengths):
        letter = "abcdefghijklmnop"[n]
        out += [Message("assistant", (ToolCall(f"c{n}", "read", {"path": f"{n}.txt"}),)),
                Message("tool", (ToolResult(f"c{n}", (Text(letter * (length // 2) + "|" + letter.upper() * (length - length // 2 - 1)),)),))]
    return out


def test_the_tail_cut_cuts_the_fewest_oldest_results_and_the_last_of_them_to_the_widest_ends_that_fit():
    from glyphpack._compaction.cut import TAIL_CUT_MIN_END, cut_tail
    from glyphpack._history.recall import cut_to_ends

    history = _tool_rounds([8_000, 8_000, 8_000, 8_000])
    whole = COST.history(history)
    one_cut = COST.history([*history[:3], history[3].with_content((ToolResult("c0", (Text(cut_to_ends(history[3].text, TAIL_CUT_MIN_END, "c0")),)),)), *history[4:]])
    # a budget one token under what cutting the oldest alone to the least ends leaves: two are cut
    for budget, count in ((whole, 0), (one_cut, 1), (one_cut - 1, 2)):
        result = cut_tail(history, COST, budget)
        assert COST.history(result.view) <= budget and result.view[:2] == tuple(history[:2])  # the head never
        cut = [m.tool_results[0].call_id for m in result.view if m.tool_results and "chars cut by glyphpack" in m.text]
        assert cut == [f"c{n}" for n in range(count)], (budget, cut)
        assert result.report.results_cut == count and (result.report.skipped == "the view fits") == (count == 0)
        if count:
            last = result.view[1 + 2 * count].tool_results[0].text
            keep = result.report.result_cap
            assert last == cut_to_ends(history[1 + 2 * count].tool_results[0].text, keep, f"c{count - 1}")
            assert keep >= TAIL_CUT_MIN_END and COST.history(cut_tail(history, COST, budget).view) <= budget
            wider = [*result.view[: 1 + 2 * count], result.view[1 + 2 * count].with_content(
                (ToolResult(f"c{count - 1}", (Text(cut_to_ends(history[1 + 2 * count].text, keep + 1, f"c{count - 1}")),)),)), *result.view[2 + 2 * count :]]
            assert COST.history(wider) > budget  # one more character each end would not fit
    assert "(the newest of them to" in result.report.details
    # the oldest result the longest: cut alone, to the widest ends its own length allows
    uneven = _tool_rounds([9_000, 5_000, 5_000, 5_000])
    budget = COST.history(uneven) - 500
    result = cut_tail(uneven, COST, budget)
    keep = result.report.result_cap
    assert result.report.results_cut == 1 and keep > 2_500 and COST.history(result.view) <= budget
    wider = [*result.view[:3], result.view[3].with_content((ToolResult("c0", (Text(cut_to_ends(uneven[3].text, keep + 1, "c0")),)),)), *result.view[4:]]
    assert COST.history(wider) > budget
    # a result of twice the least ends is never cut (nothing to take); one longer is
    short = _tool_rounds([2 * TAIL_CUT_MIN_END, 2 * TAIL_CUT_MIN_END + 100])
    trimmed = cut_tail(short, COST, COST.history(short) - 1)
    assert ["chars cut by glyphpack" in m.text for m in trimmed.view if m.tool_results] == [False, True] and trimmed.report.results_cut == 1


def test_the_tail_cut_elides_everything_after_the_task_when_cutting_is_not_enough_and_says_when_nothing_is_left():
    from glyphpack._compaction.cut import TAIL_CUT_MIN_END, cut_tail

    shot = Image("image/png", png(300, 200))
    history = [*_tool_rounds([4_000, 4_000]), Message("user", (Text("look"), shot))]
    head = COST.history(history[:2])
    result = cut_tail(history, COST, head + 60)
    assert result.view[:2] == tuple(history[:2]) and not any(m.images for m in result.view)
    assert [r.text.startswith(ELIDED_MARK) for m in result.view for r in m.tool_results] == [True, True]
    assert result.report.changed == 3 and result.report.result_cap == result.report.results_cut == 0
    assert "elided and images dropped" in result.report.details
    bare = [Message("user", (Text("the task " * 500),))]
    nothing = cut_tail(bare, COST, 10).report
    assert nothing.skipped == "nothing after the task to cut" and nothing.changed == 0
    # just over twice the least ends is elided too, a call's long arguments as well; each stub names its call
    edge = [*_tool_rounds([2 * TAIL_CUT_MIN_END + 1]), Message("assistant", (ToolCall("w", "write", {"text": "y" * (2 * TAIL_CUT_MIN_END)}),)),
            Message("tool", (ToolResult("w", (Text("ok"),)),))]
    stubbed = cut_tail(edge, COST, COST.history(edge[:2]) + 80)
    assert stubbed.report.changed == 2 and 'result of read({"path": "0.txt"})' in stubbed.view[3].text
    assert stubbed.view[4].tool_calls[0].arguments != {"text": "y" * (2 * TAIL_CUT_MIN_END)}


def test_compact_refuses_a_limit_under_its_budget_and_a_proactive_target_is_not_met_by_the_tail_cut():
    from glyphpack import CompactionError
    from glyphpack._compaction.ladder import compact

    history = _tool_rounds([8_000] * 4)
    with pytest.raises(CompactionError, match=r"limit must be a number of tokens at least the budget \(5,000\), not 4999"):
        compact(history, "claude-sonnet-4-5", 5_000, limit=4_999)
    free = CompactionPolicy(rungs=("elision", "tail cut"))
    whole = COST.history(history)
    aimed = compact(history, "claude-sonnet-4-5", whole // 4, policy=free, limit=whole // 2)
    assert not aimed.report.fits and whole // 4 < COST.history(aimed.view) <= whole // 2  # cut to the limit, not the wish
    met = compact(history, "claude-sonnet-4-5", whole // 4, policy=free)
    assert met.report.fits
