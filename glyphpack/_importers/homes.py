"""Where harnesses keep their sessions on this machine, for ``glyphpack import`` with no
path: each harness's home (an environment variable first where the harness reads one),
the session files under it as the harness lays them out, and nothing else (a
subagent's file, a task's companions are read with their session).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

#: VS Code and its forks, where Cline-family extensions keep their tasks (Linux, macOS,
#: Windows roaming folders), and the extensions' ids.
_EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")
_EDITOR_ROOTS = (".config", "Library/Application Support", "AppData/Roaming")
_CLINE_FAMILY = ("saoudrizwan.claude-dev", "rooveterinaryinc.roo-cline", "kilocode.kilo-code")


@dataclasses.dataclass(frozen=True)
class Home:
    """A harness's home: ``where`` relative to the user's home (or the folder its
    ``variable`` names), and the globs its session files match under it."""

    harness: str
    where: str
    patterns: tuple[str, ...]
    variable: str | None = None


HOMES: tuple[Home, ...] = (
    Home("Claude Code", ".claude", ("projects/*/*.jsonl",), "CLAUDE_CONFIG_DIR"),
    Home("Codex", ".codex", ("sessions/*/*/*/rollout-*.jsonl", "archived_sessions/rollout-*.jsonl"), "CODEX_HOME"),
    Home("Gemini CLI", ".gemini", ("tmp/*/chats/session-*.json",)),
    Home("Copilot CLI", ".copilot", ("session-state/*/events.jsonl", "session-state/*.jsonl", "history-session-state/*.json")),
    # Kimi CLI: a session's context as a file of its own (to 0.4x), else in the session's folder.
    Home("Kimi CLI", ".kimi", ("sessions/*/*.jsonl", "sessions/*/*/context.jsonl")),
    Home("pi", ".pi/agent", ("sessions/*/*.jsonl",)),
    Home("Goose", ".local/share/goose", ("sessions/sessions.db", "sessions/*.jsonl")),
    Home("Cline CLI", ".cline/data", ("tasks/*/api_conversation_history.json",)),
    *(
        Home(f"{extension} in {editor}", f"{root}/{editor}/User/globalStorage/{extension}", ("tasks/*/api_conversation_history.json",))
        for root in _EDITOR_ROOTS for editor in _EDITORS for extension in _CLINE_FAMILY
    ),
)


@dataclasses.dataclass(frozen=True)
class Found:
    """One harness's sessions found: its name, its home, the session files (sorted)."""

    harness: str
    home: Path
    files: tuple[Path, ...]


def find_sessions(home: Path | None = None, environ: Mapping[str, str] | None = None, here: Path | None = None) -> list[Found]:
    """Every harness home on this machine that holds sessions, with its session files:
    ``home`` is the user's home (default ``Path.home()``), ``environ`` the environment
    whose variables move a home (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``), ``here`` the
    folder whose Crush project database (``.crush/crush.db``) is looked for too, with the
    projects Crush lists in its data folder."""
    home = Path.home() if home is None else home
    environ = os.environ if environ is None else environ
    found = []
    for entry in HOMES:
        root = Path(environ[entry.variable]) if entry.variable and environ.get(entry.variable) else home / entry.where
        files = sorted({path for pattern in entry.patterns for path in _matches(root, pattern)})
        if files:
            found.append(Found(entry.harness, root, tuple(files)))
    crush = sorted(set(_crush_databases(home, environ, Path.cwd() if here is None else here)))
    if crush:
        found.append(Found("Crush", crush[0].parent, tuple(crush)))
    return found


def _matches(root: Path, pattern: str) -> Iterator[Path]:
    try:
        yield from (path for path in root.glob(pattern) if path.is_file() and not path.name.startswith("."))
    except OSError:  # a home that cannot be read is one with nothing found
        return


def _crush_databases(home: Path, environ: Mapping[str, str], here: Path) -> Iterator[Path]:
    """Crush keeps a database per project (``PROJECT/.crush/crush.db``) and lists the
    projects it ran in (``projects.json`` in its data folder, each with its data folder)."""
    if Path(here, ".crush", "crush.db").is_file():
        yield Path(here, ".crush", "crush.db").resolve()
    data = Path(environ.get("XDG_DATA_HOME") or home / ".local" / "share", "crush", "projects.json")
    try:
        listed = json.loads(data.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    projects = listed.get("projects") if isinstance(listed, dict) else None
    for project in projects if isinstance(projects, list) else []:
        folder = project.get("data_dir") if isinstance(project, dict) else None
        if isinstance(folder, str) and Path(folder, "crush.db").is_file():
            yield Path(folder, "crush.db").resolve()
