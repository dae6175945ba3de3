"""The proxy's log, exact: each request's line, its JSON line, the totals and the exit
summary; a JSON log that cannot be written is said once and the proxy goes on. No
credential or message is among what it can write: a record holds counts, ids, a status
and a note only."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

from glyphpack._proxy.log import ProxyLog, RequestRecord, provider_usage


def test_a_requests_line_says_where_what_and_how_much_and_leaves_out_what_it_does_not_know() -> None:
    assert RequestRecord("anthropic", 200, 1234.4).line() == "glyphpack proxy: (not recorded) anthropic -> 200 in 1,234 ms"
    full = RequestRecord("openai-chat", 200, 12.5, "c1", "main", client=12_345, sent=2_345, input=2_400, cached=1_000, output=70, compacted=True, rounds=3, note="a note")
    assert full.line() == ("glyphpack proxy: c1/main openai-chat -> 200 in 12 ms; ~12,345 tokens from the client, ~2,345 sent (compacted); "
                           "provider: 2,400 in (1,000 cached), 70 out; 2 recall round(s) answered; a note")
    plain = RequestRecord("gemini", 429, 0.6, "c1", "sub", client=10, sent=10, input=10, cached=0)
    assert plain.line() == "glyphpack proxy: c1/sub gemini -> 429 in 1 ms; ~10 tokens from the client, ~10 sent; provider: 10 in"
    assert RequestRecord("openai-responses", 200, 1.0, "c1", "main", client=10, rounds=2).line() == (
        "glyphpack proxy: c1/main openai-responses -> 200 in 1 ms; 1 recall round(s) answered")  # a half-known count is not shown


def test_totals_add_each_record_and_the_summary_says_what_was_saved(tmp_path: Path) -> None:
    lines, path = io.StringIO(), tmp_path / "log.jsonl"
    log = ProxyLog(lines, path)
    assert log.totals()["saved_share"] == 0.0  # nothing yet: no division by zero
    thirds = ProxyLog()
    thirds.record(RequestRecord("anthropic", 200, 1.0, client=3, sent=1))
    assert thirds.totals()["saved_share"] == 0.6667  # four places
    records = [
        RequestRecord("anthropic", 200, 5.0, "c1", "main", client=10_000, sent=4_000, input=4_100, cached=3_000, output=200, compacted=True, rounds=2),
        RequestRecord("anthropic", 200, 5.0, "c1", "main", client=2_000, sent=2_000, input=2_050, output=100),
        RequestRecord("anthropic", 400, 1.0, "c1", "main", client=500),  # refused: no tokens counted for it
        RequestRecord("openai-chat", 502, 1.0, note="the upstream failed: ConnectError"),
    ]
    for record in records:
        log.record(record)
    assert log.totals() == {
        "requests": 4, "failed": 2, "compacted": 1, "recall_rounds": 1,
        "client_tokens": 12_000, "sent_tokens": 6_000, "provider_input_tokens": 6_150, "provider_cached_tokens": 3_000,
        "provider_output_tokens": 300, "saved_share": 0.5,
    }
    assert log.summary() == ("glyphpack proxy: 4 requests (2 failed, 1 compacted, 1 recall rounds); clients ~12,000 tokens, sent ~6,000 "
                             "(50.0% saved); provider: 6,150 in, 3,000 cached, 300 out")
    assert lines.getvalue() == "".join(r.line() + "\n" for r in records)
    assert [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] == [dataclasses.asdict(r) for r in records]
    handed = log.totals()
    handed["requests"] = 99
    assert log.totals()["requests"] == 4  # a copy: a caller's change is not the log's


def test_a_json_log_that_cannot_be_written_is_said_once_and_the_lines_go_on(tmp_path: Path) -> None:
    lines = io.StringIO()
    log = ProxyLog(lines, tmp_path / "missing" / "log.jsonl")
    log.record(RequestRecord("anthropic", 200, 1.0))
    log.record(RequestRecord("anthropic", 200, 2.0))
    assert lines.getvalue().split("\n") == [
        "glyphpack proxy: (not recorded) anthropic -> 200 in 1 ms",
        f"glyphpack proxy: cannot write the JSON log {tmp_path / 'missing' / 'log.jsonl'}: No such file or directory; no more JSON lines",
        "glyphpack proxy: (not recorded) anthropic -> 200 in 2 ms",
        "",
    ]
    silent = ProxyLog(None, tmp_path / "missing" / "log.jsonl")
    silent.record(RequestRecord("anthropic", 200, 1.0))  # no stream: nothing said, nothing raised
    assert silent.totals()["requests"] == 1
    text = tmp_path / "text.jsonl"
    ProxyLog(None, text).record(RequestRecord("anthropic", 200, 1.0, note="ünïcode ✓"))
    assert "ünïcode ✓" in text.read_text(encoding="utf-8")


def test_usage_that_is_not_a_number_is_not_counted() -> None:
    assert provider_usage("anthropic", {"usage": {"input_tokens": True, "output_tokens": 5}}) == (None, None, 5)
    assert provider_usage("anthropic", {"usage": {"input_tokens": 10, "cache_read_input_tokens": "x"}}) == (10, None, None)
    assert provider_usage("anthropic", {"usage": {"cache_read_input_tokens": 10}}) == (None, 10, None)  # no input said: none
    assert provider_usage("openai-chat", {"usage": {"prompt_tokens": 10, "prompt_tokens_details": None}}) == (10, None, None)
    assert provider_usage("openai-responses", {"usage": {"input_tokens": 10, "input_tokens_details": []}}) == (10, None, None)
    assert provider_usage("gemini", {"usage": {"promptTokenCount": 10}}) == (None, None, None)  # Gemini's is usageMetadata
    assert provider_usage("openai-chat", None) == (None, None, None)
    assert provider_usage("openai-chat", ["usage"]) == (None, None, None)  # type: ignore[arg-type]
