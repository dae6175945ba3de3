"""``glyphpack import``: session files, folders of them, or every harness home on this machine."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import GlyphpackError, UsageError
from .common import FORMAT_NAMES, WORKSPACE_HELP, Command, _shown

if TYPE_CHECKING:
    from .._history.imported import ImportedSession

#: The files ``glyphpack import`` takes from a folder: what harnesses write sessions as.
SESSION_SUFFIXES = (".jsonl", ".json", ".traj", ".md", ".db")


def cmd_import(args: argparse.Namespace) -> int:
    """Import, or keep in step, each session file; a folder is walked for session files.
    Each file is its own: one that cannot be read, or whose past changed, is reported on
    its line and the rest go on (exit status 1 when any failed). Ctrl-C stops it between
    or in a file, saying how many were done (exit status 130)."""
    from .._history.store import Workspace

    files = _session_files(args.files) if args.files else _harness_session_files()
    if args.conversation and len(files) != 1:
        raise UsageError(f"--conversation names one conversation, for one file; {len(files)} files were given")
    failed = done = 0
    with Workspace(args.workspace) as workspace:
        try:
            for done, name in enumerate(files):
                if len(files) > 1:
                    print(f"[{done + 1}/{len(files)}] ", end="")
                failed += not _import_file(workspace, name, args)
        except KeyboardInterrupt:
            print(f"\nglyphpack: import interrupted after {done} of {len(files)} files (each one done is kept; "
                  "run the same import again to go on)", file=sys.stderr)
            return 130
    if len(files) > 1:
        print(f"{len(files)} files: {len(files) - failed} imported or in step, {failed} not")
    return 1 if failed else 0


def _import_file(workspace: Any, name: str, args: argparse.Namespace) -> bool:
    """Sync the sessions of file ``name`` into ``workspace``, a line or more each; False
    when it could not be read or a session of it was refused."""
    from .._importers.registry import conversation_names, import_sessions, session_source

    try:
        sessions = import_sessions(name, format=args.format)
        if args.conversation and len(sessions) != 1:
            raise UsageError(f"--conversation names one conversation, and {name} holds {len(sessions)} sessions")
    except GlyphpackError as exc:
        print(f"{name}: not imported: {exc}")
        return False
    synced = []
    for session_name, session in sessions:
        label = name if len(sessions) == 1 else f"{name} [{session_name}]"
        source = session_source(Path(name), session_name)
        candidates = list(dict.fromkeys(_conversation_id(n) for n in conversation_names(Path(name), session_name)))
        synced.append(_sync_session(workspace, label, session, args.conversation or candidates, source))
    return all(synced)


def _sync_session(workspace: Any, label: str, session: ImportedSession, names: str | list[str], source: str) -> bool:
    """Keep a conversation in step with one imported session from ``source`` (the one
    named, or the first of ``names`` free or its own: ``Workspace.name_for``), saying
    what was done on a line (and the import's report); False when it was refused."""
    try:
        conversation = names if isinstance(names, str) else workspace.name_for(source, names)
        state, saved = workspace.sync_session(session, conversation, source=source)
    except GlyphpackError as exc:
        print(f"{label}: not imported: {exc}")
        return False
    if state == "unchanged":
        print(f"{label} -> {workspace.location}: conversation {conversation}: unchanged")
        return True
    verb = "imported as" if state == "new" else "appended to"
    print(f"{label} -> {workspace.location}: {verb} conversation {conversation}" + (f" ({session.title})" if session.title else ""))
    for line in session.report.lines():
        print(f"  {line}")
    print(f"  transcripts: {', '.join(f'{t.agent} ({len(t.messages):,} messages)' for t in saved)}")
    return True


def _harness_session_files() -> list[str]:
    """The session files of every harness home on this machine (``homes.find_sessions``),
    each home said on a line; ``UsageError`` when there is none."""
    from .._importers.homes import HOMES, find_sessions
    from .._importers.registry import read_with_its_session

    found = find_sessions()
    if not found:
        raise UsageError(f"no harness sessions found in this machine's harness homes ({', '.join(sorted({h.where for h in HOMES})[:6])}, ...); "
                         "name the session files or folders to import")
    files: list[str] = []
    for harness in found:
        sessions = [str(p) for p in harness.files if not read_with_its_session(p, set(harness.files))]
        print(f"{harness.harness}: {len(sessions):,} session file(s) in {_shown(str(harness.home))}")
        files += sessions
    return files


def _session_files(paths: Sequence[str]) -> list[str]:
    """The files named, with each folder replaced by the session files under it (any
    depth, sorted); ``UsageError`` for a path that does not exist or a folder with none."""
    from .._importers.registry import read_with_its_session

    found: list[str] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files = {p for p in path.rglob("*") if p.is_file() and p.suffix in SESSION_SUFFIXES and not p.name.startswith(".")}
            inside = sorted(str(p) for p in files if not read_with_its_session(p, files))
            if not inside:
                raise UsageError(f"{name} holds no session files ({', '.join(SESSION_SUFFIXES)})")
            found.extend(inside)
        elif path.exists():
            found.append(name)
        else:
            raise UsageError(f"{name}: no such file or folder")
    return found


def _conversation_id(name: str) -> str:
    """A conversation id from a session's name (``import_sessions``), with what an id
    cannot hold replaced."""
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in name).strip("-.")
    return (cleaned or "imported")[:128]


def _import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="*", metavar="FILE", help="session files, or folders of them (walked at any depth): a conversation imported before gets what is new appended; "
                   "none: every harness home on this machine (Claude Code, Codex, Gemini CLI, Copilot CLI, Kimi CLI, pi, Goose, Crush, Cline, Roo Code, Kilo Code)")
    p.add_argument("--workspace", required=True, metavar="WS", help=WORKSPACE_HELP + " (created if missing)")
    p.add_argument("--format", choices=FORMAT_NAMES, help="the files' format (default: detected from each file's content)")
    p.add_argument("--conversation", metavar="ID", help="the conversation id, for one file (default: the file name)")


COMMANDS = (
    Command("import", "import session files (Claude Code, pi, Codex, OpenHands, SWE-agent, mini-swe-agent, aider, Gemini CLI, provider lists) into a workspace",
            _import_arguments, cmd_import),
)
