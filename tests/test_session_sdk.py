"""A harness's loop through the real SDK clients (anthropic, openai, google-genai) against
local fake servers (glyphpack/testing/fake.py): every request the fake receives is checked
as the provider checks it; compaction at the threshold; the prefix byte-identical from
turn to turn until a compaction; recovery from each provider's "too long" 400, a 413 and
a 429; escalation that never loops; the example agent end to end."""

from __future__ import annotations

import base64
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

import glyphpack
from glyphpack import CompactionError, Message, Text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import agent

from glyphpack.testing.fake import FakeModel, Turn, count_tokens

MODELS = {"anthropic": "claude-sonnet-4-5", "openai-chat": "gpt-5.4", "openai-responses": "gpt-5.4", "gemini": "gemini-3-pro"}
APIS = tuple(MODELS)
#: The session's rungs with dense (5x8) pages, for tests of its mechanics with pages in
#: small windows (by default a reader's pages are in the shape it reads exactly).
DENSE_SESSION = glyphpack.CompactionPolicy(rungs=("image drop", "snapshot", "summarization"), fidelity="dense")
#: The Anthropic case runs by default; the other APIs' in CI (and with --run-slow).
APIS_ANTHROPIC_FIRST = [APIS[0], *(pytest.param(api, marks=pytest.mark.slow) for api in APIS[1:])]
WIRE = {"anthropic": "messages", "openai-chat": "messages", "openai-responses": "input", "gemini": "contents"}


