"""LangChain 1.x (the real ``langchain`` and ``langchain-openai`` packages) with glyphpack's
middleware, against the fake Chat Completions server: ten tool turns, a compaction, a
recall the agent's tool node executes, an overflow recovered, every request valid; the
agent's state keeps every message and the workspace stores the same; messages convert
both ways exactly."""

from __future__ import annotations

import base64
import json
import shutil
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow  # drives the framework: CI runs it, and --run-slow (tests/conftest.py)
pytest.importorskip("langchain.agents")
pytest.importorskip("langchain_openai")
from frameworks import ANSWER, SMALL_WINDOW, big_output, check_the_loop, check_the_window_met, module_text, script
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

import glyphpack
from glyphpack import UsageError
from glyphpack.adapters.langchain import GlyphpackMiddleware, from_langchain, to_langchain
from glyphpack.testing.fake import FakeModel, Turn, http

MODEL = "gpt-5.4"


@tool
def read_file(path: str) -> str:
    """Read one module of the project."""
    return module_text(path)


def chat_model(fake: FakeModel) -> ChatOpenAI:
    transport = http().Client(transport=http().MockTransport(fake.handler("openai-chat")))
    return ChatOpenAI(model=MODEL, api_key="test", max_retries=0, http_client=transport)  # type: ignore[arg-type]


def test_ten_tool_turns_a_compaction_a_recall_and_an_overflow_through_a_real_agent(tmp_path):
    fake = FakeModel(script(10, recall=True), faults={9: "overflow"})
    memory = GlyphpackMiddleware(tmp_path / "ws", "task-1", model=MODEL, threshold=6_000, context_window=40_000)
    agent = create_agent(chat_model(fake), tools=[read_file], system_prompt="You read code and answer briefly.", middleware=[memory])
    state = agent.invoke({"messages": [{"role": "user", "content": "Read every module and tell me where the parser is."}]}, {"recursion_limit": 60})
    assert state["messages"][-1].content == ANSWER
    session = memory.session
    kept = from_langchain(state["messages"])
    last = fake.requests[-1]["messages"]
    assert last[0] == {"role": "system", "content": "You read code and answer briefly."}  # the system prompt stays the agent's
    check_the_loop(fake, session, kept, json.dumps(last), json.dumps(glyphpack.to_openai_chat(kept)))
    assert len(state["messages"]) == 1 + 11 * 2 + 1  # the state keeps every message as it was
    # A second invocation on the same thread (the state carried, as a checkpointer does) stores only what is new.
    fake.script.append(Turn(text="Nothing else."))
    state = agent.invoke({"messages": [*state["messages"], HumanMessage("Anything else?")]})
    assert [(m.role, m.content) for m in session.messages] == [(m.role, m.content) for m in from_langchain(state["messages"])]
    memory.close()


def test_a_history_that_does_not_begin_with_the_stored_one_is_refused_before_anything_is_stored(tmp_path):
    fake = FakeModel([Turn(text="hello")])
    memory = GlyphpackMiddleware(tmp_path / "ws", "t", model=MODEL)
    agent = create_agent(chat_model(fake), tools=[], middleware=[memory])
    agent.invoke({"messages": [HumanMessage("first")]})
    stored = memory.session.messages
    with pytest.raises(UsageError, match="message 0 of the history \\(user\\) differs from the stored one"):
        agent.invoke({"messages": [HumanMessage("another first")]})
    assert memory.session.messages == stored and len(fake.requests) == 1
    memory.close()


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(40))).decode()
texts = st.text(min_size=1, max_size=30)
parts = st.one_of(
    texts.map(lambda t: {"type": "text", "text": t}),
    st.just({"type": "image", "base64": PNG, "mime_type": "image/png"}),
    st.just({"type": "reasoning", "reasoning": "thinking it over"}),
)
contents = st.one_of(texts, st.lists(parts, min_size=2, max_size=4))
result_contents = st.one_of(texts, st.lists(parts.filter(lambda p: p["type"] != "reasoning"), min_size=2, max_size=4))


