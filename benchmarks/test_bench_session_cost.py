"""What a session costs, replayed: every long real session in shared/sessions, turn by
turn, for a Claude reader under Anthropic's prompt-cache pricing, with the strategies
harnesses use today as baselines.

First the billing model is checked against what the files recorded: each session's
recorded requests (what the harness sent, as its usage records say: the messages, the
provider's input count, the cached split) are priced by this replay's token count and
cache model, with the cache cold where the recording shows a miss, and compared with
the bill the recorded counts make. A strategy's figures are only as good as that.

Then each strategy replays the session's messages (the model's answers as recorded):

- none:       no compaction; stops where a request no longer fits the window.
- claude code: Claude Code's compaction: at 83.5% of the window the conversation is
              summarized by a call that continues the cached conversation (its input
              billed as a cache read, its 8,000-character summary as output) and
              resumes from the summary plus the newest turns (at most 5 tool results,
              25,000 tokens: what it restores after compacting; gone for good).
- clearing:   Anthropic's server-side tool-result clearing with its defaults: once the
              input passes 100,000 tokens, every tool result but the newest 3 becomes a
              placeholder (gone for good).
- masking:    observation masking in prefix-stable batches: the newest 10 tool results
              whole, older ones a placeholder, masked 10 at a time (gone for good).
- default:    ``Session``'s defaults (recall on: the threshold and target that bill
              least, the whole ladder, everything put away recallable), its summarizer
              the session's own model (a summary request that continues the
              conversation, billed by the cache like any request; a fixed
              8,000-character summary as output).
- recall off: the same with ``recall=False`` (the window's thresholds, pages in the
              reader's exact shape).
- 5x8 default, 5x8 recall off: the same two for a Claude reader known to read 5x8
              (Fable 5), at the same prices.

The provider is simulated from the file: its count of a request is a least-squares fit
of the recorded counts on glyphpack's estimate (``scale * estimate + overhead``: the
overhead is the system prompt and tools the file does not hold), and every response
reports that count (the session's calibration learns it). The cache is cold at the
calls where the recording shows a miss (a pause past the cache's lifetime).

Billing, in input-token equivalents at each session's own provider's prices
(``PRICES``): uncached input 1x; Anthropic's cache writes 1.25x and reads 0.1x; the
providers that cache by themselves (DeepSeek, Gemini's implicit cache, OpenAI) no write
price and their discount on reads; images at their billed tokens; summarizer output at
the model's output/input price ratio. Cache model: Anthropic's, a breakpoint where the
request puts one (the end of a compaction, the newest message), a request reading the
longest cached prefix ending at most 20 blocks before one of its breakpoints and writing
the rest up to its last breakpoint; the others read the longest prefix any earlier
request sent. Each session replays as its own provider's model (what the payback rules
of ``Session`` price with).

Recall break-even: the recall calls that would cancel a glyphpack row's margin over the
best baseline. A recall costs one more request: its context read from the cache, the
answer (a 16,000-character page at most) written, a short call as output.

Held at the end: of the session's characters, the share the last request carries as
verbatim text, as snapshot pixels, only behind a note that names a ref
``glyphpack_recall`` brings back (recallable), and gone (a summary or a placeholder
stands for it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from conftest import TABLES

import glyphpack
from glyphpack import CompactionError, CompactionPolicy, Message, Summarizer, Text, ToolResult
from glyphpack._compaction.calibration import Calibration
from glyphpack._compaction.cost import CostModel
from glyphpack._compaction.summarize import Sent
from glyphpack._history.codec import message_to_json
from glyphpack._history.imported import Usage
from glyphpack._providers.resolve import resolve, text_estimator
from glyphpack._wire.anthropic import anthropic_block

SHARED = Path(__file__).resolve().parents[2] / "shared" / "sessions"
DENSE_READER = "claude-fable-5"
SUMMARY_CHARS = 8_000
LOOKBACK_BLOCKS = 20
#: Claude Code summarizes at about this share of the window, and resumes from the summary
#: and the newest turns: at most this many tool results, this many tokens.
CLAUDE_CODE_SHARE = 0.835
CLAUDE_CODE_RESULTS, CLAUDE_CODE_KEPT = 5, 25_000
#: A recall's answer, in tokens, at most (a 16,000-character page), and its call's output.
RECALL_ANSWER, RECALL_CALL = 4_500, 60


@dataclasses.dataclass(frozen=True)
class Pricing:
    """A provider's prices as multiples of its uncached input price."""

    write: float  # a prompt-cache write
    read: float  # a prompt-cache read
    output: float  # an output token
    automatic: bool  # caches every prefix by itself (no breakpoints, no write price)


