"""Google ADK (the real ``google-adk`` package) with glyphpack's session service and plugin,
against the fake Gemini server over HTTP: ten tool turns, a compaction, a recall the agent
runs as a function tool, an overflow recovered, every request valid; ADK's own events keep
every message and the workspace stores the same."""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # drives the framework: CI runs it, and --run-slow (tests/conftest.py)
pytest.importorskip("google.adk")
from frameworks import ANSWER, SMALL_WINDOW, big_output, check_the_loop, check_the_window_met, module_text, script
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.google_llm import Gemini
from google.adk.runners import Runner
from google.genai import types

import glyphpack
from glyphpack.adapters.google_adk import GlyphpackSessionService
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn

MODEL = "gemini-3-pro"


def read_file(path: str) -> str:
    """Read one module of the project."""
    return module_text(path)


def run(runner: Runner, service: GlyphpackSessionService, session_id: str, text: str) -> list[Any]:
    async def go() -> list[Any]:
        if await service.get_session(app_name="app", user_id="u", session_id=session_id) is None:
            await service.create_session(app_name="app", user_id="u", session_id=session_id)
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [event async for event in runner.run_async(user_id="u", session_id=session_id, new_message=message)]

    return asyncio.run(go())


def run_coder(fake: FakeModel, service: GlyphpackSessionService, read: Any) -> list[Any]:
    """The coder agent (its tool ``read`` and the recall) run once on session ``s1``
    against ``fake``: its events."""
    with FakeUpstream(fake) as upstream:
        agent = LlmAgent(name="coder", model=Gemini(model=MODEL, base_url=upstream.url), instruction="You read code and answer briefly.",
                         tools=[read, service.recall_tool])
        runner = Runner(app=App(name="app", root_agent=agent, plugins=[service.plugin]), session_service=service)
        return run(runner, service, "s1", "Read every module and tell me where the parser is.")


def test_ten_tool_turns_a_compaction_a_recall_and_an_overflow_through_a_real_runner(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "test")
    fake = FakeModel(script(10, recall=True), faults={9: "overflow"})
    service = GlyphpackSessionService(tmp_path / "ws", threshold=6_000, context_window=40_000)
    events = run_coder(fake, service, read_file)
    assert events[-1].content.parts[0].text == ANSWER
    session = service.sessions[("s1", "coder")]
    # ADK's own events keep every message; the workspace stores the same.
    adk = asyncio.run(service.get_session(app_name="app", user_id="u", session_id="s1"))
    kept = glyphpack.from_gemini([e.content.model_dump(exclude_none=True) for e in adk.events if e.content])
    _, whole = glyphpack.to_gemini(kept)
    check_the_loop(fake, session, kept, json.dumps(fake.requests[-1]["contents"]), json.dumps(whole, default=str))
    # Deleting the session deletes its glyphpack conversation too.
    asyncio.run(service.delete_session(app_name="app", user_id="u", session_id="s1"))
    assert "s1" not in [c.id for c in service.workspace.tree.conversations()]
    service.close()


def test_a_session_resumed_by_a_new_service_sends_what_the_first_would_have(tmp_path, monkeypatch):
    """Everything a runner needs is on disk: ADK's events in the workspace's SQLite file,
    the transcript and its compaction in the workspace."""
    monkeypatch.setenv("GOOGLE_API_KEY", "test")

    def runner_for(service: GlyphpackSessionService, url: str) -> Runner:
        agent = LlmAgent(name="coder", model=Gemini(model=MODEL, base_url=url), instruction="Be brief.", tools=[read_file, service.recall_tool])
        return Runner(app=App(name="app", root_agent=agent, plugins=[service.plugin]), session_service=service)

    first = GlyphpackSessionService(tmp_path / "ws", threshold=6_000, context_window=40_000)
    with FakeUpstream(FakeModel(script(8, recall=False))) as upstream:
        run(runner_for(first, upstream.url), first, "s1", "Read the modules.")
    assert first.sessions[("s1", "coder")].view is not None
    shutil.copytree(tmp_path / "ws", tmp_path / "copy")
    continued, resumed = FakeModel([Turn(text="No.")]), FakeModel([Turn(text="No.")])
    with FakeUpstream(continued) as upstream:
        run(runner_for(first, upstream.url), first, "s1", "Anything else?")
    first.close()
    again = GlyphpackSessionService(tmp_path / "copy", threshold=6_000, context_window=40_000)
    with FakeUpstream(resumed) as upstream:
        run(runner_for(again, upstream.url), again, "s1", "Anything else?")
    again.close()
    assert json.dumps(resumed.requests, sort_keys=True) == json.dumps(continued.requests, sort_keys=True)


