"""A small coding agent on glyphpack: it reads, lists, greps and runs the tests of a
directory, with its history kept, compacted and resumable by a glyphpack session.

    python examples/agent.py --fake --root glyphpack "what does this package do?"

runs offline: the official SDK client talks to glyphpack's fake provider (it checks
each request as the provider would, counts tokens its own way and rejects what is too
long in the provider's words), which reads the project's files one per turn in a small
window, so the whole loop shows, compaction and recovery included. With a key:

    export ANTHROPIC_API_KEY=...    # or OPENAI_API_KEY, or GEMINI_API_KEY
    python examples/agent.py --api anthropic --model claude-sonnet-4-5 \\
        --workspace runs/ws --conversation task-1 --root path/to/project "make the failing test pass"

Run it again with the same workspace and conversation to resume (a crashed run
retries its last turn); with no task it continues where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import glyphpack

SYSTEM = (
    "You are a careful coding agent working in one project directory. Use the tools to look "
    "before you change anything; run the tests to check. Answer briefly when done."
)

#: The tools, once; each API's schema is built from this.
TOOLS: list[dict[str, Any]] = [
    {"name": "read_file", "description": "Read a text file of the project.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "list_dir", "description": "List a directory of the project.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "grep", "description": "Lines of the project's files containing a string.",
     "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}},
    {"name": "run_tests", "description": "Run the project's tests (python -m pytest -q).",
     "parameters": {"type": "object", "properties": {}}},
]

MAX_OUTPUT = 50_000  # characters of one tool's output


def tool_schemas(api: str) -> dict[str, Any]:
    """The tools as ``api``'s create call takes them (keyword arguments)."""
    if api == "anthropic":
        return {"tools": [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in TOOLS]}
    if api == "openai-chat":
        return {"tools": [{"type": "function", "function": t} for t in TOOLS]}
    if api == "openai-responses":
        return {"tools": [{"type": "function", **t} for t in TOOLS]}
    return {"config": {"tools": [{"function_declarations": TOOLS}]}}


def inside(root: Path, relative: str) -> Path:
    path = (root / relative).resolve()
    if path != root and root not in path.parents:
        raise ValueError(f"{relative!r} is outside the project")
    return path


def run_tool(root: Path, name: str, arguments: dict[str, Any]) -> str:
    """One tool call's output (errors as text: the model reads them and adapts)."""
    try:
        if name == "read_file":
            text = inside(root, arguments["path"]).read_text(errors="replace")
        elif name == "list_dir":
            entries = sorted(inside(root, arguments.get("path", ".")).iterdir())
            text = "\n".join(p.name + ("/" if p.is_dir() else "") for p in entries)
        elif name == "grep":
            pattern = str(arguments["pattern"])
            hits = []
            for path in sorted(root.rglob("*")):
                if path.is_file() and ".git" not in path.parts:
                    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                        if pattern in line:
                            hits.append(f"{path.relative_to(root)}:{number}: {line}")
            text = "\n".join(hits) or "(no matches)"
        elif name == "run_tests":
            done = subprocess.run([sys.executable, "-m", "pytest", "-q"], cwd=root, capture_output=True, text=True, timeout=600)
            text = f"exit code {done.returncode}\n{done.stdout}{done.stderr}"
        else:
            text = f"error: no tool {name!r}"
    except (OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
        text = f"error: {exc}"
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + f"\n[... {len(text) - MAX_OUTPUT} more characters]"


def run(session: glyphpack.Session, client: Any, api: str, root: Path, *, max_turns: int = 50) -> str:
    """The agent loop; returns the final answer's text. ``session.call`` builds the
    request (compacting at the threshold), sends it through the SDK, recovers from a
    "too long" rejection and adds the response."""
    tools = tool_schemas(api)
    for _ in range(max_turns):
        answer = session.call(client, api=api, **tools)
        if not session.pending_calls:
            return answer.text
        # glyphpack_recall calls (what compaction put away, asked back) the session answers itself.
        own = [call for call in session.pending_calls if call.name != glyphpack.RECALL_TOOL]
        session.add_tool_results({call.id: run_tool(root, call.name, call.arguments) for call in own})
    raise RuntimeError(f"no answer after {max_turns} model calls")


#: Where each SDK looks for its key.
KEY_VARIABLES = {"anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"), "openai-chat": ("OPENAI_API_KEY",),
                 "openai-responses": ("OPENAI_API_KEY",), "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
#: The fake's window, in its own tokens: small, so a few files fill it.
FAKE_WINDOW = 24_000


def make_client(api: str) -> Any:
    if api == "anthropic":
        import anthropic

        return anthropic.Anthropic()
    if api in ("openai-chat", "openai-responses"):
        import openai

        return openai.OpenAI()
    from google import genai

    return genai.Client()


def fake_client(api: str, root: Path) -> Any:
    """The SDK client of ``api`` wired to a fake model that lists the project, reads its
    Python files one per turn (up to 12) and answers with what it read."""
    from glyphpack.testing import FakeModel, Turn

    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if ".git" not in p.parts)[:12]
    script = [Turn(text="Looking around first.", calls=(("list_dir", {"path": "."}),))]
    script += [Turn(text=f"Reading {name}.", calls=(("read_file", {"path": name}),)) for name in files]
    script.append(Turn(text=f"I read {len(files)} files: {', '.join(files) or 'none'}."))
    return FakeModel(script, limit=FAKE_WINDOW).client(api)