#: Published prices (per million tokens, late 2026): Claude Sonnet $3 in, $15 out, cache
#: writes $3.75 (5 minutes), reads $0.30; DeepSeek V3.2 $0.28 in (cache miss), $0.028 on a
#: hit, $0.42 out; Gemini 2.5 Pro $1.25 in, $0.125 cached (implicit), $10 out.
PRICES = {
    "anthropic": Pricing(write=1.25, read=0.1, output=5.0, automatic=False),
    "deepseek": Pricing(write=1.0, read=0.1, output=1.5, automatic=True),
    "google": Pricing(write=1.0, read=0.1, output=8.0, automatic=True),
}
#: Anthropic's tool-result clearing defaults: the trigger (input tokens) and the tool uses kept.
CLEARING_TRIGGER, CLEARING_KEEP = 100_000, 3
#: Observation masking: the newest results kept whole, and how many are masked at once.
MASKING_KEEP, MASKING_BATCH = 10, 10

#: The long sessions (label, file, its provider's prices, the model it replays as);
#: "long": 50 or more model calls, or requests of 50k tokens and more. The other files
#: are shorter than any window.
SESSIONS = (
    ("pi, 471 calls", "pi/pimono-before-compaction.jsonl", "anthropic", "claude-sonnet-4-5"),
    ("pi (Opus 4.5), 214 calls", "pi/pimono-session.jsonl", "anthropic", "claude-sonnet-4-5"),
    ("Claude Code subagent, 19 calls", "claude-code/pai-agent-dee347d2.jsonl", "anthropic", "claude-sonnet-4-5"),
    ("mini-swe-agent (DeepSeek), 131 calls", "mini-swe-agent/miniswe-django__django-12470.traj.json", "deepseek", "deepseek-chat"),
    ("Gemini CLI, 52 calls", "gemini-cli/geminicli-trajectory.json", "google", "gemini-2.5-pro"),
    ("Copilot CLI (Sonnet 4.6), 54 calls", "copilot-cli/agentv-269e1b9e5502-0.jsonl", "anthropic", "claude-sonnet-4-5"),
)
WINDOWS = (200_000, 100_000)
BASELINES = ("none", "claude code", "clearing", "masking")
#: What puts words away for good (a summary or a placeholder stands for them).
LOSSY = (*BASELINES, "langchain summary")
#: glyphpack's: its defaults (recall on), recall off, and both for a Claude reader known to read 5x8.
DEFAULTS = ("default", "5x8 default")
STRATEGIES = (*BASELINES, "default", "recall off", "5x8 default", "5x8 recall off")


@dataclasses.dataclass
class Bill:
    prices: Pricing
    uncached: int = 0
    written: int = 0
    read: int = 0
    summarizer_in: float = 0
    summarizer_out: int = 0
    requests: int = 0

    @property
    def total(self) -> float:
        p = self.prices
        return self.uncached + p.write * self.written + p.read * self.read + self.summarizer_in + p.output * self.summarizer_out