@st.composite
def conversations(draw: Any) -> list[Any]:
    out: list[Any] = [SystemMessage("be brief")]
    for turn in range(draw(st.integers(1, 4))):
        out.append(HumanMessage(content=draw(contents)))
        calls = [{"id": f"c{turn}_{n}", "name": draw(st.sampled_from(["read", "grep"])), "args": {"q": draw(texts)}, "type": "tool_call"}
                 for n in range(draw(st.integers(0, 3)))]
        out.append(AIMessage(content=draw(contents), tool_calls=calls))
        for call in calls:
            error = draw(st.booleans())
            out.append(ToolMessage(content=draw(result_contents), tool_call_id=call["id"], status="error" if error else "success"))
    return out


@settings(max_examples=60, deadline=None)
@given(conversations())
def test_messages_convert_both_ways_exactly(messages):
    back = to_langchain(from_langchain(messages))
    fields = ("type", "content", "tool_calls", "tool_call_id", "status")
    assert [{k: getattr(m, k, None) for k in fields} for m in back] == [{k: getattr(m, k, None) for k in fields} for m in messages]


def test_a_tool_message_part_that_is_neither_text_nor_image_is_kept_as_its_json_text():
    message = ToolMessage(content=[{"type": "text", "text": "see"}, {"type": "file", "id": "f1"}], tool_call_id="c1")
    (stored,) = from_langchain([AIMessage("", tool_calls=[{"id": "c1", "name": "read", "args": {}}]), message])[1:]
    assert stored.tool_results[0].text == 'see\n{"id": "f1", "type": "file"}'


def test_a_langgraph_checkpointer_thread_continues_and_only_what_is_new_is_stored(tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver

    fake = FakeModel([Turn(text="reading", calls=(("read_file", {"path": "mod_01.py"}),)), Turn(text="It parses."), Turn(text="Nothing else.")])
    memory = GlyphpackMiddleware(tmp_path / "ws", "thread-1", model=MODEL)
    agent = create_agent(chat_model(fake), tools=[read_file], middleware=[memory], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "thread-1"}}
    agent.invoke({"messages": [HumanMessage("What does mod_01 do?")]}, thread)
    state = agent.invoke({"messages": [HumanMessage("Anything else?")]}, thread)
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai", "human", "ai"]
    assert [(m.role, m.content) for m in memory.session.messages] == [(m.role, m.content) for m in from_langchain(state["messages"])]
    # The second request sent the whole thread (nothing to compact yet), as the checkpointer holds it.
    assert [m["role"] for m in fake.requests[-1]["messages"]] == ["user", "assistant", "tool", "assistant", "user"]
    memory.close()


@tool("read_file")
def read_big_file(path: str) -> str:
    """Read one module of the project."""
    return big_output(path)


def test_a_window_given_is_met_over_thirty_large_reads(tmp_path):
    fake = FakeModel(script(30, recall=False))
    # A Claude model behind an OpenAI-compatible endpoint: its exact pages cannot hold the middle here.
    memory = GlyphpackMiddleware(tmp_path / "ws", "task-1", model="openrouter/anthropic/claude-sonnet-4.5", context_window=SMALL_WINDOW)
    agent = create_agent(chat_model(fake), tools=[read_big_file], system_prompt="You read code and answer briefly.", middleware=[memory])
    state = agent.invoke({"messages": [{"role": "user", "content": "Read every module and tell me where the parser is."}]}, {"recursion_limit": 100})
    assert state["messages"][-1].content == ANSWER
    check_the_window_met(fake)