def test_a_window_given_is_met_over_thirty_large_reads(tmp_path, monkeypatch):
    def read_file(path: str) -> str:
        """Read one module of the project."""
        return big_output(path)

    monkeypatch.setenv("GOOGLE_API_KEY", "test")
    fake = FakeModel(script(30, recall=False))
    service = GlyphpackSessionService(tmp_path / "ws", context_window=SMALL_WINDOW)
    assert run_coder(fake, service, read_file)[-1].content.parts[0].text == ANSWER
    check_the_window_met(fake)
    service.close()


def test_calls_without_ids_keep_theirs_and_outputs_are_stored_as_the_tool_returned_them(tmp_path, monkeypatch):
    """The Gemini API's call ids are optional, and ADK strips its own before a plugin sees
    the request: each id-less call got a fresh id on every model call and the third was
    refused ("differs from the stored one"). ADK wraps a tool's string as {"result": ...}:
    the workspace held that JSON, and the model got it escaped inside {"output": ...}."""
    monkeypatch.setenv("GOOGLE_API_KEY", "test")
    fake = FakeModel(script(10, recall=True), faults={9: "overflow"}, gemini_call_ids=False)
    service = GlyphpackSessionService(tmp_path / "ws", threshold=6_000, context_window=40_000)
    events = run_coder(fake, service, read_file)
    assert events[-1].content.parts[0].text == ANSWER
    session = service.sessions[("s1", "coder")]
    outputs = [r.text for m in session.messages for r in m.tool_results if not r.text.startswith("[")][:10]
    assert outputs[0] == module_text("mod_00.py") and all(not text.startswith("{") for text in outputs)
    sent = [part["functionResponse"]["response"] for body in fake.requests for content in body["contents"] for part in content["parts"]
            if "functionResponse" in part]
    assert sent and all(set(response) <= {"result", "error"} for response in sent)  # as ADK sends them
    assert {"result": module_text("mod_09.py")} in sent
    ids = [c.id for m in session.messages for c in m.tool_calls]
    assert len(ids) == len(set(ids)) == 11
    service.close()


def test_a_run_streamed_as_server_sent_events_is_compacted_recalls_and_recovers(tmp_path, monkeypatch):
    """ADK's SSE streaming mode: the model's partial events reach the runner as they come,
    and the run is the same loop (compaction, recall, the overflow at request 9 compacted
    and sent again; the retry's answer arrives whole, the callback's one response)."""
    from google.adk.agents.run_config import RunConfig, StreamingMode

    monkeypatch.setenv("GOOGLE_API_KEY", "test")
    fake = FakeModel(script(10, recall=True), faults={9: "overflow"})
    service = GlyphpackSessionService(tmp_path / "ws", threshold=6_000, context_window=40_000)
    with FakeUpstream(fake) as upstream:
        agent = LlmAgent(name="coder", model=Gemini(model=MODEL, base_url=upstream.url), instruction="You read code and answer briefly.",
                         tools=[read_file, service.recall_tool])
        runner = Runner(app=App(name="app", root_agent=agent, plugins=[service.plugin]), session_service=service)

        async def go() -> list[Any]:
            await service.create_session(app_name="app", user_id="u", session_id="s1")
            message = types.Content(role="user", parts=[types.Part(text="Read every module and tell me where the parser is.")])
            config = RunConfig(streaming_mode=StreamingMode.SSE)
            return [event async for event in runner.run_async(user_id="u", session_id="s1", new_message=message, run_config=config)]

        events = asyncio.run(go())
    assert any(event.partial for event in events)  # streamed
    final = [e for e in events if not e.partial and e.content and e.content.parts and e.content.parts[0].text]
    assert final[-1].content.parts[0].text == ANSWER
    session = service.sessions[("s1", "coder")]
    assert fake.statuses.count(400) == 1 and fake.statuses[-1] == 200 and session.view is not None
    assert sum(len(m.tool_results) for m in session.messages) == 11
    service.close()


