"""The OpenAI Agents SDK (the real ``openai-agents`` package) over a glyphpack workspace,
against the fake Responses server: ten tool turns, a compaction, a recall the runner
executes, an overflow recovered, every request valid; what is stored equals what the
SDK's own SQLiteSession keeps; a run resumed in a new process sends byte for byte what
the first process would have sent."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

agents = pytestmark = pytest.mark.slow  # drives the framework: CI runs it, and --run-slow (tests/conftest.py)
pytest.importorskip("agents")
from agents import Agent, OpenAIResponsesModel, Runner, SQLiteSession, function_tool, set_tracing_disabled
from frameworks import ANSWER, SMALL_WINDOW, big_output, check_the_loop, check_the_window_met, module_text, script
from openai import AsyncOpenAI

import glyphpack
from glyphpack import UsageError
from glyphpack.adapters.openai_agents import GlyphpackSession
from glyphpack.testing.fake import FakeModel, Turn, http

set_tracing_disabled(True)
MODEL = "gpt-5.4"


@function_tool
def read_file(path: str) -> str:
    """Read one module of the project."""
    return module_text(path)


def model(fake: FakeModel) -> OpenAIResponsesModel:
    client = AsyncOpenAI(api_key="test", max_retries=0, http_client=http().AsyncClient(transport=http().MockTransport(fake.async_handler("openai-responses"))))
    return OpenAIResponsesModel(MODEL, client)


def coder(fake: FakeModel) -> Agent[Any]:
    return Agent(name="coder", instructions="You read code and answer briefly.", tools=[read_file], model=model(fake))


def test_ten_tool_turns_a_compaction_a_recall_and_an_overflow_through_the_real_runner(tmp_path):
    fake = FakeModel(script(10, recall=True), faults={9: "overflow"})
    session = GlyphpackSession(tmp_path / "ws", "task-1", model=MODEL, threshold=6_000, context_window=40_000)
    result = asyncio.run(Runner.run(session.agent(coder(fake)), "Read every module and tell me where the parser is.", session=session, max_turns=20))
    assert result.final_output == ANSWER
    _, whole = glyphpack.to_openai_responses(session.glyphpack.messages)
    check_the_loop(fake, session.glyphpack, session.glyphpack.messages, json.dumps(fake.requests[-1]["input"]), json.dumps(whole))
    session.close()


def test_what_is_stored_equals_what_the_sdks_own_session_keeps(tmp_path):
    fake_ours, fake_theirs = FakeModel(script(3, recall=False)), FakeModel(script(3, recall=False))
    ours = GlyphpackSession(tmp_path / "ws", "task-1", model=MODEL, recall=False)
    theirs = SQLiteSession("task-1", str(tmp_path / "sdk.db"))
    for fake, session in ((fake_ours, ours), (fake_theirs, theirs)):
        agent = coder(fake) if session is theirs else ours.agent(coder(fake))
        asyncio.run(Runner.run(agent, "Read three modules.", session=session))
        asyncio.run(Runner.run(agent, "And now?", session=session))
    kept = glyphpack.from_openai_responses(asyncio.run(theirs.get_items()))
    call_ids = {c.id: n for n, c in enumerate(c for m in kept for c in m.tool_calls)}
    ours_ids = {c.id: n for n, c in enumerate(c for m in ours.glyphpack.messages for c in m.tool_calls)}
    rename = {mine: theirs_id for mine, n in ours_ids.items() for theirs_id, k in call_ids.items() if n == k}

    def neutral(messages: Any) -> list[tuple[str, str]]:
        out = []
        for m in messages:
            text = json.dumps([b.to_json() for b in m.content if not isinstance(b, glyphpack.Opaque)], sort_keys=True)
            for old, new in rename.items():
                text = text.replace(old, new)
            out.append((m.role, text))
        return out

    assert neutral(ours.glyphpack.messages) == neutral(kept)  # every message, in order, the calls' ids aside (the fake's are random)
    assert len(ours.glyphpack.messages) == 10  # two user messages, three calls and results, three texts... as the SDK kept them
    assert asyncio.run(ours.get_items()) == glyphpack.to_openai_responses(ours.glyphpack.messages)[1]  # no compaction yet: the whole history
    ours.close()


RESUME = """
import asyncio, json, sys
sys.path.insert(0, {tests!r})
from test_adapter_openai_agents import coder, script
from agents import Runner
from glyphpack.adapters.openai_agents import GlyphpackSession
from glyphpack.testing.fake import FakeModel
fake = FakeModel(script(0, recall=False))
session = GlyphpackSession({workspace!r}, "task-1", model="gpt-5.4", threshold=6_000, context_window=40_000)
asyncio.run(Runner.run(session.agent(coder(fake)), "One more question.", session=session))
print(json.dumps(fake.requests[0]))
"""


def test_a_run_resumed_in_a_new_process_sends_what_the_first_would_have(tmp_path):
    fake = FakeModel(script(10, recall=False))
    session = GlyphpackSession(tmp_path / "ws", "task-1", model=MODEL, threshold=6_000, context_window=40_000)
    asyncio.run(Runner.run(session.agent(coder(fake)), "Read every module.", session=session, max_turns=20))
    assert session.glyphpack.view is not None  # a compaction is in force
    shutil.copytree(tmp_path / "ws", tmp_path / "copy")
    then = FakeModel(script(0, recall=False))
    asyncio.run(Runner.run(session.agent(coder(then)), "One more question.", session=session))
    session.close()
    code = RESUME.format(tests=str(Path(__file__).parent), workspace=str(tmp_path / "copy"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == json.dumps(then.requests[0])


def test_items_of_an_unfinished_turn_wait_and_a_pop_or_a_foreign_input_is_refused_clearly(tmp_path):
    session = GlyphpackSession(tmp_path / "ws", "c", model=MODEL)
    call = {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{}"}
    asyncio.run(session.add_items([{"role": "user", "content": "hi"}, call]))
    assert [m.role for m in session.glyphpack.messages] == ["user"]  # the call waits for its output
    assert asyncio.run(session.get_items())[-1] == call
    asyncio.run(session.add_items([{"type": "function_call_output", "call_id": "call_1", "output": "done"}]))
    assert [m.role for m in session.glyphpack.messages] == ["user", "assistant", "tool"]
    with pytest.raises(UsageError, match="would leave calls \\['call_1'\\] unanswered"):
        asyncio.run(session.pop_item())
    asyncio.run(session.add_items([{"role": "assistant", "content": "all done"}]))
    assert asyncio.run(session.pop_item()) == {"role": "assistant", "content": "all done"}
    assert [m.role for m in session.glyphpack.messages] == ["user", "assistant", "tool"]
    with pytest.raises(UsageError, match="has not stored: pass session="):
        session.model_input([{"role": "user", "content": "something else"}])
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == [] and asyncio.run(session.pop_item()) is None
    # What was cleared is still in the tree.
    assert len(session.glyphpack.workspace.tree.nodes("c")) >= 3
    session.close()


def test_get_items_gives_the_newest_items_up_to_its_limit(tmp_path):
    """The protocol's ``limit``: the newest that many (the SDK reads the latest), all
    for None, none for 0; the held items of an unfinished turn count as the newest."""
    session = GlyphpackSession(tmp_path / "ws", "c", model=MODEL)
    turns = [item for n in range(3) for item in ({"role": "user", "content": f"question {n}"}, {"role": "assistant", "content": f"answer {n}"})]
    asyncio.run(session.add_items(turns))
    every = asyncio.run(session.get_items())
    assert [glyphpack.from_openai_responses([item])[0].text for item in every] == [f"{kind} {n}" for n in range(3) for kind in ("question", "answer")]
    assert asyncio.run(session.get_items(limit=2)) == every[-2:] and asyncio.run(session.get_items(2)) == every[-2:]
    assert asyncio.run(session.get_items(limit=0)) == [] and asyncio.run(session.get_items(limit=None)) == every
    assert asyncio.run(session.get_items(limit=100)) == every
    call = {"type": "function_call", "call_id": "call_9", "name": "read_file", "arguments": "{}"}
    asyncio.run(session.add_items([{"role": "user", "content": "one more"}, call]))
    assert asyncio.run(session.get_items(limit=1)) == [call]  # held, yet the newest
    session.close()


@function_tool(name_override="read_file")
def read_big_file(path: str) -> str:
    """Read one module of the project."""
    return big_output(path)


def test_a_window_given_is_met_over_thirty_large_reads(tmp_path):
    fake = FakeModel(script(30, recall=False))
    session = GlyphpackSession(tmp_path / "ws", "task-1", model=MODEL, context_window=SMALL_WINDOW)
    agent = Agent(name="coder", instructions="You read code and answer briefly.", tools=[read_big_file], model=model(fake))
    result = asyncio.run(Runner.run(session.agent(agent), "Read every module and tell me where the parser is.", session=session, max_turns=40))
    assert result.final_output == ANSWER
    check_the_window_met(fake)
    session.close()


def test_a_handoff_target_is_compacted_and_offered_recall_and_server_state_is_refused(tmp_path):
    """``session.agent()`` wrapped the first agent only: after a handoff the target sent
    the runner's input uncompacted and could not recall. Now every agent a run can reach
    sends through the session, handed over by a listed agent or by a ``Handoff``. State
    kept on the provider's side is refused, never half used."""
    from agents import handoff

    for reach in ("agent", "handoff"):
        fake = FakeModel([Turn(text="handing over", calls=(("transfer_to_coder", {}),)), *script(10, recall=True)], faults={10: "overflow"})
        target = coder(fake)
        triage = Agent(name="triage", instructions="Hand code questions to the coder.", model=model(fake),
                       handoffs=[target if reach == "agent" else handoff(target)])
        session = GlyphpackSession(tmp_path / reach, "task-1", model=MODEL, threshold=6_000, context_window=40_000)
        result = asyncio.run(Runner.run(session.agent(triage), "Read every module and tell me where the parser is.", session=session, max_turns=30))
        assert result.final_output == ANSWER and result.last_agent.name == "coder", reach
        assert all(glyphpack.RECALL_TOOL in json.dumps(body.get("tools")) for body in fake.requests)  # the coder's requests too
        assert fake.statuses.count(400) == 1 and fake.statuses[-1] == 200  # the coder's overflow recovered
        _, whole = glyphpack.to_openai_responses(session.glyphpack.messages)
        assert session.glyphpack.view is not None and len(json.dumps(fake.requests[-1]["input"])) < 0.8 * len(json.dumps(whole))
        recall_ids = {c.id for m in session.glyphpack.messages for c in m.tool_calls if c.name == glyphpack.RECALL_TOOL}
        recalled = [r for m in session.glyphpack.messages for r in m.tool_results if r.call_id in recall_ids]
        assert recalled and not recalled[0].is_error
        session.close()
    # The provider's own conversation state is refused: by the SDK beside a session, by the session without one.
    from agents.exceptions import UserError

    session = GlyphpackSession(tmp_path / "server", "task-1", model=MODEL)
    wrapped = session.agent(coder(FakeModel([Turn(text="hi")])))
    with pytest.raises(UserError, match="cannot be combined with conversation_id, previous_response_id"):
        asyncio.run(Runner.run(wrapped, "Hi", session=session, previous_response_id="resp_123"))
    with pytest.raises(UsageError, match="pass session=<this GlyphpackSession> to Runner.run"):
        asyncio.run(Runner.run(wrapped, "Hi", previous_response_id="resp_123"))
    session.close()