class PromptCache:
    """What a provider's prompt cache holds, by hash of the messages before a point.

    ``automatic``: every prefix a request sent is cached and read back at any length
    (OpenAI, DeepSeek), with no write price (the rest is billed as uncached input);
    otherwise Anthropic's: prefixes are written at breakpoints and read within
    ``LOOKBACK_BLOCKS`` blocks before one."""

    def __init__(self, automatic: bool) -> None:
        self.automatic = automatic
        self.entries: set[str] = set()

    def charge(
        self, view: Sequence[Message], breakpoints: Sequence[int], costs: Sequence[int], bill: Bill, held: int | None = None, counted: bool = True
    ) -> None:
        """Bill one request carrying ``view`` (``costs``: each message's tokens, the
        first with the overhead that opens every request); ``held``: after a miss, the
        tokens the cache still held (it reads no more than those); ``counted``: one of
        the session's model calls (a summary request is not)."""
        hashes, running = [hashlib.sha256().hexdigest()], hashlib.sha256()
        for message in view:
            running.update(json.dumps(message_to_json(message), sort_keys=True).encode("utf-8", "surrogatepass"))
            hashes.append(running.hexdigest())
        tokens = np.concatenate([[0], np.cumsum(costs)]).astype(int)
        blocks = np.concatenate([[0], np.cumsum([max(1, len(m.content)) for m in view])])
        read = 0
        for k in range(len(view), 0, -1):
            near = self.automatic or any(b >= k and blocks[b] - blocks[k] <= LOOKBACK_BLOCKS for b in breakpoints)
            if hashes[k] in self.entries and near:
                read = int(tokens[k])
                break
        read = read if held is None else min(read, held)
        bill.read += read
        bill.requests += counted
        if self.automatic:
            bill.uncached += int(tokens[-1]) - read
            self.entries.update(hashes[1:])
            return
        last = max(breakpoints)
        bill.written += int(tokens[last]) - read
        bill.uncached += int(tokens[-1] - tokens[last])
        self.entries.update(hashes[b] for b in breakpoints)


# ------------------------------------------------------------- the recorded bill


@dataclasses.dataclass(frozen=True)
class Provider:
    """A session's provider as its recorded counts show it: ``scale * estimate + overhead``
    for ``model`` (the model the session replays as)."""

    model: str
    scale: float
    overhead: int
    #: model call (0-based) -> the tokens the cache still held, where the recording
    #: shows a miss (a pause past the cache's lifetime; or a breakpoint placed short of
    #: the end): it read less than the previous request carried.
    misses: dict[int, int]

    def cost(self) -> CostModel:
        return CostModel.for_model(self.model, text_estimator(resolve(self.model)).scaled(self.scale))

    def count(self, view: Sequence[Message]) -> int:
        return self.cost().history(view) + self.overhead


def recorded_provider(agent: glyphpack.ImportedAgent, prices: Pricing, model: str) -> Provider:
    cost = CostModel.for_model(model)
    if len(agent.usage) < 2:
        return Provider(model, 1.0, 0, {})
    estimates = [cost.history(agent.messages[u.start : u.end]) for u in agent.usage]
    scale, overhead = np.polyfit(estimates, [u.tokens for u in agent.usage], 1)
    calls = _call_numbers(agent.messages)
    held = [_held(u, previous, prices) for u, previous in zip(agent.usage[1:], agent.usage)]
    misses = {calls[u.end]: h for u, h in zip(agent.usage[1:], held) if h is not None and u.end in calls}
    return Provider(model, float(scale), int(overhead), misses)


#: A read this much short of the previous request's count is a miss (the counts drift
#: by a token or two between requests).
MISS_SLACK = 0.01


def _held(usage: Usage, previous: Usage, prices: Pricing) -> int | None:
    """After a recorded miss, the tokens the cache still held; None: no miss. A
    provider that caches automatically builds its cache as it likes (DeepSeek read 320
    tokens of 1,500-token prefixes for a while): only a read of nothing is a miss there."""
    short = usage.cache_read < (1 - MISS_SLACK) * previous.tokens
    return usage.cache_read if short and (not prices.automatic or usage.cache_read == 0) else None


def _call_numbers(messages: Sequence[Message]) -> dict[int, int]:
    """Index of each assistant message -> its model call's number (0-based)."""
    return {index: n for n, index in enumerate(i for i, m in enumerate(messages) if m.role == "assistant")}


