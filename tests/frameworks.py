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