def test_one_runner_serves_three_sessions_interleaved_and_a_new_service_resumes_each(tmp_path, monkeypatch):
    """ADK keys conversations by session id: one agent, one runner, three sessions whose
    turns interleave, each holding exactly its own tool outputs (calls without ids, as
    ADK sends them); a new service on the same workspace resumes each where it stood."""
    monkeypatch.setenv("GOOGLE_API_KEY", "test")
    names = ("alpha", "bravo", "charlie")
    order = [name for _ in range(2) for name in names]
    script_ = [turn for n, name in enumerate(order)
               for turn in (Turn(text=f"{name} reads", calls=(("read_file", {"path": f"mod_{n:02d}.py"}),)), Turn(text=f"{name} answered"))]
    fake = FakeModel(script_, gemini_call_ids=False)
    service = GlyphpackSessionService(tmp_path / "ws")
    with FakeUpstream(fake) as upstream:
        agent = LlmAgent(name="coder", model=Gemini(model=MODEL, base_url=upstream.url), instruction="Be brief.", tools=[read_file, service.recall_tool])
        runner = Runner(app=App(name="app", root_agent=agent, plugins=[service.plugin]), session_service=service)
        for n, name in enumerate(order):
            events = run(runner, service, name, f"{name} question {n}")
            assert events[-1].content.parts[0].text == f"{name} answered"
    for name in names:
        stored = service.sessions[(name, "coder")].messages
        assert [r.text for m in stored for r in m.tool_results] == [module_text(f"mod_{n:02d}.py") for n, o in enumerate(order) if o == name]
        assert [m.text for m in stored if m.role == "user"] == [f"{name} question {n}" for n, o in enumerate(order) if o == name]
    service.close()
    again = FakeModel([Turn(text="resumed")])
    service = GlyphpackSessionService(tmp_path / "ws")
    with FakeUpstream(again) as upstream:
        agent = LlmAgent(name="coder", model=Gemini(model=MODEL, base_url=upstream.url), instruction="Be brief.", tools=[read_file, service.recall_tool])
        runner = Runner(app=App(name="app", root_agent=agent, plugins=[service.plugin]), session_service=service)
        for name in names:
            run(runner, service, name, "go on")
            sent = json.dumps(again.requests[-1]["contents"])
            assert f"{name} question" in sent and not any(f"{other} question" in sent for other in names if other != name)
    service.close()


