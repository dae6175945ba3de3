"""Helpers for testing code built on glyphpack: a deterministic generator of realistic
agent sessions, for tests, benchmarks and demos; and ``FakeModel``, a local fake of the
four provider APIs behind the official SDK clients (``glyphpack.testing.fake``), to run
a harness's loop with no key and no network.

The agent reads real source files of the Python standard library, runs commands whose
outputs look like test runs and listings, greps, takes small screenshots (PNG), and
sometimes hits errors. The same seed, size and Python version give the same session.
"""

from __future__ import annotations

import io
import random
import sysconfig
from functools import lru_cache
from pathlib import Path

from .._history.messages import Image, Message, Text, Thinking, ToolCall, ToolResult
from .._types import public
from .fake import FakeModel, Turn

__all__ = ["FakeModel", "Turn", "generate_session"]

_TASKS = (
    "Refactor the configuration loader so that it validates every field and reports all errors at once.",
    "Find out why the nightly job runs twice and fix it without changing the schedule format.",
    "Add a --dry-run flag to the deploy command; it must not touch the network.",
)
_FOLLOW_UPS = (
    "Good. Now also make sure the old behaviour is kept behind a flag.",
    "The CI run failed on Windows; have a look at the path handling.",
    "Please keep the public API unchanged and add tests for the edge cases.",
    "Can you check the module that parses the options as well?",
)


@lru_cache(maxsize=1)
def _stdlib_files() -> tuple[Path, ...]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return tuple(sorted(p for p in root.glob("*.py") if p.stat().st_size > 2000))


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _screenshot(rng: random.Random) -> bytes:
    from PIL import Image as PILImage
    from PIL import ImageDraw

    image = PILImage.new("RGB", (rng.choice((320, 480, 640)), rng.choice((200, 240, 360))), (245, 245, 245))
    draw = ImageDraw.Draw(image)
    for _ in range(rng.randint(3, 9)):
        x0, y0 = rng.randrange(0, image.width - 20), rng.randrange(0, image.height - 20)
        x1, y1 = rng.randrange(x0 + 10, image.width), rng.randrange(y0 + 10, image.height)
        draw.rectangle((x0, y0, x1, y1), fill=tuple(rng.randrange(40, 230) for _ in range(3)))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def _test_run(rng: random.Random, path: Path, failing: bool) -> str:
    names = [f"test_{path.stem}_{i}" for i in range(rng.randint(5, 40))]
    lines = ["============ test session starts ============", f"collected {len(names)} items", ""]
    for name in names:
        lines.append(f"tests/test_{path.stem}.py::{name} PASSED")
    if failing:
        lines += [
            f"tests/test_{path.stem}.py::{names[-1]} FAILED",
            "",
            "=================== FAILURES ===================",
            f"    def {names[-1]}():",
            f">       assert load('{path.stem}.cfg') == expected",
            "E       AssertionError: assert {'a': 1} == {'a': 2}",
            f"=========== 1 failed, {len(names) - 1} passed in 0.{rng.randint(10, 99)}s ===========",
        ]
    else:
        lines.append(f"=========== {len(names)} passed in 0.{rng.randint(10, 99)}s ===========")
    return "\n".join(lines)


def _listing(rng: random.Random, files: tuple[Path, ...]) -> str:
    chosen = rng.sample(files, min(len(files), rng.randint(8, 30)))
    return "\n".join(f"-rw-r--r-- 1 dev dev {p.stat().st_size:>8} Nov 30 12:{rng.randint(10, 59)} {p.name}" for p in sorted(chosen))


def _grep(rng: random.Random, path: Path, text: str) -> tuple[str, str]:
    lines = text.splitlines()
    word = rng.choice(("def ", "return ", "import ", "class ", "raise "))
    hits = [f"{path.name}:{i + 1}:{line}" for i, line in enumerate(lines) if word in line][:60]
    return word.strip(), "\n".join(hits) or "(no matches)"


@public
def generate_session(chars: int = 100_000, seed: int = 0) -> list[Message]:
    """An agent session of about ``chars`` characters (at least one full turn).

    Returns:
        a history at a turn boundary: system prompt, the task, then turns of tool calls
        (read_file, run, grep, screenshot) with results, errors and answers.
    """
    rng = random.Random(seed)
    files = _stdlib_files()
    messages = [
        Message("system", (Text("You are a coding agent. Work in small steps and verify each change."),), id=f"s{seed}-sys"),
        Message("user", (Text(rng.choice(_TASKS)),), id=f"s{seed}-task"),
    ]
    size = sum(len(m.text) for m in messages)
    turn = call = 0
    while True:
        for _ in range(rng.randint(1, 6)):
            call += 1
            call_id = f"call_{seed}_{call:05d}"
            path = rng.choice(files)
            kind = rng.choices(("read", "run", "grep", "ls", "shot"), weights=(5, 3, 2, 1, 1))[0]
            is_error = False
            content: tuple
            if kind == "read":
                arguments = {"path": str(path.relative_to(path.parents[1]))}
                text = _read(path)
                if rng.random() < 0.1:
                    text, is_error = f"FileNotFoundError: [Errno 2] No such file or directory: '{arguments['path']}.bak'", True
                content = (Text(text),)
                name = "read_file"
            elif kind == "run":
                failing = rng.random() < 0.25
                arguments = {"command": f"python -m pytest tests/test_{path.stem}.py -q"}
                content, is_error, name = (Text(_test_run(rng, path, failing)),), failing, "run"
            elif kind == "grep":
                word, hits = _grep(rng, path, _read(path))
                arguments = {"pattern": word, "path": path.name}
                content, name = (Text(hits),), "grep"
            elif kind == "ls":
                arguments = {"command": "ls -l lib/"}
                content, name = (Text(_listing(rng, files)),), "run"
            else:
                arguments = {"url": f"http://localhost:8000/{path.stem}"}
                content, name = (Text("screenshot of the page"), Image("image/png", _screenshot(rng))), "screenshot"
            thinking = Thinking(f"I should look at {path.name} next.")
            messages.append(Message("assistant", (thinking, Text(f"Let me {name} {path.name}."), ToolCall(call_id, name, arguments)), id=f"s{seed}-a{call}"))
            messages.append(Message("tool", (ToolResult(call_id, content, is_error),), id=f"s{seed}-t{call}"))
            size += sum(len(b.text) for b in content if isinstance(b, Text)) + 80
        turn += 1
        messages.append(Message("assistant", (Text(f"Step {turn} done: the change is in place and the checks I ran pass."),), id=f"s{seed}-f{turn}"))
        if size >= chars:
            return messages
        messages.append(Message("user", (Text(rng.choice(_FOLLOW_UPS)),), id=f"s{seed}-u{turn}"))
