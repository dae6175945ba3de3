"""A small coding agent on glyphpack: it reads, lists, greps and runs the tests of a
directory, with its history kept, compacted and resumable by a glyphpack session.

    export ANTHROPIC_API_KEY=...    # or OPENAI_API_KEY, or GEMINI_API_KEY
    python examples/agent.py --api anthropic --model claude-sonnet-4-5 \\
        --workspace runs/ws --conversation task-1 --root path/to/project "make the failing test pass"

Run it again with the same workspace and conversation to resume (a crashed run
retries its last turn); with no task it continues where it stopped. The tests run it
against a local fake server through the same SDK clients (tests/test_session_sdk.py).
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


def call_model(client: Any, api: str, request: dict[str, Any]) -> Any:
    """One create call through the official SDK."""
    if api == "anthropic":
        return client.messages.create(**request, max_tokens=4096)
    if api == "openai-chat":
        return client.chat.completions.create(**request)
    if api == "openai-responses":
        return client.responses.create(**request)
    return client.models.generate_content(**request)


def too_long(error: Exception) -> bool:
    """Whether ``error`` is a rejection compaction can answer (HTTP 400 or 413)."""
    status = getattr(error, "status_code", None) or getattr(error, "code", None)
    return status in (400, 413)


def run(session: glyphpack.Session, client: Any, api: str, root: Path, *, max_turns: int = 50) -> str:
    """The agent loop; returns the final answer's text."""
    tools = tool_schemas(api)
    for _ in range(max_turns):
        request = session.request(api, **tools)
        try:
            response = call_model(client, api, request)
        except Exception as error:  # each SDK has its own error classes; all carry the status
            if not too_long(error):
                raise
            session.recover(error)  # compacts to fit; raises rather than loop
            continue
        answer = session.add_response(response)
        if not session.pending_calls:
            return answer.text
        session.add_tool_results({call.id: run_tool(root, call.name, call.arguments) for call in session.pending_calls})
    raise RuntimeError(f"no answer after {max_turns} model calls")


#: Where each SDK looks for its key.
KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai-chat": "OPENAI_API_KEY",
                 "openai-responses": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}


def make_client(api: str) -> Any:
    if api == "anthropic":
        import anthropic

        return anthropic.Anthropic()
    if api in ("openai-chat", "openai-responses"):
        import openai

        return openai.OpenAI()
    from google import genai

    return genai.Client()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task", nargs="?", help="what to do (omit to resume)")
    parser.add_argument("--api", choices=("anthropic", "openai-chat", "openai-responses", "gemini"), default="anthropic")
    parser.add_argument("--model", default="claude-sonnet-4-5")
    parser.add_argument("--workspace", default="runs/ws")
    parser.add_argument("--conversation", default="task-1")
    parser.add_argument("--root", default=".", help="the project directory the tools work in")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    if not os.environ.get(KEY_VARIABLES[args.api]) and not (args.api == "gemini" and os.environ.get("GOOGLE_API_KEY")):
        parser.error(f"set {KEY_VARIABLES[args.api]} to your key first")
    with glyphpack.open_session(args.workspace, args.conversation, "coder", model=args.model, system=SYSTEM) as session:
        if args.task:
            session.add_user(args.task)
        elif session.state == "empty":
            parser.error("a new conversation needs a task")
        elif session.state == "clean" and not session.pending_calls:
            parser.error("the conversation's last turn finished: give a new task to continue")
        print(run(session, make_client(args.api), args.api, root))
        print(json.dumps({"messages": len(session.messages), "estimate": session.estimate()}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
