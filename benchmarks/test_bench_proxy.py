"""glyphpack proxy, measured against the same client talking to the upstream directly,
in the same process, on this machine (the upstream is ``FakeUpstream`` on 127.0.0.1, so
what is measured is what the proxy adds, not a provider's latency):

- time to first byte of a streamed answer, p50 and p99, with 1 and 32 clients at once,
  each client continuing its own conversation (the proxy records every request);
- requests per second with 32 clients;
- billed input over a long scripted agent session (a Claude Code-style harness: system
  prompt and newest message marked for the prompt cache; 4 kB tool outputs), priced on
  the request bodies the upstream actually received with Anthropic's cache rules (writes
  1.25x, reads 0.1x, a read matching a written prefix at most 20 blocks before a
  breakpoint; every summary request billed by the same rules, its output at 5x, 1,000
  tokens). Direct, the session stops where the window does; compacting itself as Claude
  Code does (at 83.5% of the window, a summary request that continues the conversation,
  then the summary and the newest turns, 5 results and 25k tokens at most) it finishes;
  through the proxy it finishes with the proxy's defaults.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import TABLES

pytest.importorskip("starlette")
import httpx

from glyphpack import Workspace
from glyphpack._proxy.bodies import BodyParser
from glyphpack._proxy.conversations import ProxySettings, Recorder
from glyphpack._proxy.server import Proxy, Running
from glyphpack.testing.fake import CHARS_PER_TOKEN, SUMMARY_REQUEST, FakeModel, FakeUpstream, Turn, count_tokens, summary_prompt

Json = dict[str, Any]
WINDOW = 200_000
CACHE_WRITE, CACHE_READ, OUTPUT = 1.25, 0.1, 5.0
LOOKBACK_BLOCKS = 20


# ---------------------------------------------------------------------- latency


async def _client_loop(base: str, turns: int, ttfb: list[float], number: int, key: str = "bench", stream: bool = True, words: str = "x" * 400) -> None:
    """One client: a conversation of ``turns`` requests, each timed to its first byte
    (streamed; not streamed, the whole answer comes at once)."""
    history: list[Json] = [{"role": "user", "content": f"client {number}: summarize the logs"}]
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        for turn in range(turns):
            body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": stream, "messages": history}
            started = time.perf_counter()
            async with client.stream("POST", "/v1/messages", json=body, headers={"x-api-key": key}) as response:
                assert response.status_code == 200, f"{base}: {response.status_code}"  # an error is no answer to time
                chunks = response.aiter_bytes()
                received = [await chunks.__anext__()]
                ttfb.append(time.perf_counter() - started)
                async for chunk in chunks:
                    received.append(chunk)
            # The answer sent back as the client got it (as every harness does): a client
            # that sent back something else would branch its conversation every turn.
            content = b"".join(received)
            answer = _streamed_text(content) if stream else "".join(b["text"] for b in json.loads(content)["content"] if b["type"] == "text")
            history += [{"role": "assistant", "content": answer}, {"role": "user", "content": f"next {turn}: " + words}]


def _streamed_text(stream: bytes) -> str:
    """The text of a streamed Messages answer (its ``text_delta`` events joined)."""
    text = []
    for line in stream.decode().splitlines():
        if line.startswith("data:"):
            event = json.loads(line[5:])
            if event.get("type") == "content_block_delta" and event["delta"].get("type") == "text_delta":
                text.append(event["delta"]["text"])
    return "".join(text)


def _latency(base: str, clients: int, turns: int, key: str = "bench", stream: bool = True, words: str = "x" * 400) -> tuple[list[float], float, float]:
    """Each request's time to first byte, requests per second, and the process's CPU
    seconds per request (client, proxy and fake upstream all run in this process: the
    difference between a run through the proxy and a direct one is the proxy's)."""
    ttfb: list[float] = []
    started, cpu = time.perf_counter(), time.process_time()

    async def run() -> None:
        await asyncio.gather(*(_client_loop(base, turns, ttfb, n, key, stream, words) for n in range(clients)))

    asyncio.run(run())
    return ttfb, len(ttfb) / (time.perf_counter() - started), (time.process_time() - cpu) / len(ttfb)


def _table(title: str, header: str) -> list[str]:
    """A results table's first lines: its title, a blank line, ``header`` (a Markdown
    row) and the separator row for its columns."""
    return [title, "", header, "|" + "---|" * (header.count("|") - 1)]


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _ms(values: list[float]) -> tuple[float, float]:
    """p50 and p99 of ``values`` (seconds), in ms."""
    return 1000 * _percentile(values, 0.5), 1000 * _percentile(values, 0.99)


def _glyphpack_proxy(upstream: str, workspace: Path, *options: str) -> tuple[Any, str]:
    """``glyphpack proxy`` as a user starts it (a process of its own, any free port): the
    process and its URL, read from the line it announces itself with."""
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "glyphpack", "proxy", "--upstream", upstream, "--workspace", str(workspace), "--port", "0", "--quiet", *options],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    return process, process.stderr.readline().split()[3]