def project(tmp_path: Path, files: int = 40, chars: int = 6_000) -> Path:
    """A directory of distinct source-like files to read (each about ``chars`` characters)."""
    root = tmp_path / "project"
    root.mkdir()
    rng = random.Random(7)
    words = ["def", "return", "self", "value", "index", "config", "parse", "render", "page", "token", "=", "(", ")", ":"]
    for n in range(files):
        lines = []
        while sum(len(line) + 1 for line in lines) < chars:
            lines.append("    " + " ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) + f"  # {n}:{len(lines)}")
        (root / f"mod_{n:02d}.py").write_text("\n".join(lines))
    return root


def reading_script(turns: int) -> list[Turn]:
    """The model reads one file per turn, then answers."""
    return [Turn(text=f"reading module {n}", calls=(("read_file", {"path": f"mod_{n:02d}.py"}),)) for n in range(turns)] + [
        Turn(text="All modules read; the parser is in mod_03.py.")
    ]


def summarizer() -> glyphpack.Summarizer:
    return glyphpack.Summarizer(lambda prompt: f"Summary: read {prompt.count('read_file')} files; nothing else of note.")


def strip_cache_marks(value: Any) -> Any:
    """A request without Anthropic's cache_control marks (they move to the newest message
    each turn by design; the cache keys on the content)."""
    if isinstance(value, dict):
        return {k: strip_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_marks(v) for v in value]
    return value


def drive(session: glyphpack.Session, fake: FakeModel, api: str, root: Path) -> tuple[str, list[str | None]]:
    """Run the example agent's loop; returns its answer and, per request built, the
    compaction in force (its ``covers`` id; None: the full transcript)."""
    views: list[str | None] = []
    build = session.request

    def recording(api_name: str, **extra: Any) -> dict[str, Any]:
        request = build(api_name, **extra)
        views.append(session.view.covers if session.view else None)
        return request

    session.request = recording  # type: ignore[method-assign]
    return agent.run(session, fake.client(api), api, root, max_turns=80), views


@pytest.mark.parametrize("api", APIS_ANTHROPIC_FIRST)
def test_loop_compacts_at_the_threshold_and_keeps_the_prefix_stable(tmp_path, api):
    root = project(tmp_path)
    fake = FakeModel(reading_script(30))
    with glyphpack.open_session(tmp_path / "ws", "task", "coder", model=MODELS[api], system=agent.SYSTEM, context_window=30_000,
                                policy=DENSE_SESSION) as s:
        s.add_user("Read every module and tell me where the parser is.")
        answer, views = drive(s, fake, api, root)
        assert answer.startswith("All modules read")
        assert fake.statuses == [200] * len(fake.requests)  # every request accepted as valid
        # compaction happened at the threshold, a few times, never every turn
        compactions = [i for i in range(1, len(views)) if views[i] != views[i - 1]]
        assert 1 <= len(compactions) <= 4, compactions
        assert all(count_tokens(body) < 30_000 for body in fake.requests)
        # between compactions each request begins with the whole previous one, byte for byte
        for i in range(1, len(fake.requests)):
            before, after = (strip_cache_marks(fake.requests[j][WIRE[api]]) for j in (i - 1, i))
            same_prefix = json.dumps(after[: len(before)]) == json.dumps(before)
            assert same_prefix == (i not in compactions), f"request {i + 1}: prefix changed={not same_prefix}"
        # the transcript on disk is the whole history, and the tree agrees with it
        stored = s.workspace.load("task", "coder")
        assert stored.messages == s.messages and stored.state == "answered"
        assert s.workspace.tree.path_to(s.workspace.tree.agent_tip("task", "coder")) == list(s.messages)
        check_images_unresized(api, fake.requests[-1], s.profile.reader)
        if api == "anthropic":
            check_cache_breakpoints(fake.requests, compacted=s.view is not None)


def check_images_unresized(api: str, body: dict[str, Any], reader: Any) -> None:
    """Snapshot pages reach each API with the reader's detail / media resolution."""
    text = json.dumps(body)
    if api == "openai-chat":
        assert text.count(f'"detail": "{reader.detail}"') == text.count('"image_url": {') > 0
    elif api == "openai-responses":
        assert text.count(f'"detail": "{reader.detail}"') == text.count('"type": "input_image"') > 0
    elif api == "gemini":
        assert text.count(reader.media_resolution) == text.count('"inlineData"') > 0
    else:
        assert text.count('"type": "image"') > 0


def check_cache_breakpoints(requests: list[dict[str, Any]], *, compacted: bool) -> None:
    """At most 4 breakpoints; one on the newest message (the next turn reads it from the
    cache) and, once compacted, one at the end of the compaction."""
    counts = []
    for body in requests:
        marks = [(i, j) for i, m in enumerate(body["messages"]) for j, b in enumerate(m["content"]) if "cache_control" in b]
        assert len(marks) + sum("cache_control" in b for b in body.get("system", [])) <= 4
        assert marks and marks[-1][0] == len(body["messages"]) - 1
        counts.append(len(marks))
    assert compacted and max(counts) == 2


@pytest.mark.parametrize("api", APIS_ANTHROPIC_FIRST)
def test_413_and_429(tmp_path, api):
    """A 413 compacts by bytes; a 429 is the SDK's to retry (the session is not involved)."""
    root = project(tmp_path, files=14)
    fake = FakeModel(reading_script(14), faults={4: "429", 13: "413"})
    # Without recall's batches, which would already have elided much of what the 413 frees.
    with glyphpack.open_session(tmp_path / "ws", "task", "coder", model=MODELS[api], recall=False) as s:
        s.add_user("Read the modules.")
        answer, _ = drive(s, fake, api, root)
    assert answer.startswith("All modules read")
    assert fake.statuses[3:5] == [429, 200]  # the SDK retried
    assert fake.statuses[12] == 413 and fake.statuses[13] == 200
    assert len(json.dumps(fake.requests[13])) < 0.75 * len(json.dumps(fake.requests[12]))  # old results elided


def test_a_413_without_a_summarizer_cuts_the_newest_results_and_one_nothing_can_shrink_says_so(tmp_path):
    """The newest result, which the free rungs protect, is what a 413 without a
    summarizer cuts (behind its ref); only a task too large in itself is an error."""
    root = project(tmp_path, files=3)
    fake = FakeModel(reading_script(3), faults={2: "413"})
    with glyphpack.open_session(tmp_path / "ws", "task", "coder", model="claude-sonnet-4-5") as s:
        s.add_user("Read the modules.")
        answer, _ = drive(s, fake, "anthropic", root)
        assert s.last_compaction is not None and s.last_compaction.report.rung("tail cut").changed == 1
    assert answer.startswith("All modules read") and fake.statuses == [200, 413, 200, 200, 200]
    fake = FakeModel(reading_script(3), faults={1: "413"})
    with glyphpack.open_session(tmp_path / "ws2", "task", "coder", model="claude-sonnet-4-5") as s:
        s.add_user("Read the modules. " * 2_000)
        with pytest.raises(CompactionError, match="too large in bytes .* a summarizer would"):
            drive(s, fake, "anthropic", root)
    assert fake.statuses == [413]


@pytest.mark.parametrize(("with_summarizer", "rejections"), [(False, 3), (True, 3)])
def test_a_provider_that_keeps_rejecting_ends_in_an_error_not_a_loop(tmp_path, with_summarizer, rejections):
    root = project(tmp_path, files=6)
    fake = FakeModel(reading_script(6), faults={n: "overflow" for n in range(5, 100)})
    with glyphpack.open_session(
        tmp_path / "ws", "task", "coder", model="claude-sonnet-4-5", summarizer=summarizer() if with_summarizer else None
    ) as s:
        s.add_user("Read the modules.")
        with pytest.raises(CompactionError, match="too long .* times in a row|no summarizer"):
            drive(s, fake, "anthropic", root)
    assert len(fake.requests) == 4 + rejections


def test_a_reader_without_vision_needs_a_summarizer_and_gets_summaries(tmp_path):
    with pytest.raises(glyphpack.TextOnlyModelError, match="summarizer"):
        glyphpack.open_session(tmp_path / "ws", "t", "a", model="o1-mini")
    root = project(tmp_path)
    fake = FakeModel(reading_script(30))
    calls = []

    def summarize(prompt: str) -> str:
        calls.append(prompt)
        return "Summary of the reading so far."

    with glyphpack.open_session(
        tmp_path / "ws", "t", "a", model="o1-mini", summarizer=glyphpack.Summarizer(summarize), context_window=30_000
    ) as s:
        if s.profile.vision:  # pragma: no cover - the catalog's text-only OpenAI reader
            pytest.skip("o1-mini resolves to a vision reader")
        s.add_user("Read every module.")
        drive(s, fake, "openai-chat", root)
    assert calls
    assert all("image_url" not in json.dumps(body) for body in fake.requests)


def loop_as_written(api: str, client: Any, s: glyphpack.Session, root: Path) -> str:
    """The loop of issue 12 and the README, as written, with each SDK's own error class."""
    tools = agent.tool_schemas(api)
    if api == "anthropic":
        import anthropic

        bad_request: type[Exception] = anthropic.BadRequestError
        create = lambda request: client.messages.create(**request, max_tokens=4096)
    elif api == "openai-chat":
        import openai

        bad_request = openai.BadRequestError
        create = lambda request: client.chat.completions.create(**request)
    elif api == "openai-responses":
        import openai

        bad_request = openai.BadRequestError
        create = lambda request: client.responses.create(**request)
    else:
        from google.genai import errors

        bad_request = errors.ClientError
        create = lambda request: client.models.generate_content(**request)
    while True:
        request = s.request(api, **tools)
        try:
            response = create(request)
        except bad_request as e:
            s.recover(e)
            continue
        answer = s.add_response(response)
        if not s.pending_calls:
            return answer.text
        s.add_tool_results({c.id: agent.run_tool(root, c.name, c.arguments) for c in s.pending_calls})


@pytest.mark.parametrize("api", APIS_ANTHROPIC_FIRST)
def test_the_loop_as_written(tmp_path, api):
    root = project(tmp_path, files=10)
    fake = FakeModel(reading_script(10), limit=9_000)
    with glyphpack.open_session(tmp_path / "ws", "task-42", "coder", model=MODELS[api], system=agent.SYSTEM,
                                summarizer=summarizer()) as s:
        s.add_user("fix the failing test")
        assert loop_as_written(api, fake.client(api), s, root).startswith("All modules read")
        # the fake's window is smaller than the session believes: its 400, in the provider's
        # own words, was answered by compacting to what it measured, and the window it
        # stated (or the refused size, where the wording has no number) is kept from then
        # on: no turn after it is refused
        assert s.view is not None
        learned = s.workspace.settings("task-42", "coder")["learned_window"]
        assert learned == 9_000 if api != "openai-responses" else learned < s.thresholds.window + 1
    rejected = [i for i, status in enumerate(fake.statuses) if status == 400]
    assert len(rejected) == 1 and fake.statuses[-1] == 200
    assert all(count_tokens(b) <= 9_000 for b, status in zip(fake.requests, fake.statuses) if status == 200)


def test_gemini_3_takes_calls_that_have_no_signature_and_gets_back_those_it_signed(tmp_path):
    """Gemini 3 rejects the current turn's function calls without a thought signature
    ("Function call is missing a thought_signature"): calls made by another model, or
    imported, get Google's documented skip sentinel; the ones Gemini signed go back with
    their own signature (the fake checks both, through the real SDK)."""
    from glyphpack import Message, ToolCall

    fake = FakeModel([Turn("done")])
    client = fake.client("gemini")
    with glyphpack.open_session(tmp_path / "ws", "task", "coder", model="gemini-3-pro") as s:
        s.add_user("list the files")
        s.add_response(Message("assistant", (ToolCall("call_1", "ls", {}), ToolCall("call_2", "ls", {"path": "src"}))))
        s.add_tool_results({"call_1": "a.py", "call_2": "b.py"})
        request = s.request("gemini")
        parts = [p for c in request["contents"] for p in c["parts"] if "function_call" in p]
        assert [p.get("thought_signature") for p in parts] == [b"skip_thought_signature_validator", None]
        response = client.models.generate_content(**request)
        assert fake.statuses == [200]
        s.add_response(response)
    with glyphpack.open_session(tmp_path / "ws2", "task", "coder", model="gemini-2.5-pro") as older:
        older.add_user("list")
        older.add_response(Message("assistant", (ToolCall("c", "ls", {}),)))
        older.add_tool_results({"c": "a.py"})
        parts = [p for c in older.request("gemini")["contents"] for p in c["parts"] if "function_call" in p]
        assert "thought_signature" not in parts[0]  # older models take calls without one


@pytest.mark.parametrize("api", APIS_ANTHROPIC_FIRST)
def test_the_short_loop(tmp_path, api):
    """The 20 lines every harness wrote (map the API to the SDK method, catch its error
    class, recover, add the response) are one call: the fake's window is smaller than
    the session believes, and its 400s are recovered from inside ``call``."""
    root = project(tmp_path, files=10)
    fake = FakeModel(reading_script(10), limit=9_000)
    client = fake.client(api)
    with glyphpack.open_session(tmp_path / "ws", "task", "coder", model=MODELS[api], system=agent.SYSTEM,
                                summarizer=summarizer()) as s:
        s.add_user("fix the failing test")
        while True:
            answer = s.call(client, api=api if api == "openai-responses" else None, **agent.tool_schemas(api))
            if not s.pending_calls:
                break
            s.add_tool_results({c.id: agent.run_tool(root, c.name, c.arguments) for c in s.pending_calls})
        assert answer.text.startswith("All modules read") and s.view is not None
    assert fake.statuses.count(400) == 1 and fake.statuses[-1] == 200  # the window learned from the one refusal
    with pytest.raises(glyphpack.UsageError, match="not an anthropic, openai or google-genai client"):
        s.call(object())


@pytest.mark.slow  # the openai client (the Anthropic loops run by default): CI runs it
def test_responses_reasoning_goes_back_encrypted_as_openai_asks(tmp_path):
    """With ``store=False`` and ``include=["reasoning.encrypted_content"]``, each
    reasoning item the model gave comes back in later requests, before its calls, with
    its encrypted content unchanged (the fake verifies it, as OpenAI does); it survives a
    restart, since the transcript keeps it."""
    root = project(tmp_path, files=3)
    fake = FakeModel(reading_script(3))
    client = fake.client("openai-responses")
    extra = {"store": False, "include": ["reasoning.encrypted_content"], **agent.tool_schemas("openai-responses")}
    with glyphpack.open_session(tmp_path / "ws", "task", "coder", model="gpt-5.4") as s:
        s.add_user("read the modules")
        s.call(client, api="openai-responses", **extra)
        s.add_tool_results({c.id: agent.run_tool(root, c.name, c.arguments) for c in s.pending_calls})
    with glyphpack.open_session(tmp_path / "ws", "task", "coder", model="gpt-5.4") as s:  # a new process's view
        while True:
            s.call(client, api="openai-responses", **extra)
            if not s.pending_calls:
                break
            s.add_tool_results({c.id: agent.run_tool(root, c.name, c.arguments) for c in s.pending_calls})
    assert set(fake.statuses) == {200} and len(fake.requests) == 4
    for number, body in enumerate(fake.requests[1:], 2):
        sent = [(i["id"], i["encrypted_content"]) for i in body["input"] if i.get("type") == "reasoning"]
        assert sent == [(f"rs_{n}", fake.encrypted[f"rs_{n}"]) for n in range(1, number)]
        kinds = [i.get("type", "message") for i in body["input"]]
        assert kinds.index("reasoning") < kinds.index("function_call")  # the model's order: reasoning, then its calls
    # Without the encrypted content the id alone names nothing OpenAI kept: it stays out.
    bare = Message("assistant", (glyphpack.Opaque("reasoning", {"type": "reasoning", "id": "rs_9", "summary": []}), Text("hi")))
    assert [i.get("type", "message") for i in glyphpack.to_openai_responses([Message("user", "q"), bare])[1]] == ["message", "message"]


@pytest.mark.slow  # the openai client: CI runs it
def test_the_fake_refuses_reasoning_it_did_not_issue_as_openai_does():
    import openai

    fake = FakeModel([Turn(text="ok")])
    client = fake.client("openai-responses")
    user = {"role": "user", "content": "q"}
    with pytest.raises(openai.BadRequestError, match="The encrypted content for item rs_1 could not be verified"):
        client.responses.create(model="gpt-5.4", store=False, input=[user, {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "forged"}])
    with pytest.raises(openai.BadRequestError, match="Item with id 'rs_1' not found"):
        client.responses.create(model="gpt-5.4", store=False, input=[user, {"type": "reasoning", "id": "rs_1", "summary": []}])


def test_the_fake_refuses_tool_blocks_without_tools_as_anthropic_does():
    import anthropic

    client = FakeModel([Turn(text="ok")]).client("anthropic")
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]}]
    with pytest.raises(anthropic.BadRequestError, match="must define tools"):
        client.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=messages)
    assert client.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=messages,
                                  tools=[{"name": "ls", "input_schema": {"type": "object"}}]).content[0].text == "ok"