def test_the_session_service_takes_every_argument_adk_passes(tmp_path, monkeypatch):
    """Each method of ADK's session service with every argument it takes: a session made
    with state and without an id (ADK's own id), read with a config that keeps the newest
    events, listed for one user and for all, an event appended, and deleted with its
    glyphpack conversation (one no model call made is deleted all the same)."""
    from google.adk.events import Event
    from google.adk.sessions.base_session_service import GetSessionConfig

    monkeypatch.setenv("GOOGLE_API_KEY", "test")
    service = GlyphpackSessionService(tmp_path / "ws")

    async def go() -> None:
        made = await service.create_session(app_name="app", user_id="ada", state={"topic": "parser"})
        assert made.id and made.state == {"topic": "parser"}
        other = await service.create_session(app_name="app", user_id="bob", session_id="bob-1")
        for n in range(3):
            await service.append_event(made, Event(author="user", invocation_id=f"i{n}", content=types.Content(role="user", parts=[types.Part(text=f"note {n}")])))
        whole = await service.get_session(app_name="app", user_id="ada", session_id=made.id)
        newest = await service.get_session(app_name="app", user_id="ada", session_id=made.id, config=GetSessionConfig(num_recent_events=1))
        assert [e.content.parts[0].text for e in whole.events] == ["note 0", "note 1", "note 2"]
        assert [e.content.parts[0].text for e in newest.events] == ["note 2"]
        assert [s.id for s in (await service.list_sessions(app_name="app", user_id="ada")).sessions] == [made.id]
        assert sorted(s.id for s in (await service.list_sessions(app_name="app")).sessions) == sorted([made.id, other.id])
        await service.delete_session(app_name="app", user_id="bob", session_id="bob-1")  # no model call: nothing of glyphpack's to delete
        assert await service.get_session(app_name="app", user_id="bob", session_id="bob-1") is None

    asyncio.run(go())
    service.close()


# ------------------------------------------------------------------ one runner, three sessions


def threads_runner(folder: str, url: str) -> tuple[Runner, GlyphpackSessionService]:
    """The scenario's runner (one agent, one runner for every session), ADK's events and
    the workspace both in ``folder``; the model over HTTP at ``url``."""
    service = GlyphpackSessionService(folder, threshold=6_000, context_window=40_000)
    agent = LlmAgent(name="coder", model=Gemini(model=MODEL, base_url=url), instruction="You read code and answer briefly.",
                     tools=[read_file, service.recall_tool])
    return Runner(app=App(name="app", root_agent=agent, plugins=[service.plugin]), session_service=service), service


def ask(runner: Runner, service: GlyphpackSessionService, thread: str, text: str, streamed: bool) -> str:
    """One question to session ``thread`` (made on first use); the answer's text."""
    from google.adk.agents.run_config import RunConfig, StreamingMode

    async def go() -> list[Any]:
        if await service.get_session(app_name="app", user_id="u", session_id=thread) is None:
            await service.create_session(app_name="app", user_id="u", session_id=thread)
        config = RunConfig(streaming_mode=StreamingMode.SSE if streamed else StreamingMode.NONE)
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [event async for event in runner.run_async(user_id="u", session_id=thread, new_message=message, run_config=config)]

    events = asyncio.run(go())
    assert any(event.partial for event in events) == streamed
    return str([e for e in events if not e.partial and e.content and e.content.parts and e.content.parts[0].text][-1].content.parts[0].text)


def ask_each_thread_once_more(folder: str, url: str) -> None:
    """What a new process does: one more question to each thread (the resume test's child)."""
    import os

    from frameworks import RESUMED, THREADS, question

    os.environ.setdefault("GOOGLE_API_KEY", "test")
    runner, service = threads_runner(folder, url)
    for thread in THREADS:
        ask(runner, service, thread, question(thread, RESUMED), streamed=False)
    service.close()


