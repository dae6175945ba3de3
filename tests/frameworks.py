"""What the framework adapters' tests share: the scripted model (ten reads, a recall, an
answer), the file it reads, and the checks every framework's run must pass."""

from __future__ import annotations

import json
from collections.abc import Sequence

import glyphpack
from glyphpack import Message
from glyphpack.testing.fake import NEWEST_REF, FakeModel, Turn

ANSWER = "All modules read; the parser is in mod_03.py."
FILE = "line {n}: def parse(value, index): return value[index] + {n}\n"


def script(turns: int, *, recall: bool) -> list[Turn]:
    """The model reads ``turns`` files, then (``recall``) brings back what a note names, then answers."""
    reads = [Turn(text=f"reading module {n}", calls=(("read_file", {"path": f"mod_{n:02d}.py"}),)) for n in range(turns)]
    back = [Turn(text="checking what I read first", calls=((glyphpack.RECALL_TOOL, {"ref": NEWEST_REF}),))] if recall else []
    return [*reads, *back, Turn(text=ANSWER)]


def module_text(path: str) -> str:
    """What ``read_file`` returns for ``mod_NN.py``: 60 numbered lines (~3,600 characters)."""
    n = int(path[4:6])
    return "".join(FILE.format(n=n * 100 + k) for k in range(60))


def check_the_loop(fake: FakeModel, session: glyphpack.Session, kept: Sequence[Message], sent: str, whole: str) -> None:
    """What every framework's ten-read run with a recall and an overflow at request 9
    must show: one rejection, sent again smaller; a compaction in force; the workspace
    storing what the framework kept (``kept``), all eleven results; the last request
    (``sent``, as JSON) smaller than the whole history (``whole``) and carrying the
    recall's answer; the recall tool in every request; the provider's counts learned."""
    assert fake.statuses.count(400) == 1 and fake.statuses[8] == 400 and fake.statuses[-1] == 200
    assert len(fake.requests) == 13  # 10 reads, the recall, the answer, and the rejected one sent again
    assert session.view is not None and session.last_compaction is not None
    stored = [m for m in session.messages if m.role != "system"]
    assert [(m.role, m.text, [type(b).__name__ for b in m.content]) for m in stored] == [
        (m.role, m.text, [type(b).__name__ for b in m.content]) for m in kept if m.role != "system"
    ]
    assert sum(len(m.tool_results) for m in session.messages) == 11
    assert len(sent) < 0.8 * len(whole)
    recall_calls = [c for m in session.messages for c in m.tool_calls if c.name == glyphpack.RECALL_TOOL]
    answer = next(r for m in session.messages for r in m.tool_results if r.call_id == recall_calls[0].id)
    assert not answer.is_error and "line " in answer.text and json.dumps(answer.text)[1:-1][:200] in sent
    assert all(glyphpack.RECALL_TOOL in json.dumps(body.get("tools")) for body in fake.requests)
    assert len(session.calibration.counts) >= 10


#: A window the tools' outputs overrun: 30 reads of 5-8k tokens each (as the fake counts them).
SMALL_WINDOW = 40_000


def big_output(path: str) -> str:
    """What ``read_file`` returns in the small-window runs: 15,000-24,000 characters
    (5-8k tokens as the fake counts them), distinct per file."""
    n = int(path[4:6])
    return "".join(f"line {n * 1000 + k}: value[{k}] = parse(index {k}) + {n}\n" for k in range(300 + 37 * (n % 7)))


def check_the_window_met(fake: FakeModel) -> None:
    """A run told ``SMALL_WINDOW``, with no summarizer: every read answered, no request
    refused and none over the window (the newest results cut behind their refs where
    nothing else fit: a CompactionError at turn 9 before)."""
    from glyphpack.testing.fake import count_tokens

    assert len(fake.requests) == 31 and set(fake.statuses) == {200}
    assert max(count_tokens(body) for body in fake.requests) <= SMALL_WINDOW


# ------------------------------------------------------------------ three threads, one agent

#: The threads of the many-threads scenario, each reading its own ten modules.
THREADS = ("alpha", "bravo", "charlie")
#: Each thread's questions (1-based) and the modules each reads: four, four, then two
#: and a recall of what a compaction's note names; the second is streamed.
READS = {1: range(0, 4), 2: range(4, 8), 3: range(8, 10)}
STREAMED = 2
#: Each thread's request the fake refuses as too long (in its streamed question).
OVERFLOW_AT = 9


def question(thread: str, number: int) -> str:
    return f"{thread} question {number}"


def thread_modules(thread: str) -> list[int]:
    """The module numbers ``thread`` reads (alpha 0-9, bravo 10-19, charlie 20-29)."""
    return [10 * THREADS.index(thread) + n for n in range(10)]


