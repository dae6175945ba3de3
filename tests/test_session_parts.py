"""The session's methods a proxy and a framework adapter call, one by one: ``extend``,
``next_view``, ``request_if_compacted``, ``measured``, and when a compaction below the
window's threshold pays back. Each is checked on both sides of its limits."""

from __future__ import annotations

import pytest

import glyphpack
from glyphpack import Message, Text, ToolCall, UsageError


def turns(count: int, size: int = 200) -> list[Message]:
    out: list[Message] = [Message("user", (Text("the task"),))]
    for n in range(count):
        out += [Message("assistant", (Text(f"answer {n} " + "w" * size),)), Message("user", (Text(f"next {n}"),))]
    return out


def session(tmp_path, **options):
    return glyphpack.open_session(tmp_path / "ws", "c", "a", model="claude-sonnet-4-5", **options)


def test_extend_saves_once_at_the_end_and_an_empty_extend_saves_nothing(tmp_path):
    with session(tmp_path) as s:
        revision = s.revision
        s.extend([])
        assert s.revision == revision and s.messages == ()
        added = turns(2)
        s.extend(added)
        assert s.messages == tuple(added) and s.revision != revision
    with session(tmp_path) as again:
        assert [m.id for m in again.messages] == [m.id for m in added]


def test_extend_refuses_a_history_ending_mid_call_and_keeps_what_was_there(tmp_path):
    with session(tmp_path) as s:
        s.extend(turns(1))
        before = (s.messages, s.revision)
        with pytest.raises(glyphpack.GlyphpackError):
            s.extend([Message("assistant", (ToolCall("c1", "run", {}),))])
        assert (s.messages, s.revision) == before


def test_next_view_needs_a_user_message_and_no_pending_calls(tmp_path):
    with session(tmp_path) as s:
        with pytest.raises(UsageError, match="nothing to send yet: add a user message first"):
            s.next_view("anthropic")
        s.extend(turns(1))
        assert s.next_view("anthropic") == s.messages  # below the threshold: the history as it is
        s.add_response(Message("assistant", (ToolCall("c9", "run", {}),)))
        with pytest.raises(UsageError, match=r"cannot build a request while tool calls are pending \(c9\): add their results first"):
            s.next_view("anthropic")
        with pytest.raises(UsageError, match=r"cannot build a request while tool calls are pending \(c9\)"):
            s.request_if_compacted("anthropic")


def test_request_if_compacted_is_none_until_a_compaction_is_in_force(tmp_path):
    with session(tmp_path, context_window=200_000) as s:
        s.extend(turns(3))
        assert s.request_if_compacted("anthropic") is None
    with session(tmp_path / "small", context_window=20_000, threshold=8_000, target=4_000, recall=False,
                 summarizer=lambda prompt: "what was done") as small:
        small.extend(turns(80, size=400))
        assert small.estimate() >= 8_000
        built = small.request_if_compacted("anthropic", max_tokens=64)
        assert built is not None and built["max_tokens"] == 64
        assert len(built["messages"]) < len(small.messages)


def test_measured_takes_a_whole_number_after_a_request_and_learns_from_it(tmp_path):
    with session(tmp_path) as s:
        s.extend(turns(4))
        for bad in (True, -1, 2.5, "10"):
            with pytest.raises(UsageError, match="input_tokens must be a whole number of tokens, not "):
                s.measured(bad)  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="no request was built by this session to measure"):
            s.measured(100)
        s.next_view("anthropic")
        estimate = s.estimate()
        s.measured(0)  # a provider that counted nothing: nothing learned
        assert s.estimate() == estimate
        s.measured(estimate + 3_000)  # the provider counts 3,000 more: an overhead the estimate learns
        assert s.estimate() > estimate
    with session(tmp_path) as again:  # what was learned is kept for the next process
        assert again.estimate() > estimate


def test_measured_learns_nothing_with_an_exact_tokenizer(tmp_path):
    with session(tmp_path, policy=glyphpack.CompactionPolicy(tokenizer=len)) as s:
        s.extend(turns(4))
        s.next_view("anthropic")
        estimate = s.estimate()
        s.measured(estimate + 3_000)
        assert s.estimate() == estimate


def test_a_compaction_below_the_threshold_pays_when_the_calls_left_read_less(tmp_path):
    """Anthropic's prices: cache writes 1.25, reads 0.1, output 5 times the input price;
    a summary of 2,000 tokens. With a target of 1,000 and 7 answers (3 calls left, half
    of them, rounded down): 0.1 (e - 1000) 3 >= 1.25 * 1000 + 0.1 e + 5 * 2000 from
    e = 57,750 on."""
    with session(tmp_path, context_window=400_000, threshold=300_000, target=1_000, recall=False) as s:
        s.extend(turns(7)[:-1] + [Message("user", (Text("go on"),))])
        assert sum(1 for m in s.messages if m.role == "assistant") == 7
        assert s._compaction_pays(57_760) and not s._compaction_pays(57_740)
        assert not s._compaction_pays(1_000)
