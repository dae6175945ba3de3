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