def show(report: glyphpack.RequestReport) -> None:
    """One line per request on stderr: its size, and what compaction did first."""
    line = f"request: {report.messages} messages, ~{report.tokens:,} tokens"
    if report.compaction is not None:
        done = report.compaction.report
        rungs = ", ".join(r.rung for r in done.rungs if r.freed > 0) or "nothing freed"
        line += f"; compacted {done.tokens_before:,} -> {done.tokens_after:,} ({rungs})"
    print(line, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task", nargs="?", help="what to do (omit to resume)")
    parser.add_argument("--api", choices=tuple(KEY_VARIABLES), default="anthropic")
    parser.add_argument("--model", default="claude-sonnet-4-5")
    parser.add_argument("--workspace", default="runs/ws")
    parser.add_argument("--conversation", default="task-1")
    parser.add_argument("--root", default=".", help="the project directory the tools work in")
    parser.add_argument("--summarizer", metavar="MODEL", help="the model that summarizes when pages cannot fit (default: --model)")
    parser.add_argument("--fake", action="store_true", help="no key, no network: a local fake provider answers")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    if not root.is_dir():
        parser.error(f"--root {args.root}: no such directory")
    if not args.fake and not any(os.environ.get(name) for name in KEY_VARIABLES[args.api]):
        parser.error(f"set {' or '.join(KEY_VARIABLES[args.api])} to your key first, or pass --fake")
    # The fake's window is small; the session and the summarizer are told so (a real model's is its own).
    window = {"context_window": FAKE_WINDOW} if args.fake else {}
    try:
        client = fake_client(args.api, root) if args.fake else make_client(args.api)
        summarizer = glyphpack.sdk_summarizer(client, args.summarizer or args.model, api=args.api,
                                              window=FAKE_WINDOW if args.fake else None)
        with glyphpack.open_session(args.workspace, args.conversation, "coder", model=args.model, system=SYSTEM,
                                    summarizer=summarizer, recall=True, **window) as session:
            if args.task:
                session.add_user(args.task)
            elif session.state == "empty":
                parser.error("a new conversation needs a task")
            elif session.state == "answered" and not session.pending_calls:
                parser.error("the conversation's last turn finished: give a new task to continue")
            session.on_request = show
            print(run(session, client, args.api, root))
            print(json.dumps({"messages": len(session.messages), "estimate": session.estimate()}), file=sys.stderr)
    except glyphpack.GlyphpackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # the SDK's own errors (no network, a bad key, a refusal): one line, no traceback
        if type(exc).__module__.split(".")[0] not in ("anthropic", "openai", "google", "httpx", "httpx2"):
            raise
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