def test_proxy_latency(tmp_path: Path) -> None:
    model = FakeModel([Turn(text="ok")])
    lines = _table(
        "glyphpack proxy against direct, same process, FakeUpstream on 127.0.0.1 (streamed Messages requests, each client its own conversation)",
        "| clients at once | requests | direct TTFB p50 / p99 | proxy TTFB p50 / p99 | added p50 / p99 | direct req/s | proxy req/s | proxy / direct throughput | CPU per request, direct / proxy (added) |",
    )
    with FakeUpstream(model) as upstream, Workspace(tmp_path / "ws") as workspace, Running(Proxy(Recorder(workspace), upstream.url, summarizer=None)) as proxy:
        for clients, turns in ((1, 60), (32, 12)):
            direct, direct_rate, direct_cpu = _latency(upstream.url, clients, turns)
            through, proxy_rate, proxy_cpu = _latency(proxy.url, clients, turns)
            (d50, d99), (p50, p99) = _ms(direct), _ms(through)
            lines.append(
                f"| {clients} | {len(through)} | {d50:.1f} / {d99:.1f} ms | {p50:.1f} / {p99:.1f} ms | {p50 - d50:+.1f} / {p99 - d99:+.1f} ms "
                f"| {direct_rate:.0f} | {proxy_rate:.0f} | {proxy_rate / direct_rate:.2f}x "
                f"| {1000 * direct_cpu:.1f} / {1000 * proxy_cpu:.1f} ms ({1000 * (proxy_cpu - direct_cpu):+.1f} ms) |"
            )
        stored = len(workspace.transcripts())
    TABLES["proxy latency (benchmarks/test_bench_proxy.py)"] = lines
    assert stored == 1 + 32  # every client's conversation recorded (the direct runs go nowhere)
    assert set(model.statuses) == {200}


#: What a client says each turn in the compaction benchmark: words, which every tokenizer
#: prices alike (one 400-character word of "x" is priced far apart by the estimator and
#: the fake's count, and the calibration then puts the difference in the overhead).
LOG_LINES = "the auth service logged a timeout at 10:00:03, then retried; " * 28