#: The hidden loop's extra arguments per API: Responses with encrypted reasoning sent back.
HIDDEN_EXTRA: dict[str, dict[str, Any]] = {"openai-responses": {"store": False, "include": ["reasoning.encrypted_content"]}}


@pytest.mark.parametrize("api", APIS_ANTHROPIC_FIRST)
def test_ten_tool_turns_one_overflow_recovered_on_every_api(tmp_path, api):
    """The hidden loop's shape: ten tool turns through the SDK, the provider rejects one
    request as too long (its window just under it), the session recovers and the loop
    finishes. On Responses each answer carries 8,000 characters of encrypted reasoning,
    which go back in every request: they are counted, and all but the newest answer's
    are the first thing the recovery leaves out."""
    root = project(tmp_path, files=10, chars=1_500)
    fake = FakeModel(reading_script(10), faults={8: "overflow"}, reasoning_chars=8_000)
    client = fake.client(api)
    extra = {**agent.tool_schemas(api), **HIDDEN_EXTRA.get(api, {})}
    with glyphpack.open_session(tmp_path / "ws", "task", "coder", model=MODELS[api], summarizer=summarizer()) as s:
        s.add_user("Read every module and tell me where the parser is.")
        while True:
            answer = s.call(client, api=api, **extra)
            if not s.pending_calls:
                break
            s.add_tool_results({c.id: agent.run_tool(root, c.name, c.arguments) for c in s.pending_calls})
        assert answer.text.startswith("All modules read")
    assert fake.statuses.count(400) == 1 and fake.statuses[7] == 400 and fake.statuses[8] == 200
    rejected, retried = fake.requests[7], fake.requests[8]
    assert count_tokens(retried) < count_tokens(rejected)
    if api == "openai-responses":
        reasoning = [[i for i in body["input"] if i.get("type") == "reasoning"] for body in (rejected, retried)]
        assert len(reasoning[0]) == 7 and len(reasoning[1]) == 1  # all but the newest answer's left out
        assert reasoning[1][0]["id"] == "rs_7"
        # Counted: the estimate of the request that was rejected carried them.
        assert s.cost().history(s.messages) > sum(len(m.text) for m in s.messages) / 4