def recorded_bills(agent: glyphpack.ImportedAgent, prices: Pricing, model: str) -> tuple[Bill, Bill, float]:
    """(the bill the recorded counts make, this replay's bill of the same requests, the
    relative error of its summed token count). Counts are predicted before each is seen,
    by a calibration that learns them one by one as a session does."""
    recorded, replayed = Bill(prices), Bill(prices)
    cost = CostModel.for_model(model)
    calibration = Calibration(base=cost.estimator)
    cache = PromptCache(automatic=prices.automatic)
    predicted_total = 0
    for n, usage in enumerate(agent.usage):
        recorded.read += usage.cache_read
        if prices.automatic:
            recorded.uncached += usage.tokens - usage.cache_read
        else:
            recorded.written += usage.cache_written
            recorded.uncached += usage.tokens - usage.cache_read - usage.cache_written
        view = agent.messages[usage.start : usage.end]
        priced = cost.with_estimator(calibration.estimator)
        costs = [priced.message(m) for m in view] or [0]
        costs[0] += calibration.overhead
        predicted_total += sum(costs)
        cache.charge(view, [len(view)], costs, replayed, held=_held(usage, agent.usage[n - 1], prices) if n else None)
        calibration = calibration.learn(priced, view, usage.tokens)
    return recorded, replayed, predicted_total / sum(u.tokens for u in agent.usage) - 1


# ------------------------------------------------------------- the strategies


SUMMARY = ("Summary of the work so far: files read, edits made, tests run, what is open. " * 200)[:SUMMARY_CHARS]


def stub_summarizer(bill: Bill, cost: CostModel, window: int, overhead: int, cache: PromptCache) -> Summarizer:
    """The session's own model as its summarizer (a fixed-size summary): a fresh prompt
    billed whole; a request that continues the conversation billed by the prompt cache
    as any request is (what was sent before read, the rest written)."""

    def summarize(prompt: str) -> str:
        bill.summarizer_in += cost.text(prompt)
        bill.summarizer_out += cost.text(SUMMARY)
        return SUMMARY

    def continues(sent: Sent, instruction: str) -> str:
        view = (*sent.messages, Message("user", (Text(instruction),)))
        costs = [cost.message(m) for m in view]
        costs[0] += overhead
        cache.charge(view, sorted({b for b in (sent.prefix, len(view)) if b > 0}), costs, bill, counted=False)
        bill.summarizer_out += cost.text(SUMMARY)
        return SUMMARY

    return Summarizer(summarize, window=window, output_reserve=8_000, continues=continues)


def _placeholder(view: Sequence[Message], masked: Callable[[int], bool], note: str) -> tuple[Message, ...]:
    """``view`` with the tool results whose number (oldest first) ``masked`` takes made ``note``."""
    out, number = [], 0
    for message in view:
        if not message.tool_results:
            out.append(message)
            continue
        content = []
        for block in message.content:
            if isinstance(block, ToolResult):
                if masked(number):
                    block = dataclasses.replace(block, content=(Text(note),))
                number += 1
            content.append(block)
        out.append(message.with_content(tuple(content)))
    return tuple(out)


def clearing(view: Sequence[Message], count: Callable[[Sequence[Message]], int]) -> tuple[Message, ...]:
    if count(view) <= CLEARING_TRIGGER:
        return tuple(view)
    results = sum(len(m.tool_results) for m in view)
    return _placeholder(view, lambda n: n < results - CLEARING_KEEP, "[tool result cleared]")