def test_proxy_latency_with_a_compaction_in_force(tmp_path: Path) -> None:
    """Added time to first byte below the threshold and above it, one client, one run:
    the same conversation through a proxy that never compacts it and through one whose
    window makes it compact (its first compactions excluded: what is timed is the
    requests built from a compaction in force, not the compactions)."""
    model = FakeModel([Turn(text="ok")])
    lines = _table(
        "glyphpack proxy, one streaming client, 1.7 kB a turn, below the threshold and with a compaction in force (requests 30-60 timed; one run)",
        "| proxy | requests timed | direct TTFB p50 / p99 | proxy TTFB p50 / p99 | added p50 / p99 | compacted requests |",
    )
    with FakeUpstream(model) as upstream:
        # Compacted at about request 21 (12,000 tokens), the view in force from then on.
        for label, settings in (("below the threshold", ProxySettings()), ("a compaction in force", ProxySettings(context_window=60_000, threshold=12_000, target=8_000))):
            with Workspace(tmp_path / label.replace(" ", "-")) as workspace, Running(Proxy(Recorder(workspace, settings), upstream.url, summarizer=None)) as proxy:
                direct, _, _ = _latency(upstream.url, 1, 60, words=LOG_LINES)
                through, _, _ = _latency(proxy.url, 1, 60, words=LOG_LINES)
                # A compacted request carries fewer messages than the client sent (and the recall tool).
                compacted = sum(1 for n, body in enumerate(model.requests[-60:]) if len(body["messages"]) < 2 * n + 1)
            (d50, d99), (p50, p99) = _ms(direct[30:]), _ms(through[30:])
            lines.append(f"| {label} | {len(through[30:])} | {d50:.1f} / {d99:.1f} ms | {p50:.1f} / {p99:.1f} ms | {p50 - d50:+.1f} / {p99 - d99:+.1f} ms | {compacted} of 60 |")
    TABLES["proxy latency with a compaction in force (benchmarks/test_bench_proxy.py)"] = lines
    assert set(model.statuses) == {200}


# ---------------------------------------------------------------------- billed input


def _blocks(body: Json) -> list[tuple[str, bool]]:
    """A Messages request as the cache sees it: (block JSON without its mark, marked),
    in the order the cache hashes them: tools, system, messages."""
    system = body.get("system")
    system = [{"type": "text", "text": system}] if isinstance(system, str) else system or []
    blocks: list[Json] = [*(body.get("tools") or []), *system]
    for message in body["messages"]:
        content = message["content"]
        blocks += [{"type": "text", "text": content}] if isinstance(content, str) else content
        blocks.append({"role": message["role"]})  # the turn boundary is part of the prefix
    out = []
    for block in blocks:
        marked = "cache_control" in block
        out.append((json.dumps({k: v for k, v in block.items() if k != "cache_control"}, sort_keys=True), marked))
    return out


class CacheBill:
    """Anthropic's prompt cache over the bodies an upstream received, in input-token
    equivalents (tokens: characters / ``CHARS_PER_TOKEN``, as the fake counts)."""

    def __init__(self) -> None:
        self.written_prefixes: set[str] = set()
        self.uncached = self.written = self.read = 0
        self.summary_out = 0

    def charge(self, body: Json) -> None:
        """One request, as the cache bills it (a summary request too: one that continues
        the conversation reads it from the cache, a fresh prompt has no mark to read at)."""
        if summary_prompt(body) is not None:
            self.summary_out += 1_000  # the fake's summaries are short; a real one is about this
        blocks = _blocks(body)
        tokens = [int(len(text) / CHARS_PER_TOKEN) for text, _ in blocks]
        hashes, running = [], hashlib.sha256()
        for text, _ in blocks:
            running.update(text.encode())
            hashes.append(running.hexdigest())
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        hit = -1
        for mark in marks:
            for position in range(mark, max(-1, mark - LOOKBACK_BLOCKS - 1), -1):
                if hashes[position] in self.written_prefixes:
                    hit = max(hit, position)
                    break
        last = marks[-1] if marks else -1
        self.read += sum(tokens[: hit + 1])
        self.written += sum(tokens[hit + 1 : last + 1])
        self.uncached += sum(tokens[last + 1 :])
        self.written_prefixes.update(hashes[m] for m in marks)

    @property
    def total(self) -> float:
        return self.uncached + CACHE_WRITE * self.written + CACHE_READ * self.read + OUTPUT * self.summary_out


#: Claude Code compacts at this share of the window, and resumes from the summary and the
#: newest turns: at most this many tool results, this many tokens.
CLAUDE_CODE_SHARE, CLAUDE_CODE_RESULTS, CLAUDE_CODE_KEPT = 0.835, 5, 25_000
TASK = "Find which service failed first in the logs."