def thread_script(thread: str) -> list[Turn]:
    """What the model answers ``thread``, request by request, over its three questions."""
    first = 10 * THREADS.index(thread)
    turns: list[Turn] = []
    for number, reads in READS.items():
        turns += [Turn(text=f"{thread} reads", calls=(("read_file", {"path": f"mod_{first + n:02d}.py"}),)) for n in reads]
        if number == 3:
            turns.append(Turn(text=f"{thread} checks", calls=((glyphpack.RECALL_TOOL, {"ref": NEWEST_REF}),)))
        turns.append(Turn(text=f"{thread} answer {number}"))
    return turns


class ThreadModels:
    """One fake model per thread behind one upstream: each request goes to the model of
    the one thread whose questions it holds; a request holding none or several goes to
    ``stray``, which refuses it (so threads mixed fail the run, and the check)."""

    def __init__(self, scripts: dict[str, list[Turn]], faults: dict[int, str] | None = None, **options: object):
        self.models = {thread: FakeModel(list(turns), faults=dict(faults or {}), **options) for thread, turns in scripts.items()}  # type: ignore[arg-type]
        self.stray = FakeModel([Turn(text="stray")], faults={n: "401" for n in range(1, 1000)})

    def route(self, body: dict[str, object]) -> FakeModel:
        text = json.dumps(body)
        holders = [thread for thread in self.models if f"{thread} question" in text]
        return self.models[holders[0]] if len(holders) == 1 else self.stray

    def requests(self) -> list[str]:
        """Every thread's requests in its own order, as canonical JSON (to compare runs)."""
        return [json.dumps(body, sort_keys=True) for thread in self.models for body in self.models[thread].requests]


def scenario_models(**options: object) -> ThreadModels:
    return ThreadModels({thread: thread_script(thread) for thread in THREADS}, faults={OVERFLOW_AT: "overflow"}, **options)


def scenario_order() -> list[tuple[str, int, bool]]:
    """(thread, question, streamed) in the order they are asked: each question of every
    thread before the next question of any."""
    return [(thread, number, number == STREAMED) for number in READS for thread in THREADS]


def check_the_threads(models: ThreadModels, sessions: dict[str, glyphpack.Session], answers: dict[tuple[str, int], str]) -> None:
    """What the three-thread run must show, thread by thread: the three answers given; its
    fifteen requests (ten reads, a recall, three answers, the refused one sent again) all
    accepted but the overflow, none holding another thread's words, the second
    question's streamed and no other; the recall tool in every request; its stored
    conversation holding exactly its questions and its own ten outputs as the tool
    returned them, and the recall's answer; a compaction in force, the last request
    carrying under 80% of the outputs' size."""
    from glyphpack.testing.fake import CHARS_PER_TOKEN, count_tokens

    assert not models.stray.requests, "a request held several threads' words, or none"
    for thread in THREADS:
        assert [answers[(thread, n)] for n in READS] == [f"{thread} answer {n}" for n in READS]
        fake, session = models.models[thread], sessions[thread]
        assert len(fake.requests) == 15 and fake.statuses.count(400) == 1 and fake.statuses[OVERFLOW_AT - 1] == 400, (thread, fake.statuses)
        streamed = [bool(body.get("stream")) or path.endswith(":streamGenerateContent") for body, path in zip(fake.requests, fake.paths)]
        assert streamed == [False] * 5 + [True] * 6 + [False] * 4, (thread, streamed)
        assert all(glyphpack.RECALL_TOOL in json.dumps(body.get("tools")) for body in fake.requests)
        stored = session.messages
        assert [m.text for m in stored if m.role == "user"] == [question(thread, n) for n in READS]
        names = {c.id: c.name for m in stored for c in m.tool_calls}
        results = [r for m in stored for r in m.tool_results]
        assert [r.text for r in results if names[r.call_id] == "read_file"] == [module_text(f"mod_{n:02d}.py") for n in thread_modules(thread)]
        recalled = [r for r in results if names[r.call_id] == glyphpack.RECALL_TOOL]
        assert len(recalled) == 1 and not recalled[0].is_error and "line " in recalled[0].text
        assert session.view is not None
        outputs = sum(len(module_text(f"mod_{n:02d}.py")) for n in thread_modules(thread)) / CHARS_PER_TOKEN
        assert count_tokens(fake.requests[-1]) < 0.8 * outputs


def resumed_models(run: ThreadModels) -> ThreadModels:
    """The models a resumed ``run``'s one more question per thread goes to: the same
    provider, so what each thread's model signed and sealed (Gemini's signatures,
    Responses' encrypted reasoning) verifies when it comes back."""
    models = ThreadModels({thread: [Turn(text=f"{thread} resumed")] for thread in THREADS})
    for thread, model in models.models.items():
        model.signed, model.encrypted = dict(run.models[thread].signed), dict(run.models[thread].encrypted)
    return models


RESUMED = 4  # the question number a resumed run asks each thread


def run_in_child(module: str, function: str, *args: str) -> None:
    """``module.function(*args)`` (a test module's) in a new Python process: what a
    thread resumed after a restart sees is only what is on disk."""
    import subprocess
    import sys
    from pathlib import Path

    code = f"import sys; sys.path[:0] = [{str(Path(__file__).parent)!r}]; import {module}; {module}.{function}(*sys.argv[1:])"
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]