def test_one_agent_serves_many_sessions_each_run_in_its_own(tmp_path):
    """The SDK's pattern is one agent and a session per conversation; ``session.agent()``
    bound the agent to one. ``compacting_agent`` sends each run through the session the
    run is given: three conversations interleaved, each holding exactly its own tool
    outputs; two runs at once stay apart; a new session object resumes each from the
    workspace."""
    from glyphpack.adapters.openai_agents import compacting_agent

    names = ("alpha", "bravo", "charlie")
    order = [name for _ in range(2) for name in names]
    script_ = [turn for n, name in enumerate(order)
               for turn in (Turn(text=f"{name} reads", calls=(("read_file", {"path": f"mod_{n:02d}.py"}),)), Turn(text=f"{name} answered"))]
    fake = FakeModel(script_)
    agent = compacting_agent(coder(fake))
    sessions = {name: GlyphpackSession(tmp_path / "ws", name, model=MODEL) for name in names}
    for n, name in enumerate(order):
        result = asyncio.run(Runner.run(agent, f"{name} question {n}", session=sessions[name]))
        assert result.final_output == f"{name} answered"
    for name, session in sessions.items():
        outputs = [r.text for m in session.glyphpack.messages for r in m.tool_results]
        assert outputs == [module_text(f"mod_{n:02d}.py") for n, other in enumerate(order) if other == name]
        assert [m.text for m in session.glyphpack.messages if m.role == "user"] == [f"{name} question {n}" for n, o in enumerate(order) if o == name]
    # Two runs at once, each in its own task: each session keeps its own words.
    together = FakeModel([Turn(text="noted")])
    both = compacting_agent(coder(together))

    async def at_once() -> None:
        await asyncio.gather(*(Runner.run(both, f"{name} at once", session=sessions[name]) for name in ("alpha", "bravo")))

    asyncio.run(at_once())
    for name in ("alpha", "bravo"):
        said = [m.text for m in sessions[name].glyphpack.messages if m.role == "user"]
        assert said[-1] == f"{name} at once" and not any("at once" in text for text in said[:-1])
    for session in sessions.values():
        session.close()
    # A new session object on the workspace resumes each conversation where it stood.
    again = FakeModel([Turn(text="resumed")])
    agent = compacting_agent(coder(again))
    for name in names:
        resumed = GlyphpackSession(tmp_path / "ws", name, model=MODEL)
        asyncio.run(Runner.run(agent, "go on", session=resumed))
        sent = json.dumps(again.requests[-1]["input"])
        assert f"{name} question" in sent and not any(f"{other} question" in sent for other in names if other != name)
        resumed.close()
    with pytest.raises(UsageError, match="run the agent with session=<a GlyphpackSession>"):
        asyncio.run(Runner.run(compacting_agent(coder(FakeModel([Turn(text="x")]))), "no session"))