def _claude_code_compaction(client: Any, request: Json, history: list[Json]) -> list[Json]:
    """Claude Code's compaction, as the harness does it: a summary request that continues
    the conversation (read from the cache), then the summary and the newest turns."""
    instruction = SUMMARY_REQUEST + ": write a summary of the conversation above to continue from."
    last = history[-1]
    asked = [*history[:-1], {**last, "content": _marked([*last["content"], {"type": "text", "text": instruction}])}]
    summary = client.messages.create(**{**request, "messages": asked}).content[0].text
    start = len(history) - 2  # the newest round: its answer and results
    while start - 2 >= 1:
        kept = history[start - 2 :]
        results = sum(1 for m in kept for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result")
        if results > CLAUDE_CODE_RESULTS or len(json.dumps(kept)) / CHARS_PER_TOKEN > CLAUDE_CODE_KEPT:
            break
        start -= 2
    return [{"role": "user", "content": f"{TASK}\n\nThis session continues from a summary:\n{summary}"}, *history[start:]]


def _agent_session(base: str, calls: int, compacts: bool = False) -> tuple[int, str]:
    """A Claude Code-style loop: (model calls answered, how it ended); ``compacts``: it
    compacts itself as Claude Code does."""
    import anthropic

    client = anthropic.Anthropic(base_url=base, api_key="bench", max_retries=0)
    system = [{"type": "text", "text": "You are a coding agent. " * 400, "cache_control": {"type": "ephemeral"}}]
    tools = [{"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
    history: list[Json] = [{"role": "user", "content": TASK}]
    for call in range(calls + 1):
        request = {"model": "claude-sonnet-4-5", "max_tokens": 1000, "system": system, "tools": tools}
        if compacts and count_tokens({**request, "messages": history}) >= CLAUDE_CODE_SHARE * WINDOW:
            history = _claude_code_compaction(client, request, history)
        # The harness marks its newest message (it reads the conversation so far from the cache).
        sent = [*history[:-1], {**history[-1], "content": _marked(history[-1]["content"])}]
        try:
            response = client.messages.create(**request, messages=sent)
        except anthropic.BadRequestError as error:
            return call, "stopped: too long" if "too long" in str(error) else f"stopped: {str(error)[:60]}"
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in response.content]})
        uses = [b for b in response.content if b.type == "tool_use"]
        if not uses:
            return call + 1, "finished"
        output = "\n".join(f"{i:04d} {uses[0].input['command']} service-{(i * 7919 + call) % 97} status ok latency {i % 13} ms" for i in range(80))
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": output}]})
    return calls + 1, "finished"


def _marked(content: Any) -> list[Json]:
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [dict(b) for b in content]
    blocks[-1]["cache_control"] = {"type": "ephemeral"}
    return blocks


def _bill(bodies: list[Json]) -> CacheBill:
    bill = CacheBill()
    for body in bodies:
        bill.charge(body)
    return bill