def window_run(tmp_path: Path, api: str, window: int, outputs: list[str], told: int | None = -1, **options: Any) -> tuple[glyphpack.Session, FakeModel, str]:
    """A tool loop (one output of ``outputs`` per turn) through the real SDK against a
    fake whose window is ``window`` tokens, by a session told ``told`` (-1: that window;
    None: nothing, so it starts from the model's catalog window), with no summarizer:
    (the session, the fake, the answer)."""
    script = [Turn(text=f"step {n}", calls=(("read_file", {"path": f"out_{n}.txt"}),)) for n in range(len(outputs))] + [Turn(text="done")]
    fake = FakeModel(script, limit=window)
    told = window if told == -1 else told
    session = glyphpack.open_session(tmp_path / "ws", "task", "coder", model=MODELS[api], context_window=told, **options)
    session.reports = []  # type: ignore[attr-defined]
    session.on_request = session.reports.append  # type: ignore[attr-defined]
    session.add_user("Read every output and say when you are done.")
    client = fake.client(api)
    tools = agent.tool_schemas(api)
    while True:
        message = session.call(client, api=api, **tools, **({"max_tokens": 1000} if api == "anthropic" else {}))
        if not session.pending_calls:
            return session, fake, message.text
        session.add_tool_results({c.id: outputs[int(c.arguments["path"][4:-4])] for c in session.pending_calls})