def test_a_streamed_run_is_compacted_recalls_and_recovers_from_an_overflow(tmp_path):
    """``Runner.run_streamed``: the model's events reach the caller as they come, through
    the same session (a compaction in force, the recall answered, the overflow at
    request 9 compacted and sent again before any event went out)."""
    from glyphpack.testing.fake import FakeUpstream

    fake = FakeModel(script(10, recall=True), faults={9: "overflow"})
    session = GlyphpackSession(tmp_path / "ws", "task-1", model=MODEL, threshold=6_000, context_window=40_000)

    async def streamed(url: str) -> tuple[Any, int]:
        model = OpenAIResponsesModel(MODEL, AsyncOpenAI(api_key="test", base_url=f"{url}/v1", max_retries=0))
        agent = Agent(name="coder", instructions="You read code and answer briefly.", tools=[read_file], model=model)
        result = Runner.run_streamed(session.agent(agent), "Read every module and tell me where the parser is.", session=session, max_turns=20)
        events = [event async for event in result.stream_events()]
        return result, len(events)

    with FakeUpstream(fake) as upstream:  # over HTTP: the in-process transport does not stream
        result, events = asyncio.run(streamed(upstream.url))
    assert result.final_output == ANSWER and events > 20
    assert all(body.get("stream") for body in fake.requests)
    _, whole = glyphpack.to_openai_responses(session.glyphpack.messages)
    check_the_loop(fake, session.glyphpack, session.glyphpack.messages, json.dumps(fake.requests[-1]["input"]), json.dumps(whole))
    session.close()