def test_one_agent_serves_three_threads_interleaved_and_a_new_agent_resumes_each(tmp_path):
    """LangGraph's normal pattern: one compiled agent, many ``thread_id``s. The middleware
    was bound to one conversation when built, so threads mixed. Now each thread is its
    own conversation (named by its thread id) holding exactly its own tool outputs; with
    the SQLite checkpointer the extra installs, a new agent (a new process's) resumes
    each thread where it stood."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    threads = ("alpha", "bravo", "charlie")
    turns = {thread: [Turn(text=f"{thread} reads", calls=(("read_file", {"path": f"mod_{n:02d}.py"}),)) for n in range(n0, n0 + 3)]
             for thread, n0 in zip(threads, (0, 10, 20))}
    order = [thread for _ in range(3) for thread in threads]  # each thread's turns between the others'

    def build(fake: FakeModel) -> tuple[Any, GlyphpackMiddleware, sqlite3.Connection]:
        connection = sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False)
        memory = GlyphpackMiddleware(tmp_path / "ws", model=MODEL, threshold=6_000, context_window=40_000)
        agent = create_agent(chat_model(fake), tools=[read_file], middleware=[memory], checkpointer=SqliteSaver(connection))
        return agent, memory, connection

    # Each invocation: the thread's read, its output, then its answer (the fake's script in that order).
    script_ = [turn for thread in order for turn in (turns[thread].pop(0), Turn(text=f"{thread} answered"))]
    fake = FakeModel(script_)
    agent, memory, connection = build(fake)
    for n, thread in enumerate(order):
        agent.invoke({"messages": [HumanMessage(f"{thread} question {n}")]}, {"configurable": {"thread_id": thread}})
    with pytest.raises(UsageError, match="thread_id"):  # no checkpointer, no thread: which conversation is it?
        create_agent(chat_model(fake), tools=[read_file], middleware=[memory]).invoke({"messages": [HumanMessage("no thread")]})
    workspace = memory.workspace
    for n0, thread in zip((0, 10, 20), threads):
        stored = workspace.load(thread, "agent").messages
        outputs = [r.text for m in stored for r in m.tool_results]
        assert outputs == [module_text(f"mod_{n:02d}.py") for n in range(n0, n0 + 3)]  # exactly its own, as the tool returned them
        assert [m.text for m in stored if m.role == "user"] == [f"{thread} question {n}" for n, t in enumerate(order) if t == thread]
    memory.close()
    connection.close()
    # A new agent on the same files resumes each thread: its next request holds the thread as it stood.
    again = FakeModel([Turn(text=f"{thread} resumed") for thread in threads])
    agent, memory, connection = build(again)
    for thread in threads:
        state = agent.invoke({"messages": [HumanMessage(f"{thread} once more")]}, {"configurable": {"thread_id": thread}})
        assert state["messages"][-1].content == f"{thread} resumed"
    for request, thread in zip(again.requests, threads):
        sent = json.dumps(request["messages"])
        assert f"{thread} question" in sent and not any(f"{other} question" in sent for other in threads if other != thread)
    assert [len(memory.session_for(t).messages) for t in threads] == [3 * 4 + 2] * 3
    memory.close()
    connection.close()


def test_a_streamed_agent_is_compacted_recalls_and_recovers_from_an_overflow(tmp_path):
    """``agent.stream(..., stream_mode="messages")`` with a streaming chat model over HTTP:
    tokens reach the caller, and the run is the same loop (compaction, recall, the
    overflow at request 9 compacted and sent again)."""
    from glyphpack.testing.fake import FakeUpstream

    fake = FakeModel(script(10, recall=True), faults={9: "overflow"})
    memory = GlyphpackMiddleware(tmp_path / "ws", "task-1", model=MODEL, threshold=6_000, context_window=40_000)
    with FakeUpstream(fake) as upstream:
        model = ChatOpenAI(model=MODEL, api_key="test", base_url=f"{upstream.url}/v1", max_retries=0, streaming=True,
                           stream_usage=True)  # type: ignore[arg-type]  # the counts come in the last chunk when asked for
        agent = create_agent(model, tools=[read_file], system_prompt="You read code and answer briefly.", middleware=[memory])
        chunks = list(agent.stream({"messages": [{"role": "user", "content": "Read every module and tell me where the parser is."}]},
                                   {"recursion_limit": 60}, stream_mode="messages"))
    said = "".join(chunk.content for chunk, _ in chunks if isinstance(chunk.content, str) and chunk.type == "AIMessageChunk")
    assert said.endswith(ANSWER) and len(chunks) > 20
    assert all(body.get("stream") for body in fake.requests)
    kept = memory.session.messages
    check_the_loop(fake, memory.session, kept, json.dumps(fake.requests[-1]["messages"]), json.dumps(glyphpack.to_openai_chat(kept)))
    memory.close()


def test_an_async_agent_goes_through_the_same_loop(tmp_path):
    """``ainvoke``: the middleware's ``awrap_model_call`` (the async path) compacts,
    recalls and recovers from the overflow at request 9 as the sync one does."""
    import asyncio

    fake = FakeModel(script(10, recall=True), faults={9: "overflow"})
    memory = GlyphpackMiddleware(tmp_path / "ws", "task-1", model=MODEL, threshold=6_000, context_window=40_000)
    transport = http().AsyncClient(transport=http().MockTransport(fake.async_handler("openai-chat")))
    model = ChatOpenAI(model=MODEL, api_key="test", max_retries=0, http_async_client=transport)  # type: ignore[arg-type]
    agent = create_agent(model, tools=[read_file], system_prompt="You read code and answer briefly.", middleware=[memory])
    state = asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "Read every module and tell me where the parser is."}]},
                                      {"recursion_limit": 60}))
    assert state["messages"][-1].content == ANSWER
    kept = from_langchain(state["messages"])
    check_the_loop(fake, memory.session, kept, json.dumps(fake.requests[-1]["messages"]), json.dumps(glyphpack.to_openai_chat(kept)))
    memory.close()


# ------------------------------------------------------------------ one agent, three threads


def threads_agent(folder: str, url: str) -> tuple[Any, GlyphpackMiddleware, Any]:
    """The scenario's compiled agent (one for every thread) with its middleware and the
    SQLite checkpointer the extra installs, both in ``folder``; its model over HTTP at
    ``url``, streaming when the caller streams."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(f"{folder}/checkpoints.sqlite", check_same_thread=False)
    memory = GlyphpackMiddleware(f"{folder}/ws", model=MODEL, threshold=6_000, context_window=40_000)
    model = ChatOpenAI(model=MODEL, api_key="test", base_url=f"{url}/v1", max_retries=0, stream_usage=True)  # type: ignore[arg-type]
    agent = create_agent(model, tools=[read_file], system_prompt="You read code and answer briefly.", middleware=[memory],
                         checkpointer=SqliteSaver(connection))
    return agent, memory, connection