def masking(view: Sequence[Message], count: Callable[[Sequence[Message]], int]) -> tuple[Message, ...]:
    results = sum(len(m.tool_results) for m in view)
    masked = max(0, (results - MASKING_KEEP) // MASKING_BATCH * MASKING_BATCH)
    return _placeholder(view, lambda n: n < masked, "[old tool output omitted]")


class ClaudeCode:
    """Claude Code's compaction as a view of the history: at ``CLAUDE_CODE_SHARE`` of the
    window, a summary call that continues the cached conversation (billed to ``bill``),
    then the summary and the newest turns (``CLAUDE_CODE_RESULTS`` tool results and
    ``CLAUDE_CODE_KEPT`` tokens at most) stand for everything before them."""

    def __init__(self, window: int, bill: Bill, priced: CostModel) -> None:
        self.window, self.bill, self.priced = window, bill, priced
        self.cut: int | None = None
        self.summary = Message("user", (Text(SUMMARY),))
        self.compactions = 0

    def view(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        return tuple(messages) if self.cut is None else (self.summary, *messages[self.cut :])

    def __call__(self, messages: Sequence[Message], count: Callable[[Sequence[Message]], int]) -> tuple[Message, ...]:
        view = self.view(messages)
        tokens = count(view)
        if tokens < CLAUDE_CODE_SHARE * self.window:
            return view
        self.bill.summarizer_in += self.bill.prices.read * tokens
        self.bill.summarizer_out += self.priced.text(SUMMARY)
        self.compactions += 1
        rounds = [i for i, m in enumerate(messages) if m.role == "assistant"]
        self.cut = rounds[-1] if rounds else len(messages)  # the newest round always
        for start in reversed(rounds[:-1]):
            kept = messages[start:]
            if sum(len(m.tool_results) for m in kept) > CLAUDE_CODE_RESULTS or self.priced.history(kept) > CLAUDE_CODE_KEPT:
                break
            self.cut = start
        return self.view(messages)


#: LangChain's SummarizationMiddleware: its default ``keep=("messages", 20)`` and
#: ``trim_tokens_to_summarize=4000``, triggered at ``("fraction", 0.8)`` of the window
#: (its documentation's example; it has no default trigger, and never summarizes without one).
LANGCHAIN_KEEP, LANGCHAIN_TRIM, LANGCHAIN_TRIGGER, LANGCHAIN_PROMPT = 20, 4_000, 0.8, 350


class LangChainSummary:
    """LangChain 1.x ``SummarizationMiddleware`` as a view of the history: past
    ``LANGCHAIN_TRIGGER`` of the window, every message but the newest ``LANGCHAIN_KEEP``
    (LangChain counts each tool result as a message; a call and its results stay
    together) is replaced in the state by a summary (gone for good), written by a fresh
    call on the newest ``LANGCHAIN_TRIM`` tokens of what it replaces (uncached input, the
    summary as output)."""

    def __init__(self, window: int, bill: Bill, priced: CostModel) -> None:
        self.window, self.bill, self.priced = window, bill, priced
        self.cut: int | None = None
        self.summary = Message("user", (Text("Here is a summary of the conversation to date:\n\n" + SUMMARY),))
        self.compactions = 0

    def view(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        return tuple(messages) if self.cut is None else (self.summary, *messages[self.cut :])

    def __call__(self, messages: Sequence[Message], count: Callable[[Sequence[Message]], int]) -> tuple[Message, ...]:
        view = self.view(messages)
        if count(view) < LANGCHAIN_TRIGGER * self.window:
            return view
        kept, cut = 0, len(messages)
        while cut > (self.cut or 0) and kept < LANGCHAIN_KEEP:
            cut -= 1
            kept += max(1, len(messages[cut].tool_results))
        while cut > (self.cut or 0) and messages[cut].role == "tool":  # a call's results stay with it
            cut -= 1
        if cut <= (self.cut or 0):
            return view
        replaced = self.view(messages)[: cut - (self.cut or 0) + (1 if self.cut is not None else 0)]
        self.bill.summarizer_in += min(count(replaced), LANGCHAIN_TRIM) + LANGCHAIN_PROMPT
        self.bill.summarizer_out += self.priced.text(SUMMARY)
        self.compactions += 1
        self.cut = cut
        return self.view(messages)


TRANSFORMS = {"clearing": clearing, "masking": masking}


def chars_of(message: Message) -> int:
    return len(message.text) + sum(len(c.arguments_json) for c in message.tool_calls)


def response_with_count(message: Message, tokens: int) -> dict:
    """``message`` as an Anthropic response reporting ``tokens`` input tokens."""
    content = [block for block in map(anthropic_block, message.content) if block is not None]
    return {"type": "message", "role": "assistant", "content": content, "usage": {"input_tokens": tokens, "output_tokens": 1}}


def replay(history: Sequence[Message], strategy: str, provider: Provider, prices: Pricing, workspace: Path, window: int) -> dict:
    """One strategy over ``history`` (see the module's note)."""
    bill = Bill(prices)
    model = DENSE_READER if strategy.startswith("5x8") else provider.model
    priced = provider.cost()
    summarizing = {"claude code": ClaudeCode, "langchain summary": LangChainSummary}
    summarized = summarizing[strategy](window, bill, priced) if strategy in summarizing else None
    transform = summarized or TRANSFORMS.get(strategy)
    cache = PromptCache(prices.automatic)
    options: dict = {"context_window": window}
    if strategy == "none" or transform:  # the whole history is the session's; what is sent is decided here
        options = {"policy": CompactionPolicy(rungs=()), "context_window": 10**9}
    else:
        options["recall"] = strategy in DEFAULTS
    # The session's own model summarizes (a reader without vision needs one even where nothing compacts).
    options["summarizer"] = stub_summarizer(bill, priced, window, provider.overhead, cache)
    compactions, covers, calls, stopped = 0, None, 0, ""
    started = time.perf_counter()
    system = next((m.text for m in history if m.role == "system"), None)
    results: list[ToolResult] = []
    waiting: list[Message] = []  # user messages that came while calls were pending
    with glyphpack.open_session(workspace, "replay", "agent", model=model, system=system, **options) as s:
        if next(m for m in history if m.role != "system").role == "assistant":  # a subagent's file starts with its answer
            s.add_user("[the task this agent was given: the file does not hold it]")
        for message in history:
            if message.role == "system":
                continue
            if message.role == "user" and not message.tool_results:
                if s.pending_calls:
                    waiting.append(message)
                else:
                    s.add_user(message.content)
                continue
            if message.role in ("tool", "user"):
                results.extend(message.tool_results)
                pending = {c.id for c in s.pending_calls}
                if {r.call_id for r in results} >= pending:
                    s.add_tool_results([r for r in results if r.call_id in pending])
                    results = []
                    for note in waiting:
                        s.add_user(note.content)
                    waiting = []
                continue
            try:
                s.request("anthropic")
            except CompactionError as exc:
                stopped = str(exc).split(";")[0]
                break
            view, prefix = s.request_view()
            if transform:
                view, prefix = transform(view, provider.count), 0
            if provider.count(view) > window:
                stopped = "window"
                break
            if (s.view.covers if s.view else None) != covers:
                compactions += 1
                covers = s.view.covers if s.view else None
            costs = [priced.message(m) for m in view]
            costs[0] += provider.overhead  # the system prompt and tools open every request
            cache.charge(view, sorted({b for b in (prefix, len(view)) if b > 0}), costs, bill, held=provider.misses.get(calls))
            s.add_response(response_with_count(message, provider.count(view)), "anthropic")
            calls += 1
        final, _ = s.request_view()
        if summarized is not None:
            final = summarized.view(final)
        elif transform:
            final = transform(final, provider.count)
        total_chars = sum(chars_of(m) for m in s.messages)
        originals = {m.id: m for m in s.messages}
        verbatim = sum(chars_of(m) for m in final if originals.get(m.id) == m)
        snapshot = s.last_compaction.report.rung("snapshot") if s.last_compaction and s.view else None
        pixels = snapshot.middle_chars if snapshot and snapshot.pages and not transform else 0
    held = {"verbatim": verbatim / total_chars, "pixels": min(pixels, total_chars - verbatim) / total_chars}
    rest = 1 - held["verbatim"] - held["pixels"]
    # glyphpack's notes name a ref for everything they put away (tests/test_recall.py);
    # a summary, a placeholder or a cleared result stands for what is gone.
    recallable = rest if strategy not in LOSSY else 0.0
    return {
        "strategy": strategy, "calls": calls, "compactions": summarized.compactions if summarized else compactions, "bill": bill,
        **held, "recallable": recallable, "lost": rest - recallable,
        "stopped": stopped, "seconds": time.perf_counter() - started,
    }


# ------------------------------------------------------------- the tables


def _main_agent(path: Path) -> glyphpack.ImportedAgent:
    return glyphpack.import_file(path).agents[0]


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared/sessions is not beside the repository")
def test_the_billing_model_reproduces_the_recorded_bills():
    """The replay's token count and cache model, fed each file's recorded requests and
    cache misses, against the bill the file's own counts make."""
    lines = [
        "| session | requests | recorded bill | replayed | difference | tokens counted vs recorded |",
        "|---|---|---|---|---|---|",
    ]
    differences = []
    for label, name, provider, model in SESSIONS:
        agent = _main_agent(SHARED / name)
        if not agent.usage:
            lines.append(f"| {label} | {sum(m.role == 'assistant' for m in agent.messages)} | not recorded | | | |")
            continue
        recorded, replayed, token_error = recorded_bills(agent, PRICES[provider], model)
        difference = replayed.total / recorded.total - 1
        differences.append(difference)
        lines.append(
            f"| {label} | {len(agent.usage)} | {recorded.total:,.0f} | {replayed.total:,.0f} | {difference:+.1%} | {token_error:+.1%} |"
        )
    TABLES["the billing model against the recorded bills (benchmarks/test_bench_session_cost.py)"] = lines
    assert differences and all(abs(d) < 0.03 for d in differences)  # what a strategy's bill can be trusted to


def recall_cost(bill: Bill) -> float:
    """What one recall call adds to ``bill``'s session: a request of its mean size read from
    the cache, the answer written, the call as output."""
    p = bill.prices
    mean = (bill.uncached + bill.written + bill.read) / max(1, bill.requests)
    return p.read * mean + p.write * RECALL_ANSWER + p.output * RECALL_CALL


def _row(label: str, row: dict, cheapest: float) -> str:
    bill: Bill = row["bill"]
    stopped = f" (stopped: {row['stopped']})" if row["stopped"] else ""
    versus = f"{bill.total / cheapest - 1:+.1%}" if not row["stopped"] else "—"
    margin = cheapest - bill.total
    if row["strategy"] in BASELINES or row["stopped"]:
        even = ""
    else:
        even = f"{margin / recall_cost(bill):,.0f}" if margin > 0 else "none"
    return (
        f"| {label} | {row['strategy']} | {row['calls']:,}{stopped} | {row['compactions']} | {bill.total:,.0f} | {versus} "
        f"| {even} | {row['verbatim']:.0%} | {row['pixels']:.0%} | {row['recallable']:.0%} | {row['lost']:.0%} |"
    )


def strategies_for(provider: str) -> tuple[str, ...]:
    """The strategies a session replays: the 5x8 reader is a Claude reader."""
    return STRATEGIES if provider == "anthropic" else tuple(s for s in STRATEGIES if not s.startswith("5x8"))


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared/sessions is not beside the repository")
@pytest.mark.parametrize("window", WINDOWS, ids=[f"{w // 1000}k" for w in WINDOWS])
def test_session_cost_replay(tmp_path, window):
    lines = [
        f"{window:,}-token window; billed input-token equivalents at each provider's prices; 'vs best baseline': "
        f"against the cheapest of {', '.join(BASELINES)} that finished; 'recalls to break even': the recall calls "
        "that would cancel the margin",
        "",
        "| session | strategy | calls replayed | compactions | billed | vs best baseline | recalls to break even | held verbatim | as pixels | recallable | lost |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    seconds = []
    only = os.environ.get("GLYPHPACK_REPLAY_ONLY")  # a label's start: one session, for a quick look
    for label, name, provider_name, model in SESSIONS:
        if only and not label.startswith(only):
            continue
        agent = _main_agent(SHARED / name)
        prices = PRICES[provider_name]
        provider = recorded_provider(agent, prices, model)
        rows = [replay(agent.messages, strategy, provider, prices, tmp_path / f"{name}-{strategy}", window) for strategy in strategies_for(provider_name)]
        calls = sum(m.role == "assistant" for m in agent.messages)
        cheapest = min(r["bill"].total for r in rows if r["strategy"] in BASELINES and not r["stopped"])
        lines += [_row(label, row, cheapest) for row in rows]
        seconds.append(f"{label}: " + ", ".join(f"{r['strategy']} {r['seconds']:.0f}s" for r in rows))
        assert all(r["calls"] == calls for r in rows if not r["stopped"])
    lines += ["", "seconds per replay: " + "; ".join(seconds)]
    TABLES[f"session cost replay, {window // 1000}k window (benchmarks/test_bench_session_cost.py)"] = lines