def tool_outputs(turns: int, seed: int = 3) -> list[str]:
    """``turns`` tool outputs of 5-8k tokens each as the fake counts them (3 characters a token)."""
    rng = random.Random(seed)
    words = ["error", "warning", "line", "file", "value", "index", "failed", "ok", "retry", "path", "/usr/lib", "=", "->"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(15_000, 24_000) // 5)) for _ in range(turns)]


@pytest.mark.parametrize("api", APIS_ANTHROPIC_FIRST)
def test_a_window_given_is_a_budget_met_without_a_summarizer(tmp_path, api):
    """Told 40k tokens, with 5-8k-token outputs and no summarizer, a session raised
    ``CompactionError: the request is still ~51,517 tokens after compaction`` at turn 9:
    the protected newest rounds alone exceeded the window. Now they are cut to their ends
    behind their refs, and the run finishes with every request accepted."""
    session, fake, answer = window_run(tmp_path, api, 40_000, tool_outputs(30))
    with session:
        assert answer == "done" and len(fake.requests) == 31
        assert fake.statuses == [200] * 31  # never over the window: no rejection at all
        assert max(count_tokens(body) for body in fake.requests) <= 40_000
        assert session.messages[-1].text == "done" and len([m for m in session.messages if m.role == "tool"]) == 30
        # the newest rounds were cut (never the task), and what was cut comes back whole
        compacted = [n for n, r in enumerate(session.reports) if r.compaction is not None]
        cut = [session.reports[n].compaction.report.rung("tail cut") for n in compacted]
        # Claude's pages (its exact shape is 9x15) cannot hold the middle here; the others' can
        assert any(rung is not None and rung.changed for rung in cut) == (api == "anthropic")
        # the cut leaves room for the next turn: never a compaction on two requests in a row
        assert not any(b == a + 1 for a, b in zip(compacted, compacted[1:])), compacted
        view, _ = session.request_view()
        cuts = [b for m in view for b in m.content if isinstance(b, glyphpack.ToolResult) and "chars cut by glyphpack" in b.text]
        for cut in cuts:
            ref = cut.text.split('ref "')[1].split('"')[0]
            original = next(r for m in session.messages for r in m.tool_results if r.call_id == cut.call_id)
            pages = -(-len(original.text) // 16_000)
            assert "".join(session.recall(ref, page).content[-1].text for page in range(1, pages + 1)) == original.text


@pytest.mark.parametrize("api", [pytest.param(api, marks=pytest.mark.slow) for api in APIS])  # 30 turns each (0.6 s)
def test_a_window_left_to_learn_is_learned_from_the_first_refusal_and_kept_for_the_next_process(tmp_path, api):
    """Not told the 40k window, a session compacted to just under each refusal's count and
    was refused again on the next turn: 30 refusals in 71 requests. The window the refusal
    states (or, in the Responses wording, which states none, the refused size) is kept: one
    overflow, at most two refusals for it, none after, and a new process starts from it."""
    session, fake, answer = window_run(tmp_path, api, 40_000, tool_outputs(30), told=None)
    with session:
        assert answer == "done" and fake.statuses[-1] == 200
        refused = [n for n, status in enumerate(fake.statuses) if status == 400]
        assert 1 <= len(refused) <= 2 and refused == list(range(refused[0], refused[0] + len(refused)))  # one overflow
        assert all(count_tokens(body) <= 40_000 for body, status in zip(fake.requests, fake.statuses) if status == 200)
        learned = session.workspace.settings("task", "coder")
        assert learned["learned_window"] == learned["context_window"] == session.thresholds.window
        assert session.thresholds.window == 40_000 if api != "openai-responses" else 40_000 < session.thresholds.window < 60_000
    with glyphpack.open_session(tmp_path / "ws", "task", "coder", model=MODELS[api]) as again:
        assert again.thresholds == session.thresholds
    with glyphpack.open_session(tmp_path / "ws", "task", "coder", model=MODELS[api], context_window=30_000) as smaller:
        assert smaller.thresholds.window == 30_000  # a smaller window told is the smaller


@pytest.mark.parametrize("api", APIS_ANTHROPIC_FIRST)
def test_a_base64_blob_the_estimate_prices_far_under_the_providers_count_is_recovered_without_a_summarizer(tmp_path, api):
    """The newest tool output is 120,000 characters of base64, which the provider counts at
    1.5 characters a token (80k tokens) and the estimate at about 3.5: the request goes
    over the provider's 60k window unseen. The Responses wording names no number, and
    with no summarizer the second refusal raised "no rung left". Cutting that newest
    result behind its ref fits: the run finishes, at most two refusals for the overflow."""
    outputs = tool_outputs(5, seed=5)
    outputs[-1] = base64.b64encode(random.Random(1).randbytes(90_000)).decode()
    session, fake, answer = window_run(tmp_path, api, 60_000, [o[:6_000] for o in outputs[:-1]] + outputs[-1:], told=None)
    with session:
        assert answer == "done"
        refused = [n for n, status in enumerate(fake.statuses) if status == 400]
        assert 1 <= len(refused) <= 2 and fake.statuses[-1] == 200
        view, _ = session.request_view()
        (blob,) = [r for m in view for r in m.tool_results if r.call_id == session.messages[-2].tool_results[0].call_id]
        assert "chars cut by glyphpack; ref" in blob.text and blob.text[:100] == outputs[-1][:100]


@pytest.mark.slow  # a 30-turn Gemini loop (about 1 s)
def test_gemini_calls_without_ids_are_paired_by_order_and_kept_under_the_ids_first_given(tmp_path):
    """The id of a Gemini function call is optional (older models and ADK send none):
    the session gives each call an id once, stores it, and every later request carries
    the same history, which the fake checks call by call."""
    script = [Turn(text=f"step {n}", calls=(("read_file", {"path": f"out_{n}.txt"}), ("list_dir", {"path": "."}))) for n in range(12)]
    fake = FakeModel([*script, Turn(text="done")], gemini_call_ids=False)
    client = fake.client("gemini")
    with glyphpack.open_session(tmp_path / "ws", "task", "coder", model="gemini-2.5-flash", context_window=20_000) as s:
        s.add_user("Read every output.")
        given: list[list[str]] = []
        while True:
            answer = s.call(client, **agent.tool_schemas("gemini"))
            if not s.pending_calls:
                break
            given.append([c.id for c in s.pending_calls])
            s.add_tool_results({c.id: "x" * 3_000 for c in s.pending_calls})
        assert answer.text == "done" and fake.statuses == [200] * 13
        assert all(len(ids) == 2 and all(ids) for ids in given) and len({i for ids in given for i in ids}) == 24
        stored = [c.id for m in s.messages for c in m.tool_calls]
        assert stored == [i for ids in given for i in ids]  # the ids first given, never redrawn