def ask(agent: Any, thread: str, text: str, streamed: bool) -> str:
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 60}
    if streamed:
        chunks = list(agent.stream({"messages": [HumanMessage(text)]}, config, stream_mode="messages"))
        assert len(chunks) > 5  # the tokens came as they were made
        return str(agent.get_state(config).values["messages"][-1].content)
    return str(agent.invoke({"messages": [HumanMessage(text)]}, config)["messages"][-1].content)


def ask_each_thread_once_more(folder: str, url: str) -> None:
    """What a new process does: one more question to each thread (the resume test's child)."""
    from frameworks import RESUMED, THREADS, question

    agent, memory, connection = threads_agent(folder, url)
    for thread in THREADS:
        ask(agent, thread, question(thread, RESUMED), streamed=False)
    memory.close()
    connection.close()


def test_one_agent_three_threads_interleaved_streamed_and_not_each_overflowing_recalling_and_resumed_in_a_new_process(tmp_path):
    """The done-when of frameworks as their users write them: one compiled agent, three
    ``thread_id``s whose questions interleave (the second of each streamed), an overflow
    and a recall in each; each thread's conversation holds exactly its own outputs; a new
    process (the SQLite checkpointer and the workspace on disk) resumes each thread
    sending byte for byte what this one sends."""
    from frameworks import RESUMED, check_the_threads, question, resumed_models, run_in_child, scenario_models, scenario_order

    from glyphpack.testing.fake import FakeUpstream

    models = scenario_models()
    answering = [models]  # the models this upstream answers with: the run's, then the continued run's
    (tmp_path / "run").mkdir()
    answers: dict[tuple[str, int], str] = {}
    with FakeUpstream(models.stray, route=lambda body: answering[0].route(body)) as upstream:
        agent, memory, connection = threads_agent(str(tmp_path / "run"), upstream.url)
        for thread, number, streamed in scenario_order():
            answers[(thread, number)] = ask(agent, thread, question(thread, number), streamed)
        check_the_threads(models, {t: memory.session_for(t) for t in ("alpha", "bravo", "charlie")}, answers)
        connection.commit()
        shutil.copytree(tmp_path / "run", tmp_path / "copy")
        answering[0] = continued = resumed_models(models)  # the same agent goes on
        for thread in ("alpha", "bravo", "charlie"):
            ask(agent, thread, question(thread, RESUMED), streamed=False)
    memory.close()
    connection.close()
    resumed = resumed_models(models)
    with FakeUpstream(resumed.stray, route=resumed.route) as upstream:
        run_in_child("test_adapter_langchain", "ask_each_thread_once_more", str(tmp_path / "copy"), upstream.url)
    assert resumed.requests() == continued.requests() and len(resumed.requests()) == 3


