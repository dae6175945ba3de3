"""Pydantic AI (the real ``pydantic-ai-slim`` package) with glyphpack's capability, against
the fake Chat Completions server: ten tool turns, a compaction, a recall the agent's
toolset executes, an overflow recovered, every request valid; the run's own history keeps
every message and the workspace stores the same; messages convert both ways exactly."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow  # drives the framework: CI runs it, and --run-slow (tests/conftest.py)
pytest.importorskip("pydantic_ai")
from frameworks import ANSWER, SMALL_WINDOW, big_output, check_the_loop, check_the_window_met, module_text, script
from openai import AsyncOpenAI
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    BinaryContent,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import glyphpack
from glyphpack import UsageError
from glyphpack.adapters.pydantic_ai import GlyphpackHistory, from_pydantic_ai, to_pydantic_ai
from glyphpack.testing.fake import FakeModel, Turn, http

MODEL = "gpt-5.4"


def read_file(path: str) -> str:
    """Read one module of the project."""
    return module_text(path)


def chat_model(fake: FakeModel) -> OpenAIChatModel:
    client = AsyncOpenAI(api_key="test", max_retries=0, http_client=http().AsyncClient(transport=http().MockTransport(fake.async_handler("openai-chat"))))
    return OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))


def test_ten_tool_turns_a_compaction_a_recall_and_an_overflow_through_a_real_agent(tmp_path):
    fake = FakeModel(script(10, recall=True), faults={9: "overflow"})
    memory = GlyphpackHistory(tmp_path / "ws", "task-1", model=MODEL, threshold=6_000, context_window=40_000)
    agent = Agent(chat_model(fake), tools=[read_file], system_prompt="You read code and answer briefly.", capabilities=[memory])
    result = agent.run_sync("Read every module and tell me where the parser is.")
    assert result.output == ANSWER
    session = memory.session
    kept = from_pydantic_ai(result.all_messages())
    last = fake.requests[-1]["messages"]
    assert last[0] == {"role": "system", "content": "You read code and answer briefly."}
    check_the_loop(fake, session, kept, json.dumps(last), json.dumps(glyphpack.to_openai_chat(kept)))
    # The run's own history keeps every message as it was, the system prompt included, as stored.
    assert [(m.role, m.content) for m in session.messages] == [(m.role, m.content) for m in kept]
    # The next run continues the same history (passed back, as Pydantic AI asks): only what is new is stored.
    fake.script.append(Turn(text="Nothing else."))
    again = agent.run_sync("Anything else?", message_history=result.all_messages())
    assert [(m.role, m.content) for m in session.messages] == [(m.role, m.content) for m in from_pydantic_ai(again.all_messages())]
    memory.close()


def test_a_history_that_does_not_begin_with_the_stored_one_is_refused_before_anything_is_stored(tmp_path):
    fake = FakeModel([Turn(text="hello")])
    memory = GlyphpackHistory(tmp_path / "ws", "t", model=MODEL)
    agent = Agent(chat_model(fake), capabilities=[memory])
    agent.run_sync("first")
    stored = memory.session.messages
    with pytest.raises(UsageError, match="message 0 of the history \\(user\\) differs from the stored one"):
        agent.run_sync("another first")
    assert memory.session.messages == stored and len(fake.requests) == 1
    memory.close()


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(40))).decode()
texts = st.text(min_size=1, max_size=30)
user_contents = st.one_of(texts, st.lists(st.one_of(texts, st.just(BinaryContent(base64.b64decode(PNG), media_type="image/png"))), min_size=2, max_size=4))


@st.composite
def conversations(draw: Any) -> list[Any]:
    out: list[Any] = []
    for turn in range(draw(st.integers(1, 4))):
        parts: list[Any] = [SystemPromptPart("be brief")] if turn == 0 else []
        out.append(ModelRequest(parts=[*parts, UserPromptPart(draw(user_contents))]))
        calls = [ToolCallPart(draw(st.sampled_from(["read", "grep"])), {"q": draw(texts)}, tool_call_id=f"c{turn}_{n}") for n in range(draw(st.integers(0, 3)))]
        out.append(ModelResponse(parts=[TextPart(draw(texts)), *calls]))
        if calls:
            returns = [
                ToolReturnPart(c.tool_name, draw(texts), tool_call_id=c.tool_call_id, outcome=draw(st.sampled_from(["success", "failed"])))
                for c in calls
            ]
            out.append(ModelRequest(parts=returns))
            out.append(ModelResponse(parts=[TextPart(draw(texts))]))
    return out


def comparable(messages: list[Any]) -> list[Any]:
    keep = ("part_kind", "content", "tool_name", "args", "tool_call_id", "outcome")
    return [[{k: getattr(p, k, None) for k in keep} for p in m.parts] for m in messages]


@settings(max_examples=60, deadline=None)
@given(conversations())
def test_messages_convert_both_ways_exactly(messages):
    assert comparable(to_pydantic_ai(from_pydantic_ai(messages))) == comparable(messages)


def test_a_retry_prompt_of_older_histories_is_an_error_result():
    call = ModelResponse(parts=[ToolCallPart("read", {"q": "x"}, tool_call_id="c1")])
    with pytest.warns(Warning, match="RetryPromptPart. is deprecated"):
        retry = RetryPromptPart("path must exist", tool_name="read", tool_call_id="c1")
    (_, stored) = from_pydantic_ai([call, ModelRequest(parts=[retry])])
    assert stored.tool_results[0].is_error and stored.tool_results[0].text == "path must exist"


def test_a_window_given_is_met_over_thirty_large_reads(tmp_path):
    def read_file(path: str) -> str:
        """Read one module of the project."""
        return big_output(path)

    fake = FakeModel(script(30, recall=False))
    # A Claude model behind an OpenAI-compatible endpoint (OpenRouter, a gateway): its exact pages (9x15) cannot
    # hold the middle here, so the newest reads are cut to fit.
    memory = GlyphpackHistory(tmp_path / "ws", "task-1", model="openrouter/anthropic/claude-sonnet-4.5", context_window=SMALL_WINDOW)
    agent = Agent(chat_model(fake), tools=[read_file], system_prompt="You read code and answer briefly.", capabilities=[memory])
    assert agent.run_sync("Read every module and tell me where the parser is.").output == ANSWER
    check_the_window_met(fake)
    memory.close()


def test_an_openai_model_on_responses_as_pydantic_ai_2_makes_it_is_compacted_and_recovered(tmp_path):
    """``Agent("openai:...")`` is an ``OpenAIResponsesModel`` in Pydantic AI 2.x: the
    capability reads the API off the run's model (it assumed Chat Completions), and the
    model too (it had to be repeated)."""
    from pydantic_ai.models.openai import OpenAIResponsesModel

    fake = FakeModel(script(10, recall=True), faults={9: "overflow"})
    client = AsyncOpenAI(api_key="test", max_retries=0, http_client=http().AsyncClient(transport=http().MockTransport(fake.async_handler("openai-responses"))))
    memory = GlyphpackHistory(tmp_path / "ws", "task-1", threshold=6_000, context_window=40_000)  # the agent's model, not repeated
    with pytest.raises(UsageError, match="no model is known yet"):
        memory.session  # noqa: B018
    agent = Agent(OpenAIResponsesModel(MODEL, provider=OpenAIProvider(openai_client=client)), tools=[read_file], capabilities=[memory])
    result = agent.run_sync("Read every module and tell me where the parser is.")
    assert result.output == ANSWER and memory.api == "openai-responses" and memory.session.model == MODEL
    assert fake.statuses.count(400) == 1 and fake.statuses[-1] == 200 and memory.session.view is not None
    assert sum(len(m.tool_results) for m in memory.session.messages) == 11
    assert len(json.dumps(fake.requests[-1]["input"])) < 0.8 * len(json.dumps(glyphpack.to_openai_responses(memory.session.messages)[1]))
    memory.close()


def test_each_run_is_shaped_for_its_own_models_api(tmp_path, monkeypatch):
    """One capability in two agents, one on Chat Completions and one on Responses: each
    run's view is built for the API of its own model (the capability kept the last run's
    model's API as its own, so two runs at once could take each other's)."""
    from pydantic_ai.models.openai import OpenAIResponsesModel

    built: list[str] = []
    real = glyphpack.Session.next_view
    monkeypatch.setattr(glyphpack.Session, "next_view", lambda self, api: built.append(api) or real(self, api))
    memory = GlyphpackHistory(tmp_path / "ws")
    chat = Agent(chat_model(FakeModel([Turn(text="chat")])), capabilities=[memory])
    responses_fake = FakeModel([Turn(text="responses")])
    client = AsyncOpenAI(api_key="test", max_retries=0,
                         http_client=http().AsyncClient(transport=http().MockTransport(responses_fake.async_handler("openai-responses"))))
    responses = Agent(OpenAIResponsesModel(MODEL, provider=OpenAIProvider(openai_client=client)), capabilities=[memory])
    assert chat.run_sync("first", conversation_id="a").output == "chat"
    assert responses.run_sync("second", conversation_id="b").output == "responses"
    assert chat.run_sync("third", conversation_id="c").output == "chat"
    assert built == ["openai-chat", "openai-responses", "openai-chat"]
    memory.close()


def test_one_capability_serves_each_conversation_by_its_id(tmp_path):
    """The capability was bound to one conversation, while a module-level agent serves
    many: each run is now kept in its own (Pydantic AI's ``conversation_id``, given or
    inherited from the history it continues), each holding exactly its own outputs; a
    new capability on the workspace goes on where each stood."""
    names = ("alpha", "bravo", "charlie")
    order = [name for _ in range(2) for name in names]
    script_ = [turn for n, name in enumerate(order)
               for turn in (Turn(text=f"{name} reads", calls=(("read_file", {"path": f"mod_{n:02d}.py"}),)), Turn(text=f"{name} answered"))]
    fake = FakeModel(script_)
    memory = GlyphpackHistory(tmp_path / "ws")
    agent = Agent(chat_model(fake), tools=[read_file], capabilities=[memory])
    histories: dict[str, Any] = {}
    for n, name in enumerate(order):
        if name in histories:  # continued: the id comes with the history
            result = agent.run_sync(f"{name} question {n}", message_history=histories[name])
        else:
            result = agent.run_sync(f"{name} question {n}", conversation_id=name)
        assert result.output == f"{name} answered"
        histories[name] = result.all_messages()
    for name in names:
        stored = memory.workspace.load(name, "agent").messages
        assert [r.text for m in stored for r in m.tool_results] == [module_text(f"mod_{n:02d}.py") for n, o in enumerate(order) if o == name]
        assert [m.text for m in stored if m.role == "user"] == [f"{name} question {n}" for n, o in enumerate(order) if o == name]
    memory.close()
    again = FakeModel([Turn(text="resumed")])
    memory = GlyphpackHistory(tmp_path / "ws")
    agent = Agent(chat_model(again), tools=[read_file], capabilities=[memory])
    agent.run_sync("go on", message_history=histories["bravo"])
    sent = json.dumps(again.requests[-1]["messages"])
    assert "bravo question" in sent and "alpha question" not in sent and "charlie question" not in sent
    assert [m.text for m in memory.workspace.load("bravo", "agent").messages if m.role == "user"][-1] == "go on"
    memory.close()


def test_a_streamed_run_is_compacted_recalls_and_recovers_from_an_overflow(tmp_path):
    """A run whose model requests stream (``event_stream_handler``) over HTTP: the deltas
    reach the caller as they come, and the run is the same loop (compaction, recall, the
    overflow at request 9 compacted and sent again)."""
    import asyncio

    from glyphpack.testing.fake import FakeUpstream

    fake = FakeModel(script(10, recall=True), faults={9: "overflow"})
    memory = GlyphpackHistory(tmp_path / "ws", "task-1", model=MODEL, threshold=6_000, context_window=40_000)

    async def streamed(url: str) -> tuple[list[str], Any]:
        client = AsyncOpenAI(api_key="test", base_url=f"{url}/v1", max_retries=0)
        agent = Agent(OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client)), tools=[read_file],
                      system_prompt="You read code and answer briefly.", capabilities=[memory])
        pieces: list[str] = []

        async def handler(ctx: Any, events: Any) -> None:  # every model request streamed, its deltas as they come
            async for event in events:
                delta = getattr(getattr(event, "delta", None), "content_delta", None)
                if isinstance(delta, str):
                    pieces.append(delta)

        result = await agent.run("Read every module and tell me where the parser is.", event_stream_handler=handler)
        assert result.output == ANSWER
        return pieces, result.all_messages()

    with FakeUpstream(fake) as upstream:
        pieces, messages = asyncio.run(streamed(upstream.url))
    assert "".join(pieces).endswith(ANSWER[len(ANSWER) // 2 :]) and len(pieces) >= 12  # each text's later pieces, as they came
    assert all(body.get("stream") for body in fake.requests)
    kept = from_pydantic_ai(messages)
    check_the_loop(fake, memory.session, kept, json.dumps(fake.requests[-1]["messages"]), json.dumps(glyphpack.to_openai_chat(kept)))
    memory.close()


# ------------------------------------------------------------------ one agent, three threads


def threads_agent(folder: str, url: str) -> tuple[Agent[Any, str], GlyphpackHistory]:
    """The scenario's agent (one for every conversation, its model on Responses as
    ``openai:`` models are in 2.x) with its capability, the workspace in ``folder``."""
    from pydantic_ai.models.openai import OpenAIResponsesModel

    memory = GlyphpackHistory(f"{folder}/ws", threshold=6_000, context_window=40_000)
    model = OpenAIResponsesModel(MODEL, provider=OpenAIProvider(openai_client=AsyncOpenAI(api_key="test", base_url=f"{url}/v1", max_retries=0)))
    return Agent(model, tools=[read_file], system_prompt="You read code and answer briefly.", capabilities=[memory]), memory


async def ask(agent: Agent[Any, str], memory: GlyphpackHistory, thread: str, text: str, streamed: bool) -> str:
    """One question to ``thread``, its history read back from the workspace."""
    history = memory.history(thread)
    if streamed:  # every model request streamed, its deltas handed on as they come
        pieces: list[str] = []

        async def handler(ctx: Any, events: Any) -> None:
            async for event in events:
                delta = getattr(getattr(event, "delta", None), "content_delta", None)
                if isinstance(delta, str):
                    pieces.append(delta)

        output = (await agent.run(text, message_history=history, conversation_id=thread, event_stream_handler=handler)).output
        assert len(pieces) >= 5 and "".join(pieces).endswith(output[len(output) // 2 :])  # each text's later half, as it came
        return output
    return (await agent.run(text, message_history=history, conversation_id=thread)).output


def ask_each_thread_once_more(folder: str, url: str) -> None:
    """What a new process does: one more question to each thread (the resume test's child)."""
    import asyncio

    from frameworks import RESUMED, THREADS, question

    async def go() -> None:
        agent, memory = threads_agent(folder, url)
        for thread in THREADS:
            await ask(agent, memory, thread, question(thread, RESUMED), streamed=False)
        memory.close()

    asyncio.run(go())


def test_one_agent_three_threads_interleaved_streamed_and_not_each_overflowing_recalling_and_resumed_in_a_new_process(tmp_path):
    """The done-when of frameworks as their users write them: one agent and one
    capability, three conversations whose questions interleave (the second of each
    streamed), an overflow and a recall in each; each conversation holds exactly its
    own outputs; each history is read back from the workspace alone
    (``GlyphpackHistory.history``), so a new process resumes each thread sending byte
    for byte what this one sends."""
    import asyncio
    import shutil

    from frameworks import RESUMED, check_the_threads, question, resumed_models, run_in_child, scenario_models, scenario_order

    from glyphpack.testing.fake import FakeUpstream

    models = scenario_models()
    answering = [models]
    answers: dict[tuple[str, int], str] = {}

    async def interleaved(url: str) -> GlyphpackHistory:
        agent, memory = threads_agent(str(tmp_path / "run"), url)
        for thread, number, streamed in scenario_order():
            answers[(thread, number)] = await ask(agent, memory, thread, question(thread, number), streamed)
        check_the_threads(models, {t: memory.session_for(t, MODEL) for t in ("alpha", "bravo", "charlie")}, answers)
        shutil.copytree(tmp_path / "run", tmp_path / "copy")
        answering[0] = resumed_models(models)  # the same agent goes on
        for thread in ("alpha", "bravo", "charlie"):
            await ask(agent, memory, thread, question(thread, RESUMED), streamed=False)
        return memory

    with FakeUpstream(models.stray, route=lambda body: answering[0].route(body)) as upstream:
        asyncio.run(interleaved(upstream.url)).close()
    resumed = resumed_models(models)
    with FakeUpstream(resumed.stray, route=resumed.route) as upstream:
        run_in_child("test_adapter_pydantic_ai", "ask_each_thread_once_more", str(tmp_path / "copy"), upstream.url)
    assert resumed.requests() == answering[0].requests() and len(resumed.requests()) == 3


# ------------------------------------------------------------------ delegation


def test_a_researcher_agent_a_tool_delegates_to_is_kept_per_call_compacted_recalled_and_recovered(tmp_path):
    """Pydantic AI's agent delegation: the boss's tool runs a researcher agent afresh each
    call (two calls at once, then a third), one capability in both. Each delegation is its
    own transcript in the boss's conversation (it was a conversation of its own per run,
    named by a fresh UUID and tied to nothing), named by the researcher and the call; each
    is compacted, recovers from its overflow and recalls from its own."""
    from frameworks import ASK_RESEARCHER, DelegationModels, check_the_delegation

    from glyphpack.testing.fake import FakeUpstream

    models = DelegationModels()
    memory = GlyphpackHistory(tmp_path / "ws", model=MODEL, threshold=6_000, context_window=40_000)
    with FakeUpstream(models.stray, route=models.route) as upstream:
        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=f"{upstream.url}/v1", api_key="test"))
        researcher = Agent(model, tools=[read_file], instructions="You research.", capabilities=[memory], name="researcher")
        boss = Agent(model, instructions="You delegate.", capabilities=[memory], name="boss")

        @boss.tool(name=ASK_RESEARCHER)
        async def ask_researcher(ctx: RunContext[None], question: str) -> str:
            """Ask a researcher to read the code."""
            return (await researcher.run(question, usage=ctx.usage)).output

        first = boss.run_sync("boss question 1", conversation_id="work")
        second = boss.run_sync("boss question 2", message_history=first.all_messages())
    assert second.output == "boss answer 2"
    check_the_delegation(models, memory.workspace, "work", "agent", "researcher")
    memory.close()