# ------------------------------------------------------------------ one agent, three threads


def threads_agent(url: str) -> Agent[Any]:
    """The scenario's agent: one object for every thread, its model over HTTP at ``url``."""
    from glyphpack.adapters.openai_agents import compacting_agent

    model = OpenAIResponsesModel(MODEL, AsyncOpenAI(api_key="test", base_url=f"{url}/v1", max_retries=0))
    return compacting_agent(Agent(name="coder", instructions="You read code and answer briefly.", tools=[read_file], model=model))


def threads_session(workspace: str | Path, thread: str) -> GlyphpackSession:
    return GlyphpackSession(workspace, thread, model=MODEL, threshold=6_000, context_window=40_000)


async def ask(agent: Agent[Any], session: GlyphpackSession, text: str, streamed: bool) -> str:
    if streamed:
        result = Runner.run_streamed(agent, text, session=session, max_turns=20)
        async for _ in result.stream_events():
            pass
        return str(result.final_output)
    return str((await Runner.run(agent, text, session=session, max_turns=20)).final_output)


def ask_each_thread_once_more(workspace: str, url: str) -> None:
    """What a new process does: one more question to each thread (the resume test's child)."""
    from frameworks import RESUMED, THREADS, question

    async def go() -> None:  # one event loop: the SDK's client is bound to the loop it first ran in
        agent = threads_agent(url)
        for thread in THREADS:
            session = threads_session(workspace, thread)
            await ask(agent, session, question(thread, RESUMED), streamed=False)
            session.close()

    asyncio.run(go())