def test_proxy_billed_input(tmp_path: Path) -> None:
    calls = 260
    script = [Turn(calls=(("Bash", {"command": f"cat /var/log/svc{i}.log"}),)) for i in range(calls)] + [Turn(text="auth failed first.")]
    runs = {}
    for route in ("direct", "claude code", "proxy"):
        model = FakeModel(list(script), limit=WINDOW)
        with FakeUpstream(model) as upstream, Workspace(tmp_path / route) as workspace:
            started = time.perf_counter()
            if route != "proxy":
                answered, ending = _agent_session(upstream.url, calls, compacts=route == "claude code")
            else:
                with Running(Proxy(Recorder(workspace, ProxySettings()), upstream.url)) as proxy:
                    answered, ending = _agent_session(proxy.url, calls)
            seconds = time.perf_counter() - started
        accepted = [body for body, status in zip(model.requests, model.statuses) if status == 200]
        agent = [body for body in accepted if summary_prompt(body) is None]
        # A request that bills less than the one before it: a compaction replaced the prefix.
        sizes = [sum(int(len(text) / CHARS_PER_TOKEN) for text, _ in _blocks(body)) for body in agent]
        compactions = sum(1 for a, b in zip(sizes, sizes[1:]) if b < a)
        runs[route] = (answered, ending, accepted, agent, compactions, seconds)
    both = min(run[0] for run in runs.values())

    def upto(route: str) -> CacheBill:  # the first ``both`` calls, with the summaries made before the last of them
        accepted, agent = runs[route][2], runs[route][3]
        return _bill(accepted[: accepted.index(agent[both - 1]) + 1])

    direct_common = upto("direct").total
    lines = _table(
        f"a scripted {calls}-call agent session (4 kB tool outputs, a 10 kB system prompt), {WINDOW // 1000}k window, Session's default "
        "thresholds; billed input-token equivalents on the bodies the upstream received (write 1.25x, read 0.1x, summary output 5x)",
        f"| route | calls answered | how it ended | compactions | summary calls | billed, first {both} calls | against direct | billed, whole run | against claude code | per call | seconds |",
    )
    claude_code = _bill(runs["claude code"][2]).total
    for route, (answered, ending, accepted, agent, compactions, seconds) in runs.items():
        whole, common = _bill(accepted), upto(route).total
        summaries = len(accepted) - len(agent)
        versus = f"{whole.total / claude_code - 1:+.1%}" if ending == "finished" else "—"
        lines.append(
            f"| {route} | {answered} | {ending} | {compactions} | {summaries} | {common:,.0f} | {common / direct_common:.2f}x "
            f"| {whole.total:,.0f} | {versus} | {whole.total / max(1, answered):,.0f} | {seconds:.1f} |"
        )
    TABLES["proxy billed input (benchmarks/test_bench_proxy.py)"] = lines
    assert runs["proxy"][1] == "finished" and runs["proxy"][0] == calls + 1


# ---------------------------------------------------------------------- a growing conversation