# ------------------------------------------------------------------ a sub-agent used as a tool

#: The delegation scenario: a boss agent whose tool ``ask_researcher`` runs a researcher
#: agent afresh each call (LangChain's subagents-as-tools, Pydantic AI's delegation). The
#: boss asks two researchers at once, answers, then asks a third; each researcher reads
#: six modules of its own, recalls what a note names and answers.
BOSS_QUESTIONS = ("boss question 1", "boss question 2")
TASKS = {"one": range(30, 36), "two": range(40, 46), "three": range(50, 56)}
#: Each researcher's request the fake refuses as too long.
RESEARCHER_OVERFLOW_AT = 6
ASK_RESEARCHER = "ask_researcher"


def task(name: str) -> str:
    return f"researcher task {name}"


def boss_script() -> list[Turn]:
    asks = tuple((ASK_RESEARCHER, {"question": task(name)}) for name in ("one", "two"))
    return [Turn(text="asking two researchers", calls=asks), Turn(text="boss answer 1"),
            Turn(text="asking a third", calls=((ASK_RESEARCHER, {"question": task("three")}),)), Turn(text="boss answer 2")]


def researcher_script(name: str) -> list[Turn]:
    reads = [Turn(text=f"{name} reads", calls=(("read_file", {"path": f"mod_{n:02d}.py"}),)) for n in TASKS[name]]
    return [*reads, Turn(text=f"{name} checks", calls=((glyphpack.RECALL_TOOL, {"ref": NEWEST_REF}),)), Turn(text=f"researcher answer {name}")]


class DelegationModels(ThreadModels):
    """The boss's model and one per researcher: a request holding a boss question is the
    boss's; else the one researcher whose task it holds; else (none, or several tasks in
    a researcher's request) ``stray``, which refuses it."""

    def __init__(self) -> None:
        super().__init__({"boss": boss_script(), **{name: researcher_script(name) for name in TASKS}})
        for name in TASKS:
            self.models[name].faults = {RESEARCHER_OVERFLOW_AT: "overflow"}

    def route(self, body: dict[str, object]) -> FakeModel:
        text = json.dumps(body)
        if "boss question" in text:
            return self.models["boss"]
        holders = [name for name in TASKS if task(name) in text]
        return self.models[holders[0]] if len(holders) == 1 else self.stray


def check_the_delegation(models: DelegationModels, workspace: glyphpack.Workspace, conversation: str, boss: str, researcher: str) -> None:
    """What the delegation run must show: every request accepted (each researcher's
    overflow aside, sent again smaller), none mixing agents, the recall tool in each; the
    boss's transcript (``conversation``/``boss``) holding its questions, its calls and the
    researchers' answers as their results; one transcript per call of the researcher, in
    the same conversation, named ``{researcher}-{call id}``, holding exactly its task, its
    six outputs as the tool returned them and its recall's answer."""
    assert not models.stray.requests, "a request held two agents' words, or none"
    boss_stored = workspace.load(conversation, boss).messages
    assert [m.text for m in boss_stored if m.role == "user"] == list(BOSS_QUESTIONS)
    calls = [c for m in boss_stored for c in m.tool_calls]
    assert [c.arguments["question"] for c in calls] == [task(name) for name in TASKS]
    results = {r.call_id: r.text for m in boss_stored for r in m.tool_results}
    assert [results[c.id] for c in calls] == [f"researcher answer {name}" for name in TASKS]
    assert [m.text for m in boss_stored if m.role == "assistant"][-1] == "boss answer 2"
    agents = sorted(agent for conv, agent in workspace.transcripts() if conv == conversation and agent != boss)
    assert len(agents) == 3 and all(a.startswith(f"{researcher}-") for a in agents), agents
    for call, name in zip(calls, TASKS):
        fake = models.models[name]
        assert fake.statuses.count(400) == 1 and fake.statuses[RESEARCHER_OVERFLOW_AT - 1] == 400 and fake.statuses[-1] == 200, (name, fake.statuses)
        assert all(glyphpack.RECALL_TOOL in json.dumps(body.get("tools")) for body in fake.requests)
        kept = [a for a in agents if a.endswith(call.id)]
        assert len(kept) == 1, (call.id, agents)
        stored = workspace.load(conversation, kept[0])
        assert [m.text for m in stored.messages if m.role == "user"] == [task(name)]
        names = {c.id: c.name for m in stored.messages for c in m.tool_calls}
        outputs = [r for m in stored.messages for r in m.tool_results]
        assert [r.text for r in outputs if names[r.call_id] == "read_file"] == [module_text(f"mod_{n:02d}.py") for n in TASKS[name]]
        recalled = [r for r in outputs if names[r.call_id] == glyphpack.RECALL_TOOL]
        assert len(recalled) == 1 and not recalled[0].is_error and "line " in recalled[0].text
        assert stored.messages[-1].text == f"researcher answer {name}"
    assert all(glyphpack.RECALL_TOOL in json.dumps(body.get("tools")) for body in models.models["boss"].requests)