# ------------------------------------------------------------------ a sub-agent used as a tool


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_researcher_agent_used_as_a_tool_is_kept_per_call_compacted_recalled_and_recovered(tmp_path, run):
    """LangChain's subagents-as-tools: the boss's tool runs a researcher agent afresh each
    call (two calls at once, then a third), one middleware in both, invoked and awaited.
    Each call of the researcher is its own transcript in the boss's thread (a fresh
    history was refused as "differs from the stored one" on the second call), named by
    the researcher and the call; each is compacted, recovers from its overflow and
    recalls from its own."""
    import asyncio

    from frameworks import ASK_RESEARCHER, DelegationModels, check_the_delegation

    from glyphpack.testing.fake import FakeUpstream

    models = DelegationModels()
    memory = GlyphpackMiddleware(tmp_path / "ws", model=MODEL, threshold=6_000, context_window=40_000)
    with FakeUpstream(models.stray, route=models.route) as upstream:
        model = ChatOpenAI(model=MODEL, api_key="test", base_url=f"{upstream.url}/v1", max_retries=0)  # type: ignore[arg-type]
        researcher = create_agent(model, tools=[read_file], system_prompt="You research.", middleware=[memory], name="researcher")

        def task_of(question: str) -> dict[str, Any]:
            return {"messages": [HumanMessage(question)]}

        @tool(ASK_RESEARCHER)
        def ask_researcher(question: str) -> str:
            """Ask a researcher to read the code."""
            return str(researcher.invoke(task_of(question), {"recursion_limit": 40})["messages"][-1].content)

        @tool(ASK_RESEARCHER)
        async def ask_researcher_async(question: str) -> str:
            """Ask a researcher to read the code."""
            return str((await researcher.ainvoke(task_of(question), {"recursion_limit": 40}))["messages"][-1].content)

        boss = create_agent(model, tools=[ask_researcher if run == "sync" else ask_researcher_async], system_prompt="You delegate.",
                            middleware=[memory], name="boss")
        config = {"configurable": {"thread_id": "work"}}

        async def ask_twice() -> dict[str, Any]:  # one event loop: the async client keeps to it
            state = await boss.ainvoke({"messages": [HumanMessage("boss question 1")]}, config)
            return await boss.ainvoke({"messages": [*state["messages"], HumanMessage("boss question 2")]}, config)

        if run == "sync":
            state = boss.invoke({"messages": [HumanMessage("boss question 1")]}, config)
            state = boss.invoke({"messages": [*state["messages"], HumanMessage("boss question 2")]}, config)
        else:
            state = asyncio.run(ask_twice())
    assert state["messages"][-1].content == "boss answer 2"
    check_the_delegation(models, memory.workspace, "work", "agent", "researcher")
    memory.close()