def test_one_agent_three_threads_interleaved_streamed_and_not_each_overflowing_recalling_and_resumed_in_a_new_process(tmp_path):
    """The done-when of frameworks as their users write them: one agent object, three
    sessions whose questions interleave (the second of each streamed), an overflow and a
    recall in each; each conversation holds exactly its own outputs; a new process
    resumes each thread sending byte for byte what this one sends."""
    from frameworks import RESUMED, check_the_threads, question, resumed_models, run_in_child, scenario_models, scenario_order

    from glyphpack.testing.fake import FakeUpstream

    models = scenario_models()
    sessions = {thread: threads_session(tmp_path / "ws", thread) for thread in ("alpha", "bravo", "charlie")}
    answers: dict[tuple[str, int], str] = {}

    async def interleaved(url: str) -> None:
        agent = threads_agent(url)
        for thread, number, streamed in scenario_order():
            answers[(thread, number)] = await ask(agent, sessions[thread], question(thread, number), streamed)

    with FakeUpstream(models.stray, route=models.route) as upstream:
        asyncio.run(interleaved(upstream.url))
    check_the_threads(models, {t: s.glyphpack for t, s in sessions.items()}, answers)
    shutil.copytree(tmp_path / "ws", tmp_path / "copy")
    continued, resumed = resumed_models(models), resumed_models(models)

    async def once_more(url: str) -> None:
        agent = threads_agent(url)
        for thread, session in sessions.items():
            await ask(agent, session, question(thread, RESUMED), streamed=False)
            session.close()

    with FakeUpstream(continued.stray, route=continued.route) as upstream:
        asyncio.run(once_more(upstream.url))
    with FakeUpstream(resumed.stray, route=resumed.route) as upstream:
        run_in_child("test_adapter_openai_agents", "ask_each_thread_once_more", str(tmp_path / "copy"), upstream.url)
    assert resumed.requests() == continued.requests() and len(resumed.requests()) == 3