def _growing(requests: int, own_recall_tool: bool) -> dict[int, tuple[float, float]]:
    """The recorder alone (no HTTP) on one conversation growing by a tool call and a
    9 kB result per request, 10M-token window (no threshold reached): the median of the
    body's parse (``BodyParser``, as the server parses it), ``prepare`` and ``finish``
    over requests n..n+9, in ms, for n in 10, 100, 500, 990: (before the request could go
    upstream: the parse and ``prepare``; in all, ``finish`` too).
    ``own_recall_tool``: the client defines a tool named ``glyphpack_recall`` itself, so
    the proxy offers none and elides nothing (the pure pass-through path); otherwise old
    results are elided once that pays (a compaction in force: each request built)."""
    import statistics
    import tempfile


    tools = [{"name": "glyphpack_recall", "description": "the client's own", "input_schema": {"type": "object"}}] if own_recall_tool else []
    messages: list[Json] = [{"role": "user", "content": "summarize the repository"}]
    before: list[float] = []
    times: list[float] = []
    with tempfile.TemporaryDirectory() as folder, Workspace(folder) as workspace:
        recorder, bodies = Recorder(workspace, ProxySettings(context_window=10_000_000)), BodyParser()
        for n in range(requests):
            body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages, **({"tools": tools} if tools else {})}
            counted = count_tokens(body)  # what the provider reports (as FakeUpstream does): the session calibrates on it
            raw = json.dumps(body).encode()
            started = time.perf_counter()
            exchange = recorder.prepare("anthropic", bodies.parse(raw))
            before.append(time.perf_counter() - started)
            call = {"type": "tool_use", "id": f"toolu_{n:04d}", "name": "read", "input": {"path": f"f{n}.py"}}
            answer = {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [call],
                      "stop_reason": "tool_use", "usage": {"input_tokens": counted, "output_tokens": 5}}  # fmt: skip
            recorder.finish(exchange, answer)
            times.append(time.perf_counter() - started)
            messages += [{"role": "assistant", "content": [call]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": f"line of code {n}\n" * 600}]}]  # fmt: skip
        recorder.close()
    return {n: (1000 * statistics.median(before[n : n + 10]), 1000 * statistics.median(times[n : n + 10])) for n in (10, 100, 500, 990) if n + 10 <= requests}


def test_a_growing_conversation() -> None:
    lines = _table(
        "the recorder alone, one conversation growing by a 9 kB tool result a request (median of ten requests from each, ms)",
        "| path | measured | request 10 | request 100 | request 500 | request 990 | 990 / 10 |",
    )
    for label, own in (("pass-through (nothing compacted)", True), ("old results elided (a compaction in force)", False)):
        at = _growing(1000, own)
        for part, measured in ((0, "parse and prepare (before it goes upstream)"), (1, "in all (the record too)")):
            lines.append(f"| {label} | {measured} | " + " | ".join(f"{at[n][part]:.1f}" for n in (10, 100, 500, 990)) + f" | {at[990][part] / at[10][part]:.1f}x |")
    TABLES["proxy: a growing conversation (benchmarks/test_bench_proxy.py)"] = lines


def _bare_proxy(upstream: str) -> tuple[Any, str]:
    """``bare_proxy.py`` (the floor: the same stack, nothing read or recorded) as a
    process of its own: the process and its URL."""
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, str(Path(__file__).with_name("bare_proxy.py")), upstream], stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    return process, process.stderr.readline().strip()


#: A request number's neighbours whose median is reported (``test_a_growing_conversation_end_to_end``).
AROUND = 10


def test_a_growing_conversation_end_to_end(tmp_path: Path) -> None:
    """One conversation growing by a tool call and a 9 kB result a request, 1,000
    requests, sent directly, through the floor (``bare_proxy.py``) and through
    ``glyphpack proxy`` (10M-token window: below the threshold throughout) twice: with
    the client defining a tool named ``glyphpack_recall`` itself (so the proxy offers
    none and elides nothing: every request passes as it came) and as it comes (old
    results elided in batches once that pays: a compaction in force, each request
    built). Each request number goes to every route in turn (the order rotating), each
    route continuing its own conversation with its own answers: the time to the answer's
    first byte at requests 10, 100, 500 and 990 (the median of ten from each), and what
    each route adds to direct."""
    import statistics

    requests = 1000
    model = FakeModel([Turn(calls=(("read", {"path": "f.py"}),))], limit=10**9)
    read = {"name": "read", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
    own_recall = {"name": "glyphpack_recall", "description": "the client's own", "input_schema": {"type": "object"}}
    passes = "glyphpack proxy, passing every request (the client's own glyphpack_recall)"
    window = ("--context-window", "10000000")
    with FakeUpstream(model) as upstream:
        proxies = {
            "floor (bare_proxy.py)": _bare_proxy(upstream.url),
            passes: _glyphpack_proxy(upstream.url, tmp_path / "passes", *window),
            "glyphpack proxy, old results elided in batches": _glyphpack_proxy(upstream.url, tmp_path / "elides", *window),
        }
        bases = {"direct": upstream.url, **{name: url for name, (_, url) in proxies.items()}}
        tools = {name: [read, own_recall] if name == passes else [read] for name in bases}
        histories: dict[str, list[Json]] = {name: [{"role": "user", "content": "summarize the repository"}] for name in bases}
        ttfb: dict[str, list[float]] = {name: [] for name in bases}
        try:
            clients = {name: httpx.Client(base_url=base, timeout=120, headers={"x-api-key": "bench"}) for name, base in bases.items()}
            names = list(bases)
            for n in range(requests):
                for name in names[n % len(names) :] + names[: n % len(names)]:
                    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "tools": tools[name], "messages": histories[name]}
                    raw = json.dumps(body).encode()
                    started = time.perf_counter()
                    with clients[name].stream("POST", "/v1/messages", content=raw, headers={"content-type": "application/json"}) as response:
                        assert response.status_code == 200, f"{name}: {response.status_code}"
                        chunks = response.iter_bytes()
                        received = [next(chunks)]
                        ttfb[name].append(time.perf_counter() - started)
                        received += list(chunks)
                    call = json.loads(b"".join(received))["content"][0]
                    model.requests.clear()  # the fake keeps every body it parsed: gigabytes by the end
                    histories[name] += [{"role": "assistant", "content": [call]},
                                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": f"line of code {n}\n" * 600}]}]  # fmt: skip
            for client in clients.values():
                client.close()
        finally:
            for process, _ in proxies.values():
                process.terminate()
                process.communicate(timeout=60)
    at = (10, 100, 500, 990)

    def median(name: str, n: int) -> float:
        return 1000 * statistics.median(ttfb[name][n : n + AROUND])

    def added(name: str, n: int) -> float:
        """The median over requests n..n+9 of each request's time through ``name`` less
        the same request number's sent directly (the two sent one after the other)."""
        return 1000 * statistics.median(route - direct for route, direct in zip(ttfb[name][n : n + AROUND], ttfb["direct"][n : n + AROUND]))

    lines = _table(
        "one conversation growing by a 9 kB tool result a request (about 9 MB at request 990), whole answers, each route its own conversation, "
        "the request numbers interleaved: time to the answer's first byte (median of ten from each) and, in brackets, added to direct's "
        "(the median of the ten differences, request by request), ms",
        "| route | " + " | ".join(f"request {n}" for n in at) + " | added at 990 / added at 10 |",
    )
    lines.append("| direct | " + " | ".join(f"{median('direct', n):.1f}" for n in at) + " | |")
    for name in proxies:
        more = {n: added(name, n) for n in at}
        lines.append(f"| {name} | " + " | ".join(f"{median(name, n):.1f} ({more[n]:+.1f})" for n in at) + f" | {more[990] / more[10]:.1f}x |")
    TABLES["proxy: a growing conversation end to end (benchmarks/test_bench_proxy.py)"] = lines


# ---------------------------------------------------------------------- worker processes


def test_proxy_worker_processes(tmp_path: Path) -> None:
    """``glyphpack proxy --workers N`` as a user starts it (a subprocess), 32 clients at
    once, against direct in the same run: what more processes give on this machine's
    two cores, which the clients and the fake upstream (this process) share with them."""
    model = FakeModel([Turn(text="ok")])
    lines = _table(
        "glyphpack proxy --workers N (a subprocess), 32 streaming clients at once, 12 requests each; direct measured in the same run",
        "| route | TTFB p50 / p99 | requests/s | against direct |",
    )
    with FakeUpstream(model) as upstream:
        direct, direct_rate, _ = _latency(upstream.url, 32, 12)
        d50, d99 = _ms(direct)
        lines.append(f"| direct | {d50:.1f} / {d99:.1f} ms | {direct_rate:.0f} | 1.00x |")
        for workers in (1, 2):
            proxy, url = _glyphpack_proxy(upstream.url, tmp_path / f"ws-{workers}", "--workers", str(workers))
            try:
                _latency(url, 4, 3)  # every worker's first requests (imports, sessions) out of the way
                through, rate, _ = _latency(url, 32, 12)
            finally:
                proxy.terminate()
                proxy.communicate(timeout=60)
            p50, p99 = _ms(through)
            lines.append(f"| proxy, {workers} worker{'s' if workers > 1 else ''} | {p50:.1f} / {p99:.1f} ms | {rate:.0f} | {rate / direct_rate:.2f}x |")
    TABLES["proxy: worker processes (benchmarks/test_bench_proxy.py)"] = lines


# ---------------------------------------------------------------------- against LiteLLM


def _started(command: list[str], env: dict[str, str], ready: str, timeout: float = 120.0) -> Any:
    """A server process, once ``ready`` (a URL) answers."""
    import subprocess

    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{command[0]} stopped: {process.stderr.read() if process.stderr else ''}")
        try:
            if httpx.get(ready, timeout=2).status_code < 500:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"{command[0]} did not answer at {ready} in {timeout:.0f} s")


MASTER_KEY = "sk-bench-master"


def _cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system) used so far by process ``pid`` and every process
    under it (a server's workers), from /proc."""
    import os

    def stat(number: int) -> list[str]:
        with open(f"/proc/{number}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()  # the fields after the command's name

    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                children.setdefault(int(stat(int(entry))[1]), []).append(int(entry))
            except OSError:  # gone meanwhile
                continue
    ticks, todo = 0, [pid]
    while todo:
        number = todo.pop()
        try:
            fields = stat(number)
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
        todo += children.get(number, [])
    return ticks / os.sysconf("SC_CLK_TCK")


def test_against_litellm(tmp_path: Path) -> None:
    """The same clients, the same fake upstream, one run: direct, LiteLLM's proxy in
    pass-through mode (``/anthropic``, what its docs give for sending the native API on
    untranslated), and glyphpack's proxy, each a process of its own, with one worker
    process and with two, at 1, 8, 32 and 128 clients. LiteLLM from ``GLYPHPACK_LITELLM`` (its ``litellm`` command) or the PATH;
    install it with ``pip install 'litellm[proxy]'`` (in a virtual environment of its
    own: it pins its own httpx and openai)."""
    import os
    import shutil
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from postgres_server import free_port  # a port for LiteLLM, which binds its own

    litellm = os.environ.get("GLYPHPACK_LITELLM") or shutil.which("litellm")
    if not litellm:
        pytest.skip("LiteLLM is not installed: pip install 'litellm[proxy]' and set GLYPHPACK_LITELLM to its litellm command")
    model = FakeModel([Turn(text="ok")])
    lines = _table(
        "direct, LiteLLM's proxy (pass-through, /anthropic) and glyphpack's proxy, each with one worker process and with two, "
        "the same fake upstream and clients, one run",
        "| clients at once | answers | route | TTFB p50 / p99 | added p50 / p99 | requests/s | against direct | proxy CPU per request |",
    )
    with FakeUpstream(model) as upstream:
        # LiteLLM refuses to start without a master key; the clients send it as their key.
        env = dict(os.environ, ANTHROPIC_API_BASE=upstream.url, ANTHROPIC_API_KEY="bench", LITELLM_LOG="ERROR", LITELLM_MASTER_KEY=MASTER_KEY)
        routes: dict[str, tuple[Any, str]] = {}
        for workers in (1, 2):
            port, named = free_port(), "" if workers == 1 else f", {workers} workers"
            command = [litellm, "--host", "127.0.0.1", "--port", str(port), "--num_workers", str(workers)]
            routes["LiteLLM" + named] = (_started(command, env, f"http://127.0.0.1:{port}/health/liveliness"), f"http://127.0.0.1:{port}/anthropic")
            routes["glyphpack" + named] = _glyphpack_proxy(upstream.url, tmp_path / f"ws-{workers}", "--workers", str(workers))
        try:
            for _, base in routes.values():
                _latency(base, 8, 3, MASTER_KEY)  # first requests (imports, connections, each worker's) out of the way
            for stream in (True, False):
                answers = "streamed" if stream else "whole"
                for clients, turns in ((1, 40), (8, 12), (32, 8), (128, 4)):
                    direct, direct_rate, _ = _latency(upstream.url, clients, turns, MASTER_KEY, stream)
                    d50, d99 = _ms(direct)
                    lines.append(f"| {clients} | {answers} | direct | {d50:.1f} / {d99:.1f} ms | | {direct_rate:.0f} | 1.00x | |")
                    for name, (process, base) in routes.items():
                        cpu = _cpu_seconds(process.pid)
                        through, rate, _ = _latency(base, clients, turns, MASTER_KEY, stream)
                        per_request = 1000 * (_cpu_seconds(process.pid) - cpu) / len(through)
                        p50, p99 = _ms(through)
                        lines.append(f"| {clients} | {answers} | {name} | {p50:.1f} / {p99:.1f} ms | {p50 - d50:+.1f} / {p99 - d99:+.1f} ms | {rate:.0f} "
                                     f"| {rate / direct_rate:.2f}x | {per_request:.1f} ms |")  # fmt: skip
        finally:
            for process, _ in routes.values():
                process.terminate()
                process.communicate(timeout=60)
    TABLES["proxy against LiteLLM (benchmarks/test_bench_proxy.py)"] = lines