def test_one_runner_three_sessions_interleaved_streamed_and_not_each_overflowing_recalling_and_resumed_in_a_new_process(tmp_path, monkeypatch):
    """The done-when of frameworks as their users write them: one agent and runner, three
    sessions whose questions interleave (the second of each streamed as server-sent
    events, its overflow's retry too), calls without ids, each tool's output wrapped by
    ADK as {"result": ...}, an overflow and a recall in each; each session's conversation
    holds exactly its own outputs as the tool returned them; a new process (ADK's
    SQLite events and the workspace on disk) resumes each sending byte for byte what
    this one sends."""
    from frameworks import RESUMED, check_the_threads, question, resumed_models, run_in_child, scenario_models, scenario_order

    monkeypatch.setenv("GOOGLE_API_KEY", "test")
    models = scenario_models(gemini_call_ids=False)
    answering = [models]
    answers: dict[tuple[str, int], str] = {}
    with FakeUpstream(models.stray, route=lambda body: answering[0].route(body)) as upstream:
        runner, service = threads_runner(str(tmp_path / "run"), upstream.url)
        for thread, number, streamed in scenario_order():
            answers[(thread, number)] = ask(runner, service, thread, question(thread, number), streamed)
        check_the_threads(models, {t: service.sessions[(t, "coder")] for t in ("alpha", "bravo", "charlie")}, answers)
        sent = [part["functionResponse"]["response"] for model in models.models.values() for body in model.requests
                for content in body["contents"] for part in content["parts"] if "functionResponse" in part]
        assert sent and all(set(response) == {"result"} for response in sent)  # wrapped as ADK wraps them
        shutil.copytree(tmp_path / "run", tmp_path / "copy")
        answering[0] = resumed_models(models)  # the same runner goes on
        for thread in ("alpha", "bravo", "charlie"):
            ask(runner, service, thread, question(thread, RESUMED), streamed=False)
    service.close()
    resumed = resumed_models(models)
    with FakeUpstream(resumed.stray, route=resumed.route) as upstream:
        run_in_child("test_adapter_google_adk", "ask_each_thread_once_more", str(tmp_path / "copy"), upstream.url)
    assert resumed.requests() == answering[0].requests() and len(resumed.requests()) == 3


def test_a_sub_agent_is_compacted_recovers_and_is_offered_recall_without_being_given_it(tmp_path, monkeypatch):
    """ADK's sub-agents: a coordinator transfers to its coder; each agent of the session is
    its own glyphpack conversation agent, the coder's holding exactly its outputs, its
    overflow recovered and its recall answered. Neither agent was given the recall tool:
    the plugin offers it to every agent (it had to be added to each by hand)."""
    monkeypatch.setenv("GOOGLE_API_KEY", "test")
    fake = FakeModel([Turn(text="handing over", calls=(("transfer_to_agent", {"agent_name": "coder"}),)), *script(10, recall=True)],
                     faults={10: "overflow"}, gemini_call_ids=False)
    service = GlyphpackSessionService(tmp_path / "ws", threshold=6_000, context_window=40_000)
    with FakeUpstream(fake) as upstream:
        coder = LlmAgent(name="coder", model=Gemini(model=MODEL, base_url=upstream.url), instruction="You read code and answer briefly.",
                         tools=[read_file], description="Reads code.")
        triage = LlmAgent(name="triage", model=Gemini(model=MODEL, base_url=upstream.url), instruction="Hand code questions to the coder.",
                          sub_agents=[coder])
        runner = Runner(app=App(name="app", root_agent=triage, plugins=[service.plugin]), session_service=service)
        events = run(runner, service, "s1", "Read every module and tell me where the parser is.")
    assert events[-1].content.parts[0].text == ANSWER and events[-1].author == "coder"
    assert set(service.sessions) == {("s1", "triage"), ("s1", "coder")}
    assert all(glyphpack.RECALL_TOOL in json.dumps(body.get("tools")) for body in fake.requests)
    assert fake.statuses.count(400) == 1 and fake.statuses[-1] == 200
    coder_session = service.sessions[("s1", "coder")]
    names = {c.id: c.name for m in coder_session.messages for c in m.tool_calls}
    results = [r for m in coder_session.messages for r in m.tool_results]
    assert [r.text for r in results if names[r.call_id] == "read_file"] == [module_text(f"mod_{n:02d}.py") for n in range(10)]
    recalled = [r for r in results if names[r.call_id] == glyphpack.RECALL_TOOL]
    assert len(recalled) == 1 and not recalled[0].is_error and "line " in recalled[0].text
    assert coder_session.view is not None
    assert not any(r.text == module_text("mod_00.py") for m in service.sessions[("s1", "triage")].messages for r in m.tool_results)
    service.close()
